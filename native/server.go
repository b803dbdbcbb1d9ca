// Package native serves baton's native protocol (SPEC section 2b): a
// pipelined line protocol on a persistent TCP (or TLS) connection, beside
// the HTTP API. It translates lines to the engine's public calls exactly
// as handlers translates HTTP requests: the same engine calls, the same
// error codes (internal/errcode), the same Idempotency-Key semantics
// (id=), the same disconnect semantics. It knows nothing of HTTP.
//
// Per connection there is one reader goroutine, which parses lines,
// answers releases and renewals itself and starts acquires, and one writer
// goroutine. Answers go through a bounded queue; whoever holds the
// connection's writing role (one goroutine at a time) drains it into a
// buffer and writes it when the queue is empty, so that answers produced
// together leave in one write. On a plain TCP connection the reader
// takes the role itself once it has dispatched every line it read (no
// goroutine wake per answer), and a reader whose release hands a grant to
// another connection writes that grant too; both write without waiting
// for the socket and leave what it does not take to the writer, which
// otherwise writes what other goroutines queue (and everything over TLS).
// A reader whose connection has MaxQueue/2 answers waiting for the
// client to read the ones before them takes no more lines until they
// are written (pause): MaxQueue bounds what a client leaves unread, not
// what it sends at once. Nothing else runs per connection or per
// request: an acquire starts with engine.AcquireTo, and one that parks is
// the engine's waiter plus a callback that queues its result. The role holder settles each
// acquire's result (it waits for the grant's log record) before it writes
// the answer. A connection's
// acquires of the same key run one after the other, so that they are
// answered in the order they were sent (SPEC section 2b): the second waits
// on the connection, behind the first, and joins the key's queue when the
// first is answered (started by whichever goroutine queued that answer).
package native

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"hash/maphash"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/errcode"
)

// msgResumed is the E unavailable answer of an acquire held back on a node
// that has just resumed from a pause (Gate.HoldsBack).
const msgResumed = "this node has just resumed from a pause and does not know yet whether it is still the active; retry"

// DefaultMaxQueue is the default of Config.MaxQueue.
const DefaultMaxQueue = 4096

// Gate tells the native server whether this node serves locks, and the
// native address of the active when it does not. The cluster implements
// it; a single node has none and always serves.
type Gate interface {
	// Serving reports whether this node is the active.
	Serving() bool
	// HoldsBack reports whether the grant of token must not reach its
	// client, or with token 0 a timeout (see handlers.Gate).
	HoldsBack(token uint64) bool
	// ActiveNative returns the active's native address (host:port), ""
	// while it is not known.
	ActiveNative() string
	// RefusedByPeers reports whether every other peer refuses this node
	// (see handlers.Gate).
	RefusedByPeers() bool
}

// ActiveAwaiter is implemented by a Gate that can wait for an active to
// become known (cluster.Node). With it, an acquire that this node cannot
// serve while it knows no active (a handoff or a failover under way),
// or that was parked here when the node stopped being the active, waits
// for one, off the connection's reader, and then runs again: M with the
// new active's address, served here if the role came back, or E
// unavailable if none became known. HTTP's redirect waits the same way
// (handlers.Gate.ActiveURL). Without it such an acquire is answered E
// unavailable at once.
type ActiveAwaiter interface {
	// AwaitActive returns once an active is known, this node serves, a
	// bound of the Gate's own has passed, or ctx ends; the connections
	// that waited go on one after the other in the order they began to
	// wait, each once the one before it called its done (the acquires it
	// held back have run: they have their answers or their places in the
	// queues). done must be called; a second call does nothing.
	AwaitActive(ctx context.Context) (done func())
}

// Metrics receives what the server does. handlers.Metrics implements it.
type Metrics interface {
	// ObserveNative records one answer: its op ("A", "R", "N", "C", "P", "AUTH",
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
	// server closes it: a client that sends and never reads. It bounds
	// what a client leaves unread, not what it sends at once: once
	// MaxQueue/2 answers wait for the client to read the ones before them,
	// the server takes no more of its lines until they are written, and a
	// connection whose socket then takes nothing for a second (stallTime)
	// is closed. The answers to parked acquires do not count against it:
	// each parked acquire has one, bounded by what the client sent (and
	// max_waiters), and a grant among them is never refused for room.
	// Default DefaultMaxQueue.
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
	// awaitCtx ends the waits for an active (conn.awaitActive) at Close
	// before ctx ends the connections, so that their answers still go out.
	awaitCtx  context.Context
	stopAwait context.CancelFunc
	epoch     time.Time // the origin of now (with Go's monotonic reading)

	// releasers: per slot of key hashes, the connection whose reader is
	// releasing a key of that slot now and writes the grants its release
	// hands on (see handOn).
	releasers [releaserSlots]atomic.Pointer[conn]
	seed      maphash.Seed

	mu     sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[*conn]struct{}
	closed bool
	wg     sync.WaitGroup
	// awaits counts the connections' goroutines that wait for an active
	// (conn.awaitActive), which Close lets answer first.
	awaits sync.WaitGroup

	// batch is how many answers may wait for the reader's own write
	// (readerBatch, less with a small MaxQueue); pauseAt how many make the
	// reader pause (MaxQueue/2).
	batch, pauseAt int
}

