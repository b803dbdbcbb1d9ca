package main

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

// `baton events --follow` keeps "printing new events until interrupted"
// (its --help), and its loop resets its cursor when "the node restarted"
// (inspect.go). But a poll that fails while the node restarts ends the
// command: seen by hand, `baton events --key ev --follow` against a
// single node stopped (SIGTERM) and started again a second later exited
// 1 with "service unavailable: GET /events?key=ev&since=…: 2 attempts
// failed, last: http2: client conn not usable", and printed nothing of
// the new run. A follower (etcdctl watch, kubectl logs -f, an
// EventSource) rides out a restart of its node.
func TestEventsFollowSurvivesANodeRestart(t *testing.T) {
	addr := testproc.FreeAddr(t, "127.0.61.9")
	dir := t.TempDir()
	n := startServeAt(t, addr, dir, nil)
	env := []string{api.EnvAddr + "=" + n.url}
	cmd, out, errb, done := startEventsFollow(t, "ev", env...)
	defer func() {
		_ = cmd.Process.Kill()
		<-done
	}()
	grantPrinted := func(tok string) {
		t.Helper()
		deadline := time.Now().Add(bound)
		for !strings.Contains(out.String(), `"token":`+tok) {
			select {
			case err := <-done:
				done <- err
				t.Fatalf("baton events --follow ended (%v) before printing the grant of token %s; stderr %q, stdout %q", err, tok, errb.String(), out.String())
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("baton events --follow never printed the grant of token %s: %q", tok, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	code, tok, stderr := runBin(t, env, "acquire", "ev", "--lease", "1s")
	if code != 0 {
		t.Fatalf("acquire: %d %q", code, stderr)
	}
	grantPrinted(strings.TrimSpace(tok))

	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	time.Sleep(time.Second) // the node is down for a second, as a restart is
	n = startServeAt(t, addr, dir, nil)
	code, tok, stderr = runBin(t, env, "acquire", "ev", "--lease", "1s")
	if code != 0 {
		t.Fatalf("acquire after the restart: %d %q", code, stderr)
	}
	grantPrinted(strings.TrimSpace(tok))
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := <-done; err != nil {
		t.Fatalf("events --follow after SIGINT: %v; stderr %q", err, errb.String())
	}
	done <- nil
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// startEventsFollow starts `baton events --follow --json --key key` with
// env, its output in out and errb; done receives its exit once.
func startEventsFollow(t *testing.T, key string, env ...string) (cmd *exec.Cmd, out, errb *syncBuf, done chan error) {
	t.Helper()
	cmd = exec.Command(batonBin, "events", "--follow", "--json", "--key", key)
	cmd.Env = cleanEnv(env...)
	out, errb = &syncBuf{}, &syncBuf{}
	cmd.Stdout, cmd.Stderr = out, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, out, errb, done
}
