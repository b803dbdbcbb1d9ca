package api_test

import (
	"bytes"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy is a TCP proxy between a client and a node that can drop
// connections: all of them, the one an answer is on, or every connection
// for a while (accepting and closing at once).
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu          sync.Mutex
	conns       map[*proxyConn]bool
	refuseUntil time.Time
	dropOnReply bool
	dropped     chan *proxyConn // a connection dropped by dropOnReply
	holdAfter   []byte          // see HoldAfter
	delay       time.Duration   // see DelayReplies
	held        chan *proxyConn // a connection held by holdAfter
	accepted    int
}

// proxyConn is one proxied connection.
type proxyConn struct {
	client, server net.Conn
	up             atomic.Int64 // bytes client → server
	holding        atomic.Bool  // nothing more reaches the client (HoldAfter)
	once           sync.Once
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		c.client.Close()
		c.server.Close()
	})
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, conns: map[*proxyConn]bool{}, dropped: make(chan *proxyConn, 1), held: make(chan *proxyConn, 1)}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// URL is the proxy's base URL.
func (p *proxy) URL() string { return "http://" + p.ln.Addr().String() }

func (p *proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.accepted++
		refuse := time.Now().Before(p.refuseUntil)
		p.mu.Unlock()
		if refuse {
			c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		pc := &proxyConn{client: c, server: s}
		p.mu.Lock()
		p.conns[pc] = true
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(pc, true)
		go p.pipe(pc, false)
	}
}

// pipe copies one direction of pc until either side closes.
func (p *proxy) pipe(pc *proxyConn, up bool) {
	defer p.wg.Done()
	defer func() {
		pc.close()
		p.mu.Lock()
		delete(p.conns, pc)
		p.mu.Unlock()
	}()
	src, dst := pc.server, pc.client
	if up {
		src, dst = pc.client, pc.server
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if up {
				pc.up.Add(int64(n))
				p.mu.Lock()
				hold := p.holdAfter != nil && bytes.Contains(buf[:n], p.holdAfter)
				if hold {
					p.holdAfter = nil
				}
				p.mu.Unlock()
				if hold {
					pc.holding.Store(true) // before the node can answer
					p.held <- pc
				}
			} else if pc.holding.Load() {
				n = 0 // the node's answers never reach the client
			} else {
				p.mu.Lock()
				drop := p.dropOnReply
				p.dropOnReply = false
				delay := p.delay
				p.mu.Unlock()
				if delay > 0 {
					time.Sleep(delay) // a slow link: the fault, not a timing claim
				}
				if drop {
					// The answer never reaches the client.
					p.dropped <- pc
					return
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// live returns the open connections.
func (p *proxy) live() []*proxyConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*proxyConn
	for c := range p.conns {
		out = append(out, c)
	}
	return out
}

// DropOnReply arms the proxy: the next bytes a node sends to the client
// are not delivered; their connection is closed instead and sent on
// p.dropped.
func (p *proxy) DropOnReply() {
	p.mu.Lock()
	p.dropOnReply = true
	p.mu.Unlock()
}

// HoldAfter arms the proxy: on the next connection whose client sends
// bytes that contain marker (a whole line of the native protocol, say),
// those bytes reach the node, but nothing the node sends on that
// connection from then on reaches the client; the connection is sent on
// p.held, for the test to close when it likes.
func (p *proxy) HoldAfter(marker string) {
	p.mu.Lock()
	p.holdAfter = []byte(marker)
	p.mu.Unlock()
}

// DelayReplies makes every later read of what a node sends reach the
// client d after it was read (0: at once again).
func (p *proxy) DelayReplies(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Refuse closes every connection and, for d, closes new ones at once.
func (p *proxy) Refuse(d time.Duration) {
	p.mu.Lock()
	p.refuseUntil = time.Now().Add(d)
	p.mu.Unlock()
	for _, c := range p.live() {
		c.close()
	}
}

func (p *proxy) Close() {
	if err := p.ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return
	}
	for _, c := range p.live() {
		c.close()
	}
	p.wg.Wait()
}
