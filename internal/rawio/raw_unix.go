//go:build unix && (!linux || race)

package rawio

import "syscall"

// Read is syscall.Read (raw_linux.go's is a raw system call), with its
// results: the bytes read, or a syscall.Errno such as EAGAIN.
func Read(fd int, p []byte) (int, error) { return syscall.Read(fd, p) }

// Write is syscall.Write (raw_linux.go's is a raw system call), with its
// results: the bytes written, or a syscall.Errno such as EAGAIN.
func Write(fd int, p []byte) (int, error) { return syscall.Write(fd, p) }
