package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/cluster"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/internal/rawio"
	"github.com/baton-io/baton/native"
	"github.com/baton-io/baton/wal"
)

// Node is one running baton node: the log of changes in data_dir, the
// engine, its metrics and event log, the cluster node (with peers), the
// HTTP server and the native protocol server (native_listen), built by OpenNode in that order and stopped by Close
// in the reverse one. `baton serve` is config and signals around a Node;
// tests open one on 127.0.0.1:0.
type Node struct {
	cfg     serveConfig
	log     *slog.Logger
	wal     *wal.Log
	sync    *cluster.SyncLog // a cluster node's engine log: wal, then the sync_standbys' acknowledgements
	eng     *engine.Engine
	metrics *handlers.Metrics
	events  *handlers.EventLog
	peer    atomic.Pointer[cluster.Node] // nil: a single node, or not built yet
	snaps   *snapshotter                 // background snapshots of the log
	// replaying is set while the engine replays the log: the events of
	// replayed changes were reported when they happened.
	replaying atomic.Bool
	srv       *http.Server
	ln        net.Listener
	nsrv      *native.Server // nil without native_listen
	nln       net.Listener   // the native protocol's listener, or nil
	useTLS    bool
	cancel    context.CancelFunc
	served    chan error // a server's end: an error, or http.ErrServerClosed

	closeOnce sync.Once
	closeErr  error
}

// repairHint is how a user starts a node whose log is damaged; quoted in
// the *wal.CorruptError that refuses the start.
const repairHint = "start with --repair-log (env BATON_REPAIR_LOG=true)"

// startError is a reason OpenNode refuses to start, with the exit code of
// `baton serve`: exitUsage (2) for what the operator must fix (data_dir
// locked, not writable or damaged, an invalid cluster setting), exitError
// (1) otherwise.
type startError struct {
	code int
	err  error
}

func (e *startError) Error() string { return e.err.Error() }
func (e *startError) Unwrap() error { return e.err }

// exitCode is the exit code of `baton serve` for an error of OpenNode.
func exitCode(err error) int {
	var se *startError
	if errors.As(err, &se) {
		return se.code
	}
	return exitError
}

