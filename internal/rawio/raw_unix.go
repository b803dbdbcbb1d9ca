//go:build unix && (!linux || race)

package rawio

import "syscall"

// Read is syscall.Read (raw_linux.go's is a raw system call), with its
// results: the bytes read, or a syscall.Errno such as EAGAIN.
func Read(fd int, p []byte) (int, error) { return syscall.Read(fd, p) }

// Write is syscall.Write (raw_linux.go's is a raw system call), with its
// results: the bytes written, or a syscall.Errno such as EAGAIN.
func Write(fd int, p []byte) (int, error) { return syscall.Write(fd, p) }

// peek is recv(2) of p on fd with MSG_PEEK|MSG_DONTWAIT (raw_linux.go's
// is a raw system call): the bytes there, or a syscall.Errno such as
// EAGAIN.
func peek(fd uintptr, p []byte) (int, error) {
	n, _, err := syscall.Recvfrom(int(fd), p, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return n, err
}
