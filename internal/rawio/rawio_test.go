package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// pair returns the two ends of a loopback TCP connection, the first
// wrapped.
func pair(t *testing.T) (net.Conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			accepted <- nil
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s := <-accepted
	if s == nil {
		t.Fatal("accept failed")
	}
	w := Wrap(c)
	if raw := w != c; raw != Raw {
		t.Fatalf("Wrap of a TCP connection: %T, raw system calls in this build: %v", w, Raw)
	}
	t.Cleanup(func() { w.Close(); s.Close() })
	return w, s
}

// More bytes than the sockets' buffers hold, both ways at once: the
// writes that find no room and the reads that find nothing wait in the
// poller, and every byte arrives in order.
func TestWrapCarriesEveryByteBothWays(t *testing.T) {
	w, s := pair(t)
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i * 7 / 3)
	}
	errs := make(chan error, 2)
	go func() { _, err := w.Write(data); errs <- err }()
	go func() { _, err := s.Write(data); errs <- err }()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(w, got); err != nil {
		t.Fatalf("wrapped read: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the wrapped end read other bytes than the peer wrote")
	}
	if _, err := io.ReadFull(s, got); err != nil {
		t.Fatalf("peer read: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("the peer read other bytes than the wrapped end wrote")
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("write: %v", err)
		}
	}
}

// The peer's close is io.EOF after the bytes it sent; a read deadline is
// a timeout; a Close ends a read waiting in the poller with net.ErrClosed.
func TestWrapEndsAsAConnectionDoes(t *testing.T) {
	w, s := pair(t)
	if err := w.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	var b [4]byte
	_, err := w.Read(b[:])
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the deadline: %v, want a timeout", err)
	}
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("read past the deadline: %v is not a net.Error timeout", err)
	}
	_ = w.SetReadDeadline(time.Time{})
	if _, err := s.Write([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	s.Close()
	got, err := io.ReadAll(w)
	if string(got) != "ab" || err != nil {
		t.Fatalf("read to the peer's close: %q, %v; want \"ab\", nil (io.EOF)", got, err)
	}

	w2, _ := pair(t)
	done := make(chan error, 1)
	go func() { _, err := w2.Read(b[:]); done <- err }()
	time.Sleep(10 * time.Millisecond) // the read waits in the poller (or not yet: either way it ends)
	w2.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read ended by Close: %v, want net.ErrClosed", err)
	}
}

// A connection that is not TCP is returned as it is.
func TestWrapLeavesOtherConnections(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Wrap(a) != a {
		t.Fatal("Wrap changed a connection that is not a *net.TCPConn")
	}
}

// Listener's connections are Wrap's, and carry bytes both ways.
func TestListenerWraps(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Listener(inner)
	defer ln.Close()
	go func() {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			return
		}
		defer c.Close()
		_, _ = c.Write([]byte("ping"))
		_, _ = io.Copy(io.Discard, c)
	}()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, tcp := c.(*net.TCPConn); tcp == Raw {
		t.Fatalf("accepted %T, raw system calls in this build: %v", c, Raw)
	}
	var b [4]byte
	if _, err := io.ReadFull(c, b[:]); err != nil || string(b[:]) != "ping" {
		t.Fatalf("read %q, %v", b, err)
	}
	if _, err := c.Write([]byte("pong")); err != nil {
		t.Fatal(err)
	}
}
