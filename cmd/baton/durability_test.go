package main

// Durability under real `baton serve` processes (SPEC section 1,
// "Durability"; issue 12): what a node answered survives kill -9, SIGINT
// and a full disk.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/history"
)

// lockCall is one HTTP call to a node for the durability tests: method and
// path (with query) relative to the node.
type lockCaller struct {
	base string
	c    *http.Client
}

func newLockCaller(base string) *lockCaller {
	return &lockCaller{base: base, c: &http.Client{Timeout: bound, Transport: &http.Transport{}}}
}

func (l *lockCaller) close() { l.c.CloseIdleConnections() }

// call does one request; err is a transport error (the node is gone), not
// an HTTP status.
func (l *lockCaller) call(method, path string) (code int, g api.Grant, err error) {
	req, err := http.NewRequest(method, l.base+path, nil)
	if err != nil {
		return 0, g, err
	}
	res, err := l.c.Do(req)
	if err != nil {
		return 0, g, err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusOK && method != http.MethodDelete {
		if err := json.NewDecoder(res.Body).Decode(&g); err != nil {
			return 0, g, err // cut in the middle of the body: no answer
		}
	}
	return res.StatusCode, g, nil
}

// keyFact is what a client knows of one key: held under token with the
// lease ending at expires, or free (token 0); last is the highest token
// it was answered for the key.
type keyFact struct {
	token   uint64
	expires time.Time
	last    uint64
}

// pending is a change sent but not answered when the node died: the log
// may or may not hold it.
type pending struct {
	op     string // "acquire", "renew", "release"
	token  uint64 // renew, release: the holder's token
	sentAt time.Time
	lease  time.Duration
}

// leaseSlack is how far a lease deadline read back after a restart may be
// from the one answered: the engine carries deadlines across the process
// as wall-clock instants (Unix ns) and converts them to its monotonic clock
// and back, two clock readings apart.
const leaseSlack = 50 * time.Millisecond

// checkKey compares a key's status after a restart with what the client
// was answered (f) and the change in flight at the kill (p, or nil). It
// returns "" when the status is one the log allows, else what is wrong, and
// the fact to go on with.
func checkKey(key string, f keyFact, p *pending, st api.LockStatus) (string, keyFact) {
	h := st.Holder
	near := func(a, b time.Time) bool { d := a.Sub(b); return d < leaseSlack && d > -leaseSlack }
	switch {
	case f.token != 0 && h != nil && h.Token == f.token && near(h.ExpiresAt, f.expires):
		return "", keyFact{token: h.Token, expires: h.ExpiresAt, last: f.last} // as answered
	case p != nil && p.op == "renew" && f.token != 0 && h != nil && h.Token == f.token &&
		!h.ExpiresAt.Before(p.sentAt.Add(p.lease)) && !h.ExpiresAt.After(time.Now().Add(p.lease)):
		return "", keyFact{token: h.Token, expires: h.ExpiresAt, last: f.last} // the renew in flight was logged
	case p != nil && p.op == "release" && f.token != 0 && h == nil:
		return "", keyFact{last: f.last} // the release in flight was logged
	case f.token == 0 && h == nil:
		return "", f // free, as answered
	case p != nil && p.op == "acquire" && f.token == 0 && h != nil && h.Token > f.last &&
		!h.ExpiresAt.Before(p.sentAt.Add(p.lease)) && !h.ExpiresAt.After(time.Now().Add(p.lease)):
		return "", keyFact{token: h.Token, expires: h.ExpiresAt, last: h.Token} // the acquire in flight was logged
	}
	var inflight string
	if p != nil {
		inflight = fmt.Sprintf("; in flight at the kill: %s token %d", p.op, p.token)
	}
	return fmt.Sprintf("%s: after the restart %+v (holder %+v); answered before the kill: token %d until %v%s",
		key, st, h, f.token, f.expires.Format(time.RFC3339Nano), inflight), f
}

// TestKill9KeepsEveryAnsweredChange: clients grant, renew and release
// their own keys while the node is killed (kill -9) at random moments and
// restarted on the same data_dir, six times, in each fsync mode twice.
// After each restart every key is as the last answer before the kill left
// it (held under the answered token and lease, or free), or as the change
// in flight at the kill would have made it; tokens go on above every token
// answered.
func TestKill9KeepsEveryAnsweredChange(t *testing.T) {
	needBinary(t)
	dir, addr := t.TempDir(), freeAddr(t)
	const workers, keysEach = 6, 5
	const lease = 5 * time.Minute
	facts := make([][]keyFact, workers)
	for w := range facts {
		facts[w] = make([]keyFact, keysEach)
	}
	keyName := func(w, k int) string { return fmt.Sprintf("w%d-k%d", w, k) }
	var maxToken uint64
	rng := rand.New(rand.NewPCG(rand.Uint64(), 12))
	modes := []string{"always", "interval", "never"}
	answered := 0
	for cycle := range 6 {
		n := startServeAt(t, addr, dir, nil, "--fsync", modes[cycle%3])
		lc := newLockCaller(n.url)
		if cycle > 0 {
			// Tokens rise above every token answered before.
			code, g, err := lc.call(http.MethodPost, "/locks/probe?wait=0.001&lease=1")
			if err != nil || code != http.StatusOK || g.Token <= maxToken {
				t.Fatalf("cycle %d: a new grant: %d %v token %d, want 200 above %d", cycle, code, err, g.Token, maxToken)
			}
			if code, _, err := lc.call(http.MethodDelete, fmt.Sprintf("/locks/probe?token=%d", g.Token)); err != nil || code != http.StatusOK {
				t.Fatalf("cycle %d: releasing the probe: %d %v", cycle, code, err)
			}
			maxToken = g.Token
		}
		inflight := make([][]*pending, workers)
		var wg sync.WaitGroup
		var mu sync.Mutex // guards maxToken, answered, failures
		var failures []string
		for w := range workers {
			inflight[w] = make([]*pending, keysEach)
			wrng := rand.New(rand.NewPCG(rng.Uint64(), uint64(w)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					k := wrng.IntN(keysEach)
					f := &facts[w][k]
					key := keyName(w, k)
					var p pending
					var path string
					switch {
					case f.token == 0:
						p = pending{op: "acquire", lease: lease}
						path = fmt.Sprintf("/locks/%s?wait=0.001&lease=%d", key, int(lease.Seconds()))
					case wrng.IntN(2) == 0:
						p = pending{op: "renew", token: f.token, lease: lease}
						path = fmt.Sprintf("/locks/%s?token=%d&lease=%d", key, f.token, int(lease.Seconds()))
					default:
						p = pending{op: "release", token: f.token}
						path = fmt.Sprintf("/locks/%s?token=%d", key, f.token)
					}
					method := map[string]string{"acquire": http.MethodPost, "renew": http.MethodPatch, "release": http.MethodDelete}[p.op]
					p.sentAt = time.Now()
					code, g, err := lc.call(method, path)
					if err != nil {
						inflight[w][k] = &p // the node died: no answer
						return
					}
					mu.Lock()
					switch {
					case code != http.StatusOK:
						failures = append(failures, fmt.Sprintf("%s %s: %d", method, path, code))
					case p.op == "release":
						f.token, f.expires = 0, time.Time{}
					default:
						if p.op == "acquire" && g.Token <= f.last {
							failures = append(failures, fmt.Sprintf("%s: token %d not above %d", key, g.Token, f.last))
						}
						f.token, f.expires, f.last = g.Token, g.ExpiresAt, max(f.last, g.Token)
						maxToken = max(maxToken, g.Token)
					}
					answered++
					stop := code != http.StatusOK
					mu.Unlock()
					if stop {
						return
					}
				}
			}()
		}
		time.Sleep(time.Duration(200+rng.IntN(800)) * time.Millisecond)
		if err := n.cmd.Process.Kill(); err != nil { // kill -9
			t.Fatal(err)
		}
		<-n.exited
		wg.Wait()
		lc.close()
		if len(failures) > 0 {
			t.Fatalf("cycle %d: answers other than 200 on a node's own keys:\n%s", cycle, strings.Join(failures, "\n"))
		}

		n = startServeAt(t, addr, dir, nil, "--fsync", modes[(cycle+1)%3])
		var wrong []string
		for w := range workers {
			for k := range keysEach {
				msg, f := checkKey(keyName(w, k), facts[w][k], inflight[w][k], n.status(keyName(w, k)))
				if msg != "" {
					wrong = append(wrong, msg)
				}
				facts[w][k] = f
				maxToken = max(maxToken, f.last)
			}
		}
		if len(wrong) > 0 {
			t.Fatalf("cycle %d (fsync %s), after kill -9 and a restart:\n%s", cycle, modes[cycle%3], strings.Join(wrong, "\n"))
		}
		if code := n.stop(); code != 0 {
			t.Fatalf("exit %d", code)
		}
	}
	if answered < 200 {
		t.Fatalf("only %d changes answered over the cycles: the load did not run", answered)
	}
	t.Logf("%d changes answered over 6 kills", answered)
}

// TestSigintRestartKeepsHolders: holders survive SIGINT and a restart with
// their tokens and leases, their tokens still release them, and new tokens
// are above theirs; a lease that ran out while the node was down has ended,
// and its key passes to nobody until someone asks.
func TestSigintRestartKeepsHolders(t *testing.T) {
	needBinary(t)
	dir, addr := t.TempDir(), freeAddr(t)
	n := startServeAt(t, addr, dir, nil)
	lc := newLockCaller(n.url)
	defer lc.close()
	held := map[string]api.Grant{}
	for i := range 10 {
		key := fmt.Sprintf("long%d", i)
		code, g, err := lc.call(http.MethodPost, "/locks/"+key+"?lease=600")
		if err != nil || code != http.StatusOK {
			t.Fatalf("acquire %s: %d %v", key, code, err)
		}
		held[key] = g
	}
	code, short, err := lc.call(http.MethodPost, "/locks/short?lease=1")
	if err != nil || code != http.StatusOK {
		t.Fatalf("acquire short: %d %v", code, err)
	}
	if err := n.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	<-n.exited
	time.Sleep(time.Until(short.ExpiresAt) + 100*time.Millisecond) // the short lease runs out while down

	n = startServeAt(t, addr, dir, nil)
	var top uint64
	for key, g := range held {
		st := n.status(key)
		if st.Holder == nil || st.Holder.Token != g.Token || st.Holder.ExpiresAt.Sub(g.ExpiresAt).Abs() > leaseSlack {
			t.Fatalf("%s after SIGINT and a restart: %+v (holder %+v); want token %d until %v", key, st, st.Holder, g.Token, g.ExpiresAt)
		}
		top = max(top, g.Token)
	}
	if st := n.status("short"); st.Holder != nil {
		t.Fatalf("short: lease ended while the node was down, still held: %+v", st.Holder)
	}
	lc2 := newLockCaller(n.url)
	defer lc2.close()
	for key, g := range held {
		if code, _, err := lc2.call(http.MethodDelete, fmt.Sprintf("/locks/%s?token=%d", key, g.Token)); err != nil || code != http.StatusOK {
			t.Fatalf("release %s with its token from before the restart: %d %v", key, code, err)
		}
	}
	code, g, err := lc2.call(http.MethodPost, "/locks/short?wait=0.001")
	if err != nil || code != http.StatusOK || g.Token <= max(top, short.Token) {
		t.Fatalf("short after the restart: %d %v token %d; want granted above %d", code, err, g.Token, max(top, short.Token))
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// fillDisk fills the file system of dir with a file of zeros until it
// has no room left (ENOSPC), and returns the file's path: removing it
// frees the room.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 4096)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			return filler
		}
	}
}

