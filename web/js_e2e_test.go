package web_test

// Browser tests of the JavaScript client (/baton.js) and of the status
// page's states (loading, unknown, replica lag) and phone layout.

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/security"
	"github.com/chromedp/chromedp"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

// jsResult is what the page's client calls report.
type jsResult struct {
	Token   float64 `json:"token"`
	Expires string  `json:"expires"`
	Lost    bool    `json:"lost"`
	Reason  string  `json:"reason"`
	Code    string  `json:"code"`
	Error   string  `json:"error"`
}

// TestJSClientCrossOrigin: a page on another origin (in cors_origins)
// imports /baton.js from the node, takes a lock, keeps it alive past its
// lease, releases it; a lock left to its lease is lost and aborts `lost`.
// A page on an origin not configured cannot import the module.
func TestJSClientCrossOrigin(t *testing.T) {
	browserTest(t)
	other := otherOrigin(t)
	n := startBaton(t, "BATON_CORS_ORIGINS="+other.URL)
	ctx, cons := tab(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(other.URL+"/")); err != nil {
		t.Fatal(err)
	}
	baton, _ := json.Marshal(n.url)
	got := eval[jsResult](t, ctx, `(async () => {
		const { Client } = await import(`+string(baton)+` + '/baton.js');
		const c = new Client({ addresses: [`+string(baton)+`] });
		const lock = await c.acquire('js/page', { lease: 10 });
		lock.keepAlive();
		window.batonLock = lock;
		return { token: lock.token, expires: lock.expiresAt.toISOString(), lost: lock.lost.aborted };
	})()`)
	if got.Token <= 1<<32 || got.Lost {
		t.Fatalf("the page's acquire: %+v", got)
	}
	// Past the first lease's end: only a renewal keeps it. The lease is
	// 10 s: renewals start at half of it and retry until it runs out, the
	// page's and the node's work on the clock, which a starved Chromium on
	// a loaded machine missed with a 1 s and even a 3 s lease (load average
	// 26, two busy loops, -race).
	st := n.status(t, "js/page")
	if st.Holder == nil || float64(st.Holder.Token) != got.Token {
		t.Fatalf("the page's lock on the node: %+v, want token %.0f", st.Holder, got.Token)
	}
	first := st.Holder.ExpiresAt // the node's, as granted (or renewed already)
	time.Sleep(time.Until(first) + time.Second)
	st = n.status(t, "js/page")
	if st.Holder == nil || float64(st.Holder.Token) != got.Token || !st.Holder.ExpiresAt.After(first) {
		t.Fatalf("a second after the first 10 s lease of a lock kept alive by the page ran out (%v): %+v, want token %.0f renewed", first, st.Holder, got.Token)
	}
	rel := eval[jsResult](t, ctx, `(async () => {
		await window.batonLock.release();
		return { lost: window.batonLock.lost.aborted };
	})()`)
	if rel.Lost {
		t.Errorf("a release aborted lost")
	}
	if st := n.status(t, "js/page"); st.Holder != nil {
		t.Fatalf("after the page's release: %+v", st)
	}

	lost := eval[jsResult](t, ctx, `(async () => {
		const { Client, BatonError } = await import(`+string(baton)+` + '/baton.js');
		const c = new Client({ addresses: [`+string(baton)+`] });
		const lock = await c.acquire('js/lost', { lease: 0.5 });
		const reason = await new Promise((resolve) => lock.lost.addEventListener('abort', () => resolve(lock.lost.reason)));
		return { lost: lock.lost.aborted, reason: String(reason.message), code: reason instanceof BatonError ? reason.code : 'not a BatonError' };
	})()`)
	if !lost.Lost || lost.Code != "lost" || !strings.Contains(lost.Reason, "lease ran out") {
		t.Fatalf("a lock left to its lease: %+v", lost)
	}
	waitFor(t, 3*time.Second, "the server took the lock back", func() (bool, string) {
		st := n.status(t, "js/lost")
		return st.Holder == nil, fmt.Sprintf("%+v", st)
	})
	if errs := cons.errors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}

	// An origin that is not configured (localhost for 127.0.0.1): no import.
	port := other.URL[strings.LastIndex(other.URL, ":")+1:]
	if err := chromedp.Do(ctx, chromedp.Navigate("http://localhost:"+port+"/")); err != nil {
		t.Fatal(err)
	}
	refused := eval[jsResult](t, ctx, `import(`+string(baton)+` + '/baton.js').then(() => ({}), (e) => ({ error: String(e) }))`)
	if refused.Error == "" {
		t.Errorf("a page on an origin not in cors_origins imported the module")
	}
}

