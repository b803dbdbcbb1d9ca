package wal

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if dir := os.Getenv("WAL_TEST_OPEN_DIR"); dir != "" {
		// Helper mode for TestLockRefusesSecondProcess: one Open attempt.
		l, err := Open(DefaultConfig(dir))
		if err != nil {
			fmt.Println(err)
			os.Exit(3)
		}
		l.Close()
		os.Exit(0)
	}
	if dir := os.Getenv("WAL_TEST_WRITER_DIR"); dir != "" {
		crashWriter(dir, os.Getenv("WAL_TEST_WRITER_MODE")) // until killed
	}
	goleak.VerifyTestMain(m)
}

// testConfig is a fast config in dir whose warnings go to the test log.
func testConfig(t testing.TB, dir string) Config {
	cfg := DefaultConfig(dir)
	cfg.SyncInterval = 5 * time.Millisecond
	cfg.FailTimeout = 50 * time.Millisecond
	cfg.RetryInterval = 5 * time.Millisecond
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	return cfg
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func mustOpen(t testing.TB, cfg Config) *Log {
	t.Helper()
	l, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return l
}

// rec is the payload of record i in these tests: sizes vary, 10 to 130 bytes.
func rec(i int) []byte {
	return fmt.Appendf(nil, "record %d|%s", i, strings.Repeat(string(rune('a'+i%26)), i%113))
}

func appendWait(t testing.TB, l *Log, b []byte) uint64 {
	t.Helper()
	i, err := l.Append(b)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := l.Wait(i); err != nil {
		t.Fatalf("Wait(%d): %v", i, err)
	}
	return i
}

// replayAll returns the records from index from on.
func replayAll(t testing.TB, l *Log, from uint64) map[uint64][]byte {
	t.Helper()
	got := map[uint64][]byte{}
	want := from
	err := l.Replay(from, func(i uint64, r []byte) error {
		if i != want {
			return fmt.Errorf("record %d after %d", i, want-1)
		}
		want++
		got[i] = slices.Clone(r)
		return nil
	})
	if err != nil {
		t.Fatalf("Replay(%d): %v", from, err)
	}
	return got
}

func checkRecords(t testing.TB, got map[uint64][]byte, from, to int) {
	t.Helper()
	if len(got) != to-from+1 {
		t.Fatalf("replayed %d records, want %d (records %d..%d)", len(got), to-from+1, from, to)
	}
	for i := from; i <= to; i++ {
		if !bytes.Equal(got[uint64(i)], rec(i)) {
			t.Fatalf("record %d = %q, want %q", i, got[uint64(i)], rec(i))
		}
	}
}

func segments(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

func TestRoundTripAcrossSegmentsAndReopen(t *testing.T) {
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNever} {
		t.Run(mode.String(), func(t *testing.T) {
			dir := t.TempDir()
			cfg := testConfig(t, dir)
			cfg.Sync = mode
			cfg.SegmentSize = 4096
			l := mustOpen(t, cfg)
			for i := 1; i <= 1000; i++ {
				if got := appendWait(t, l, rec(i)); got != uint64(i) {
					t.Fatalf("Append %d got index %d", i, got)
				}
			}
			checkRecords(t, replayAll(t, l, 1), 1, 1000)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if n := len(segments(t, dir)); n < 5 {
				t.Fatalf("%d segments for 1000 records at 4096 bytes each, want several", n)
			}
			l = mustOpen(t, cfg)
			checkRecords(t, replayAll(t, l, 1), 1, 1000)
			checkRecords(t, replayAll(t, l, 777), 777, 1000)
			if got := appendWait(t, l, rec(1001)); got != 1001 {
				t.Fatalf("after reopen Append got index %d, want 1001", got)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l = mustOpen(t, cfg)
			defer l.Close()
			checkRecords(t, replayAll(t, l, 1), 1, 1001)
		})
	}
}
