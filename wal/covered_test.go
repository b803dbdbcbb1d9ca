package wal

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDamageInASegmentTheSnapshotHolds: a segment whose records the
// newest snapshot holds all of is left on the disk when the process stops
// between the snapshot's rename and the removal of what it replaces (or
// the removal fails). Damage in it is in nothing the log still needs:
// Open starts (it refused to), drops that segment and the older ones with
// a warning, and keeps every record after the snapshot, with Repair too
// (which cut the log at the damage and then, the log ending before the
// snapshot, dropped every record after it).
func TestDamageInASegmentTheSnapshotHolds(t *testing.T) {
	t.Run("cut short", testCoveredSegmentCutShort)
	for _, repair := range []bool{false, true} {
		dir := t.TempDir()
		cfg := testConfig(t, dir)
		cfg.SegmentSize = 4096
		l := mustOpen(t, cfg)
		const n, snap = 400, 300
		for i := 1; i <= n; i++ {
			appendWait(t, l, rec(i))
		}
		old := map[string][]byte{}
		for _, s := range segments(t, dir) {
			b, err := os.ReadFile(s)
			if err != nil {
				t.Fatal(err)
			}
			old[s] = b
		}
		saveState(t, l, snap)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// The removal that did not happen: the segments are back, the
		// second one damaged in its last frame's length (no frame after
		// it in the segment is found: it cannot be passed over).
		for s, b := range old {
			if err := os.WriteFile(s, b, 0o640); err != nil {
				t.Fatal(err)
			}
		}
		all := segments(t, dir)
		if third, _ := parseName(filepath.Base(all[2]), segmentExt); third > snap+1 {
			t.Fatalf("the third segment begins at record %d: the second is not held whole by the snapshot at %d", third, snap)
		}
		data := bytes.Clone(old[all[1]])
		offs := frameOffsets(t, data)
		data[offs[len(offs)-1]] ^= 0x40
		if err := os.WriteFile(all[1], data, 0o640); err != nil {
			t.Fatal(err)
		}

		if !repair {
			// With the snapshot damaged too, nothing is removed on its word:
			// the damage stops Open, as before.
			snapPath := filepath.Join(dir, fileName(snap, snapshotExt))
			sb, err := os.ReadFile(snapPath)
			if err != nil {
				t.Fatal(err)
			}
			bad := bytes.Clone(sb)
			bad[headerSize+10] ^= 1
			if err := os.WriteFile(snapPath, bad, 0o640); err != nil {
				t.Fatal(err)
			}
			var ce *CorruptError
			if _, err := Open(cfg); !errors.As(err, &ce) || ce.File != all[1] {
				t.Fatalf("Open with the snapshot damaged too = %v; want the segment's damage", err)
			}
			if _, err := os.Stat(all[0]); err != nil {
				t.Fatalf("%s removed on the word of a damaged snapshot: %v", all[0], err)
			}
			if err := os.WriteFile(snapPath, sb, 0o640); err != nil {
				t.Fatal(err)
			}
		}
		cfg.Repair = repair
		var logs bytes.Buffer
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		l, err := Open(cfg)
		if err != nil {
			t.Fatalf("repair %v: Open with damage in a segment the snapshot holds: %v", repair, err)
		}
		loadState(t, l, snap)
		checkRecords(t, replayAll(t, l, snap+1), snap+1, n)
		if i := appendWait(t, l, rec(n+1)); i != n+1 {
			t.Fatalf("next Append got %d, want %d", i, n+1)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		for _, s := range all[:2] {
			if _, err := os.Stat(s); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("repair %v: %s (held by the snapshot, damaged or older) still there (%v)", repair, s, err)
			}
		}
		if !strings.Contains(logs.String(), all[1]) || !strings.Contains(logs.String(), "snapshot") {
			t.Fatalf("repair %v: no warning naming %s: %q", repair, all[1], logs.String())
		}
	}
}

