package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

// The slots of a counting semaphore whose holders' clients are killed
// (kill -9 of `baton run`: no release, no renewal) come back when their
// leases run out, each to the first waiter in the same step as the
// expiry that freed it, in queue order: the waiters' grants rise in the
// order they queued, and the key's events show every expiry followed at
// once by its grant. Replays redisson/redisson#2045 and #4462 (an
// RSemaphore held by a machine that went down is never released),
// hazelcast/hazelcast#16810 (an ISemaphore held by a member killed with
// kill -9 stays taken) and apache/curator#1112 (CURATOR-595: the permits
// of a client that lost its session were not given to the others).
func TestSemaphoreSlotsOfKilledClientsGoToWaitersInOrder(t *testing.T) {
	needBinary(t)
	n := startServeAt(t, testproc.FreeAddr(t, "127.0.0.61"), t.TempDir(), nil)
	c := apiClient(t, n.url)
	// The dead holders' leases are short, yet long enough that no
	// renewal a loaded machine delays ends one before the waiters queue.
	var dead []*runProc
	for i := range 3 {
		p := startRun(t, n.url, "pool", "--limit", "3", "--lease", "3", "--owner", fmt.Sprint("dead-", i), "--",
			"sh", "-c", "echo ready; exec sleep 600")
		p.stdout.waitFor(t, "ready\n")
		dead = append(dead, p)
	}
	var waiters []*runProc
	for i := range 3 {
		waiters = append(waiters, startRun(t, n.url, "pool", "--limit", "3", "--lease", "30", "--owner", fmt.Sprint("w-", i), "--",
			"sh", "-c", "echo granted; exec sleep 600"))
		n.waitWaiters("pool", i+1)
	}
	for _, p := range dead {
		if err := p.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range waiters {
		p.stdout.waitFor(t, "granted\n")
	}
	st := n.status("pool")
	var owners []string
	for _, h := range st.Holders {
		owners = append(owners, h.Owner)
	}
	if !slices.Equal(owners, []string{"w-0", "w-1", "w-2"}) || st.Waiters != 0 || st.Limit != 3 {
		t.Fatalf("pool after the dead holders' leases ran out: holders %v (oldest grant first), %d waiters, limit %d; want w-0, w-1, w-2 in queue order, none waiting, limit 3", owners, st.Waiters, st.Limit)
	}
	evs, err := c.Events(t.Context(), api.EventsOptions{Key: "pool"})
	if err != nil {
		t.Fatal(err)
	}
	var seq []string
	for _, ev := range evs.Events {
		if ev.Kind == api.EventRenew {
			continue
		}
		seq = append(seq, ev.Kind+":"+ev.Owner)
	}
	got := strings.Join(seq, " ")
	// The expiries come in the order the dead holders' leases end, which
	// is not fixed; each is followed by the grant to the next waiter.
	var tail []string
	for i := len(seq) - 6; i >= 0 && i < len(seq); i++ {
		tail = append(tail, seq[i])
	}
	for i := 0; i+1 < len(tail); i += 2 {
		if !strings.HasPrefix(tail[i], api.EventExpire+":dead-") || tail[i+1] != fmt.Sprintf("%s:w-%d", api.EventGrant, i/2) {
			t.Fatalf("events of pool: %s; want each dead holder's expiry followed at once by the grant to the next waiter, w-0 first", got)
		}
	}
}

// Holders, modes, limits and owners, and the queue with its waiters'
// modes and owners, are the same on the new active after a failover
// (kill -9 of the active of two nodes), and tokens keep rising there:
// the queued writer still holds back the reader queued behind it and is
// granted when the replicated readers release on the new active.
// Replays apache/curator#835 (CURATOR-315: a reconnect during an acquire
// left an orphaned lease node, so the semaphore stayed full),
// apache/curator#1112 (CURATOR-595) and hashicorp/consul#1290 ("consul
// lock loses a lock when 1 node from a cluster of 3 is down") against
// baton's semaphore and read/write lock.
func TestModesAndQueueSurviveFailoverWithRisingTokens(t *testing.T) {
	needBinary(t)
	a1, a2 := testproc.FreeAddr(t, "127.0.0.62"), testproc.FreeAddr(t, "127.0.0.63")
	peers := "--peers=http://" + a1 + ",http://" + a2
	n1 := startServeAt(t, a1, t.TempDir(), nil, peers, "--advertise=http://"+a1)
	n2 := startServeAt(t, a2, t.TempDir(), nil, peers, "--advertise=http://"+a2)
	eventually(t, "the standby synced", func() string {
		res, _ := get(t, "GET", n2.url+"/locks")
		if res.StatusCode == http.StatusOK && res.Header.Get(api.HeaderReplicaLag) != "" {
			return ""
		}
		return "not yet"
	})
	var top uint64
	post := func(n *serveProc, q string) api.Grant {
		t.Helper()
		res, body := get(t, "POST", n.url+q)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", q, res.StatusCode, body)
		}
		var g api.Grant
		if err := json.Unmarshal([]byte(body), &g); err != nil {
			t.Fatal(err)
		}
		if g.Token <= top {
			t.Fatalf("POST %s: token %d, not above %d, the highest answered before", q, g.Token, top)
		}
		top = g.Token
		return g
	}
	post(n1, "/locks/sem?lease=600&limit=3&owner=job-1")
	post(n1, "/locks/sem?lease=600&owner=job-2")
	r1 := post(n1, "/locks/rw?lease=600&mode=shared&owner=reader-1")
	r2 := post(n1, "/locks/rw?lease=600&mode=shared&owner=reader-2")
	c, err := api.NewClient(api.Config{Addresses: []string{n1.url, n2.url}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	type got struct {
		l   *api.Lock
		err error
	}
	acquire := func(opts ...api.AcquireOption) <-chan got {
		ch := make(chan got, 1)
		go func() {
			l, err := c.Acquire(t.Context(), "rw", append(opts, api.WithLease(600*time.Second))...)
			ch <- got{l, err}
		}()
		return ch
	}
	writer := acquire(api.WithOwner("writer"))
	n1.waitWaiters("rw", 1)
	reader3 := acquire(api.WithShared(), api.WithOwner("reader-3"))
	n1.waitWaiters("rw", 2)
	same := func(a, b api.LockStatus) string {
		if a.Limit != b.Limit || len(a.Holders) != len(b.Holders) || a.Waiters != b.Waiters ||
			a.OldestWaiterOwner != b.OldestWaiterOwner || a.OldestWaiterMode != b.OldestWaiterMode {
			return fmt.Sprintf("limit %d, %d holders, %d waiters (first %q %q); want %d, %d, %d (%q %q)",
				a.Limit, len(a.Holders), a.Waiters, a.OldestWaiterOwner, a.OldestWaiterMode,
				b.Limit, len(b.Holders), b.Waiters, b.OldestWaiterOwner, b.OldestWaiterMode)
		}
		for i, x := range a.Holders {
			y := b.Holders[i]
			// A lease runs on each node's monotonic clock; its expires_at
			// is that deadline read on the wall clock at the answer, and a
			// node takes a new offset between the two when they drift
			// apart by over a millisecond (engine's offsetSlack): the
			// promoted node read one 6 ms later than the old active once
			// (CI of 21483c6, a loaded VM). A second covers that, and
			// still tells a lease restarted or lost.
			if d := x.ExpiresAt.Sub(y.ExpiresAt); x.Token != y.Token || x.Owner != y.Owner || x.Mode != y.Mode || d > time.Second || d < -time.Second {
				return fmt.Sprintf("holder %d is %+v; want %+v", i, x, y)
			}
		}
		return ""
	}
	want := map[string]api.LockStatus{"sem": n1.status("sem"), "rw": n1.status("rw")}
	if st := want["rw"]; st.OldestWaiterOwner != "writer" || st.OldestWaiterMode != api.ModeExclusive {
		t.Fatalf("rw on the active: %+v; want the writer first in the queue", st)
	}
	eventually(t, "the state replicated", func() string {
		for k, st := range want {
			if msg := same(n2.status(k), st); msg != "" {
				return k + ": " + msg
			}
		}
		return ""
	})
	if err := n1.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the standby promoted", func() string {
		if res, _ := get(t, "GET", n2.url+"/readyz"); res.StatusCode != http.StatusOK {
			return "not active yet"
		}
		return ""
	})
	for k, st := range want {
		if msg := same(n2.status(k), st); msg != "" {
			t.Fatalf("%s on the new active: %s", k, msg)
		}
	}
	post(n2, "/locks/sem?lease=600&owner=job-3")
	if res, body := get(t, "POST", n2.url+"/locks/sem?wait=0.1"); res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a 4th holder of sem (limit 3) on the new active: %d %s; want 408", res.StatusCode, body)
	}
	if res, body := get(t, "POST", n2.url+"/locks/sem?limit=4"); res.StatusCode != http.StatusConflict {
		t.Fatalf("another limit on sem on the new active: %d %s; want 409", res.StatusCode, body)
	}
	if res, body := get(t, "POST", n2.url+"/locks/rw?mode=shared&wait=0.1"); res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a reader arriving behind the queued writer on the new active: %d %s; want 408", res.StatusCode, body)
	}
	for _, tok := range []uint64{r1.Token, r2.Token} {
		if res, body := get(t, "DELETE", n2.url+"/locks/rw?token="+strconv.FormatUint(tok, 10)); res.StatusCode != http.StatusOK {
			t.Fatalf("release of a replicated reader on the new active: %d %s", res.StatusCode, body)
		}
	}
	w := <-writer
	if w.err != nil {
		t.Fatalf("the writer: %v", w.err)
	}
	if w.l.Token <= top {
		t.Fatalf("the writer's token %d on the new active, not above %d", w.l.Token, top)
	}
	top = w.l.Token
	if st := n2.status("rw"); len(st.Holders) != 1 || st.Holders[0].Owner != "writer" || st.Holders[0].Mode != api.ModeExclusive ||
		st.Waiters != 1 || st.OldestWaiterOwner != "reader-3" {
		t.Fatalf("rw with the writer granted: %+v; want the writer alone, reader-3 waiting", st)
	}
	if err := w.l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	r3 := <-reader3
	if r3.err != nil || r3.l.Token <= top {
		t.Fatalf("reader-3: %+v %v; want a grant above %d", r3.l, r3.err, top)
	}
	_ = r3.l.Release(t.Context())
	if code := n2.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
}

