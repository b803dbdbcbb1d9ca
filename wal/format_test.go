package wal

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The bytes below were computed by an independent CRC-32C (bitwise,
// reflected polynomial 0x82F63B78) and CRC-8 (polynomial 0x07) from the
// layout in doc.go. A change here is a
// format change: bump formatVersion and keep a reader for the old one.
func TestGoldenBytes(t *testing.T) {
	golden := func(t *testing.T, what string, got []byte, want string) {
		t.Helper()
		if h := hex.EncodeToString(got); h != want {
			t.Errorf("%s:\n got %s\nwant %s", what, h, want)
		}
	}
	golden(t, "segment header, first record 7", encodeHeader(segmentMagic, 7),
		"4241544f4e57414c"+"01000000"+"00000000"+"0700000000000000"+"48c34038"+"00000000")
	golden(t, `frame of record 7, "grant"`, appendFrame(nil, 7, []byte("grant")),
		"050000"+"c0"+"aff0b255"+"6772616e74")
	// The same payload at another index has another checksum.
	golden(t, `frame of record 8, "grant"`, appendFrame(nil, 8, []byte("grant")),
		"050000"+"c0"+"4decf144"+"6772616e74")

	dir := t.TempDir()
	snap := snapshotOfState(t, dir)
	golden(t, `snapshot at 1, "state"`, snap,
		"4241544f4e534e50"+"01000000"+"00000000"+"0100000000000000"+"ce1ad651"+"00000000"+
			"7374617465"+"0500000000000000"+"0ebbf29f"+"42534e45")
	seg, err := os.ReadFile(filepath.Join(dir, "00000000000000000001.wal"))
	if err != nil {
		t.Fatal(err)
	}
	want := append(encodeHeader(segmentMagic, 1), appendFrame(nil, 1, []byte("grant"))...)
	if !bytes.Equal(seg, want) {
		t.Errorf("segment file:\n got %x\nwant %x", seg, want)
	}
}

// snapshotOfState makes a log in dir with one record ("grant") and a
// snapshot at 1 whose payload is "state", closes it, and returns the
// snapshot file's bytes.
func snapshotOfState(t *testing.T, dir string) []byte {
	t.Helper()
	l := mustOpen(t, testConfig(t, dir))
	appendWait(t, l, []byte("grant"))
	if err := l.SaveSnapshot(1, func(w io.Writer) error { _, err := w.Write([]byte("state")); return err }); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	snap, err := os.ReadFile(filepath.Join(dir, "00000000000000000001.snap"))
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// frames returns a segment's payload area split into frames: their start
// offsets in the file.
func frameOffsets(t testing.TB, data []byte) []int64 {
	t.Helper()
	var offs []int64
	off := int64(headerSize)
	for off < int64(len(data)) {
		offs = append(offs, off)
		off += frameHeader + int64(binary.LittleEndian.Uint32(data[off:])&0xffffff)
	}
	return offs
}

// writeLog makes a closed log of records 1..n in dir and returns the path
// of its last segment.
func writeLog(t *testing.T, cfg Config, n int) string {
	t.Helper()
	l := mustOpen(t, cfg)
	for i := 1; i <= n; i++ {
		appendWait(t, l, rec(i))
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, cfg.Dir)
	return segs[len(segs)-1]
}

// reopenHas opens cfg, checks it holds exactly records 1..n, that the
// next Append gets n+1, and closes it.
func reopenHas(t *testing.T, cfg Config, n int) {
	t.Helper()
	l := mustOpen(t, cfg)
	defer l.Close()
	checkRecords(t, replayAll(t, l, 1), 1, n)
	if i := appendWait(t, l, rec(n+1)); i != uint64(n+1) {
		t.Fatalf("next Append got %d, want %d", i, n+1)
	}
}

func TestTornTailAtEveryOffsetOfTheLastRecord(t *testing.T) {
	src := t.TempDir()
	const n = 20
	last := writeLog(t, testConfig(t, src), n)
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	offs := frameOffsets(t, data)
	start := offs[len(offs)-1]
	for cut := start; cut < int64(len(data)); cut++ {
		dir := t.TempDir()
		path := filepath.Join(dir, filepath.Base(last))
		if err := os.WriteFile(path, data[:cut], 0o640); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, dir)
		var logs bytes.Buffer
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		reopenHas(t, cfg, n-1)
		if cut > start { // cut == start leaves no trace of the record
			warn := fmt.Sprintf("level=WARN msg=\"wal: torn last record truncated (a write cut by a crash or power loss)\" file=%s offset=%d", path, start)
			if !strings.Contains(logs.String(), warn) {
				t.Fatalf("cut at %d: log %q lacks %q", cut, logs.String(), warn)
			}
		}
	}

	// A whole last frame with a bad checksum whose end is zeros, and only
	// zeros after it, is a torn write too (the file system extended the
	// file, the end of the data did not land).
	dir := t.TempDir()
	torn := bytes.Clone(data)
	clear(torn[len(torn)-3:])
	torn = append(torn, make([]byte, 300)...)
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(last)), torn, 0o640); err != nil {
		t.Fatal(err)
	}
	reopenHas(t, testConfig(t, dir), n-1)

	// So are zeros after the last good frame.
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(last)), append(bytes.Clone(data), make([]byte, 4096)...), 0o640); err != nil {
		t.Fatal(err)
	}
	reopenHas(t, testConfig(t, dir), n)
}

