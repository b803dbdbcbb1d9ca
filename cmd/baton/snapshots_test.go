package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/wal"
)

// dirSize is the total size of the files in dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && !e.IsDir() {
			n += fi.Size()
		}
	}
	return n
}

// TestSnapshotsBoundTheLog: under a long history of changes to a small
// live state, background snapshots keep the directory bounded by the state
// (not the history), and the newest snapshot plus the records after it
// give back the live state.
func TestSnapshotsBoundTheLog(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	cfg := wal.DefaultConfig(dir)
	cfg.SegmentSize = 8 << 10
	cfg.Logger = quietLog()
	l, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The "state": the last value of each of 50 keys, a record per change.
	var mu sync.Mutex
	state := map[int]int{}
	dump := func(w io.Writer) error {
		mu.Lock()
		defer mu.Unlock()
		for k := range 50 {
			if _, err := fmt.Fprintf(w, "%d=%d\n", k, state[k]); err != nil {
				return err
			}
		}
		return nil
	}
	s := startSnapshotter(l, dump, quietLog(), 4<<10, 5*time.Millisecond, snapshotStart{})
	var maxSize int64
	const changes = 20000
	for i := range changes {
		mu.Lock()
		state[i%50] = i
		idx, err := l.Append(fmt.Appendf(nil, "%d=%d", i%50, i))
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Wait(idx); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			maxSize = max(maxSize, dirSize(t, dir))
			time.Sleep(10 * time.Millisecond) // let the snapshotter look
		}
	}
	// The last changes may have come faster than the snapshotter looks
	// (a loaded machine): give it time to cover them, then count.
	segments := func() []string { m, _ := filepath.Glob(filepath.Join(dir, "*.wal")); return m }
	for end := time.Now().Add(10 * time.Second); len(segments()) > 3 && time.Now().Before(end); {
		time.Sleep(10 * time.Millisecond)
	}
	s.close()
	history := l.Stats().Bytes
	// Bound: a snapshot (~500 B), the log since it (at most about minBytes
	// and the records of one check), segments not yet wholly replaced (two
	// of 8 KiB), the lock file.
	if maxSize > 64<<10 || uint64(maxSize) > history/4 {
		t.Fatalf("the directory reached %d bytes for %d bytes of history", maxSize, history)
	}
	index, r, err := l.LoadSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]int{}
	for _, line := range bytes.Split(bytes.TrimSpace(snap), []byte("\n")) {
		var k, v int
		if _, err := fmt.Sscanf(string(line), "%d=%d", &k, &v); err != nil {
			t.Fatal(err)
		}
		got[k] = v
	}
	if err := l.Replay(index+1, func(_ uint64, rec []byte) error {
		var k, v int
		_, err := fmt.Sscanf(string(rec), "%d=%d", &k, &v)
		got[k] = v
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(state) {
		t.Fatalf("snapshot %d + log: %v\nlive: %v", index, got, state)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := segments(); len(segs) > 3 {
		t.Fatalf("%d segments left: %v", len(segs), segs)
	}
}

// lockTable is every key's holder (token and lease deadline) as GET /locks
// lists them.
func lockTable(t *testing.T, url string) map[string]api.Holder {
	t.Helper()
	res, body := get(t, http.MethodGet, url+"/locks?limit=10000")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET /locks: %d %s", res.StatusCode, body)
	}
	var l api.LockList
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		t.Fatal(err)
	}
	out := map[string]api.Holder{}
	for _, s := range l.Locks {
		if s.Holder != nil {
			out[s.Key] = *s.Holder
		}
	}
	return out
}

