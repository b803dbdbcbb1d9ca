package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-io/baton/internal/nline"
)

// The native protocol (SPEC section 2b, --proto native): a pipelined
// client for the workloads, and the native floor, the smallest pipelined
// line-protocol lock server (FIFO per key, an atomic token, no leases, no
// log), which shares the HTTP floor's locks so that the waiters workload
// can count its queue over HTTP.

// nativeSet is a lockerSet over conns native connections; client i uses
// connection i mod conns. Requests are pipelined: a writer per connection
// sends what its clients queued, in one write when several wait; a reader
// matches answers to requests by (op, key), FIFO.
type nativeSet struct {
	conns []*nativeConn
}

// newNativeSet dials conns connections to addr (127.0.0.0/8).
func newNativeSet(addr string, conns int, dialSem chan struct{}) (*nativeSet, error) {
	if err := checkLoopback(addr); err != nil {
		return nil, err
	}
	s := &nativeSet{}
	dial := loopbackDialer(dialSem)
	for range conns {
		nc, err := dial(context.Background(), "tcp4", addr)
		if err != nil {
			s.Close()
			return nil, err
		}
		c := &nativeConn{nc: nc, wake: make(chan struct{}, 1), waiting: map[string][]chan string{}, done: make(chan struct{})}
		go c.writeLoop()
		go c.readLoop()
		s.conns = append(s.conns, c)
	}
	return s, nil
}

func (s *nativeSet) For(i int) locker { return s.conns[i%len(s.conns)] }

func (s *nativeSet) Close() {
	for _, c := range s.conns {
		c.nc.Close()
		<-c.done
	}
}

// nativeConn is one pipelined connection.
type nativeConn struct {
	nc   net.Conn
	wake chan struct{}
	done chan struct{} // closed when readLoop ends

	mu      sync.Mutex
	out     []byte // lines not yet written
	spare   []byte
	waiting map[string][]chan string // "op key" -> answer channels, FIFO
	err     error
}

var errNativeClosed = errors.New("native connection closed")

// call sends the request line (internal/nline) and waits for the
// answer to (op, rawKey).
func (c *nativeConn) call(ctx context.Context, op, rawKey string, line []byte) (string, error) {
	ch := make(chan string, 1)
	id := nline.ID(op, rawKey)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return "", c.err
	}
	c.out = append(c.out, line...)
	c.waiting[id] = append(c.waiting[id], ch)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	select {
	case a, ok := <-ch:
		if !ok {
			return "", errNativeClosed
		}
		return a, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (c *nativeConn) writeLoop() {
	for {
		select {
		case <-c.wake:
		case <-c.done:
			return
		}
		// Let the other clients of this connection queue their requests
		// too: one write carries them all.
		runtime.Gosched()
		c.mu.Lock()
		if len(c.out) == 0 {
			c.mu.Unlock()
			continue
		}
		buf := c.out
		c.out = c.spare[:0]
		c.mu.Unlock()
		if _, err := c.nc.Write(buf); err != nil {
			c.nc.Close()
			return
		}
		c.spare = buf
	}
}

func (c *nativeConn) readLoop() {
	defer close(c.done)
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			c.mu.Lock()
			c.err = errNativeClosed
			for _, chs := range c.waiting {
				for _, ch := range chs {
					close(ch)
				}
			}
			c.waiting = nil
			c.mu.Unlock()
			return
		}
		line = line[:len(line)-1]
		op, rest, _ := strings.Cut(line, " ")
		key, _, _ := strings.Cut(rest, " ")
		id := nline.ID(op, key)
		c.mu.Lock()
		chs := c.waiting[id]
		if len(chs) == 0 {
			c.mu.Unlock()
			continue // an answer to nothing asked (a fatal error line)
		}
		ch := chs[0]
		if len(chs) == 1 {
			delete(c.waiting, id)
		} else {
			c.waiting[id] = chs[1:]
		}
		c.mu.Unlock()
		ch <- line
	}
}

// Acquire sends "A <key> <lease> <wait>" (wait 0: "-").
func (c *nativeConn) Acquire(ctx context.Context, key string, lease, wait float64) (uint64, error) {
	raw := nline.Escape(key)
	a, err := c.call(ctx, nline.OpAcquire, raw, nline.AppendAcquire(nil, raw, secs(lease), secs(wait), nline.AcquireOptions{}))
	if err != nil {
		return 0, err
	}
	ans, err := nline.ParseAnswer(a)
	switch {
	case err != nil:
		return 0, fmt.Errorf("acquire: %w", err)
	case ans.Outcome == nline.OK:
		return ans.Token, nil
	case ans.Outcome == nline.Timeout:
		return 0, errTimeout
	}
	return 0, fmt.Errorf("acquire: %s", a)
}

