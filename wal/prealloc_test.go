package wal

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// framesEnd is the end of the frames of a segment's bytes (after which
// data holds only zeros, or nothing), and their start offsets.
func framesEnd(t *testing.T, data []byte) (int64, []int64) {
	t.Helper()
	var offs []int64
	off := int64(headerSize)
	for off+frameHeader <= int64(len(data)) {
		n := int64(data[off]) | int64(data[off+1])<<8 | int64(data[off+2])<<16
		if n == 0 {
			break
		}
		offs = append(offs, off)
		off += frameHeader + n
	}
	if bytes.ContainsFunc(data[min(off, int64(len(data))):], func(r rune) bool { return r != 0 }) {
		t.Fatalf("non-zero bytes after the frames, from offset %d", off)
	}
	return off, offs
}

// TestPreallocatedZerosAreTheEndOfTheLog: the writer keeps zeros written
// ahead of its records; a log found with them (a crash: no Close) opens
// with every record, without a warning or a truncation, and goes on
// after its last record; a cut segment and a closed log hold no zeros.
func TestPreallocatedZerosAreTheEndOfTheLog(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.Preallocate = 64 << 10
	l := mustOpen(t, cfg)
	defer l.Close()
	const n = 40
	for i := 1; i <= n; i++ {
		appendWait(t, l, rec(i))
	}
	seg := segments(t, dir)[0]
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	end, offs := framesEnd(t, data)
	if len(offs) != n {
		t.Fatalf("%d frames in the segment, want %d", len(offs), n)
	}
	// The first write put Preallocate bytes of zeros after its record.
	if int64(len(data)) < offs[1]+cfg.Preallocate || int64(len(data)) <= end {
		t.Fatalf("segment of %d bytes with records to %d: want zeros ahead, to at least %d", len(data), end, offs[1]+cfg.Preallocate)
	}

	// The state a kill -9 leaves, in another directory.
	crashed := t.TempDir()
	if err := os.WriteFile(filepath.Join(crashed, filepath.Base(seg)), data, 0o640); err != nil {
		t.Fatal(err)
	}
	ccfg := testConfig(t, crashed)
	var logs bytes.Buffer
	ccfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	reopenHas(t, ccfg, n) // also appends record n+1 after the last one
	if logs.Len() != 0 {
		t.Fatalf("opening a log that ends in zeros logged %q", logs.String())
	}
	data, err = os.ReadFile(filepath.Join(crashed, filepath.Base(seg)))
	if err != nil {
		t.Fatal(err)
	}
	if end, offs := framesEnd(t, data); len(offs) != n+1 || int64(len(data)) != end {
		t.Fatalf("after Close: %d frames, %d bytes, frames end at %d; want %d frames and no zeros", len(offs), len(data), end, n+1)
	}

	// Cut segments end at their last record.
	cfg.SegmentSize = 4096
	dir = t.TempDir()
	cfg.Dir = dir
	l2 := mustOpen(t, cfg)
	defer l2.Close()
	for i := 1; i <= 200; i++ {
		appendWait(t, l2, rec(i))
	}
	segs := segments(t, dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	for i, s := range segs {
		data, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		end, _ := framesEnd(t, data)
		if last := i == len(segs)-1; !last && int64(len(data)) != end {
			t.Fatalf("segment %s (not the last) has %d bytes, its records end at %d", s, len(data), end)
		} else if last && int64(len(data)) <= end {
			t.Fatalf("the last segment has no zeros ahead (%d bytes)", len(data))
		}
	}
}

// blankSector writes a copy of a segment's bytes (data, its frames at
// offs, ending at end) into a new data_dir as the file name, with zeros
// written ahead and the sector at offset s blanked: what a power loss
// leaves of writes not yet fsynced. It returns the copy's path, its bytes,
// and kept, the number of frames that end at or before s (the frame at
// index kept is the one the blank sector tears).
func blankSector(t *testing.T, name string, data []byte, offs []int64, end, s int64) (path string, torn []byte, kept int) {
	t.Helper()
	for i := range offs {
		fe := end
		if i+1 < len(offs) {
			fe = offs[i+1]
		}
		if fe <= s {
			kept = i + 1
		}
	}
	torn = append(bytes.Clone(data), make([]byte, 8192)...)
	clear(torn[s : s+sectorSize])
	path = filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, torn, 0o640); err != nil {
		t.Fatal(err)
	}
	return path, torn, kept
}

