// Package native serves baton's native protocol (SPEC section 2b): a
// pipelined line protocol on a persistent TCP (or TLS) connection, beside
// the HTTP API. It translates lines to the engine's public calls exactly
// as handlers translates HTTP requests: the same engine calls, the same
// error codes (internal/errcode), the same Idempotency-Key semantics
// (id=), the same disconnect semantics. It knows nothing of HTTP.
//
// Per connection there is one reader goroutine, which parses lines and
// answers releases and renewals itself, and one writer goroutine, which
// drains a bounded queue of answers into a buffered writer and flushes it
// when the queue is empty, so that answers produced together leave in one
// write. An acquire runs on a worker goroutine (it may park in the key's
// queue; up to maxIdleWorkers idle workers are kept for the next ones); a
// connection's acquires of the same key run one after the other on that
// worker, so that they are answered in the order they
// were sent (SPEC section 2b), and the second joins the key's queue when
// the first is answered.
package native

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/errcode"
)

// DefaultMaxQueue is the default of Config.MaxQueue.
const DefaultMaxQueue = 4096

// Gate tells the native server whether this node serves locks, and the
// native address of the active when it does not. The cluster implements
// it; a single node has none and always serves.
type Gate interface {
	// Serving reports whether this node is the active.
	Serving() bool
	// Resuming reports whether this node has just run again after a pause
	// and does not yet know whether it is still the active (see
	// handlers.Gate).
	Resuming() bool
	// ActiveNative returns the active's native address (host:port), ""
	// while it is not known.
	ActiveNative() string
}

// Metrics receives what the server does. handlers.Metrics implements it.
type Metrics interface {
	// ObserveNative records one answer: its op ("A", "R", "N", "AUTH",
	// "-" for a line that could not be read), its outcome ("OK", "T",
	// "M", or the error code of an E line) and the time from the line's
	// arrival to the answer's queueing.
	ObserveNative(op, outcome string, d time.Duration)
	// Delivered reports that the grant of token on key was written to its
	// holder's connection.
	Delivered(key string, token uint64)
}

// Config sets up a Server.
type Config struct {
	// AuthTokens are the bearer tokens accepted by AUTH; empty means no
	// authentication.
	AuthTokens []string
	// AdminTokens (admin_tokens) are accepted by AUTH too, and only a
	// connection that AUTHed with one of them may force a release
	// ("R <key> force") when AuthTokens or AdminTokens is set (E
	// forbidden otherwise). With neither set anyone may, as over HTTP.
	AdminTokens []string
	// Gate, if set, decides whether this node serves (a cluster member).
	Gate Gate
	// Metrics, if set, receives every answer.
	Metrics Metrics
	// MaxQueue is the number of answers a connection may have waiting to
	// be written (and acquires of one key waiting their turn) before the
	// server closes it: a client that sends and never reads. Default
	// DefaultMaxQueue.
	MaxQueue int
	// Logger receives internal errors; nil means slog.Default().
	Logger *slog.Logger
}

// Server serves the native protocol over an Engine. New starts nothing;
// Serve serves one listener until Close.
type Server struct {
	eng   *engine.Engine
	cfg   Config
	log   *slog.Logger
	auth  [][sha256.Size]byte // digests of AuthTokens
	admin [][sha256.Size]byte // digests of AdminTokens

	ctx    context.Context
	cancel context.CancelFunc

	jobs chan job     // to idle workers (unbuffered)
	idle atomic.Int64 // workers waiting on jobs

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// New returns a server for eng.
func New(eng *engine.Engine, cfg Config) *Server {
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	s := &Server{eng: eng, cfg: cfg, log: cfg.Logger, lns: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{}, jobs: make(chan job)}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.auth = digests(cfg.AuthTokens)
	s.admin = digests(cfg.AdminTokens)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// ErrServerClosed is returned by Serve after Close.
var ErrServerClosed = errors.New("native: server closed")

// Serve accepts connections on ln until Close (then it returns
// ErrServerClosed) or until ln fails. TLS is ln's business
// (tls.NewListener).
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			delete(s.lns, ln)
			s.mu.Unlock()
			if closed {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				time.Sleep(delay)
				s.mu.Lock()
				s.lns[ln] = struct{}{}
				s.mu.Unlock()
				continue
			}
			return err
		}
		delay = 0
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		c := s.newConn(nc)
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(2)
		s.mu.Unlock()
		go c.readLoop()
		go c.writeLoop()
	}
}