// TestSnapshotThenLogEqualsLive: a node under a load of grants, renews,
// releases and queued acquires that time out takes a snapshot while the
// changes go on (each shard dumped at its own log index), and the load
// stops right after it; reopened on its data_dir, the snapshot and the log
// records it does not hold give back every holder with its token and
// lease. Background snapshots under the load come first.
func TestSnapshotThenLogEqualsLive(t *testing.T) {
	leakCheck(t)
	defer func(b uint64, d time.Duration) { snapshotMinBytes, snapshotCheck = b, d }(snapshotMinBytes, snapshotCheck)
	snapshotMinBytes, snapshotCheck = 2<<10, 2*time.Millisecond
	dir := t.TempDir()
	cfg, err := loadConfig([]string{"--listen", "127.0.0.1:0", "--data-dir", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := OpenNode(cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var stop atomic.Bool
	eng := n.Engine() // straight to the engine: a load fast enough to fill the dump's window
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 5))
			held := map[string]uint64{}
			for !stop.Load() {
				key := fmt.Sprintf("s%d", rng.IntN(5000))
				lease := time.Duration(100+rng.IntN(500)) * time.Second
				switch tok, mine := held[key]; {
				case mine && rng.IntN(3) == 0:
					if eng.Release(key, tok) == nil {
						delete(held, key)
					}
				case mine:
					_, _ = eng.Renew(key, tok, lease)
				default:
					// Free: a grant; held by another: a queued wait that
					// times out (enqueue, timeout records).
					if g, err := eng.Acquire(context.Background(), engine.AcquireRequest{Key: key, Lease: lease, Wait: time.Millisecond}); err == nil {
						held[key] = g.Token
					}
				}
			}
		}()
	}
	time.Sleep(time.Second) // background snapshots under the load
	n.snaps.close()         // none from now on but this one:
	if err := n.snaps.save(); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	wg.Wait()
	snaps, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots in %s: %v, want the newest one", dir, snaps)
	}
	live := lockTable(t, n.URL())
	if len(live) < 100 {
		t.Fatalf("only %d keys held at the end of the load", len(live))
	}
	n.snaps = nil // closed above
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	var logBuf syncBuf
	n2, err := OpenNode(cfg, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	if s := logBuf.String(); !strings.Contains(s, "log replayed") || strings.Contains(s, "snapshot_index=0 ") {
		t.Fatalf("the restart did not start from the snapshot:\n%s", s)
	}
	back := lockTable(t, n2.URL())
	for key, h := range live {
		b, ok := back[key]
		if !ok || b.Token != h.Token || b.ExpiresAt.Sub(h.ExpiresAt).Abs() > leaseSlack {
			t.Errorf("%s: live %+v, after the snapshot and the log %+v (present %v)", key, h, b, ok)
		}
	}
	for key, b := range back {
		if _, ok := live[key]; !ok {
			t.Errorf("%s: held after the restart (%+v), free before it", key, b)
		}
	}
}

