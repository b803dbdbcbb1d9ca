package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/baton-io/baton/wal"
)

// dirSize is the total size of the files in dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && !e.IsDir() {
			n += fi.Size()
		}
	}
	return n
}

// TestSnapshotsBoundTheLog: under a long history of changes to a small
// live state, background snapshots keep the directory bounded by the state
// (not the history), and the newest snapshot plus the records after it
// give back the live state.
func TestSnapshotsBoundTheLog(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	cfg := wal.DefaultConfig(dir)
	cfg.SegmentSize = 8 << 10
	cfg.Logger = quietLog()
	l, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The "state": the last value of each of 50 keys, a record per change.
	var mu sync.Mutex
	state := map[int]int{}
	dump := func(w io.Writer) error {
		mu.Lock()
		defer mu.Unlock()
		for k := range 50 {
			if _, err := fmt.Fprintf(w, "%d=%d\n", k, state[k]); err != nil {
				return err
			}
		}
		return nil
	}
	s := startSnapshotter(l, dump, quietLog(), 4<<10, 5*time.Millisecond)
	var maxSize int64
	const changes = 20000
	for i := range changes {
		mu.Lock()
		state[i%50] = i
		idx, err := l.Append(fmt.Appendf(nil, "%d=%d", i%50, i))
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Wait(idx); err != nil {
			t.Fatal(err)
		}
		if i%500 == 0 {
			maxSize = max(maxSize, dirSize(t, dir))
			time.Sleep(10 * time.Millisecond) // let the snapshotter look
		}
	}
	s.close()
	history := l.Stats().Bytes
	// Bound: a snapshot (~500 B), the log since it (at most about minBytes
	// and the records of one check), segments not yet wholly replaced (two
	// of 8 KiB), the lock file.
	if maxSize > 64<<10 || uint64(maxSize) > history/4 {
		t.Fatalf("the directory reached %d bytes for %d bytes of history", maxSize, history)
	}
	index, r, err := l.LoadSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	snap, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]int{}
	for _, line := range bytes.Split(bytes.TrimSpace(snap), []byte("\n")) {
		var k, v int
		if _, err := fmt.Sscanf(string(line), "%d=%d", &k, &v); err != nil {
			t.Fatal(err)
		}
		got[k] = v
	}
	if err := l.Replay(index+1, func(_ uint64, rec []byte) error {
		var k, v int
		_, err := fmt.Sscanf(string(rec), "%d=%d", &k, &v)
		got[k] = v
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(state) {
		t.Fatalf("snapshot %d + log: %v\nlive: %v", index, got, state)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if segs, _ := filepath.Glob(filepath.Join(dir, "*.wal")); len(segs) > 3 {
		t.Fatalf("%d segments left: %v", len(segs), segs)
	}
}