// gateProxy stands in front of a node: GET /locks answers wait until open
// is called, and carry Baton-Replica-Lag: 1.25 when the node sent none —
// the header a standby's reads carry (SPEC section 2, "Reads on
// standbys"), so the page's rendering of it is tested on any node.
type gateProxy struct {
	*httptest.Server
	once sync.Once
	gate chan struct{}
}

func newGateProxy(t *testing.T, target string) *gateProxy {
	t.Helper()
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	tr := &http.Transport{}
	rp.Transport = tr
	rp.ModifyResponse = func(res *http.Response) error {
		if strings.HasPrefix(res.Request.URL.Path, "/locks") && res.Header.Get("Baton-Replica-Lag") == "" {
			res.Header.Set("Baton-Replica-Lag", "1.25")
		}
		return nil
	}
	rp.FlushInterval = -1 // the event stream
	p := &gateProxy{gate: make(chan struct{})}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/locks") {
			select {
			case <-p.gate:
			case <-r.Context().Done():
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { p.open(); p.CloseClientConnections(); p.Close(); tr.CloseIdleConnections() })
	return p
}

func (p *gateProxy) open() { p.once.Do(func() { close(p.gate) }) }

// pageState reads what the locks panel says.
type pageState struct {
	Empty  string `json:"empty"`
	Hidden bool   `json:"hidden"`
	Count  string `json:"count"`
	Lag    string `json:"lag"`
	Rows   int    `json:"rows"`
	Banner string `json:"banner"`
}

func (s pageState) String() string {
	type plain pageState // without this method
	return fmt.Sprintf("%+v", plain(s))
}

const readPageState = `(() => ({
	empty: document.getElementById('empty').textContent,
	hidden: document.getElementById('empty').hidden,
	count: document.getElementById('count').textContent,
	lag: document.getElementById('lag').hidden ? '' : document.getElementById('lag').textContent,
	rows: document.querySelectorAll('#locks tbody tr').length,
	banner: document.getElementById('banner').textContent,
}))()`

