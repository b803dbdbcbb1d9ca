package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// faults makes the files it wraps fail on demand: a failing WriteAt
// writes half of its bytes first, as a disk that fills up mid-write does.
type faults struct {
	mu        sync.Mutex
	writeErr  error
	syncErr   error
	syncGate  chan struct{} // if set, Sync waits for it to close
	syncCalls int
}

func (fs *faults) set(write, sync error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.writeErr, fs.syncErr = write, sync
}

func (fs *faults) wrap(_ string, f File) File { return &faultFile{f, fs} }

type faultFile struct {
	File
	fs *faults
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	err := f.fs.writeErr
	f.fs.mu.Unlock()
	if err != nil {
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, &os.PathError{Op: "write", Path: "injected", Err: err}
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Sync() error {
	f.fs.mu.Lock()
	err, gate := f.fs.syncErr, f.fs.syncGate
	f.fs.syncCalls++
	f.fs.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if err != nil {
		return &os.PathError{Op: "fdatasync", Path: "injected", Err: err}
	}
	return f.File.Sync()
}

// healthEvents records OnHealth calls.
func healthEvents(cfg *Config) chan error {
	ch := make(chan error, 16)
	cfg.OnHealth = func(err error) { ch <- err }
	return ch
}

func expectHealth(t *testing.T, ch chan error, failed bool) {
	t.Helper()
	select {
	case err := <-ch:
		if (err != nil) != failed {
			t.Fatalf("OnHealth(%v), want failed=%v", err, failed)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no OnHealth call (want failed=%v) within 20s", failed)
	}
}

func TestWriteFailureKeepsEveryRecordAndRecovers(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			fs := &faults{}
			cfg := testConfig(t, dir)
			cfg.Sync, cfg.WrapFile = mode, fs.wrap
			health := healthEvents(&cfg)
			l := mustOpen(t, cfg)
			defer l.Close()
			for i := 1; i <= 10; i++ {
				appendWait(t, l, rec(i))
			}

			fs.set(syscall.ENOSPC, nil)
			i11, err := l.Append(rec(11))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Wait(i11); !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Wait on a full disk = %v, want ErrUnavailable wrapping ENOSPC", err)
			}
			expectHealth(t, health, true)
			if l.Healthy() {
				t.Fatal("Healthy() after a failed write")
			}
			if _, err := l.Append(rec(12)); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Append while failed = %v, want ErrUnavailable", err)
			}
			if err := l.Wait(i11); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("second Wait while failed = %v, want ErrUnavailable", err)
			}

			fs.set(nil, nil) // space again
			expectHealth(t, health, false)
			if err := l.Wait(i11); err != nil {
				t.Fatalf("Wait after recovery = %v", err)
			}
			if !l.Healthy() {
				t.Fatal("not Healthy() after recovery")
			}
			appendWait(t, l, rec(12))
			st := l.Stats()
			if st.Failures != 1 || st.Recoveries != 1 || !st.Healthy || st.Records != 12 {
				t.Fatalf("stats %+v, want 1 failure, 1 recovery, 12 records", st)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			cfg.WrapFile, cfg.OnHealth = nil, nil
			reopenHas(t, cfg, 12)
		})
	}
}

// Records written but not yet fsynced (interval and never modes) stay
// in the file while the log is failed: a process that stops then (Close
// here; kill -9 alike, the retries being the same) has them on restart.
// (The retries used to cut the file back to the last fsync before their
// write, which failed again: the written records were gone.)
func TestFailedLogKeepsWhatItWrote(t *testing.T) {
	for _, mode := range []SyncMode{SyncInterval, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			fs := &faults{}
			cfg := testConfig(t, t.TempDir())
			cfg.Sync, cfg.WrapFile = mode, fs.wrap
			cfg.SyncInterval = time.Hour // no fsync after the records below
			l := mustOpen(t, cfg)
			defer l.Close()
			for i := 1; i <= 5; i++ {
				appendWait(t, l, rec(i))
			}
			fs.set(syscall.EIO, nil)
			i6, err := l.Append(rec(6))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Wait(i6); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Wait with writes failing = %v, want ErrUnavailable", err)
			}
			if err := l.Close(); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Close with a record not written = %v, want ErrUnavailable", err)
			}
			cfg.WrapFile = nil
			reopenHas(t, cfg, 5)
		})
	}
}

