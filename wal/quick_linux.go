//go:build linux && !race

package wal

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// quickFile writes a segment's records with pwrite(2) made as a raw
// system call (see Log.quick): the runtime's entersyscall is skipped,
// which would otherwise wake the Go scheduler's monitor thread (sysmon)
// from its deep sleep after every moment the process was idle and set it
// polling every 20 µs again. Its raw connection and write function are
// made once per file. Only the log's leader uses it (one at a time).
type quickFile struct {
	rc    syscall.RawConn
	write func(fd uintptr) // q.pwrite, bound once
	b     []byte           // the bytes to write, then nil
	off   int64            // where b goes in the file
	n     int              // bytes written
	errno syscall.Errno    // the write's error
}

// newQuick returns f's quickFile, nil if f has no raw connection.
func newQuick(f *os.File) *quickFile {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	q := &quickFile{rc: rc}
	q.write = q.pwrite
	return q
}

// writeAt is f.WriteAt(b, off), with its results, through raw system
// calls.
func (q *quickFile) writeAt(f *os.File, b []byte, off int64) (int, error) {
	q.b, q.off, q.n, q.errno = b, off, 0, 0
	err := q.rc.Control(q.write)
	n, e := q.n, q.errno
	q.b = nil
	switch {
	case err != nil:
		// Control fails only for a closed file (as WriteAt says it).
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: os.ErrClosed}
	case e != 0:
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: e}
	case n < len(b):
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: io.ErrShortWrite}
	}
	return n, nil
}

func (q *quickFile) pwrite(fd uintptr) {
	for q.n < len(q.b) {
		r, _, e := syscall.RawSyscall6(syscall.SYS_PWRITE64, fd, uintptr(unsafe.Pointer(&q.b[q.n])), uintptr(len(q.b)-q.n), uintptr(q.off+int64(q.n)), 0, 0)
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0:
			q.errno = e
			return
		case r == 0:
			return // writeAt reports the short write
		}
		q.n += int(r)
	}
}
