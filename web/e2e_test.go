package web_test

// Browser tests: the status page and fetch from another origin, in real
// headless Chromium (Debian's chromium package) driven by chromedp, against
// the baton binary built once in TestMain. They fail when Chromium is
// missing; -short skips them.
//
// Screenshots go to $ARTIFACTS_DIR, else testdata/artifacts/ at the top of
// the repository (gitignored). With -update-screenshot the light one is
// also written to docs/status-page.png for the README.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"go.uber.org/goleak"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the status page's screenshot to docs/status-page.png")

var (
	batonBin  string // the built binary; "" under -short
	chromeBin string
	chromeErr error

	browserOnce   sync.Once
	browserCtx    context.Context
	browserCancel context.CancelFunc
	allocCancel   context.CancelFunc
	browserErr    error
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if !testing.Short() {
		dir, err := os.MkdirTemp("", "baton-web-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		batonBin = filepath.Join(dir, "baton")
		build := exec.Command("go", "build", "-o", batonBin, "github.com/baton-io/baton/cmd/baton")
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building baton: %v\n%s", err, out)
			return 1
		}
		chromeBin, chromeErr = exec.LookPath("chromium")
	}
	code := m.Run()
	if browserCancel != nil {
		browserCancel()
		allocCancel()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

// browserTest starts every test of this file: -short skips it, and a
// missing Chromium fails it.
func browserTest(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("browser test: -short skips it")
	}
	if chromeErr != nil {
		t.Fatalf("these tests need Chromium (apt-get install -y chromium): %v", chromeErr)
	}
}

// tab returns a new browser tab (one Chromium for the whole run) and the
// console messages it collects. The tab closes at the end of the test.
func tab(t *testing.T) (context.Context, *console) {
	t.Helper()
	browserTest(t)
	browserOnce.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromeBin),
			chromedp.Flag("headless", "new"),
			chromedp.NoSandbox, // tests run as root
			chromedp.Flag("disable-gpu", true),
			chromedp.Flag("disable-dev-shm-usage", true),
			chromedp.WindowSize(1280, 800),
		)
		var actx context.Context
		actx, allocCancel = chromedp.NewExecAllocator(context.Background(), opts...)
		browserCtx, browserCancel = chromedp.NewContext(actx)
		_, browserErr = chromedp.Run(browserCtx, chromedp.Evaluate[chromedp.Void]("1"))
	})
	if browserErr != nil {
		t.Fatalf("starting Chromium: %v", browserErr)
	}
	ctx, cancel := chromedp.NewContext(browserCtx)
	c := &console{}
	msgs := chromedp.Console(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range msgs {
			if err != nil {
				return
			}
			c.add(m)
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	ctx, stop := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(stop)
	return ctx, c
}

// console collects what a tab writes to its console.
type console struct {
	mu   sync.Mutex
	msgs []chromedp.ConsoleMessage
}

func (c *console) add(m chromedp.ConsoleMessage) {
	c.mu.Lock()
	c.msgs = append(c.msgs, m)
	c.mu.Unlock()
}

// errors returns the errors and exceptions so far.
func (c *console) errors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, m := range c.msgs {
		if m.Type == chromedp.ConsoleError || m.IsException() {
			out = append(out, m.String()+" ("+m.URL+")")
		}
	}
	return out
}

// node is a baton process.
type node struct {
	url    string
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
}

// startBaton runs a single node on a free port with a fresh data dir and
// the given BATON_* settings.
func startBaton(t *testing.T, env ...string) *node {
	t.Helper()
	return startNode(t, freeAddr(t, loopback(1)), nil, env)
}

// startNode runs the binary on addr with a fresh data dir, args and env
// (BATON_* settings), waits until it answers, and stops it (SIGTERM, then
// kill) at the end of the test.
func startNode(t *testing.T, addr string, args, env []string) *node {
	t.Helper()
	return startNodeAt(t, "http://"+addr, addr, args, env, http.DefaultClient)
}

