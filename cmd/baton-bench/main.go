// Command baton-bench is baton's load generator (issue 7). It drives a baton
// node over HTTP/1.1 keep-alive or h2c, with plain net/http or with the
// official Go client, through one of these workloads:
//
//	uncontended  C clients loop acquire+release, each on its own key
//	contended    C clients loop acquire+release on one key: grants/s,
//	             handoff latency, FIFO overtakes, grants per client
//	waiters      W clients block on one held key: server RSS per waiter,
//	             then the time to drain them all in turn
//	keys         K locks held at once: server RSS per held key
//	failover     a cluster of --nodes baton processes: time from kill -9 of
//	             the active to the first grant, and the gap of a graceful
//	             handoff
//	restart      K held keys, kill -9, restart on the data directory: time
//	             to serving again, size of the log
//
// With --standbys N, each baton run of the first four starts a cluster of
// 1+N baton processes instead of one node, waits until the first is the
// active and the others replicate it, and drives the active: the cost of
// replication; --sync-standbys N makes N of them synchronous. Such runs
// report the standbys' lag (p50, p99) over the measured window, from the
// active's histogram of it.
//
// In the same invocation it runs the same pattern against reference servers
// built into this binary: "null" (answers at once: the HTTP ceiling) and
// "floor" (one buffered channel per key: the smallest real lock), and prints
// baton's ratio to them. By default it builds and spawns baton itself on a
// free 127.0.0.1 port (so it can read the server's VmRSS); --addr targets a
// running node instead. Traffic goes to 127.0.0.0/8 only.
//
// Every run prints one line
//
//	RESULT workload=… proto=h1|h2c|native client=plain|official target=baton|null|floor|nfloor c=… ops_s=… p50_us=… p99_us=… p999_us=… [extra fields] errors=… run=i/N
//
// and, with --runs N > 1, a run=median/N line per target; then RATIO lines
// and a readable summary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// config is the parsed command line.
type config struct {
	semLimit, sharedPct int // semaphore, rwmix
	workloads           []string
	protos              []string
	clients             []string
	// workload, proto and client of the run being done.
	workload, proto, client string

	addr      string
	naddr     string
	pid       int
	batonBin  string
	batonArgs []string
	refs      string
	refMode   string
	refH2     int

	duration, warmup time.Duration
	c, waiters, keys int
	runs             int
	conns            int
	streamsPerConn   int
	dialParallel     int
	lease, wait      float64
	keysLease        float64
	accept           string
	hold             time.Duration
	maxOps           int64
	maxErrors        int
	progress         string
	cpuProfile       string
	onlyRefs         bool

	// failover
	nodes     int
	failovers int

	// standbys replicating the spawned baton (0: a single node).
	standbys int
	// syncStandbys is the sync_standbys the nodes of a --standbys cluster
	// are given (0: not given, baton's default).
	syncStandbys int
}

