package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// runEnv is what one run of one workload gets: the settings, the target,
// a way to make clients, the progress line and a key prefix unique to the
// run (so runs never see each other's locks).
type runEnv struct {
	cfg    *config
	tgt    *target
	newSet func(clients int) (lockerSet, error)
	prog   *progress
	prefix string

	// lag, set once the measured window is known (cpuWindow), adds the
	// standbys' lag over the window to a Result (standbyLagWindow).
	lag func(r *Result)

	errs     atomic.Int64
	firstErr atomic.Pointer[error]
	abort    context.CancelFunc
}

// key names lock i of kind within this run.
func (e *runEnv) key(kind string, i int) string {
	return e.prefix + kind + "/" + strconv.Itoa(i)
}

// fail counts an error, keeps the first, and aborts the run once more
// than cfg.maxErrors have happened. It sleeps a little so that a failing
// client does not spin. It returns true when the caller should stop.
func (e *runEnv) fail(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	n := e.errs.Add(1)
	e.prog.errs.Add(1)
	e.firstErr.CompareAndSwap(nil, &err)
	if n > int64(e.cfg.maxErrors) {
		e.abort()
		return true
	}
	time.Sleep(5 * time.Millisecond)
	return false
}

// err returns the run's failure, if it was aborted for errors.
func (e *runEnv) err() error {
	if e.errs.Load() > int64(e.cfg.maxErrors) {
		return fmt.Errorf("%d errors (more than --max-errors=%d), first: %v", e.errs.Load(), e.cfg.maxErrors, *e.firstErr.Load())
	}
	return nil
}

// result starts a Result for this run.
func (e *runEnv) result(c int) *Result {
	return &Result{
		Workload: e.cfg.workload, Proto: e.cfg.proto, Client: e.cfg.client,
		Target: e.tgt.name, C: c,
	}
}

// cpuWindows measures, between the shared-clock instants start and end,
// the CPU time of the server and, with --standbys, of its standbys, and
// the mean batches of baton's log (logBatchWindow).
type cpuWindows struct {
	server   func() time.Duration
	standbys []func() time.Duration
	logBatch func(r *Result)
	// batches, with --standbys: the active's replication counters
	// (replCounters) over the window; nil without standbys.
	batches func() ([]float64, bool)
}

// cpuWindow starts measuring the measured window [start, end]: the CPU
// times, and with --standbys the standbys' lag (standbyLagWindow, added
// by lag).
func (e *runEnv) cpuWindow(ctx context.Context, start, end int64) *cpuWindows {
	w := &cpuWindows{server: cpuWindow(ctx, e.tgt.pid, start, end), logBatch: logBatchWindow(ctx, e.tgt, start, end)}
	for _, s := range e.tgt.standbys {
		w.standbys = append(w.standbys, cpuWindow(ctx, s.pid, start, end))
	}
	if e.lag == nil {
		e.lag = standbyLagWindow(ctx, e.tgt, start, end)
	}
	if len(e.tgt.standbys) > 0 {
		w.batches = counterWindow(ctx, e.tgt.addr, replCounters, nil, start, end)
	}
	return w
}

// replCounters are an active's replication counters (GET /metrics):
// records sent to the standbys' streams, writes to them, and
// acknowledgements read.
var replCounters = []string{"baton_replication_sent_records_total", "baton_replication_stream_writes_total", "baton_replication_acks_received_total"}

