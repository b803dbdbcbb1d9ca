package wal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRemovedSegmentFailsTheLog: the segment the log writes removed from
// the directory while the log is open (an operator's rm -rf of data_dir,
// a cleaner of old files) leaves the log writing into a file nobody can
// open again: every record written there is lost at the next start. The
// log must see it and refuse changes (ErrUnavailable, the file named),
// and never take them again while it can only write into the removed
// file, not report success for records no restart will find.
func TestRemovedSegmentFailsTheLog(t *testing.T) {
	for _, tc := range []struct {
		name   string
		remove func(t *testing.T, dir string)
	}{
		{"segment", func(t *testing.T, dir string) {
			removeSegments(t, dir)
		}},
		{"directory", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
		}},
		{"directory made again", func(t *testing.T, dir string) {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir, 0o750); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNever} {
			t.Run(tc.name+"/"+mode.String(), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "log")
				cfg := testConfig(t, dir)
				cfg.Sync = mode
				health := healthEvents(&cfg)
				l := mustOpen(t, cfg)
				defer l.Close()
				for i := 1; i <= 5; i++ {
					appendWait(t, l, rec(i))
				}
				seg := filepath.Join(dir, fileName(1, segmentExt))
				tc.remove(t, dir)

				// Records appended now may still be written into the
				// removed file before the log notices; it notices
				// by itself, without a write that fails.
				expectHealth(t, health, true)
				_, err := l.Append(rec(6))
				if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), seg) {
					t.Fatalf("Append after the segment was removed = %v, want ErrUnavailable naming %s", err, seg)
				}
				// The retries must not take writes into the removed
				// file for a recovery.
				time.Sleep(50 * cfg.RetryInterval)
				select {
				case err := <-health:
					t.Fatalf("OnHealth(%v) while the segment is still removed", err)
				default:
				}
				if l.Healthy() {
					t.Fatal("the log reports itself healthy while its segment is removed")
				}
				if _, err := l.Append(rec(7)); !errors.Is(err, ErrUnavailable) {
					t.Fatalf("Append after the retries = %v, want ErrUnavailable", err)
				}
			})
		}
	}
}

func removeSegments(t *testing.T, dir string) {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
	if err != nil || len(names) == 0 {
		t.Fatalf("no segment in %s (%v)", dir, err)
	}
	for _, n := range names {
		if err := os.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
}

// TestOpenRefusesALogWhoseFilesWereRemoved: a directory with neither a
// segment nor a snapshot, where the caller knows a log was
// (Config.Existed), is not a new log: Open returns ErrRemoved, naming the
// directory, the evidence and the repair hint, and creates nothing (a
// second Open refuses the same). With Repair it begins an empty log.
func TestOpenRefusesALogWhoseFilesWereRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	cfg := testConfig(t, dir)
	l := mustOpen(t, cfg)
	for i := 1; i <= 5; i++ {
		appendWait(t, l, rec(i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	removeSegments(t, dir)
	cfg.Existed = "the test wrote it"
	cfg.RepairHint = "set the test's flag"
	for range 2 {
		l, err := Open(cfg)
		if err == nil {
			l.Close()
			t.Fatal("Open began a new log in a directory whose log was removed")
		}
		for _, w := range []string{dir, "the test wrote it", "set the test's flag"} {
			if !errors.Is(err, ErrRemoved) || !strings.Contains(err.Error(), w) {
				t.Fatalf("Open: %v; want ErrRemoved naming %q", err, w)
			}
		}
	}
	cfg.Repair = true
	l = mustOpen(t, cfg)
	defer l.Close()
	if got := l.LastIndex(); got != 0 {
		t.Fatalf("repaired: last index %d, want an empty log", got)
	}
	appendWait(t, l, rec(1))
}
