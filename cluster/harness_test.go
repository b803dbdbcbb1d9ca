package cluster_test

// The cluster tests run real `baton serve` processes on 127.0.0.x ports and
// inject real faults: kill -9, SIGSTOP/SIGCONT, SIGINT, and cut links (a TCP
// proxy in front of a node that drops every connection and refuses new ones).
// The binary is built once, with the race detector, and every node's log is
// checked for data races when its test ends (CLUSTER_NORACE: built
// without it).

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/testproc"
)

var batonBin string

func TestMain(m *testing.M) {
	code := func() int {
		flag.Parse()
		if testing.Short() {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "baton-cluster-test")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		batonBin = filepath.Join(dir, "baton")
		// CLUSTER_NORACE set: the nodes are built without the race
		// detector, for long chaos runs on a loaded machine.
		flags := []string{"build", "-race", "-o", batonBin, "../cmd/baton"}
		if os.Getenv("CLUSTER_NORACE") != "" {
			flags = slices.Delete(flags, 1, 2)
		}
		build := exec.Command("go", flags...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building baton:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// Fast timings for tests: failover after 600 ms of silence.
const (
	heartbeat       = 100 * time.Millisecond
	failoverTimeout = 600 * time.Millisecond
)

type node struct {
	i      int
	listen string // where the process listens
	url    string // its advertised URL (a proxy's, when cut links are wanted)
	dir    string
	log    *lockedBuffer
	cmd    *exec.Cmd
	exited chan struct{}
	proxy  *proxy
	// ended: the harness sent the process a signal that ends it
	// (c.signal: SIGKILL, SIGINT, SIGTERM) since its launch.
	ended atomic.Bool
}

type testCluster struct {
	t     *testing.T
	nodes []*node
	peers string
	extra []string
	args  map[int][]string // more flags for one node (later flags win)
	// gid, when set, gives node i's process a group ID of its own
	// (firewall: iptables tells the nodes' connections apart by it).
	gid func(i int) int
	fw  *firewall // newFirewall: links cut with iptables
	// stopped makes stopAll's work run once: mountDataDirs stops the
	// nodes before it unmounts their data_dirs, earlier than
	// newCluster's cleanup would.
	stopped sync.Once
}

// nodeHost is the loopback address node i listens on: 127.0.0.(i+1), or
// under CLUSTER_NET (the first three numbers, such as "127.0.23") that
// network's (i+1), so that runs side by side keep to addresses of their
// own.
func nodeHost(i int) string {
	net := os.Getenv("CLUSTER_NET")
	if net == "" {
		net = "127.0.0"
	}
	return fmt.Sprintf("%s.%d", net, i+1)
}

// newCluster prepares n nodes on nodeHost(i). With proxies, each node is
// advertised through a TCP proxy that can cut it off from its peers.
func newCluster(t *testing.T, n int, proxies bool, extra ...string) *testCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster tests run real processes; skipped with -short")
	}
	c := &testCluster{t: t, extra: extra}
	var urls []string
	for i := range n {
		host := nodeHost(i)
		nd := &node{i: i, listen: freeAddr(t, host), dir: t.TempDir(), log: &lockedBuffer{}}
		nd.url = "http://" + nd.listen
		if proxies {
			nd.proxy = newProxy(t, freeAddr(t, host), nd.listen)
			nd.url = "http://" + nd.proxy.addr
		}
		c.nodes = append(c.nodes, nd)
		urls = append(urls, nd.url)
	}
	c.peers = strings.Join(urls, ",")
	t.Cleanup(c.stopAll)
	return c
}

// start launches node i (again) and waits until it answers HTTP.
func (c *testCluster) start(i int) {
	c.t.Helper()
	c.launch(i)
	c.waitHTTP(i)
}

// launch starts node i's process.
func (c *testCluster) launch(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	args := append([]string{"serve", "--listen", nd.listen, "--advertise", nd.url, "--peers", c.peers,
		"--data-dir", nd.dir, "--heartbeat", heartbeat.String(), "--failover-timeout", failoverTimeout.String(),
		"--cluster-secret", "test-secret", "--log-level", "debug"}, c.extra...)
	args = append(args, c.args[i]...)
	cmd := exec.Command(batonBin, args...)
	fmt.Fprintf(nd.log, "=== start node %d\n", i)
	nd.ended.Store(false)
	cmd.Stdout, cmd.Stderr = nd.log, nd.log
	if c.gid != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(os.Getuid()), Gid: uint32(c.gid(i)), NoSetGroups: true}}
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start node %d: %v", i, err)
	}
	nd.cmd, nd.exited = cmd, make(chan struct{})
	go func(ch chan struct{}) { _ = cmd.Wait(); close(ch) }(nd.exited)
}