// testCoveredSegmentCutShort: the last segment the snapshot holds whole,
// cut short (its last records gone, as zeros would read): the next
// segment begins after a gap, but in records the snapshot holds. Open
// starts with every record after the snapshot (it refused: "segment
// starts at record ...").
func testCoveredSegmentCutShort(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.SegmentSize = 4096
	l := mustOpen(t, cfg)
	const n, snap = 400, 300
	for i := 1; i <= n; i++ {
		appendWait(t, l, rec(i))
	}
	old := map[string][]byte{}
	for _, s := range segments(t, dir) {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		old[s] = b
	}
	saveState(t, l, snap)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for s, b := range old {
		if err := os.WriteFile(s, b, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	all := segments(t, dir)
	k := -1 // the last segment the snapshot holds whole
	for i := 0; i+1 < len(all); i++ {
		if next, _ := parseName(filepath.Base(all[i+1]), segmentExt); next <= snap+1 {
			k = i
		}
	}
	if k < 0 {
		t.Fatalf("no segment held whole by the snapshot at %d: %v", snap, all)
	}
	offs := frameOffsets(t, old[all[k]])
	if err := os.Truncate(all[k], offs[len(offs)-2]); err != nil {
		t.Fatal(err)
	}
	// Not on the word of a damaged snapshot: the gap stops Open.
	snapPath := filepath.Join(dir, fileName(snap, snapshotExt))
	sb, err := os.ReadFile(snapPath)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(sb)
	bad[headerSize+10] ^= 1
	if err := os.WriteFile(snapPath, bad, 0o640); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptError
	if _, err := Open(cfg); !errors.As(err, &ce) || ce.File != all[k+1] {
		t.Fatalf("Open with the snapshot damaged too = %v; want the gap before %s", err, all[k+1])
	}
	if err := os.WriteFile(snapPath, sb, 0o640); err != nil {
		t.Fatal(err)
	}
	l, err = Open(cfg)
	if err != nil {
		t.Fatalf("Open with a cut segment the snapshot holds: %v", err)
	}
	defer l.Close()
	loadState(t, l, snap)
	checkRecords(t, replayAll(t, l, snap+1), snap+1, n)
}

// TestDamagedRecordTheSnapshotHolds: a record the newest snapshot holds,
// in the segment that goes on past the snapshot, whose payload is damaged
// (its length verifies, so the next frame is found): Open passes it over
// with a warning and the records after the snapshot replay; it refused
// to start, and Repair cut the log there and, the log then ending before
// the snapshot, dropped every record after the snapshot.
func TestDamagedRecordTheSnapshotHolds(t *testing.T) {
	for _, repair := range []bool{false, true} {
		dir := t.TempDir()
		cfg := testConfig(t, dir)
		cfg.SegmentSize = 4096
		l := mustOpen(t, cfg)
		const n = 400
		for i := 1; i <= n; i++ {
			appendWait(t, l, rec(i))
		}
		all := segments(t, dir)
		seg := all[len(all)-3]
		first, _ := parseName(filepath.Base(seg), segmentExt)
		snap := first + 3 // the segment holds records on both sides of it
		saveState(t, l, snap)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if got := segments(t, dir); got[0] != seg {
			t.Fatalf("segments after the snapshot at %d: %v; want them from %s", snap, got, seg)
		}
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		offs := frameOffsets(t, data)
		data[offs[1]+frameHeader+2] ^= 0x10 // record first+1's payload
		if err := os.WriteFile(seg, data, 0o640); err != nil {
			t.Fatal(err)
		}

		if !repair {
			// Not on the word of a damaged snapshot: the damage stops
			// Open, as before (--repair-log starts from the log alone).
			snapPath := filepath.Join(dir, fileName(snap, snapshotExt))
			sb, err := os.ReadFile(snapPath)
			if err != nil {
				t.Fatal(err)
			}
			bad := bytes.Clone(sb)
			bad[headerSize+10] ^= 1
			if err := os.WriteFile(snapPath, bad, 0o640); err != nil {
				t.Fatal(err)
			}
			var ce *CorruptError
			if _, err := Open(cfg); !errors.As(err, &ce) || ce.File != seg || ce.Index != first+1 {
				t.Fatalf("Open with the snapshot damaged too = %v; want the damage of record %d", err, first+1)
			}
			if err := os.WriteFile(snapPath, sb, 0o640); err != nil {
				t.Fatal(err)
			}
		}
		cfg.Repair = repair
		var logs bytes.Buffer
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		l, err = Open(cfg)
		if err != nil {
			t.Fatalf("repair %v: Open with a damaged record the snapshot holds: %v", repair, err)
		}
		loadState(t, l, snap)
		checkRecords(t, replayAll(t, l, snap+1), int(snap)+1, n)
		if err := l.Replay(first, func(uint64, []byte) error { return nil }); err == nil {
			t.Fatalf("repair %v: Replay from record %d passed over the damaged record %d", repair, first, first+1)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "passed over") || !strings.Contains(logs.String(), seg) {
			t.Fatalf("repair %v: no warning naming %s: %q", repair, seg, logs.String())
		}
	}
}