// New returns a server for eng.
func New(eng *engine.Engine, cfg Config) *Server {
	if cfg.MaxQueue <= 0 {
		cfg.MaxQueue = DefaultMaxQueue
	}
	s := &Server{eng: eng, cfg: cfg, log: cfg.Logger, lns: map[net.Listener]struct{}{}, conns: map[*conn]struct{}{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.pauseAt = max(1, cfg.MaxQueue/2)
	s.batch = max(1, min(readerBatch, cfg.MaxQueue/4))
	s.auth = digests(cfg.AuthTokens)
	s.admin = digests(cfg.AdminTokens)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.awaitCtx, s.stopAwait = context.WithCancel(context.Background())
	s.epoch = time.Now()
	s.seed = maphash.MakeSeed()
	return s
}

// releaserSlots is the size of Server.releasers.
const releaserSlots = 64

// releaser is the slot of Server.releasers for key.
func (s *Server) releaser(key string) *atomic.Pointer[conn] {
	return &s.releasers[maphash.String(s.seed, key)%releaserSlots]
}

// instant is a reading of the monotonic clock: the time since the
// server's epoch. It times answers for the metrics.
type instant time.Duration

// now reads the monotonic clock alone. (time.Now reads the wall clock
// too, which costs about 0.4 µs on the project's VM, against 0.06 µs for
// time.Since: the reader took one for every line.)
func (s *Server) now() instant { return instant(time.Since(s.epoch)) }

// retryAccept reports whether an Accept error is passing: a timeout, or
// the process (or the system) out of file descriptors for a moment, as
// a burst of connections above RLIMIT_NOFILE makes it. Serve sleeps and
// accepts again, as net/http's server does, instead of ending (and with
// it the node).
func retryAccept(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
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
			if retryAccept(err) {
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
// queues, as when their clients go away. The acquires held back until an
// active is known (ActiveAwaiter) are answered first, within closeGrace:
// after a handoff, M with the successor's address; E unavailable if none
// became known by then. What a connection has queued (the E unavailable
// or M lines of its parked acquires, when the engine was closed or
// demoted first) is written out, each connection's writer bounded by a
// second (writeLoop); then the connection stops reading and stays open
// until its client has the answers in its socket (holdUntilDelivered: a
// close with the client's lines unread would reset it and drop them). A
// connection still open closeGrace after that is closed regardless. It waits for
// every goroutine of the server and is idempotent. It always returns nil
// (io.Closer's signature).
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for ln := range s.lns {
		ln.Close()
	}
	s.mu.Unlock()
	awaited := make(chan struct{})
	go func() {
		s.awaits.Wait()
		close(awaited)
	}()
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-awaited:
	case <-t.C:
	}
	s.stopAwait() // the waits left end: their acquires are answered (E unavailable)
	<-awaited     // into queues the writers still write
	s.cancel()    // every writer writes what is queued, then closes its socket
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	t.Reset(closeGrace)
	select {
	case <-done:
	case <-t.C:
		// A writer that waits for its lock behind a write the client
		// does not take: its socket ends it.
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
	}
	return nil
}

// closeGrace bounds how long Close lets connections write what they have
// queued before it closes their sockets (each writer's own bound is a
// second).
const closeGrace = 2 * time.Second

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
	if candidate == "" {
		return false, false // AUTH without its token
	}
	admin = tokenIn(s.admin, candidate)
	return admin || tokenIn(s.auth, candidate), admin
}

// authFailed is the message of a first-line AUTH with a token the node
// does not know (the connection is closed).
const authFailed = "the first line must be AUTH <token> with a valid token"

// reauthFailed is the message of a later AUTH with a token the node does
// not accept: the connection stays open with the rights it had (it said
// "the first line must be…", which a later line is not).
const reauthFailed = "not a valid token; the connection keeps the rights it had"

// conn is one client connection.
type conn struct {
	s      *Server
	nc     net.Conn
	ctx    context.Context // ends when the connection does: its waiters leave
	cancel context.CancelFunc

	// admin: the connection AUTHed with one of the admin_tokens. Only the
	// read loop touches it.
	admin bool
	// keys are the keys (as sent) of the connection's recent acquires,
	// for the answers of its releases and renewals. The reader's.
	keys keyCache
	// dispatched: a line has been dispatched (the first is checked for
	// an HTTP request's: httpRefusal). The reader's.
	dispatched bool

	mu     sync.Mutex
	queue  []answer
	closed bool // no more answers are taken
	linger bool // a fatal line ended the reader: close gently (see writeLoop)
	// unread: closed as a client that does not read its answers
	// (closeUnread): the writer writes nothing more, and closes gently
	// (see writeLoop).
	unread bool
	// readDone is closed when the reader has returned.
	readDone chan struct{}
	// chains holds, per key, the connection's acquire of it that runs
	// now (parked, or answered and not yet written); the ones waiting
	// their turn hang off it (request.after).
	chains  map[string]*request
	chained int // requests waiting their turn in chains
	// owed is how many answers in queue are those of parked acquires
	// (Done): bounded by the acquires the client sent, they never count
	// against MaxQueue.
	owed int
	// idling: the reader is dispatching and flushing from inside its
	// raw read of the socket (readDirect), which holds the socket: Close
	// would wait for it.
	idling atomic.Bool
	wake   chan struct{}

	// writing: someone holds the writing role (wmu) and looks at the
	// queue again before it lets go; reading: the reader is dispatching
	// the lines it has read and writes their answers itself after
	// (flushNow). Either way push does not wake the writer.
	writing, reading bool

	// collecting: the reader is releasing a key of the slot it holds in
	// Server.releasers; handed are the connections to whose queues the
	// release handed a grant, which it writes when the release returns
	// (handOn). Under hmu.
	hmu        sync.Mutex
	collecting bool
	handed     []*conn

	// wmu is the writing role: one goroutine at a time (the writer, or
	// the reader in flushNow) settles queued answers and writes
	// them, in queue order. The fields below are its holder's.
	wmu sync.Mutex
	// out holds the lines made and not yet written (from outBufs; nil
	// while there are none), pending the grants among them, werr the
	// write error that ends the connection.
	out     *[]byte
	pending []answer
	werr    error
	spare   []answer
	// scratch is the buffer for the lines the role holder makes
	// (acquires' answers, and okLine's), copied to out before the next
	// is made.
	scratch []byte
	peer    *peeker
	// check, while the reader holds the role from inside its read of the
	// socket, is its test that the client is still there (flushOut).
	check func() bool
	// The fields of a burst the client reads slowly (last: the ones
	// above keep their places). paused, under c.mu: the reader waits
	// for the role holder to take the queue (pause); the one that takes
	// it signals resume.
	paused bool
	resume chan struct{}
	// awaiting are the acquires held back until an active is known, each
	// its key's running one (await); awaitOn: a goroutine waits for
	// them (awaitActive). Under mu.
	awaiting []*request
	awaitOn  bool
	// wstart is when the writer's current blocking write of the socket
	// began (an instant, plus 1), 0 while it is in none: a paused reader
	// tells from it a client that reads nothing (writeBlocking).
	wstart atomic.Int64
}

// keyCache remembers recent keys as sent on a connection (a few, by a hash
// of their bytes), so that the answer of a release or renewal of one of
// them needs no copy of the key: a client releases the keys it acquired.
// Its table is made by the first release or renewal.
type keyCache struct {
	seed  maphash.Seed
	table *[keyCacheSize]string
}

// keyCacheSize is the number of entries of a keyCache.
const keyCacheSize = 16

func (k *keyCache) slot(s string) *string {
	return &k.table[maphash.String(k.seed, s)%keyCacheSize]
}

// add remembers s, a string of its own, once the table is made.
func (k *keyCache) add(s string) {
	if k.table != nil {
		*k.slot(s) = s
	}
}

// own returns s as a string of its own: the remembered one with its bytes,
// or a copy (then remembered).
func (k *keyCache) own(s string) string {
	if k.table == nil {
		k.seed = maphash.MakeSeed()
		k.table = new([keyCacheSize]string)
	}
	e := k.slot(s)
	if *e != s {
		*e = strings.Clone(s)
	}
	return *e
}

// answer is one line to write. A grant carries its Grant and id, so that
// it is abandoned (passed to the next waiter) if it cannot be written. A
// release or renewal that succeeded has no line: the role holder makes it
// (okLine) from op, rawKey and, for a renewal, g.
//
// An acquire's result (r set) is queued unsettled: the role holder waits for
// the log (AcquireResult.Settle), makes its line, and, when parked, starts
// the connection's next acquire of the key.
type answer struct {
	line    []byte
	granted bool
	g       engine.Grant
	id      string
	end     int // a pending grant's: where its line ends in conn.out

	r      *request
	res    engine.AcquireResult
	parked bool // answered through Done: the key's turn passes on after it

	// logged is the log index of a release's or renewal's change, which
	// the role holder waits for before it writes the answer (one wait for a
	// batch); op and rawKey make its
	// line, or the E line when the log cannot write it.
	logged engine.LogIndex
	// gen is a release's Engine.Generation as its change was made
	// (ReleaseNoWait); a renewal's as read just before its change (as
	// engine.Renew does): a reset in between makes Engine.Replaced report
	// true and the renewal unconfirmed, never the reverse.
	gen uint64
	// refused is a release's or renewal's refusal (engine.ErrNotHeld,
	// engine.ErrNotHolder) judged at logged: answered once the state it
	// rests on is written (engine.SettleRefusal).
	refused    error
	op, rawKey string
	start      instant // when its line arrived (metrics)
}

func (s *Server) newConn(nc net.Conn) *conn {
	c := &conn{s: s, nc: nc, chains: map[string]*request{}, wake: make(chan struct{}, 1), resume: make(chan struct{}, 1), readDone: make(chan struct{}), peer: newPeeker(nc)}
	c.ctx, c.cancel = context.WithCancel(s.ctx)
	return c
}

// readLoop reads and dispatches lines until the connection ends: on a
// plain TCP connection from inside the socket's raw read (readDirect),
// else through a bufio.Reader.
func (c *conn) readLoop() {
	defer c.s.wg.Done()
	defer close(c.readDone)
	defer c.cancel()
	defer func() {
		c.mu.Lock()
		c.reading = false
		c.mu.Unlock()
	}()
	authed := len(c.s.auth) == 0
	if c.peer.direct {
		c.readDirect(&authed)
		return
	}
	br := bufio.NewReaderSize(c.nc, MaxLine+2)
	for n := 1; ; n++ {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, bufio.ErrBufferFull) {
				c.tooLong(c.s.now())
			}
			return
		}
		if c.dispatch(line[:len(line)-1], &authed, c.s.now()) {
			return
		}
		if n%c.s.batch == 0 && c.pause() {
			// (A line adds one answer to the queue at most: it holds
			// pauseAt+batch, 3/4 of MaxQueue, at most from the reader.)
			return
		}
	}
}