func (c *testCluster) startAll() {
	for i := range c.nodes {
		c.start(i)
	}
}

func (c *testCluster) waitHTTP(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	for range 200 {
		resp, err := http.Get("http://" + nd.listen + "/healthz")
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-nd.exited:
			c.t.Fatalf("node %d exited at start:\n%s", i, nd.log)
		case <-time.After(25 * time.Millisecond):
		}
	}
	c.t.Fatalf("node %d does not answer /healthz", i)
}

func (c *testCluster) signal(i int, sig syscall.Signal) {
	c.t.Helper()
	nd := c.nodes[i]
	fmt.Fprintf(nd.log, "=== signal %v to node %d at %s\n", sig, i, time.Now().UTC().Format(time.RFC3339Nano))
	if sig == syscall.SIGKILL || sig == syscall.SIGINT || sig == syscall.SIGTERM {
		nd.ended.Store(true)
	}
	if err := nd.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %v to node %d: %v", sig, i, err)
	}
	if sig == syscall.SIGSTOP {
		testproc.WaitStopped(c.t, nd.cmd.Process.Pid)
	}
}

// kill9 kills node i with SIGKILL and waits for it to be gone.
func (c *testCluster) kill9(i int) {
	c.signal(i, syscall.SIGKILL)
	<-c.nodes[i].exited
}

// kill9Exiting is kill9 for a node that was sent SIGINT just before and
// may have exited already (a graceful handoff that finished before the
// kill): a process already gone is no failure. The harness's signal line
// is logged either way (the node is down from then on).
func (c *testCluster) kill9Exiting(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	fmt.Fprintf(nd.log, "=== signal %v to node %d at %s\n", syscall.SIGKILL, i, time.Now().UTC().Format(time.RFC3339Nano))
	nd.ended.Store(true)
	if err := nd.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		c.t.Fatalf("signal %v to node %d: %v", syscall.SIGKILL, i, err)
	}
	<-nd.exited
}

// stop ends node i with SIGINT and returns its exit code.
func (c *testCluster) stop(i int) int {
	c.signal(i, syscall.SIGINT)
	select {
	case <-c.nodes[i].exited:
	case <-time.After(15 * time.Second):
		c.t.Fatalf("node %d did not exit after SIGINT:\n%s", i, c.nodes[i].log)
	}
	return c.nodes[i].cmd.ProcessState.ExitCode()
}

func (c *testCluster) stopAll() { c.stopped.Do(c.stopAllNow) }

func (c *testCluster) stopAllNow() {
	if c.t.Failed() {
		for _, u := range c.exitedUnbidden() {
			c.t.Log(u)
		}
	}
	for i, nd := range c.nodes {
		if nd.cmd != nil {
			_ = nd.cmd.Process.Signal(syscall.SIGCONT)
			_ = nd.cmd.Process.Kill()
			<-nd.exited
		}
		if strings.Contains(nd.log.String(), "DATA RACE") {
			c.t.Errorf("node %d reported a data race:\n%s", i, nd.log)
		}
		if nd.proxy != nil {
			nd.proxy.close()
		}
		// The nodes' logs: on a failure, or always with CLUSTER_LOGS set
		// (to read what a passing chaos run's nodes did).
		if c.t.Failed() || os.Getenv("CLUSTER_LOGS") != "" {
			c.t.Logf("log of node %d:\n%s", i, nd.log)
		}
	}
}

func (c *testCluster) view(i int) (api.ClusterView, error) {
	var v api.ClusterView
	cl := http.Client{Timeout: 500 * time.Millisecond}
	resp, err := cl.Get("http://" + c.nodes[i].listen + "/cluster")
	if err != nil {
		return v, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&v)
	return v, err
}