// A failed fsync may have dropped written pages: the records written
// since the last good fsync are written again before the log is healthy.
func TestFsyncFailureRewritesWhatWasNotSynced(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			fs := &faults{}
			cfg := testConfig(t, dir)
			cfg.Sync, cfg.WrapFile = mode, fs.wrap
			// The interval's fsync is the one Sync makes below, not the
			// background's at a moment of its choosing.
			cfg.SyncInterval = time.Hour
			health := healthEvents(&cfg)
			l := mustOpen(t, cfg)
			defer l.Close()
			for i := 1; i <= 5; i++ {
				appendWait(t, l, rec(i))
			}
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			fs.set(nil, syscall.EIO)
			if mode == SyncAlways {
				idx, err := l.Append(rec(6))
				if err != nil {
					t.Fatal(err)
				}
				if err := l.Wait(idx); !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.EIO) {
					t.Fatalf("Wait with fsync failing (always) = %v, want ErrUnavailable wrapping EIO", err)
				}
			} else {
				for i := 6; i <= 8; i++ {
					appendWait(t, l, rec(i)) // written: enough in interval mode
				}
				if err := l.Sync(); !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.EIO) {
					t.Fatalf("Sync with fsync failing (interval) = %v, want ErrUnavailable wrapping EIO", err)
				}
			}
			expectHealth(t, health, true)
			// Simulate the lost pages: zero what lies past the last fsync.
			// The kernel drops pages at a failed writeback, never between
			// a recovery's rewrite and its fsync: the look and the zeroing
			// hold syncMu, which each recovery holds from its write to its
			// fsync and its cut (unheld, a rewrite could land before the
			// zeroing and its fsync succeed after fs.set below, keeping
			// the zeros: CI saw "replayed 5 records, want 8" once).
			l.syncMu.Lock()
			l.mu.Lock()
			base, path := l.syncOff, l.segs[len(l.segs)-1].path
			l.mu.Unlock()
			st, err := os.Stat(path)
			switch {
			case err != nil:
			case mode == SyncAlways && st.Size() != base:
				// The failed batch was never answered: it is cut back
				// out of the file (TestFailedWriteLeavesOnlyAnsweredRecords).
				err = fmt.Errorf("%d bytes after an fsync failed, want the %d fsynced", st.Size(), base)
			case mode != SyncAlways && st.Size() <= base:
				err = fmt.Errorf("nothing written past the last fsync (%d bytes, fsynced to %d)", st.Size(), base)
			default:
				var f *os.File
				if f, err = os.OpenFile(path, os.O_RDWR, 0); err == nil {
					_, err = f.WriteAt(make([]byte, st.Size()-base), base)
					f.Close()
				}
			}
			l.syncMu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			fs.set(nil, nil)
			expectHealth(t, health, false)
			last := l.LastIndex()
			if err := l.Wait(last); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			cfg.WrapFile, cfg.OnHealth = nil, nil
			reopenHas(t, cfg, int(last))
		})
	}
}