// tooLong ends the connection for a line longer than MaxLine.
func (c *conn) tooLong(start instant) {
	c.fatal("-", "-", api.CodeInvalidArgument, "line: longer than "+strconv.Itoa(MaxLine)+" bytes", start)
}

// dispatch serves one request line (without its "\n"), which arrived at
// start, on the reader; *authed is whether the connection has AUTHed (or
// needs not). It reports whether the reader stops: a fatal line, or the
// connection ended.
func (c *conn) dispatch(line []byte, authed *bool, start instant) (stop bool) {
	if !c.dispatched {
		c.dispatched = true
		if a, ok := httpRefusal(line); ok {
			c.end(answer{line: a}, "-", api.CodeInvalidArgument, start)
			return true
		}
	}
	if n := len(line); n > MaxLine && !(n == MaxLine+1 && line[n-1] == '\r') {
		// (MaxLine counts the line without its "\r\n" or "\n": the
		// readers' buffers hold MaxLine+2 bytes for that.)
		c.tooLong(start)
		return true
	}
	r, err := parseView(line)
	if !*authed {
		valid, admin := false, false
		if err == nil && r.op == OpAuth {
			valid, admin = c.s.checkAuth(r.auth)
		}
		if !valid {
			c.fatal(OpAuth, "", api.CodeUnauthorized, authFailed, start)
			return true
		}
		*authed, c.admin = true, admin
		c.send(answer{line: []byte("AUTH OK\n")}, OpAuth, "OK", start)
		return false
	}
	if err != nil {
		var le *lineError
		errors.As(err, &le)
		if le.fatal {
			c.fatal(le.op, le.rawKey, api.CodeInvalidArgument, le.Error(), start)
			return true
		}
		a := errorLine(le.op, le.rawKey, api.CodeInvalidArgument, le.Error())
		if le.op == OpAcquire {
			c.acquireInTurn(&request{op: OpAcquire, rawKey: le.rawKey, key: le.rawKey}, &a, start)
		} else {
			c.send(a, le.op, api.CodeInvalidArgument, start)
		}
		return false
	}
	switch r.op {
	case OpAuth:
		c.reauth(&r, start)
	case OpPing:
		// Answered by the reader, on any node, in any role: the client's
		// liveness check (a paused node answers nothing).
		c.send(answer{line: []byte(OpPing + " " + r.rawKey + " OK\n")}, OpPing, "OK", start)
	case OpAcquire:
		// Only an acquire outlives its line (a copy: r itself stays on
		// the stack for the other ops), with its strings.
		ar := requests.Get().(*request)
		*ar = r
		ar.own(line)
		c.keys.add(ar.rawKey)
		c.acquireInTurn(ar, nil, start)
	case OpCancel:
		c.cancelAcquire(&r, start)
	case OpRelease, OpRenew:
		// Of a release or renewal only the key as sent outlives the line
		// (in its answer); the engine copies what it keeps. It is most
		// often the key of an acquire this connection sent.
		k := r.rawKey
		r.rawKey = c.keys.own(k)
		if r.key == k {
			r.key = r.rawKey
		}
		if r.op == OpRelease {
			c.release(&r, start)
		} else {
			c.renew(&r, start)
		}
	}
	return c.ctx.Err() != nil
}

// fatal queues an error line and ends the connection after it: nothing
// more is read.
func (c *conn) fatal(op, rawKey, code, msg string, start instant) {
	var a answer
	if rawKey == "" {
		a.line = []byte(op + " E " + code + " " + msg + "\n")
	} else {
		a = errorLine(op, rawKey, code, msg)
	}
	c.end(a, op, code, start)
}

// end queues a, the last answer, and ends the connection after it
// (fatal).
func (c *conn) end(a answer, op, code string, start instant) {
	c.mu.Lock()
	c.linger = true
	c.mu.Unlock()
	c.send(a, op, code, start)
	c.cancel()
}

// send queues a for the writer and reports whether it was taken. A full
// queue closes the connection (its waiters leave); an answer not taken
// that carries a grant is abandoned.
func (c *conn) send(a answer, op, outcome string, start instant) bool {
	if a.logged == 0 {
		// (An answer that waits for the log is observed by the role holder,
		// with its outcome once the log has written it, or not.)
		c.observe(op, outcome, start)
	}
	if !c.push(a) {
		if a.granted {
			c.s.eng.Abandon(a.g, a.id)
		}
		return false
	}
	return true
}

// push queues a, and wakes the writer unless a goroutine will look at
// the queue anyway (c.writing, c.reading). It reports false, taking
// nothing, when the connection is closed or has MaxQueue answers (and
// acquires waiting their turn) queued; a full queue closes it (overflow).
func (c *conn) push(a answer) bool {
	c.mu.Lock()
	taken, full, wake := c.queueLocked(a)
	c.mu.Unlock()
	c.afterQueue(full, wake)
	return taken
}

// queueLocked is push with c.mu held: it appends a to the queue unless
// the connection is closed or full (full: MaxQueue answers and acquires
// waiting their turn); wake is whether the writer must be woken. The
// caller passes full and wake to afterQueue once it has released c.mu.
func (c *conn) queueLocked(a answer) (taken, full, wake bool) {
	if c.closed || c.unreadLocked() >= c.s.cfg.MaxQueue {
		return false, !c.closed, false
	}
	c.queue = append(c.queue, a)
	return true, false, c.wakesWriterLocked()
}

// unreadLocked is what counts against MaxQueue (c.mu held): the answers
// waiting to be written but those of parked acquires (owed), and the
// acquires waiting their turn.
func (c *conn) unreadLocked() int { return len(c.queue) - c.owed + c.chained }

// afterQueue ends a queueLocked, without c.mu: a full queue closes the
// connection (overflow), an answer the writer must see wakes it.
func (c *conn) afterQueue(full, wake bool) {
	if full {
		c.overflow()
	}
	if wake {
		c.poke()
	}
}

// queued is the number of answers waiting to be written.
func (c *conn) queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// readerBatch is how many answers may wait for the reader's own write
// (while it still has lines to read) before the writer is woken for them
// (Server.batch: fewer with a MaxQueue under 4*readerBatch).
const readerBatch = 256

// wakesWriterLocked reports whether an answer just queued must wake the
// writer (c.mu held): not while someone holds the writing role (it looks
// at the queue again before it lets go), nor while the reader still has
// lines to read (it writes their answers when it runs out), unless
// Server.batch answers wait already: the writer then starts on them, so
// that a burst of lines larger than MaxQueue from a client that reads
// its answers is not taken for a client that does not read them (and the
// reader pauses if they still wait: pause).
func (c *conn) wakesWriterLocked() bool {
	return !c.writing && (!c.reading || len(c.queue) >= c.s.batch)
}

// stallTime is how long a paused reader (pause) lets the writer's socket
// take nothing before it closes the connection as one whose client does
// not read its answers.
const stallTime = time.Second

// stallChunk is the most the writer writes in one blocking write once the
// socket did not take all at once (writeBlocking): a write that waits
// stallTime took less than that.
const stallChunk = 16 << 10