// setCPU adds log_records_per_write and log_records_per_fsync (baton's
// mean batches over the window, logBatchWindow) and
// server_cpu_us_per_op: the server's CPU time (user +
// system, from /proc) over the measured window, per cycle or grant. On a
// machine the load generator shares, it is the figure that a change to the
// server's code moves most directly. With standbys it adds
// standby_cpu_us_per_op, the CPU time of all standbys together per cycle
// or grant (what replicating the workload costs them), and the batches of
// replication over the window: repl_records_per_write (records per write
// to the standbys' streams) and repl_records_per_ack (records per
// acknowledgement read).
func (e *runEnv) setCPU(r *Result, w *cpuWindows, ops int) {
	w.logBatch(r)
	if cpu := w.server(); cpu >= 0 && ops > 0 {
		r.set("server_cpu_us_per_op", float64(cpu.Microseconds())/float64(ops))
	}
	var sum time.Duration
	for _, f := range w.standbys {
		cpu := f()
		if cpu < 0 {
			return
		}
		sum += cpu
	}
	if len(w.standbys) > 0 && ops > 0 {
		r.set("standby_cpu_us_per_op", float64(sum.Microseconds())/float64(ops))
	}
	if w.batches == nil {
		return
	}
	if d, ok := w.batches(); ok && d[1] > 0 && d[2] > 0 {
		r.set("repl_records_per_write", d[0]/d[1])
		r.set("repl_records_per_ack", d[0]/d[2])
	}
}

// grantRec is one grant as its client saw it, on the shared clock.
type grantRec struct {
	client    int32
	shared    bool // acquired in shared mode (runModes)
	token     uint64
	waitStart int64 // acquire request about to be sent
	granted   int64 // grant received
	// releaseSent is the release request about to be sent, released its
	// answer received: a handoff is timed from each (fromSent).
	releaseSent int64
	released    int64
}

// window is a timed workload's measured window on the shared clock,
// after --warmup and --duration long, with its CPU measurement (cpuWindow)
// and each client's cap on cycles (--max-ops spread over c clients).
type window struct {
	start, end   int64
	perClientMax int64
	cpu          *cpuWindows
}

// timed opens the c clients of a timed run, which the caller closes, and
// then starts its measured window.
func (e *runEnv) timed(ctx context.Context, c int) (lockerSet, window, error) {
	set, err := e.newSet(c)
	if err != nil {
		return nil, window{}, err
	}
	start := now() + int64(e.cfg.warmup)
	end := start + int64(e.cfg.duration)
	return set, window{start: start, end: end, perClientMax: e.cfg.maxOps/int64(c) + 1, cpu: e.cpuWindow(ctx, start, end)}, nil
}

// cycles runs c clients that loop acquire, hold (--hold), release on key
// until the window ends, and returns the cycles whose release was
// answered, all clients together. Past the end a client finishes its
// cycle and stops; the clients still queued are granted in turn, so the
// key drains without cancelling anything. mode, if set, gives client i's
// n-th acquire its mode (AcquireMode: the set's lockers must be
// modeLockers, or each client fails once and stops); nil: a plain
// Acquire.
func (e *runEnv) cycles(ctx context.Context, set lockerSet, c int, key string, w window, mode func(i int, n int64) acqMode) []grantRec {
	recs := make([][]grantRec, c)
	var wg sync.WaitGroup
	for i := 0; i < c; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l := set.For(i)
			ml, ok := l.(modeLocker)
			if mode != nil && !ok {
				e.fail(ctx, fmt.Errorf("client %s cannot acquire in a mode", e.cfg.client))
				return
			}
			for n := int64(0); n < w.perClientMax; n++ {
				ws := now()
				if ws >= w.end || ctx.Err() != nil {
					return
				}
				var m acqMode
				tok, g, rs, err := e.cycle(ctx, l, key, e.cfg.hold, func() (uint64, error) {
					if mode == nil {
						return l.Acquire(ctx, key, e.cfg.lease, e.cfg.wait)
					}
					m = mode(i, n)
					return ml.AcquireMode(ctx, key, e.cfg.lease, e.cfg.wait, m)
				})
				if err != nil {
					if e.fail(ctx, err) {
						return
					}
					continue
				}
				e.prog.ops.Add(1)
				recs[i] = append(recs[i], grantRec{client: int32(i), shared: m.shared, token: tok, waitStart: ws, granted: g, releaseSent: rs, released: now()})
			}
		}(i)
	}
	wg.Wait()
	var all []grantRec
	for _, rs := range recs {
		all = append(all, rs...)
	}
	return all
}