// A byte flipped in the last record, written whole (its last byte is not
// a zero), is damage even when only zeros follow it (written ahead): a
// crash never leaves it, and cutting it off as a torn write would start
// the node without a change it had answered (a grant, silently lost).
func TestFlippedByteInTheLastRecordIsCorruption(t *testing.T) {
	src := t.TempDir()
	const n = 20
	last := writeLog(t, testConfig(t, src), n)
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	offs := frameOffsets(t, data)
	start := offs[len(offs)-1]
	for _, ahead := range []int{0, 300} {
		for _, at := range []int64{start + 5 /* checksum */, start + frameHeader + 3 /* payload */, int64(len(data)) - 1 /* its last byte */} {
			dir := t.TempDir()
			path := filepath.Join(dir, filepath.Base(last))
			flipped := bytes.Clone(data)
			flipped[at] ^= 0x01
			if flipped[len(flipped)-1] == 0 {
				t.Fatalf("byte %d: the test needs a last byte that is not a zero", at)
			}
			flipped = append(flipped, make([]byte, ahead)...)
			if err := os.WriteFile(path, flipped, 0o640); err != nil {
				t.Fatal(err)
			}
			_, err := Open(testConfig(t, dir))
			var ce *CorruptError
			if !errors.As(err, &ce) {
				t.Fatalf("byte %d flipped, %d zeros after: Open = %v, want a *CorruptError", at, ahead, err)
			}
			if ce.File != path || ce.Offset != start || ce.Index != n {
				t.Fatalf("CorruptError names %s offset %d record %d, want %s offset %d record %d",
					ce.File, ce.Offset, ce.Index, path, start, n)
			}
			if now, _ := os.ReadFile(path); !bytes.Equal(now, flipped) {
				t.Fatal("a refused Open changed the segment")
			}
		}
	}
}

func TestTornTailAtRandomOffsets(t *testing.T) {
	src := t.TempDir()
	const n = 300
	last := writeLog(t, testConfig(t, src), n)
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	offs := frameOffsets(t, data)
	// Deterministic spread over the whole file: cut c keeps the frames
	// that end at or before c.
	for k := 0; k < 40; k++ {
		cut := int64(headerSize) + int64(k*7919)%(int64(len(data))-headerSize)
		kept := 0
		for i, off := range offs {
			end := int64(len(data))
			if i+1 < len(offs) {
				end = offs[i+1]
			}
			if off < cut && end <= cut {
				kept = i + 1
			}
		}
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(last)), data[:cut], 0o640); err != nil {
			t.Fatal(err)
		}
		reopenHas(t, testConfig(t, dir), kept)
	}
}

func TestFlippedByteInAMiddleRecordIsCorruption(t *testing.T) {
	src := t.TempDir()
	const n = 50
	last := writeLog(t, testConfig(t, src), n)
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	offs := frameOffsets(t, data)
	const bad = 20 // record 20 is damaged
	for _, at := range []int64{offs[bad-1] + 2 /* length */, offs[bad-1] + 5 /* checksum */, offs[bad-1] + frameHeader + 3 /* payload */} {
		dir := t.TempDir()
		path := filepath.Join(dir, filepath.Base(last))
		flipped := bytes.Clone(data)
		flipped[at] ^= 0x01
		if err := os.WriteFile(path, flipped, 0o640); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig(t, dir)
		_, err := Open(cfg)
		var ce *CorruptError
		if !errors.As(err, &ce) {
			t.Fatalf("byte %d flipped: Open = %v, want a *CorruptError", at, err)
		}
		if ce.File != path || ce.Offset != offs[bad-1] || ce.Index != bad {
			t.Fatalf("CorruptError names %s offset %d record %d, want %s offset %d record %d",
				ce.File, ce.Offset, ce.Index, path, offs[bad-1], bad)
		}
		for _, part := range []string{path, "offset", "Config.Repair"} {
			if !bytes.Contains([]byte(err.Error()), []byte(part)) {
				t.Fatalf("message %q does not name %q", err, part)
			}
		}
		// Nothing changed on the disk.
		if now, _ := os.ReadFile(path); !bytes.Equal(now, flipped) {
			t.Fatal("a refused Open changed the segment")
		}
		// Repair keeps the records before the damage, and says what it dropped.
		cfg.Repair = true
		var logs bytes.Buffer
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		reopenHas(t, cfg, bad-1)
		warn := fmt.Sprintf("file=%s offset=%d first_dropped_record=%d", path, offs[bad-1], bad)
		if !strings.Contains(logs.String(), "level=WARN msg=\"wal: repair") || !strings.Contains(logs.String(), warn) {
			t.Fatalf("repair log %q lacks a warning with %q", logs.String(), warn)
		}
	}
}