// OpenNode builds and starts a node from cfg (validated by loadConfig):
// it binds cfg.Listen and cfg.NativeListen first (an address in use is
// refused, exit code 1, before anything is written in data_dir), then
// opens the log in cfg.DataDir (refusing with exit code 2 a data_dir
// that another process holds, that cannot be written, or whose log or
// snapshot is damaged before its tail; a torn last record is cut off with
// a warning), then the metrics, the event log and the engine, which writes
// every change to the log, replays the newest snapshot and the log before
// anything is served, and gets background snapshots; a single node is then
// promoted, a cluster node starts as a standby with its replayed state
// (the cluster promotes it or has it follow the active, from its log's
// position). Then the cluster node (with peers) and the HTTP server on
// the listener, which serves once OpenNode returns (connections wait in
// the listen backlog until then). log receives every
// component's lines. Errors are *startError values naming what failed.
func OpenNode(cfg serveConfig, log *slog.Logger) (*Node, error) {
	n := &Node{cfg: cfg, log: log, served: make(chan error, 2)}
	ok := false
	defer func() {
		if !ok {
			n.abort()
		}
	}()

	// The ports first: a node that cannot have them (another process holds
	// one) is refused before it creates or changes anything in data_dir.
	// Until OpenNode returns, connections wait in the listen backlog. The
	// native listener is bound before the cluster node too, so that a
	// native_listen with port 0 is known to the peers (cluster.Config.Native).
	var err error
	if n.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, &startError{exitError, fmt.Errorf("listen: cannot listen on %s: %w", cfg.Listen, err)}
	}
	if u, err := url.Parse(cfg.Advertise); err == nil && u.Port() == "0" {
		// Derived from a listen address with port 0 (tests): the port the
		// system chose.
		_, port, _ := net.SplitHostPort(n.ln.Addr().String())
		u.Host = net.JoinHostPort(u.Hostname(), port)
		cfg.Advertise = u.String()
		n.cfg.Advertise = cfg.Advertise
	}
	if cfg.NativeListen != "" {
		if n.nln, err = net.Listen("tcp", cfg.NativeListen); err != nil {
			return nil, &startError{exitError, fmt.Errorf("native_listen: cannot listen on %s: %w", cfg.NativeListen, err)}
		}
	}

	wc, err := cfg.walConfig()
	if err != nil {
		return nil, &startError{exitUsage, err}
	}
	wc.Logger = log
	// Not for a cluster node: one that crashed while it installed its
	// active's snapshot (wal.Log.Install) may have no log file left, and
	// it gets that state again from the active.
	switch {
	case len(cfg.Peers) > 0:
	case engine.HasTokenMark(cfg.DataDir):
		// The engine writes it only after the log is open (below).
		wc.Existed = "its token-hwm is there, which a node writes only once its log exists"
	case wal.Began(cfg.DataDir):
		wc.Existed = "its newest-segment file is there, which the log writes only once it has begun a segment"
	}
	if n.wal, err = wal.Open(wc); err != nil {
		return nil, walStartError(cfg.DataDir, err)
	}

	n.metrics = handlers.NewMetrics()
	n.metrics.Registry().MustRegister(walCollector{l: n.wal, markOK: func() bool { return n.eng == nil || n.eng.TokenMarkWritable() }})
	// Numbered from the start time: above every Seq of an earlier run.
	n.events = handlers.NewEventLogFrom(handlers.DefaultEventLogSize, uint64(time.Now().UnixMicro()))
	ec := cfg.engineConfig()
	ec.OnEvent = n.onEvent
	ec.OnTokenMark = func(err error) {
		if err != nil {
			log.Error("token high-water mark: write failed; refusing grants until it can be written", "data_dir", cfg.DataDir, "err", err)
			return
		}
		log.Info("token high-water mark: written again", "data_dir", cfg.DataDir)
	}
	single := len(cfg.Peers) == 0
	// Every node writes its own log: a single node's changes, a cluster
	// node's as the active or as the active's records it replicates.
	ec.Log = n.wal
	if !single {
		// Changes wait for sync_standbys too (cluster.SyncLog).
		n.sync = cluster.NewSyncLog(n.wal)
		ec.Log = n.sync
	}
	ec.Standby = true // a node replays its log as a standby, then is promoted (a cluster node: by the cluster)
	n.eng, err = engine.New(ec)
	var te *engine.TokenMarkError
	if errors.As(err, &te) && cfg.RepairLog {
		log.Warn("repair: the token high-water mark is corrupt; dropped and written anew: tokens continue above every token in the log and the clock",
			"file", te.File, "content", string(te.Content))
		ec.RepairTokenMark = true
		n.eng, err = engine.New(ec)
	}
	switch {
	case errors.As(err, &te):
		// Not a crash's leftover (the file is only ever replaced whole):
		// the operator decides, as for a damaged log.
		return nil, &startError{exitUsage, fmt.Errorf("%w; it is only ever replaced whole (a temporary file, fsynced, renamed), so no crash leaves it so; to start anyway, with tokens above every token in the log and the clock (not above tokens neither holds), %s",
			err, repairHint)}
	case errors.Is(err, fs.ErrPermission):
		// token-hwm the node may not read or replace (another user's).
		return nil, &startError{exitUsage, fmt.Errorf("cannot start the engine: %w (the node's user must be able to read and write every file in data_dir)", err)}
	case errors.Is(err, syscall.EISDIR):
		return nil, &startError{exitUsage, fmt.Errorf("cannot start the engine: %w (%s)", err, dirInsteadOfFile)}
	case err != nil:
		return nil, &startError{exitError, fmt.Errorf("cannot start the engine: %w", err)}
	}
	snap, err := n.replay()
	if err != nil {
		return nil, err
	}
	last := n.wal.LastIndex()
	var resave, risk string
	switch {
	case snap.reach > last:
		// The snapshot holds records of some shards beyond the log's end
		// (one installed from an active, whose stream ended before the
		// records up to its last shard's dump came): the records this
		// node writes at those indexes would be taken, at its next
		// restart, as held by it and skipped. A snapshot of the state now,
		// every shard at the log's end, replaces it first.
		resave, risk = "the newest snapshot held records beyond the log's end", "a restart may skip records written up to its reach"
	case n.wal.FirstIndex() > snap.index+1:
		// Repaired (--repair-log) over records missing before the log's
		// first segment: a snapshot of the state now covers the gap, so
		// that the next start needs no flag.
		resave, risk = "the log was repaired over missing records", "the next start stops at the gap again"
	}
	if resave != "" {
		var size countWriter
		err := n.wal.SaveSnapshot(last, func(w io.Writer) error { return n.dumpState(io.MultiWriter(w, &size)) })
		if err != nil {
			log.Error("a snapshot of the state at the log's end could not be saved at start: "+risk,
				"why", resave, "log_end", last, "snapshot_reach", snap.reach, "err", err)
		} else {
			log.Info("snapshot saved at start: "+resave, "index", last, "snapshot_reach", snap.reach)
			snap = snapshotStart{index: last, size: uint64(size)}
		}
	}
	if single {
		// Leases that ran out while the node was down end now; waiters
		// without an ID of their own, whose requests died with the old
		// process, are dropped.
		n.eng.Promote(engine.Restart)
	}
	n.snaps = startSnapshotter(n.wal, n.dumpState, log, snapshotMinBytes, snapshotCheck, snap)

	hc := handlers.Config{Node: cfg.Advertise, MaxBody: cfg.MaxBody, Logger: log, AuthTokens: cfg.AuthTokens, AdminTokens: cfg.AdminTokens, Metrics: n.metrics,
		CORSOrigins: cfg.CORSOrigins, Events: n.events, Pprof: cfg.Pprof}
	var peer *cluster.Node
	if !single {
		cc := cfg.clusterConfig()
		if n.nln != nil {
			cc.Native = cfg.nativeAdvertise(n.nln.Addr().String())
		}
		cc.Logger = log
		cc.Log, cc.Sync = n.wal, n.sync
		cc.IDFile = filepath.Join(cfg.DataDir, cluster.IDFileName)
		cc.OnRole = n.metrics.SetRole
		cc.OnChange = func(kind, node, msg string) {
			n.metrics.OnClusterChange(kind)
			n.events.AddEvent(api.Event{Kind: kind, Node: node, Message: msg})
		}
		if peer, err = cluster.New(cc, n.eng); err != nil {
			return nil, &startError{exitUsage, fmt.Errorf("cannot start the cluster node: %w", err)}
		}
		n.peer.Store(peer)
		n.metrics.Registry().MustRegister(replCollector{peer})
		n.metrics.SetRole(api.RoleStandby)
		hc.Gate, hc.Cluster = peer, peer.View
	} else {
		hc.LastIndex = n.wal.LastIndex
	}
	h := handlers.New(n.eng, hc)
	if peer != nil {
		h.Router().Mount(cluster.PathPrefix, peer.Handler()) // checks the cluster secret itself
	}

	var baseCtx context.Context
	baseCtx, n.cancel = context.WithCancel(context.Background())
	n.srv = handlers.NewHTTPServer(h, baseCtx, log)
	n.srv.TLSConfig, _ = cfg.tlsConfig() // loaded once already by validate
	n.useTLS = n.srv.TLSConfig != nil    // read before Serve: ServeTLS writes to it
	srv, ln, useTLS := n.srv, n.ln, n.useTLS
	ln = rawio.Listener(ln) // read(2) and write(2) without waking sysmon
	if !useTLS {
		ln = handlers.BadRequestListener(ln) // baton's 400 for a path net/http cannot parse
	}
	go func() {
		if useTLS {
			n.served <- srv.ServeTLS(ln, "", "")
			return
		}
		n.served <- srv.Serve(ln)
	}()
	if n.nln != nil {
		nc := native.Config{AuthTokens: cfg.AuthTokens, AdminTokens: cfg.AdminTokens, Metrics: n.metrics, Logger: log}
		if peer != nil {
			nc.Gate = peer // a native.ActiveAwaiter too (see below)
		}
		n.nsrv = native.New(n.eng, nc)
		nln := n.nln
		if useTLS {
			tc, _ := cfg.tlsConfig() // its own copy: ServeTLS changes srv.TLSConfig
			nln = tls.NewListener(nln, tc)
		}
		nsrv := n.nsrv
		go func() {
			if err := nsrv.Serve(nln); err != nil {
				n.served <- fmt.Errorf("native protocol: %w", err)
			}
		}()
		log.Info("baton serving the native protocol", "native_listen", n.nln.Addr().String(), "tls", useTLS)
	}
	if peer != nil {
		peer.Start()
	}
	ok = true
	return n, nil
}