// TestFullDiskRefusesChanges: with data_dir on a small tmpfs (mounted by
// the test, root as in CI) filled up, changes are answered 503 with
// Retry-After, an error line is logged and baton_log_healthy is 0, while
// reads go on; once space is freed the node takes changes again by itself.
func TestFullDiskRefusesChanges(t *testing.T) {
	needBinary(t)
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	mount(t, dir, 0, "size=1m")
	n := startServe(t, dir, nil)
	lc := newLockCaller(n.url)
	defer lc.close()
	code, held, err := lc.call(http.MethodPost, "/locks/held?lease=600")
	if err != nil || code != http.StatusOK {
		t.Fatalf("acquire: %d %v", code, err)
	}
	filler := fillDisk(t, dir)

	// Changes until one is refused: the log's buffered tail may take a
	// few before its write fails.
	var res *http.Response
	refused := ""
	for i := 0; ; i++ {
		var body string
		refused = fmt.Sprintf("full%d", i)
		res, body = get(t, http.MethodPost, fmt.Sprintf("%s/locks/%s?lease=600&wait=0.001", n.url, refused))
		if res.StatusCode == http.StatusServiceUnavailable {
			if !strings.Contains(body, api.CodeUnavailable) {
				t.Fatalf("503 without code %q: %s", api.CodeUnavailable, body)
			}
			break
		}
		if res.StatusCode != http.StatusOK || i > 1000 {
			t.Fatalf("change %d on a full disk: %d %s", i, res.StatusCode, body)
		}
	}
	if res.Header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	for _, path := range []string{fmt.Sprintf("/locks/held?token=%d", held.Token), fmt.Sprintf("/locks/held?token=%d&lease=60", held.Token)} {
		method := map[bool]string{true: http.MethodDelete, false: http.MethodPatch}[!strings.Contains(path, "lease")]
		if res, body := get(t, method, n.url+path); res.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("%s %s on a full disk: %d %s, want 503", method, path, res.StatusCode, body)
		}
	}
	if st := n.status("held"); st.Holder == nil || st.Holder.Token != held.Token {
		t.Fatalf("read on a full disk: %+v, want held by %d", st, held.Token)
	}
	if m := scrape(t, n.url); m["baton_log_healthy"] != 0 {
		t.Fatalf("baton_log_healthy = %v on a full disk, want 0", m["baton_log_healthy"])
	}
	if s := n.stderr.String(); !strings.Contains(s, "level=ERROR") || !strings.Contains(s, "no space left on device") {
		t.Fatalf("no error line naming the full disk:\n%s", s)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	eventually(t, "changes after space was freed", func() string {
		res, body := get(t, http.MethodPatch, fmt.Sprintf("%s/locks/held?token=%d&lease=60", n.url, held.Token))
		if res.StatusCode != http.StatusOK {
			return fmt.Sprintf("renew: %d %s", res.StatusCode, body)
		}
		return ""
	})
	if m := scrape(t, n.url); m["baton_log_healthy"] != 1 {
		t.Fatalf("baton_log_healthy = %v after recovery, want 1", m["baton_log_healthy"])
	}
	// The acquire answered 503 holds nothing once the log writes again:
	// its grant, caught by the failure, was taken back (it held the key,
	// unknown to anyone, for its 600 s lease).
	eventually(t, "the refused acquire's key free after recovery", func() string {
		if st := n.status(refused); st.Holder != nil {
			return fmt.Sprintf("%s held by %d, whose acquire was answered 503", refused, st.Holder.Token)
		}
		return ""
	})
	if res, body := get(t, http.MethodDelete, fmt.Sprintf("%s/locks/held?token=%d", n.url, held.Token)); res.StatusCode != http.StatusOK {
		t.Fatalf("release after recovery: %d %s", res.StatusCode, body)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestFullDiskTakeBackSurvivesKill9: acquires caught by a full disk are
// answered 503 ("nothing was changed") and their grants taken back; a
// node killed (kill -9) the moment its log writes again must not hold
// those keys after its restart. Before, the recovery wrote the grants
// the failure had left pending and their releases only a retry (250 ms)
// later: killed in between, the node restarted holding every such key by
// a grant nobody was told of, for its whole lease (a tester: 50 of 50
// keys, 5 of 5 trials).
func TestFullDiskTakeBackSurvivesKill9(t *testing.T) {
	needBinary(t)
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	mount(t, dir, 0, "size=1m")
	// A token mark an hour ahead of the clock: tokens then go on from it
	// one by one, and the mark need not be written again for half a
	// million grants. Otherwise its next write (every half second at this
	// rate) may be the first to find the disk full, and then no grant
	// reaches the log to be caught by its failure.
	// (Written over the one a first start leaves beside its log: a mark
	// without a log is a removed log.)
	if code := startServe(t, dir, nil).stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	if err := os.WriteFile(filepath.Join(dir, "token-hwm"), []byte(strconv.FormatUint(ahead, 10)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n := startServe(t, dir, nil)
	// The first grant writes the mark once more, above it (by a margin).
	warm := newLockCaller(n.url)
	if code, _, err := warm.call(http.MethodPost, "/locks/first?lease=600&wait=0.001"); err != nil || code != http.StatusOK {
		t.Fatalf("first acquire: %d %v", code, err)
	}
	warm.close()
	// Clients acquire fresh keys without a pause while the disk fills, so
	// that the log's write fails with grants in it. Long keys and owners
	// fill the log's last page within a few grants.
	pad := strings.Repeat("p", 200)
	owner := strings.Repeat("o", 128) // the longest owner
	var mu sync.Mutex
	var refused []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lc := newLockCaller(n.url)
			defer lc.close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("c%d-%d-%s", c, i, pad)
				code, _, err := lc.call(http.MethodPost, "/locks/"+key+"?lease=600&wait=0.001&owner="+owner)
				switch {
				case err != nil:
					t.Errorf("acquire %s: %v", key, err)
					return
				case code == http.StatusServiceUnavailable:
					mu.Lock()
					refused = append(refused, key)
					mu.Unlock()
				case code != http.StatusOK:
					t.Errorf("acquire %s: %d", key, code)
					return
				}
			}
		}()
	}
	filler := fillDisk(t, dir)
	const failed, recovered = "wal: write failed", "writes succeed again"
	for end := time.Now().Add(10 * time.Second); !strings.Contains(n.stderr.String(), failed); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the log never failed on the full disk:\n%s", n.stderr)
		}
	}
	time.Sleep(1500 * time.Millisecond) // the changes caught wait 1 s for the log, then 503
	close(stop)
	wg.Wait()
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); !strings.Contains(n.stderr.String(), recovered); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the log never wrote again:\n%s", n.stderr)
		}
	}
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n.exited
	if len(refused) == 0 {
		t.Fatal("no acquire was refused on the full disk")
	}
	n = startServe(t, dir, nil)
	defer n.stop()
	held := 0
	for _, key := range refused {
		if st := n.status(key); st.Holder != nil {
			held++
			t.Errorf("%s is held (token %d) after the restart; its acquire was answered 503, nothing changed", key, st.Holder.Token)
		}
	}
	t.Logf("%d acquires refused, %d of them held after the restart", len(refused), held)
}

