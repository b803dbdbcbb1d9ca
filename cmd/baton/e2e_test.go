package main

// End-to-end tests: the built binary, real processes, real curl. They are
// skipped only under -short.

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

// batonBin is the binary built once by TestMain ("" under -short).
var batonBin string

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == guardCommand {
		// In-process `baton run` (clientMain) starts the guard from the
		// test binary.
		os.Exit(runGuard(os.Args[2:]))
	}
	flag.Parse()
	os.Exit(func() int {
		if !testing.Short() {
			dir, err := os.MkdirTemp("", "baton-e2e-")
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			defer os.RemoveAll(dir)
			batonBin = filepath.Join(dir, "baton")
			out, err := exec.Command("go", "build", "-o", batonBin, ".").CombinedOutput()
			if err != nil {
				fmt.Fprintf(os.Stderr, "building baton: %v\n%s", err, out)
				return 1
			}
		}
		code := m.Run()
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				return 1
			}
		}
		return code
	}())
}

func needBinary(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test: skipped under -short")
	}
}

func needCurl(t *testing.T) {
	t.Helper()
	needBinary(t)
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is required by the end-to-end tests (run with -short to skip them)")
	}
}

// syncBuf collects a process's stderr for failure messages.

// cleanEnv is the test's environment without BATON_* settings, plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BATON_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// serveProc is one running `baton serve`.
type serveProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	dir    string
	stderr *syncBuf
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

// startServe runs `baton serve --listen <free> --data-dir dir args...` with
// env added to a clean environment, and waits until /healthz answers.
func startServe(t *testing.T, dir string, env []string, args ...string) *serveProc {
	t.Helper()
	return startServeAt(t, freeAddr(t), dir, env, args...)
}

// startServeAt is startServe on the address addr (host:port).
func startServeAt(t *testing.T, addr, dir string, env []string, args ...string) *serveProc {
	t.Helper()
	needBinary(t)
	cmd := exec.Command(batonBin, append([]string{"serve", "--listen", addr, "--data-dir", dir}, args...)...)
	cmd.Env = cleanEnv(env...)
	n := &serveProc{t: t, cmd: cmd, url: "http://" + addr, dir: dir, stderr: &syncBuf{}, exited: make(chan struct{})}
	cmd.Stderr = n.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.err = cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() {
		select {
		case <-n.exited:
		default:
			_ = cmd.Process.Kill()
			<-n.exited
		}
		if t.Failed() {
			t.Logf("baton serve stderr:\n%s", n.stderr)
		}
	})
	c := &http.Client{Timeout: time.Second}
	defer c.CloseIdleConnections()
	// Until it answers; the bound only turns a hang into a failure (a
	// start under the race detector on a loaded machine is slow).
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end); {
		select {
		case <-n.exited:
			t.Fatalf("baton serve exited at start (%v):\n%s", n.err, n.stderr)
		default:
		}
		if res, err := c.Get(n.url + "/healthz"); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("baton serve never answered /healthz:\n%s", n.stderr)
	return nil
}

// stop sends SIGTERM and returns the exit code.
func (n *serveProc) stop() int {
	n.t.Helper()
	if err := n.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		n.t.Fatal(err)
	}
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second): // a hang, not a timing check
		n.t.Fatalf("baton serve did not exit after SIGTERM:\n%s", n.stderr)
	}
	var ee *exec.ExitError
	if errors.As(n.err, &ee) {
		return ee.ExitCode()
	}
	if n.err != nil {
		n.t.Fatal(n.err)
	}
	return 0
}

func (n *serveProc) status(key string) api.LockStatus {
	n.t.Helper()
	res, err := http.Get(n.url + "/locks/" + key)
	if err != nil {
		n.t.Fatal(err)
	}
	defer res.Body.Close()
	var st api.LockStatus
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil || res.StatusCode != http.StatusOK {
		n.t.Fatalf("GET /locks/%s: %d %v", key, res.StatusCode, err)
	}
	return st
}