// replay rebuilds the engine's state (a standby) from data_dir: the
// newest snapshot, then each log record after it that the snapshot does
// not hold, through the engine's one apply path. The events of replayed
// changes are not reported again (metrics, /events): they were when they
// happened. A snapshot or record that cannot be read stops the start
// (exit 2), naming the file, or the record and its index.
func (n *Node) replay() (snapshotStart, error) {
	start := time.Now()
	n.replaying.Store(true)
	defer n.replaying.Store(false)
	dir := filepath.Clean(n.cfg.DataDir)
	var at snapshotStart
	var dumps engine.Dumps
	index, r, err := n.wal.LoadSnapshot()
	var ce *wal.CorruptError
	switch {
	case errors.Is(err, wal.ErrNoSnapshot):
		index = 0
	case errors.As(err, &ce) && n.cfg.RepairLog:
		n.log.Warn("repair: the snapshot is damaged; starting from the log's records only, the state it held for keys they do not change is lost",
			"file", ce.File, "offset", ce.Offset, "reason", ce.Reason)
		index = n.wal.FirstIndex() - 1
	case err != nil:
		return at, walStartError(dir, err)
	default:
		var cr countWriter
		dumps, err = n.eng.LoadDump(io.TeeReader(r, &cr))
		r.Close()
		if err != nil {
			return at, &startError{exitUsage, fmt.Errorf("data_dir %s: the snapshot at log index %d cannot be replayed: %w", dir, index, err)}
		}
		at.index, at.size = index, uint64(cr)
	}
	maxDump := uint64(0)
	for _, d := range dumps {
		maxDump = max(maxDump, d)
	}
	at.reach = maxDump
	records, skipped := 0, 0
	// After index, or from the log's first record when records before it
	// are missing (a log repaired over a gap: --repair-log).
	err = n.wal.Replay(max(index+1, n.wal.FirstIndex()), func(i uint64, rec []byte) error {
		if i <= maxDump {
			r, err := engine.DecodeRecord(rec)
			if err != nil {
				return fmt.Errorf("record %d: %w", i, err)
			}
			if n.eng.Covers(dumps, i, &r) {
				skipped++ // its change is in the snapshot already
				return nil
			}
		}
		records++
		at.pending += uint64(len(rec)) + 8 // as framed in the log
		if err := n.eng.Replay(rec); err != nil {
			return fmt.Errorf("record %d: %w", i, err)
		}
		return nil
	})
	if err != nil {
		return at, &startError{exitUsage, fmt.Errorf("data_dir %s: replaying the log: %w", dir, err)}
	}
	n.log.Info("log replayed", "data_dir", dir, "snapshot_index", index, "records", records, "already_in_snapshot", skipped,
		"held", n.eng.Held(), "last_token", n.eng.LastToken(), "took", time.Since(start).Round(time.Millisecond))
	return at, nil
}