// TestBlankSectorIsATornTail: after a power loss, the sectors of a write
// that was not fsynced may have reached the disk in any order, and zeros
// written ahead keep the file's size from hiding the missing ones. A
// frame one of whose sectors is blank is the torn end of the log even
// when later sectors landed; a zero frame header followed by data in its
// own sector is damage, as is a blank sector in a segment that is not
// the last.
func TestBlankSectorIsATornTail(t *testing.T) {
	src := t.TempDir()
	const n = 120
	last := writeLog(t, testConfig(t, src), n)
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	end, offs := framesEnd(t, data)
	if end < 4*sectorSize {
		t.Fatalf("segment of %d bytes: too short for the test", end)
	}
	// Blank each whole sector from the third on, in turn; the data after
	// it and zeros ahead stay.
	for s := int64(2 * sectorSize); s+sectorSize <= end; s += sectorSize {
		path, torn, kept := blankSector(t, filepath.Base(last), data, offs, end, s)
		cfg := testConfig(t, filepath.Dir(path))
		var logs bytes.Buffer
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		reopenHas(t, cfg, kept)
		// The records whole after the blank sector go with the torn one
		// (nothing tells a torn write from a sector zeroed later): the
		// warning counts them, and the bytes cut off are kept beside.
		whole := 0
		for _, off := range offs {
			if off >= s+sectorSize {
				whole++
			}
		}
		cut := fmt.Sprintf("%s.cut-%d", path, offs[kept])
		want := fmt.Sprintf("level=WARN msg=\"wal: torn last record truncated (a write cut by a crash or power loss)\" file=%s offset=%d", path, offs[kept])
		if whole > 0 {
			want2 := fmt.Sprintf("whole_records_after=%d first_whole_record=%d kept_in=%s", whole, n-whole+1, cut)
			if !strings.Contains(logs.String(), want2) {
				t.Fatalf("sector at %d blanked: log %q lacks %q", s, logs.String(), want2)
			}
			if b, err := os.ReadFile(cut); err != nil || !bytes.Equal(b, torn[offs[kept]:]) {
				t.Fatalf("sector at %d blanked: %s holds %d bytes (%v), want the %d cut off", s, cut, len(b), err, len(torn)-int(offs[kept]))
			}
		} else if _, err := os.Stat(cut); err == nil {
			t.Fatalf("sector at %d blanked, no whole record after it: %s kept", s, cut)
		}
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("sector at %d blanked: log %q lacks %q", s, logs.String(), want)
		}
	}

	// A zero frame header with data after it in its sector is damage.
	mid := offs[n/2]
	if mid%sectorSize > sectorSize-2*frameHeader {
		mid = offs[n/2+1]
	}
	bad := bytes.Clone(data)
	clear(bad[mid : mid+frameHeader])
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(last)), bad, 0o640); err != nil {
		t.Fatal(err)
	}
	var ce *CorruptError
	if _, err := Open(testConfig(t, dir)); !errors.As(err, &ce) || ce.Offset != mid || !strings.Contains(ce.Reason, "length 0") {
		t.Fatalf("zero header at %d, data after it: Open = %v, want a *CorruptError there", mid, err)
	}

	// A blank sector in a segment that is not the last is damage.
	dir = t.TempDir()
	cfg := testConfig(t, dir)
	cfg.SegmentSize = 4096
	writeLog(t, cfg, 400)
	segs := segments(t, dir)
	first, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	clear(first[2*sectorSize : 3*sectorSize])
	if err := os.WriteFile(segs[0], first, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(cfg); !errors.As(err, &ce) || ce.File != segs[0] {
		t.Fatalf("blank sector in the first of %d segments: Open = %v, want a *CorruptError naming it", len(segs), err)
	}
}

// TestSecondCutAtTheSameOffsetKeepsTheFirst: the bytes a blank sector's
// cut takes off are kept for the operator (README, "Damage, a full
// disk"). A later start that cuts the segment at the same offset again (a
// sector that went blank twice: a failing disk) keeps its bytes under a
// name of its own: the first cut's file is never overwritten, and the
// warning names the file that holds this cut's bytes.
func TestSecondCutAtTheSameOffsetKeepsTheFirst(t *testing.T) {
	src := t.TempDir()
	last := writeLog(t, testConfig(t, src), 120)
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	end, offs := framesEnd(t, data)
	s := int64(2 * sectorSize)
	if end < s+2*sectorSize {
		t.Fatalf("segment of %d bytes: too short for the test", end)
	}
	path, torn, at := blankSector(t, filepath.Base(last), data, offs, end, s) // at: the first frame it tears
	dir := filepath.Dir(path)
	first := fmt.Sprintf("%s.cut-%d", path, offs[at])
	earlier := []byte("the bytes an earlier start cut off here")
	if err := os.WriteFile(first, earlier, 0o640); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, dir)
	var logs bytes.Buffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	reopenHas(t, cfg, at)
	if b, err := os.ReadFile(first); err != nil || !bytes.Equal(b, earlier) {
		t.Fatalf("%s after a second cut at its offset: %d bytes (%v), want the earlier cut's %d (overwritten)", first, len(b), err, len(earlier))
	}
	second := first + ".2"
	if b, err := os.ReadFile(second); err != nil || !bytes.Equal(b, torn[offs[at]:]) {
		t.Fatalf("%s holds %d bytes (%v), want the %d this cut took off", second, len(b), err, len(torn)-int(offs[at]))
	}
	if want := "kept_in=" + second; !strings.Contains(logs.String(), want) {
		t.Fatalf("log %q lacks %q", logs.String(), want)
	}
}