// pause holds the reader back, between two lines, while Server.pauseAt
// answers or more wait to be written: the client has not read the ones
// before them yet, and the reader takes none of its lines meanwhile, so
// that a burst larger than MaxQueue from a client that reads its answers
// slowly is not taken for one that does not read them. It returns false
// once the role holder has taken the queue (turn) and the reader goes on;
// true when the connection ends meanwhile, or when the writer's socket
// took nothing for stallTime (a client that does not read: it closes the
// connection, and its waiters leave). The reader calls it holding no
// lock and not the writing role; it costs one hold of c.mu when the queue
// is short.
func (c *conn) pause() (stop bool) {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for c.ctx.Err() == nil {
		c.mu.Lock()
		if closed := c.closed; closed || len(c.queue) < c.s.pauseAt {
			c.paused = false
			c.mu.Unlock()
			return closed
		}
		c.paused = true
		n := len(c.queue)
		c.mu.Unlock()
		c.poke() // whoever holds the role may be past its last look
		left := stallTime
		if ws := c.wstart.Load(); ws != 0 {
			left -= time.Duration(c.s.now() - instant(ws-1))
		}
		if left <= 0 {
			c.closeUnread("queued", n, "unread_for", stallTime.String())
			return true
		}
		if t == nil {
			t = time.NewTimer(left)
		} else {
			t.Reset(left)
		}
		select {
		case <-c.resume:
		case <-t.C:
		case <-c.ctx.Done():
		}
	}
	return true
}

// overflow closes a connection that has MaxQueue answers waiting to be
// written (or acquires waiting their turn): its waiters leave.
func (c *conn) overflow() { c.closeUnread("queued", c.s.cfg.MaxQueue) }

// closeUnread closes a connection whose client does not read its answers
// (overflow, pause), logging why (attrs, slog's key-value pairs): its
// waiters leave, the answers it could not write are abandoned, and the
// writer closes the connection gently (writeLoop), so that the answers
// already in its socket still reach the client if it reads again. A
// close with the client's lines unread in the socket would reset the
// connection instead, and the reset drops what the socket holds: grants
// no client would learn of, held by nobody until their leases ran out
// (found by a tester: 67,365 of them, with 60 s leases).
func (c *conn) closeUnread(attrs ...any) {
	c.mu.Lock()
	first := !c.closed
	c.closed, c.unread = true, true
	c.mu.Unlock()
	if !first {
		return
	}
	c.s.log.Warn(unreadMsg, append([]any{"remote", c.nc.RemoteAddr().String()}, attrs...)...)
	// A deadline in the past ends the reader's read (maybe its raw read
	// of the socket, which Close would wait for) and a write that waits
	// for room; the writer closes the connection as it ends (c.cancel).
	_ = c.nc.SetDeadline(time.Unix(1, 0))
	c.cancel()
}

// unreadMsg is the log message of a connection closed because its client
// does not read its answers.
const unreadMsg = "native connection closed: it does not read its answers"

// writeLoop writes queued answers that the reader does not write itself
// (see flushNow) until the connection ends, then writes what is
// left, withdraws the connection's parked acquires, abandons the grants it
// could not deliver and closes the connection.
func (c *conn) writeLoop() {
	defer c.s.wg.Done()
	done := false
	for !done {
		select {
		case <-c.wake:
		case <-c.ctx.Done():
			done = true
			c.mu.Lock()
			c.closed = true
			unread := c.unread
			c.mu.Unlock()
			if !unread {
				// What the client was told before it went (or before a
				// fatal line) still goes out, briefly. (A client that
				// does not read has made room for none of it for a
				// second: it is abandoned below.)
				_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
			}
		}
		c.wmu.Lock()
		c.mu.Lock()
		c.writing = true
		c.mu.Unlock()
		c.turn(true)
		failed := c.werr != nil
		c.wmu.Unlock()
		if failed {
			break
		}
	}
	c.mu.Lock()
	c.closed = true
	var parked []*engine.Waiting
	for _, r := range c.chains {
		if r.parked != nil {
			parked = append(parked, r.parked)
		}
	}
	c.chains, c.chained = nil, 0
	c.mu.Unlock()
	// The connection's waiters leave their queues; a result delivered
	// before is in the queue, taken below (Done refuses the later ones).
	for _, p := range parked {
		p.Cancel()
	}
	c.wmu.Lock()
	c.mu.Lock()
	left := c.queue
	c.queue, c.owed = nil, 0
	c.mu.Unlock()
	// Grants written to the buffer and not sent (a write that failed, or
	// the reader's short write the loop could not finish) are released.
	c.deliver(-1)
	c.putOut()
	c.mu.Lock()
	unread := c.unread
	linger := c.linger && c.werr == nil
	c.mu.Unlock()
	c.wmu.Unlock()
	for _, a := range left {
		switch {
		case a.r != nil:
			a.res.Abandon()
		case a.granted:
			c.s.eng.Abandon(a.g, a.id)
		}
	}
	c.cancel()
	switch {
	case linger:
		c.closeGently()
	case unread || c.s.ctx.Err() != nil:
		// Closed for not reading, or the server closes: the answers in
		// the socket still reach the client. The reader first returns
		// (its read ends at the deadline closeUnread set, or at this
		// one), so that the lines read from here on are discarded, not
		// dispatched.
		_ = c.nc.SetReadDeadline(time.Unix(1, 0))
		t := time.NewTimer(lingerTime)
		select {
		case <-c.readDone:
			c.holdUntilDelivered()
		case <-t.C:
		}
		t.Stop()
	}
	c.nc.Close()
	c.s.mu.Lock()
	delete(c.s.conns, c)
	c.s.mu.Unlock()
}

// flushNow takes the writing role if it is free and writes what is
// queued without waiting for the socket (turn); if the role is taken, or
// the socket did not take the last write, it wakes the writer. The
// reader calls it (reader true: it clears c.reading) once it has
// dispatched every complete line it had read, rather than wake the
// writer (only on a connection it can write to without waiting:
// c.peer.direct, not TLS); so does a reader that handed a grant to this
// connection (handOn). check, if not nil, replaces the peek before
// grants are written (see flushOut): the reader's read of the socket
// from inside its raw read (readDirect's check).
func (c *conn) flushNow(reader bool, check func() bool) {
	locked := c.wmu.TryLock()
	if locked && c.out != nil && len(*c.out) > 0 {
		// The socket did not take the last write: the writer, which
		// waits for it, writes what follows too (the queue grows
		// meanwhile, up to MaxQueue).
		c.wmu.Unlock()
		locked = false
	}
	if !locked {
		c.mu.Lock()
		if reader {
			c.reading = false
		}
		queued := len(c.queue) > 0
		c.mu.Unlock()
		if queued {
			// Whoever holds the role may be past its last look at the
			// queue.
			c.poke()
		}
		return
	}
	c.mu.Lock()
	if reader {
		c.reading = false
	}
	c.writing = true
	c.mu.Unlock()
	c.check = check
	c.turn(false)
	c.check = nil
	c.wmu.Unlock()
}

// turn writes what is queued, holding the writing role (c.wmu, with
// c.writing set): it settles and formats the queued answers into c.out
// and writes them out, until the queue is empty; it clears c.writing
// then (or on a write error, which ends the connection). With block
// false (the reader's turn) the write does not wait for the socket: what
// the socket cannot take now stays in c.out for the writer, which is
// woken.
func (c *conn) turn(block bool) {
	if block {
		// The writer lets the goroutines that are about to answer
		// (releases handing on, the reader's next line) run once before
		// it takes the queue: their answers, and their log records, then
		// leave in the same writes. The reader's turn comes when it has
		// nothing more to read.
		runtime.Gosched()
	}
	for c.werr == nil {
		c.mu.Lock()
		if len(c.queue) == 0 {
			if c.out == nil || len(*c.out) == 0 {
				c.writing = false
				c.mu.Unlock()
				c.putOut()
				return
			}
			c.mu.Unlock()
			wrote := c.flushOut(block)
			if !wrote {
				// The socket is full: the writer goes on.
				c.mu.Lock()
				c.writing = false
				c.mu.Unlock()
				c.poke()
				return
			}
			continue
		}
		// The two slices take turns: senders append to one while this
		// loop writes the other.
		batch := c.queue
		c.queue, c.owed = c.spare[:0], 0
		if c.paused {
			c.paused = false
			select {
			case c.resume <- struct{}{}:
			default:
			}
		}
		c.mu.Unlock()
		c.format(batch)
		c.spare = batch
	}
	c.mu.Lock()
	c.writing = false
	c.mu.Unlock()
}

