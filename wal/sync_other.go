//go:build !linux

package wal

import "os"

// fdatasync is fsync where the system has no fdatasync in package syscall
// (on macOS, fsync does not reach the platter either: F_FULLFSYNC would;
// on Windows, Sync is FlushFileBuffers, though Open refuses there).
func fdatasync(f *os.File) error { return f.Sync() }
