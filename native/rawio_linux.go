//go:build linux && !race

package native

import (
	"syscall"
	"unsafe"
)

// sysRead and sysWrite are read(2) and write(2) on a non-blocking socket
// (they never wait), made as raw system calls: the runtime's entersyscall
// would wake the Go scheduler's monitor thread (sysmon) from its deep
// sleep after every moment the process was idle, and set it polling every
// 20 µs again, a thread switch each time (see wal's Log.quick, which does
// the same for the log's writes). rawio_other.go has the ordinary calls,
// for the race detector's builds too (it tracks what they read and
// write).
func sysRead(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}

// sysWrite: see sysRead.
func sysWrite(fd int, p []byte) (int, error) {
	var ptr unsafe.Pointer
	if len(p) > 0 {
		ptr = unsafe.Pointer(&p[0])
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return -1, e
	}
	return int(n), nil
}
