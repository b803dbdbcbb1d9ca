package wal

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/baton-io/baton/internal/testproc"
)

// TestFailedInstallIsNoRemovedSegment: an Install whose snapshot cannot
// be written (a full disk: ENOSPC) has already removed the log's
// segments, which is its own doing, not an operator's. The log is failed
// until an Install succeeds (Install's doc), and the standby installs
// again at its next stream. Its check of the active segment took the
// segment Install removed for one removed behind its back and logged an
// ERROR that changes are refused "until the node is restarted" (false:
// the next Install that succeeds takes changes again), 80 ms after the
// cluster logged the failed install: seen in the chaos runs (a full disk
// on the active, which hands off and is sent a snapshot while its disk is
// still full: TestDiskHistoryChaos CHAOS_SEED=217 CHAOS_FAULTS=8, 2 of 3
// handoffs).
func TestFailedInstallIsNoRemovedSegment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	cfg := testConfig(t, dir)
	var out testproc.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&out, nil))
	l := mustOpen(t, cfg)
	defer l.Close()
	for i := 1; i <= 5; i++ {
		appendWait(t, l, rec(i))
	}
	full := func(io.Writer) error { return syscall.ENOSPC }
	if err := l.Install(9, full); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Install with a snapshot that cannot be written: %v, want ENOSPC", err)
	}
	// The log's goroutine checks the active segment every SyncInterval;
	// once more here, so that the check has run whatever the timing.
	l.syncMu.Lock()
	l.checkActive()
	l.syncMu.Unlock()
	if s := out.String(); strings.Contains(s, "segment is gone") {
		t.Errorf("a failed Install was taken for a segment removed behind the log's back:\n%s", s)
	}
	if _, err := l.Append(rec(6)); err == nil {
		t.Fatalf("Append after a failed Install succeeded; the log must refuse until an Install succeeds")
	}
	snap := []byte("state at 12")
	if err := l.Install(12, func(w io.Writer) error { _, err := w.Write(snap); return err }); err != nil {
		t.Fatalf("Install after a failed one: %v", err)
	}
	if err := l.AppendAt(13, rec(13)); err != nil {
		t.Fatalf("AppendAt(13) after the Install: %v", err)
	}
	if err := l.Wait(13); err != nil {
		t.Fatalf("Wait(13): %v", err)
	}
	l.syncMu.Lock()
	l.checkActive()
	l.syncMu.Unlock()
	if !l.Healthy() {
		t.Fatalf("the log is not healthy after an Install succeeded:\n%s", out.String())
	}
}

// TestFailedInstallKeepsTheLog: an Install whose snapshot cannot be
// written (a full disk) removed the log's segments and snapshots first,
// and left the node with nothing: restarted, it replayed an empty log
// without a word (breaker: a standby sent its active's snapshot onto a
// full disk, then every node killed and this one started first, lost
// 1,314 answered grants). The new snapshot is now written whole (and
// synced) before anything is removed: a failed one leaves the log as it
// was, which the next start replays, and a crash at any point still
// leaves a log that starts at a snapshot this node held.
func TestFailedInstallKeepsTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	cfg := testConfig(t, dir)
	l := mustOpen(t, cfg)
	for i := 1; i <= 5; i++ {
		appendWait(t, l, rec(i))
	}
	written := func(w io.Writer) error {
		if _, err := w.Write([]byte("half a snapshot")); err != nil {
			return err
		}
		return syscall.ENOSPC
	}
	if err := l.Install(9, written); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Install with a snapshot that cannot be written: %v, want ENOSPC", err)
	}
	// The background retry, once more here: the disk writes, but the
	// records Install dropped are not in the log, so it must not call
	// them written and take appends after them.
	if l.recover() {
		t.Fatal("the log recovered after a failed Install; it must stay failed until an Install succeeds")
	}
	if _, err := l.Append(rec(6)); err == nil {
		t.Fatal("Append after a failed Install succeeded; the log must refuse until an Install succeeds")
	}
	_ = l.Close()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), tmpExt) {
			t.Errorf("%s left in the log's directory", e.Name())
		}
	}

	l2 := mustOpen(t, cfg)
	defer l2.Close()
	if first, last := l2.FirstIndex(), l2.LastIndex(); first != 1 || last != 5 {
		t.Fatalf("the log after a failed Install, reopened: records %d..%d, want 1..5", first, last)
	}
	var got int
	if err := l2.Replay(1, func(index uint64, r []byte) error {
		got++
		if want := rec(int(index)); string(r) != string(want) {
			t.Errorf("record %d: %q, want %q", index, r, want)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got != 5 {
		t.Fatalf("replayed %d records, want 5", got)
	}
}
