package wal

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// manySegments opens a log in dir with 4 KiB segments and writes n
// records, which fill several; it returns the closed log's config.
func manySegments(t *testing.T, dir string, n int) Config {
	t.Helper()
	cfg := testConfig(t, dir)
	cfg.SegmentSize = 4096
	cfg.Preallocate = 0
	cfg.RepairHint = "set the test's flag"
	l := mustOpen(t, cfg)
	for i := 1; i <= n; i++ {
		appendWait(t, l, rec(i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if segs := segments(t, dir); len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	return cfg
}

// newestNamed returns what the newest-segment file says.
func newestNamed(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, newestName))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A newest segment removed while the node was down (breaker report of
// 2026-12-05: the records of answered grants gone, and the node started
// without a word) is refused at start, naming it; with Repair the log
// starts with the records before it, and the next start needs no flag.
func TestOpenRefusesALogWhoseNewestSegmentWasRemoved(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	cfg := manySegments(t, dir, 200)
	segs := segments(t, dir)
	newest := segs[len(segs)-1]
	if got, want := newestNamed(t, dir), filepath.Base(newest)+"\n"; got != want {
		t.Fatalf("%s holds %q, want %q", newestName, got, want)
	}
	if err := os.Remove(newest); err != nil {
		t.Fatal(err)
	}
	first, _ := parseName(filepath.Base(newest), segmentExt)
	for range 2 {
		l, err := Open(cfg)
		if err == nil {
			l.Close()
			t.Fatal("Open started a log whose newest segment was removed")
		}
		for _, w := range []string{newest, newestName, "set the test's flag"} {
			if !errors.Is(err, ErrRemoved) || !strings.Contains(err.Error(), w) {
				t.Fatalf("Open: %v; want ErrRemoved naming %q", err, w)
			}
		}
	}
	cfg.Repair = true
	l := mustOpen(t, cfg)
	if got := l.LastIndex(); got != first-1 {
		t.Fatalf("repaired: last index %d, want %d (the records before the removed segment)", got, first-1)
	}
	checkRecords(t, replayAll(t, l, 1), 1, int(first-1))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Repair = false
	l = mustOpen(t, cfg)
	defer l.Close()
	appendWait(t, l, rec(int(first)))
}

// An Install below the newest segment (a standby that installs its
// active's older snapshot) names the segment that begins the new log,
// and a restart opens it, also when the Install stopped between its
// removals and its new segment (the file is lowered before any removal).
func TestInstallBelowTheNewestSegmentReopens(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	cfg := manySegments(t, dir, 200)
	l := mustOpen(t, cfg)
	if err := l.Install(3, func(w io.Writer) error { _, err := w.Write([]byte("state")); return err }); err != nil {
		t.Fatal(err)
	}
	if got, want := newestNamed(t, dir), fileName(4, segmentExt)+"\n"; got != want {
		t.Fatalf("after Install(3): %s holds %q, want %q", newestName, got, want)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, cfg)
	if got := l.LastIndex(); got != 3 {
		t.Fatalf("reopened after Install(3): last index %d", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The state a crash inside Install leaves: the file lowered, the
	// segments removed, no new segment yet.
	for _, s := range segments(t, dir) {
		if err := os.Remove(s); err != nil {
			t.Fatal(err)
		}
	}
	l = mustOpen(t, cfg)
	defer l.Close()
	if got := l.LastIndex(); got != 3 {
		t.Fatalf("reopened after a cut Install(3): last index %d", got)
	}
}

// The file's damage stops the start like a segment's (naming it, with
// the repair hint); Repair writes it again. A log without it (written
// before it existed) opens and gets it.
func TestNewestSegmentFileDamagedOrMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	cfg := manySegments(t, dir, 200)
	segs := segments(t, dir)
	want := filepath.Base(segs[len(segs)-1]) + "\n"
	path := filepath.Join(dir, newestName)
	if err := os.WriteFile(path, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(cfg)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != path || !strings.Contains(err.Error(), "set the test's flag") {
		t.Fatalf("Open with a damaged %s: %v; want a CorruptError naming it", newestName, err)
	}
	cfg.Repair = true
	l := mustOpen(t, cfg)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := newestNamed(t, dir); got != want {
		t.Fatalf("repaired: %s holds %q, want %q", newestName, got, want)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	cfg.Repair = false
	l = mustOpen(t, cfg)
	defer l.Close()
	if got := newestNamed(t, dir); got != want {
		t.Fatalf("opened without it: %s holds %q, want %q", newestName, got, want)
	}
}

// A snapshot newer than the log's end that does not verify (breaker
// report of 2026-12-05: a garbage newest snapshot logged "continuing
// after the snapshot", and the start then stopped at it) never costs the
// log's records: without Repair they all stay (the start stops at the
// snapshot, LoadSnapshot's CorruptError); with Repair the snapshot is
// moved aside and the log starts with every record.
func TestADamagedSnapshotBeyondTheLogsEndKeepsTheLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	cfg := testConfig(t, dir)
	l := mustOpen(t, cfg)
	for i := 1; i <= 50; i++ {
		appendWait(t, l, rec(i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, fileName(1000, snapshotExt))
	if err := os.WriteFile(bad, []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	l = mustOpen(t, cfg)
	var ce *CorruptError
	if _, _, err := l.LoadSnapshot(); !errors.As(err, &ce) || ce.File != bad {
		t.Fatalf("LoadSnapshot: %v; want a CorruptError naming %s", err, bad)
	}
	checkRecords(t, replayAll(t, l, 1), 1, 50)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.Repair = true
	l = mustOpen(t, cfg)
	if _, _, err := l.LoadSnapshot(); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("repaired: LoadSnapshot: %v; want ErrNoSnapshot (the damaged one moved aside)", err)
	}
	checkRecords(t, replayAll(t, l, 1), 1, 50)
	appendWait(t, l, rec(51))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bad + damagedExt); err != nil {
		t.Fatalf("the damaged snapshot was not kept aside: %v", err)
	}
	cfg.Repair = false
	l = mustOpen(t, cfg)
	defer l.Close()
	checkRecords(t, replayAll(t, l, 1), 1, 51)
}

// Every segment removed behind a snapshot (breaker I: a single node's
// answered grant after the snapshot gone, with a warning only): the
// newest segment began before the snapshot and held the records after
// it. Where only an Install can leave a snapshot without a segment (a
// cluster node, Existed unset), the start goes on from the snapshot as
// before; where none can (Existed set: a single node), it stops, naming
// the segment, and Repair starts from the snapshot.
func TestEverySegmentRemovedBehindASnapshot(t *testing.T) {
	for _, existed := range []string{"", "the test wrote it"} {
		dir := filepath.Join(t.TempDir(), "log")
		cfg := testConfig(t, dir)
		cfg.RepairHint = "set the test's flag"
		l := mustOpen(t, cfg)
		for i := 1; i <= 50; i++ {
			appendWait(t, l, rec(i))
		}
		if err := l.SaveSnapshot(40, func(w io.Writer) error { _, err := w.Write([]byte("state")); return err }); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		segs := segments(t, dir)
		for _, s := range segs {
			if err := os.Remove(s); err != nil {
				t.Fatal(err)
			}
		}
		cfg.Existed = existed
		l, err := Open(cfg)
		if existed == "" {
			if err != nil {
				t.Fatalf("Open of a cluster node's log left with a snapshot alone: %v", err)
			}
			if got := l.LastIndex(); got != 40 {
				t.Fatalf("last index %d, want the snapshot's 40", got)
			}
			l.Close()
			continue
		}
		if err == nil {
			l.Close()
			t.Fatal("Open started from the snapshot alone although a single node's segments were removed behind it")
		}
		for _, w := range []string{segs[len(segs)-1], "set the test's flag", "record 40"} {
			if !errors.Is(err, ErrRemoved) || !strings.Contains(err.Error(), w) {
				t.Fatalf("Open: %v; want ErrRemoved naming %q", err, w)
			}
		}
		cfg.Repair = true
		l = mustOpen(t, cfg)
		if got := l.LastIndex(); got != 40 {
			t.Fatalf("repaired: last index %d, want the snapshot's 40", got)
		}
		l.Close()
		cfg.Repair = false
		l = mustOpen(t, cfg)
		l.Close()
	}
}