func TestDamageInAnEarlierSegment(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.SegmentSize = 4096
	writeLog(t, cfg, 400)
	segs := segments(t, dir)
	if len(segs) < 3 {
		t.Fatalf("%d segments, want at least 3", len(segs))
	}
	data, err := os.ReadFile(segs[1])
	if err != nil {
		t.Fatal(err)
	}
	first, _ := parseName(filepath.Base(segs[1]), segmentExt)
	offs := frameOffsets(t, data)
	data[offs[3]+frameHeader] ^= 0x80 // the fourth record of the second segment
	if err := os.WriteFile(segs[1], data, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err = Open(cfg)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.File != segs[1] || ce.Offset != offs[3] || ce.Index != first+3 {
		t.Fatalf("Open = %v, want damage in %s at %d (record %d)", err, segs[1], offs[3], first+3)
	}
	cfg.Repair = true
	reopenHas(t, cfg, int(first+2))
	for _, s := range segs[2:] {
		if _, err := os.Stat(s); !os.IsNotExist(err) {
			t.Fatalf("segment %s after the damage still there after repair (%v)", s, err)
		}
	}

	// A cut (torn) frame in a segment that is not the last is damage too.
	dir = t.TempDir()
	cfg = testConfig(t, dir)
	cfg.SegmentSize = 4096
	writeLog(t, cfg, 400)
	segs = segments(t, dir)
	st, _ := os.Stat(segs[0])
	if err := os.Truncate(segs[0], st.Size()-3); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(cfg); !errors.As(err, &ce) || ce.File != segs[0] {
		t.Fatalf("Open with a cut first segment = %v, want a *CorruptError naming it", err)
	}

	// A missing segment leaves a gap.
	dir = t.TempDir()
	cfg = testConfig(t, dir)
	cfg.SegmentSize = 4096
	writeLog(t, cfg, 400)
	segs = segments(t, dir)
	if err := os.Remove(segs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(cfg); !errors.As(err, &ce) || ce.File != segs[2] {
		t.Fatalf("Open with a segment missing = %v, want a *CorruptError naming %s", err, segs[2])
	}
	if err := os.Remove(segs[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(cfg); !errors.As(err, &ce) || ce.File != segs[2] || !bytes.Contains([]byte(ce.Reason), []byte("missing")) {
		t.Fatalf("Open with the first segments gone and no snapshot = %v, want records missing", err)
	}
}

// A damaged length that passes its check byte (one damage in 256) and
// runs past the end of the last segment is damage, not a torn tail: the
// whole records written after it are there, which a write cut by a crash
// cannot leave (what follows a torn frame's header is its own payload).
// It was cut off as a torn tail at Open, with every record after it.
func TestDamagedLengthPastTheEndIsCorruption(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(t, src)
	cfg.Preallocate = 0 // the file ends at the last record
	const n = 50
	last := writeLog(t, cfg, n)
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	offs := frameOffsets(t, data)
	const bad = 20
	at := offs[bad-1]
	damaged := bytes.Clone(data)
	long := len(data) // past the end of the file
	damaged[at], damaged[at+1], damaged[at+2] = byte(long), byte(long>>8), byte(long>>16)
	damaged[at+3] = crc8(damaged[at : at+3])
	dir := t.TempDir()
	path := filepath.Join(dir, filepath.Base(last))
	if err := os.WriteFile(path, damaged, 0o640); err != nil {
		t.Fatal(err)
	}
	_, err = Open(testConfig(t, dir))
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Offset != at || ce.Index != bad {
		t.Fatalf("Open with record %d's length damaged past the end = %v, want a *CorruptError at offset %d, record %d", bad, err, at, bad)
	}
	// The last record's length damaged the same way is a torn tail still:
	// nothing whole follows it.
	tail := bytes.Clone(data)
	at = offs[n-1]
	tail[at], tail[at+1], tail[at+2] = byte(long), byte(long>>8), byte(long>>16)
	tail[at+3] = crc8(tail[at : at+3])
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(last)), tail, 0o640); err != nil {
		t.Fatal(err)
	}
	reopenHas(t, testConfig(t, dir), n-1)
}