// Release sends "R <key> <token>".
func (c *nativeConn) Release(ctx context.Context, key string, token uint64) error {
	raw := nline.Escape(key)
	a, err := c.call(ctx, nline.OpRelease, raw, nline.AppendRelease(nil, raw, token))
	if err != nil {
		return err
	}
	if ans, err := nline.ParseAnswer(a); err != nil || ans.Outcome != nline.OK {
		return fmt.Errorf("release: %s", a)
	}
	return nil
}

// serveNativeFloor serves the native floor on ln over h's locks until ln
// is closed.
func serveNativeFloor(ln net.Listener, h *floorHandler) {
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		go nativeFloorConn(nc, h)
	}
}

// nativeFloorConn serves one connection: a reader that answers what it
// can at once and parks an acquire of a held key on a goroutine, and a
// writer that drains the answers into one write. It answers the ops the
// official client sends: A, R, P (its liveness check, echoed at once) and
// C (withdraws a parked acquire sent with that id, as baton does).
func nativeFloorConn(nc net.Conn, h *floorHandler) {
	defer nc.Close()
	var mu sync.Mutex
	var out, spare []byte
	wake := make(chan struct{}, 1)
	gone := make(chan struct{})
	defer close(gone)
	cancels := map[string]chan struct{}{} // parked acquires with an id, by "key id"; under mu
	send := func(b []byte) {
		mu.Lock()
		out = append(out, b...)
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	go func() {
		for {
			select {
			case <-wake:
			case <-gone:
				return
			}
			mu.Lock()
			buf := out
			out = spare[:0]
			mu.Unlock()
			if _, err := nc.Write(buf); err != nil {
				nc.Close()
				return
			}
			spare = buf
		}
	}()
	grant := func(key string, l *floorLock) {
		tok := h.token.Add(1)
		l.holder.Store(tok)
		b := make([]byte, 0, 64+len(key))
		b = append(append(append(b, "A "...), key...), " OK "...)
		b = strconv.AppendUint(b, tok, 10)
		send(append(b, " 30 0\n"...))
	}
	br := bufio.NewReaderSize(nc, 4096)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return
		}
		f := strings.Fields(string(line))
		switch {
		case len(f) >= 4 && f[0] == "A":
			key := f[1]
			l := h.lock(key, true)
			select {
			case <-l.ch:
				grant(key, l)
				continue
			default:
			}
			var timeout time.Duration
			if f[3] != "-" {
				w, _ := strconv.ParseFloat(f[3], 64)
				timeout = time.Duration(w * float64(time.Second))
			}
			// An acquire with id= can be withdrawn by a C line (the
			// official client sends one when its caller gives up).
			var cancel chan struct{}
			var ck string
			for _, o := range f[4:] {
				if id, ok := strings.CutPrefix(o, "id="); ok {
					cancel, ck = make(chan struct{}), key+" "+id
					mu.Lock()
					cancels[ck] = cancel
					mu.Unlock()
				}
			}
			l.waiters.Add(1)
			go func() {
				if cancel != nil {
					defer func() {
						mu.Lock()
						if cancels[ck] == cancel {
							delete(cancels, ck)
						}
						mu.Unlock()
					}()
				}
				var tc <-chan time.Time
				if timeout > 0 {
					t := time.NewTimer(timeout)
					defer t.Stop()
					tc = t.C
				}
				select {
				case <-l.ch:
					l.waiters.Add(-1)
					grant(key, l)
				case <-tc:
					l.waiters.Add(-1)
					send([]byte("A " + key + " T\n"))
				case <-cancel:
					l.waiters.Add(-1)
					send([]byte("A " + key + " T\n"))
				case <-gone:
					l.waiters.Add(-1)
				}
			}()
		case len(f) == 2 && f[0] == "P":
			send([]byte("P " + f[1] + " OK\n"))
		case len(f) == 3 && f[0] == "C":
			mu.Lock()
			c := cancels[f[1]+" "+f[2]]
			delete(cancels, f[1]+" "+f[2])
			mu.Unlock()
			if c != nil {
				close(c)
			}
			send([]byte("C " + f[1] + " OK\n"))
		case len(f) == 3 && f[0] == "R":
			tok, _ := strconv.ParseUint(f[2], 10, 64)
			l := h.lock(f[1], false)
			if l == nil || tok == 0 || !l.holder.CompareAndSwap(tok, 0) {
				send([]byte("R " + f[1] + " E not_holder the lock is held under another token\n"))
				continue
			}
			l.ch <- struct{}{}
			send([]byte("R " + f[1] + " OK\n"))
		default:
			send([]byte("- - E invalid_argument op: not an op\n"))
			return
		}
	}
}