// waitActive waits until node want (or, with want < 0, some node) is
// active and every node in agree sees it as the active; it returns the
// active's index. A bounded wait: it fails the test after 15 s.
func (c *testCluster) waitActive(want int, agree ...int) int {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for i := range c.nodes {
			if want >= 0 && i != want {
				continue
			}
			v, err := c.view(i)
			if err != nil || v.Role != api.RoleActive {
				continue
			}
			ok := true
			for _, j := range agree {
				vj, err := c.view(j)
				if err != nil || vj.Active != c.nodes[i].url || (j != i && vj.Role != api.RoleStandby) {
					ok = false
				}
			}
			if ok {
				return i
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no agreed active node (want %d, agree %v); roles %q%s", want, agree, c.roles(), strings.Join(append([]string{""}, c.exitedUnbidden()...), "; "))
	return -1
}

// exitedUnbidden names every node whose process ended though the harness
// sent it no signal that ends it since its launch (a crash, or a signal
// from outside the test: another process's kill(1) or pkill(1) on a
// shared machine), with its exit and the last "shutting down" line of its
// log (which names the signal) or its last line. A failure after such an
// exit is the harness', not the nodes' (TestSyncHistoryChaos
// CHAOS_SEED=5001: "no agreed active node" once a SIGTERM from outside
// had ended every node).
func (c *testCluster) exitedUnbidden() []string {
	var out []string
	for i, nd := range c.nodes {
		if nd.cmd == nil || nd.exited == nil || nd.ended.Load() {
			continue
		}
		select {
		case <-nd.exited:
		default:
			continue
		}
		// This launch's lines only.
		log := nd.log.String()
		log = log[max(0, strings.LastIndex(log, "=== start node")):]
		lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
		why := lines[len(lines)-1]
		for _, l := range lines {
			if strings.Contains(l, `msg="shutting down"`) {
				why = l
			}
		}
		out = append(out, fmt.Sprintf("node %d exited (%s) though the harness sent it no signal to end it: %s", i, nd.cmd.ProcessState, strings.TrimSpace(why)))
	}
	return out
}

// roles returns every node's role as it reports it ("" if it does not answer).
func (c *testCluster) roles() []string {
	out := make([]string, len(c.nodes))
	for i := range c.nodes {
		if v, err := c.view(i); err == nil {
			out[i] = v.Role
		}
	}
	return out
}

// httpc talks to nodes directly; it follows 307s like any client.
var httpc = &http.Client{Timeout: 10 * time.Second}

type answer struct {
	status int
	grant  api.Grant
	body   string
}

func do(method, u string, hdr ...string) (answer, error) {
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return answer{}, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := httpc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, body: string(b)}
	if resp.StatusCode == http.StatusOK && method == http.MethodPost {
		err = json.Unmarshal(b, &a.grant)
	}
	return a, err
}

// acquire takes key on node i (following redirects) and fails the test
// unless it is granted.
func (c *testCluster) acquire(i int, key string, query string) api.Grant {
	c.t.Helper()
	a, err := do(http.MethodPost, "http://"+c.nodes[i].listen+"/locks/"+key+"?"+query)
	if err != nil || a.status != http.StatusOK {
		c.t.Fatalf("acquire %s on node %d: %v %d %s", key, i, err, a.status, a.body)
	}
	return a.grant
}

// holder returns the token holding key as node i reports it (0 = free).
func (c *testCluster) holder(i int, key string) uint64 {
	c.t.Helper()
	resp, err := httpc.Get("http://" + c.nodes[i].listen + "/locks/" + key)
	if err != nil {
		c.t.Fatalf("status of %s on node %d: %v", key, i, err)
	}
	defer resp.Body.Close()
	var st api.LockStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		c.t.Fatalf("status of %s on node %d: %d %v", key, i, resp.StatusCode, err)
	}
	if st.Holder == nil {
		return 0
	}
	return st.Holder.Token
}

// proxy forwards TCP connections to a node. It can cut every link (drop
// every open connection and refuse new ones, until healed) or hold some
// back (keep their sockets open but stop forwarding their bytes, in one
// direction or both, until released), such as one standby's replication
// stream while its polls go on.
type proxy struct {
	addr   string
	target string
	ln     net.Listener

	mu      sync.Mutex
	cut     bool
	conns   map[net.Conn]struct{}
	holding *holdRule     // nil: forward every byte
	changed chan struct{} // closed and replaced when cut or holding changes
	wg      sync.WaitGroup
	// lag delays each read the proxy forwards from the node to its
	// client (every answer) by that long (nanoseconds; 0: none).
	lag atomic.Int64
}

// holdRule says which connections a proxy holds back, and in which
// directions: up is client to node, down node to client.
type holdRule struct {
	match    func(requestLine string) bool // nil: every connection
	up, down bool
}

func newProxy(t *testing.T, addr, target string) *proxy {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &proxy{addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}, changed: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	return p
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.pipe(c)
		}()
	}
}

// link is one proxied connection: the first line its client sent (an HTTP
// request line), which decides whether a hold applies to it.
type link struct {
	mu    sync.Mutex
	first string
	read  bool // first is known
}

func (p *proxy) pipe(c net.Conn) {
	defer func() {
		p.mu.Lock()
		delete(p.conns, c)
		p.mu.Unlock()
		c.Close()
	}()
	d, err := net.DialTimeout("tcp", p.target, time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		d.Close()
		return
	}
	p.conns[d] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.conns, d)
		p.mu.Unlock()
		d.Close()
	}()
	l := &link{}
	done := make(chan struct{}, 2)
	go func() { p.copy(d, c, l, true); done <- struct{}{} }()
	go func() { p.copy(c, d, l, false); done <- struct{}{} }()
	<-done
	c.Close()
	d.Close()
	<-done
}