// TestGroupCommitSharesFsyncs holds the first fsync until 15 more records
// are appended: they all go in one write and one fsync.
func TestGroupCommitSharesFsyncs(t *testing.T) {
	fs := &faults{syncGate: make(chan struct{})}
	cfg := testConfig(t, t.TempDir())
	cfg.Sync, cfg.WrapFile = SyncAlways, fs.wrap
	cfg.SyncInterval = time.Hour // no background flush in the way
	fs.syncGate = nil
	l := mustOpen(t, cfg) // creating the segment fsyncs it: no gate yet
	defer l.Close()
	gate := make(chan struct{})
	fs.mu.Lock()
	fs.syncGate = gate
	fs.mu.Unlock()
	first, err := l.Append(rec(1))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	wg.Add(1)
	go func() { defer wg.Done(); errs <- l.Wait(first) }()
	for { // the first writer is in its fsync
		fs.mu.Lock()
		calls := fs.syncCalls
		fs.mu.Unlock()
		if calls > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for i := 2; i <= 16; i++ {
		idx, err := l.Append(rec(i))
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); errs <- l.Wait(idx) }()
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	st := l.Stats()
	if st.Records != 16 || st.Fsyncs != 2 || st.Writes != 2 || st.RecordsSynced != 16 || st.RecordsPerFsync() != 8 {
		t.Fatalf("stats %+v: want 16 records in 2 writes and 2 fsyncs", st)
	}
}

// gcLog is a SyncAlways log for the group-commit tests: its fsyncs can be
// held (holdFsyncs), and gatherFor is the test's for its life.
type gcLog struct {
	t  *testing.T
	l  *Log
	fs *faults
}

// newGCLog opens a SyncAlways log whose gatherings last gather.
func newGCLog(t *testing.T, gather time.Duration) *gcLog {
	t.Helper()
	saved := gatherFor
	gatherFor = func(time.Duration) time.Duration { return gather }
	t.Cleanup(func() { gatherFor = saved })
	fs := &faults{}
	cfg := testConfig(t, t.TempDir())
	cfg.Sync, cfg.WrapFile = SyncAlways, fs.wrap
	cfg.SyncInterval = time.Hour
	l := mustOpen(t, cfg)
	t.Cleanup(func() { l.Close() })
	return &gcLog{t: t, l: l, fs: fs}
}

// waitFrom appends the records from, from+1, … (n of them), then Waits
// for each on a goroutine of its own; the channel gets their n results.
func (g *gcLog) waitFrom(from, n int) chan error {
	g.t.Helper()
	var idx []uint64
	for i := from; i < from+n; i++ {
		x, err := g.l.Append(rec(i))
		if err != nil {
			g.t.Fatal(err)
		}
		idx = append(idx, x)
	}
	errs := make(chan error, n)
	for _, x := range idx {
		go func() { errs <- g.l.Wait(x) }()
	}
	return errs
}

// check fails the test unless each of errs's results is nil.
func (g *gcLog) check(errs chan error) {
	g.t.Helper()
	for range cap(errs) {
		if err := <-errs; err != nil {
			g.t.Fatal(err)
		}
	}
}

// until polls cond until it holds, and fails the test after 20 s (a hang).
func (g *gcLog) until(what string, cond func() bool) {
	g.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); time.Sleep(100 * time.Microsecond) {
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: not after 20 s; stats %+v", what, g.l.Stats())
		}
	}
}

// waiters is the count of goroutines in Wait.
func (g *gcLog) waiters() int {
	g.l.mu.Lock()
	defer g.l.mu.Unlock()
	return g.l.waiters
}

// firstBatch syncs the records 1 to n in one fsync that ends with their n
// Waits in (the fsync is held until they are), as a batch of n clients
// leaves it.
func (g *gcLog) firstBatch(n int) {
	g.t.Helper()
	gate := make(chan struct{})
	g.fs.mu.Lock()
	g.fs.syncGate = gate
	g.fs.mu.Unlock()
	errs := g.waitFrom(1, n)
	g.until(fmt.Sprintf("%d Waits", n), func() bool { return g.waiters() == n })
	g.fs.mu.Lock()
	g.fs.syncGate = nil
	g.fs.mu.Unlock()
	close(gate)
	g.check(errs)
	if st := g.l.Stats(); st.Fsyncs != 1 || st.RecordsSynced != uint64(n) || st.GatherTimeouts != 0 {
		g.t.Fatalf("stats %+v: want %d records in 1 fsync, no gathering", st, n)
	}
}