// TestStatusPageKnowsWhatItKnows: while the listing has not come, the page
// says "loading"; an answer with Baton-Replica-Lag shows the lag; when the
// node cannot be read, it says "unknown". It never says "No lock is held"
// unless a listing just said so.
func TestStatusPageKnowsWhatItKnows(t *testing.T) {
	browserTest(t)
	n := startBaton(t)
	p := newGateProxy(t, n.url)
	ctx, _ := tab(t)
	navigated := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(p.URL+"/")); err != nil {
		t.Fatal(err)
	}
	var seen []pageState
	var mu sync.Mutex
	watch := func(s pageState) {
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
	}
	waitFor(t, 5*time.Second, "the page shows its node", func() (bool, string) {
		s := eval[string](t, ctx, `document.getElementById('role').textContent`)
		return s == "active", s
	})
	for range 5 {
		s := eval[pageState](t, ctx, readPageState)
		watch(s)
		if s.Hidden || !strings.Contains(s.Empty, "Loading") || !strings.Contains(s.Count, "loading") {
			t.Fatalf("before the first listing: %s", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.open()
	waitFor(t, 5*time.Second, "the listing, with the replica lag", func() (bool, string) {
		s := eval[pageState](t, ctx, readPageState)
		watch(s)
		return s.Lag == "replica lag 1.25 s" && strings.Contains(s.Empty, "No lock is held") && !s.Hidden, s.String()
	})
	// The gate made the first listing as slow as the test up to here (on
	// a loaded machine, 10 s and more), and the page lists again no sooner
	// than three times its last listing took: what it shows next comes
	// that much later.
	paced := max(5*time.Second, 3*time.Since(navigated)+time.Second)
	if _, err := n.acquire(ctx, "known/1", 60, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, paced, "the lock listed", func() (bool, string) {
		s := eval[pageState](t, ctx, readPageState)
		watch(s)
		return s.Rows == 1 && s.Hidden, s.String()
	})

	n.kill()
	waitFor(t, max(10*time.Second, paced), "the page says it does not know", func() (bool, string) {
		s := eval[pageState](t, ctx, readPageState)
		watch(s)
		return s.Rows == 0 && !s.Hidden && strings.HasPrefix(s.Empty, "Unknown") && s.Count == "unknown", s.String()
	})
	for range 5 {
		time.Sleep(200 * time.Millisecond)
		watch(eval[pageState](t, ctx, readPageState))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, s := range seen {
		if strings.Contains(s.Empty, "No lock") && !s.Hidden && s.Lag == "" {
			t.Errorf("the page said %q before it knew: %s", s.Empty, s)
		}
	}
	for _, s := range seen[len(seen)-5:] {
		if strings.Contains(s.Empty, "No lock") {
			t.Errorf("with the node gone the page said %q: %s", s.Empty, s)
		}
	}
	screenshot(t, ctx, "status-page-unknown.png")
}

// TestStatusPagePhone: at a phone's width a long key in the event list (and
// in the locks) breaks only after a separator, never inside a word, and the
// events are part of the page's one scroll (no scroll box of their own).
func TestStatusPagePhone(t *testing.T) {
	browserTest(t)
	n := startBaton(t)
	ctx, cons := tab(t)
	colorScheme(t, ctx, "light")
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(n.url+"/")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the page live", func() (bool, string) {
		s := eval[string](t, ctx, `document.getElementById('conn').textContent`)
		return s == "live", s
	})
	keys := []string{
		"orders/2026/invoice-processing-batch/customer-4242/settlement",
		"tenants/acme-corporation-international/reports/quarterly-reconciliation",
		"a/short",
	}
	for i := 0; i < 30; i++ {
		k := keys[i%len(keys)]
		tok, err := n.acquire(ctx, k, 30, 0)
		if err != nil {
			t.Fatal(err)
		}
		n.release(t, k, tok)
	}
	if _, err := n.acquire(ctx, keys[1], 60, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the events and the held lock listed", func() (bool, string) {
		c := eval[int](t, ctx, `document.querySelectorAll('#events li').length`)
		return c >= 31 && row(t, ctx, keys[1]) != nil, fmt.Sprint(c)
	})
	time.Sleep(300 * time.Millisecond)

	// Each text node of a key is one word and what follows it up to the
	// next separator; it must lie on one line.
	broken := eval[[]string](t, ctx, `(() => {
		const out = [];
		for (const k of document.querySelectorAll('#events .key, #locks td.key span')) {
			for (const node of k.childNodes) {
				if (node.nodeType !== Node.TEXT_NODE) continue;
				const r = document.createRange();
				r.selectNodeContents(node);
				const lines = new Set([...r.getClientRects()].map((x) => Math.round(x.top)));
				if (lines.size > 1) out.push(node.textContent);
			}
		}
		return out;
	})()`)
	if len(broken) > 0 {
		t.Errorf("words of keys broken across lines on a phone: %q", broken)
	}
	wrapped := eval[int](t, ctx, `[...document.querySelectorAll('#events .key')].filter((k) => k.getClientRects().length && k.getBoundingClientRect().height > 1.5 * parseFloat(getComputedStyle(k).lineHeight || 20)).length`)
	t.Logf("keys over more than one line: %d (broken after a separator)", wrapped)

	type scroll struct {
		Overflow     string `json:"overflow"`
		ScrollHeight int    `json:"scrollHeight"`
		ClientHeight int    `json:"clientHeight"`
		PageWidth    int    `json:"pageWidth"`
		PageHeight   int    `json:"pageHeight"`
	}
	s := eval[scroll](t, ctx, `(() => {
		const e = document.getElementById('events');
		return { overflow: getComputedStyle(e).overflowY, scrollHeight: e.scrollHeight, clientHeight: e.clientHeight,
			pageWidth: document.documentElement.scrollWidth, pageHeight: document.documentElement.scrollHeight };
	})()`)
	if s.Overflow == "auto" || s.Overflow == "scroll" || s.ScrollHeight > s.ClientHeight+1 {
		t.Errorf("on a phone the events scroll inside the page: %+v", s)
	}
	if s.PageWidth > 390 {
		t.Errorf("on a phone the page is %d px wide for a 390 px screen", s.PageWidth)
	}
	t.Logf("phone: %+v", s)
	screenshot(t, ctx, "status-page-phone-events.png")
	// What a phone shows with the events scrolled into view.
	_ = eval[bool](t, ctx, `(document.getElementById('events-panel').scrollIntoView(), true)`)
	view, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(artifactsDir(t), "status-page-phone-events-view.png"), view, 0o644); err != nil {
		t.Fatal(err)
	}
	if errs := cons.errors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestStatusPageOnStandby: the page of a standby in a cluster without
