package web_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodeClient runs the JavaScript client's own tests (web/js/test, with
// node:test) in Node against the baton binary built in TestMain: every
// call and error code, the 408 re-send, cancellation, a two-node cluster
// with kill -9, release retries across a restart, and that baton.d.ts and
// baton-node.d.ts match their modules. They run once per transport
// (BATON_JS_TRANSPORT): fetch (baton.js as browsers use it) and http2
// (baton-node.js, node:http2 over h2c). It fails when Node is missing
// (apt-get install -y nodejs); -short skips it like the browser tests.
func TestNodeClient(t *testing.T) {
	if testing.Short() {
		t.Skip("Node test: -short skips it")
	}
	nodeBin, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the JavaScript client's tests need Node >= 20.10 (apt-get install -y nodejs): %v", err)
	}
	// --test-concurrency is Node 20.10's (Node 18, Debian 12's, refused it
	// as a bad option), and Node 18 has no global crypto that baton.js's
	// acquire uses: say so rather than fail inside node.
	if out, err := exec.Command(nodeBin, "--version").Output(); err != nil || !nodeAtLeast(strings.TrimSpace(string(out)), 20, 10) {
		t.Fatalf("the JavaScript client's tests need Node >= 20.10, %s is %q (%v)", nodeBin, strings.TrimSpace(string(out)), err)
	}
	files, err := filepath.Glob(filepath.Join("js", "test", "*.test.mjs"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files under js/test: %v", err)
	}
	for _, transport := range []string{"fetch", "http2"} {
		t.Run(transport, func(t *testing.T) {
			args := append([]string{"--test", "--test-reporter=spec", "--test-concurrency=2"}, files...)
			cmd := exec.Command(nodeBin, args...)
			cmd.Env = append(os.Environ(), "BATON_BIN="+batonBin, "BATON_JS_TRANSPORT="+transport, "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			t.Logf("BATON_JS_TRANSPORT=%s node %s\n%s", transport, strings.Join(args, " "), out)
			if err != nil {
				t.Fatalf("node --test (transport %s): %v", transport, err)
			}
		})
	}
}

// nodeAtLeast reports whether the version node --version printed ("v20.19.2")
// is at least major.minor.
func nodeAtLeast(v string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(v, "v%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
