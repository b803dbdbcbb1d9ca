package cluster

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"time"
)

// TestFramesGolden pins the replication stream's bytes (frames.go): a
// change here is a protocol change and needs a new streamMagic version.
func TestFramesGolden(t *testing.T) {
	frames := []frame{
		{kind: frameBegin, epoch: 3, lastToken: 300, stateToken: 299, resumeFrom: 42},
		{kind: frameSnapshot, index: 41, data: []byte("dump")},
		{kind: frameRecord, index: 42, data: []byte{1, 1}},
		{kind: frameHeartbeat, epoch: 3, lastToken: 300, index: 42},
		{kind: frameMoved, epoch: 4, data: []byte("http://b")},
	}
	var b []byte
	for i := range frames {
		b = appendFrame(b, &frames[i])
	}
	const golden = "42" + "03" + "ac02" + "ab02" + "2a" + // B 3 300 299 42
		"53" + "29" + "04" + "64756d70" + // S 41 4 "dump"
		"52" + "2a" + "02" + "0101" + // R 42 2 01 01
		"48" + "03" + "ac02" + "2a" + // H 3 300 42
		"4d" + "04" + "08" + "687474703a2f2f62" // M 4 8 "http://b"
	if got := hex.EncodeToString(b); got != golden {
		t.Fatalf("frames encode to\n%s\nwant\n%s", got, golden)
	}
	r := bufio.NewReader(bytes.NewReader(b))
	for i, want := range frames {
		var f frame
		if err := readFrame(r, &f); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if f.kind != want.kind || f.epoch != want.epoch || f.lastToken != want.lastToken || f.stateToken != want.stateToken ||
			f.resumeFrom != want.resumeFrom || f.index != want.index || !bytes.Equal(f.data, want.data) {
			t.Fatalf("frame %d decodes to %+v, want %+v", i, f, want)
		}
	}
	var f frame
	if err := readFrame(r, &f); err != io.EOF {
		t.Fatalf("after the last frame: %v, want EOF", err)
	}
	for _, bad := range []string{"5a", "522a05", "4203"} {
		raw, _ := hex.DecodeString(bad)
		err := readFrame(bufio.NewReader(bytes.NewReader(raw)), &f)
		if err == nil || (!errors.Is(err, errFrame) && !errors.Is(err, io.ErrUnexpectedEOF)) {
			t.Errorf("readFrame(%s) = %v, want a frame error", bad, err)
		}
	}
}

// The tail: records by cursor, eviction by bytes, and the epoch marks
// that tell whether another log agrees with this one.
func TestTail(t *testing.T) {
	tl := newTail(10)
	tl.reset(4, mark{epoch: 1, by: "a"})
	if tl.agrees(3, mark{epoch: 1, by: "a"}) {
		t.Fatal("agrees below the tail's first record")
	}
	if !tl.agrees(4, mark{epoch: 1, by: "a"}) || tl.agrees(4, mark{epoch: 1, by: "b"}) {
		t.Fatal("agrees at the reset index: wrong")
	}
	tl.add(5, []byte{1, 2, 3, 4})
	tl.add(6, []byte{1, 13, 0x68, 2}) // a RecEpoch: epoch 2 (tag 13 uvarint: 0x68)
	tl.add(7, []byte{1, 2, 3, 4})
	last, m := tl.position()
	if last != 7 || m.epoch != 2 || m.index != 6 {
		t.Fatalf("position %d %+v, want 7 at epoch 2 (mark at 6)", last, m)
	}
	if !tl.agrees(5, mark{epoch: 1, by: "a"}) || tl.agrees(6, mark{epoch: 1, by: "a"}) || tl.agrees(8, mark{epoch: 2}) {
		t.Fatal("agrees across the epoch mark: wrong")
	}
	recs, _, ok := tl.read(6, 1, nil)
	if !ok || len(recs) != 1 || recs[0].index != 6 {
		t.Fatalf("read(6) = %v %v", recs, ok)
	}
	tl.add(8, []byte{1, 2, 3, 4, 5, 6}) // 18 bytes held: 5 and 6 go
	if _, _, ok := tl.read(6, 100, nil); ok {
		t.Fatal("read(6) after eviction: ok")
	}
	if recs, _, ok := tl.read(7, 100, nil); !ok || len(recs) != 2 {
		t.Fatalf("read(7) = %v %v", recs, ok)
	}
	if !tl.agrees(7, mark{epoch: 2}) || tl.agrees(7, mark{epoch: 1, by: "a"}) {
		t.Fatal("the evicted mark is not the one in force before the tail")
	}
	recs, more, ok := tl.read(9, 100, nil)
	if !ok || len(recs) != 0 {
		t.Fatalf("read(9) = %v %v", recs, ok)
	}
	tl.add(9, []byte{1, 2})
	select {
	case <-more:
	default:
		t.Fatal("a reader waiting at the end was not woken")
	}
}

// The tail keeps its own copy of each record (the log's buffer is reused
// after the tap returns), across arenas, and a record read stays as it
// was while more are added.
func TestTailKeepsCopies(t *testing.T) {
	tl := newTail(1 << 30)
	tl.reset(0, mark{})
	buf := make([]byte, 300)
	want := func(i int) []byte {
		b := make([]byte, 1+i%300)
		for k := range b {
			b[k] = byte(i + k)
		}
		return b
	}
	n := 3 * tailArena / 150 // about three arenas' worth
	var first []tailRec
	for i := 1; i <= n; i++ {
		rec := buf[:copy(buf, want(i))]
		tl.add(uint64(i), rec)
		for k := range buf {
			buf[k] = 0xff // the log reuses its buffer
		}
		if i == 1 {
			first, _, _ = tl.read(1, 1, nil)
		}
	}
	recs, _, ok := tl.read(1, 1<<30, nil)
	if !ok || len(recs) != n {
		t.Fatalf("read(1): %d records, ok %v; want %d", len(recs), ok, n)
	}
	for i, r := range recs {
		if r.index != uint64(i+1) || !bytes.Equal(r.rec, want(i+1)) {
			t.Fatalf("record %d: index %d, %d bytes %x...; want %x...", i+1, r.index, len(r.rec), r.rec[:min(4, len(r.rec))], want(i + 1)[:min(4, len(r.rec))])
		}
	}
	if len(first) != 1 || !bytes.Equal(first[0].rec, want(1)) {
		t.Fatalf("the first record read before the others were added changed: %x", first[0].rec)
	}
}

