package main

// What a new user meets first on the command line (issue 16): help,
// version, the cluster and events commands, baton run's messages. Through
// the built binary, as a user runs it.

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

// runBin runs the built baton with args in a clean environment plus env.
func runBin(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	needBinary(t)
	return runBinary(t, batonBin, env, args...)
}

func runBinary(t *testing.T, bin string, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv(env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return code, o.String(), e.String()
}

func TestHelpOnEveryCommand(t *testing.T) {
	defaultRE := regexp.MustCompile(`\(default`)
	for _, cmd := range []string{"serve", "acquire", "release", "renew", "status", "run", "cluster", "events", "version"} {
		for _, args := range [][]string{{cmd, "--help"}, {cmd, "-h"}, {"help", cmd}} {
			code, stdout, stderr := runBin(t, nil, args...)
			if code != 0 || stderr != "" {
				t.Fatalf("baton %v: exit %d, stderr %q", args, code, stderr)
			}
			if !strings.HasPrefix(stdout, "Usage: baton "+cmd) {
				t.Fatalf("baton %v: does not start with a synopsis:\n%s", args, stdout)
			}
			if strings.Count(stdout, "\nExample:\n  baton ")+strings.Count(stdout, "\nExample:\n  TOKEN=$(baton ") != 1 {
				t.Fatalf("baton %v: no single example:\n%s", args, stdout)
			}
			if strings.Contains(stdout, "Exit codes:") || strings.Contains(stdout, "baton cluster                        show") && cmd != "cluster" {
				t.Fatalf("baton %v: repeats the global help:\n%s", args, stdout)
			}
			for _, line := range strings.Split(stdout, "\n") {
				if len(defaultRE.FindAllString(line, -1)) > 1 {
					t.Fatalf("baton %v: a default said twice: %q", args, line)
				}
			}
		}
	}
	code, stdout, _ := runBin(t, nil, "--help")
	if code != 0 || !strings.Contains(stdout, "baton events [--follow]") || !strings.Contains(stdout, "Exit codes:") {
		t.Fatalf("baton --help: %d\n%s", code, stdout)
	}
	// baton run without -- says to add it (and a usage error is exit 2).
	code, _, stderr := runBin(t, nil, "run", "k", "make", "-j4")
	if code != exitUsage || !strings.Contains(stderr, "add -- before COMMAND: baton run k [flags] -- make -j4") {
		t.Fatalf("run without --: %d %q", code, stderr)
	}
}

func TestVersion(t *testing.T) {
	needBinary(t)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, stderr := runBin(t, nil, args...)
		want := regexp.MustCompile(`^baton \S+\ncommit \S+\n` + regexp.QuoteMeta(runtime.Version()) + `\n$`)
		if code != 0 || stderr != "" || !want.MatchString(stdout) {
			t.Fatalf("baton %v: %d %q %q", args, code, stdout, stderr)
		}
	}
	// A release build sets version and commit with -ldflags -X, as the
	// Dockerfile and the README's go build line do.
	bin := filepath.Join(t.TempDir(), "baton")
	ld := "-X github.com/baton-io/baton/internal/buildinfo.version=v9.8.7 -X github.com/baton-io/baton/internal/buildinfo.commit=abc123"
	if out, err := exec.Command("go", "build", "-ldflags", ld, "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	code, stdout, _ := runBinary(t, bin, nil, "version")
	if code != 0 || stdout != "baton v9.8.7\ncommit abc123\n"+runtime.Version()+"\n" {
		t.Fatalf("release build: %d %q", code, stdout)
	}
	// The node says the same in GET /cluster.
	n := startServeBin(t, bin)
	res, err := http.Get(n.url + "/cluster")
	if err != nil {
		t.Fatal(err)
	}
	var v api.ClusterView
	err = json.NewDecoder(res.Body).Decode(&v)
	res.Body.Close()
	if err != nil || v.Build != (api.Build{Version: "v9.8.7", Commit: "abc123", Go: runtime.Version()}) {
		t.Fatalf("GET /cluster build: %+v %v", v.Build, err)
	}
	code, stdout, stderr := runBin(t, []string{api.EnvAddr + "=" + n.url}, "cluster")
	if code != 0 || !strings.Contains(stdout, "version:    v9.8.7 (commit abc123") || !strings.Contains(stdout, n.url) {
		t.Fatalf("baton cluster: %d %q %q", code, stdout, stderr)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
}

// startServeBin is startServe with another binary.
func startServeBin(t *testing.T, bin string) *serveProc {
	t.Helper()
	saved := batonBin
	batonBin = bin
	defer func() { batonBin = saved }()
	return startServe(t, t.TempDir(), nil)
}

// baton events prints a node's events, filtered by key; --follow keeps
// printing until SIGINT.
func TestEventsCommand(t *testing.T) {
	n := startServe(t, t.TempDir(), nil)
	env := []string{api.EnvAddr + "=" + n.url}
	for _, k := range []string{"a", "b", "a"} {
		code, tok, stderr := runBin(t, env, "acquire", k)
		if code != 0 {
			t.Fatalf("acquire: %d %q", code, stderr)
		}
		if code, _, stderr := runBin(t, env, "release", k, strings.TrimSpace(tok)); code != 0 {
			t.Fatalf("release: %d %q", code, stderr)
		}
	}
	code, stdout, stderr := runBin(t, env, "events", "--key", "a")
	if code != 0 || strings.Count(stdout, `grant      "a"`) != 2 || strings.Count(stdout, `release    "a"`) != 2 || strings.Contains(stdout, `"b"`) {
		t.Fatalf("events --key a: %d %q %q", code, stdout, stderr)
	}
	cmd := exec.Command(batonBin, "events", "--follow", "--json", "--key", "c")
	cmd.Env = cleanEnv(env...)
	out := &syncBuf{}
	cmd.Stdout = out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if code, _, stderr := runBin(t, env, "acquire", "c"); code != 0 {
		t.Fatalf("acquire: %d %q", code, stderr)
	}
	deadline := time.Now().Add(bound)
	for !strings.Contains(out.String(), `"kind":"grant"`) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("events --follow never printed the grant: %q", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := <-done; err != nil {
		t.Fatalf("events --follow after SIGINT: %v", err)
	}
	var ev api.Event
	if err := json.Unmarshal([]byte(strings.SplitN(out.String(), "\n", 2)[0]), &ev); err != nil || ev.Key != "c" || ev.Kind != api.EventGrant {
		t.Fatalf("--json line: %+v %v", ev, err)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// A lock lost because the node stopped answering (SIGSTOP): baton run says
// so once, without Go's "context deadline exceeded", and exits 4 as soon
// as COMMAND has ended: it does not ask the paused node to release a lock
// that is no longer its own (it did, and waited out the release's 5 s of
// retries first).
func TestRunLostMessage(t *testing.T) {
	n := startServe(t, t.TempDir(), nil)
	p := startCLI(t, n.url, false, "run", "--lease", "1.5", "--kill-after", "1s", "k", "--",
		"sh", "-c", `echo ready; while :; do sleep 0.05; done`)
	p.stdout.waitFor(t, "ready")
	if err := n.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	testproc.WaitStopped(t, n.cmd.Process.Pid)
	defer n.cmd.Process.Signal(syscall.SIGCONT)
	p.stderr.waitFor(t, "lock lost")
	lost := time.Now()
	select {
	case code := <-p.done:
		if code != exitLost {
			t.Fatalf("code %d, want %d; stderr %q", code, exitLost, p.stderr.String())
		}
		// sh ends at once on SIGTERM: 4 s is room for a loaded machine,
		// not for the 5 s and more a release to the paused node took.
		if d := time.Since(lost); d > 4*time.Second {
			t.Fatalf("baton run exited %v after saying the lock was lost: it waited on the paused node", d)
		}
	case <-time.After(bound):
		t.Fatal("baton run did not end after the node stopped answering")
	}
	msg := p.stderr.String()
	t.Logf("baton run said: %s", msg)
	if strings.Count(msg, "lock lost") != 1 || strings.Contains(msg, "context deadline exceeded") || !strings.Contains(msg, "no node answered in time") {
		t.Fatalf("lost-lock message: %q", msg)
	}
	_ = n.cmd.Process.Signal(syscall.SIGCONT)
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// The README's shell recipe: take the lock as text, release it from a trap.
// With Accept: text/plain nothing but the script's own output is printed.
func TestReadmeShellRecipe(t *testing.T) {
	needCurl(t)
	n := startServe(t, t.TempDir(), nil)
	script := `set -e
token=$(curl -sf -X POST -H 'Accept: text/plain' "$URL/locks/nightly-backup?lease=600&wait=30") || exit 1
trap 'curl -sf -X DELETE -H "Lock-Token: $token" -H "Accept: text/plain" $URL/locks/nightly-backup' EXIT
echo "backup under $token"
`
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = cleanEnv("URL=" + n.url)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 1 || !regexp.MustCompile(`^backup under [1-9][0-9]*$`).MatchString(lines[0]) {
		t.Fatalf("the recipe printed %q", out)
	}
	if st := n.status("nightly-backup"); st.Holder != nil {
		t.Fatalf("the trap did not release: %+v", st)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// A newcomer writes the client's flags before the command, as with git's
// global options: `baton --addr URL status` was answered `unknown command
// "--addr"` and the whole usage, which does not say what is wrong. It says
// where the flags go instead (and still exits 2).
func TestFlagsBeforeTheCommand(t *testing.T) {
	code, stdout, stderr := runBin(t, nil, "--addr", "http://127.0.0.1:1", "status", "k")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "flags come after the command: baton status --addr http://127.0.0.1:1 k") {
		t.Fatalf("baton --addr URL status k: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, _, stderr = runBin(t, nil, "--nonsense")
	if code != exitUsage || !strings.Contains(stderr, `unknown command "--nonsense"`) {
		t.Fatalf("baton --nonsense: exit %d, stderr %q", code, stderr)
	}
}

// `baton help COMMAND` for a command there is not is a usage error, as
// `baton COMMAND` is: before, it printed the whole usage on stdout and
// exited 0, as if the help asked for had been given.
func TestHelpOfAnUnknownCommand(t *testing.T) {
	code, stdout, stderr := runBin(t, nil, "help", "acquier")
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, `unknown command "acquier"`) {
		t.Fatalf("baton help acquier: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, stdout, _ := runBin(t, nil, "help"); code != exitOK || !strings.Contains(stdout, "Exit codes:") {
		t.Fatalf("baton help: exit %d, stdout %q", code, stdout)
	}
}