// cycle is one cycle of a client: acquire (through acq) key, hold it for
// hold, release it with l. It returns the token, when the grant was
// received (the shared clock), and the error of the acquire or the
// release.
func (e *runEnv) cycle(ctx context.Context, l locker, key string, hold time.Duration, acq func() (uint64, error)) (tok uint64, granted, releaseSent int64, err error) {
	tok, err = acq()
	granted = now()
	if err != nil {
		return 0, granted, granted, err
	}
	if hold > 0 {
		time.Sleep(hold)
	}
	releaseSent = now()
	return tok, granted, releaseSent, l.Release(ctx, key, tok)
}

// fromSent returns a copy of all with each release's answer taken as
// received when its request was sent: analyzeGrants and analyzeSlots on it
// time each handoff from the release sent (what the node did for the
// release and its grants included, the release's answer to its own client
// left out) instead of from the release answered (the node's work before
// that answer left out: over HTTP/1.1 it writes the grants a release makes
// before the release's own answer). A grant then counts as waiting when
// its acquire was sent before the release was.
func fromSent(all []grantRec) []grantRec {
	out := slices.Clone(all)
	for i := range out {
		out[i].released = out[i].releaseSent
	}
	return out
}

// serverRSS is the target's settled RSS (settledRSS), 0 when it is not a
// local process.
func (e *runEnv) serverRSS() (int64, error) {
	if e.tgt.pid <= 0 {
		return 0, nil
	}
	return settledRSS(e.tgt.pid)
}

// runUncontended: each of C clients loops acquire+release on its own key.
// ops_s is cycles/s; latencies are the acquire's.
func runUncontended(ctx context.Context, e *runEnv) (*Result, error) {
	c := e.cfg.c
	set, w, err := e.timed(ctx, c)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	lats := make([][]int64, c)
	var wg sync.WaitGroup
	for i := 0; i < c; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l, key := set.For(i), e.key("u", i)
			for n := int64(0); n < w.perClientMax; n++ {
				t0 := now()
				if t0 >= w.end || ctx.Err() != nil {
					return
				}
				_, t1, _, err := e.cycle(ctx, l, key, 0, func() (uint64, error) { return l.Acquire(ctx, key, e.cfg.lease, e.cfg.wait) })
				if err != nil {
					if e.fail(ctx, err) {
						return
					}
					continue
				}
				t2 := now()
				e.prog.ops.Add(1)
				if t0 >= w.start && t2 <= w.end {
					lats[i] = append(lats[i], t1-t0)
				}
			}
		}(i)
	}
	wg.Wait()
	if err := e.err(); err != nil {
		return nil, err
	}
	var all []int64
	for _, l := range lats {
		all = append(all, l...)
	}
	r := e.result(c)
	r.OpsS = float64(len(all)) / e.cfg.duration.Seconds()
	r.P50, r.P99, r.P999 = percentiles(all)
	r.set("cycles", float64(len(all)))
	e.setCPU(r, w.cpu, len(all))
	r.Errors = e.errs.Load()
	return r, nil
}

// runContended: C clients loop acquire+release on one key. ops_s is
// grants/s; latencies are the acquire's (the time in the queue). It adds
// handoff latency, FIFO overtakes and the spread of grants per client.
func runContended(ctx context.Context, e *runEnv) (*Result, error) {
	c := e.cfg.c
	set, w, err := e.timed(ctx, c)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	srvHandoff := serverHandoffWindow(ctx, e.tgt, w.start, w.end)
	all := e.cycles(ctx, set, c, e.key("c", 0), w, nil)
	if err := e.err(); err != nil {
		return nil, err
	}
	a := analyzeGrants(all, w.start, w.end, c)
	r := e.result(c)
	r.OpsS = float64(a.grants) / e.cfg.duration.Seconds()
	r.P50, r.P99, r.P999 = percentiles(a.waits)
	r.set("grants", float64(a.grants))
	hp50, hp99, _ := percentiles(a.handoffs)
	r.set("handoff_p50_us", hp50)
	r.set("handoff_p99_us", hp99)
	sp50, sp99, _ := percentiles(analyzeGrants(fromSent(all), w.start, w.end, c).handoffs)
	r.set("handoff_sent_p50_us", sp50)
	r.set("handoff_sent_p99_us", sp99)
	srvHandoff(r)
	r.set("overtakes", float64(a.overtakes))
	r.set("overtakes_5ms", float64(a.overtakes5ms))
	r.set("max_overtake_us", float64(a.maxOvertake)/1e3)
	r.set("min_grants", float64(a.minGrants))
	r.set("max_grants", float64(a.maxGrants))
	e.setCPU(r, w.cpu, a.grants)
	r.Errors = e.errs.Load()
	return r, nil
}

