package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
)

// segmentFramesEnd is the end of the log's frames in a segment's bytes: the
// offset of the first zero length (or of the file's end).
func segmentFramesEnd(b []byte) int {
	off := 32 // the segment header
	for off+8 <= len(b) {
		n := int(b[off]) | int(b[off+1])<<8 | int(b[off+2])<<16
		if n == 0 {
			break
		}
		off += 8 + n
	}
	return off
}

// TestTornWriteAcrossASectorStarts: after a power loss, a node whose log
// ends in a write that was not fsynced, whose first frame header begins 4
// bytes before a sector boundary and whose first sector never reached the
// disk (it reads as at the last fsync: the zeros written ahead), starts
// with every lock granted before that write, as after any torn write; it
// refused to start (exit 2, "frame of length 0") and wanted --repair-log.
func TestTornWriteAcrossASectorStarts(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	cfg, err := loadConfig([]string{"--listen", "127.0.0.1:0", "--data-dir", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	n, err := OpenNode(cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	acquire := func(key string) {
		t.Helper()
		if _, err := n.Engine().Acquire(context.Background(), engine.AcquireRequest{Key: key, Lease: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "*.wal"))
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	end := func() int {
		t.Helper()
		b, err := os.ReadFile(segs[0])
		if err != nil {
			t.Fatal(err)
		}
		return segmentFramesEnd(b)
	}
	// Grants with keys whose lengths bring the end of the log 4 bytes
	// before a sector boundary: the next frame's header straddles it.
	const want = 512 - 4
	var kept []string
	overhead := 0 // what a grant's frame adds to its key's length
	for i := 0; end()%512 != want; i++ {
		if i == 30 {
			t.Fatalf("the log's end is at %d, never %d modulo 512", end(), want)
		}
		gap := (want - end()%512 + 512) % 512
		size := gap - overhead // the key length that ends the frame there
		if overhead == 0 || size < 8 || size > engine.MaxKeyBytes {
			size = 100 + i // moves the end on; measures the overhead
		}
		key := fmt.Sprintf("k%03d-%s", i, strings.Repeat("x", size-5))
		from := end()
		acquire(key)
		kept = append(kept, key)
		overhead = end() - from - len(key)
	}
	torn := end()
	acquire("lost-1")
	acquire("lost-2")
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// The power loss: the sector the frame of lost-1 begins in as at the
	// fsync before it (zeros from the frame on), every later one written.
	b, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	clear(b[torn : torn+4])
	if err := os.WriteFile(segs[0], b, 0o640); err != nil {
		t.Fatal(err)
	}
	var logBuf syncBuf
	cfg.Listen = "127.0.0.1:0"
	n2, err := OpenNode(cfg, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatalf("start after a torn write: %v (exit %d)", err, exitCode(err))
	}
	defer n2.Close()
	for _, key := range kept {
		if st, err := n2.Engine().Status(key); err != nil || st.Holder == nil {
			t.Fatalf("%s: %+v %v; granted before the torn write, must be held", key, st, err)
		}
	}
	if st, _ := n2.Engine().Status("lost-1"); st.Holder != nil {
		t.Fatalf("lost-1 held after its write was torn: %+v", st)
	}
	if !strings.Contains(logBuf.String(), "torn last record truncated") {
		t.Fatalf("no warning of the cut:\n%s", logBuf.String())
	}
}