// cors_origins, while the active holds a lock. A standby answers reads from
// its replica (SPEC section 2, "Reads on standbys"), so its page shows the
// lock with the replica lag, and never says "No lock is held".
func TestStatusPageOnStandby(t *testing.T) {
	browserTest(t)
	urls := []string{"http://" + freeAddr(t, loopback(1)), "http://" + freeAddr(t, loopback(2))}
	var nodes []*node
	for _, u := range urls {
		nodes = append(nodes, startNode(t, strings.TrimPrefix(u, "http://"), []string{"--advertise", u, "--peers", strings.Join(urls, ","),
			"--heartbeat", heartbeat.String(), "--failover-timeout", failoverTimeout.String(), "--cluster-secret", "test-secret"}, nil))
	}
	active, standby := nodes[0], nodes[1]
	waitFor(t, 10*time.Second, "the first node active, the second its standby", func() (bool, string) {
		var v struct{ Role, Active string }
		if standby.tryJSON("/cluster", &v) != nil {
			return false, "no answer"
		}
		return v.Role == "standby" && v.Active == active.url, fmt.Sprintf("%+v", v)
	})
	ctx, _ := tab(t)
	if _, err := active.acquire(ctx, "sb/1", 60, 0); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(standby.url+"/")); err != nil {
		t.Fatal(err)
	}
	// Until the page shows sb/1 from the replica, with the replica lag and
	// the standby's role, and for 30 readings more, it never says "No
	// lock is held".
	var last pageState
	never := func() {
		if !last.Hidden && strings.Contains(last.Empty, "No lock") {
			t.Fatalf("the standby's page says %q while the active holds sb/1: %s", last.Empty, last)
		}
	}
	waitFor(t, 3*time.Second, "the standby's page shows sb/1 from its replica with the replica lag", func() (bool, string) {
		last = eval[pageState](t, ctx, readPageState)
		never()
		role := eval[string](t, ctx, `document.getElementById('role').textContent`)
		return role == "standby" && last.Rows == 1 && strings.HasPrefix(last.Lag, "replica lag "), "role " + role + ": " + last.String()
	})
	for range 30 {
		last = eval[pageState](t, ctx, readPageState)
		never()
		time.Sleep(100 * time.Millisecond)
	}
	screenshot(t, ctx, "status-page-standby.png")
}

// TestJSClientTimeoutInChromium: Chromium re-sends a POST answered 408 on
// a reused connection by itself; the module's acquire whose wait runs out
// rejects with a BatonError "timeout", and the server is left with no
// waiter and, after the holder's release, no grant to a stray re-send.
func TestJSClientTimeoutInChromium(t *testing.T) {
	browserTest(t)
	other := otherOriginAt(t, loopback(3))
	n := startBaton(t, "BATON_CORS_ORIGINS="+other.URL)
	ctx, _ := tab(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(other.URL+"/")); err != nil {
		t.Fatal(err)
	}
	held, err := n.acquire(ctx, "js/busy", 30, 0)
	if err != nil {
		t.Fatal(err)
	}
	baton, _ := json.Marshal(n.url)
	got := eval[jsResult](t, ctx, `(async () => {
		const { Client, BatonError } = await import(`+string(baton)+` + '/baton.js');
		const c = new Client({ addresses: [`+string(baton)+`] });
		await c.status('js/busy'); // a connection to reuse
		try {
			await c.acquire('js/busy', { wait: 0.5, lease: 30 });
			return { error: 'granted' };
		} catch (e) {
			return { code: e instanceof BatonError ? e.code : String(e), reason: e.message };
		}
	})()`)
	if got.Code != "timeout" {
		t.Fatalf("an acquire whose wait ran out: %+v, want a BatonError timeout", got)
	}
	if st := n.status(t, "js/busy"); st.Holder == nil || st.Holder.Token != held || st.Waiters != 0 {
		t.Fatalf("after the timeout: %+v; want the first holder and no waiter", st)
	}
	n.release(t, "js/busy", held)
	time.Sleep(700 * time.Millisecond)
	if st := n.status(t, "js/busy"); st.Holder != nil || st.Waiters != 0 {
		t.Fatalf("after the release: %+v; want no holder and no waiter", st)
	}
}

