package main

import (
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/wal"
)

// A snapshot that fails for want of space is not tried again at every
// check, but once data_dir has room for it. Each attempt filled the disk
// for the log beside it until it failed and its file was removed: under
// load the log failed at every check (1 s) for half a second, 503s for 17%
// of the grants of 4 clients on a 22 MiB tmpfs, and no attempt could
// succeed while the log kept growing.
func TestSnapshotOnAFullDiskWaitsForRoom(t *testing.T) {
	leakCheck(t)
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	mount(t, dir, 0, "size=1m")
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 640<<10), 0o640); err != nil {
		t.Fatal(err)
	}
	cfg := wal.DefaultConfig(filepath.Join(dir, "log"))
	cfg.Logger = quietLog()
	l, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var dumps atomic.Int32
	state := make([]byte, 512<<10) // more than the 384 KiB left, less than the disk
	dump := func(w io.Writer) error {
		dumps.Add(1)
		_, err := w.Write(state)
		return err
	}
	s := startSnapshotter(l, dump, quietLog(), 1, time.Millisecond, snapshotStart{})
	defer s.close()
	if _, err := l.Append([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); dumps.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("no snapshot tried within 20s")
		}
	}
	time.Sleep(300 * time.Millisecond) // 300 checks
	if n := dumps.Load(); n > 2 {
		t.Fatalf("%d dumps of the state within 300 checks with no more room on the disk; want the failed snapshot's and at most one to measure it", n)
	}
	if _, _, err := l.LoadSnapshot(); err == nil {
		t.Fatal("a snapshot was saved on a disk without room for it")
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
		if idx, r, err := l.LoadSnapshot(); err == nil {
			r.Close()
			if idx != 1 {
				t.Fatalf("snapshot at %d, want 1", idx)
			}
			break
		}
		if time.Now().After(end) {
			t.Fatal("no snapshot saved within 20s of the room freed")
		}
	}
}
