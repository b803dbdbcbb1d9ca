//go:build unix && (!linux || race)

package native

import "syscall"

// sysRead is syscall.Read (rawio_linux.go's is a raw system call).
func sysRead(fd int, p []byte) (int, error) { return syscall.Read(fd, p) }

// sysWrite is syscall.Write (rawio_linux.go's is a raw system call).
func sysWrite(fd int, p []byte) (int, error) { return syscall.Write(fd, p) }