// TestJSClientReplicaLagFromAnotherOrigin: a page on another origin (in
// cors_origins) reads the locks from a standby through /baton.js; the
// standby answers from its replica with Baton-Replica-Lag (SPEC section
// 2, "Reads on standbys"), which the client reports as replicaLag — so
// the browser must be allowed to read that header across origins.
func TestJSClientReplicaLagFromAnotherOrigin(t *testing.T) {
	browserTest(t)
	other := otherOriginAt(t, loopback(3))
	active, standby := startPair(t, other.URL)
	ctx, cons := tab(t)
	if _, err := active.acquire(ctx, "lag/1", 60, 0); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(other.URL+"/")); err != nil {
		t.Fatal(err)
	}
	url, _ := json.Marshal(standby.url)
	type lagResult struct {
		List   any    `json:"list"`
		Status any    `json:"status"`
		Holder bool   `json:"holder"`
		Error  string `json:"error"`
	}
	var got lagResult
	waitFor(t, 5*time.Second, "the standby's replica holds lag/1", func() (bool, string) {
		got = eval[lagResult](t, ctx, `(async () => {
			try {
				const { Client } = await import(`+string(url)+` + '/baton.js');
				const c = new Client({ addresses: [`+string(url)+`] });
				const list = await c.list(), status = await c.status('lag/1');
				return { list: list.replicaLag ?? null, status: status.replicaLag ?? null, holder: status.holder !== null };
			} catch (e) {
				return { error: String(e) };
			}
		})()`)
		return got.Error != "" || got.Holder, fmt.Sprintf("%+v", got)
	})
	if got.Error != "" {
		t.Fatalf("the page's reads from the standby: %s", got.Error)
	}
	for what, v := range map[string]any{"list()": got.List, "status()": got.Status} {
		if lag, ok := v.(float64); !ok || lag < 0 {
			t.Errorf("%s from the standby, in a page on another origin: replicaLag %v, want the standby's Baton-Replica-Lag (seconds)", what, v)
		}
	}
	if errs := cons.errors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestJSClientKeepsALockWhileManyAcquiresWaitOverHTTPS: a page holds a
