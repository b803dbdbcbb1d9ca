package wal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// The tests that mount file systems (root, as in CI).

// TestReadOnlyDirRefused uses a read-only tmpfs when root (permission bits
// do not stop root), a directory without write permission otherwise.
func TestReadOnlyDirRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_RDONLY, "size=64k"); err != nil {
			t.Fatalf("mount a read-only tmpfs on %s: %v", dir, err)
		}
		t.Cleanup(func() {
			if err := syscall.Unmount(dir, 0); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		})
	} else if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Join(dir, "sub")} {
		_, err := Open(testConfig(t, d))
		if !errors.Is(err, ErrNotWritable) || !strings.Contains(err.Error(), "data_dir "+d+":") {
			t.Fatalf("Open(%s) = %v, want ErrNotWritable naming data_dir %s", d, err, d)
		}
	}
}

// TestFullDisk fills a real (tmpfs) file system: the log refuses changes
// while it is full, keeps every record it took, and resumes by itself
// when space is freed.
func TestFullDisk(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=256k"); err != nil {
		t.Fatalf("mount a 256k tmpfs on %s (run as root, as CI does): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 64<<10), 0o640); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, filepath.Join(dir, "log"))
	cfg.Sync = SyncAlways
	cfg.SegmentSize = 1 << 20 // larger than the disk: no cut
	health := healthEvents(&cfg)
	l := mustOpen(t, cfg)
	t.Cleanup(func() { l.Close() })
	payload := make([]byte, 1000)
	var pending uint64
	for i := 1; ; i++ {
		if i > 1000 {
			t.Fatal("1 MB written on a 256k file system without an error")
		}
		idx, err := l.Append(payload)
		if err != nil {
			t.Fatalf("Append %d before any failure: %v", i, err)
		}
		if err := l.Wait(idx); err != nil {
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("Wait on a full disk = %v, want ErrUnavailable (no space left)", err)
			}
			pending = idx
			break
		}
	}
	expectHealth(t, health, true)
	if _, err := l.Append(payload); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Append on a full disk = %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	expectHealth(t, health, false)
	if err := l.Wait(pending); err != nil {
		t.Fatalf("Wait after space was freed = %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	cfg.OnHealth = nil
	l2 := mustOpen(t, cfg)
	defer l2.Close()
	n := uint64(0)
	if err := l2.Replay(1, func(i uint64, r []byte) error {
		n++
		if len(r) != len(payload) {
			t.Errorf("record %d has %d bytes", i, len(r))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != pending {
		t.Fatalf("after the full disk the log holds %d records, want %d", n, pending)
	}
}

// TestZerosAheadLeaveTheLastSpace: on a file system with less free space
// than Config.Preallocate, the zeros written ahead (fsync: always) take
// none of it, so that the files beside the log (baton's token
// high-water mark) can still be written. They took all of it: the log
// wrote on into them while every grant was refused for the high-water
// mark, also once space was freed (the next fill took it again).
func TestZerosAheadLeaveTheLastSpace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=512k"); err != nil {
		t.Fatalf("mount a 512k tmpfs on %s (run as root, as CI does): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	cfg := testConfig(t, filepath.Join(dir, "log"))
	cfg.Sync = SyncAlways
	cfg.Preallocate = 1 << 20 // more than the disk holds
	cfg.SegmentSize = 4 << 20 // no cut
	l := mustOpen(t, cfg)
	t.Cleanup(func() { l.Close() })
	for i := range 20 {
		idx, err := l.Append(make([]byte, 100))
		if err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
		if err := l.Wait(idx); err != nil {
			t.Fatalf("Wait %d on a disk with room for the record: %v", i, err)
		}
		if err := os.WriteFile(filepath.Join(dir, "beside"), make([]byte, 8<<10), 0o640); err != nil {
			t.Fatalf("after record %d the log left no room beside it: %v", i, err)
		}
	}
}