// format settles the answers of batch and appends their lines to c.out
// (c.wmu held), remembering the grants among them (c.pending) until they
// are written. It starts the connection's next acquire of a key whose
// parked acquire it answered.
func (c *conn) format(batch []answer) {
	if c.out == nil {
		c.out = outBufs.Get().(*[]byte)
	}
	var top, topGrant engine.LogIndex
	for i := range batch {
		top = max(top, batch[i].logged)
		if batch[i].r != nil {
			topGrant = max(topGrant, batch[i].res.LogIndex())
		}
	}
	// One wait for the batch's changes: a written index means every
	// lower one is written too. (A grant's own wait, in settle, then
	// returns at once; if the log fails, each answer learns it from its
	// own wait.)
	// The batch is gathered: the log's writer need not wait for more.
	logErr := c.s.eng.WaitLoggedGathered(max(top, topGrant))
	// The batch's answers are ready now, at once: one reading of the
	// clock times them all for the metrics.
	end := c.s.now()
	for i := range batch {
		a := &batch[i]
		if a.logged > 0 && a.refused != nil {
			op, start := a.op, a.start
			var outcome, msg string
			outcome, _, msg, _ = errcode.Of(c.s.eng.SettleRefusal(a.refused, a.logged, a.gen))
			*a = errorLine(op, a.rawKey, outcome, msg)
			c.observeAt(end, op, outcome, start)
		} else if a.logged > 0 {
			op, start, outcome := a.op, a.start, "OK"
			if logErr != nil {
				if err := c.s.eng.WaitLogged(a.logged); err != nil {
					var msg string
					outcome, _, msg, _ = errcode.Of(err)
					*a = errorLine(op, a.rawKey, outcome, msg)
				}
			}
			if a.line == nil && c.s.eng.Replaced(a.gen) {
				// As handlers: a release or renewal is confirmed only
				// in the state it was made in (engine.Release,
				// engine.Renew): a node that stepped down since may
				// have been replaced by an active that never got it.
				var msg string
				outcome, _, msg, _ = errcode.Of(engine.ErrReplaced)
				*a = errorLine(op, a.rawKey, outcome, msg)
			} else if a.line == nil && op == OpRenew {
				// A renewal is confirmed only by a node that knows it
				// is still the active (Gate.HoldsBack); one that waited
				// out a pause may have been replaced by a standby that
				// never got it and gave the lock away. Nor once its
				// lease ran out while it waited (engine.Renew).
				if gate := c.s.cfg.Gate; gate != nil && gate.HoldsBack(a.g.Token) {
					*a, outcome = c.movedAnswer(&request{op: op, rawKey: a.rawKey})
				} else if err := c.s.eng.RenewalStands(a.g.Key, a.g.Token); err != nil {
					var msg string
					outcome, _, msg, _ = errcode.Of(err)
					*a = errorLine(op, a.rawKey, outcome, msg)
				}
			}
			c.observeAt(end, op, outcome, start)
		}
		var then *request // the acquire whose key's turn passes on after a
		var free *request // an acquire answered at once, done with once settled
		if r := a.r; r != nil {
			parked := a.parked
			if c.settle(a, end) {
				*a = answer{}
				c.run(r) // resumes its place
				continue
			}
			if parked {
				then = r
			} else {
				// Its turn passed on when its answer was queued
				// (queueResult), and the engine did not keep it (it did
				// not park): this answer was its last holder.
				free, a.r = r, nil
			}
		}
		if a.line == nil {
			a.line = c.okLine(a)
		}
		*c.out = append(*c.out, a.line...)
		if a.granted {
			a.end = len(*c.out)
			c.pending = append(c.pending, *a)
		}
		*a = answer{}
		if free != nil {
			*free = request{}
			requests.Put(free)
		}
		if then != nil {
			c.run(c.next(then))
		}
	}
}

// requests are the acquires' requests that were answered at once, for
// the next lines (an acquire's request is the largest allocation of a
// cycle). One that parked is left to the garbage collector: its Waiting
// may still point at it.
var requests = sync.Pool{New: func() any { return new(request) }}

// flushOut writes c.out (c.wmu held): blocking, or, with block false, as
// much as the socket takes now. It reports whether all of it was
// written; a write error sets c.werr and ends the connection. A grant in
// it is delivered once its line is written, abandoned if a write fails
// before that (deliver). It peeks at the socket first when it writes
// grants: a log wait may have come between the reader's last read and
// this write.
func (c *conn) flushOut(block bool) bool {
	out := *c.out
	if len(c.pending) > 0 && c.peerGone() {
		// The client went away as these grants were made: the reader has
		// not seen it yet, a write would still succeed.
		c.werr = errPeerGone
	}
	var n int
	if c.werr == nil {
		if block {
			n, c.werr = c.writeBlocking(out)
		} else {
			n, c.werr = c.peer.writeNow(out)
		}
	}
	n = max(n, 0)
	c.deliver(n)
	if c.werr != nil {
		c.deliver(-1)
		c.cancel()
		return false
	}
	if n < len(out) {
		*c.out = out[:copy(out, out[n:])]
		return false
	}
	*c.out = out[:0]
	return true
}