var allWorkloads = []string{"uncontended", "contended", "waiters", "keys", "failover", "restart", "semaphore", "rwmix", "parked"}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "__serve-ref" {
		os.Exit(serveRefMain(os.Args[2:]))
	}
	if os.Getenv("GOGC") == "" {
		// The load generator shares the machine with the server: collect
		// its garbage less often. Spawned reference servers (the
		// __serve-ref mode above) keep Go's default, as baton does.
		debug.SetGCPercent(400)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// splitList splits a comma-separated flag value.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// parseFlags parses args into a config.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("baton-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfg := &config{}
	var workloads, protos, clients, batonArgs string
	var null, floor bool
	fs.StringVar(&workloads, "workload", "uncontended", "workloads, comma-separated: uncontended,contended,waiters,keys,failover,restart,semaphore,rwmix,parked (--waiters acquires parked over --conns connections, 16 by default: RSS per parked acquire) or all (= uncontended,contended,waiters,keys)")
	fs.StringVar(&protos, "proto", "h1", "protocols, comma-separated: h1 (HTTP/1.1 keep-alive), h2c (HTTP/2 cleartext, prior knowledge), native (SPEC 2b, pipelined; reference: the native floor)")
	fs.StringVar(&cfg.naddr, "native-addr", "", "with --addr and --proto native: the node's native_listen address")
	fs.StringVar(&clients, "client", "plain", "clients, comma-separated: plain (net/http; with --proto native, this binary's raw pipelined client), official (the api package: h2c, or baton:// with --proto native)")
	fs.StringVar(&cfg.addr, "addr", "", "target a running baton node at host:port (127.0.0.0/8) instead of spawning one")
	fs.IntVar(&cfg.pid, "pid", 0, "with --addr: the node's process id, to read its VmRSS")
	fs.StringVar(&cfg.batonBin, "baton", "", "baton binary to spawn (default: go build ./cmd/baton into a temp dir)")
	fs.StringVar(&batonArgs, "baton-args", "", "extra arguments for the spawned baton serve, space-separated")
	fs.BoolVar(&null, "null", false, "also run against the in-binary null server (answers at once: the HTTP ceiling)")
	fs.BoolVar(&floor, "floor", false, "also run against the in-binary floor server (one channel per key: the smallest real lock)")
	fs.StringVar(&cfg.refs, "ref", "auto", "reference targets when neither --null nor --floor is given: auto (null for uncontended, floor otherwise), none")
	fs.StringVar(&cfg.refMode, "ref-mode", "proc", "run reference servers in a child process (proc: own RSS and CPU, like baton) or in this process (inproc: no RSS)")
	fs.IntVar(&cfg.refH2, "ref-h2-streams", 1000, "reference servers' HTTP/2 max concurrent streams per connection (baton serves 1000; 0: Go's default)")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "measured time of uncontended and contended runs")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "unmeasured time before --duration")
	fs.IntVar(&cfg.c, "c", 16, "clients (uncontended, contended, keys)")
	fs.IntVar(&cfg.waiters, "waiters", 10000, "waiters (waiters and parked workloads)")
	fs.IntVar(&cfg.keys, "keys", 100000, "held keys (keys and restart workloads)")
	fs.IntVar(&cfg.runs, "runs", 1, "runs per target; with more than one, a median line too")
	fs.IntVar(&cfg.conns, "conns", 0, "transports (for h2c: connections) the clients are spread over; 0 = 1 for h1, ceil(clients/--streams-per-conn) for h2c")
	fs.IntVar(&cfg.streamsPerConn, "streams-per-conn", 100, "h2c: clients per connection when --conns is 0")
	fs.IntVar(&cfg.dialParallel, "dial-parallel", 256, "concurrent TCP dials at most (thousands of waiters arriving at once overflow the listen backlog otherwise)")
	fs.Float64Var(&cfg.lease, "lease", 30, "lease in seconds of every acquire (keys: --keys-lease)")
	fs.Float64Var(&cfg.wait, "wait", 0, "wait in seconds of uncontended and contended acquires (0: no limit)")
	fs.Float64Var(&cfg.keysLease, "keys-lease", 600, "lease in seconds of the keys workload's locks")
	fs.StringVar(&cfg.accept, "accept", "json", "answer format asked for: json or text (Accept: text/plain)")
	fs.DurationVar(&cfg.hold, "hold", 0, "contended, semaphore, rwmix: time each client holds the lock before releasing")
	fs.IntVar(&cfg.semLimit, "sem-limit", 8, "semaphore: the key's limit (shared holders at once)")
	fs.IntVar(&cfg.sharedPct, "shared-pct", 90, "rwmix: percent of acquires in shared mode (the rest exclusive); the key's limit is -c")
	fs.Int64Var(&cfg.maxOps, "max-ops", 50_000_000, "bound on the cycles of one run")
	fs.IntVar(&cfg.maxErrors, "max-errors", 100, "abort a run after this many failed calls")
	fs.StringVar(&cfg.progress, "progress", "auto", "progress line on stderr: auto (when a terminal), on, off")
	fs.BoolVar(&cfg.onlyRefs, "only-refs", false, "run the reference targets only, not baton (to check the load generator)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write this process's CPU profile here (with --ref-mode inproc it covers the reference servers too)")
	fs.IntVar(&cfg.nodes, "nodes", 2, "failover: cluster nodes to start")
	fs.IntVar(&cfg.failovers, "failovers", 5, "failover: kill -9 and graceful handoffs to measure, each")
	fs.IntVar(&cfg.syncStandbys, "sync-standbys", 0, "with --standbys: give every node --sync-standbys N (a change is answered once N standbys have it; 0: asynchronous replication, baton's default)")
	fs.IntVar(&cfg.standbys, "standbys", 0, "run each spawned baton as the active of a cluster with this many standbys replicating it (uncontended, contended, waiters, keys; not with --addr)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: baton-bench [flags]\n\nLoad generator for baton (issue 7). Examples:\n"+
			"  baton-bench --workload uncontended,contended --runs 5\n"+
			"  baton-bench --workload waiters --proto h2c --waiters 100000\n"+
			"  baton-bench --workload keys --keys 1000000\n"+
			"  baton-bench --workload uncontended,contended --standbys 1 --runs 3\n"+
			"  baton-bench --addr 127.0.0.1:7070 --pid $(pgrep -n baton) --workload contended --floor\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	cfg.workloads = splitList(workloads)
	if slices.Equal(cfg.workloads, []string{"all"}) {
		cfg.workloads = allWorkloads[:4]
	}
	for _, w := range cfg.workloads {
		if !slices.Contains(allWorkloads, w) {
			return nil, fmt.Errorf("--workload: unknown %q", w)
		}
	}
	cfg.protos = splitList(protos)
	for _, p := range cfg.protos {
		if p != "h1" && p != "h2c" && p != "native" {
			return nil, fmt.Errorf("--proto: unknown %q (h1, h2c or native)", p)
		}
		if p == "native" && cfg.addr != "" && cfg.naddr == "" {
			return nil, errors.New("--proto native with --addr needs --native-addr")
		}
	}
	cfg.clients = splitList(clients)
	for _, c := range cfg.clients {
		if c != "plain" && c != "official" {
			return nil, fmt.Errorf("--client: unknown %q (plain or official)", c)
		}
	}
	if len(cfg.workloads) == 0 || len(cfg.protos) == 0 || len(cfg.clients) == 0 {
		return nil, errors.New("--workload, --proto and --client need at least one value")
	}
	switch {
	case null && floor:
		cfg.refs = "null,floor"
	case null:
		cfg.refs = "null"
	case floor:
		cfg.refs = "floor"
	case cfg.refs != "auto" && cfg.refs != "none":
		return nil, fmt.Errorf("--ref: %q is not auto or none (use --null, --floor)", cfg.refs)
	}
	if cfg.refMode != "proc" && cfg.refMode != "inproc" {
		return nil, fmt.Errorf("--ref-mode: %q is not proc or inproc", cfg.refMode)
	}
	if cfg.accept != "json" && cfg.accept != "text" {
		return nil, fmt.Errorf("--accept: %q is not json or text", cfg.accept)
	}
	if cfg.progress != "auto" && cfg.progress != "on" && cfg.progress != "off" {
		return nil, fmt.Errorf("--progress: %q is not auto, on or off", cfg.progress)
	}
	if cfg.addr != "" {
		if err := checkLoopback(cfg.addr); err != nil {
			return nil, fmt.Errorf("--addr: %w", err)
		}
	}
	cfg.batonArgs = strings.Fields(batonArgs)
	if cfg.standbys < 0 {
		return nil, errors.New("--standbys must not be negative")
	}
	if cfg.standbys > 0 && cfg.addr != "" {
		return nil, errStandbysAddr
	}
	if cfg.syncStandbys < 0 {
		return nil, errors.New("--sync-standbys must not be negative")
	}
	if cfg.syncStandbys > cfg.standbys && (!slices.Contains(cfg.workloads, "failover") || cfg.syncStandbys > cfg.nodes-1) {
		return nil, fmt.Errorf("--sync-standbys %d needs as many standbys: --standbys %d or more (or, for the failover workload, --nodes %d or more)",
			cfg.syncStandbys, cfg.syncStandbys, cfg.syncStandbys+1)
	}
	for name, v := range map[string]int{"c": cfg.c, "waiters": cfg.waiters, "keys": cfg.keys, "runs": cfg.runs,
		"streams-per-conn": cfg.streamsPerConn, "dial-parallel": cfg.dialParallel, "max-errors": cfg.maxErrors, "nodes": cfg.nodes, "failovers": cfg.failovers} {
		if v < 1 && !(name == "max-errors" && v == 0) {
			return nil, fmt.Errorf("--%s must be at least 1", name)
		}
	}
	if cfg.duration <= 0 || cfg.warmup < 0 || cfg.lease <= 0 || cfg.wait < 0 || cfg.keysLease <= 0 || cfg.maxOps < 1 {
		return nil, errors.New("--duration, --lease, --keys-lease and --max-ops must be positive; --warmup and --wait not negative")
	}
	return cfg, nil
}