// TestGroupCommitGathersTheNextBatch: after an fsync that ended with 8
// goroutines in Wait, a leader that finds itself alone waits for the other
// clients of that batch before its fsync, instead of fsyncing its record
// alone.
func TestGroupCommitGathersTheNextBatch(t *testing.T) {
	g := newGCLog(t, time.Hour) // only the Waits end the gathering
	g.firstBatch(8)
	// One client comes back first: its Wait leads and gathers.
	done := g.waitFrom(9, 1)
	g.until("the leader gathers", func() bool {
		select {
		case err := <-done:
			t.Fatalf("Wait returned (%v) without waiting for the batch; stats %+v", err, g.l.Stats())
		default:
		}
		g.l.mu.Lock()
		defer g.l.mu.Unlock()
		return g.l.gatherCh != nil
	})
	if st := g.l.Stats(); st.Fsyncs != 1 {
		t.Fatalf("stats %+v: the leader fsynced before its batch was there", st)
	}
	g.check(g.waitFrom(10, 7))
	g.check(done)
	if st := g.l.Stats(); st.Fsyncs != 2 || st.RecordsSynced != 16 || st.RecordsPerFsync() != 8 {
		t.Fatalf("stats %+v: want the second 8 records in 1 fsync", st)
	}
	if st := g.l.Stats(); st.GatherTime <= 0 || st.FsyncTime <= 0 {
		t.Fatalf("stats %+v: want the gathering's and the fsyncs' time counted", st)
	}
	if st := g.l.Stats(); st.GatherTimeouts != 0 {
		t.Fatalf("stats %+v: the gathering ended with its batch, not by running out of time", st)
	}
}

// TestGroupCommitGatheringCountsOnlyUncoveredWaits: the goroutines a
// finished batch covered may still be counted as in Wait when the next
// leader gathers (woken, they have not yet run to leave it: on a busy
// machine, or behind the waiters readied after them). The gathering must
// not take them for the clients it waits for, or it ends with part of
// its batch and the rest waits a whole fsync more.
func TestGroupCommitGatheringCountsOnlyUncoveredWaits(t *testing.T) {
	g := newGCLog(t, time.Hour) // only the Waits end the gathering
	g.firstBatch(8)
	// Six of those goroutines woken but not yet run: still in Wait's count.
	const stale = 6
	l := g.l
	l.mu.Lock()
	l.waiters += stale
	l.mu.Unlock()
	defer func() { l.mu.Lock(); l.waiters -= stale; l.mu.Unlock() }()
	// Two clients come back: the first leads and gathers; the second
	// brings the goroutines in Wait to 8, but only 2 of the 8 expected
	// Waits are there.
	back := g.waitFrom(9, 2)
	g.until("2 Waits and a gathering", func() bool {
		select {
		case err := <-back:
			t.Fatalf("a Wait returned (%v) with 2 of the 8 expected Waits; stats %+v", err, l.Stats())
		default:
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.waiters == stale+2 && l.gatherCh != nil
	})
	if st := l.Stats(); st.Fsyncs != 1 {
		t.Fatalf("stats %+v: the gathering ended with 2 of the 8 expected Waits", st)
	}
	rest := g.waitFrom(11, 6)
	g.check(back)
	g.check(rest)
	if st := l.Stats(); st.Fsyncs != 2 || st.RecordsSynced != 16 {
		t.Fatalf("stats %+v: want the second 8 records in 1 fsync", st)
	}
}

// TestGroupCommitGatheringRunsOut: a leader whose expected batch never
// comes fsyncs what it has once gatherFor has passed, and the gathering
// is counted as one that ran out.
func TestGroupCommitGatheringRunsOut(t *testing.T) {
	g := newGCLog(t, time.Nanosecond)
	g.firstBatch(4)
	// One client comes back; the other three never do.
	appendWait(t, g.l, rec(5))
	if st := g.l.Stats(); st.Fsyncs != 2 || st.RecordsSynced != 5 || st.GatherTimeouts != 1 {
		t.Fatalf("stats %+v: want the lone record fsynced after a gathering that ran out", st)
	}
}

// Under free-running concurrency (no gate) fsyncs are still shared.
func TestGroupCommitUnderLoad(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.Sync = SyncAlways
	l := mustOpen(t, cfg)
	defer l.Close()
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				appendWait(t, l, rec(i))
			}
		}()
	}
	wg.Wait()
	st := l.Stats()
	if st.Records != 800 || st.RecordsSynced != 800 || st.Fsyncs >= st.Records {
		t.Fatalf("stats %+v: want 800 records synced by fewer fsyncs", st)
	}
	t.Logf("800 records, %d fsyncs, %.1f records per fsync", st.Fsyncs, st.RecordsPerFsync())
}