// grantAnalysis is what analyzeGrants finds in the grants of one key.
type grantAnalysis struct {
	grants       int     // grants received in [start, end)
	waits        []int64 // their acquire latencies
	handoffs     []int64 // release answered -> next grant received, ns (>= 0)
	overtakes    int     // grants made while an earlier waiter was still queued
	overtakes5ms int     // ... that earlier waiter having started > 5 ms before
	maxOvertake  int64   // the largest such lead, ns
	minGrants    int
	maxGrants    int
}

// analyzeGrants orders the grants of one key by token (the server's grant
// order) and measures, for the grants received within [start, end):
//   - handoff: from the previous grant's release being answered to this
//     grant being received (clamped at 0: the two answers leave the server
//     together and either may arrive first);
//   - FIFO overtakes: this grant went to a client that started waiting
//     later than some client granted after it;
//   - grants per client (of clients 0..c-1).
func analyzeGrants(all []grantRec, start, end int64, c int) grantAnalysis {
	sort.Slice(all, func(i, j int) bool { return all[i].token < all[j].token })
	n := len(all)
	// suffixMin[i] = earliest waitStart among grants i..n-1.
	suffixMin := make([]int64, n+1)
	suffixMin[n] = 1<<63 - 1
	for i := n - 1; i >= 0; i-- {
		suffixMin[i] = min(suffixMin[i+1], all[i].waitStart)
	}
	var a grantAnalysis
	per := make([]int, c)
	for i, g := range all {
		if g.granted < start || g.granted >= end {
			continue
		}
		a.grants++
		a.waits = append(a.waits, g.granted-g.waitStart)
		if int(g.client) < c {
			per[g.client]++
		}
		if i > 0 {
			a.handoffs = append(a.handoffs, max(0, g.granted-all[i-1].released))
		}
		if lead := g.waitStart - suffixMin[i+1]; lead > 0 {
			a.overtakes++
			if lead > int64(5*time.Millisecond) {
				a.overtakes5ms++
			}
			a.maxOvertake = max(a.maxOvertake, lead)
		}
	}
	if c > 0 {
		a.minGrants, a.maxGrants = per[0], per[0]
		for _, p := range per {
			a.minGrants, a.maxGrants = min(a.minGrants, p), max(a.maxGrants, p)
		}
	}
	return a
}

// awaitQueued waits, bounded by 30 s plus 1 ms a waiter, until the w
// acquires are sent (sent counts them) and, where the target tells
// (baton, floor: waiting returns the count and true), queued at the
// server, which it reads every poll and shows as the phase "<label> n/w".
// It stops early when an error was counted or ctx ends. It returns the
// bound and the count last read (-1: the target does not tell).
func (e *runEnv) awaitQueued(ctx context.Context, w int, sent *atomic.Int64, label string, poll time.Duration, waiting func(hc *http.Client) (int, bool)) (parkBy time.Time, queued int) {
	parkBy = time.Now().Add(30*time.Second + time.Duration(w)*time.Millisecond)
	for sent.Load() < int64(w) && time.Now().Before(parkBy) && ctx.Err() == nil && e.errs.Load() == 0 {
		time.Sleep(20 * time.Millisecond)
	}
	hc := &http.Client{Transport: newTransport(transportOptions{proto: "h1"}, 1)}
	defer hc.CloseIdleConnections()
	queued = -1
	for time.Now().Before(parkBy) && ctx.Err() == nil && e.errs.Load() == 0 {
		n, ok := waiting(hc)
		if !ok {
			break
		}
		queued = n
		e.prog.setPhase(fmt.Sprintf("%s %d/%d", label, n, w))
		if n >= w {
			break
		}
		time.Sleep(poll)
	}
	return parkBy, queued
}