// dirInsteadOfFile ends the message of a start refused because a
// directory stands where a file of data_dir belongs.
const dirInsteadOfFile = "a directory stands where data_dir's file belongs: move it away"

// walStartError is the *startError for wal.Open's err: exit code 2 for a
// data_dir in use, not writable or readable (the error names data_dir) or
// damaged, or an operating system where the log cannot be kept safe
// (Windows).
func walStartError(dir string, err error) error {
	var ce *wal.CorruptError
	switch {
	case errors.As(err, &ce) && ce.Hint == "": // a snapshot
		return &startError{exitUsage, fmt.Errorf("the log in data_dir %s is damaged: %w; to start anyway from the log's records alone (the state the snapshot held for keys they do not change is lost), %s",
			filepath.Clean(dir), err, repairHint)}
	case errors.As(err, &ce):
		return &startError{exitUsage, fmt.Errorf("the log in data_dir %s is damaged: %w", filepath.Clean(dir), err)}
	case errors.Is(err, wal.ErrLocked), errors.Is(err, wal.ErrNotWritable), errors.Is(err, wal.ErrRemoved):
		return &startError{exitUsage, err}
	case errors.Is(err, fs.ErrPermission):
		// A file of the log the node may not read (another user's): a
		// data_dir the node cannot use, as one it cannot write.
		return &startError{exitUsage, fmt.Errorf("cannot open the log in data_dir %s: %w (the node's user must be able to read and write every file in it)", filepath.Clean(dir), err)}
	case errors.Is(err, syscall.EISDIR):
		return &startError{exitUsage, fmt.Errorf("cannot open the log in data_dir %s: %w (%s)", filepath.Clean(dir), err, dirInsteadOfFile)}
	case errors.Is(err, wal.ErrUnsupported):
		return &startError{exitUsage, fmt.Errorf("baton serve cannot run on %s: %w; run the server on Linux or macOS (the client commands acquire, run, release, renew and status work here)", runtime.GOOS, err)}
	}
	return &startError{exitError, fmt.Errorf("cannot open the log in data_dir %s: %w", filepath.Clean(dir), err)}
}

