package cluster

// The fast tier: several cluster nodes in this test process, each a real
// engine and a real Node serving its peer endpoints on 127.0.0.1, over
// transports whose links the test cuts and heals. A cut link refuses new
// connections both ways and closes the open ones (polls, calls and
// replication streams), as a partition does. The process tests
// (harness_test.go) stay the outer tier: kill -9, SIGSTOP, real binaries.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/wal"
)

// Fast timings for the in-process tier.
const (
	memHeartbeat = 50 * time.Millisecond
	memFailover  = 400 * time.Millisecond
)

// links is the network between the nodes of a memCluster: which links are
// cut, and the open connections of each directed link (dialer, listener).
type links struct {
	mu    sync.Mutex
	addrs map[string]int // listen address -> node index
	cut   map[[2]int]bool
	conns map[[2]int]map[net.Conn]struct{}
	// held are the nodes whose replication stream is held back
	// (holdStream); changed is closed and replaced when held or a
	// connection's closing changes.
	held    map[int]bool
	changed chan struct{}
}

var errCut = errors.New("link cut by the test")

// dial connects node from to the node listening at addr, unless their link
// is cut.
func (l *links) dial(ctx context.Context, from int, addr string) (net.Conn, error) {
	l.mu.Lock()
	to, ok := l.addrs[addr]
	cut := l.cut[[2]int{from, to}]
	l.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no node listens at %s", addr)
	}
	if cut {
		return nil, errCut
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	k := [2]int{from, to}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cut[k] { // cut while dialing
		c.Close()
		return nil, errCut
	}
	if l.conns[k] == nil {
		l.conns[k] = map[net.Conn]struct{}{}
	}
	tc := &trackedConn{Conn: c, l: l, k: k}
	l.conns[k][tc] = struct{}{}
	return tc, nil
}

// setCut cuts (or heals) the link between a and b, both ways; a cut closes
// its open connections.
func (l *links) setCut(a, b int, cut bool) {
	l.mu.Lock()
	var open []net.Conn
	for _, k := range [][2]int{{a, b}, {b, a}} {
		l.cut[k] = cut
		if cut {
			for c := range l.conns[k] {
				open = append(open, c)
			}
		}
	}
	l.mu.Unlock()
	for _, c := range open {
		c.Close()
	}
}

// holdStream holds back (hold) or releases the replication stream node i
// reads: its connection to the active delivers nothing while held, though
// the node's polls and calls go on, as a proxy holding one link back does
// (proxy.hold). What the active sent meanwhile is read once released,
// unless the connection is closed first.
func (l *links) holdStream(i int, hold bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held == nil {
		l.held = map[int]bool{}
	}
	l.held[i] = hold
	l.wakeLocked()
}

func (l *links) wakeLocked() {
	if l.changed != nil {
		close(l.changed)
	}
	l.changed = make(chan struct{})
}

type trackedConn struct {
	net.Conn
	l    *links
	k    [2]int
	once sync.Once
	// stream: the connection carries a replication stream (its request
	// was GET /_cluster/stream); closed: Close was called. Under l.mu.
	stream, closed bool
}

func (c *trackedConn) Write(p []byte) (int, error) {
	if bytes.HasPrefix(p, []byte("GET /_cluster/stream")) {
		c.l.mu.Lock()
		c.stream = true
		c.l.mu.Unlock()
	}
	return c.Conn.Write(p)
}

// Read waits while the connection is a held stream (links.holdStream),
// before it reads and again before it returns what it read: a read that
// began before the connection carried a stream (an idle connection's,
// which net/http keeps waiting on) delivers nothing while held either.
func (c *trackedConn) Read(p []byte) (int, error) {
	if err := c.waitHeld(); err != nil {
		return 0, err
	}
	k, err := c.Conn.Read(p)
	if k > 0 {
		if werr := c.waitHeld(); werr != nil {
			return 0, werr
		}
	}
	return k, err
}

// waitHeld waits while the connection is a held stream; net.ErrClosed
// once it is closed.
func (c *trackedConn) waitHeld() error {
	for {
		c.l.mu.Lock()
		held, closed := c.stream && c.l.held[c.k[0]], c.closed
		if c.l.changed == nil {
			c.l.changed = make(chan struct{})
		}
		ch := c.l.changed
		c.l.mu.Unlock()
		if closed {
			return net.ErrClosed
		}
		if !held {
			return nil
		}
		<-ch
	}
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns[c.k], c)
		c.closed = true
		c.l.wakeLocked()
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// memNode is one node of a memCluster.
type memNode struct {
	i       int
	url     string
	dir     string // the node's data_dir: its log and token file
	wal     *wal.Log
	eng     *engine.Engine
	node    *Node
	srv     *httptest.Server
	tr      *http.Transport
	started bool
	closed  bool
	// diskFull makes every write of the node's log fail (ENOSPC), as a
	// full disk does, while it is set (fullFile).
	diskFull atomic.Bool

	mu      sync.Mutex
	changes []string // OnChange kinds, in order
}

