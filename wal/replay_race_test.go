package wal

import (
	"testing"
)

// TestReplayAcrossACutDuringItsStart: a segment cut and a write into the
// new segment that land while Replay begins (between its reads of the
// last written index and of the segment list) were reported as "segment
// ends before the last written record": the list was read first, without
// the new segment, and the index after, in it.
func TestReplayAcrossACutDuringItsStart(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.SegmentSize = 4096
	l := mustOpen(t, cfg)
	defer l.Close()
	n := 0
	for range 5 {
		n++
		appendWait(t, l, rec(n))
	}
	segsNow := func() int {
		l.segMu.Lock()
		defer l.segMu.Unlock()
		return len(l.segs)
	}
	before := segsNow()
	replayHook = func() {
		replayHook = nil // once: Replay is not called again from here
		for segsNow() == before {
			n++
			appendWait(t, l, rec(n))
		}
		n++
		appendWait(t, l, rec(n)) // written into the new segment
	}
	defer func() { replayHook = nil }()
	got := 0
	if err := l.Replay(1, func(index uint64, b []byte) error {
		got++
		if string(b) != string(rec(int(index))) {
			t.Fatalf("record %d: %q; want %q", index, b, rec(int(index)))
		}
		return nil
	}); err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if got < 5 {
		t.Fatalf("replayed %d records; want at least the 5 written before it began", got)
	}
	if segsNow() != before+1 {
		t.Fatalf("%d segments; want %d: the test needs exactly one cut", segsNow(), before+1)
	}
}