func (n *serveProc) waitWaiters(key string, want int) {
	n.t.Helper()
	var st api.LockStatus
	for range 5000 {
		if st = n.status(key); st.Waiters == want {
			return
		}
		time.Sleep(2 * time.Millisecond)
	}
	n.t.Fatalf("%s: waiters stayed %d, want %d", key, st.Waiters, want)
}

// shell is one `sh -c script` process: lines it prints arrive on out; a
// line written to in lets it go on past a `read`.
type shell struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  chan string
	done chan struct{} // closed when the script has ended
	err  error         // its end, once done is closed
}

func startShell(t *testing.T, script string, env ...string) *shell {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = cleanEnv(env...)
	var stderr syncBuf
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &shell{cmd: cmd, in: in, out: make(chan string, 100), done: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			s.out <- sc.Text()
		}
		close(s.out)
		if err := cmd.Wait(); err != nil {
			s.err = fmt.Errorf("%w; stderr: %s", err, stderr.String())
		}
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Process.Kill()
		<-s.done
	})
	return s
}

// line waits for the next line the script prints (the bound turns a hang
// into a failure).
func (s *shell) line(t *testing.T, what string) string {
	t.Helper()
	select {
	case l, ok := <-s.out:
		if !ok {
			<-s.done
			t.Fatalf("%s: the script ended early: %v", what, s.err)
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: no output", what)
		return ""
	}
}

// silent reports whether the script has printed nothing new (no waiting).
func (s *shell) silent() bool {
	select {
	case <-s.out:
		return false
	default:
		return true
	}
}

func (s *shell) wait(t *testing.T) {
	t.Helper()
	_ = s.in.Close()
	for range s.out {
		t.Error("unexpected output after the last line")
	}
	<-s.done // stdout is closed: the script has ended or is ending
	if s.err != nil {
		t.Fatalf("script failed: %v", s.err)
	}
}

// tokenOf parses "got N".
func tokenOf(t *testing.T, line string) uint64 {
	t.Helper()
	s, ok := strings.CutPrefix(line, "got ")
	n, err := strconv.ParseUint(s, 10, 64)
	if !ok || err != nil || n == 0 || n >= api.MaxToken {
		t.Fatalf("want \"got <token>\", got %q", line)
	}
	return n
}

// contender takes the lock, says so, waits for a line on stdin, releases.
const contender = `set -e
tok=$(curl -sf -XPOST -H "Accept: text/plain" "$URL/locks/shared?lease=30")
echo "got $tok"
read go
curl -sf -XDELETE -H "Lock-Token: $tok" "$URL/locks/shared" >/dev/null
echo released
`

func TestCurlContention(t *testing.T) {
	needCurl(t)
	n := startServe(t, t.TempDir(), nil)
	url := "URL=" + n.url

	first := startShell(t, contender, url)
	t1 := tokenOf(t, first.line(t, "first client"))
	if st := n.status("shared"); st.Holder == nil || st.Holder.Token != t1 {
		t.Fatalf("status %+v, want holder %d", st, t1)
	}

	second := startShell(t, contender, url)
	n.waitWaiters("shared", 1)
	if !second.silent() {
		t.Fatal("the second client got the lock while the first held it")
	}

	// The first releases: its DELETE hands the lock over in the same step.
	_, _ = io.WriteString(first.in, "go\n")
	if l := first.line(t, "first client release"); l != "released" {
		t.Fatalf("first client: %q", l)
	}
	t2 := tokenOf(t, second.line(t, "second client"))
	if t2 <= t1 {
		t.Fatalf("second token %d not above the first %d", t2, t1)
	}
	if st := n.status("shared"); st.Holder == nil || st.Holder.Token != t2 || st.Waiters != 0 {
		t.Fatalf("status %+v, want holder %d", st, t2)
	}
	first.wait(t)

	_, _ = io.WriteString(second.in, "go\n")
	if l := second.line(t, "second client release"); l != "released" {
		t.Fatalf("second client: %q", l)
	}
	second.wait(t)
	if st := n.status("shared"); st.Holder != nil || st.Waiters != 0 {
		t.Fatalf("status at the end %+v", st)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

func TestSigtermPersistsTokensAndRestartContinues(t *testing.T) {
	needCurl(t)
	dir := t.TempDir()
	n := startServe(t, dir, nil)
	url := "URL=" + n.url

	var last uint64
	for i := range 3 {
		out, err := exec.Command("curl", "-sf", "-XPOST", "-H", "Accept: text/plain", fmt.Sprintf("%s/locks/k%d?lease=60", n.url, i)).Output()
		if err != nil {
			t.Fatal(err)
		}
		tk := tokenOf(t, "got "+strings.TrimSpace(string(out)))
		if tk <= last {
			t.Fatalf("token %d not above %d", tk, last)
		}
		last = tk
	}
	// A parked curl: shutdown answers it 503 with Retry-After.
	parked := startShell(t, `curl -s -XPOST -D - -o /dev/null "$URL/locks/k0"; echo done`, url)
	n.waitWaiters("k0", 1)

	if code := n.stop(); code != 0 {
		t.Fatalf("SIGTERM: exit code %d, want 0\n%s", code, n.stderr)
	}
	var headers []string
	for {
		l := parked.line(t, "parked acquire")
		if l == "done" {
			break
		}
		headers = append(headers, strings.ToLower(strings.TrimSpace(l)))
	}
	if len(headers) == 0 || !strings.Contains(headers[0], " 503") {
		t.Fatalf("parked acquire answered %q, want 503", headers)
	}
	retry := false
	for _, h := range headers {
		retry = retry || strings.HasPrefix(h, "retry-after:")
	}
	if !retry {
		t.Fatalf("503 without Retry-After: %q", headers)
	}
	parked.wait(t)

	b, err := os.ReadFile(filepath.Join(dir, "token-hwm"))
	if err != nil {
		t.Fatal(err)
	}
	hwm, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || hwm != last {
		t.Fatalf("token-hwm holds %q, want the last token %d", b, last)
	}

	n2 := startServe(t, dir, nil)
	out, err := exec.Command("curl", "-sf", "-XPOST", "-H", "Accept: text/plain", n2.url+"/locks/k0").Output()
	if err != nil {
		t.Fatal(err)
	}
	if tk := tokenOf(t, "got "+strings.TrimSpace(string(out))); tk <= last {
		t.Fatalf("after restart: token %d not above %d", tk, last)
	}
	if code := n2.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
}

// runServe runs `baton serve` that is expected to refuse to start.
func runServe(t *testing.T, env []string, args ...string) (int, string) {
	t.Helper()
	needBinary(t)
	cmd := exec.Command(batonBin, append([]string{"serve", "--listen", freeAddr(t), "--data-dir", t.TempDir()}, args...)...)
	cmd.Env = cleanEnv(env...)
	var stderr syncBuf
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), stderr.String()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, stderr.String()
	case <-time.After(30 * time.Second): // a hang, not a timing check
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("baton serve %q did not refuse to start:\n%s", args, stderr.String())
		return 0, ""
	}
}

func writeYAML(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "baton.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestInvalidConfigRefusesToStart(t *testing.T) {
	needBinary(t)
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		env  []string
		args []string
		yaml string
		want []string // every one in the message; "FILE" stands for the YAML file's path
	}{
		{name: "env not a duration", env: []string{"BATON_LEASE_MAX=abc"}, want: []string{"lease_max", `"abc"`, "environment variable BATON_LEASE_MAX", "use a duration such as 15s"}},
		{name: "negative flag", args: []string{"--lease-default=-1s"}, want: []string{"lease_default", `"-1s" from flag --lease-default`}},
		{name: "unknown key in YAML", yaml: "lease_default: 5s\nbogus_setting: 1\n", want: []string{"bogus_setting", "FILE"}},
		{name: "bad value in YAML", yaml: "wait_max: soon\n", want: []string{"wait_max", `"soon"`, "file FILE"}},
		{name: "bare number in YAML", yaml: "lease_default: 15\n", want: []string{"lease_default", `"15"`, "file FILE", "use a duration such as 15s"}},
		{name: "bare decimal in YAML", yaml: "failover_timeout: 1.5\n", want: []string{"failover_timeout", `"1.5"`, "file FILE", "use a duration such as 15s"}},
		{name: "bare number in env", env: []string{"BATON_FAILOVER_TIMEOUT=1"}, want: []string{"failover_timeout", `"1"`, "environment variable BATON_FAILOVER_TIMEOUT", "use a duration such as 15s"}},
		{name: "bare number as flag", args: []string{"--heartbeat", "1"}, want: []string{`"1"`, "--heartbeat", "use a duration such as 15s"}},
		{name: "heartbeat too short", args: []string{"--peers", "http://127.0.0.1:7070,http://127.0.0.2:7070", "--advertise", "http://127.0.0.1:7070", "--heartbeat", "1ns"}, want: []string{"heartbeat", "at least 10ms"}},
		{name: "unknown BATON_ variable", env: []string{"BATON_LEASE_DEFALT=3s"}, want: []string{"BATON_LEASE_DEFALT"}},
		{name: "data_dir is a file", args: []string{"--data-dir", notDir}, want: []string{"data_dir", notDir, "from flag --data-dir"}},
		{name: "data_dir under a file", args: []string{"--data-dir", notDir + "/sub"}, want: []string{"data_dir", "not a directory"}},
		{name: "native_listen without a port", args: []string{"--native-listen", "localhost"}, want: []string{"native_listen", `"localhost"`}},
		{name: "native_listen port out of range", env: []string{"BATON_NATIVE_LISTEN=:70000"}, want: []string{"native_listen", `":70000"`}},
		{name: "zero limit in env", env: []string{"BATON_MAX_KEYS=0"}, want: []string{"max_keys", `"0" from environment variable BATON_MAX_KEYS`}},
		{name: "not an integer in YAML", yaml: "max_keys: many\n", want: []string{"max_keys", `"many"`, "file FILE"}},
		{name: "lease_max below lease_default", args: []string{"--lease-default=10m", "--lease-max=1m"}, want: []string{"lease_max", `"10m" from flag --lease-default`}},
		{name: "lease_default above lease_max", args: []string{"--lease-default=2h"}, want: []string{"lease_default: must be at most lease_max", `"2h" from flag --lease-default`}},
		{name: "zero lease_max", args: []string{"--lease-max=0"}, want: []string{"lease_max: must be > 0", `"0" from flag --lease-max`}},
		{name: "listen port out of range", args: []string{"--listen=127.0.0.1:99999"}, want: []string{"listen", `"127.0.0.1:99999" from flag --listen`}},
		{name: "negative poll_timeout in env", env: []string{"BATON_POLL_TIMEOUT=-1s"}, want: []string{"poll_timeout", "BATON_POLL_TIMEOUT"}},
		{name: "poll_timeout below the floor", yaml: "poll_timeout: 1ms\n", want: []string{"poll_timeout: must be 0 (never) or at least 100ms", `"1ms" from file FILE`}},
		{name: "empty entry in a YAML list", yaml: "auth_tokens: [\"\"]\n", want: []string{`auth_tokens: "[\"\"]" from file FILE: entry 1 is empty (remove it)`}},
		{name: "unknown log_format", yaml: "log_format: xml\n", want: []string{"log_format", `"xml" from file FILE`}},
		{name: "unknown flag", args: []string{"--no-such-setting=1"}, want: []string{"no-such-setting"}},
		{name: "unknown fsync mode in YAML", yaml: "fsync: sometimes\n", want: []string{"fsync: must be always, interval or never", `"sometimes" from file FILE`}},
		{name: "bare number fsync_interval in env", env: []string{"BATON_FSYNC_INTERVAL=50"}, want: []string{"fsync_interval", `"50"`, "environment variable BATON_FSYNC_INTERVAL", "use a duration such as 15s"}},
		{name: "fsync_interval above 100ms", args: []string{"--fsync-interval=1s"}, want: []string{"fsync_interval: must be above 0 and at most 100ms", `"1s" from flag --fsync-interval`}},
		{name: "zero fsync_interval", yaml: "fsync_interval: 0\n", want: []string{"fsync_interval", `"0" from file FILE`}},
		{name: "repair_log not a bool", env: []string{"BATON_REPAIR_LOG=maybe"}, want: []string{"repair_log", `"maybe"`, "BATON_REPAIR_LOG", "not true or false"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := c.args
			var file string
			if c.yaml != "" {
				file = writeYAML(t, c.yaml)
				args = append(args, "--config", file)
			}
			code, stderr := runServe(t, c.env, args...)
			if code != 2 {
				t.Fatalf("exit code %d, want 2; stderr:\n%s", code, stderr)
			}
			for _, w := range c.want {
				w = strings.ReplaceAll(w, "FILE", file)
				if !strings.Contains(stderr, w) {
					t.Errorf("the message does not say %q:\n%s", w, stderr)
				}
			}
		})
	}
}