func (m *memNode) changed(kind string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := 0
	for _, c := range m.changes {
		if c == kind {
			k++
		}
	}
	return k
}

type memCluster struct {
	t     testing.TB
	links *links
	nodes []*memNode
	urls  []string
	log   *slog.Logger
	// opts change every node's Config.
	opts []func(*Config)
	// onEvent, if set before open, sees every node's engine events.
	onEvent func(node int, ev engine.Event)
	// logOpt, if set, changes every node's log Config.
	logOpt func(*wal.Config)
	// clocks, if set before open, are the engines' clocks by node (nil
	// or missing: the system clock).
	clocks map[int]engine.Clock
}

// newMemCluster sets up n nodes, priority in index order, started by
// start. Every goroutine they run must be gone when the test ends
// (goleak).
func newMemCluster(t testing.TB, n int, opts ...func(*Config)) *memCluster {
	t.Helper()
	return newMemClusterLog(t, n, nil, opts...)
}

// newMemClusterLog is newMemCluster with logOpt changing each node's log
// Config (nil: none).
func newMemClusterLog(t testing.TB, n int, logOpt func(*wal.Config), opts ...func(*Config)) *memCluster {
	t.Helper()
	return newMemClusterClocks(t, n, logOpt, nil, opts...)
}

// newMemClusterClocks is newMemClusterLog with clocks as the engines'
// clocks by node (missing: the system clock).
func newMemClusterClocks(t testing.TB, n int, logOpt func(*wal.Config), clocks map[int]engine.Clock, opts ...func(*Config)) *memCluster {
	t.Helper()
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) })
	c := &memCluster{t: t, opts: opts, logOpt: logOpt, clocks: clocks, links: &links{addrs: map[string]int{}, cut: map[[2]int]bool{}, conns: map[[2]int]map[net.Conn]struct{}{}}}
	for i := range n {
		mn := &memNode{i: i}
		mn.srv = httptest.NewUnstartedServer(nil)
		addr := mn.srv.Listener.Addr().String()
		c.links.addrs[addr] = i
		mn.url = "http://" + addr
		c.nodes = append(c.nodes, mn)
	}
	c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		c.log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	for _, mn := range c.nodes {
		mn.dir = t.TempDir()
		c.urls = append(c.urls, mn.url)
	}
	for i := range c.nodes {
		c.open(i)
	}
	t.Cleanup(c.closeAll)
	return c
}

