package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-io/baton/api"
)

// bound turns a hang into a failure; it measures nothing.
const bound = 20 * time.Second

// leakCheck fails t if goroutines started during t outlive it (checked
// after every other cleanup). Per test rather than in TestMain, so that
// other files of package main may have their own TestMain.
func leakCheck(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}

// startNode opens a real node in-process (the Node of `baton serve`, on
// 127.0.0.1:0, its data_dir a temporary directory) and returns its base URL.
func startNode(t *testing.T) string {
	t.Helper()
	leakCheck(t)
	return openNode(t, t.TempDir()).URL()
}

// openNode opens a Node on 127.0.0.1:0 with data_dir dir and the settings
// args (flags of `baton serve`), closed at the end of t.
func openNode(t *testing.T, dir string, args ...string) *Node {
	t.Helper()
	cfg, err := loadConfig(append([]string{"--listen", "127.0.0.1:0", "--data-dir", dir}, args...), nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := OpenNode(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	return n
}

func apiClient(t *testing.T, url string) *api.Client {
	t.Helper()
	c, err := api.NewClient(api.Config{Addresses: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// syncBuffer is a goroutine-safe buffer that can be waited on.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	changed chan struct{}
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{changed: make(chan struct{})} }

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.changed)
	s.changed = make(chan struct{})
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the buffer contains sub.
func (s *syncBuffer) waitFor(t *testing.T, sub string) {
	t.Helper()
	timeout := time.After(bound)
	for {
		s.mu.Lock()
		ok, ch := strings.Contains(s.b.String(), sub), s.changed
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("output never contained %q; got %q", sub, s.String())
		}
	}
}

type cliRun struct {
	code           int
	stdout, stderr *syncBuffer
}

// runCLI runs a client command in-process against url.
func runCLI(t *testing.T, url string, tty bool, cmd string, args ...string) cliRun {
	t.Helper()
	r := startCLI(t, url, tty, cmd, args...)
	select {
	case code := <-r.done:
		return cliRun{code, r.stdout, r.stderr}
	case <-time.After(bound):
		t.Fatalf("baton %s %v did not end; stderr %q", cmd, args, r.stderr.String())
	}
	return cliRun{}
}

type cliProc struct {
	done           chan int
	stdout, stderr *syncBuffer
}

func startCLI(t *testing.T, url string, tty bool, cmd string, args ...string) cliProc {
	p := cliProc{done: make(chan int, 1), stdout: newSyncBuffer(), stderr: newSyncBuffer()}
	cio := cliIO{
		stdin:  strings.NewReader(""),
		stdout: p.stdout, stderr: p.stderr,
		getenv:  func(k string) string { return map[string]string{api.EnvAddr: url}[k] },
		environ: os.Environ,
		tty:     func() bool { return tty },
	}
	// The command is owned by the test: if the test ends early (a failure),
	// cancel it and wait for it, so no goroutine outlives the test.
	ctx, cancel := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		p.done <- clientMain(ctx, cmd, args, cio)
	}()
	t.Cleanup(func() {
		cancel()
		<-finished
	})
	return p
}

func TestAcquireReleaseRenewStatus(t *testing.T) {
	url := startNode(t)
	r := runCLI(t, url, false, "acquire", "a/b", "--lease", "30")
	tok := strings.TrimSpace(r.stdout.String())
	if r.code != exitOK || tok == "" {
		t.Fatalf("acquire: code %d, out %q, err %q", r.code, tok, r.stderr.String())
	}
	if r := runCLI(t, url, false, "status", "a/b"); r.code != exitOK || !strings.Contains(r.stdout.String(), "token "+tok) {
		t.Fatalf("status: %d %q %q", r.code, r.stdout.String(), r.stderr.String())
	}
	if r := runCLI(t, url, false, "status"); r.code != exitOK || !strings.Contains(r.stdout.String(), "a/b") {
		t.Fatalf("status list: %d %q", r.code, r.stdout.String())
	}
	if r := runCLI(t, url, false, "acquire", "a/b", "--wait", "100ms"); r.code != exitTimeout {
		t.Fatalf("acquire of a held lock: code %d, want %d; %q", r.code, exitTimeout, r.stderr.String())
	}
	if r := runCLI(t, url, false, "renew", "a/b", tok, "--lease", "1m"); r.code != exitOK || !strings.Contains(r.stdout.String(), "lease 1m0s") {
		t.Fatalf("renew: %d %q %q", r.code, r.stdout.String(), r.stderr.String())
	}
	if r := runCLI(t, url, false, "release", "a/b", tok); r.code != exitOK {
		t.Fatalf("release: %d %q", r.code, r.stderr.String())
	}
	if r := runCLI(t, url, false, "release", "a/b", tok); r.code != exitNotHolder || !strings.Contains(r.stderr.String(), "not_held") {
		t.Fatalf("second release: %d %q", r.code, r.stderr.String())
	}
}

func TestUsage(t *testing.T) {
	url := startNode(t)
	for _, args := range [][]string{
		{"acquire"},
		{"acquire", "k", "--lease", "soon"},
		{"acquire", "k", "--lease", "0"},
		{"run", "k", "--lease", "0s", "--", "true"},
		{"acquire", "k", "--limit", "0"},
		{"acquire", "k", "--limit", "-5"},
		{"acquire", "k", "--limit", "10001"},
		{"run", "k", "--limit", "0", "--", "true"},
		{"acquire", "k", "--owner", strings.Repeat("o", 129)},
		{"acquire", "k", "--owner", "tab\there"},
		{"acquire", "k", "--owner", "\xff"},
		{"run", "k", "--owner", "line\nbreak", "--", "true"},
		{"acquire", "k", "--addr", "ftp://x"},
		{"acquire", "k", "--addr", "http://a:1,baton://b:2"},
		{"run", "k", "--addr", "baton://nohost", "--", "true"},
		{"release", "k", "5", "--addr", "http://a:1/path"},
		{"status", "--addr", " , "},
		{"status", "--addr", "http://127.0.0.1:99999"},
		{"status", "--limit", "-1"},
		{"status", "--limit", "10001"},
		{"release", "k"},
		{"release", "k", "x"},
		// Above 2^53-1 no fencing token can be: a usage error, as "0"
		// is, not a node's 400 (exit 1).
		{"release", "k", "9007199254740992"},
		{"renew", "k", "18446744073709551615"},
		{"acquire", "k", "--lease", "NaN"},
		{"run", "k", "--kill-after", "nan", "--", "true"},
		// No key is "", as GET /events?key= is a 400: not every key's events.
		{"events", "--key", ""},
		{"run", "k"},
		{"run", "k", "x", "--", "true"},
		{"status", "a", "b"},
	} {
		if r := runCLI(t, url, false, args[0], args[1:]...); r.code != exitUsage {
			t.Errorf("baton %v: code %d, want %d; %q", args, r.code, exitUsage, r.stderr.String())
		}
	}
	if r := runCLI(t, url, false, "acquire", "--help"); r.code != exitOK || !strings.HasPrefix(r.stdout.String(), "Usage: baton acquire KEY") {
		t.Errorf("--help: %d %q", r.code, r.stdout.String())
	}
}

// While it waits on a terminal, acquire says so on stderr; not otherwise.
func TestWaitingDisplay(t *testing.T) {
	url := startNode(t)
	c := apiClient(t, url)
	l, err := c.Acquire(t.Context(), "k")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(context.Background())
	p := startCLI(t, url, true, "acquire", "k")
	p.stderr.waitFor(t, `waiting for "k" (1s)`)
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code := <-p.done; code != exitOK {
		t.Fatalf("acquire: %d %q", code, p.stderr.String())
	}
	if r := runCLI(t, url, false, "acquire", "k", "--wait", "1.5"); r.code != exitTimeout || strings.Contains(r.stderr.String(), "waiting for") {
		t.Fatalf("without a terminal: %d %q", r.code, r.stderr.String())
	}
}

// baton run passes COMMAND's exit status, sets BATON_KEY and BATON_TOKEN,
// and releases the lock after.
func TestRunPassesStatusAndToken(t *testing.T) {
	url := startNode(t)
	c := apiClient(t, url)
	r := runCLI(t, url, false, "run", "jobs/x", "--lease", "30s", "--", "sh", "-c", `echo "$BATON_KEY $BATON_TOKEN"; exit 7`)
	if r.code != 7 {
		t.Fatalf("code %d, want 7; stderr %q", r.code, r.stderr.String())
	}
	f := strings.Fields(r.stdout.String())
	if len(f) != 2 || f[0] != "jobs/x" {
		t.Fatalf("COMMAND printed %q", r.stdout.String())
	}
	if tok, err := strconv.ParseUint(f[1], 10, 64); err != nil || tok == 0 {
		t.Fatalf("BATON_TOKEN %q", f[1])
	}
	st, err := c.Status(t.Context(), "jobs/x")
	if err != nil || st.Holder != nil {
		t.Fatalf("after run: %+v, %v", st, err)
	}
	// Signalled COMMAND: 128+N.
	if r := runCLI(t, url, false, "run", "jobs/x", "--", "sh", "-c", `kill -KILL $$`); r.code != 128+9 {
		t.Fatalf("killed COMMAND: code %d", r.code)
	}
	if r := runCLI(t, url, false, "run", "jobs/x", "--", "/nonexistent/cmd"); r.code != exitNoCommand {
		t.Fatalf("missing COMMAND: code %d", r.code)
	}
	if st, _ := c.Status(t.Context(), "jobs/x"); st.Holder != nil {
		t.Fatalf("held after a COMMAND that could not start: %+v", st.Holder)
	}
}

// baton run keeps the lock while COMMAND outlives the lease, and signals
// COMMAND when the lock is lost (released from under it).
func TestRunSignalsCommandWhenLost(t *testing.T) {
	url := startNode(t)
	c := apiClient(t, url)
	p := startCLI(t, url, false, "run", "--lease", "2", "k", "--",
		"sh", "-c", `trap 'echo got TERM; exit 0' TERM; echo ready; while :; do sleep 0.05; done`)
	p.stdout.waitFor(t, "ready")
	st, err := c.Status(t.Context(), "k")
	if err != nil || st.Holder == nil {
		t.Fatalf("status while running: %+v, %v", st, err)
	}
	// Renewed past its first lease (2 s, renewed every second) while COMMAND
	// runs. The lease leaves room for a loaded machine: this is not a timing
	// test.
	first := st.Holder.ExpiresAt
	deadline := time.Now().Add(bound)
	for {
		st, err = c.Status(t.Context(), "k")
		if err != nil || st.Holder == nil {
			t.Fatalf("status while running: %+v, %v", st, err)
		}
		if time.Now().After(first) && st.Holder.ExpiresAt.After(first) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("never renewed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Release(t.Context(), "k", st.Holder.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-p.done:
		if code != exitLost {
			t.Fatalf("code %d, want %d; stderr %q", code, exitLost, p.stderr.String())
		}
	case <-time.After(bound):
		t.Fatal("baton run did not end after the lock was lost")
	}
	if !strings.Contains(p.stdout.String(), "got TERM") {
		t.Fatalf("COMMAND was not signalled: %q", p.stdout.String())
	}
	if n := strings.Count(p.stderr.String(), "lock lost"); n != 1 {
		t.Fatalf("baton said why %d times, want once: %q", n, p.stderr.String())
	}
}

// The built binary: `baton serve` and `baton run` as processes, dispatched
// through main.go.
func TestBinaryRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "baton")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := exec.Command(bin, "serve", "--listen", addr, "--data-dir", t.TempDir())
	var srvLog bytes.Buffer
	srv.Stdout, srv.Stderr = &srvLog, &srvLog
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = srv.Process.Signal(os.Interrupt)
		_ = srv.Wait()
	}()
	url := "http://" + addr
	env := append(os.Environ(), api.EnvAddr+"="+url)
	deadline := time.Now().Add(bound)
	for {
		st := exec.Command(bin, "status")
		st.Env = env
		if st.Run() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node never answered; log:\n%s", srvLog.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	run := exec.Command(bin, "run", "bin/k", "--", "sh", "-c", `test -n "$BATON_TOKEN" && exit 3`)
	run.Env = env
	err = run.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("baton run: %v", err)
	}
	st := exec.Command(bin, "status", "bin/k")
	st.Env = env
	out, err := st.Output()
	if err != nil || !strings.Contains(string(out), "holder:  none") {
		t.Fatalf("status after run: %v %q", err, out)
	}
}

