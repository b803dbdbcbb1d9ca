package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

// `baton events --follow` with several addresses keeps to one node: each
// node numbers its own feed, and its polls, sent round robin, passed one
// node's Seq to the other, which answered with all it kept: on a quiet
// 3-node cluster one grant and one release were printed 20 times each in
// 10 s (breaker report of 2026-12-05). Two nodes that are not a cluster
// make it plain: the grant on the first is printed once, and once the
// first is gone the second's events follow.
func TestEventsFollowKeepsToOneNode(t *testing.T) {
	a := startServeAt(t, testproc.FreeAddr(t, "127.0.61.10"), t.TempDir(), nil)
	b := startServeAt(t, testproc.FreeAddr(t, "127.0.61.11"), t.TempDir(), nil)
	cmd, out, errb, done := startEventsFollow(t, "one", api.EnvAddr+"="+a.url+","+b.url)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		<-done
	}()
	printed := func(tok string) int {
		return strings.Count(out.String(), `"token":`+tok+`,`)
	}
	waitPrinted := func(tok string) {
		t.Helper()
		for deadline := time.Now().Add(bound); printed(tok) == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never printed the grant of token %s: stdout %q, stderr %q", tok, out.String(), errb.String())
			}
		}
	}
	code, tok, stderr := runBin(t, []string{api.EnvAddr + "=" + a.url}, "acquire", "one", "--lease", "60s")
	if code != 0 {
		t.Fatalf("acquire: %d %q", code, stderr)
	}
	tok = strings.TrimSpace(tok)
	waitPrinted(tok)
	time.Sleep(6 * followInterval) // polls that went to the other node replayed it
	if n := printed(tok); n != 1 {
		t.Fatalf("the grant of token %s printed %d times, want once:\n%s", tok, n, out.String())
	}
	if code := a.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	code, tok2, stderr := runBin(t, []string{api.EnvAddr + "=" + b.url}, "acquire", "one", "--lease", "60s")
	if code != 0 {
		t.Fatalf("acquire on the second node: %d %q", code, stderr)
	}
	waitPrinted(strings.TrimSpace(tok2))
	if n := printed(tok); n != 1 {
		t.Fatalf("after the move to the second node, the first node's grant printed %d times, want once:\n%s", n, out.String())
	}
}