// onEvent is the engine's OnEvent: each change goes to the metrics, the
// event log and, once it exists, the cluster node (which replicates it).
// The engine of a clustered node starts as a standby and makes no change
// of its own before the cluster node promotes it, so no change is missed.
func (n *Node) onEvent(ev engine.Event) {
	if n.replaying.Load() {
		return
	}
	n.metrics.OnEvent(ev)
	n.events.Add(ev)
	if p := n.peer.Load(); p != nil {
		p.OnEvent(ev)
	}
}

// Addr is the address the HTTP server listens on (host:port; the port
// chosen by the system for a listen address with port 0).
func (n *Node) Addr() string { return n.ln.Addr().String() }

// URL is the node's base URL on its listening address: http:// or
// https:// (with tls_cert), host:port.
func (n *Node) URL() string {
	if n.useTLS {
		return "https://" + n.Addr()
	}
	return "http://" + n.Addr()
}

// Engine is the node's engine.
func (n *Node) Engine() *engine.Engine { return n.eng }

// Served receives the error of the HTTP server or of the native protocol
// server ("native protocol: ...") if one stops by itself; after Close it
// may receive http.ErrServerClosed.
func (n *Node) Served() <-chan error { return n.served }

// Close stops the node: a clustered active hands off to its successor
// first (within 5 s); parked acquires left are answered 503 with
// Retry-After; the engine writes its token high-water mark; the /events
// streams end; the HTTP server shuts down (within 5 s, then closes its
// connections); the log is synced and closed, releasing data_dir. It
// returns the first error (the high-water mark's or the log's); later
// calls return the same.
func (n *Node) Close() error {
	n.closeOnce.Do(func() { n.closeErr = n.close() })
	return n.closeErr
}