// runWaiters: W clients block on one held key; the server's RSS is read
// before and once all are queued; then the holder releases and each
// waiter, once granted, releases at once, until all are served.
func runWaiters(ctx context.Context, e *runEnv) (*Result, error) {
	w := e.cfg.waiters
	set, err := e.newSet(w + 1)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	key := e.key("w", 0)
	holder := set.For(w)
	htok, err := holder.Acquire(ctx, key, 3600, 0)
	if err != nil {
		return nil, fmt.Errorf("holder: %w", err)
	}
	holderGranted := now()
	rss0, err := e.serverRSS()
	if err != nil {
		return nil, err
	}

	var sent atomic.Int64
	wctx := withSentCounter(ctx, &sent)
	recs := make([]grantRec, w)
	got := make([]bool, w)
	var wg sync.WaitGroup
	e.prog.setPhase("queueing")
	for i := 0; i < w; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l := set.For(i)
			ws := now()
			if _, plain := l.(*plainLocker); !plain {
				sent.Add(1) // no wire trace there: count calls made
			}
			tok, err := l.Acquire(wctx, key, e.cfg.lease, 0)
			g := now()
			if err != nil {
				e.fail(ctx, err)
				return
			}
			err = l.Release(ctx, key, tok)
			if err != nil {
				e.fail(ctx, err)
				return
			}
			e.prog.ops.Add(1)
			recs[i] = grantRec{client: int32(i), token: tok, waitStart: ws, granted: g, released: now()}
			got[i] = true
		}(i)
	}

	parkBy, queued := e.awaitQueued(ctx, w, &sent, "queued", 100*time.Millisecond, func(hc *http.Client) (int, bool) {
		return queueLen(ctx, hc, e.tgt.addr, key)
	})
	if e.errs.Load() > 0 {
		e.abort()
		wg.Wait()
		return nil, fmt.Errorf("while queueing %d waiters: %d errors, first: %v", w, e.errs.Load(), *e.firstErr.Load())
	}
	if sent.Load() < int64(w) || (queued >= 0 && queued < w) {
		e.abort()
		wg.Wait()
		return nil, fmt.Errorf("only %d of %d waiters sent, %d queued at the server, after %v", sent.Load(), w, queued, time.Until(parkBy))
	}
	rss1, err := e.serverRSS()
	if err != nil {
		return nil, err
	}

	e.prog.setPhase("draining")
	t0 := now()
	if err := holder.Release(ctx, key, htok); err != nil {
		e.abort()
		wg.Wait()
		return nil, fmt.Errorf("holder release: %w", err)
	}
	holderReleased := now()
	wg.Wait()
	if e.errs.Load() > 0 {
		return nil, fmt.Errorf("while draining: %d errors, first: %v", e.errs.Load(), *e.firstErr.Load())
	}

	all := []grantRec{{client: int32(w), token: htok, waitStart: holderGranted, granted: holderGranted, released: holderReleased}}
	var last int64
	for i, r := range recs {
		if got[i] {
			all = append(all, r)
			last = max(last, r.granted)
		}
	}
	a := analyzeGrants(all, t0, 1<<62, 0)
	drain := float64(max(0, last-t0)) / 1e9
	r := e.result(w)
	if drain > 0 {
		r.OpsS = float64(w) / drain
	}
	r.P50, r.P99, r.P999 = percentiles(a.waits)
	hp50, hp99, _ := percentiles(a.handoffs)
	r.set("grants", float64(a.grants))
	r.set("handoff_p50_us", hp50)
	r.set("handoff_p99_us", hp99)
	if e.tgt.pid > 0 {
		r.set("rss_base_b", float64(rss0))
		r.set("rss_per_waiter_b", float64(rss1-rss0)/float64(w))
	}
	r.set("drain_s", drain)
	r.set("drain_grants_s", r.OpsS)
	r.Errors = e.errs.Load()
	return r, nil
}