// refsFor returns the reference targets of workload w.
func (cfg *config) refsFor(w string) []string {
	switch {
	case w == "failover" || w == "semaphore" || w == "rwmix" || cfg.refs == "none":
		// The reference servers have no shared modes.
		return nil
	case cfg.proto == "native":
		// The one reference of the native protocol: the native floor.
		return []string{"nfloor"}
	case cfg.refs == "auto" && w == "uncontended":
		return []string{"null"}
	case cfg.refs == "auto":
		return []string{"floor"}
	}
	refs := splitList(cfg.refs)
	if w == "waiters" || w == "parked" {
		// null answers every acquire at once: nothing would ever wait.
		refs = slices.DeleteFunc(refs, func(s string) bool { return s == "null" })
	}
	return refs
}

// runBound bounds one run in time: its measured time plus room for the
// set-up, queueing and draining its size needs.
func (cfg *config) runBound() time.Duration {
	return cfg.warmup + cfg.duration + 2*time.Minute +
		time.Duration(cfg.waiters)*2*time.Millisecond + time.Duration(cfg.keys)*200*time.Microsecond
}

// bench is one invocation.
type bench struct {
	cfg    *config
	stdout io.Writer
	stderr io.Writer
	prog   *progress
	tmp    string
	seq    int
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "baton-bench:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tmp, err := os.MkdirTemp("", "baton-bench-")
	if err != nil {
		fmt.Fprintln(stderr, "baton-bench:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(stderr, "baton-bench: --cpuprofile:", err)
			return 1
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	b := &bench{cfg: cfg, stdout: stdout, stderr: stderr, prog: newProgress(cfg.progress), tmp: tmp}
	needBaton := cfg.addr == "" && !cfg.onlyRefs
	if needBaton && cfg.batonBin == "" {
		fmt.Fprintln(stderr, "baton-bench: building baton (go build github.com/baton-io/baton/cmd/baton)...")
		if cfg.batonBin, err = buildBaton(tmp); err != nil {
			fmt.Fprintln(stderr, "baton-bench:", err)
			return 1
		}
	}
	failed := false
	for _, w := range cfg.workloads {
		for _, p := range cfg.protos {
			for _, cl := range cfg.clients {
				if ctx.Err() != nil {
					return 1
				}
				if p == "native" && (w == "failover" || w == "keys" || cfg.standbys > 0) {
					fmt.Fprintf(stderr, "baton-bench: %s proto=native client=%s: skipped, native runs on a single node, without the failover and keys workloads\n", w, cl)
					continue
				}
				if cl == "official" && p == "h1" {
					fmt.Fprintf(stderr, "baton-bench: %s proto=h1 client=official: skipped, the official client speaks HTTP/2 or the native protocol only (use --proto h2c or native)\n", w)
					continue
				}
				cfg.workload, cfg.proto, cfg.client = w, p, cl
				var err error
				switch w {
				case "failover":
					err = b.failover(ctx)
				case "restart":
					err = b.restartWorkload(ctx)
				default:
					err = b.group(ctx)
				}
				if err != nil {
					failed = true
					fmt.Fprintf(stderr, "baton-bench: %s proto=%s client=%s: %v\n", w, p, cl, err)
				}
			}
		}
	}
	if failed {
		return 1
	}
	return 0
}

// group runs the current workload/proto/client against baton and its
// reference targets, --runs times each (interleaved), then prints medians,
// ratios and a summary.
func (b *bench) group(ctx context.Context) error {
	cfg := b.cfg
	targets := append([]string{"baton"}, cfg.refsFor(cfg.workload)...)
	if cfg.onlyRefs {
		targets = targets[1:]
	}
	results := map[string][]*Result{}
	var firstErr error
	for i := 1; i <= cfg.runs; i++ {
		for _, t := range targets {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			r, err := b.runOnce(ctx, t, fmt.Sprintf("%d/%d", i, cfg.runs))
			if err != nil {
				fmt.Fprintf(b.stderr, "baton-bench: %s target=%s run %d: %v\n", cfg.workload, t, i, err)
				if firstErr == nil {
					firstErr = err
				}
				continue
			}
			fmt.Fprintln(b.stdout, r)
			results[t] = append(results[t], r)
		}
	}
	meds := map[string]*Result{}
	for _, t := range targets {
		if rs := results[t]; len(rs) > 0 {
			meds[t] = median(rs)
			if cfg.runs > 1 {
				fmt.Fprintln(b.stdout, meds[t])
			}
		}
	}
	printComparison(b.stdout, meds, targets)
	return firstErr
}

// runOnce starts target t, runs the current workload against it, and stops
// it again.
func (b *bench) runOnce(ctx context.Context, t, runLabel string) (*Result, error) {
	cfg := b.cfg
	tgt, err := b.start(ctx, t)
	if err != nil {
		return nil, err
	}
	defer tgt.stop()
	b.seq++
	rctx, cancel := context.WithTimeout(ctx, cfg.runBound())
	defer cancel()
	e := &runEnv{
		cfg: cfg, tgt: tgt, prog: b.prog, abort: cancel,
		prefix: fmt.Sprintf("b%06x%d/", uint32(time.Now().UnixNano())&0xffffff, b.seq),
	}
	e.newSet = func(clients int) (lockerSet, error) { return b.newSet(tgt, clients) }
	b.prog.begin(fmt.Sprintf("%s %s/%s target=%s run %s", cfg.workload, cfg.proto, cfg.client, t, runLabel))
	defer b.prog.end()
	var r *Result
	switch cfg.workload {
	case "uncontended":
		r, err = runUncontended(rctx, e)
	case "contended":
		r, err = runContended(rctx, e)
	case "semaphore":
		r, err = runModes(rctx, e, func(int, int64) acqMode { return acqMode{shared: true, limit: cfg.semLimit} })
	case "rwmix":
		r, err = runModes(rctx, e, func(i int, n int64) acqMode {
			// A fixed pattern per client, spread over the clients: the
			// same share of shared acquires in every run.
			return acqMode{shared: (int64(i)*7+n*13)%100 < int64(cfg.sharedPct), limit: cfg.c}
		})
	case "waiters":
		r, err = runWaiters(rctx, e)
	case "parked":
		r, err = runParked(rctx, e)
	case "keys":
		r, err = runKeys(rctx, e)
	default:
		err = fmt.Errorf("unknown workload %q", cfg.workload)
	}
	if err == nil && rctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("run exceeded its bound of %v", cfg.runBound())
	}
	if err != nil {
		return nil, err
	}
	if len(tgt.standbys) > 0 {
		r.set("standbys", float64(len(tgt.standbys)))
		lag, err := replicationLag(rctx, tgt, e.prefix+"replication-probe")
		if err != nil {
			return nil, err
		}
		r.set("standby_lag_ms", float64(lag.Microseconds())/1e3)
		if cfg.syncStandbys > 0 {
			r.set("sync_standbys", float64(cfg.syncStandbys))
		}
		if e.lag != nil {
			e.lag(r)
		}
	}
	r.set("load1", loadAvg1())
	r.Run = runLabel
	return r, nil
}

// start brings target t up for one run.
func (b *bench) start(ctx context.Context, t string) (*target, error) {
	cfg := b.cfg
	if t == "baton" {
		if cfg.addr != "" {
			return &target{name: "baton", addr: cfg.addr, naddr: cfg.naddr, pid: cfg.pid, stop: func() {}}, nil
		}
		if cfg.standbys > 0 {
			return b.startReplicated(ctx)
		}
		return spawnBaton(cfg.batonBin, b.tmp, cfg.batonArgs, cfg.proto == "native")
	}
	if cfg.refMode == "inproc" {
		s, err := startInprocRef(t, cfg.refH2)
		if err != nil {
			return nil, err
		}
		return &target{name: t, addr: s.addr(), naddr: s.naddr(), stop: s.close, owned: true}, nil
	}
	return spawnRef(t, b.tmp, cfg.refH2)
}

// newSet makes the clients of one run.
func (b *bench) newSet(tgt *target, clients int) (lockerSet, error) {
	cfg := b.cfg
	addr := tgt.addr
	if cfg.proto == "native" {
		conns := cfg.conns
		if conns == 0 {
			// As the Go client: two connections to one address, the
			// clients' requests pipelined on them. The contended and
			// waiters workloads queue every client on one key: there a
			// connection each (a connection's acquires of one key are
			// served one after the other).
			conns = min(2, clients)
			if cfg.workload == "parked" {
				// Few connections, many parked acquires each.
				conns = parkedConns(cfg)
			} else if cfg.workload != "uncontended" {
				conns = clients
			}
		}
		if cfg.client == "official" {
			return newOfficialSet("baton://"+tgt.naddr, conns, cfg)
		}
		return newNativeSet(tgt.naddr, conns, make(chan struct{}, cfg.dialParallel))
	}
	if cfg.client == "official" {
		conns := cfg.conns
		if conns == 0 {
			conns = max(2, (clients+cfg.streamsPerConn-1)/cfg.streamsPerConn)
		}
		return newOfficialSet("http://"+addr, conns, cfg)
	}
	conns := cfg.conns
	if conns == 0 {
		conns = 1
		if cfg.proto == "h2c" {
			conns = (clients + cfg.streamsPerConn - 1) / cfg.streamsPerConn
		}
	}
	return newPlainSet(addr, transportOptions{
		proto: cfg.proto, conns: conns, accept: cfg.accept,
		dialSem: make(chan struct{}, cfg.dialParallel),
	}, clients), nil
}

// ratioFields are the figures compared between baton and a reference.
var ratioFields = []string{"ops_s", "p50_us", "p99_us", "p999_us", "handoff_p50_us", "handoff_p99_us",
	"rss_per_waiter_b", "drain_s", "drain_grants_s", "rss_per_key_b", "release_ops_s"}

// printComparison prints, for the medians of one group, a RATIO line per
// reference target and a readable summary.
func printComparison(w io.Writer, meds map[string]*Result, targets []string) {
	base := meds["baton"]
	if base == nil {
		for _, t := range targets {
			if r := meds[t]; r != nil {
				fmt.Fprintf(w, "   %-6s %s\n", t, summaryLine(r))
			}
		}
		return
	}
	for _, t := range targets[1:] {
		ref := meds[t]
		if ref == nil {
			continue
		}
		var sb strings.Builder
		fmt.Fprintf(&sb, "RATIO workload=%s proto=%s client=%s c=%d", base.Workload, base.Proto, base.Client, base.C)
		if n, ok := base.get("standbys"); ok && n > 0 {
			fmt.Fprintf(&sb, " standbys=%.0f", n)
		}
		fmt.Fprintf(&sb, " baton/%s", t)
		for _, f := range ratioFields {
			bv, ok1 := base.get(f)
			rv, ok2 := ref.get(f)
			if ok1 && ok2 && rv != 0 {
				fmt.Fprintf(&sb, " %s=%.3f", f, bv/rv)
			}
		}
		fmt.Fprintln(w, sb.String())
	}
	fmt.Fprintf(w, "\n== %s, %s, %s client, c=%d%s (median of %s)\n", base.Workload, base.Proto, base.Client, base.C, standbysNote(base), strings.TrimPrefix(base.Run, "median/"))
	for _, t := range targets {
		r := meds[t]
		if r == nil {
			continue
		}
		fmt.Fprintf(w, "   %-6s %s\n", t, summaryLine(r))
		if t != "baton" {
			if bv, rv := base.OpsS, r.OpsS; rv > 0 {
				fmt.Fprintf(w, "          baton reaches %.0f%% of %s's rate\n", 100*bv/rv, t)
			}
		}
	}
	fmt.Fprintln(w)
}

// standbysNote names the standbys that replicated baton in a summary
// heading ("" without any).
func standbysNote(r *Result) string {
	n, ok := r.get("standbys")
	switch {
	case !ok || n == 0:
		return ""
	case n == 1:
		return ", baton with 1 standby replicating"
	}
	return fmt.Sprintf(", baton with %.0f standbys replicating", n)
}

// summaryLine is the readable form of a result.
func summaryLine(r *Result) string {
	unit := map[string]string{"uncontended": "cycles/s", "contended": "grants/s", "waiters": "drain grants/s", "parked": "drain grants/s", "keys": "acquires/s"}[r.Workload]
	s := fmt.Sprintf("%9.0f %-14s acquire p50 %s p99 %s p99.9 %s", r.OpsS, unit, us(r.P50), us(r.P99), us(r.P999))
	if v, ok := r.get("handoff_p99_us"); ok {
		p50, _ := r.get("handoff_p50_us")
		s += fmt.Sprintf(" | handoff p50 %s p99 %s", us(p50), us(v))
		if sv, ok := r.get("handoff_sent_p99_us"); ok {
			s += fmt.Sprintf(" (from the release sent: p99 %s)", us(sv))
		}
	}
	if v, ok := r.get("overtakes"); ok {
		v5, _ := r.get("overtakes_5ms")
		mn, _ := r.get("min_grants")
		mx, _ := r.get("max_grants")
		s += fmt.Sprintf(" | overtakes %.0f (>5ms: %.0f) grants/client %.0f..%.0f", v, v5, mn, mx)
	}
	if v, ok := r.get("rss_per_waiter_b"); ok {
		s += fmt.Sprintf(" | %.1f KiB/waiter", v/1024)
	}
	if v, ok := r.get("drain_s"); ok {
		s += fmt.Sprintf(" | drained in %.2fs", v)
	}
	if v, ok := r.get("rss_per_key_b"); ok {
		s += fmt.Sprintf(" | %.0f B/key", v)
	}
	if n, ok := r.get("standbys"); ok && n > 0 {
		s += fmt.Sprintf(" | %.0f standby(s)", n)
		if v, ok := r.get("server_cpu_us_per_op"); ok {
			s += fmt.Sprintf(", active CPU %.1fµs/op", v)
		}
		if v, ok := r.get("standby_cpu_us_per_op"); ok {
			s += fmt.Sprintf(", standby CPU %.1fµs/op", v)
		}
		if v, ok := r.get("sync_standbys"); ok {
			s += fmt.Sprintf(", sync_standbys %.0f", v)
		}
		if v, ok := r.get("standby_lag_p99_ms"); ok {
			p50, _ := r.get("standby_lag_p50_ms")
			s += fmt.Sprintf(", standby lag p50 %.2fms p99 %.2fms", p50, v)
		}
		if v, ok := r.get("standby_lag_ms"); ok {
			s += fmt.Sprintf(", probe seen on standby after %.1fms", v)
		}
	}
	if r.Errors > 0 {
		s += fmt.Sprintf(" | %d errors", r.Errors)
	}
	return s
}

// us formats microseconds readably.
func us(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fs", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.2fms", v/1e3)
	default:
		return fmt.Sprintf("%.0fµs", v)
	}
}