// The tail's records live in blocks of tailBlock: evictions and additions
// across many blocks keep every held record in order, at its index, and
// drop the blocks that nothing holds any more.
func TestTailAcrossBlocks(t *testing.T) {
	const size, held = 8, 2*tailBlock + 100 // records of 8 bytes, about 2.1 blocks held
	tl := newTail(held * size)
	tl.reset(0, mark{})
	rec := func(i int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(i)) }
	n := 5*tailBlock + 17
	for i := 1; i <= n; i++ {
		tl.add(uint64(i), rec(i))
	}
	first := uint64(n - held + 1)
	if _, _, ok := tl.read(first-1, 1<<30, nil); ok {
		t.Fatalf("read(%d), evicted: ok", first-1)
	}
	recs, _, ok := tl.read(first, 1<<30, nil)
	if !ok || len(recs) != held {
		t.Fatalf("read(%d): %d records, ok %v; want %d", first, len(recs), ok, held)
	}
	for k, r := range recs {
		if want := first + uint64(k); r.index != want || !bytes.Equal(r.rec, rec(int(want))) {
			t.Fatalf("held record %d: index %d %x, want %d %x", k, r.index, r.rec, want, rec(int(want)))
		}
	}
	if at, ok := tl.appendedAt(uint64(n)); !ok || at != recs[held-1].at {
		t.Fatalf("appendedAt(%d) = %d %v, want %d", n, at, ok, recs[held-1].at)
	}
	if len(tl.blocks) > held/tailBlock+2 {
		t.Fatalf("%d blocks for %d records held", len(tl.blocks), held)
	}
}

// A record the tail no longer holds (a tail smaller than the records the
// log has yet to write) but the log has not written is pending, not to be
// read from the log: its segments do not hold it yet, and a stream that
// went there found nothing and looped at once, again and again, without
// a heartbeat and deaf to its end (a handoff, Close, the standby gone)
// for as long as the log did not write (a stalled or full disk).
func TestTailEvictedButNotWrittenIsPending(t *testing.T) {
	tl := newTail(1)
	tl.reset(0, mark{})
	tl.add(1, []byte{1, 2})
	tl.add(2, []byte{1, 2}) // 1 is evicted, neither is written
	recs, more, pending, ok := tl.readWritten(1, 100, nil)
	if !ok || !pending || len(recs) != 0 {
		t.Fatalf("readWritten(1) before the log wrote 1: %d records, pending %v, ok %v; want none, pending, ok", len(recs), pending, ok)
	}
	tl.wrote(2)
	select {
	case <-more:
	default:
		t.Fatal("a stream waiting for the log's write was not woken by it")
	}
	if _, _, _, ok := tl.readWritten(1, 100, nil); ok {
		t.Fatal("readWritten(1) once written but evicted: ok (it is the log's segments' to read)")
	}
	if recs, _, _, ok := tl.readWritten(2, 100, nil); !ok || len(recs) != 1 || recs[0].index != 2 {
		t.Fatalf("readWritten(2) = %v %v", recs, ok)
	}
}

// An idle stream (nothing left to send) is woken once per change: by the
// log's write of its record, not by its append as well (a goroutine
// woken for nothing, each change, on the active under sync_standbys);
// a record nobody has written streamLinger after its append still wakes
// it (the lease's end, a waiter's place: nobody waits for their write,
// and the stream asks the log to write them).
func TestTailIdleStreamWokenByTheWriteNotTheAppend(t *testing.T) {
	tl := newTail(1 << 20)
	defer tl.stop()
	tl.reset(0, mark{})
	recs, more, pending, ok := tl.readWritten(1, 100, nil)
	if !ok || pending || len(recs) != 0 {
		t.Fatalf("readWritten(1) on an empty tail: %d records, pending %v, ok %v", len(recs), pending, ok)
	}
	tl.add(1, []byte{1, 2})
	select {
	case <-more:
		t.Fatal("the append woke the idle stream before the log wrote the record")
	default:
	}
	tl.wrote(1)
	select {
	case <-more:
	default:
		t.Fatal("the log's write did not wake the idle stream")
	}
	if recs, _, _, ok := tl.readWritten(1, 100, nil); !ok || len(recs) != 1 || recs[0].index != 1 {
		t.Fatalf("readWritten(1) once written = %v %v", recs, ok)
	}

	// Appended, never written: woken streamLinger later.
	_, more, _, _ = tl.readWritten(2, 100, nil)
	start := time.Now()
	tl.add(2, []byte{1, 2})
	select {
	case <-more:
		if d := time.Since(start); d < streamLinger {
			t.Fatalf("woken %v after the append, before streamLinger (%v)", d, streamLinger)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a record appended and never written did not wake the idle stream")
	}
	if recs, _, pending, ok := tl.readWritten(2, 100, nil); !ok || !pending || len(recs) != 0 {
		t.Fatalf("readWritten(2) before the log wrote it: %d records, pending %v, ok %v; want none, pending", len(recs), pending, ok)
	}
}