// lock with keepAlive while 8 acquires of its own wait on the same node.
// Over plain http a browser opens at most 6 connections to a node, each
// waiting acquire holds one, and the renewals waited behind them until
// the lock was lost; over https (HTTP/2, one connection) the renewals go
// out and the lock is kept — what the README tells browsers to use.
func TestJSClientKeepsALockWhileManyAcquiresWaitOverHTTPS(t *testing.T) {
	browserTest(t)
	other := otherOriginAt(t, loopback(3))
	certFile, keyFile, pool := testproc.SelfSigned(t, t.TempDir())
	addr := freeAddr(t, loopback(5))
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}}
	n := startNodeAt(t, "https://"+addr, addr, []string{"--tls-cert", certFile, "--tls-key", keyFile}, []string{"BATON_CORS_ORIGINS=" + other.URL}, hc)
	ctx, cons := tab(t)
	// The certificate names 127.0.0.1 and localhost, signed by nobody
	// Chromium knows.
	if _, err := chromedp.Call(ctx, security.SetIgnoreCertificateErrors, security.SetIgnoreCertificateErrorsParams{Ignore: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = chromedp.Call(ctx, security.SetIgnoreCertificateErrors, security.SetIgnoreCertificateErrorsParams{Ignore: false})
	})
	if err := chromedp.Do(ctx, chromedp.Navigate(other.URL+"/")); err != nil {
		t.Fatal(err)
	}
	url, _ := json.Marshal(n.url)
	type keptResult struct {
		Token   float64 `json:"token"`
		Outcome string  `json:"outcome"`
		Waiting int     `json:"waiting"`
		Error   string  `json:"error"`
	}
	got := eval[keptResult](t, ctx, `(async () => {
		try {
			const { Client } = await import(`+string(url)+` + '/baton.js');
			const other = new Client({ addresses: [`+string(url)+`] }), c = new Client({ addresses: [`+string(url)+`] });
			for (let i = 0; i < 8; i++) await other.acquire('busy/' + i, { lease: 60 });
			const mine = await c.acquire('mine', { lease: 4 });
			mine.keepAlive();
			const lost = new Promise((r) => mine.lost.addEventListener('abort', () => r('lost: ' + mine.lost.reason.message)));
			let waiting = 8;
			for (let i = 0; i < 8; i++) c.acquire('busy/' + i, { lease: 10, wait: 60 }).then(() => waiting--, () => waiting--);
			// Two and a half leases: two renewals at least.
			const outcome = await Promise.race([lost, new Promise((r) => setTimeout(() => r('kept'), 10000))]);
			return { token: mine.token, outcome, waiting };
		} catch (e) {
			return { error: String(e) };
		}
	})()`)
	if got.Error != "" || got.Outcome != "kept" || got.Waiting != 8 {
		t.Fatalf("a lock kept alive over https while 8 acquires wait: %+v", got)
	}
	var st api.LockStatus
	res, err := hc.Get(n.url + "/locks/mine")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := json.NewDecoder(res.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Holder == nil || float64(st.Holder.Token) != got.Token {
		t.Fatalf("the node's view of the page's lock: %+v, want token %.0f", st.Holder, got.Token)
	}
	if errs := cons.errors(); len(errs) > 0 {
		t.Errorf("console errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestJSClientRefusesAnOverlongOwnerAtOnce: a page on another origin
// passes an owner of 200 KB (a key or an owner longer than the API
// allows). The node refuses such a request line before reading it (431,
// which carries no CORS header), so the page saw only "Failed to fetch";
// each attempt took over a second, the client's retry window started
// again after each, and the acquire went on for about 98 s before it
// failed "unavailable". It must fail as the 400 of a shorter one does:
// invalid_argument naming the field.
func TestJSClientRefusesAnOverlongOwnerAtOnce(t *testing.T) {
	browserTest(t)
	other := otherOriginAt(t, loopback(3))
	n := startNode(t, freeAddr(t, loopback(6)), nil, []string{"BATON_CORS_ORIGINS=" + other.URL})
	ctx, _ := tab(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(other.URL+"/")); err != nil {
		t.Fatal(err)
	}
	url, _ := json.Marshal(n.url)
	type refusal struct {
		Code   string `json:"code"`
		Field  string `json:"field"`
		Length int    `json:"length"`
	}
	for _, c := range []struct{ what, call, field string }{
		{"owner", `c.acquire('k', { owner: 'o'.repeat(200000) })`, "owner"},
		{"key", `c.acquire('k'.repeat(200000))`, "key"},
	} {
		got := eval[refusal](t, ctx, `(async () => {
			const { Client } = await import(`+string(url)+` + '/baton.js');
			const c = new Client({ addresses: [`+string(url)+`] });
			// Bounded here so that the test ends: 20 s is twice the client's retryFor.
			const still = new Promise((r) => setTimeout(() => r({ code: 'still retrying after 20 s' }), 20000));
			return Promise.race([`+c.call+`.then(() => ({ code: 'granted' }), (e) => ({ code: e.code, field: e.field, length: e.message.length })), still]);
		})()`)
		if got.Code != "invalid_argument" || got.Field != c.field {
			t.Errorf("an acquire with a 200 KB %s: %+v, want invalid_argument naming %s", c.what, got, c.field)
		}
	}
	var st api.LockStatus
	n.getJSON(t, "/locks/k", &st)
	if st.Holder != nil || st.Waiters != 0 {
		t.Errorf("after the refused acquires: %+v", st)
	}
}
