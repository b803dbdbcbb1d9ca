package wal

import (
	"errors"
	"io"
	"log/slog"
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