// Close stops every listener and connection: parked acquires leave their
// queues, as when their clients go away. It waits for every goroutine of
// the server and is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// digests returns the SHA-256 digests of the non-empty tokens, so that
// every comparison is over equal lengths.
func digests(tokens []string) [][sha256.Size]byte {
	var sums [][sha256.Size]byte
	for _, t := range tokens {
		if t != "" {
			sums = append(sums, sha256.Sum256([]byte(t)))
		}
	}
	return sums
}

// tokenIn reports, in a time that does not depend on which digest
// matches, whether candidate is one of the tokens of sums.
func tokenIn(sums [][sha256.Size]byte, candidate string) bool {
	sum := sha256.Sum256([]byte(candidate))
	ok := 0
	for i := range sums {
		ok |= subtle.ConstantTimeCompare(sum[:], sums[i][:])
	}
	return ok == 1
}

// checkAuth reads the token of an AUTH line: valid is whether it is one
// of the auth_tokens or admin_tokens, admin whether it is an admin token.
func (s *Server) checkAuth(candidate string) (valid, admin bool) {
	admin = tokenIn(s.admin, candidate)
	return admin || tokenIn(s.auth, candidate), admin
}

// authFailed is the message of an AUTH with a token the node does not
// know.
const authFailed = "the first line must be AUTH <token> with a valid token"

// conn is one client connection.
type conn struct {
	s      *Server
	nc     net.Conn
	ctx    context.Context // ends when the connection does: its waiters leave
	cancel context.CancelFunc

	// admin: the connection AUTHed with one of the admin_tokens. Only the
	// read loop touches it.
	admin bool

	mu      sync.Mutex
	queue   []answer
	spare   []answer
	closed  bool                  // no more answers are taken
	linger  bool                  // a fatal line ended the reader: close gently (see writeLoop)
	chains  map[string][]*request // keys with an acquire running: the ones waiting their turn
	chained int                   // requests in chains
	wake    chan struct{}
}

// answer is one line to write. A grant carries its Grant and id, so that
// it is abandoned (passed to the next waiter) if it cannot be written.
type answer struct {
	line    []byte
	granted bool
	g       engine.Grant
	id      string
}

func (s *Server) newConn(nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, chains: map[string][]*request{}, wake: make(chan struct{}, 1)}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	return c
}

// readLoop reads and dispatches lines until the connection ends.
func (c *conn) readLoop() {
	defer c.s.wg.Done()
	defer c.cancel()
	br := bufio.NewReaderSize(c.nc, MaxLine+2)
	authed := len(c.s.auth) == 0
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				c.fatal("-", "-", api.CodeInvalidArgument, "line: longer than "+strconv.Itoa(MaxLine)+" bytes", time.Now())
			}
			return
		}
		start := time.Now()
		line = line[:len(line)-1]
		if len(line) > MaxLine {
			c.fatal("-", "-", api.CodeInvalidArgument, "line: longer than "+strconv.Itoa(MaxLine)+" bytes", start)
			return
		}
		r, err := parse(line)
		if !authed {
			valid, admin := false, false
			if err == nil && r.op == OpAuth {
				valid, admin = c.s.checkAuth(r.auth)
			}
			if !valid {
				c.fatal(OpAuth, "", api.CodeUnauthorized, authFailed, start)
				return
			}
			authed, c.admin = true, admin
			c.send(answer{line: []byte("AUTH OK\n")}, OpAuth, "OK", start)
			continue
		}
		if err != nil {
			var le *lineError
			errors.As(err, &le)
			if le.fatal {
				c.fatal(le.op, le.rawKey, api.CodeInvalidArgument, le.Error(), start)
				return
			}
			a := errorLine(le.op, le.rawKey, api.CodeInvalidArgument, le.Error())
			if le.op == OpAcquire {
				c.acquireInTurn(&request{op: OpAcquire, rawKey: le.rawKey, key: le.rawKey}, &a, start)
			} else {
				c.send(a, le.op, api.CodeInvalidArgument, start)
			}
			continue
		}
		switch r.op {
		case OpAuth:
			c.reauth(&r, start)
		case OpAcquire:
			c.acquireInTurn(&r, nil, start)
		case OpRelease:
			c.release(&r, start)
		case OpRenew:
			c.renew(&r, start)
		}
		if c.ctx.Err() != nil {
			return
		}
	}
}