// writeBlocking writes b, waiting for the socket as long as it takes
// (the writer's flushOut, c.wmu held): on a plain TCP connection first as
// much as the socket takes at once (a raw write, as the reader's), then
// the rest in blocking writes of stallChunk bytes at most, each marked in
// c.wstart while it lasts, so that a paused reader can tell a client that
// reads nothing from one that reads slowly (pause). It returns the bytes
// written and the error that ended the write.
func (c *conn) writeBlocking(b []byte) (int, error) {
	n := 0
	if c.peer.direct {
		m, err := c.peer.writeNow(b)
		n = max(m, 0)
		if err != nil || n == len(b) {
			return n, err
		}
	}
	for n < len(b) {
		c.wstart.Store(int64(c.s.now()) + 1)
		m, err := c.nc.Write(b[n:min(len(b), n+stallChunk)])
		c.wstart.Store(0)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// peerGone reports whether the client has closed its side of the
// connection (c.wmu held): by c.check on the reader's flush, else by a
// peek.
func (c *conn) peerGone() bool {
	if c.check != nil {
		return c.check()
	}
	return c.peer.peerGone()
}

// deliver ends the pending grants whose lines are within the first n
// bytes of c.out, which were written to the client (metrics), and moves
// the others' ends back by n (c.wmu held); n -1: none was written, and
// every pending grant is released to the next waiter. A write that took
// part of c.out thus delivers the grants it carried, whatever becomes of
// the rest.
func (c *conn) deliver(n int) {
	k := 0
	for _, a := range c.pending {
		switch {
		case n < 0:
			c.s.eng.Abandon(a.g, a.id)
		case a.end <= n:
			if m := c.s.cfg.Metrics; m != nil {
				m.Delivered(a.g.Key, a.g.Token)
			}
		default:
			a.end -= n
			c.pending[k] = a
			k++
		}
	}
	clear(c.pending[k:])
	c.pending = c.pending[:k]
}

// putOut returns c.out to outBufs once it is empty (c.wmu held): an idle
// connection holds no write buffer.
func (c *conn) putOut() {
	if c.out != nil && (len(*c.out) == 0 || c.werr != nil) {
		*c.out = (*c.out)[:0]
		if cap(*c.out) <= maxOutBuf {
			outBufs.Put(c.out)
		}
		c.out = nil
	}
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

// unreadHold is how long a connection closed for not reading its answers
// stays open for the answers already in its socket (holdUntilDelivered)
// while its client reads none of them: a client that has read nothing
// for that long is treated as a holder that died, whose grants its
// leases take back. Each time the client's TCP acknowledges more of
// them, it starts again.
const unreadHold = 30 * time.Second

// holdUntilDelivered ends a connection closed for not reading its answers
// (closeUnread), or by the server's Close, without losing the answers in
// its socket (its reader has returned): it sends FIN after them and reads
// and discards what the client sends, until the client's TCP has
// acknowledged every byte (peeker.unacked is 0: then a reset no longer
// takes them from the client), the client closes, unreadHold passes
// without the client's TCP acknowledging any more of them, or Close,
// closeGrace after the writers ended, closes the socket. Closing with the
// client's bytes unread would reset the connection, and a reset drops
// what the socket has not sent: grants held by nobody until their leases
// (found by testers: after a close at once, after one 500 ms later by a
// client still sending, 67,000 of 69,000 grants, after one 30 s after
// the cut by a client reading since 10 s, 50,663, and at shutdown 32,000
// to 66,000). A system that cannot tell what was acknowledged waits
// lingerTime, as after a fatal line. Over TLS the FIN comes without a
// close_notify alert (the connection cannot write one): the client reads
// the answers, then an unclean end.
func (c *conn) holdUntilDelivered() {
	nc := c.nc
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	cw, ok := nc.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	start := time.Now()
	progress, last := start, -1 // when the unacknowledged bytes last fell, and to what
	buf := make([]byte, 32<<10)
	for {
		n, ok := c.peer.unacked()
		switch {
		case !ok && time.Since(start) >= lingerTime, ok && n == 0:
			return
		case ok && (last < 0 || n < last):
			progress, last = time.Now(), n
		case ok && time.Since(progress) >= unreadHold:
			return
		}
		_ = nc.SetReadDeadline(time.Now().Add(lingerTime / 5))
		if _, err := nc.Read(buf); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return // the client closed (or reset) the connection
		}
	}
}

// errPeerGone ends a connection whose client has closed it.
var errPeerGone = errors.New("native: the client closed the connection")

// outBufs are the write buffers of the connections (conn.out), each held
// while answers wait to be written only.
var outBufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

// maxOutBuf is the largest write buffer put back in outBufs.
const maxOutBuf = 64 << 10

// acquireInTurn starts r (or, with pre, answers it with pre) once the
// connection's earlier acquires of the same key are answered: until then
// it waits on the connection, behind them (no goroutine of its own).
func (c *conn) acquireInTurn(r *request, pre *answer, start instant) {
	r.pre, r.start, r.c = pre, start, c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return // the connection is ending: nobody reads the answer
	}
	if run := c.chains[r.rawKey]; run != nil {
		if c.unreadLocked() >= c.s.cfg.MaxQueue {
			// Acquires piling up behind a parked one count against the
			// same bound as unread answers.
			c.mu.Unlock()
			c.overflow()
			return
		}
		run.after = append(run.after, r)
		c.chained++
		c.mu.Unlock()
		return
	}
	if pre != nil {
		c.mu.Unlock()
		c.send(*pre, OpAcquire, api.CodeInvalidArgument, start)
		return
	}
	c.chains[r.rawKey] = r
	c.mu.Unlock()
	c.run(r)
}

// run starts the acquire r, the one of its key that the connection runs
// now (c.chains), and, each time one is answered at once, the next of the
// same key. It runs on the reader, or on the role holder when a parked acquire
// was answered; never with c.mu or an engine lock held.
func (c *conn) run(r *request) {
	for r != nil {
		if atomic.LoadUint32(&r.cancelled) != 0 {
			// Withdrawn by a C line before it joined the queue.
			c.send(c.cancelledLine(r), OpAcquire, "T", r.start)
			r = c.next(r)
			continue
		}
		if r.pre != nil {
			c.send(*r.pre, OpAcquire, api.CodeInvalidArgument, r.start)
		} else if moved, awaits := c.notServingAcquire(r); awaits {
			return // runs again once an active is known (await)
		} else if !moved {
			// (NoTicket: M carries no ticket, so a handoff's successor
			// keeps no place for an acquire without an id.)
			req := engine.AcquireRequest{Key: r.key, Lease: r.lease, Wait: r.wait, ID: r.id, Owner: r.owner, Mode: r.mode, Limit: r.limit, NoTicket: true}
			res, p := c.s.eng.AcquireTo(req, r)
			if p != nil {
				c.mu.Lock()
				closed := c.closed
				r.parked = p
				// (Read in the same hold as parked is set: either this or
				// cancelAcquire withdraws it, never both.)
				cancelled := atomic.LoadUint32(&r.cancelled) != 0
				c.mu.Unlock()
				if closed {
					// The writer's sweep may be over: this acquire leaves
					// here. (If Cancel fails, Done has run, and either
					// queued the answer or refused it.)
					p.Cancel()
				} else if cancelled && p.Cancel() {
					// A C line came while it was being started (its
					// parked was not set yet): withdrawn here.
					c.send(c.cancelledLine(r), OpAcquire, "T", r.start)
					r = c.next(r)
					continue
				}
				return // parked: Done answers it
			}
			n, ok := c.queueResult(r, res)
			if !ok {
				return
			}
			r = n
			continue
		}
		r = c.next(r)
	}
}

// cancelAcquire serves "C <key> <id>" (r): the connection's acquire of
// the key with that id, parked in the key's queue or waiting its turn
// behind another of the connection's acquires of the key, is withdrawn
// as if the connection had closed (engine Waiting.Cancel) and answered
// "A <key> T" in its turn; one answered already (or unknown) is left as
// it is. Either way the line is answered "C <key> OK".
func (c *conn) cancelAcquire(r *request, start instant) {
	var p *engine.Waiting
	var head *request
	unawaited := false // head waited for an active (await), and waits no more
	// withdraw marks the acquire with r's id in run's chain, and reports
	// whether it found one.
	withdraw := func(run *request) bool {
		for i := -1; i < len(run.after); i++ {
			a := run
			if i >= 0 {
				a = run.after[i]
			}
			if a.id == r.id && atomic.LoadUint32(&a.cancelled) == 0 {
				atomic.StoreUint32(&a.cancelled, 1)
				if i < 0 {
					p, head = a.parked, a
					unawaited = c.unawaitLocked(a)
				}
				return true
			}
		}
		return false
	}
	c.mu.Lock()
	if run := c.chains[r.rawKey]; run == nil || !withdraw(run) {
		// C names a lock: the acquire may have spelled its key otherwise
		// (chains go by the key field as sent, as answers are matched).
		for raw, run := range c.chains {
			if raw != r.rawKey && run.key == r.key && withdraw(run) {
				break
			}
		}
	}
	c.mu.Unlock()
	line := []byte(OpCancel + " " + r.rawKey + " OK\n")
	if unawaited || (p != nil && p.Cancel()) {
		// Withdrawn before it was answered: its answer is this T, and
		// the key's turn passes on.
		c.send(c.cancelledLine(head), OpAcquire, "T", head.start)
		c.send(answer{line: line}, OpCancel, "OK", start)
		c.run(c.next(head))
		return
	}
	// Not parked yet (it runs on another goroutine, or waits its turn):
	// run answers it T when it comes to it; or answered already.
	c.send(answer{line: line}, OpCancel, "OK", start)
}

// cancelledLine is the answer of an acquire withdrawn by a C line.
func (c *conn) cancelledLine(r *request) answer {
	return answer{line: []byte(OpAcquire + " " + r.rawKey + " T\n")}
}

// next ends r's turn: it returns the connection's next acquire of the same
// key (now the running one), or nil when there is none.
func (c *conn) next(r *request) *request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nextLocked(r)
}