// copy forwards src to dst until either fails, waiting before each write
// while a hold applies to l in this direction (up: client to node).
func (p *proxy) copy(dst, src net.Conn, l *link, up bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if up {
				l.mu.Lock()
				if !l.read {
					l.first, _, _ = strings.Cut(string(buf[:n]), "\r\n")
					l.read = true
				}
				l.mu.Unlock()
			}
			if !p.waitHeld(l, up) {
				return
			}
			if d := time.Duration(p.lag.Load()); d > 0 && !up {
				time.Sleep(d)
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// waitHeld blocks while a hold applies to l in the direction up; it
// returns false if the proxy was cut meanwhile.
func (p *proxy) waitHeld(l *link, up bool) bool {
	for {
		p.mu.Lock()
		cut, r, ch := p.cut, p.holding, p.changed
		p.mu.Unlock()
		if cut {
			return false
		}
		if r == nil || (up && !r.up) || (!up && !r.down) {
			return true
		}
		l.mu.Lock()
		first, read := l.first, l.read
		l.mu.Unlock()
		if r.match != nil && (!read || !r.match(first)) {
			return true
		}
		<-ch
	}
}

// changedLocked wakes every copier waiting on a hold. p.mu is held.
func (p *proxy) changedLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// hold stops forwarding bytes, client to node (up) and/or node to client
// (down), on every connection, open or new, whose first request line
// match accepts (nil: every connection); the sockets stay open and the
// bytes wait in the proxy and the kernel's buffers until release.
func (p *proxy) hold(match func(requestLine string) bool, up, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding = &holdRule{match: match, up: up, down: down}
	p.changedLocked()
}

// release ends a hold: every byte held back is forwarded.
func (p *proxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding = nil
	p.changedLocked()
}

// reset closes every connection through the proxy, dropping the bytes a
// hold kept back (as a link that stalled until its node died would), and
// ends the hold; new connections are forwarded again.
func (p *proxy) reset() {
	p.setCut(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.holding = nil
	p.cut = false
	p.changedLocked()
}

// streamOf matches the request line of the replication stream that the
// node advertised as standby asks its active for (GET
// /_cluster/stream?from=<standby>).
func streamOf(standby string) func(string) bool {
	return func(line string) bool {
		f := strings.Fields(line)
		if len(f) < 2 {
			return false
		}
		u, err := url.ParseRequestURI(f[1])
		return err == nil && u.Path == "/_cluster/stream" && u.Query().Get("from") == standby
	}
}

// setCut cuts (true) or heals (false) every link through the proxy.
func (p *proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
	p.changedLocked()
}

func (p *proxy) close() {
	p.ln.Close()
	p.setCut(true)
	p.wg.Wait()
}

func decodeJSON(resp *http.Response, v any) error {
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// lockedBuffer collects a node's log while the test reads it.
type lockedBuffer = testproc.Buffer

func freeAddr(t *testing.T, host string) string { return testproc.FreeAddr(t, host) }

// holdsOnEveryActive checks, for d, that whichever of nodes serves as the
// active (answers GET /locks/key) shows key held by token, and refuses
// the key to a second client (a try-lock of 0.2 s). A node not answering
// yet (resuming) or gone is passed over.
func (c *testCluster) holdsOnEveryActive(key string, token uint64, d time.Duration, nodes ...int) {
	c.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		for _, i := range nodes {
			v, err := c.view(i)
			if err != nil || v.Role != api.RoleActive {
				continue
			}
			st, err := do(http.MethodGet, "http://"+c.nodes[i].listen+"/locks/"+key)
			if err != nil || st.status != http.StatusOK {
				continue // not serving yet (resuming), or gone since
			}
			var ls api.LockStatus
			if err := json.Unmarshal([]byte(st.body), &ls); err != nil {
				c.t.Fatal(err)
			}
			if ls.Holder == nil || ls.Holder.Token != token {
				c.t.Fatalf("node %d is active with %s as %s, want it held by the answered grant %d; roles %q", i, key, st.body, token, c.roles())
			}
			b, err := do(http.MethodPost, "http://"+c.nodes[i].listen+"/locks/"+key+"?lease=30&wait=0.2")
			if err == nil && b.status == http.StatusOK {
				c.t.Fatalf("node %d granted %s to a second client (token %d) while %d holds it", i, key, b.grant.Token, token)
			}
		}
	}
}