// fatal queues an error line and ends the connection after it: nothing
// more is read.
func (c *conn) fatal(op, rawKey, code, msg string, start time.Time) {
	var a answer
	if rawKey == "" {
		a.line = []byte(op + " E " + code + " " + msg + "\n")
	} else {
		a = errorLine(op, rawKey, code, msg)
	}
	c.mu.Lock()
	c.linger = true
	c.mu.Unlock()
	c.send(a, op, code, start)
	c.cancel()
}

// send queues a for the writer and reports whether it was taken. A full
// queue closes the connection (its waiters leave); an answer not taken
// that carries a grant is abandoned.
func (c *conn) send(a answer, op, outcome string, start time.Time) bool {
	if m := c.s.cfg.Metrics; m != nil {
		m.ObserveNative(op, outcome, time.Since(start))
	}
	c.mu.Lock()
	if c.closed || len(c.queue)+c.chained >= c.s.cfg.MaxQueue {
		full := !c.closed
		c.mu.Unlock()
		if full {
			c.overflow()
		}
		if a.granted {
			c.s.eng.Abandon(a.g, a.id)
		}
		return false
	}
	c.queue = append(c.queue, a)
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true
}

// overflow closes a connection that has MaxQueue answers waiting to be
// written (or acquires waiting their turn): its waiters leave.
func (c *conn) overflow() {
	c.mu.Lock()
	first := !c.closed
	c.closed = true
	c.mu.Unlock()
	if !first {
		return
	}
	c.s.log.Warn("native connection closed: it does not read its answers", "remote", c.nc.RemoteAddr().String(), "queued", c.s.cfg.MaxQueue)
	c.nc.Close()
	c.cancel()
}

// writeLoop writes queued answers until the connection ends, then writes
// what is left, abandons the grants it could not deliver and closes the
// connection.
func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	var bw *bufio.Writer // taken from writers for one batch: an idle connection holds none
	var pending []answer // grants written to bw, not yet flushed
	var err error
	done := false
	for !done {
		select {
		case <-c.wake:
		case <-c.ctx.Done():
			done = true
			c.mu.Lock()
			c.closed = true
			c.mu.Unlock()
			// What the client was told before it went (or before a fatal
			// line) still goes out, briefly.
			_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
		}
		yielded := false
		for err == nil {
			c.mu.Lock()
			if len(c.queue) == 0 {
				c.mu.Unlock()
				if yielded || done {
					break
				}
				// Before a write, let the goroutines that are about to
				// answer (acquires just granted, the reader's next line)
				// run once: their answers then leave in the same write.
				runtime.Gosched()
				yielded = true
				continue
			}
			// The two slices take turns: senders append to one while
			// this loop writes the other.
			batch := c.queue
			c.queue = c.spare[:0]
			c.mu.Unlock()
			if bw == nil {
				bw = writers.Get().(*bufio.Writer)
				bw.Reset(c.nc)
			}
			for i := range batch {
				if err == nil {
					_, err = bw.Write(batch[i].line)
				}
				if batch[i].granted {
					pending = append(pending, batch[i])
				}
				batch[i] = answer{}
			}
			c.spare = batch
		}
		if bw != nil {
			if err == nil && len(pending) > 0 && peerGone(c.nc) {
				// The client went away as these grants were made: the
				// reader has not seen it yet, a write would still succeed.
				err = errPeerGone
			}
			if err == nil {
				err = bw.Flush()
			}
			bw.Reset(nil)
			writers.Put(bw)
			bw = nil
		}
		for _, a := range pending {
			if err != nil {
				c.s.eng.Abandon(a.g, a.id)
			} else if m := c.s.cfg.Metrics; m != nil {
				m.Delivered(a.g.Key, a.g.Token)
			}
		}
		pending = pending[:0]
		if err != nil {
			break
		}
	}
	c.mu.Lock()
	c.closed = true
	left := c.queue
	c.queue = nil
	linger := c.linger && err == nil
	c.mu.Unlock()
	for _, a := range left {
		if a.granted {
			c.s.eng.Abandon(a.g, a.id)
		}
	}
	c.cancel()
	if linger {
		c.closeGently()
	}
	c.nc.Close()
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
}

