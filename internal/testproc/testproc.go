// Package testproc holds what the tests that run real baton processes
// share: a buffer that collects a process's output while the test reads it,
// a free loopback port, and a self-signed certificate for TLS (tls.go),
// which the handlers tests use too.
package testproc

import (
	"bytes"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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
//
// The port comes from below the kernel's ephemeral range
// (/proc/sys/net/ipv4/ip_local_port_range), never from it: a port the
// kernel hands out for ":0" is also the source port it gives outgoing
// connections, so a node killed in a test and started again on its port
// could find it taken by some client's connection ("address already in
// use"; seen in CI under the history tests' load). Ports are handed out at
// most once per test process, and never one that browsers refuse
// (browserRefuses).
func FreeAddr(t testing.TB, host string) string {
	t.Helper()
	low := ephemeralLow()
	const first = 10000
	for range 1000 {
		port := first + rand.IntN(low-first)
		if browserRefuses(port) {
			continue
		}
		portsMu.Lock()
		taken := portsGiven[port]
		portsGiven[port] = true
		portsMu.Unlock()
		if taken {
			continue
		}
		addr := net.JoinHostPort(host, strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		return addr
	}
	t.Fatalf("no free port on %s below %d", host, low)
	return ""
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// ephemeralLow is the first port of the kernel's ephemeral range, or
// 32768 (Linux's default) where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				return n
			}
		}
	}
	return 32768
}

// WaitStopped waits until every thread of process pid is stopped (state
// T or t in /proc/PID/task/TID/stat), after a SIGSTOP: the signal is
// delivered asynchronously, and a thread running on another CPU goes on
// for a moment, long enough on a loaded machine for a "paused" node to
// answer one more message. It fails the test after 5 s.
func WaitStopped(t testing.TB, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if allStopped(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d is not stopped 5 s after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// allStopped reports whether every thread of pid is stopped.
func allStopped(pid int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, task := range tasks {
		b, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
		if err != nil {
			return false
		}
		// "pid (comm) S ...": the state follows the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// browserRefuses reports whether browsers refuse to load pages from port:
// of the ports Chromium and Firefox block (Chromium's kRestrictedPorts in
// net/base/port_util.cc, Firefox's network.security.ports), 10080
// (amanda) is the only one at or above 10000, where FreeAddr draws from. A
// status page test whose node got it failed with net::ERR_UNSAFE_PORT.
func browserRefuses(port int) bool { return port == 10080 }