// baton run whose wait runs out exits 3 and says so; COMMAND never runs.
func TestRunWaitRunsOut(t *testing.T) {
	url := startNode(t)
	c := apiClient(t, url)
	l, err := c.Acquire(t.Context(), "held", api.WithLease(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, url, false, "run", "held", "--wait", "0.2", "--", "sh", "-c", "echo ran")
	if r.code != exitTimeout || !strings.Contains(r.stderr.String(), "wait ran out") || r.stdout.String() != "" {
		t.Fatalf("code %d, stdout %q, stderr %q; want %d, the wait ran out, COMMAND not run", r.code, r.stdout.String(), r.stderr.String(), exitTimeout)
	}
	st, err := c.Status(t.Context(), "held")
	if err != nil || st.Holder == nil || st.Holder.Token != l.Token || st.Waiters != 0 {
		t.Fatalf("after the timeout: %+v, %v", st, err)
	}
}

// baton acquire --wait 0 (no limit of its own) on a node with wait_max
// is ended by the node's cap: the message says so, not that a wait of 0s
// ran out (it said "the wait ran out after 0s" after waiting wait_max).
func TestAcquireWaitZeroEndedByWaitMax(t *testing.T) {
	leakCheck(t)
	url := openNode(t, t.TempDir(), "--wait-max", "200ms").URL()
	c := apiClient(t, url)
	if _, err := c.Acquire(t.Context(), "held", api.WithLease(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{{"acquire", "held", "--wait", "0"}, {"run", "held", "--wait", "0", "--", "true"}} {
		r := runCLI(t, url, false, cmd[0], cmd[1:]...)
		msg := r.stderr.String()
		if r.code != exitTimeout || strings.Contains(msg, "after 0s") || !strings.Contains(msg, "wait_max") {
			t.Fatalf("baton %v: code %d, stderr %q; want %d and a message naming the node's wait_max", cmd, r.code, msg, exitTimeout)
		}
	}
}

// baton run that cannot reach a node says so (exit 1); it was not
// interrupted.
func TestRunNoNode(t *testing.T) {
	leakCheck(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	r := runCLI(t, url, false, "run", "k", "--", "sh", "-c", "echo ran")
	if r.code != exitError || !strings.Contains(r.stderr.String(), "unavailable") || r.stdout.String() != "" {
		t.Fatalf("code %d, stdout %q, stderr %q; want %d and why", r.code, r.stdout.String(), r.stderr.String(), exitError)
	}
}

// The CLI of issue 14: acquire --limit --shared --owner (owner default
// host:pid), status shows every holder with its mode and owner, and
// release --force frees them all.
func TestCLISemaphoreOwnerAndForce(t *testing.T) {
	url := startNode(t)
	a := runCLI(t, url, false, "acquire", "sem", "--limit", "2", "--shared", "--owner", "nightly")
	b := runCLI(t, url, false, "acquire", "sem", "--shared")
	if a.code != exitOK || b.code != exitOK {
		t.Fatalf("acquire: %d %q, %d %q", a.code, a.stderr.String(), b.code, b.stderr.String())
	}
	r := runCLI(t, url, false, "status", "sem")
	out := r.stdout.String()
	for _, want := range []string{"limit:   2", "token " + strings.TrimSpace(a.stdout.String()) + ", shared", "owner nightly", "owner " + api.DefaultOwner()} {
		if !strings.Contains(out, want) {
			t.Fatalf("status: %q lacks %q", out, want)
		}
	}
	if r := runCLI(t, url, false, "status"); !strings.Contains(r.stdout.String(), "(+1 of 2, shared)") || !strings.Contains(r.stdout.String(), "nightly") {
		t.Fatalf("status list: %q", r.stdout.String())
	}
	// Readers of a read/write lock (limit 1) are any number: not "of 1".
	for range 2 {
		if r := runCLI(t, url, false, "acquire", "rw", "--shared"); r.code != exitOK {
			t.Fatalf("acquire rw --shared: %d %q", r.code, r.stderr.String())
		}
	}
	if r := runCLI(t, url, false, "status"); !strings.Contains(r.stdout.String(), "(+1, shared)") || strings.Contains(r.stdout.String(), "of 1,") {
		t.Fatalf("status list, two readers of a read/write lock: %q", r.stdout.String())
	}
	if r := runCLI(t, url, false, "acquire", "sem", "--limit", "3", "--wait", "1"); r.code != exitError || !strings.Contains(r.stderr.String(), "limit_mismatch") {
		t.Fatalf("another limit: %d %q", r.code, r.stderr.String())
	}
	if r := runCLI(t, url, false, "release", "--force", "sem", "5"); r.code != exitUsage {
		t.Fatalf("--force with a token: %d %q", r.code, r.stderr.String())
	}
	if r := runCLI(t, url, false, "release", "--force", "sem"); r.code != exitOK {
		t.Fatalf("release --force: %d %q", r.code, r.stderr.String())
	}
	if r := runCLI(t, url, false, "status", "sem"); !strings.Contains(r.stdout.String(), "holder:  none") {
		t.Fatalf("after force: %q", r.stdout.String())
	}
	if r := runCLI(t, url, false, "release", "--force", "sem"); r.code != exitNotHolder {
		t.Fatalf("force on a free key: %d %q", r.code, r.stderr.String())
	}
}

// A key may hold Unicode format characters (U+202E RIGHT-TO-LEFT
// OVERRIDE, U+200B ZERO WIDTH SPACE): they are not control characters.
// Printed raw, they reorder or hide what a terminal shows, so that one
// key reads as another; baton status prints such a key quoted, with them
// escaped, in the table and for one key. --json keeps the key as it is.
func TestStatusEscapesFormatCharactersOfKeys(t *testing.T) {
	url := startNode(t)
	c := apiClient(t, url)
	for _, key := range []string{"a\u202eb", "zero\u200bwidth"} {
		l, err := c.Acquire(t.Context(), key)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(context.Background())
	}
	r := runCLI(t, url, false, "status")
	out := r.stdout.String()
	if r.code != exitOK || strings.ContainsAny(out, "\u202e\u200b") ||
		!strings.Contains(out, `"a\u202eb"`) || !strings.Contains(out, `"zero\u200bwidth"`) {
		t.Fatalf("status list: %d %q", r.code, out)
	}
	r = runCLI(t, url, false, "status", "a\u202eb")
	out = r.stdout.String()
	if r.code != exitOK || strings.Contains(out, "\u202e") || !strings.Contains(out, `key:     "a\u202eb"`) {
		t.Fatalf("status KEY: %d %q", r.code, out)
	}
	r = runCLI(t, url, false, "status", "--json", "a\u202eb")
	if r.code != exitOK || !strings.Contains(r.stdout.String(), "a\u202eb") {
		t.Fatalf("status --json KEY: %d %q", r.code, r.stdout.String())
	}
}

// Quoting only the keys with a format character is not enough for one
// key never to read as another: a key made of printable characters
// alone may spell a quoted key, quotes and escape included. Every key
// shows differently from every other.
func TestDisplayKeyTellsKeysApart(t *testing.T) {
	for _, pair := range [][2]string{
		{"a\u202eb", `"a\u202eb"`},
		{"zero\u200bwidth", `"zero\u200bwidth"`},
		{"plain", `"plain"`},
	} {
		if a, b := displayKey(pair[0]), displayKey(pair[1]); a == b {
			t.Errorf("keys %q and %q both show as %s", pair[0], pair[1], a)
		}
	}
	if got := displayKey("plain key"); got != "plain key" {
		t.Errorf("displayKey(%q) = %s, want it as it is", "plain key", got)
	}
}

// baton status offers a next page only when one follows. total counts
// every key with the prefix, those before --after too, so before, the
// last page of a listing with --after said "(1 of 3 shown; next page:
// --after "c")" and that page was empty.
func TestStatusNextPageOnlyWhenOneFollows(t *testing.T) {
	url := startNode(t)
	for _, k := range []string{"a", "b", "c"} {
		if r := runCLI(t, url, false, "acquire", k, "--lease", "1h"); r.code != exitOK {
			t.Fatalf("acquire %s: %d %q", k, r.code, r.stderr.String())
		}
	}
	for _, c := range []struct {
		args []string
		next string // the hint's --after, "" for none
	}{
		{[]string{"--limit", "2"}, "b"},
		{[]string{"--limit", "1", "--after", "a"}, "b"},
		{[]string{"--limit", "2", "--after", "b"}, ""},
		{[]string{"--after", "a"}, ""},
		{[]string{"--after", "c"}, ""},
		{[]string{"--limit", "3"}, ""},
		{nil, ""},
	} {
		r := runCLI(t, url, false, "status", c.args...)
		if r.code != exitOK {
			t.Fatalf("status %v: %d %q", c.args, r.code, r.stderr.String())
		}
		out := r.stdout.String()
		if c.next == "" && strings.Contains(out, "next page") {
			t.Errorf("status %v offers a next page, but none follows:\n%s", c.args, out)
		}
		if c.next != "" && !strings.Contains(out, "next page: --after "+strconv.Quote(c.next)) {
			t.Errorf("status %v: want a next page after %q:\n%s", c.args, c.next, out)
		}
	}
}

// An acquire whose grant ended before it reached baton (a lease of 1 ns:
// over when the late grant's renewal arrives, engine.RenewNoWait's overdue
// check) exits 1, as run does: exit 5 is release's and renew's "not held
// under that token" (baton help). It exited 5, through the not_held error
// that ErrGrantEnded wraps.
func TestAcquireWhoseGrantEndedExitsOne(t *testing.T) {
	url := startNode(t)
	for _, cmd := range [][]string{{"acquire", "k", "--lease", "1ns"}, {"run", "k", "--lease", "1ns", "--", "true"}} {
		r := runCLI(t, url, false, cmd[0], cmd[1:]...)
		if r.code != exitError || !strings.Contains(r.stderr.String(), "has ended") {
			t.Errorf("baton %v: code %d, stderr %q; want %d, the grant has ended", cmd, r.code, r.stderr.String(), exitError)
		}
	}
}