func TestUnwaitedRecordsAreWrittenInTheBackground(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Sync = mode
			l := mustOpen(t, cfg)
			defer l.Close()
			for i := 1; i <= 3; i++ {
				if _, err := l.Append(rec(i)); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(20 * time.Second)
			for l.Stats().RecordsWritten < 3 {
				if time.Now().After(deadline) {
					t.Fatalf("records appended without Wait not written after 20s: %+v", l.Stats())
				}
				time.Sleep(time.Millisecond)
			}
			if mode == SyncInterval {
				for l.Stats().RecordsSynced < 3 {
					if time.Now().After(deadline) {
						t.Fatalf("interval mode: records not fsynced after 10s: %+v", l.Stats())
					}
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
}

var _ io.Writer = (*faultFile)(nil)

// In always mode no Wait returns before its fsync does; in interval mode
// Wait returns after the write while the background fsync is still held.
// WaitGathered promises the same.
func TestWaitReturnsAfterWhatTheModePromises(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval} {
		for _, gathered := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/gathered=%v", mode, gathered), func(t *testing.T) {
				fs := &faults{}
				cfg := testConfig(t, t.TempDir())
				cfg.Sync, cfg.WrapFile = mode, fs.wrap
				cfg.SyncInterval = time.Millisecond
				l := mustOpen(t, cfg)
				defer l.Close()
				gate := make(chan struct{})
				fs.mu.Lock()
				fs.syncGate = gate
				fs.mu.Unlock()
				idx, err := l.Append(rec(1))
				if err != nil {
					t.Fatal(err)
				}
				wait := l.Wait
				if gathered {
					wait = l.WaitGathered
				}
				done := make(chan error, 1)
				go func() { done <- wait(idx) }()
				for { // an fsync has begun and is held
					fs.mu.Lock()
					calls := fs.syncCalls
					fs.mu.Unlock()
					if calls > 0 {
						break
					}
					time.Sleep(time.Millisecond)
				}
				switch mode {
				case SyncAlways:
					select {
					case err := <-done:
						close(gate)
						t.Fatalf("Wait returned (%v) while its fsync was held", err)
					default:
					}
					close(gate)
					if err := <-done; err != nil {
						t.Fatal(err)
					}
				case SyncInterval:
					if err := <-done; err != nil { // returns with the fsync still held
						t.Fatal(err)
					}
					if st := l.Stats(); st.RecordsSynced != 0 {
						t.Fatalf("stats %+v: synced while the fsync was held", st)
					}
					close(gate)
				}
			})
		}
	}
}

// crashCopy copies the log's files in dir to a new directory, as a
// kill -9 at this moment would leave them (what write(2) put in the page
// cache), with syncMu held so that no retry is writing meanwhile.
func crashCopy(t *testing.T, l *Log, dir string) string {
	t.Helper()
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	to := t.TempDir()
	for _, p := range segments(t, dir) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, filepath.Base(p)), b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// A write or fsync that fails leaves no record in the file that Wait did