func (n *Node) close() error {
	var first error
	keep := func(what string, err error) {
		if err != nil {
			n.log.Error(what, "err", err)
			if first == nil {
				first = fmt.Errorf("%s: %w", what, err)
			}
		}
	}
	if n.snaps != nil {
		n.snaps.close() // waits for a snapshot under way
	}
	if p := n.peer.Load(); p != nil {
		// The active hands off first: its waiters and in-flight calls are
		// redirected to the successor, holders keep their tokens there.
		hctx, hstop := context.WithTimeout(context.Background(), 5*time.Second)
		_ = p.Close(hctx)
		hstop()
	}
	// Waiters left (a single node, or no successor): each gets 503 +
	// Retry-After and can retry elsewhere.
	keep("writing the token high-water mark", n.eng.Close())
	if n.nsrv != nil {
		// After the engine: its parked acquires have their E unavailable
		// (or, after a handoff, M) lines queued; Close writes them out.
		_ = n.nsrv.Close()
	}
	n.events.Close() // end the /events streams, or Shutdown would wait for them
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := n.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		n.log.Warn("shutdown", "err", err)
		_ = n.srv.Close()
	}
	n.cancel()
	keep("closing the log", n.wal.Close())
	return first
}

// abort undoes a partial OpenNode, in reverse order.
func (n *Node) abort() {
	if n.ln != nil {
		_ = n.ln.Close()
	}
	if n.nln != nil {
		_ = n.nln.Close()
	}
	if n.snaps != nil {
		n.snaps.close()
	}
	if p := n.peer.Load(); p != nil {
		_ = p.Close(context.Background())
	}
	if n.eng != nil {
		_ = n.eng.Close()
	}
	if n.events != nil {
		n.events.Close()
	}
	if n.wal != nil {
		_ = n.wal.Close()
	}
}

// walCollector exports the log's counters (wal.Stats) to Prometheus.
// markOK reports whether the engine could write its token high-water mark
// (beside the log in data_dir): baton_log_healthy is 0 when either fails,
// since changes are refused with 503 then.
type walCollector struct {
	l      *wal.Log
	markOK func() bool
}

var (
	walHealthyDesc = prometheus.NewDesc("baton_log_healthy",
		"1 while the log of changes can write to its disk; 0 while it cannot (disk full, a write error): changes are refused with 503 and the log retries by itself.", nil, nil)
	walRecordsDesc = prometheus.NewDesc("baton_log_records_total",
		"Records appended to the log of changes since the node started.", nil, nil)
	walWritesDesc = prometheus.NewDesc("baton_log_writes_total",
		"write(2) calls of the log that carried records (one per group-commit batch).", nil, nil)
	walFsyncsDesc = prometheus.NewDesc("baton_log_fsyncs_total",
		"fsyncs of the log's segment data.", nil, nil)
	walBytesDesc = prometheus.NewDesc("baton_log_written_bytes_total",
		"Bytes of records (with their framing) written to the log.", nil, nil)
	walRecordsWrittenDesc = prometheus.NewDesc("baton_log_records_written_total",
		"Records carried by the log's writes; divided by baton_log_writes_total, the mean batch of a write.", nil, nil)
	walRecordsSyncedDesc = prometheus.NewDesc("baton_log_records_synced_total",
		"Records made durable by the log's fsyncs; divided by baton_log_fsyncs_total, the mean batch of an fsync.", nil, nil)
	walFsyncSecondsDesc = prometheus.NewDesc("baton_log_fsync_seconds_total",
		"Wall time spent in the log's fsyncs; divided by baton_log_fsyncs_total, the mean fsync (the disk's, under fsync always the bound of a change's answer).", nil, nil)
	walGatherSecondsDesc = prometheus.NewDesc("baton_log_gather_seconds_total",
		"Under fsync always: wall time the log's writers waited for the records of a batch before its write and fsync (group commit).", nil, nil)
	walGatherTimeoutsDesc = prometheus.NewDesc("baton_log_gather_timeouts_total",
		"Under fsync always: gatherings that ran out of time before the changes they waited for came (the batch left without them); divided by baton_log_fsyncs_total, the share of batches that did.", nil, nil)
	walFailuresDesc = prometheus.NewDesc("baton_log_failures_total",
		"Times the log went from writing to failing (disk full, I/O error).", nil, nil)
)