// open builds node i (again, after closeNode: a restart): its log in its
// directory, replayed into a standby engine (snapshot, then the records
// the snapshot does not cover), and its cluster node, served on its
// address.
func (c *memCluster) open(i int) {
	t, mn := c.t, c.nodes[i]
	mn.closed, mn.started = false, false
	mn.tr = &http.Transport{
		DialContext:         func(ctx context.Context, _, addr string) (net.Conn, error) { return c.links.dial(ctx, i, addr) },
		MaxIdleConnsPerHost: 8,
	}
	wc := wal.DefaultConfig(filepath.Join(mn.dir, "log"))
	wc.Logger = c.log.With("node", i)
	wc.WrapFile = func(_ string, f wal.File) wal.File { return &fullFile{File: f, full: &mn.diskFull} }
	if c.logOpt != nil {
		c.logOpt(&wc)
	}
	l, err := wal.Open(wc)
	if err != nil {
		t.Fatal(err)
	}
	mn.wal = l
	sl := NewSyncLog(l)
	ec := engine.DefaultConfig()
	ec.DataDir, ec.Standby, ec.Shards, ec.Log = mn.dir, true, 16, sl
	ec.Clock = c.clocks[i]
	var nd atomic.Pointer[Node]
	ec.OnEvent = func(ev engine.Event) {
		if p := nd.Load(); p != nil {
			p.OnEvent(ev)
		}
		if f := c.onEvent; f != nil {
			f(i, ev)
		}
	}
	eng, err := engine.New(ec)
	if err != nil {
		t.Fatal(err)
	}
	mn.eng = eng
	replayLog(t, eng, l)
	cfg := Config{
		Self: mn.url, Peers: c.urls, Heartbeat: memHeartbeat, FailoverTimeout: memFailover,
		Secret: "mem-secret", Transport: mn.tr, Logger: c.log.With("node", i), Log: l, Sync: sl,
		IDFile: filepath.Join(mn.dir, IDFileName),
		OnChange: func(kind, _, _ string) {
			mn.mu.Lock()
			mn.changes = append(mn.changes, kind)
			mn.mu.Unlock()
		},
	}
	for _, o := range c.opts {
		o(&cfg)
	}
	mn.node, err = New(cfg, eng)
	if err != nil {
		t.Fatal(err)
	}
	nd.Store(mn.node)
	if mn.srv.URL != "" {
		// A restart: the same address again.
		ln, err := net.Listen("tcp", strings.TrimPrefix(mn.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		mn.srv = &httptest.Server{Listener: ln, Config: &http.Server{}}
	}
	mn.srv.Config.Handler = mn.node.Handler()
	mn.srv.Start()
}

// fullFile is a log file whose writes fail with ENOSPC while full is set.
type fullFile struct {
	wal.File
	full *atomic.Bool
}

func (f *fullFile) Write(p []byte) (int, error) {
	if f.full.Load() {
		return 0, syscall.ENOSPC
	}
	return f.File.Write(p)
}

func (f *fullFile) WriteAt(p []byte, off int64) (int, error) {
	if f.full.Load() {
		return 0, syscall.ENOSPC
	}
	return f.File.WriteAt(p, off)
}

// replayLog replays l into the standby engine eng as a node's start does
// (cmd/baton): the newest snapshot, then each record after it that the
// snapshot's dump does not cover.
func replayLog(t testing.TB, eng *engine.Engine, l *wal.Log) {
	t.Helper()
	index, r, err := l.LoadSnapshot()
	var dumps engine.Dumps
	switch {
	case errors.Is(err, wal.ErrNoSnapshot):
		index = 0
	case err != nil:
		t.Fatal(err)
	default:
		dumps, err = eng.LoadDump(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	err = l.Replay(index+1, func(i uint64, rec []byte) error {
		rr, err := engine.DecodeRecord(rec)
		if err != nil {
			return err
		}
		if eng.Covers(dumps, i, &rr) {
			return nil
		}
		return eng.Replay(rec)
	})
	if err != nil {
		t.Fatal(err)
	}
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func (c *memCluster) start(is ...int) {
	for _, i := range is {
		c.nodes[i].node.Start()
		c.nodes[i].started = true
	}
}

// closeNode stops node i as a shutdown does: an active hands off first.
func (c *memCluster) closeNode(i int) {
	mn := c.nodes[i]
	if mn.closed {
		return
	}
	mn.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if mn.started {
		_ = mn.node.Close(ctx)
	}
	mn.srv.CloseClientConnections()
	mn.srv.Close()
	mn.tr.CloseIdleConnections()
	if err := mn.eng.Close(); err != nil {
		c.t.Errorf("node %d: engine close: %v", i, err)
	}
	if err := mn.wal.Close(); err != nil {
		c.t.Errorf("node %d: log close: %v", i, err)
	}
}

func (c *memCluster) closeAll() {
	for i := range c.nodes {
		c.closeNode(i)
	}
}

// isolate cuts node i off from every other node (heal: join it again).
func (c *memCluster) isolate(i int, cut bool) {
	for j := range c.nodes {
		if j != i {
			c.links.setCut(i, j, cut)
		}
	}
}

// actives returns the nodes whose engines serve as the active.
func (c *memCluster) actives() []int {
	var as []int
	for i, mn := range c.nodes {
		if !mn.closed && mn.eng.Active() {
			as = append(as, i)
		}
	}
	return as
}

// waitFor polls cond until it holds, failing the test after 15 s (a bound
// for a loaded machine, not a timing claim).
func (c *memCluster) waitFor(what string, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for %s; actives %v; views:\n%s", what, c.actives(), c.views())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitActive waits until node i is the one active among the nodes in
// among (all when empty), and every other of them follows it synced.
func (c *memCluster) waitActive(i int, among ...int) {
	c.t.Helper()
	if len(among) == 0 {
		for j := range c.nodes {
			among = append(among, j)
		}
	}
	c.waitFor(fmt.Sprintf("node %d active among %v", i, among), func() bool {
		for _, j := range among {
			mn := c.nodes[j]
			mn.node.mu.Lock()
			ok := mn.eng.Active() == (j == i)
			if j != i {
				ok = ok && mn.node.following == c.nodes[i].url && mn.node.synced
			}
			mn.node.mu.Unlock()
			if !ok {
				return false
			}
		}
		return true
	})
}

func (c *memCluster) views() string {
	var b strings.Builder
	for i, mn := range c.nodes {
		st := mn.node.status()
		fmt.Fprintf(&b, "  node %d: role %s active %q state_token %d epoch %d\n", i, st.Role, st.Active, st.StateToken, st.Epoch)
	}
	return b.String()
}

// grant acquires key on node i's engine, which must be the active.
func (c *memCluster) grant(i int, key string) engine.Grant {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	g, err := c.nodes[i].eng.Acquire(ctx, engine.AcquireRequest{Key: key, Lease: time.Minute})
	if err != nil {
		c.t.Fatalf("acquire %s on node %d: %v", key, i, err)
	}
	return g
}

// snapshotLog saves a snapshot of node i's state at its log's last index,
// so that its log's records before it may go (with a small SegmentSize:
// a standby that starts afterwards syncs by a snapshot).
func (c *memCluster) snapshotLog(i int) {
	c.t.Helper()
	l := c.nodes[i].wal
	err := l.SaveSnapshot(l.LastIndex(), func(w io.Writer) error {
		_, err := c.nodes[i].eng.WriteDump(w, l.LastIndex)
		return err
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// holds reports node i's holder of key by its token (0 = free).
func (c *memCluster) holds(i int, key string) uint64 {
	info, err := c.nodes[i].eng.Status(key)
	if err != nil || info.Holder == nil {
		return 0
	}
	return info.Holder.Token
}

// A fresh cluster elects its highest-priority node, which the others follow;
// the peer endpoints refuse a request without the cluster secret.
func TestMemClusterElectsTheHighestPriority(t *testing.T) {
	c := newMemCluster(t, 3)
	c.start(0, 1, 2)
	c.waitActive(0)
	g := c.grant(0, "k")
	c.waitFor("the grant replicated", func() bool { return c.holds(1, "k") == g.Token && c.holds(2, "k") == g.Token })
	if got := c.nodes[0].changed("promote"); got != 1 {
		t.Errorf("node 0 promoted %d times, want 1", got)
	}
	resp, err := http.Get(c.nodes[1].url + PathPrefix + "/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a peer call without the secret: %d, want 401", resp.StatusCode)
	}
}

// The active's links are cut: the best standby takes over with what was
// replicated; when the links heal, the cut-off node, whose state is older,
// steps down and resyncs, then takes the role back through a handoff as
// the highest priority, with the new active's grants.
func TestMemFailoverWhenTheActiveIsCutOff(t *testing.T) {
	c := newMemCluster(t, 3)
	c.start(0, 1, 2)
	c.waitActive(0)
	before := c.grant(0, "before")
	c.waitFor("the grant replicated", func() bool { return c.holds(1, "before") == before.Token })

	c.isolate(0, true)
	c.waitActive(1, 1, 2)
	// The new active's view shows one active: the silent former active has
	// no role, whatever it last said.
	for _, p := range c.nodes[1].node.View().Peers {
		switch {
		case p.Priority == 0 && (p.Live || p.Role != ""):
			t.Errorf("node 1's view of the cut-off node 0: live=%v role=%q, want not live and no role", p.Live, p.Role)
		case p.Priority == 1 && p.Role != api.RoleActive:
			t.Errorf("node 1's view of itself: role %q, want %q", p.Role, api.RoleActive)
		}
	}
	if got := c.holds(1, "before"); got != before.Token {
		t.Fatalf("the new active holds %q with token %d, want %d", "before", got, before.Token)
	}
	after := c.grant(1, "after")
	if after.Token <= before.Token {
		t.Fatalf("token %d after the failover, not above %d", after.Token, before.Token)
	}

	c.isolate(0, false)
	c.waitFor("node 0 active again with node 1's grants", func() bool {
		return len(c.actives()) == 1 && c.actives()[0] == 0 && c.holds(0, "after") == after.Token
	})
	c.waitActive(0)
	if c.nodes[0].changed("step_down") != 1 {
		t.Errorf("node 0 stepped down %d times, want 1", c.nodes[0].changed("step_down"))
	}
	if c.nodes[1].changed("handoff") != 1 {
		t.Errorf("node 1 handed off %d times, want 1", c.nodes[1].changed("handoff"))
	}
	for i := range c.nodes {
		if got := c.holds(i, "before"); got != before.Token {
			t.Errorf("node %d: %q held by %d, want %d", i, "before", got, before.Token)
		}
	}
}

// A cut makes two actives; when it heals, keepsState decides: the one with
// the newer state keeps it, whichever its priority, and the other discards
// what it granted on its own, resyncs, and the priorities then decide where
// the active role ends (through a handoff).
func TestMemHealedCutLeavesTheNewerState(t *testing.T) {
	for _, tc := range []struct {
		name         string
		newer, older int
		olderGrants  bool
	}{
		// Only the cut-off node 0 granted: its state is newer than what
		// node 1 was promoted with; node 1 steps down.
		{"the cut-off active granted alone", 0, 1, false},
		// Both granted: node 1's tokens start above every token it heard
		// of (the failover's margin), so its grant is the newer state and
		// node 0, of higher priority, steps down and loses its own grant.
		{"both granted, the promoted one last", 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newMemCluster(t, 2)
			c.start(0, 1)
			c.waitActive(0)
			c.isolate(0, true)
			c.waitFor("two actives", func() bool { return len(c.actives()) == 2 })

			if tc.olderGrants {
				c.grant(tc.older, "lost")
			}
			kept := c.grant(tc.newer, "kept")
			sOld, sNew := c.nodes[tc.older].node.status(), c.nodes[tc.newer].node.status()
			if !keepsState(sNew, sOld) {
				t.Fatalf("the test's premise: keepsState(%+v, %+v) = false", sNew, sOld)
			}

			c.isolate(0, false)
			c.waitFor("the older state stepped down and resynced", func() bool {
				return c.nodes[tc.older].changed("step_down") == 1 && c.holds(tc.older, "kept") == kept.Token
			})
			c.waitActive(0)
			for i := range c.nodes {
				if got := c.holds(i, "kept"); got != kept.Token {
					t.Errorf("node %d: kept held by %d, want %d", i, got, kept.Token)
				}
				if got := c.holds(i, "lost"); tc.olderGrants && got != 0 {
					t.Errorf("node %d: the older side's own grant (token %d) still held", i, got)
				}
			}
			if got := c.nodes[tc.newer].changed("step_down"); got != 0 {
				t.Errorf("the newer side stepped down %d times", got)
			}
			if tc.olderGrants && c.nodes[tc.older].node.installs.Load() == 0 {
				// Its log diverged from the newer one's (each wrote its own
				// records after the cut): never resumed over, resynced by a
				// snapshot.
				t.Errorf("the older side's divergent log was resumed, not replaced by a snapshot")
			}
			if tc.olderGrants {
				// Its feed says that what it told before (its own grant
				// of "lost") is of a state it discarded.
				c.nodes[tc.older].mu.Lock()
				changes := strings.Join(c.nodes[tc.older].changes, " ")
				c.nodes[tc.older].mu.Unlock()
				if i := strings.LastIndex(changes, "step_down"); i < 0 || !strings.Contains(changes[i:], api.EventReset) {
					t.Errorf("the older side's changes %q: no %s after its step_down", changes, api.EventReset)
				}
			}
		})
	}
}

// A node of higher priority that starts after the others syncs as a
// standby first, then asks the active for a handoff, through the loops of
// both nodes, and becomes the active with every grant.
func TestMemHandoffToAHigherPriorityNodeOnceSynced(t *testing.T) {
	c := newMemCluster(t, 3)
	c.isolate(0, true)
	c.start(1, 2)
	c.waitActive(1, 1, 2)
	g := c.grant(1, "k")

	c.isolate(0, false)
	c.start(0)
	c.waitActive(0)
	for i := range c.nodes {
		if got := c.holds(i, "k"); got != g.Token {
			t.Errorf("node %d: k held by %d, want %d", i, got, g.Token)
		}
	}
	if got := c.nodes[0].changed("promote"); got != 1 {
		t.Errorf("node 0 promoted %d times, want 1 (no promotion beside the active)", got)
	}
	if got := c.nodes[0].changed("step_down"); got != 0 {
		t.Errorf("node 0 stepped down %d times, want 0", got)
	}
	if got := c.nodes[1].changed("handoff"); got != 1 {
		t.Errorf("node 1 handed off %d times, want 1", got)
	}
	if st := c.nodes[0].node.status(); st.Epoch != 2 || st.Role != api.RoleActive {
		t.Errorf("node 0 after the handoff: role %s epoch %d, want active 2", st.Role, st.Epoch)
	}
}

// A graceful shutdown of the active hands off to the best synced standby,
// through its role loop, losing no grant.
func TestMemCloseHandsOffToTheBestStandby(t *testing.T) {
	c := newMemCluster(t, 3)
	c.start(0, 1, 2)
	c.waitActive(0)
	g := c.grant(0, "k")
	c.waitFor("the grant replicated", func() bool { return c.holds(1, "k") == g.Token && c.holds(2, "k") == g.Token })
	c.closeNode(0)
	c.waitActive(1, 1, 2)
	if got := c.holds(1, "k"); got != g.Token {
		t.Errorf("the successor holds k with %d, want %d", got, g.Token)
	}
	if got := c.nodes[0].changed("handoff"); got != 1 {
		t.Errorf("node 0 handed off %d times, want 1", got)
	}
}

// crash stops node i as kill -9 would, as far as its peers can tell: cut
// off first, so that nothing it does while closing (an active's handoff)
// reaches them; its links heal once it is closed (for a restart, open).
func (c *memCluster) crash(i int) {
	c.isolate(i, true)
	c.closeNode(i)
	c.isolate(i, false)
}

// A node that comes back with grants the live active lacks is not
// overwritten by it (SPEC section 1: an answered grant is not lost while a
// node that had it lives). The active node 0 crashes, node 1 is promoted
// and answers L1 and L2 (on node 2's log too: sync_standbys 1); nodes 1
// and 2 crash; node 0 comes back alone and is elected with its older log.
// When nodes 1 and 2 come back, node 1 (the best of the two by keepsState)
// takes the active role instead of following node 0, which steps down and
// resyncs from it, then takes the role back by a handoff: L1 and L2 are
// held on every node with their tokens.
func TestMemRestartedNewerStateIsNotOverwrittenByAStaleActive(t *testing.T) {
	c := newMemCluster(t, 3, func(cfg *Config) { cfg.SyncStandbys = 1 })
	c.start(0, 1, 2)
	c.waitActive(0)
	c.crash(0)
	c.waitActive(1, 1, 2)
	g1, g2 := c.grant(1, "L1"), c.grant(1, "L2")
	if c.holds(2, "L2") != g2.Token {
		t.Fatalf("L2 answered before node 2 had it")
	}
	c.crash(1)
	c.crash(2)

	c.open(0)
	c.start(0)
	c.waitActive(0, 0) // elected alone, with its older log
	if got := c.holds(0, "L1"); got != 0 {
		t.Fatalf("the test's premise: node 0's log holds L1 (%d)", got)
	}
	stale := c.nodes[0].node.status()

	c.open(1)
	c.open(2)
	for _, i := range []int{1, 2} {
		if st := c.nodes[i].node.status(); st.StateToken != g2.Token {
			t.Fatalf("node %d after the replay of its log: state token %d, want %d (L2's)", i, st.StateToken, g2.Token)
		}
	}
	c.start(1, 2)
	c.waitActive(0) // after node 0 stepped down, resynced and took the role back
	for i := range c.nodes {
		for _, g := range []engine.Grant{g1, g2} {
			if got := c.holds(i, g.Key); got != g.Token {
				t.Errorf("node %d: %s held by %d, want %d", i, g.Key, got, g.Token)
			}
		}
	}
	if got := c.nodes[0].changed("step_down"); got != 1 {
		t.Errorf("node 0 stepped down %d times, want 1", got)
	}
	if got := c.nodes[2].changed("promote"); got != 0 {
		t.Errorf("node 2, restarted with the same state as node 1, promoted %d times, want 0 (node 1 keeps its state against it)", got)
	}
	if st := c.nodes[0].node.status(); st.Epoch <= stale.Epoch {
		t.Errorf("node 0's epoch %d after the handoff, not above %d, its epoch as the stale active", st.Epoch, stale.Epoch)
	}
}

// An active whose disk is full refuses every change; it hands its role to
// its best standby (ruleLogFailing) instead of keeping the cluster from
// changing anything for as long as the disk stays full. The grant caught
// by the failure (answered ErrUnavailable: nothing changed) never reaches
// the standbys, which receive only what the active's log wrote (it once
// did, and the successor had to take it back as it was promoted). Once
// the disk has room, node 0 syncs and takes its role back.
func TestMemActiveWithAFullDiskHandsOffWithoutItsUnansweredGrant(t *testing.T) {
	c := newMemCluster(t, 3)
	c.start(0, 1, 2)
	c.waitActive(0)
	g := c.grant(0, "held")
	c.waitFor("the grant replicated", func() bool { return c.holds(1, "held") == g.Token && c.holds(2, "held") == g.Token })
	c.nodes[0].diskFull.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.nodes[0].eng.Acquire(ctx, engine.AcquireRequest{Key: "k", Lease: time.Hour})
	if !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("acquire on a full disk: %v, want ErrUnavailable", err)
	}
	c.waitActive(1, 1, 2)
	if got := c.holds(1, "k"); got != 0 {
		t.Errorf("the successor holds k with %d, a grant answered ErrUnavailable", got)
	}
	if got := c.holds(1, "held"); got != g.Token {
		t.Errorf("the successor holds held with %d, want %d", got, g.Token)
	}
	c.nodes[0].diskFull.Store(false)
	c.waitActive(0)
	if got := c.holds(0, "k"); got != 0 {
		t.Errorf("node 0, active again, holds k with %d", got)
	}
}

// The ghost grant of a full disk (sync_standbys 0): an acquire whose grant
// the active's log cannot write is answered ErrUnavailable ("nothing
// changed"). Its record reached the standbys before the write failed (the
// stream sent what was appended), and when the active was killed rather
// than handing off (which passes the grant on for a take-back), the
// promoted standby held a lock its client had been told it did not get,
// for the grant's whole lease. The stream now sends only what the
// active's log has written. The failover timeout is long, so that the
// active is killed before its failing log makes it hand off.
func TestMemKilledActiveWithAFullDiskLeavesNoGhostGrant(t *testing.T) {
	c := newMemClusterLog(t, 2, func(wc *wal.Config) { wc.FailTimeout = 100 * time.Millisecond },
		func(cfg *Config) { cfg.FailoverTimeout = 2 * time.Second })
	c.start(0, 1)
	c.waitActive(0)
	g := c.grant(0, "held")
	c.waitFor("the grant replicated", func() bool { return c.holds(1, "held") == g.Token })
	c.nodes[0].diskFull.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.nodes[0].eng.Acquire(ctx, engine.AcquireRequest{Key: "k", Lease: time.Hour})
	if !errors.Is(err, engine.ErrUnavailable) {
		t.Fatalf("acquire on a full disk: %v, want ErrUnavailable", err)
	}
	if got := c.nodes[0].changed("handoff"); got != 0 {
		t.Fatalf("the test's premise: node 0 handed off (%d) before it was killed", got)
	}
	// Killed (crash), with its disk writable again once cut off, so that
	// its log closes cleanly; nothing it writes then reaches node 1.
	c.isolate(0, true)
	c.nodes[0].diskFull.Store(false)
	c.closeNode(0)
	c.isolate(0, false)
	c.waitActive(1, 1)
	if got := c.holds(1, "k"); got != 0 {
		t.Errorf("the promoted standby holds k with %d, a grant answered ErrUnavailable", got)
	}
	if got := c.holds(1, "held"); got != g.Token {
		t.Errorf("the promoted standby holds held with %d, want %d", got, g.Token)
	}
}

// A standby whose log cannot write (its disk full) does not win a failover
// beside a live standby whose log writes (ruleFailoverLogWrites): node 1
// promoted by priority and refused every change until it could hand off.
func TestMemFailoverPassesOverAStandbyWhoseLogFails(t *testing.T) {
	c := newMemCluster(t, 3)
	c.start(0, 1, 2)
	c.waitActive(0)
	g := c.grant(0, "held")
	c.waitFor("the grant replicated", func() bool { return c.holds(1, "held") == g.Token && c.holds(2, "held") == g.Token })
	c.nodes[1].diskFull.Store(true)
	c.grant(0, "later") // node 1's write of it fails
	c.waitFor("node 1 says its log fails", func() bool { return c.nodes[1].node.status().LogFailing })
	c.crash(0)
	c.waitActive(2, 1, 2)
	if got := c.nodes[1].changed("promote"); got != 0 {
		t.Errorf("node 1, whose log fails, promoted %d times", got)
	}
	if got := c.holds(2, "held"); got != g.Token {
		t.Errorf("node 2 holds held with %d, want %d", got, g.Token)
	}
	c.nodes[1].diskFull.Store(false)
}

// An active that cannot write its token high-water mark (a full disk: the
// log's last page still takes records, the mark's new file does not)
// refuses every grant (ErrUnavailable) while its log writes on; it hands
// its role to its best standby as for a failing log (ruleLogFailing), or
// no lock could be taken for as long as the disk stayed full (the
// history run TestSyncHistoryChaos CHAOS_SEED=2613 CHAOS_KINDS=full-disk:
// no grant for 11 s, every time, with two healthy standbys). Once the
// mark writes again node 0 takes its role back.
func TestMemActiveWhoseTokenMarkFailsHandsOff(t *testing.T) {
	c := newMemCluster(t, 3)
	c.start(0, 1, 2)
	c.waitActive(0)
	g := c.grant(0, "held")
	c.waitFor("the grant replicated", func() bool { return c.holds(1, "held") == g.Token && c.holds(2, "held") == g.Token })
	// The mark's temporary file cannot be created: its write fails
	// (EISDIR), even as root, and the log writes on.
	block := filepath.Join(c.nodes[0].dir, "token-hwm.tmp")
	if err := os.Mkdir(block, 0o750); err != nil {
		t.Fatal(err)
	}
	// Grants go on up to the ceiling written before (a second ahead).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for k := 0; ; k++ {
		_, err := c.nodes[0].eng.Acquire(ctx, engine.AcquireRequest{Key: fmt.Sprintf("k%d", k), Lease: time.Hour})
		if errors.Is(err, engine.ErrUnavailable) {
			break
		}
		if err != nil {
			t.Fatalf("acquire k%d while the mark fails: %v, want a grant or ErrUnavailable", k, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !c.nodes[0].wal.Healthy() {
		t.Fatal("node 0's log stopped writing too: the test is about the mark alone")
	}
	c.waitActive(1, 1, 2)
	c.grant(1, "after")
	if err := os.Remove(block); err != nil {
		t.Fatal(err)
	}
	c.waitActive(0)
	if got := c.holds(0, "held"); got != g.Token {
		t.Errorf("node 0, active again, holds held with %d, want %d", got, g.Token)
	}
}

// An active whose log does not write (its disk full) with more records
// pending than its tail holds (tail_bytes 1: the waiters' places, which
// nobody waits for) makes no stream write until it writes them. The
// stream took the evicted, unwritten record for one of the log's
// segments, found nothing there and looped at once (about 1.4 million
// loops a second, each counted as a stream write), without heartbeats
// and deaf to its end (a handoff, Close, its standby gone), for as long as
// the disk was full.
func TestMemStreamWaitsForAFailedLogPastTheTail(t *testing.T) {
	// A log failing for a minute before node 0 hands off.
	c := newMemClusterLog(t, 2, func(wc *wal.Config) { wc.FailTimeout = time.Minute }, func(cfg *Config) { cfg.TailBytes = 1 })
	c.start(0, 1)
	c.waitActive(0)
	g := c.grant(0, "h")
	c.waitFor("the grant replicated", func() bool { return c.holds(1, "h") == g.Token })
	c.nodes[0].diskFull.Store(true)
	t.Cleanup(func() {
		// Room again before the nodes close: node 0's log writes its
		// records, and closes cleanly.
		c.nodes[0].diskFull.Store(false)
		c.waitFor("node 0's log writes again", c.nodes[0].wal.Healthy)
	})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 3 { // three places in the queue of h: records nobody waits for
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = c.nodes[0].eng.Acquire(ctx, engine.AcquireRequest{Key: "h", Lease: time.Minute, Wait: time.Minute})
		}()
	}
	defer wg.Wait()
	defer cancel()
	c.waitFor("three waiters on node 0", func() bool {
		// (Not Status: a read waits for the log to write what it shows,
		// here for FailTimeout.)
		return len(c.nodes[0].eng.Waiters("h", 10)) == 3
	})
	// No stream write over 20 looks in a row (the stream waits; a
	// looping one counted thousands between two looks).
	sent, still := c.nodes[0].node.sentWrites.Load(), 0
	c.waitFor("node 0's stream to make no write", func() bool {
		now := c.nodes[0].node.sentWrites.Load()
		if now != sent {
			sent, still = now, 0
		} else {
			still++
		}
		return still >= 20
	})
}

// A standby's first sync installs the active's snapshot without a reset
// event: its feed showed no state that the snapshot replaced (a reset
// there was noise on every start of a standby).
func TestMemFirstSyncIsNoReset(t *testing.T) {
	// As TestRecordsServedAfterAnInstallPastTheTail: node 0's log no
	// longer holds its first records, so node 1 syncs by a snapshot.
	c := newMemClusterLog(t, 2, func(wc *wal.Config) { wc.SegmentSize = 4096 },
		func(cfg *Config) { cfg.TailBytes = 1 })
	c.start(0)
	c.waitActive(0, 0)
	var g engine.Grant
	for k := range 100 {
		g = c.grant(0, fmt.Sprintf("k%d", k))
	}
	c.snapshotLog(0)
	c.start(1)
	c.waitActive(0)
	c.waitFor("the grants replicated", func() bool { return c.holds(1, "k99") == g.Token })
	if c.nodes[1].node.installs.Load() == 0 {
		t.Fatal("node 1 synced without a snapshot: the case is not tested")
	}
	if got := c.nodes[1].changed(api.EventReset); got != 0 {
		t.Errorf("node 1 emitted %d reset events on its first sync, want none", got)
	}
}

// What a handoff leaves in the old active's hub (moved: the successor's
// promotion, counted as its acknowledgement through the handoff's index,
// and acknowledgements of the ended streams that arrive late) belongs to
// that term. Node 1, active, hands off to node 0 (higher priority); node 0
// crashes; node 1 is promoted again by failover with no standby
// streaming. Before, the successor's entry still counted in the new term
// (acknowledged through the handoff's index with no standby at all): after
// a snapshot that put node 1's log below that index, its first changes
// would have been answered as written by a standby that never streamed
// them, without degrading. A promotion starts a new term (hub.newTerm).
func TestMemPromotionForgetsAHandoffsAcknowledgements(t *testing.T) {
	c := newMemCluster(t, 2, func(cfg *Config) { cfg.SyncStandbys = 1 })
	c.isolate(0, true)
	c.start(1)
	c.waitActive(1, 1)
	c.grant(1, "k")
	c.isolate(0, false)
	c.start(0)
	c.waitActive(0)
	if got := c.nodes[1].node.hub.ackedTo.Load(); got == 0 {
		t.Fatalf("node 1 after handing off: acknowledged to 0, want the handoff's index (the successor's promotion)")
	}
	c.crash(0)
	c.waitActive(1, 1)
	if got := c.nodes[1].node.hub.ackedTo.Load(); got != 0 {
		t.Errorf("node 1 promoted again with no standby streaming: acknowledged to %d, want 0 (the handed-off term's acknowledgements counted)", got)
	}
}