// startNodeAt is startNode for a node whose URL is url (https:// with
// --tls-cert), asking it whether it answers with hc.
func startNodeAt(t *testing.T, url, addr string, args, env []string, hc *http.Client) *node {
	t.Helper()
	cmd := exec.Command(batonBin, append([]string{"serve", "--listen", addr, "--data-dir", t.TempDir()}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BATON_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	n := &node{url: url, cmd: cmd, out: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = n.out, n.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(n.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-n.exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-n.exited
		}
		if t.Failed() {
			t.Logf("baton %s output:\n%s", n.url, n.out)
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := hc.Get(n.url + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return n
			}
		}
		select {
		case <-n.exited:
			t.Fatalf("baton exited at start:\n%s", n.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("baton did not answer on %s: %v\n%s", addr, err, n.out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill ends the node with SIGKILL and waits for it.
func (n *node) kill() {
	_ = n.cmd.Process.Kill()
	<-n.exited
}

// Fast cluster timings for tests.
const (
	heartbeat       = 100 * time.Millisecond
	failoverTimeout = 600 * time.Millisecond
)

// startPair runs a two-node cluster: the first node has the higher
// priority. cors_origins holds both nodes (a page on one reads the locks
// from the other) and the origins given. It waits until the first node is
// active and the second follows it.
func startPair(t *testing.T, origins ...string) (active, standby *node) {
	t.Helper()
	return startPairWith(t, nil, origins...)
}

// startPairWith is startPair with extra flags for both nodes.
func startPairWith(t *testing.T, extra []string, origins ...string) (active, standby *node) {
	t.Helper()
	urls := []string{"http://" + freeAddr(t, loopback(1)), "http://" + freeAddr(t, loopback(2))}
	peers := strings.Join(urls, ",")
	cors := "BATON_CORS_ORIGINS=" + strings.Join(append(urls[:2:2], origins...), ",")
	var nodes []*node
	for _, u := range urls {
		nodes = append(nodes, startNode(t, strings.TrimPrefix(u, "http://"), append([]string{"--advertise", u, "--peers", peers,
			"--heartbeat", heartbeat.String(), "--failover-timeout", failoverTimeout.String(), "--cluster-secret", "test-secret"},
			extra...), []string{cors}))
	}
	waitFor(t, 10*time.Second, "the first node is active, the second its standby", func() (bool, string) {
		var a, b api.ClusterView
		if nodes[0].tryJSON("/cluster", &a) != nil || nodes[1].tryJSON("/cluster", &b) != nil {
			return false, "no answer"
		}
		return a.Role == api.RoleActive && b.Role == api.RoleStandby && b.Active == nodes[0].url, fmt.Sprintf("%+v / %+v", a, b)
	})
	return nodes[0], nodes[1]
}

// acquire takes key through the API and returns the token; wait in seconds
// (0 = no limit). It returns an error for anything but 200.
func (n *node) acquire(ctx context.Context, key string, lease, wait float64) (uint64, error) {
	u := fmt.Sprintf("%s/locks/%s?lease=%g&wait=%g", n.url, key, lease, wait)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("POST %s: %s %s", u, res.Status, body)
	}
	return strconv.ParseUint(res.Header.Get(api.HeaderLockToken), 10, 64)
}

func (n *node) release(t *testing.T, key string, token uint64) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodDelete, n.url+"/locks/"+key, nil)
	req.Header.Set(api.HeaderLockToken, strconv.FormatUint(token, 10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("DELETE /locks/%s: %s", key, res.Status)
	}
}

func (n *node) status(t *testing.T, key string) api.LockStatus {
	t.Helper()
	var st api.LockStatus
	n.getJSON(t, "/locks/"+key, &st)
	return st
}

func (n *node) getJSON(t *testing.T, path string, v any) {
	t.Helper()
	if err := n.tryJSON(path, v); err != nil {
		t.Fatal(err)
	}
}

func (n *node) tryJSON(path string, v any) error {
	res, err := http.Get(n.url + path)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s%s: %s", n.url, path, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s%s: %v", n.url, path, err)
	}
	return nil
}

// eval evaluates a JavaScript expression in the tab (awaiting a promise).
func eval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluating %.80q: %v", expr, err)
	}
	return v
}

// waitFor polls cond every 50 ms until it holds and returns how long that
// took. within is what a user should see on an idle machine; the test only
// fails once cond has not held for waitSlack times as long (at least
// waitFloor), since a page's timing on a loaded 2-core CI machine is not
// what these tests assert (timing claims live in benchmarks). A wait past
// within is logged.
func waitFor(t *testing.T, within time.Duration, what string, cond func() (bool, string)) time.Duration {
	t.Helper()
	limit := max(waitSlack*within, waitFloor)
	start := time.Now()
	for {
		ok, state := cond()
		if ok {
			took := time.Since(start)
			if took > within {
				t.Logf("%s: took %v, more than the %v expected (a loaded machine?)", what, took.Round(time.Millisecond), within)
			}
			return took
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %v; last seen: %s", what, limit, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The slack waitFor allows beyond what a user should see. The floor is
// above the page's own pacing on a loaded machine: it lists the locks
// again no sooner than three times its last listing took after an event
// (every 5 s otherwise), and under -race at a load average of 26 a change
// took 14 s to show and sometimes more than 15 s (TestStatusPageAuth,
// TestStatusPageLongOwner: the grant's event shown, its row not yet).
const (
	waitSlack = 4
	waitFloor = 30 * time.Second
)

// longTask (ms) is the longest stretch of main-thread work a user does
// not notice; freeze (ms) is one that a loaded machine does not explain.
const (
	longTask = 400
	freeze   = 2500
)

// pageRow is one row of the page's locks table.
type pageRow struct {
	Token   string `json:"token"`
	Owner   string `json:"owner"`
	Mode    string `json:"mode"`
	Lease   string `json:"lease"`
	Waiters string `json:"waiters"`
	Oldest  string `json:"oldest"`
}

func row(t *testing.T, ctx context.Context, key string) *pageRow {
	t.Helper()
	k, _ := json.Marshal(key)
	return eval[*pageRow](t, ctx, `(() => {
		const tr = [...document.querySelectorAll('#locks tbody tr')].find((r) => r.dataset.key === `+string(k)+`);
		if (!tr) return null;
		const txt = (sel) => (tr.querySelector(sel) || {}).textContent || '';
		const td = tr.querySelector('td.token');
		return {token: td && td.firstChild ? td.firstChild.textContent : '', owner: txt('td.token .owner').trim(), mode: txt('td.token .mode').trim(),
			lease: txt('.lease .t'), waiters: txt('td.waiters'), oldest: txt('td.oldest')};
	})()`)
}

func (r *pageRow) String() string {
	if r == nil {
		return "no row"
	}
	return fmt.Sprintf("%+v", *r)
}

// leaseSeconds reads "12.3 s" as 12.3.
func leaseSeconds(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, " s"), 64)
	if err != nil {
		t.Fatalf("lease left %q: not seconds", s)
	}
	return v
}

func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("ARTIFACTS_DIR")
	if dir == "" {
		dir = filepath.Join("..", "testdata", "artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t *testing.T, ctx context.Context, name string) []byte {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(artifactsDir(t), name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return png
}

func colorScheme(t *testing.T, ctx context.Context, scheme string) {
	t.Helper()
	_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStatusPage: the page loads with no console errors; a lock taken
// through the API shows within 2 s with its token; its lease counts down; a
// second acquire shows as one waiter; a release moves the holder; it looks
// right light, dark and on a phone.
func TestStatusPage(t *testing.T) {
	browserTest(t)
	n := startBaton(t)
	ctx, cons := tab(t)
	colorScheme(t, ctx, "light")
	if err := chromedp.Do(ctx, chromedp.Navigate(n.url+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the page shows the node as active, with live updates", func() (bool, string) {
		s := eval[string](t, ctx, `[document.getElementById('conn').textContent, document.getElementById('role').textContent, document.querySelector('#peers tbody').textContent].join(' ')`)
		return strings.HasPrefix(s, "live active ") && strings.Contains(s, n.url), s
	})

	asked := time.Now()
	tok1, err := n.acquire(ctx, "orders/42", 30, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatUint(tok1, 10)
	var r *pageRow
	took := waitFor(t, 2*time.Second, "the lock shows with its holder token", func() (bool, string) {
		r = row(t, ctx, "orders/42")
		return r != nil && r.Token == want, r.String()
	})
	t.Logf("the grant showed after %v", took.Round(time.Millisecond))

	// The lease left is what the node said less what has passed since: at
	// most the 30 s asked for and no less than 30 s less the time since the
	// acquire was sent, and it counts down, by no more than the time
	// between two readings (each bound has 0.6 s for the page's 0.1 s
	// rounding and its redraw; the bounds follow the clock, so a loaded
	// machine only widens them, and the countdown is awaited, since a
	// starved page redraws late).
	l1 := leaseSeconds(t, r.Lease)
	sinceAsked := time.Since(asked).Seconds()
	read1 := time.Now()
	if l1 > 30 || l1 < 30-sinceAsked-0.6 {
		t.Errorf("lease left %.1f s, %.1f s after asking for a 30 s lease", l1, sinceAsked)
	}
	var l2 float64
	waitFor(t, 1500*time.Millisecond, "the lease left counts down", func() (bool, string) {
		r = row(t, ctx, "orders/42")
		if r == nil {
			return false, "no row"
		}
		l2 = leaseSeconds(t, r.Lease)
		return l1-l2 >= 0.5, fmt.Sprintf("from %.1f s to %.1f s", l1, l2)
	})
	if between := time.Since(read1).Seconds(); l1-l2 > between+0.6 {
		t.Errorf("lease left went from %.1f s to %.1f s in %.1f s: faster than the clock", l1, l2, between)
	}

	waiterCtx, stopWaiter := context.WithCancel(ctx)
	defer stopWaiter()
	type result struct {
		tok uint64
		err error
	}
	second := make(chan result, 1)
	go func() {
		tok, err := n.acquire(waiterCtx, "orders/42", 30, 0)
		second <- result{tok, err}
	}()
	waitFor(t, 2*time.Second, "the second acquire shows as one waiter", func() (bool, string) {
		r = row(t, ctx, "orders/42")
		return r != nil && r.Waiters == "1" && strings.HasSuffix(r.Oldest, " s"), r.String()
	})

	n.release(t, "orders/42", tok1)
	res := <-second
	if res.err != nil {
		t.Fatalf("the waiter: %v", res.err)
	}
	want2 := strconv.FormatUint(res.tok, 10)
	waitFor(t, 2*time.Second, "the release moves the holder to the waiter", func() (bool, string) {
		r = row(t, ctx, "orders/42")
		return r != nil && r.Token == want2 && r.Waiters == "0" && r.Oldest == "–", r.String()
	})
	waitFor(t, 2*time.Second, "the events list the grants and the release", func() (bool, string) {
		s := eval[string](t, ctx, `[...document.querySelectorAll('#events li')].map((li) => li.dataset.kind + ' ' + li.dataset.key).join(', ')`)
		return strings.Contains(s, "release orders/42") && strings.Count(s, "grant orders/42") == 2, s
	})

	// Some more state for the screenshots: several holders, one queue.
	for i, key := range []string{"billing/invoice-2211", "orders/17", "reports/nightly", "search/reindex", "users/7f3a/profile"} {
		if _, err := n.acquire(ctx, key, float64(20+40*i), 0); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		go func() { _, _ = n.acquire(waiterCtx, "reports/nightly", 30, 0) }()
	}
	waitFor(t, 3*time.Second, "the page shows six keys, two waiting", func() (bool, string) {
		r = row(t, ctx, "reports/nightly")
		rows := eval[int](t, ctx, `document.querySelectorAll('#locks tbody tr').length`)
		return rows == 6 && r != nil && r.Waiters == "2", fmt.Sprintf("%d rows, reports/nightly: %s", rows, r)
	})
	time.Sleep(300 * time.Millisecond) // let the countdowns and the events settle
	png := screenshot(t, ctx, "status-page-light.png")
	if *updateScreenshot {
		if err := os.WriteFile(filepath.Join("..", "docs", "status-page.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	colorScheme(t, ctx, "dark")
	bg := eval[string](t, ctx, `getComputedStyle(document.body).backgroundColor`)
	if bg != "rgb(15, 19, 23)" {
		t.Errorf("dark scheme: body background %s, want rgb(15, 19, 23)", bg)
	}
	screenshot(t, ctx, "status-page-dark.png")

	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	colorScheme(t, ctx, "light")
	time.Sleep(200 * time.Millisecond)
	// A mobile layout viewport grows to fit what overflows: compare with
	// the screen's width.
	if w := eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("on a phone the page is %d px wide for a 390 px screen", w)
	}
	screenshot(t, ctx, "status-page-phone.png")

	// Issue 14: a semaphore's holders share one row, the first with its
	// owner and the mode, the others counted; the operator's forced
	// release, once confirmed, frees the key.
	var quota []string
	for _, owner := range []string{"crawler-1", "crawler-2"} {
		res, err := http.Post(n.url+"/locks/api/quota?limit=3&mode=shared&lease=60&owner="+owner, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("semaphore acquire: %s", res.Status)
		}
		quota = append(quota, res.Header.Get(api.HeaderLockToken))
	}
	waitFor(t, 2*time.Second, "the semaphore's row shows the first holder, its owner and 1 more of 3", func() (bool, string) {
		r = row(t, ctx, "api/quota")
		return r != nil && r.Token == quota[0] && r.Owner == "crawler-1" && r.Mode == "shared +1 of 3", r.String()
	})
	// Two readers of a read/write lock (limit 1, which admits any number
	// of them): counted, but not "of 1".
	for range 2 {
		res, err := http.Post(n.url+"/locks/rw?mode=shared&lease=60", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("shared acquire: %s", res.Status)
		}
	}
	waitFor(t, 2*time.Second, "the read/write lock's row shows its readers without \"of 1\"", func() (bool, string) {
		r = row(t, ctx, "rw")
		return r != nil && r.Mode == "shared +1", r.String()
	})
	eval[bool](t, ctx, `(() => { window.confirm = () => true; document.querySelector('#locks tbody tr[data-key="api/quota"] button.force').click(); return true; })()`)
	waitFor(t, 2*time.Second, "the forced release frees the semaphore", func() (bool, string) {
		r = row(t, ctx, "api/quota")
		return r == nil, r.String()
	})
	waitFor(t, 2*time.Second, "the events say the release was forced", func() (bool, string) {
		s := eval[string](t, ctx, `[...document.querySelectorAll('#events li')].map((li) => li.textContent).join(' | ')`)
		return strings.Contains(s, "forced by an operator") && strings.Contains(s, "owner crawler-2"), s
	})

	if errs := cons.errors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
	stopWaiter()
}

// otherOrigin serves a blank page on another origin than baton's, on
// 127.0.0.1 (whose other name, localhost, is an origin not configured).
func otherOrigin(t *testing.T) *httptest.Server {
	t.Helper()
	return otherOriginAt(t, "127.0.0.1")
}

// otherOriginAt is otherOrigin on a free port of host.
func otherOriginAt(t *testing.T, host string) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, "<!doctype html><title>another origin</title><p>a page on another origin</p>")
	}))
	ln, err := net.Listen("tcp", freeAddr(t, host))
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// fetchResult is what the page's fetch calls report.
type fetchResult struct {
	Status  int    `json:"status"`
	Header  string `json:"header"`
	Token   string `json:"token"`
	Above32 bool   `json:"above32"`
	Safe    bool   `json:"safe"`
	Error   string `json:"error"`
	Body    string `json:"body"`
	Ms      int    `json:"ms"`
}

// TestCrossOriginFetch: a page on another origin (in cors_origins) takes a
// lock with fetch, reads its token (above 2^32) exactly, renews it and
// releases it; a page on an origin not configured cannot.
func TestCrossOriginFetch(t *testing.T) {
	browserTest(t)
	other := otherOrigin(t)
	n := startBaton(t, "BATON_CORS_ORIGINS="+other.URL)
	ctx, _ := tab(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(other.URL+"/")); err != nil {
		t.Fatal(err)
	}
	baton, _ := json.Marshal(n.url)
	acquire := eval[fetchResult](t, ctx, `(async () => {
		const r = await fetch(`+string(baton)+` + '/locks/xo/1', {
			method: 'POST',
			headers: {'Content-Type': 'application/json', 'Idempotency-Key': 'page-1', 'Authorization': 'Bearer unused'},
			body: JSON.stringify({lease: 30}),
		});
		const body = await r.json();
		return {status: r.status, header: r.headers.get('Lock-Token') || '', token: String(body.token),
			above32: body.token > 2 ** 32, safe: Number.isSafeInteger(body.token)};
	})()`)
	if acquire.Status != http.StatusOK {
		t.Fatalf("cross-origin acquire: %+v", acquire)
	}
	st := n.status(t, "xo/1")
	if st.Holder == nil {
		t.Fatal("after the page's acquire nobody holds xo/1")
	}
	want := strconv.FormatUint(st.Holder.Token, 10)
	if acquire.Token != want || acquire.Header != want || !acquire.Above32 || !acquire.Safe {
		t.Fatalf("the page read token %s (header %q, above 2^32 %v, safe %v); the server holds %s",
			acquire.Token, acquire.Header, acquire.Above32, acquire.Safe, want)
	}
	t.Logf("token read exactly in the page: %s", want)

	renew := eval[fetchResult](t, ctx, `(async () => {
		const r = await fetch(`+string(baton)+` + '/locks/xo/1', {method: 'PATCH',
			headers: {'Lock-Token': '`+want+`', 'Content-Type': 'application/json'}, body: JSON.stringify({lease: 60})});
		return {status: r.status, body: await r.text(), header: r.headers.get('Lock-Token') || ''};
	})()`)
	if renew.Status != http.StatusOK || renew.Header != want {
		t.Fatalf("cross-origin renew: %+v", renew)
	}
	release := eval[fetchResult](t, ctx, `(async () => {
		const r = await fetch(`+string(baton)+` + '/locks/xo/1', {method: 'DELETE',
			headers: {'Lock-Token': '`+want+`', 'Authorization': 'Bearer unused'}});
		return {status: r.status, body: await r.text()};
	})()`)
	if release.Status != http.StatusOK || !strings.Contains(release.Body, `"released":true`) {
		t.Fatalf("cross-origin release: %+v", release)
	}
	if st := n.status(t, "xo/1"); st.Holder != nil || st.Waiters != 0 {
		t.Fatalf("after the page's release: %+v", st)
	}

	// The same page served from an origin that is not configured
	// (localhost instead of 127.0.0.1) is refused by the preflight.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(other.URL, "http://"))
	if err := chromedp.Do(ctx, chromedp.Navigate("http://localhost:"+port+"/")); err != nil {
		t.Fatal(err)
	}
	refused := eval[fetchResult](t, ctx, `(async () => {
		try {
			const r = await fetch(`+string(baton)+` + '/locks/xo/2', {method: 'POST', headers: {'Idempotency-Key': 'page-2'}});
			return {status: r.status};
		} catch (e) {
			return {error: String(e)};
		}
	})()`)
	if refused.Error == "" {
		t.Errorf("a page on an origin not configured could call: %+v", refused)
	}
	if st := n.status(t, "xo/2"); st.Holder != nil || st.Waiters != 0 {
		t.Errorf("the refused page's acquire reached the server: %+v", st)
	}
}

// TestFetchTimeout: a page's fetch whose wait runs out gets 408; afterwards
// the server holds no grant and no waiter for that caller, even though
// Chromium may re-send a request on its own after a 408.
func TestFetchTimeout(t *testing.T) {
	browserTest(t)
	other := otherOriginAt(t, loopback(3))
	n := startBaton(t, "BATON_CORS_ORIGINS="+other.URL)
	ctx, _ := tab(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(other.URL+"/")); err != nil {
		t.Fatal(err)
	}
	held, err := n.acquire(ctx, "xo/busy", 30, 0)
	if err != nil {
		t.Fatal(err)
	}
	baton, _ := json.Marshal(n.url)
	res := eval[fetchResult](t, ctx, `(async () => {
		const t0 = performance.now();
		const r = await fetch(`+string(baton)+` + '/locks/xo/busy?wait=0.5&lease=30', {method: 'POST'});
		return {status: r.status, body: await r.text(), ms: Math.round(performance.now() - t0)};
	})()`)
	if res.Status != http.StatusRequestTimeout || !strings.Contains(res.Body, `"error":"timeout"`) {
		t.Fatalf("the page's fetch with wait=0.5: %+v, want 408 timeout", res)
	}
	t.Logf("408 after %d ms", res.Ms)

	if st := n.status(t, "xo/busy"); st.Holder == nil || st.Holder.Token != held || st.Waiters != 0 {
		t.Fatalf("after the 408: %+v; want the first holder and no waiter", st)
	}
	// Were a stray re-sent acquire still queued, the release would hand it
	// the lock.
	n.release(t, "xo/busy", held)
	time.Sleep(700 * time.Millisecond)
	if st := n.status(t, "xo/busy"); st.Holder != nil || st.Waiters != 0 {
		t.Fatalf("after the release: %+v; want no holder and no waiter", st)
	}
	var evs api.EventList
	n.getJSON(t, "/events?since=0", &evs)
	var kinds []string
	for _, ev := range evs.Events {
		if ev.Key == "xo/busy" {
			kinds = append(kinds, ev.Kind)
			if ev.Kind == api.EventGrant && ev.Token != held {
				t.Errorf("a grant to someone else than the first holder: %+v", ev)
			}
		}
	}
	t.Logf("events of xo/busy: %s", strings.Join(kinds, ", "))
}

// peerRows reads the page's cluster table: url -> "role live".
func peerRows(t *testing.T, ctx context.Context) map[string]string {
	t.Helper()
	return eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#peers tbody tr')].map((tr) =>
		[tr.dataset.url, tr.querySelector('td.priority, td.num').textContent + ' ' + tr.querySelector('td.role').textContent + ' ' + tr.querySelector('td.live').textContent.trim()]))`)
}

// TestClusterPageFailover: a page opened on the standby shows both nodes
// with their priorities and roles, and the active's locks; when the active
// is killed, the page shows the standby promoted and the old active dead,
// and the lock that was replicated.
func TestClusterPageFailover(t *testing.T) {
	browserTest(t)
	first, second := startPair(t)
	ctx, cons := tab(t)
	tok, err := first.acquire(ctx, "fo/1", 60, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.FormatUint(tok, 10)
	if err := chromedp.Do(ctx, chromedp.Navigate(second.url+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the standby's page shows both roles", func() (bool, string) {
		p := peerRows(t, ctx)
		role := eval[string](t, ctx, `document.getElementById('role').textContent`)
		return role == "standby" && p[first.url] == "0 active yes" && p[second.url] == "1 standby yes", fmt.Sprintf("%s %v", role, p)
	})
	waitFor(t, 3*time.Second, "the standby's page shows the active's lock", func() (bool, string) {
		r := row(t, ctx, "fo/1")
		return r != nil && r.Token == want, r.String()
	})
	banner := eval[string](t, ctx, `document.getElementById('banner').textContent`)
	if !strings.Contains(banner, "standby") || !strings.Contains(banner, first.url) {
		t.Errorf("banner %q does not say that the locks come from the active", banner)
	}

	first.kill()
	took := waitFor(t, failoverTimeout+5*time.Second, "the page shows the promotion", func() (bool, string) {
		p := peerRows(t, ctx)
		role := eval[string](t, ctx, `document.getElementById('role').textContent`)
		return role == "active" && strings.HasSuffix(p[first.url], " no") && p[second.url] == "1 active yes", fmt.Sprintf("%s %v", role, p)
	})
	t.Logf("the page showed the promotion %v after kill -9 of the active", took.Round(time.Millisecond))
	waitFor(t, 3*time.Second, "the promoted node's page shows the replicated lock", func() (bool, string) {
		r := row(t, ctx, "fo/1")
		return r != nil && r.Token == want, r.String()
	})
	waitFor(t, 3*time.Second, "the events show the promotion", func() (bool, string) {
		s := eval[string](t, ctx, `[...document.querySelectorAll('#events li')].map((li) => li.dataset.kind).join(',')`)
		return strings.Contains(s, "promote"), s
	})
	screenshot(t, ctx, "status-page-after-failover.png")
	// Fetches to the dead node fail while it is gone: network errors in the
	// console are expected here, exceptions are not.
	for _, e := range cons.errors() {
		if strings.HasPrefix(e, "exception") {
			t.Errorf("console: %s", e)
		}
	}
}

// TestStatusPageShowsADegradedActive: with sync_standbys 1 and its only
// standby killed, the active answers a change without it once
// sync_timeout has passed (degraded: GET /cluster's sync_degraded); its
// page says so in the banner, and says nothing of it on a healthy pair.
// Before, the page showed nothing of the sync state: an operator looking
// at it could not tell that a crash of the active would now lose grants.
func TestStatusPageShowsADegradedActive(t *testing.T) {
	browserTest(t)
	first, second := startPairWith(t, []string{"--sync-standbys", "1", "--sync-timeout", "300ms"})
	ctx, _ := tab(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(first.url+"/")); err != nil {
		t.Fatal(err)
	}
	bannerText := func() string { return eval[string](t, ctx, `document.getElementById('banner').textContent`) }
	waitFor(t, 5*time.Second, "the active's page shows its role", func() (bool, string) {
		role := eval[string](t, ctx, `document.getElementById('role').textContent`)
		return role == "active", role
	})
	if b := bannerText(); strings.Contains(b, "Degraded") {
		t.Errorf("a healthy pair's page says %q", b)
	}
	second.kill()
	if _, err := first.acquire(ctx, "sync/1", 60, 0); err != nil { // waits sync_timeout, then degrades
		t.Fatal(err)
	}
	var cv api.ClusterView
	first.getJSON(t, "/cluster", &cv)
	if !cv.SyncDegraded {
		t.Fatalf("GET /cluster after a grant with the only standby killed: sync_degraded false, want true")
	}
	waitFor(t, 5*time.Second, "the page says the active is degraded", func() (bool, string) {
		b := bannerText()
		return strings.Contains(b, "Degraded") && strings.Contains(b, "sync_standbys (1)"), b
	})
	screenshot(t, ctx, "status-page-degraded.png")
}

// TestCrossOriginFetchViaStandby: a page on another origin sends its fetch
// to the standby; the browser follows the 307 to the active, sending
// Origin: null there, and the acquire and the release succeed.
func TestCrossOriginFetchViaStandby(t *testing.T) {
	browserTest(t)
	other := otherOriginAt(t, loopback(3))
	first, second := startPair(t, other.URL)
	ctx, _ := tab(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(other.URL+"/")); err != nil {
		t.Fatal(err)
	}
	standby, _ := json.Marshal(second.url)
	acquire := eval[fetchResult](t, ctx, `(async () => {
		const r = await fetch(`+string(standby)+` + '/locks/xo/via-standby?lease=30', {
			method: 'POST', headers: {'Idempotency-Key': 'page-via-standby', 'Authorization': 'Bearer unused'}});
		const body = await r.json();
		return {status: r.status, header: r.headers.get('Lock-Token') || '', token: String(body.token),
			above32: body.token > 2 ** 32, safe: Number.isSafeInteger(body.token), body: r.url};
	})()`)
	if acquire.Status != http.StatusOK {
		t.Fatalf("acquire through the standby: %+v", acquire)
	}
	if !strings.HasPrefix(acquire.Body, first.url+"/") {
		t.Errorf("the response came from %s, not from the active %s", acquire.Body, first.url)
	}
	st := first.status(t, "xo/via-standby")
	if st.Holder == nil || strconv.FormatUint(st.Holder.Token, 10) != acquire.Token || acquire.Header != acquire.Token {
		t.Fatalf("the page read token %s (header %s); the active holds %+v", acquire.Token, acquire.Header, st.Holder)
	}
	release := eval[fetchResult](t, ctx, `(async () => {
		const r = await fetch(`+string(standby)+` + '/locks/xo/via-standby', {method: 'DELETE',
			headers: {'Lock-Token': '`+acquire.Token+`'}});
		return {status: r.status, body: await r.text()};
	})()`)
	if release.Status != http.StatusOK || !strings.Contains(release.Body, `"released":true`) {
		t.Fatalf("release through the standby: %+v", release)
	}
	if st := first.status(t, "xo/via-standby"); st.Holder != nil || st.Waiters != 0 {
		t.Fatalf("after the release: %+v", st)
	}
}

// TestStatusPageAuth: with client auth on, the page asks for the token,
// keeps it in sessionStorage, sends it as a header (never in a URL) and
// then shows the node.
func TestStatusPageAuth(t *testing.T) {
	browserTest(t)
	n := startBaton(t, "BATON_AUTH_TOKENS=s3cret-token")
	ctx, _ := tab(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(n.url+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the page asks for a token", func() (bool, string) {
		s := eval[string](t, ctx, `document.getElementById('auth').hidden + ' ' + document.getElementById('conn').textContent`)
		return s == "false token needed", s
	})
	eval[chromedp.Void](t, ctx, `(() => {
		document.getElementById('auth-token').value = 's3cret-token';
		document.getElementById('auth').requestSubmit();
	})()`)
	waitFor(t, 5*time.Second, "the page shows the node with the token", func() (bool, string) {
		s := eval[string](t, ctx, `document.getElementById('auth').hidden + ' ' + document.getElementById('role').textContent + ' ' + document.getElementById('conn').textContent`)
		return s == "true active live", s
	})
	req, _ := http.NewRequest(http.MethodPost, n.url+"/locks/auth/1?lease=30", nil)
	req.Header.Set("Authorization", "Bearer s3cret-token")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	tok := res.Header.Get(api.HeaderLockToken)
	waitFor(t, 2*time.Second, "the lock shows", func() (bool, string) {
		r := row(t, ctx, "auth/1")
		return r != nil && r.Token == tok, r.String()
	})
	loc := eval[string](t, ctx, `location.href + ' ' + performance.getEntriesByType('resource').map((e) => e.name).join(' ')`)
	if strings.Contains(loc, "s3cret") {
		t.Errorf("the token is in a URL: %s", loc)
	}
	if s := eval[string](t, ctx, `sessionStorage.getItem('baton.token') + ' ' + (localStorage.length)`); s != "s3cret-token 0" {
		t.Errorf("sessionStorage token and localStorage size: %s", s)
	}
}

// TestStatusPageManyKeys: with 10,000 keys (the most one listing holds)
// the page pages them, keeps its main thread free, says when there are
// more, filters them by prefix and sorts them.
func TestStatusPageManyKeys(t *testing.T) {
	browserTest(t)
	const keys = 9999
	n := startBaton(t)
	tr := &http.Transport{MaxIdleConnsPerHost: 8}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < keys; i += 8 {
				res, err := client.Post(fmt.Sprintf("%s/locks/k/%05d?lease=600", n.url, i), "", nil)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("acquire k/%05d: %s", i, res.Status)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	ctx, cons := tab(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(n.url+"/")); err != nil {
		t.Fatal(err)
	}
	count := func() string {
		return eval[string](t, ctx, `document.getElementById('count').textContent + ' | ' + document.getElementById('page').textContent + ' | ' + document.querySelectorAll('#locks tbody tr').length`)
	}
	took := waitFor(t, 5*time.Second, "the page lists 9,999 keys in pages of 100", func() (bool, string) {
		s := count()
		return s == "9999 keys | page 1 of 100 | 100", s
	})
	t.Logf("9,999 keys listed %v after the page opened", took.Round(time.Millisecond))

	// The main thread stays free while the page lists 10,000 keys again
	// after an event: no long task (Long Tasks API: main-thread work of
	// 50 ms or more) comes near a user-visible freeze. (Timer lag would
	// measure the machine's load as much as the page.)
	eval[chromedp.Void](t, ctx, `(() => {
		window.__longTasks = [];
		new PerformanceObserver((l) => { for (const e of l.getEntries()) window.__longTasks.push(Math.round(e.duration)); }).observe({type: 'longtask'});
		// One known long task shows that the observer works.
		setTimeout(() => { const t0 = performance.now(); while (performance.now() - t0 < 80) { /* busy */ } }, 0);
	})()`)
	if _, err := n.acquire(ctx, "k/09999", 600, 0); err != nil {
		t.Fatal(err)
	}
	// The page lists again no sooner than three times its last listing
	// took after an event (a storm of events costs a few listings a second
	// at most): on a loaded machine that is longer than a user would wait
	// on an idle one.
	waitFor(t, max(3*time.Second, 3*took+time.Second), "the page lists the new key", func() (bool, string) {
		s := count()
		return strings.HasPrefix(s, "10000 keys"), s
	})
	time.Sleep(200 * time.Millisecond)
	long := eval[[]int](t, ctx, `window.__longTasks`)
	t.Logf("long tasks while listing 10,000 keys again, after a known one of 80 ms (ms): %v", long)
	if len(long) == 0 || long[0] < 80 {
		t.Errorf("the Long Tasks API did not see the known long task: %v", long)
	}
	// longTask at once is what a user would notice; a loaded machine
	// stretches every task (one of 1,310 ms at a load average of 25 under
	// -race), so only a freeze fails.
	for _, ms := range long {
		if ms > longTask {
			t.Logf("the page's main thread was busy for %d ms at once, more than the %d ms a user notices (a loaded machine?)", ms, longTask)
		}
		if ms > freeze {
			t.Errorf("the page's main thread was busy for %d ms at once: frozen", ms)
		}
	}
	if _, err := n.acquire(ctx, "k/10000", 600, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 3*time.Second, "the page says that there are more keys than it lists", func() (bool, string) {
		s := count()
		return strings.HasPrefix(s, "first 10000 of 10001 keys"), s
	})

	eval[chromedp.Void](t, ctx, `document.getElementById('next').click()`)
	if r := row(t, ctx, "k/00100"); r == nil {
		t.Errorf("page 2 does not start with k/00100: %s", count())
	}
	eval[chromedp.Void](t, ctx, `(() => {
		const p = document.getElementById('prefix');
		p.value = 'k/099';
		p.dispatchEvent(new Event('input'));
	})()`)
	waitFor(t, 3*time.Second, "the prefix filter narrows to 100 keys", func() (bool, string) {
		s := count()
		return s == "100 keys | page 1 of 1 | 100", s
	})
	// Sorting by token, newest first, puts the last grant on top.
	eval[chromedp.Void](t, ctx, `document.querySelector('#locks th button[data-sort="token"]').click()`)
	var list api.LockList
	n.getJSON(t, "/locks?prefix=k/099&limit=100", &list)
	var newest uint64
	for _, l := range list.Locks {
		newest = max(newest, l.Holder.Token)
	}
	first := eval[string](t, ctx, `document.querySelector('#locks tbody tr td.token').firstChild.textContent`)
	if want := strconv.FormatUint(newest, 10); first != want {
		t.Errorf("sorted by token, newest first: top token %s, want %s", first, want)
	}
	if errs := cons.errors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

type syncBuffer = testproc.Buffer

func freeAddr(t *testing.T, host string) string { return testproc.FreeAddr(t, host) }

// loopback is the i-th address (1, 2, …) of the loopback network the nodes
// listen on: CLUSTER_NET's (the first three numbers, such as "127.0.23",
// as the cluster tests take it), so that runs side by side keep to
// addresses of their own; else 127.0.0.i.
func loopback(i int) string {
	net := os.Getenv("CLUSTER_NET")
	if net == "" {
		net = "127.0.0"
	}
	return fmt.Sprintf("%s.%d", net, i)
}

// TestStatusPageLongOwner: an owner label of 128 bytes without a break
// (the longest one accepted) stays inside its panel, on a desktop and on
// a phone: in the events, where the detail parts were kept on one line
// each and the owner pushed the panel sideways, and in the locks table.
func TestStatusPageLongOwner(t *testing.T) {
	browserTest(t)
	n := startBaton(t)
	ctx, cons := tab(t)
	colorScheme(t, ctx, "light")
	if err := chromedp.Do(ctx, chromedp.Navigate(n.url+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the page is live", func() (bool, string) {
		s := eval[string](t, ctx, `document.getElementById('conn').textContent`)
		return strings.HasPrefix(s, "live"), s
	})
	owner := "worker-" + strings.Repeat("0123456789abcdef", 8)[:api.MaxOwnerBytes-len("worker-")]
	res, err := http.Post(n.url+"/locks/jobs/long-owner?lease=60&owner="+owner, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("acquire: %s", res.Status)
	}
	waitFor(t, 2*time.Second, "the grant's event and row show the owner", func() (bool, string) {
		s := eval[string](t, ctx, `document.getElementById('events').textContent + ' | ' + document.getElementById('locks').textContent`)
		return strings.Count(s, owner) == 2, s
	})
	type fit struct {
		Over      []string `json:"over"`
		PageWidth int      `json:"pageWidth"`
		Width     int      `json:"width"`
	}
	check := func(what string, width int) {
		t.Helper()
		time.Sleep(200 * time.Millisecond) // the layout of the new viewport
		f := eval[fit](t, ctx, `(() => {
			const over = [];
			for (const id of ['events-panel', 'locks-panel']) {
				const p = document.getElementById(id), r = p.getBoundingClientRect();
				if (p.scrollWidth > p.clientWidth + 1) over.push(id + ' scrolls sideways: ' + p.scrollWidth + ' > ' + p.clientWidth);
				for (const e of p.querySelectorAll('li, span, td')) {
					const b = e.getBoundingClientRect();
					if (b.width && b.right > r.right + 1) over.push(id + ': ' + e.tagName + '.' + e.className + ' ends at ' + Math.round(b.right) + ' > ' + Math.round(r.right));
				}
			}
			return { over, pageWidth: document.documentElement.scrollWidth, width: innerWidth };
		})()`)
		if len(f.Over) > 0 || f.PageWidth > width {
			t.Errorf("%s: a long owner overflows (page %d px wide for %d): %q", what, f.PageWidth, width, f.Over)
		}
		screenshot(t, ctx, "status-page-long-owner-"+what+".png")
	}
	check("desktop", 1280)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	check("phone", 390)
	if errs := cons.errors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestStatusPageForceReleaseOfADotSegmentKey: the operator's forced
// release of the key "x/../y" releases that key, not "y". The page wrote
// the path with its slashes as they are, and the browser resolved the
// ".." before the request left (/locks/y?force=true): the row stayed and
// another lock's holder lost it (found replaying consul#3476 and #1409,
// keys that a URL path mangles, on every client).
func TestStatusPageForceReleaseOfADotSegmentKey(t *testing.T) {
	browserTest(t)
	n := startNode(t, freeAddr(t, "127.0.26.5"), nil, nil)
	c, err := api.NewClient(api.Config{Addresses: []string{n.url}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	tokens := map[string]uint64{}
	for _, key := range []string{"x/../y", "y", "a/./b", "a/b"} {
		l, err := c.Acquire(ctx, key, api.WithLease(60*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		tokens[key] = l.Token
	}
	tctx, _ := tab(t)
	if err := chromedp.Do(tctx, chromedp.Navigate(n.url+"/")); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"x/../y", "a/./b"} {
		k, _ := json.Marshal(key)
		waitFor(t, 5*time.Second, "the row of "+key, func() (bool, string) {
			r := row(t, tctx, key)
			return r != nil, r.String()
		})
		eval[bool](t, tctx, `(() => { window.confirm = () => true; [...document.querySelectorAll('#locks tbody tr')].find((r) => r.dataset.key === `+string(k)+`).querySelector('button.force').click(); return true; })()`)
		waitFor(t, 15*time.Second, "the forced release frees "+key, func() (bool, string) {
			st, err := c.Status(ctx, key)
			if err != nil {
				return false, err.Error()
			}
			return st.Holder == nil, fmt.Sprintf("holder %+v", st.Holder)
		})
	}
	for _, key := range []string{"y", "a/b"} {
		st, err := c.Status(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if st.Holder == nil || st.Holder.Token != tokens[key] {
			t.Errorf("%q: holder %+v after the forced releases of other keys; want token %d", key, st.Holder, tokens[key])
		}
	}
}

// TestStatusPageForceReleaseWithAdminTokensOnly: with admin_tokens set and
// no auth_tokens, every call but a forced release needs no token, so the
// page never asked for one; its forced release was answered 403 and the
// page stopped offering it, leaving an operator who holds an admin token
// no way to give it (newcomer trial). The 403 now opens the token form
// (the page stays live); with an admin token given, the page offers the
// forced release again and it frees the key.
func TestStatusPageForceReleaseWithAdminTokensOnly(t *testing.T) {
	browserTest(t)
	n := startNode(t, freeAddr(t, "127.0.0.26"), nil, []string{"BATON_ADMIN_TOKENS=adm-token"})
	if _, err := n.acquire(context.Background(), "held", 60, 0); err != nil {
		t.Fatal(err)
	}
	ctx, _ := tab(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(n.url+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the row of held, with its force button", func() (bool, string) {
		s := eval[string](t, ctx, `String(!!document.querySelector('#locks tbody tr[data-key="held"] button.force')) + ' ' + document.getElementById('auth').hidden`)
		return s == "true true", s
	})
	force := `(() => { window.confirm = () => true; document.querySelector('#locks tbody tr[data-key="held"] button.force').click(); return true; })()`
	eval[bool](t, ctx, force)
	waitFor(t, 5*time.Second, "the 403 opens the token form, the page still live", func() (bool, string) {
		s := eval[string](t, ctx, `document.getElementById('auth').hidden + ' ' + document.getElementById('conn').textContent`)
		return s == "false live", s
	})
	eval[chromedp.Void](t, ctx, `(() => {
		document.getElementById('auth-token').value = 'adm-token';
		document.getElementById('auth').requestSubmit();
	})()`)
	waitFor(t, 5*time.Second, "the force button is offered again", func() (bool, string) {
		s := eval[string](t, ctx, `String(!!document.querySelector('#locks tbody tr[data-key="held"] button.force')) + ' ' + document.getElementById('auth').hidden`)
		return s == "true true", s
	})
	eval[bool](t, ctx, force)
	waitFor(t, 5*time.Second, "the forced release frees held", func() (bool, string) {
		var st api.LockStatus
		if err := n.tryJSON("/locks/held", &st); err != nil {
			return false, err.Error()
		}
		return st.Holder == nil, fmt.Sprintf("holder %+v", st.Holder)
	})
}

// TestStatusPageOnAStandbyOffersNoForcedRelease: a page opened on a
// standby offered "force release" on every held lock, but the standby
// answers the DELETE with a 307 to the active, another origin, which
// answers no CORS preflight unless cors_origins is set: the click ended in
// "The forced release of “held” failed: Failed to fetch" and a CORS error
// in the console, the lock still held (newcomer trial, a default cluster).
// On a standby the page now offers no forced release and its banner says
// to use the active's page; once the node is the active, it offers it.
func TestStatusPageOnAStandbyOffersNoForcedRelease(t *testing.T) {
	browserTest(t)
	urls := []string{"http://" + freeAddr(t, "127.0.0.27"), "http://" + freeAddr(t, "127.0.0.28")}
	peers := strings.Join(urls, ",")
	var nodes []*node
	for _, u := range urls {
		nodes = append(nodes, startNode(t, strings.TrimPrefix(u, "http://"), []string{"--advertise", u, "--peers", peers,
			"--heartbeat", heartbeat.String(), "--failover-timeout", failoverTimeout.String(), "--cluster-secret", "test-secret"}, nil))
	}
	waitFor(t, 10*time.Second, "the first node is active, the second its standby", func() (bool, string) {
		var a, b api.ClusterView
		if nodes[0].tryJSON("/cluster", &a) != nil || nodes[1].tryJSON("/cluster", &b) != nil {
			return false, "no answer"
		}
		return a.Role == api.RoleActive && b.Role == api.RoleStandby && b.Active == nodes[0].url, fmt.Sprintf("%+v / %+v", a, b)
	})
	if _, err := nodes[0].acquire(context.Background(), "held", 60, 0); err != nil {
		t.Fatal(err)
	}
	ctx, cons := tab(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(nodes[1].url+"/")); err != nil {
		t.Fatal(err)
	}
	offered := `String(!!document.querySelector('#locks tbody tr[data-key="held"]')) + ' ' + String(!!document.querySelector('#locks tbody tr[data-key="held"] button.force'))`
	waitFor(t, 5*time.Second, "the standby's page shows the lock without a force button", func() (bool, string) {
		s := eval[string](t, ctx, offered)
		return s == "true false", s
	})
	if b := eval[string](t, ctx, `document.getElementById('banner').textContent`); !strings.Contains(b, "active’s page") {
		t.Errorf("banner %q; want it to say forced releases are made on the active's page", b)
	}
	nodes[0].cmd.Process.Kill()
	waitFor(t, 10*time.Second, "once the page's node is the active, it offers the forced release", func() (bool, string) {
		s := eval[string](t, ctx, offered)
		return s == "true true", s
	})
	for _, e := range cons.errors() {
		if strings.Contains(e, "CORS") {
			t.Errorf("console: %s", e)
		}
	}
}

// TestStatusPageForceWhoseAnswerIsLostSaysItMayHaveBeenMade: a forced
// release whose answer is lost after the node made it (the connection cut
// as it answered: a proxy, a node killed as it wrote) was reported as
// "The forced release of “k” failed", inviting the operator to force
// again, which releases the waiter the first force handed the lock to (as
// the Go client's repeated force did). The page now says the force may
// have been made and to look at the key's holders before forcing again;
// the browser's own repeats of the DELETE carry the page's
// Idempotency-Key and change nothing.
func TestStatusPageForceWhoseAnswerIsLostSaysItMayHaveBeenMade(t *testing.T) {
	browserTest(t)
	n := startNode(t, freeAddr(t, "127.0.26.7"), nil, nil)
	target, err := url.Parse(n.url)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target)
	var forces atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete && r.URL.Query().Get("force") == "true" {
			forces.Add(1)
			// The node makes the force; its answer never reaches the page.
			rp.ServeHTTP(httptest.NewRecorder(), r)
			panic(http.ErrAbortHandler)
		}
		rp.ServeHTTP(w, r)
	}))
	// After the tab's cleanup (registered later, run first): Close waits
	// for the page's connections.
	t.Cleanup(func() { proxy.CloseClientConnections(); proxy.Close() })
	ctx := context.Background()
	if _, err := n.acquire(ctx, "held", 60, 0); err != nil {
		t.Fatal(err)
	}
	c, err := api.NewClient(api.Config{Addresses: []string{n.url}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	granted := make(chan *api.Lock, 1)
	go func() {
		l, err := c.Acquire(ctx, "held", api.WithLease(60*time.Second), api.WithWait(30*time.Second))
		if err != nil {
			t.Error(err)
		}
		granted <- l
	}()
	waitFor(t, 5*time.Second, "the waiter queued", func() (bool, string) {
		st, err := c.Status(ctx, "held")
		if err != nil {
			return false, err.Error()
		}
		return st.Waiters == 1, fmt.Sprintf("%+v", st)
	})
	tctx, _ := tab(t)
	if err := chromedp.Do(tctx, chromedp.Navigate(proxy.URL+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the row of held, with its force button", func() (bool, string) {
		s := eval[string](t, tctx, `String(!!document.querySelector('#locks tbody tr[data-key="held"] button.force'))`)
		return s == "true", s
	})
	eval[bool](t, tctx, `(() => { window.confirm = () => true; document.querySelector('#locks tbody tr[data-key="held"] button.force').click(); return true; })()`)
	l := <-granted
	if l == nil {
		t.Fatal("the waiter was not granted the lock by the force")
	}
	waitFor(t, 5*time.Second, "the banner says the force may have been made", func() (bool, string) {
		s := eval[string](t, tctx, `document.getElementById('banner').textContent`)
		return strings.Contains(s, "may have been made") && !strings.Contains(s, "failed"), s
	})
	// Chromium itself sends a request again when its reused keep-alive
	// connection breaks before any byte of the answer, DELETE included
	// (3 forces were seen here): the page's Idempotency-Key makes the
	// repeats change nothing, so the waiter the force granted holds on.
	t.Logf("the browser sent the force %d times", forces.Load())
	st, err := c.Status(ctx, "held")
	if err != nil {
		t.Fatal(err)
	}
	if st.Holder == nil || st.Holder.Token != l.Token {
		t.Errorf("holder %+v after the lost force (sent %d times by the browser); want the waiter it granted, token %d", st.Holder, forces.Load(), l.Token)
	}
}