// Lingering after a fatal line: how long, and how many unread bytes, the
// server reads and discards before it closes the connection.
const (
	lingerTime  = 500 * time.Millisecond
	lingerBytes = 1 << 20
)

// closeGently ends a connection after a fatal line (its reader has
// returned): it sends FIN after the error line, then reads and discards
// what the client still sends, for at most lingerTime and lingerBytes.
// Closing with unread bytes in the socket would send a TCP reset, which
// can destroy the error line before the client reads it (RFC 1122
// section 4.2.2.13).
func (c *conn) closeGently() {
	cw, ok := c.nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.CopyN(io.Discard, c.nc, lingerBytes)
}

// errPeerGone ends a connection whose client has closed it.
var errPeerGone = errors.New("native: the client closed the connection")

// writers are the write buffers of the connections' writers, each held for
// one batch of answers only.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 16<<10) }}

// acquireInTurn runs r (or, with pre, answers it with pre) after the
// connection's earlier acquires of the same key are answered.
func (c *conn) acquireInTurn(r *request, pre *answer, start time.Time) {
	r.pre, r.start = pre, start
	c.mu.Lock()
	if q, busy := c.chains[r.rawKey]; busy {
		if len(c.queue)+c.chained >= c.s.cfg.MaxQueue {
			// Acquires piling up behind a parked one count against the
			// same bound as unread answers.
			c.mu.Unlock()
			c.overflow()
			return
		}
		c.chains[r.rawKey] = append(q, r)
		c.chained++
		c.mu.Unlock()
		return
	}
	if pre != nil {
		c.mu.Unlock()
		c.send(*pre, OpAcquire, api.CodeInvalidArgument, start)
		return
	}
	c.chains[r.rawKey] = nil
	c.mu.Unlock()
	c.s.runAcquires(c, r)
}

// maxIdleWorkers bounds the goroutines kept waiting for the next acquire
// once theirs is answered (their stacks have grown to what an acquire
// needs: a fresh goroutine would grow its own again).
const maxIdleWorkers = 64

// job is an acquire (and those of the same key and connection behind it)
// for a worker.
type job struct {
	c *conn
	r *request
}

// runAcquires runs r's acquire chain on an idle worker, or on a new one.
func (s *Server) runAcquires(c *conn, r *request) {
	select {
	case s.jobs <- job{c, r}:
	default:
		s.wg.Add(1)
		go s.worker(job{c, r})
	}
}

// worker runs acquire chains until it has been idle while maxIdleWorkers
// others were, or the server closes.
func (s *Server) worker(j job) {
	defer s.wg.Done()
	for {
		j.c.acquireLoop(j.r)
		j = job{} // hold no connection while idle
		if s.idle.Add(1) > maxIdleWorkers {
			s.idle.Add(-1)
			return
		}
		select {
		case j = <-s.jobs:
			s.idle.Add(-1)
		case <-s.ctx.Done():
			s.idle.Add(-1)
			return
		}
	}
}