// TestDamagedSnapshotRefused: a snapshot with a flipped byte stops the
// start (exit 2) naming the file, the offset and the flag that starts
// anyway; with repair_log the node starts from the log's records after it.
func TestDamagedSnapshotRefused(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	cfg, err := loadConfig([]string{"--listen", "127.0.0.1:0", "--data-dir", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := OpenNode(cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	acquire := func(key string) {
		if _, err := n.Engine().Acquire(context.Background(), engine.AcquireRequest{Key: key, Lease: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	acquire("before")
	if err := n.snaps.save(); err != nil {
		t.Fatal(err)
	}
	acquire("after")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots: %v", snaps)
	}
	b, err := os.ReadFile(snaps[0])
	if err != nil {
		t.Fatal(err)
	}
	b[40] ^= 0x01 // in the payload, after the 32-byte header
	if err := os.WriteFile(snaps[0], b, 0o640); err != nil {
		t.Fatal(err)
	}

	_, err = OpenNode(cfg, quietLog())
	var ce *wal.CorruptError
	if !errors.As(err, &ce) || exitCode(err) != exitUsage || ce.File != snaps[0] ||
		!strings.Contains(err.Error(), snaps[0]) || !strings.Contains(err.Error(), "offset") || !strings.Contains(err.Error(), "--repair-log") {
		t.Fatalf("a damaged snapshot: %v (exit %d); want exit 2 naming %s, the offset and --repair-log", err, exitCode(err), snaps[0])
	}
	cfg.RepairLog = true
	var logBuf syncBuf
	n2, err := OpenNode(cfg, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	if !strings.Contains(logBuf.String(), "the snapshot is damaged") {
		t.Fatalf("no warning for the repair:\n%s", logBuf.String())
	}
	if st, err := n2.Engine().Status("after"); err != nil || st.Holder == nil {
		t.Fatalf("after: %+v %v; the change after the snapshot is in the log and must be kept", st, err)
	}
}

// levelCounter is a slog.Handler that counts the records of each level.
type levelCounter struct {
	mu sync.Mutex
	n  map[slog.Level]int
}

func (c *levelCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *levelCounter) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[r.Level]++
	return nil
}
func (c *levelCounter) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *levelCounter) WithGroup(string) slog.Handler      { return c }

func (c *levelCounter) count(l slog.Level) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[l]
}

// TestSnapshotFailuresLoggedOnce: while snapshots keep failing (every
// check of the snapshotter tries again), the failure is logged once, when
// it begins, and the recovery once, when a snapshot is saved again; they
// were logged at every check.
func TestSnapshotFailuresLoggedOnce(t *testing.T) {
	leakCheck(t)
	cfg := wal.DefaultConfig(t.TempDir())
	cfg.Logger = quietLog()
	l, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var attempts atomic.Int32
	var failing atomic.Bool
	failing.Store(true)
	dump := func(w io.Writer) error {
		attempts.Add(1)
		if failing.Load() {
			return errors.New("disk full")
		}
		_, err := io.WriteString(w, "state")
		return err
	}
	logs := &levelCounter{n: map[slog.Level]int{}}
	s := startSnapshotter(l, dump, slog.New(logs), 1, time.Millisecond, snapshotStart{})
	stopped := false
	defer func() {
		if !stopped {
			s.close()
		}
	}()
	wait := func(what string, done func() bool) {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); !done(); time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	if _, err := l.Append([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	wait("5 failed snapshots", func() bool { return attempts.Load() >= 5 })
	if n := logs.count(slog.LevelError); n != 1 {
		t.Fatalf("%d error lines after %d failed snapshots; want 1", n, attempts.Load())
	}
	failing.Store(false)
	wait("a snapshot saved", func() bool { idx, _, err := l.LoadSnapshot(); return err == nil && idx == 1 })
	wait("the recovery and save logged", func() bool { return logs.count(slog.LevelInfo) >= 2 })
	s.close()
	stopped = true
	if e, i := logs.count(slog.LevelError), logs.count(slog.LevelInfo); e != 1 || i != 2 {
		t.Fatalf("%d error and %d info lines; want 1 (the first failure) and 2 (the recovery, the snapshot saved)", e, i)
	}
}

// TestMissingSnapshotRepaired: a data_dir whose snapshot was removed
// after it had replaced the log's first segments stops the start (exit
// 2) with a message that says --repair-log starts anyway from the log's
// records after the gap; with it the node starts, keeps what those records
// hold, and saves a snapshot, so that the next start needs no flag.
// Before, --repair-log stopped the start the same way, while the message
// told the operator to use it (a tester, 6 of 6).
func TestMissingSnapshotRepaired(t *testing.T) {
	leakCheck(t)
	defer func(s int64) { segmentSize = s }(segmentSize)
	segmentSize = 4 << 10
	dir := t.TempDir()
	cfg, err := loadConfig([]string{"--listen", "127.0.0.1:0", "--data-dir", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := OpenNode(cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	acquire := func(n *Node, key string) {
		t.Helper()
		if _, err := n.Engine().Acquire(context.Background(), engine.AcquireRequest{Key: key, Lease: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 200 { // several segments
		acquire(n, fmt.Sprintf("before%d", i))
	}
	if err := n.snaps.save(); err != nil { // removes the segments it covers
		t.Fatal(err)
	}
	acquire(n, "after")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	snaps, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots: %v", snaps)
	}
	if err := os.Remove(snaps[0]); err != nil {
		t.Fatal(err)
	}
	_, err = OpenNode(cfg, quietLog())
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "missing") || !strings.Contains(err.Error(), "--repair-log") {
		t.Fatalf("the snapshot removed: %v (exit %d); want exit 2 saying records are missing, and --repair-log", err, exitCode(err))
	}
	cfg.RepairLog = true
	var logBuf syncBuf
	n2, err := OpenNode(cfg, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatalf("--repair-log: %v", err)
	}
	if !strings.Contains(logBuf.String(), "repair") {
		t.Fatalf("no warning for the repair:\n%s", logBuf.String())
	}
	if st, err := n2.Engine().Status("after"); err != nil || st.Holder == nil {
		t.Fatalf("after: %+v %v; its record is after the gap, and must be kept", st, err)
	}
	if err := n2.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.RepairLog = false
	n3, err := OpenNode(cfg, quietLog())
	if err != nil {
		t.Fatalf("the start after the repair: %v; want it to need no flag", err)
	}
	defer n3.Close()
	if st, err := n3.Engine().Status("after"); err != nil || st.Holder == nil {
		t.Fatalf("after, at the start after the repair: %+v %v", st, err)
	}
}