func (c walCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{walHealthyDesc, walRecordsDesc, walWritesDesc, walFsyncsDesc,
		walBytesDesc, walRecordsWrittenDesc, walRecordsSyncedDesc, walFsyncSecondsDesc, walGatherSecondsDesc, walGatherTimeoutsDesc, walFailuresDesc} {
		ch <- d
	}
}

func (c walCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.l.Stats()
	healthy := 0.0
	if s.Healthy && c.markOK() {
		healthy = 1
	}
	ch <- prometheus.MustNewConstMetric(walHealthyDesc, prometheus.GaugeValue, healthy)
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{
		{walRecordsDesc, s.Records}, {walWritesDesc, s.Writes}, {walFsyncsDesc, s.Fsyncs},
		{walBytesDesc, s.Bytes}, {walRecordsWrittenDesc, s.RecordsWritten},
		{walRecordsSyncedDesc, s.RecordsSynced}, {walGatherTimeoutsDesc, s.GatherTimeouts},
		{walFailuresDesc, s.Failures},
	} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
	ch <- prometheus.MustNewConstMetric(walFsyncSecondsDesc, prometheus.CounterValue, s.FsyncTime.Seconds())
	ch <- prometheus.MustNewConstMetric(walGatherSecondsDesc, prometheus.CounterValue, s.GatherTime.Seconds())
}

// replCollector exports a cluster node's replication figures
// (cluster.Node.ReplicationStats) to Prometheus.
type replCollector struct{ p *cluster.Node }

var (
	replLastIndexDesc = prometheus.NewDesc("baton_replication_last_index",
		"Index of the last record in this node's log of changes (a standby's holds the active's records at the active's indexes).", nil, nil)
	replAckedDesc = prometheus.NewDesc("baton_replication_acked_index",
		"On the active: the last log index each standby acknowledged having written to its own log.", []string{"standby"}, nil)
	replLagRecordsDesc = prometheus.NewDesc("baton_replication_lag_records",
		"On the active: records of its log each standby has not acknowledged yet.", []string{"standby"}, nil)
	replLagSecondsDesc = prometheus.NewDesc("baton_replication_lag_seconds",
		"On the active: age of the oldest record each standby has not acknowledged yet; 0 while it has everything.", []string{"standby"}, nil)
	syncStandbysDesc = prometheus.NewDesc("baton_sync_standbys",
		"The sync_standbys setting: standbys that must have written a change before it is answered.", nil, nil)
	syncDegradedDesc = prometheus.NewDesc("baton_sync_degraded",
		"1 while the active answers without its sync_standbys (fewer acknowledged within sync_timeout, or fewer peers live at its promotion), 0 otherwise.", nil, nil)
	syncDegradationsDesc = prometheus.NewDesc("baton_sync_degradations_total",
		"Times the active went on without its sync_standbys.", nil, nil)
	syncRecoveriesDesc = prometheus.NewDesc("baton_sync_recoveries_total",
		"Times enough standbys acknowledged the active's last index again after a degradation.", nil, nil)
	replInstallsDesc = prometheus.NewDesc("baton_replication_snapshots_installed_total",
		"Times this node, as a standby, replaced its log by the active's snapshot (a new or divergent log, or one too far behind).", nil, nil)
	replResumesDesc = prometheus.NewDesc("baton_replication_resumes_total",
		"Times this node, as a standby, resumed the active's stream from its own log's position, without a snapshot.", nil, nil)
	replSentRecordsDesc = prometheus.NewDesc("baton_replication_sent_records_total",
		"On the active: records written to its standbys' streams.", nil, nil)
	replSentWritesDesc = prometheus.NewDesc("baton_replication_stream_writes_total",
		"On the active: writes to its standbys' streams that carried records; sent records divided by it is the mean batch of a write.", nil, nil)
	replAcksReadDesc = prometheus.NewDesc("baton_replication_acks_received_total",
		"On the active: acknowledgements read from its standbys (each covers every record up to its index).", nil, nil)
	replAppliedDesc = prometheus.NewDesc("baton_replication_applied_records_total",
		"On a standby: records applied from the active's stream.", nil, nil)
	replAcksSentDesc = prometheus.NewDesc("baton_replication_acks_sent_total",
		"On a standby: acknowledgements sent to the active; applied records divided by it is the mean batch of an acknowledgement.", nil, nil)
	replAckLagDesc = prometheus.NewDesc("baton_replication_ack_lag_seconds",
		"Measured by the active at each acknowledgement it read from a standby that covered records not acknowledged before: how long the oldest of them had waited since the active appended it to its log, in seconds, by standby (every other peer; counted while this node was the active). With sync_standbys 0 a standby acknowledges at most every 10 ms, which the figure includes.", []string{"standby"}, nil)
)