// runKeys: C clients take K distinct locks (long leases) and hold them all;
// the server's RSS is read before and after; then all are released.
func runKeys(ctx context.Context, e *runEnv) (*Result, error) {
	k, c := e.cfg.keys, e.cfg.c
	set, err := e.newSet(c)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	rss0, err := e.serverRSS()
	if err != nil {
		return nil, err
	}
	toks := make([]uint64, k)
	lats := make([][]int64, c)
	e.prog.setPhase("taking keys")
	var wg sync.WaitGroup
	fill := func(op func(l locker, j int) error) float64 {
		t0 := now()
		for i := 0; i < c; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				l := set.For(i)
				for j := i; j < k; j += c {
					if ctx.Err() != nil {
						return
					}
					if err := op(l, j); err != nil {
						if e.fail(ctx, err) {
							return
						}
					}
					e.prog.ops.Add(1)
				}
			}(i)
		}
		wg.Wait()
		return float64(now()-t0) / 1e9
	}
	fillS := fill(func(l locker, j int) error {
		t0 := now()
		tok, err := l.Acquire(ctx, e.key("k", j), e.cfg.keysLease, 1)
		if err != nil {
			return err
		}
		lats[j%c] = append(lats[j%c], now()-t0)
		toks[j] = tok
		return nil
	})
	if err := e.err(); err != nil {
		return nil, err
	}
	rss1, err := e.serverRSS()
	if err != nil {
		return nil, err
	}
	held := 0
	for _, t := range toks {
		if t != 0 {
			held++
		}
	}
	r := e.result(c)
	if e.tgt.owned {
		// The server is stopped after the run: no need to clean up.
		return e.keysResult(r, lats, held, fillS, rss0, rss1, 0), nil
	}
	e.prog.setPhase("releasing keys")
	releaseS := fill(func(l locker, j int) error {
		if toks[j] == 0 {
			return nil
		}
		return l.Release(ctx, e.key("k", j), toks[j])
	})
	if err := e.err(); err != nil {
		return nil, err
	}
	return e.keysResult(r, lats, held, fillS, rss0, rss1, releaseS), nil
}

// keysResult fills in the keys workload's figures; releaseS is 0 when the
// keys were left held.
func (e *runEnv) keysResult(r *Result, lats [][]int64, held int, fillS float64, rss0, rss1 int64, releaseS float64) *Result {
	var all []int64
	for _, l := range lats {
		all = append(all, l...)
	}
	r.OpsS = float64(held) / fillS
	r.P50, r.P99, r.P999 = percentiles(all)
	r.set("keys", float64(e.cfg.keys))
	r.set("held", float64(held))
	if e.tgt.pid > 0 && held > 0 {
		r.set("rss_base_b", float64(rss0))
		r.set("rss_per_key_b", float64(rss1-rss0)/float64(held))
	}
	if releaseS > 0 {
		r.set("release_ops_s", float64(held)/releaseS)
	}
	r.Errors = e.errs.Load()
	return r
}

// errNeedsCluster reports that a workload cannot run without a cluster.
var errNeedsCluster = errors.New("needs a cluster")