// A single node killed (kill -9) and restarted on its data_dir comes back
// with its holders (tokens, modes, owners, leases), limits and queue: the
// queued writer, first, still holds back a reader that arrives after the
// restart; the writer's repeat (same Idempotency-Key) takes its place
// back and is granted, above every token answered before the crash, once
// the readers release. Replays apache/curator#835 (CURATOR-315) and
// redisson/redisson#3891 (a writer queued behind a released lock that
// was never woken) across a crash of the lock service itself.
func TestModesAndQueueSurviveKillRestart(t *testing.T) {
	needBinary(t)
	dir, addr := t.TempDir(), testproc.FreeAddr(t, "127.0.0.64")
	n := startServeAt(t, addr, dir, nil)
	var top uint64
	post := func(q string, hdr ...string) api.Grant {
		t.Helper()
		res, body := get(t, "POST", n.url+q, hdr...)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %d %s", q, res.StatusCode, body)
		}
		var g api.Grant
		if err := json.Unmarshal([]byte(body), &g); err != nil {
			t.Fatal(err)
		}
		if g.Token <= top {
			t.Fatalf("POST %s: token %d, not above %d, the highest answered before", q, g.Token, top)
		}
		top = g.Token
		return g
	}
	post("/locks/sem?lease=600&limit=3&owner=job-1")
	post("/locks/sem?lease=600&owner=job-2&mode=exclusive")
	r1 := post("/locks/rw?lease=600&mode=shared&owner=reader-1")
	r2 := post("/locks/rw?lease=600&mode=shared&owner=reader-2")
	queue := func(q, id string) {
		go func() {
			c := &http.Client{Timeout: bound}
			defer c.CloseIdleConnections()
			req, _ := http.NewRequest("POST", n.url+q, nil)
			req.Header.Set(api.HeaderIdempotencyKey, id)
			if res, err := c.Do(req); err == nil {
				res.Body.Close()
			}
		}()
	}
	queue("/locks/rw?lease=600&owner=writer", "writer-1")
	n.waitWaiters("rw", 1)
	queue("/locks/rw?lease=600&mode=shared&owner=reader-3", "reader-3")
	n.waitWaiters("rw", 2)
	// A waiter has been told nothing, so its enqueue need not be written
	// before the crash; a grant answered after it is, and with it every
	// change before it in the log.
	post("/locks/marker?lease=600")
	want := map[string]api.LockStatus{"sem": n.status("sem"), "rw": n.status("rw")}
	if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-n.exited
	n = startServeAt(t, addr, dir, nil)
	for k, w := range want {
		st := n.status(k)
		if st.Limit != w.Limit || len(st.Holders) != len(w.Holders) || st.Waiters != w.Waiters ||
			st.OldestWaiterOwner != w.OldestWaiterOwner || st.OldestWaiterMode != w.OldestWaiterMode {
			t.Fatalf("%s after kill -9 and a restart: %+v; want %+v", k, st, w)
		}
		for i, h := range st.Holders {
			x := w.Holders[i]
			if h.Token != x.Token || h.Owner != x.Owner || h.Mode != x.Mode || h.ExpiresAt.Sub(x.ExpiresAt).Abs() > leaseSlack {
				t.Fatalf("%s holder %d after the restart: %+v; want %+v", k, i, h, x)
			}
		}
	}
	if res, body := get(t, "POST", n.url+"/locks/rw?mode=shared&wait=0.1"); res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a reader arriving behind the queued writer after the restart: %d %s; want 408", res.StatusCode, body)
	}
	// The writer's client comes back: its repeat resumes its place (or,
	// should the readers release first, claims the grant made to it).
	writer := make(chan api.Grant, 1)
	go func() {
		c := &http.Client{Timeout: bound}
		defer c.CloseIdleConnections()
		req, _ := http.NewRequest("POST", n.url+"/locks/rw?lease=600&owner=writer", nil)
		req.Header.Set(api.HeaderIdempotencyKey, "writer-1")
		var g api.Grant
		if res, err := c.Do(req); err == nil {
			if res.StatusCode == http.StatusOK {
				_ = json.NewDecoder(res.Body).Decode(&g)
			}
			res.Body.Close()
		}
		writer <- g
	}()
	for _, tok := range []uint64{r1.Token, r2.Token} {
		if res, body := get(t, "DELETE", n.url+"/locks/rw?token="+strconv.FormatUint(tok, 10)); res.StatusCode != http.StatusOK {
			t.Fatalf("release of a reader after the restart: %d %s", res.StatusCode, body)
		}
	}
	g := <-writer
	if g.Token <= top {
		t.Fatalf("the writer after the restart: token %d; want a grant above %d", g.Token, top)
	}
	if st := n.status("rw"); len(st.Holders) != 1 || st.Holders[0].Owner != "writer" || st.Holders[0].Mode != api.ModeExclusive {
		t.Fatalf("rw: %+v; want the writer alone", st)
	}
	if code := n.stop(); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
}