// lagBounds are the bucket bounds of baton_replication_ack_lag_seconds.
var lagBounds = cluster.LagBounds()

func (c replCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{replLastIndexDesc, replAckedDesc, replLagRecordsDesc, replLagSecondsDesc, syncStandbysDesc,
		syncDegradedDesc, syncDegradationsDesc, syncRecoveriesDesc, replInstallsDesc, replResumesDesc,
		replSentRecordsDesc, replSentWritesDesc, replAcksReadDesc, replAppliedDesc, replAcksSentDesc, replAckLagDesc} {
		ch <- d
	}
}

func (c replCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.p.ReplicationStats()
	degraded := 0.0
	if s.Degraded {
		degraded = 1
	}
	ch <- prometheus.MustNewConstMetric(replLastIndexDesc, prometheus.GaugeValue, float64(s.LastIndex))
	ch <- prometheus.MustNewConstMetric(syncStandbysDesc, prometheus.GaugeValue, float64(s.SyncStandbys))
	ch <- prometheus.MustNewConstMetric(syncDegradedDesc, prometheus.GaugeValue, degraded)
	ch <- prometheus.MustNewConstMetric(syncDegradationsDesc, prometheus.CounterValue, float64(s.Degradations))
	ch <- prometheus.MustNewConstMetric(syncRecoveriesDesc, prometheus.CounterValue, float64(s.Recoveries))
	ch <- prometheus.MustNewConstMetric(replInstallsDesc, prometheus.CounterValue, float64(s.Installs))
	ch <- prometheus.MustNewConstMetric(replResumesDesc, prometheus.CounterValue, float64(s.Resumes))
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{
		{replSentRecordsDesc, s.SentRecords}, {replSentWritesDesc, s.SentWrites}, {replAcksReadDesc, s.AcksRead},
		{replAppliedDesc, s.AppliedRecords}, {replAcksSentDesc, s.AcksSent},
	} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
	for _, l := range s.Lags {
		buckets := make(map[float64]uint64, len(lagBounds))
		for i, b := range lagBounds {
			buckets[b] = l.Buckets[i]
		}
		ch <- prometheus.MustNewConstHistogram(replAckLagDesc, l.Count, l.Sum.Seconds(), buckets, l.URL)
	}
	seen := map[string]bool{}
	for _, sb := range s.Standbys {
		if seen[sb.URL] { // a standby's older stream, not yet closed
			continue
		}
		seen[sb.URL] = true
		ch <- prometheus.MustNewConstMetric(replAckedDesc, prometheus.GaugeValue, float64(sb.Acked), sb.URL)
		ch <- prometheus.MustNewConstMetric(replLagRecordsDesc, prometheus.GaugeValue, float64(sb.LagRecords), sb.URL)
		ch <- prometheus.MustNewConstMetric(replLagSecondsDesc, prometheus.GaugeValue, sb.LagSeconds, sb.URL)
	}
}

// The cluster node is the native server's Gate, and waits for an active
// as the native server asks of a Gate that can (an acquire during a
// handoff waits for the new active instead of an E unavailable).
var _ native.ActiveAwaiter = (*cluster.Node)(nil)
