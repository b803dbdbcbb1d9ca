package wal

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/baton-io/baton/internal/durable"
)

// File is what the log needs of a file it writes. *os.File has all of it;
// the log's own files make Sync an fdatasync(2). Config.WrapFile lets
// tests put a File in front of it that fails on demand. Implementations
// must allow WriteAt and Sync from two goroutines at once.
type File interface {
	io.Writer
	io.WriterAt
	// Sync flushes the file's data to the disk (fdatasync).
	Sync() error
	// Truncate sets the file's size to size bytes.
	Truncate(size int64) error
	// Close releases the file; no method is called after it.
	Close() error
}

// osFile is a File whose Sync is fdatasync(2): the data and the size, not
// the times. A segment's (newOSFile) can also write as a raw system call
// (writeAtQuick).
type osFile struct {
	*os.File
	q *quickFile // nil: writeAtQuick is WriteAt
}

// newOSFile returns the osFile of a segment f, with its quickFile.
func newOSFile(f *os.File) osFile { return osFile{f, newQuick(f)} }

func (f osFile) Sync() error { return fdatasync(f.File) }

// quickWriter is a File that can write without the runtime's system call
// bookkeeping (see Log.quick): a segment's osFile, not a Config.WrapFile
// wrapper.
type quickWriter interface {
	writeAtQuick(b []byte, off int64) (int, error)
}

// writeAtQuick is WriteAt for the log's leader, made as raw system calls
// where quick_linux.go is built. Only one goroutine at a time may call it.
func (f osFile) writeAtQuick(b []byte, off int64) (int, error) {
	if f.q == nil {
		return f.WriteAt(b, off)
	}
	return f.q.writeAt(f.File, b, off)
}

const lockName = "LOCK"

// dirLock is an open log's hold on its directory: the flock(2) of the
// directory itself and of its LOCK file (which holds the pid).
type dirLock struct{ dir, file *os.File }

// Close releases both locks.
func (d dirLock) Close() error {
	err := d.file.Close()
	if d.dir == nil {
		return err
	}
	if derr := d.dir.Close(); err == nil {
		err = derr
	}
	return err
}

// lockDir creates dir if needed and takes the exclusive flock(2) of the
// directory and of its lock file, writing this process's id into the
// latter. The locks last until Close (or until the process dies). The
// directory's own lock holds when the LOCK file is removed while the log
// is open (a cleaner of old files, an operator): a second node would
// otherwise create a new one, lock it and write the same log.
func lockDir(dir string) (dirLock, error) {
	if err := platformError(); err != nil {
		return dirLock{}, err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return dirLock{}, fmt.Errorf("%w: data_dir %s: %v", ErrNotWritable, dir, err)
	}
	path := filepath.Join(dir, lockName)
	busyErr := func() error {
		holder, what := "", path
		b, rerr := os.ReadFile(path)
		switch {
		case rerr == nil && len(strings.TrimSpace(string(b))) > 0:
			holder = " (pid " + strings.TrimSpace(string(b)) + ")"
		case errors.Is(rerr, fs.ErrNotExist):
			what = "the lock of the directory (its " + lockName + " file was removed)"
		}
		return fmt.Errorf("%w: data_dir %s: another process%s holds %s", ErrLocked, dir, holder, what)
	}
	d, err := os.Open(dir)
	if err != nil {
		return dirLock{}, fmt.Errorf("%w: data_dir %s: %v", ErrNotWritable, dir, err)
	}
	if busy, err := lockFile(d); busy {
		d.Close()
		return dirLock{}, busyErr()
	} else if err != nil {
		// A file system that cannot lock a directory (NFS emulates
		// flock(2) by fcntl locks, which want a file open for writing):
		// the LOCK file's lock alone, as before.
		d.Close()
		d = nil
	}
	unlockDir := func() {
		if d != nil {
			d.Close()
		}
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
	if err != nil {
		unlockDir()
		return dirLock{}, fmt.Errorf("%w: data_dir %s: %v", ErrNotWritable, dir, err)
	}
	if busy, err := lockFile(f); err != nil {
		// Held by a build that locks the LOCK file alone.
		f.Close()
		unlockDir()
		if busy {
			return dirLock{}, busyErr()
		}
		return dirLock{}, fmt.Errorf("wal: data_dir %s: lock %s: %w", dir, path, err)
	}
	// Writing the pid proves the directory writable, on a read-only file
	// system as well (root ignores permission bits, not EROFS).
	pid := []byte(strconv.Itoa(os.Getpid()) + "\n")
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt(pid, 0)
	}
	if err == nil {
		err = osFile{File: f}.Sync()
	}
	if err != nil {
		f.Close()
		unlockDir()
		return dirLock{}, fmt.Errorf("%w: data_dir %s: %v", ErrNotWritable, dir, err)
	}
	return dirLock{d, f}, nil
}

// syncDir fsyncs a directory, so that files created, renamed or removed
// in it stay so after a power loss.
var syncDir = durable.SyncDir

// Names: the first index (segments) or the index covered (snapshots), in
// 20 decimal digits so that names sort as numbers.
const (
	segmentExt  = ".wal"
	snapshotExt = ".snap"
	tmpExt      = ".tmp"
)

func fileName(index uint64, ext string) string { return fmt.Sprintf("%020d%s", index, ext) }

// parseName returns the index in a segment or snapshot name with extension ext.
func parseName(name, ext string) (uint64, bool) {
	if len(name) != 20+len(ext) || !strings.HasSuffix(name, ext) {
		return 0, false
	}
	n, err := strconv.ParseUint(name[:20], 10, 64)
	return n, err == nil
}