// TestConfigStarts: what is not a mistake starts: a bare 0 for a duration,
// the client's variables in the environment, log_format json (every line
// of the log is then a JSON object).
func TestConfigStarts(t *testing.T) {
	needBinary(t)
	file := writeYAML(t, "wait_max: 0\npoll_timeout: 0\nlog_format: json\n")
	n := startServe(t, t.TempDir(), []string{"BATON_ADDR=http://127.0.0.1:1", "BATON_AUTH_TOKEN=x", "BATON_KEY=k", "BATON_TOKEN=1"}, "--config", file, "--poll-timeout", "0")
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	lines := strings.Split(strings.TrimSpace(n.stderr.String()), "\n")
	if len(lines) < 2 {
		t.Fatalf("log: %q", lines)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil || m["msg"] == nil {
			t.Fatalf("log_format json: line %q is not a JSON record: %v", l, err)
		}
	}
}

// TestConfigPrecedence: flags > environment > YAML file > defaults, seen
// through the lease of a grant that names none (lease_default).
func TestConfigPrecedence(t *testing.T) {
	needBinary(t)
	file := writeYAML(t, "lease_default: 7s\nlease_max: 2m\n")
	cases := []struct {
		name string
		env  []string
		args []string
		want float64
	}{
		{"defaults", nil, nil, 30},
		{"file over defaults", nil, []string{"--config", file}, 7},
		{"file named by BATON_CONFIG", []string{"BATON_CONFIG=" + file}, nil, 7},
		{"env over file", []string{"BATON_LEASE_DEFAULT=5s"}, []string{"--config", file}, 5},
		{"flag over env and file", []string{"BATON_LEASE_DEFAULT=5s"}, []string{"--config", file, "--lease-default=3s"}, 3},
		{"flag over env", []string{"BATON_LEASE_DEFAULT=5s"}, []string{"--lease-default=1500ms"}, 1.5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := startServe(t, t.TempDir(), c.env, c.args...)
			res, err := http.Post(n.url+"/locks/p", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			var g api.Grant
			err = json.NewDecoder(res.Body).Decode(&g)
			res.Body.Close()
			if err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("acquire: %d %v", res.StatusCode, err)
			}
			if g.Lease != c.want {
				t.Fatalf("lease %v, want %v", g.Lease, c.want)
			}
			if code := n.stop(); code != 0 {
				t.Fatalf("exit code %d", code)
			}
		})
	}
	// The file's lease_max holds too: a lease above it is refused.
	n := startServe(t, t.TempDir(), nil, "--config", file)
	res, err := http.Post(n.url+"/locks/p?lease=121", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusBadRequest {
		t.Fatalf("lease above the file's lease_max: %d", res.StatusCode)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
}

// syncBuf collects a process's stderr for failure messages.
type syncBuf = testproc.Buffer

func freeAddr(t *testing.T) string { return testproc.FreeAddr(t, "127.0.0.1") }