// nextLocked is next with c.mu held.
func (c *conn) nextLocked(r *request) *request {
	if len(r.after) == 0 || c.closed {
		if c.chains[r.rawKey] == r {
			delete(c.chains, r.rawKey)
		}
		c.chained -= len(r.after)
		r.after = nil
		return nil
	}
	n := r.after[0]
	n.after = r.after[1:]
	r.after = nil
	c.chains[r.rawKey] = n
	c.chained--
	return n
}

// Done is AcquireTo's callback for r (engine.Receiver): it runs with the
// key's shard locked (it takes c.mu and nothing else) and queues the
// result for the writer, which settles and answers it and then starts
// the connection's next acquire of the key. It refuses the result (a
// grant is then handed on by the engine) only when the connection is
// closed: a full queue takes it too (owed), as each parked acquire has
// one answer, and a client that reads slowly is not closed for the grants
// its own acquires were made.
func (r *request) Done(res engine.AcquireResult) bool {
	c := r.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.queue = append(c.queue, answer{r: r, res: res, parked: true})
	c.owed++
	wake := c.wakesWriterLocked()
	c.mu.Unlock()
	if wake && c.peer.direct {
		// A grant handed on by a release that a reader is making now:
		// that reader writes it when its release returns, rather than
		// wake this connection's writer.
		if rel := c.s.releaser(r.key).Load(); rel != nil && rel != c {
			rel.hmu.Lock()
			if rel.collecting {
				rel.handed = append(rel.handed, c)
				wake = false
			}
			rel.hmu.Unlock()
		}
	}
	if wake {
		c.poke()
	}
	return true
}

// queueResult queues the result of r's acquire, which ended at once, for
// the writer to settle and answer, and ends r's turn (next: it returns
// the connection's next acquire of the key) in the same hold of c.mu;
// false when the connection is closed or full (a grant is abandoned).
func (c *conn) queueResult(r *request, res engine.AcquireResult) (*request, bool) {
	c.mu.Lock()
	taken, full, wake := c.queueLocked(answer{r: r, res: res})
	var n *request
	if taken {
		n = c.nextLocked(r)
	}
	c.mu.Unlock()
	c.afterQueue(full, wake)
	if !taken {
		res.Abandon()
	}
	return n, taken
}

// poke wakes the writer.
func (c *conn) poke() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// settle turns the result of r's acquire into its answer line, on the
// writer: it waits until a grant is written to the log (engine contract),
// and answers T, M or E as the HTTP API would. It reports restart when the
// acquire is to run again (a poll_timeout with an id: the native
// connection has no proxy to cut it, so the waiter resumes its place).
// end is when the answer was made, for the metrics.
func (c *conn) settle(a *answer, end instant) (restart bool) {
	r := a.r
	g, err := a.res.Settle()
	switch {
	case errors.Is(err, engine.ErrPollTimeout) && r.id != "":
		return true
	case errors.Is(err, engine.ErrPollTimeout):
		// Without an id the engine dropped the waiter: the place is gone,
		// not kept as the code's usual message says (handlers.writeError
		// says the same over HTTP).
		*a = errorLine(r.op, r.rawKey, api.CodePollTimeout, "the poll ended early; this request had no id, so its place in the queue was not kept: repeat it (with id=, a repeat resumes the place)")
		c.observeAt(end, r.op, api.CodePollTimeout, r.start)
	case a.parked && (errors.Is(err, engine.ErrMoved) || errors.Is(err, engine.ErrNotActive)) && c.awaitsAgain(r):
		// Parked here when this node stopped being the active (a
		// handoff), and the new active is not known yet: it runs again
		// (run), held back until one is (await), rather than answered E
		// unavailable while the new active may serve a millisecond later.
		return true
	case errors.Is(err, engine.ErrTimeout) && c.s.cfg.Gate != nil && c.s.cfg.Gate.HoldsBack(0):
		// As handlers: the wait ran out on a node that has just resumed
		// from a pause (or left the active role since), whose active may
		// grant the waiter's place; the client repeats there.
		*a = errorLine(r.op, r.rawKey, api.CodeUnavailable, msgResumed)
		c.observeAt(end, r.op, api.CodeUnavailable, r.start)
	case errors.Is(err, engine.ErrTimeout):
		a.line = append(append(append(c.scratch[:0], "A "...), r.rawKey...), " T\n"...)
		c.scratch = a.line[:0]
		c.observeAt(end, r.op, "T", r.start)
	case err != nil:
		var outcome string
		*a, outcome = c.errorAnswer(r, err)
		c.observeAt(end, r.op, outcome, r.start)
	case c.s.cfg.Gate != nil && c.s.cfg.Gate.HoldsBack(g.Token):
		// As handlers: granted by this node's own timers the moment it
		// resumed from a pause (Gate.HoldsBack). The client is told to
		// retry; the grant stays for a repeat with the same id.
		*a = errorLine(r.op, r.rawKey, api.CodeUnavailable, msgResumed)
		c.observeAt(end, r.op, api.CodeUnavailable, r.start)
		if r.id == "" {
			// As handlers: nobody can ever claim a grant without an id,
			// so it is released at once, not held for its lease.
			c.s.eng.Abandon(g, "")
		}
	default:
		line := append(append(append(c.scratch[:0], "A "...), r.rawKey...), " OK "...)
		a.line = appendGrant(line, g)
		c.scratch = a.line[:0]
		a.granted, a.g, a.id = true, g, r.id
		c.observeAt(end, r.op, "OK", r.start)
	}
	return false
}

// okLine makes, in the role holder's scratch buffer, the line of a release or
// a renewal that succeeded: "R <key> OK" or "N <key> OK <grant>". They
// are made here, not by the reader, so that no line is allocated for them.
func (c *conn) okLine(a *answer) []byte {
	line := append(append(append(append(c.scratch[:0], a.op...), ' '), a.rawKey...), " OK"...)
	if a.op == OpRenew {
		line = appendGrant(append(line, ' '), a.g)
	} else {
		line = append(line, '\n')
	}
	c.scratch = line[:0]
	return line
}

// observe records an answer, queued now, in the metrics.
func (c *conn) observe(op, outcome string, start instant) {
	if m := c.s.cfg.Metrics; m != nil {
		c.observeAt(c.s.now(), op, outcome, start)
	}
}

