// Package testproc holds what the tests that run real baton processes
// share: a buffer that collects a process's output while the test reads it,
// a free loopback port, and a self-signed certificate for TLS (tls.go),
// which the handlers tests use too.
package testproc

import (
	"bytes"
	"net"
	"sync"
	"testing"
)

// Buffer is a bytes.Buffer safe for one writer (a process's stdout or
// stderr) and concurrent readers.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// FreeAddr returns "host:port" with a TCP port that was free on host (an
// address of 127.0.0.0/8) a moment ago. It fails the test if none is.
func FreeAddr(t testing.TB, host string) string {
	t.Helper()
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		t.Fatalf("no free port on %s: %v", host, err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