// not return nil for: the engine answers such a grant 503 and takes it
// back with a release appended after it, so a record of the grant
// without its release, left whole by a write cut short (a disk that
// fills up mid-batch), came back held after a kill -9 for its lease,
// although its client was told nothing changed. Only the records
// written before the failure may be in the file, while the log is failed
// (after its retries) and after a Close that could not write.
func TestFailedWriteLeavesOnlyAnsweredRecords(t *testing.T) {
	for _, c := range []struct {
		mode       SyncMode
		write, syn error
	}{
		{SyncAlways, syscall.ENOSPC, nil},
		{SyncAlways, nil, syscall.EIO},
		{SyncInterval, syscall.ENOSPC, nil},
		{SyncNever, syscall.ENOSPC, nil},
	} {
		t.Run(fmt.Sprintf("%s/write=%v/fsync=%v", c.mode, c.write, c.syn), func(t *testing.T) {
			dir := t.TempDir()
			fs := &faults{}
			cfg := testConfig(t, dir)
			cfg.Sync, cfg.WrapFile = c.mode, fs.wrap
			health := healthEvents(&cfg)
			l := mustOpen(t, cfg)
			defer l.Close()
			for i := 1; i <= 5; i++ {
				appendWait(t, l, rec(i))
			}
			fs.set(c.write, c.syn)
			// One batch of four records, half of whose bytes reach the
			// file (faultFile): records 6 and 7 whole.
			var last uint64
			for i := 6; i <= 9; i++ {
				idx, err := l.Append(rec(i))
				if err != nil {
					t.Fatal(err)
				}
				last = idx
			}
			if err := l.Wait(last); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Wait with the disk failing = %v, want ErrUnavailable", err)
			}
			expectHealth(t, health, true)
			time.Sleep(5 * cfg.RetryInterval) // retries that fail too

			crashed := testConfig(t, crashCopy(t, l, dir))
			reopenHas(t, crashed, 5)

			if err := l.Close(); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Close with records not written = %v, want ErrUnavailable", err)
			}
			cfg.WrapFile, cfg.OnHealth = nil, nil
			reopenHas(t, cfg, 5)
		})
	}
}

// AppendPending takes a record while the log fails (Append refuses it),
// behind the record the failure left pending, and the recovery writes the
// two in one write: a process stopped after the recovery's write has
// either both or, stopped before it, neither (the engine appends the
// take-back of a grant the failure caught so; appended after the
// recovery, a node stopped in between held the grant nobody was told of).
func TestAppendPendingGoesWithThePendingRecords(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			fs := &faults{}
			cfg := testConfig(t, dir)
			cfg.Sync, cfg.WrapFile = mode, fs.wrap
			health := healthEvents(&cfg)
			l := mustOpen(t, cfg)
			defer l.Close()
			for i := 1; i <= 10; i++ {
				appendWait(t, l, rec(i))
			}
			fs.set(syscall.ENOSPC, nil)
			i11, err := l.Append(rec(11))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Wait(i11); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Wait on a full disk = %v, want ErrUnavailable", err)
			}
			expectHealth(t, health, true)
			if _, err := l.Append(rec(12)); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("Append while failed = %v, want ErrUnavailable", err)
			}
			i12, err := l.AppendPending(rec(12))
			if err != nil || i12 != i11+1 {
				t.Fatalf("AppendPending while failed = %d, %v; want %d", i12, err, i11+1)
			}
			before := l.Stats()
			fs.set(nil, nil)
			expectHealth(t, health, false)
			if err := l.Wait(i12); err != nil {
				t.Fatalf("Wait(%d) after recovery = %v", i12, err)
			}
			after := l.Stats()
			if w, r := after.Writes-before.Writes, after.RecordsWritten-before.RecordsWritten; w != 1 || r != 2 {
				t.Fatalf("the recovery wrote %d records in %d writes, want the pending one and the one appended behind it in 1", r, w)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := l.AppendPending(rec(13)); !errors.Is(err, ErrClosed) {
				t.Fatalf("AppendPending on a closed log = %v, want ErrClosed", err)
			}
			cfg.WrapFile, cfg.OnHealth = nil, nil
			reopenHas(t, cfg, 12)
		})
	}
}