// acquireLoop runs the acquires of one key of the connection, in order.
func (c *conn) acquireLoop(r *request) {
	for {
		if r.pre != nil {
			c.send(*r.pre, OpAcquire, api.CodeInvalidArgument, r.start)
		} else {
			c.acquire(r)
		}
		c.mu.Lock()
		q := c.chains[r.rawKey]
		if len(q) == 0 || c.ctx.Err() != nil {
			delete(c.chains, r.rawKey)
			c.chained -= len(q)
			c.mu.Unlock()
			return
		}
		r = q[0]
		c.chains[r.rawKey] = q[1:]
		c.chained--
		c.mu.Unlock()
	}
}

// acquire runs one acquire and queues its answer.
func (c *conn) acquire(r *request) {
	if c.notServing(r) {
		return
	}
	req := engine.AcquireRequest{Key: r.key, Lease: r.lease, Wait: r.wait, ID: r.id, Owner: r.owner, Mode: r.mode, Limit: r.limit}
	g, err := c.s.eng.Acquire(c.ctx, req)
	for errors.Is(err, engine.ErrPollTimeout) && r.id != "" {
		// poll_timeout exists for proxies that cut long HTTP polls; a
		// native connection has none, so the waiter resumes its place at
		// once (same id). Without an id it cannot: it gets E poll_timeout.
		g, err = c.s.eng.Acquire(c.ctx, req)
	}
	if errors.Is(err, engine.ErrTimeout) {
		line := make([]byte, 0, 8+len(r.rawKey))
		line = append(append(append(line, "A "...), r.rawKey...), " T\n"...)
		c.send(answer{line: line}, r.op, "T", r.start)
		return
	}
	if err != nil {
		if c.ctx.Err() != nil && errors.Is(err, context.Canceled) {
			return // the connection is gone: nobody reads the answer
		}
		c.sendError(r, err)
		return
	}
	if c.ctx.Err() != nil {
		// Granted as the connection went away: nobody would learn the token.
		c.s.eng.Abandon(g, r.id)
		return
	}
	if gate := c.s.cfg.Gate; gate != nil && gate.Resuming() {
		// As handlers: granted by this node's own timers the moment it
		// resumed from a pause. The client is told to retry; the grant
		// stays for a repeat with the same id, or its lease ends it.
		c.send(errorLine(r.op, r.rawKey, api.CodeUnavailable, "this node has just resumed from a pause and does not know yet whether it is still the active; retry"), r.op, api.CodeUnavailable, r.start)
		return
	}
	line := make([]byte, 0, 48+len(r.rawKey))
	line = append(append(append(line, "A "...), r.rawKey...), " OK "...)
	line = appendGrant(line, g)
	c.send(answer{line: line, granted: true, g: g, id: r.id}, r.op, "OK", r.start)
}

// appendGrant appends "<token> <lease> <expires-unix-ms>\n".
func appendGrant(b []byte, g engine.Grant) []byte {
	b = strconv.AppendUint(b, g.Token, 10)
	b = append(b, ' ')
	b = strconv.AppendFloat(b, g.Lease.Seconds(), 'f', -1, 64)
	b = append(b, ' ')
	b = strconv.AppendInt(b, g.ExpiresAt.UnixMilli(), 10)
	return append(b, '\n')
}

// reauth answers an AUTH after the first line (or on a node without
// auth_tokens): a valid token sets the connection's rights anew (admin or
// not); an unknown one is E unauthorized and changes nothing. A node
// without any token accepts every AUTH, as it always did.
func (c *conn) reauth(r *request, start time.Time) {
	if len(c.s.auth) == 0 && len(c.s.admin) == 0 {
		c.send(answer{line: []byte("AUTH OK\n")}, OpAuth, "OK", start)
		return
	}
	valid, admin := c.s.checkAuth(r.auth)
	if !valid {
		c.send(answer{line: []byte("AUTH E " + api.CodeUnauthorized + " " + authFailed + "\n")}, OpAuth, api.CodeUnauthorized, start)
		return
	}
	c.admin = admin
	c.send(answer{line: []byte("AUTH OK\n")}, OpAuth, "OK", start)
}