// observeAt records an answer made at end in the metrics.
func (c *conn) observeAt(end instant, op, outcome string, start instant) {
	if m := c.s.cfg.Metrics; m != nil {
		m.ObserveNative(op, outcome, time.Duration(end-start))
	}
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
// not); an unknown or missing one is E unauthorized and changes nothing.
// A node without any token accepts every AUTH that carries a token, as it
// always did.
func (c *conn) reauth(r *request, start instant) {
	if r.auth != "" && len(c.s.auth) == 0 && len(c.s.admin) == 0 {
		c.send(answer{line: []byte("AUTH OK\n")}, OpAuth, "OK", start)
		return
	}
	valid, admin := c.s.checkAuth(r.auth)
	if !valid {
		c.send(answer{line: []byte("AUTH E " + api.CodeUnauthorized + " " + reauthFailed + "\n")}, OpAuth, api.CodeUnauthorized, start)
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

func (c *conn) release(r *request, start instant) {
	r.start = start
	if c.notServing(r) {
		return
	}
	var idx engine.LogIndex
	var gen uint64
	var err error
	if r.force && !c.mayForce() {
		c.send(errorLine(r.op, r.rawKey, api.CodeForbidden, "a forced release needs one of the node's admin_tokens (AUTH <token>)"), r.op, api.CodeForbidden, start)
		return
	}
	slot := c.s.releaser(r.key)
	mine := slot.CompareAndSwap(nil, c)
	if mine {
		c.hmu.Lock()
		c.collecting = true
		c.hmu.Unlock()
	}
	if r.force {
		idx, gen, err = c.s.eng.ForceReleaseNoWait(r.key, r.id)
	} else {
		idx, gen, err = c.s.eng.ReleaseNoWait(r.key, r.token)
	}
	if mine {
		slot.Store(nil)
		c.handOn()
	}
	if err != nil {
		c.sendRefusal(r, err, idx, gen)
		return
	}
	c.send(answer{logged: idx, gen: gen, op: r.op, rawKey: r.rawKey, start: start}, r.op, "OK", start)
}

// sendRefusal answers err, a release's or renewal's error: a refusal
// with the log index it was judged at (idx > 0) waits in line as a change
// does and is settled by the role holder (engine.SettleRefusal, in
// format); any other error is answered at once.
func (c *conn) sendRefusal(r *request, err error, idx engine.LogIndex, gen uint64) {
	if idx == 0 {
		c.sendError(r, err)
		return
	}
	c.send(answer{refused: err, logged: idx, gen: gen, op: r.op, rawKey: r.rawKey, start: r.start}, r.op, "", r.start)
}

// handOn ends the reader's collecting for a release (c.collecting): it
// writes the grants the release handed to other connections, each on its
// connection (flushNow), instead of waking their writers: the grant
// leaves one goroutine wake sooner, and the release's log record and the
// grant's are written by the first of these writes.
func (c *conn) handOn() {
	c.hmu.Lock()
	c.collecting = false
	c.hmu.Unlock()
	for i, o := range c.handed {
		o.flushNow(false, nil)
		c.handed[i] = nil
	}
	c.handed = c.handed[:0]
}

func (c *conn) renew(r *request, start instant) {
	r.start = start
	if c.notServing(r) {
		return
	}
	gen := c.s.eng.Generation()
	g, idx, err := c.s.eng.RenewNoWait(r.key, r.token, r.lease)
	if err != nil {
		c.sendRefusal(r, err, idx, gen)
		return
	}
	c.send(answer{logged: idx, gen: gen, op: r.op, rawKey: r.rawKey, start: start, g: g}, r.op, "OK", start)
}

// notServingAcquire is notServing for the acquire r, which waits for an
// active instead of an E unavailable when this node knows none (await,
// once: see mayAwait): moved, it was answered M or E; awaits, it waits.
func (c *conn) notServingAcquire(r *request) (moved, awaits bool) {
	if gate := c.s.cfg.Gate; gate != nil && !gate.Serving() && c.mayAwait(r) && gate.ActiveNative() == "" && c.await(r) {
		return false, true
	}
	return c.notServing(r), false
}

// awaitsAgain reports whether the parked acquire r, which this node's
// engine gave up as it stopped being the active, is to run again rather
// than be answered now (settle): served here, this node being the active
// again already (a handoff refused at once gives the role back before
// the answer is made), or held back until an active is known (await),
// this node knowing none and r allowed to wait (mayAwait); and neither
// the connection nor the server is closing (an answer made now still
// goes out before the socket closes; one made later would not).
func (c *conn) awaitsAgain(r *request) bool {
	gate := c.s.cfg.Gate
	if gate == nil {
		return false
	}
	if !gate.Serving() && (!c.mayAwait(r) || gate.ActiveNative() != "") {
		return false
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return !closed && !c.s.closed
}

// mayAwait reports whether the acquire r may wait for an active: the
// Gate can wait for one (ActiveAwaiter), and r has not waited yet.
func (c *conn) mayAwait(r *request) bool {
	if r.awaited {
		return false
	}
	_, ok := c.s.cfg.Gate.(ActiveAwaiter)
	return ok
}

// await holds r, the connection's running acquire of its key, back until
// an active is known, then runs it again (awaitActive): the connection's
// later acquires of the key wait behind it as behind a parked one, its
// other requests go on. One goroutine per connection waits, for all of
// its acquires held back; the connection's end ends it (the acquires
// are dropped: nobody reads their answers).
// It reports false, holding nothing back, once the server closes.
func (c *conn) await(r *request) bool {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.s.closed {
		return false // Close answers what waits, and then no more
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return true // nobody reads the answer
	}
	r.parked = nil // answered: nothing of it is left to withdraw
	c.awaiting = append(c.awaiting, r)
	start := !c.awaitOn
	c.awaitOn = true
	c.mu.Unlock()
	if start {
		c.s.awaits.Add(1)
		go c.awaitActive()
	}
	return true
}

// unawaitLocked takes r out of the acquires held back until an active is
// known, and reports whether it was one (c.mu held).
func (c *conn) unawaitLocked(r *request) bool {
	for i, a := range c.awaiting {
		if a == r {
			c.awaiting = append(c.awaiting[:i], c.awaiting[i+1:]...)
			return true
		}
	}
	return false
}

// awaitActive waits for an active (ActiveAwaiter.AwaitActive, bounded by
// the Gate, by the connection's end and by Close), then runs the acquires held
// back meanwhile again, each held back once at most (request.awaited).
func (c *conn) awaitActive() {
	defer c.s.awaits.Done()
	ctx, stop := context.WithCancel(c.ctx)
	unhook := context.AfterFunc(c.s.awaitCtx, stop)
	done := c.s.cfg.Gate.(ActiveAwaiter).AwaitActive(ctx)
	defer done()
	unhook()
	stop()
	c.mu.Lock()
	waiting := c.awaiting
	c.awaiting, c.awaitOn = nil, false
	c.mu.Unlock()
	for _, r := range waiting {
		r.awaited = true
		c.run(r)
	}
}

// notServing answers r with M (or E unavailable) when this node is not
// the active, and reports whether it did.
func (c *conn) notServing(r *request) bool {
	gate := c.s.cfg.Gate
	if gate == nil || gate.Serving() {
		return false
	}
	a, outcome := c.movedAnswer(r)
	c.send(a, r.op, outcome, r.start)
	return true
}

// movedAnswer is r's answer "M <active's native address>", or E
// unavailable while no other active is known, and its outcome.
func (c *conn) movedAnswer(r *request) (answer, string) {
	var addr string
	gate := c.s.cfg.Gate
	if gate != nil && !gate.Serving() {
		addr = gate.ActiveNative()
	}
	if addr == "" {
		code, _, msg, _ := errcode.Of(errcode.NoActive(gate != nil && gate.RefusedByPeers()))
		return errorLine(r.op, r.rawKey, code, msg), code
	}
	line := make([]byte, 0, 8+len(r.rawKey)+len(addr))
	line = append(append(append(append(append(append(line, r.op...), ' '), r.rawKey...), " M "...), addr...), '\n')
	return answer{line: line}, "M"
}

// sendError answers r with err (see errorAnswer).
func (c *conn) sendError(r *request, err error) {
	a, outcome := c.errorAnswer(r, err)
	c.send(a, r.op, outcome, r.start)
}

// errorAnswer is r's answer to err, and its outcome: M for "ask the
// active", else an E line with the code of internal/errcode's table.
func (c *conn) errorAnswer(r *request, err error) (answer, string) {
	if errors.Is(err, engine.ErrNotActive) || errors.Is(err, engine.ErrMoved) {
		// A parked acquire whose engine stopped being the active (a
		// handoff): the client repeats it on the active; with the same id
		// it resumes its place there.
		return c.movedAnswer(r)
	}
	code, _, msg, known := errcode.Of(err)
	if !known {
		c.s.log.Error("internal error", "op", r.op, "err", err)
	}
	return errorLine(r.op, r.rawKey, code, msg), code
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