// runModes: C clients loop acquire+release on one key in the mode mode
// gives each acquire (client i, its n-th cycle), with the key's limit:
// the semaphore workload (every acquire shared, limit --sem-limit) and the
// read-heavy mix (rwmix: --shared-pct shared, the rest exclusive, limit
// C). ops_s is grants/s; latencies are the acquire's; handoff is, for a
// grant that waited for a release, the time from the release that let it
// in being answered to the grant being received (analyzeSlots).
func runModes(ctx context.Context, e *runEnv, mode func(i int, n int64) acqMode) (*Result, error) {
	c := e.cfg.c
	set, w, err := e.timed(ctx, c)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	srvHandoff := serverHandoffWindow(ctx, e.tgt, w.start, w.end)
	limit := mode(0, 0).limit // the same for every acquire
	all := e.cycles(ctx, set, c, e.key("m", 0), w, mode)
	if err := e.err(); err != nil {
		return nil, err
	}
	shared := 0
	for _, g := range all {
		if g.shared && g.granted >= w.start && g.granted < w.end {
			shared++
		}
	}
	grants, waits, handoffs := analyzeSlots(all, w.start, w.end, limit, c)
	r := e.result(c)
	r.OpsS = float64(grants) / e.cfg.duration.Seconds()
	r.P50, r.P99, r.P999 = percentiles(waits)
	r.set("grants", float64(grants))
	if grants > 0 {
		r.set("shared_pct", 100*float64(shared)/float64(grants))
	}
	hp50, hp99, _ := percentiles(handoffs)
	r.set("handoffs", float64(len(handoffs)))
	r.set("handoff_p50_us", hp50)
	r.set("handoff_p99_us", hp99)
	_, _, sent := analyzeSlots(fromSent(all), w.start, w.end, limit, c)
	sp50, sp99, _ := percentiles(sent)
	r.set("handoff_sent_p50_us", sp50)
	r.set("handoff_sent_p99_us", sp99)
	srvHandoff(r)
	e.setCPU(r, w.cpu, grants)
	r.Errors = e.errs.Load()
	return r, nil
}

// analyzeSlots measures the grants of one key with several holders and
// the given limit, received within [start, end): their number, their
// acquire latencies, and for each grant that waited for a release the
// handoff from the release that let it in to the grant (clamped at 0, as
// in analyzeGrants). The grants are taken in token order (the server's
// grant order) and the release that let grant i in is the last of those
// that had to end first: for an exclusive grant, every earlier grant's;
// for a shared one, the latest earlier exclusive grant's, and, when i or
// more earlier grants exist, the one that brought them below limit (the
// limit-th latest release among them). A grant counts as waiting when
// its acquire was sent before that release was answered; one sent later
// was granted without waiting. Times are the client's: a release is
// answered, a grant received. With limit c or more (c clients, each
// holding one grant at most) no grant waits for a slot, and the limit is
// not looked at: on the client's clock, a grant whose acquire took long
// would seem to wait for the releases of the other clients' cycles made
// meanwhile.
func analyzeSlots(all []grantRec, start, end int64, limit, c int) (grants int, waits, handoffs []int64) {
	if limit >= c {
		limit = 0
	}
	all = slices.Clone(all)
	slices.SortFunc(all, func(a, b grantRec) int { return cmp.Compare(a.token, b.token) })
	var lastAll, lastExcl int64    // latest release of every earlier grant, of the earlier exclusive ones
	top := make([]int64, 0, limit) // the limit latest releases of the earlier grants, ascending
	for _, g := range all {
		if g.granted >= start && g.granted < end {
			grants++
			waits = append(waits, g.granted-g.waitStart)
			freed := lastAll
			if g.shared {
				freed = lastExcl
				if limit > 0 && len(top) == limit {
					freed = max(freed, top[0])
				}
			}
			if freed > g.waitStart {
				handoffs = append(handoffs, max(0, g.granted-freed))
			}
		}
		lastAll = max(lastAll, g.released)
		if !g.shared {
			lastExcl = max(lastExcl, g.released)
		}
		if limit > 0 && (len(top) < limit || g.released > top[0]) {
			if len(top) == limit {
				top = slices.Delete(top, 0, 1)
			}
			i, _ := slices.BinarySearch(top, g.released)
			top = slices.Insert(top, i, g.released)
		}
	}
	return grants, waits, handoffs
}