// mayForce reports whether the connection may force a release: always
// when the node has neither auth_tokens nor admin_tokens, else only after
// an AUTH with one of the admin_tokens (as handlers' mayForce).
func (c *conn) mayForce() bool {
	return (len(c.s.auth) == 0 && len(c.s.admin) == 0) || c.admin
}

func (c *conn) release(r *request, start time.Time) {
	r.start = start
	if c.notServing(r) {
		return
	}
	var err error
	switch {
	case r.force && !c.mayForce():
		c.send(errorLine(r.op, r.rawKey, api.CodeForbidden, "a forced release needs one of the node's admin_tokens (AUTH <token>)"), r.op, api.CodeForbidden, start)
		return
	case r.force:
		err = c.s.eng.ForceRelease(r.key)
	default:
		err = c.s.eng.Release(r.key, r.token)
	}
	if err != nil {
		c.sendError(r, err)
		return
	}
	line := make([]byte, 0, 8+len(r.rawKey))
	line = append(append(append(line, "R "...), r.rawKey...), " OK\n"...)
	c.send(answer{line: line}, r.op, "OK", start)
}

func (c *conn) renew(r *request, start time.Time) {
	r.start = start
	if c.notServing(r) {
		return
	}
	g, err := c.s.eng.Renew(r.key, r.token, r.lease)
	if err != nil {
		c.sendError(r, err)
		return
	}
	line := make([]byte, 0, 48+len(r.rawKey))
	line = append(append(append(line, "N "...), r.rawKey...), " OK "...)
	c.send(answer{line: appendGrant(line, g)}, r.op, "OK", start)
}

// notServing answers r with M (or E unavailable) when this node is not
// the active, and reports whether it did.
func (c *conn) notServing(r *request) bool {
	gate := c.s.cfg.Gate
	if gate == nil || gate.Serving() {
		return false
	}
	c.sendMoved(r)
	return true
}

// sendMoved answers r with "M <active's native address>", or with E
// unavailable while no other active is known.
func (c *conn) sendMoved(r *request) {
	var addr string
	if gate := c.s.cfg.Gate; gate != nil && !gate.Serving() {
		addr = gate.ActiveNative()
	}
	if addr == "" {
		c.send(errorLine(r.op, r.rawKey, api.CodeUnavailable, "no active node is known at the moment; retry"), r.op, api.CodeUnavailable, r.start)
		return
	}
	line := make([]byte, 0, 8+len(r.rawKey)+len(addr))
	line = append(append(append(append(append(append(line, r.op...), ' '), r.rawKey...), " M "...), addr...), '\n')
	c.send(answer{line: line}, r.op, "M", r.start)
}

// sendError answers r with err: M for "ask the active", else an E line
// with the code of internal/errcode's table.
func (c *conn) sendError(r *request, err error) {
	if errors.Is(err, engine.ErrNotActive) || errors.Is(err, engine.ErrMoved) {
		// A parked acquire whose engine stopped being the active (a
		// handoff): the client repeats it on the active; with the same id
		// it resumes its place there.
		c.sendMoved(r)
		return
	}
	code, _, msg, known := errcode.Of(err)
	if !known {
		c.s.log.Error("internal error", "op", r.op, "err", err)
	}
	c.send(errorLine(r.op, r.rawKey, code, msg), r.op, code, r.start)
}

// errorLine is "<op> <key> E <code> <message>\n"; the message is kept to
// one line.
func errorLine(op, rawKey, code, msg string) answer {
	b := make([]byte, 0, len(op)+len(rawKey)+len(code)+len(msg)+8)
	b = append(append(append(append(append(append(b, op...), ' '), rawKey...), " E "...), code...), ' ')
	for i := 0; i < len(msg); i++ {
		if msg[i] == '\n' || msg[i] == '\r' {
			b = append(b, ' ')
		} else {
			b = append(b, msg[i])
		}
	}
	return answer{line: append(b, '\n')}
}

var _ io.Closer = (*Server)(nil)