// TestHistoryUnderKill9: clients loop acquire, hold, release (the Go
// client and plain HTTP/1.1, history.Loop) on a few keys of one node that is killed (kill -9)
// and restarted on its data_dir every 1 to 3 s. The history checker (the
// cluster tests' own, internal/history), without fault windows because a
// single node with its log has none, finds no two holders of a key at
// once, tokens rising per key, and no holder told its lock was gone before
// its lease could have run out.
func TestHistoryUnderKill9(t *testing.T) {
	needBinary(t)
	dir, addr := t.TempDir(), freeAddr(t)
	loop := history.Loop{Keys: history.PlainKeys("h0", "h1", "h2"), Lease: 3 * time.Second, Wait: 10 * time.Second,
		Hold: 20 * time.Millisecond, Seed: 99}
	n := startServeAt(t, addr, dir, nil)

	h := &history.Recorder{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 6 {
		cl, err := api.NewClient(api.Config{Addresses: []string{n.url}, ReconnectInterval: 50 * time.Millisecond, DialTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c history.Client = history.Official(cl)
			if i%2 == 1 {
				// Every other client speaks plain HTTP/1.1.
				h1 := history.NewH1([]string{n.url})
				h1.Text = i%4 == 3
				defer h1.Close()
				c = h1
			}
			loop.Run(c, i, stop, h)
		}()
	}
	rng := rand.New(rand.NewPCG(rand.Uint64(), 3))
	kills := 0
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); {
		time.Sleep(time.Duration(1000+rng.IntN(2000)) * time.Millisecond)
		if err := n.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-n.exited
		kills++
		n = startServeAt(t, addr, dir, nil)
	}
	close(stop)
	wg.Wait()

	grants, errs := h.Grants(), h.Errs()
	if len(grants) < 50 {
		t.Fatalf("only %d grants in %d kills (errors: %v)", len(grants), kills, errs)
	}
	bad, _, _ := history.Check(grants, nil)
	for _, v := range bad {
		t.Error(v)
	}
	t.Logf("%d grants, %d kills, %d client errors", len(grants), kills, len(errs))
}

// TestWaiterWithIdempotencyKeySurvivesKill9: a waiter queued with an
// Idempotency-Key keeps its place through kill -9 and a restart: its
// client repeats the acquire with the same key and is granted before an
// acquire that came after the restart.
func TestWaiterWithIdempotencyKeySurvivesKill9(t *testing.T) {
	needBinary(t)
	dir, addr := t.TempDir(), freeAddr(t)
	n := startServeAt(t, addr, dir, nil)
	lc := newLockCaller(n.url)
	defer lc.close()
	code, h, err := lc.call(http.MethodPost, "/locks/k?lease=2")
	if err != nil || code != http.StatusOK {
		t.Fatalf("holder: %d %v", code, err)
	}
	acquireWithKey := func(base string) (int, api.Grant, error) {
		req, _ := http.NewRequest(http.MethodPost, base+"/locks/k?wait=30&lease=60", nil)
		req.Header.Set(api.HeaderIdempotencyKey, "w1")
		c := &http.Client{Timeout: bound}
		defer c.CloseIdleConnections()
		res, err := c.Do(req)
		if err != nil {
			return 0, api.Grant{}, err
		}
		defer res.Body.Close()
		var g api.Grant
		if res.StatusCode == http.StatusOK {
			err = json.NewDecoder(res.Body).Decode(&g)
		}
		return res.StatusCode, g, err
	}
	parked := make(chan error, 1)
	go func() { _, _, err := acquireWithKey(n.url); parked <- err }()
	n.waitWaiters("k", 1)
	// Nothing was answered for the waiter's place: its record is written
	// in the background (within fsync_interval). Kill once it is.
	eventually(t, "the waiter's record written", func() string {
		if m := scrape(t, n.url); m["baton_log_records_written_total"] < m["baton_log_records_total"] {
			return fmt.Sprintf("%v of %v records written", m["baton_log_records_written_total"], m["baton_log_records_total"])
		}
		return ""
	})
	if err := n.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-n.exited
	if err := <-parked; err == nil {
		t.Fatal("the parked acquire was answered although the node was killed")
	}

	n = startServeAt(t, addr, dir, nil)
	if st := n.status("k"); st.Waiters != 1 && (st.Holder == nil || st.Holder.Token == h.Token) {
		t.Fatalf("k after the restart: %+v; want the waiter with its Idempotency-Key kept", st)
	}
	later := make(chan api.Grant, 1)
	go func() {
		lc2 := newLockCaller(n.url)
		defer lc2.close()
		_, g, _ := lc2.call(http.MethodPost, "/locks/k?wait=20&lease=1")
		later <- g
	}()
	eventually(t, "the later acquire queued", func() string {
		if st := n.status("k"); st.Waiters < 1 || (st.Waiters == 1 && st.Holder != nil && st.Holder.Token == h.Token) {
			return fmt.Sprintf("%+v", st)
		}
		return ""
	})
	// What the waiter asked for came back with it: the key with another
	// mode is not its repeat (422, nothing changed; the place is kept).
	other, _ := http.NewRequest(http.MethodPost, n.url+"/locks/k?wait=30&lease=60&mode=shared", nil)
	other.Header.Set(api.HeaderIdempotencyKey, "w1")
	oc := &http.Client{Timeout: bound}
	res, err := oc.Do(other)
	if err != nil {
		t.Fatal(err)
	}
	var eb api.Error
	_ = json.NewDecoder(res.Body).Decode(&eb)
	res.Body.Close()
	oc.CloseIdleConnections()
	if res.StatusCode != http.StatusUnprocessableEntity || eb.Code != api.CodeKeyReused || eb.Field != "mode" {
		t.Fatalf("the waiter's key in another mode after the restart: %d %+v; want 422 idempotency_key_reused naming mode", res.StatusCode, eb)
	}
	code, w, err := acquireWithKey(n.url)
	if err != nil || code != http.StatusOK || w.Token <= h.Token {
		t.Fatalf("the waiter's repeat after the restart: %d %v token %d; want granted above %d", code, err, w.Token, h.Token)
	}
	if code, _, err := lc.call(http.MethodDelete, fmt.Sprintf("/locks/k?token=%d", w.Token)); err != nil || code != http.StatusOK {
		t.Fatalf("release: %d %v", code, err)
	}
	if g := <-later; g.Token <= w.Token {
		t.Fatalf("the acquire made after the restart got token %d; want it after the waiter's %d", g.Token, w.Token)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