// runParked (issue 17): W acquires park on few connections, the server's
// RSS is read before and after, and its cost per parked acquire is what
// the figure rss_per_waiter_b says. Waiter i goes to client i (for native:
// connection i mod conns) and key i / conns, so that no connection has two
// acquires of one key (a connection's same-key acquires would wait their
// turn on the connection, not in the key's queue). Every key is held
// first, by one more client; the baseline RSS is read with the keys held
// and the connections open, so that only the parked acquires are
// counted. Then the holders release and each waiter releases once
// granted, until all are served.
func runParked(ctx context.Context, e *runEnv) (*Result, error) {
	w := e.cfg.waiters
	// Clients w.. are the holders, one per holding goroutine (an HTTP
	// client serves one call at a time).
	const holders = 64
	set, err := e.newSet(w + holders)
	if err != nil {
		return nil, err
	}
	defer set.Close()
	conns := parkedConns(e.cfg)
	nkeys := (w + conns - 1) / conns
	htoks := make([]uint64, nkeys)
	e.prog.setPhase("holding")
	if err := forEach(ctx, nkeys, holders, func(j, k int) error {
		tok, err := set.For(w+j).Acquire(ctx, e.key("p", k), 3600, 0)
		htoks[k] = tok
		return err
	}); err != nil {
		return nil, fmt.Errorf("holder: %w", err)
	}
	rss0, err := e.serverRSS()
	if err != nil {
		return nil, err
	}
	var sent atomic.Int64
	wctx := withSentCounter(ctx, &sent)
	var wg sync.WaitGroup
	e.prog.setPhase("queueing")
	for i := 0; i < w; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			l := set.For(i)
			if _, plain := l.(*plainLocker); !plain {
				sent.Add(1)
			}
			key := e.key("p", i/conns)
			tok, err := l.Acquire(wctx, key, e.cfg.lease, 0)
			if err != nil {
				e.fail(ctx, err)
				return
			}
			if err := l.Release(ctx, key, tok); err != nil {
				e.fail(ctx, err)
				return
			}
			e.prog.ops.Add(1)
		}(i)
	}
	_, queued := e.awaitQueued(ctx, w, &sent, "parked", 200*time.Millisecond, func(hc *http.Client) (int, bool) {
		return totalWaiters(ctx, hc, e.tgt.addr, func(k int) string { return e.key("p", k) }, nkeys)
	})
	if e.errs.Load() > 0 || sent.Load() < int64(w) || (queued >= 0 && queued < w) {
		e.abort()
		wg.Wait()
		if e.errs.Load() > 0 {
			return nil, fmt.Errorf("while parking %d acquires: %d errors, first: %v", w, e.errs.Load(), *e.firstErr.Load())
		}
		return nil, fmt.Errorf("only %d of %d acquires sent, %d parked at the server", sent.Load(), w, queued)
	}
	rss1, err := e.serverRSS()
	if err != nil {
		return nil, err
	}
	e.prog.setPhase("draining")
	t0 := now()
	if err := forEach(ctx, nkeys, holders, func(j, k int) error { return set.For(w+j).Release(ctx, e.key("p", k), htoks[k]) }); err != nil {
		e.abort()
		wg.Wait()
		return nil, fmt.Errorf("holder release: %w", err)
	}
	wg.Wait()
	if e.errs.Load() > 0 {
		return nil, fmt.Errorf("while draining: %d errors, first: %v", e.errs.Load(), *e.firstErr.Load())
	}
	drain := float64(max(0, now()-t0)) / 1e9
	r := e.result(w)
	if drain > 0 {
		r.OpsS = float64(w) / drain
	}
	r.set("conns", float64(conns))
	r.set("keys", float64(nkeys))
	if e.tgt.pid > 0 {
		r.set("rss_base_b", float64(rss0))
		r.set("rss_per_waiter_b", float64(rss1-rss0)/float64(w))
	}
	r.set("drain_s", drain)
	return r, nil
}

// parkedConns is the number of connections (native) or clients' spread the
// parked workload puts its acquires over: --conns, or 16.
func parkedConns(cfg *config) int {
	if cfg.conns > 0 {
		return cfg.conns
	}
	return 16
}

// forEach runs fn(j, i) for i in 0..n-1 on at most par goroutines (j is
// the goroutine's number, 0..par-1) and returns the first error.
func forEach(ctx context.Context, n, par int, fn func(j, i int) error) error {
	var next atomic.Int64
	var first atomic.Pointer[error]
	var wg sync.WaitGroup
	for j := range min(par, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil || ctx.Err() != nil {
					return
				}
				if err := fn(j, i); err != nil {
					first.CompareAndSwap(nil, &err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if p := first.Load(); p != nil {
		return *p
	}
	return ctx.Err()
}
