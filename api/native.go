package api

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/internal/keyrule"
	"github.com/baton-io/baton/internal/nline"
)

// The native protocol (SPEC section 2b) behind the same API: a Client
// whose addresses are baton://host:port (batons:// with TLS) keeps
// ConnsPerAddress TCP connections per address (two for a single address)
// in the slots of client.go, each kept by nkeep: dial (TLS, then AUTH with
// Config.Token when set), serve until the connection breaks, redial every
// ReconnectInterval. On a connection, requests are pipelined: callers
// append their lines to the connection's buffer and wait; one writer
// goroutine takes the buffer after one runtime.Gosched (so that the lines
// of callers running at the same moment leave in one write) and writes
// it; one reader goroutine matches each answer to the oldest request with
// its (op, key) (SPEC section 2b: answers to the same (op, key) come in
// order). No request waits for another's answer, so a renewal or a
// release is never held up by parked acquires on the same connection.
//
// An acquire whose ctx ends is withdrawn with the protocol's cancel ("C
// <key> <id>") on a connection whose node answered a ping (pingLoop
// sends the first at once); one given up before that answer is withdrawn
// when it comes (nwire.cancel). On an older node's connection (no ping
// answered) it stays on the node, and a grant that answers it later is
// released at once (see Acquire); its wait (WithWait, else ctx's
// deadline: ctxWait) bounds how long it stays.

// checkNativeKey refuses, before anything is sent, a key that a node
// would refuse by closing the connection (an empty key, invalid UTF-8, a
// control character: the line cannot be read), and one that is too long.
// The rule and its sentences are keyrule's, the node's own, so that the
// error says what the node says of the key over HTTP.
func checkNativeKey(key string) error {
	p := keyrule.Problem(key)
	if key == "" {
		p = keyrule.Empty
	}
	if p == "" {
		return nil
	}
	return &StatusError{Code: CodeInvalidArgument, Field: "key", Message: "key: " + p}
}

// nativeScheme reports whether an address scheme selects the native
// protocol.
func nativeScheme(scheme string) bool { return scheme == "baton" || scheme == "batons" }

// httpOnly is the error of a call that the native protocol does not have.
func httpOnly(what string) error {
	return fmt.Errorf("baton: %s: the native protocol (baton://, batons:// addresses) has no read calls (status, list, cluster, events); use the node's http:// or https:// address: %w", what, errors.ErrUnsupported)
}

// nwire is one native connection, from its dial to its end.
type nwire struct {
	nc    net.Conn
	node  string        // the address's base URL, "baton://host:port"
	wake  chan struct{} // one slot: lines are waiting for the writer
	dead  chan struct{} // closed by fail
	rdone chan struct{} // closed when readLoop has returned
	wdone chan struct{} // closed when writeLoop has returned
	pdone chan struct{} // closed when pingLoop has returned (or none ran)
	reads atomic.Uint64 // answer lines read, for pingLoop
	// cancels: the node answered a ping, so it knows the cancel op (C,
	// of the same version): an acquire given up by its caller is
	// withdrawn with it. A node that does not know P closes the
	// connection on it (errNoPing), and would on a C too. Set under mu
	// (cancel reads it there), read without it too.
	cancels atomic.Bool
	// pings: pingLoop runs on the connection, so its first ping's answer
	// will tell whether the node knows C (see cancel).
	pings bool

	mu      sync.Mutex
	out     []byte         // lines not yet written
	waiting map[nid]nqueue // (op, key) -> requests in the order sent
	err     error          // why the connection ended; set: no new requests
	// due: the cancels (C lines) of acquires given up before the first
	// ping's answer, sent when it comes (cancel); dropped if it never
	// does (the node does not know P, or the connection ends first).
	due []ncancel

	spare []byte // the writer's other buffer (writeLoop only)
}

// ncancel is a cancel line waiting in nwire.due, and the nid its answer
// is matched by.
type ncancel struct {
	id   nid
	line []byte
}

// nid is what answers are matched by: a request's op and its key as the
// line carried it (escaped). A struct, not "op key": no string is built
// per request or per answer to match them.
type nid struct{ op, key string }

// nqueue is the FIFO of the requests with one nid, linked through
// ncall.next (no slice per key to grow and drop).
type nqueue struct{ head, tail *ncall }

// ncall is one request waiting for its answer.
type ncall struct {
	ch   chan nreply // one slot: the answer, or the connection's end
	next *ncall      // the next request with the same nid (nwire.mu)
	// late, set under nwire.mu when the caller gave up (its ctx ended,
	// or its attempt's time ran out), takes the answer (or the
	// connection's end, a == nil) instead of ch. It runs on the reader's
	// (or the failing) goroutine and must not block.
	late nlate
	// timer bounds an attempt (do's limit); made on the first bounded
	// attempt of this ncall and kept with it in ncalls, so a release
	// costs no timer allocation.
	timer *time.Timer
}

// nlate takes the answer of a request whose caller gave up (see
// ncall.late): a == nil when the connection ended first (err says why).
type nlate interface {
	late(a *nline.Answer, err error)
}

// dropLate is the nlate of a request whose late answer needs nothing.
type dropLate struct{}

func (dropLate) late(*nline.Answer, error) {}

// ncalls recycles the ncalls of answered requests (two allocations a
// request otherwise, and a timer per bounded attempt). One given up by
// its caller (late set) is not recycled.
var ncalls = sync.Pool{New: func() any { return &ncall{ch: make(chan nreply, 1)} }}

// errNoAnswer is do's error when an attempt's limit passed without an
// answer (the request stays on the wire; a late answer is dropped or
// goes to late).
var errNoAnswer = errors.New("no answer within the attempt's limit")

// push appends call to the FIFO of id (w.mu held).
func (w *nwire) push(id nid, call *ncall) {
	call.next = nil
	q := w.waiting[id]
	if q.head == nil {
		q.head = call
	} else {
		q.tail.next = call
	}
	q.tail = call
	w.waiting[id] = q
}

// pop takes the oldest request of id off its FIFO (w.mu held); nil when
// none waits.
func (w *nwire) pop(id nid) *ncall {
	q, ok := w.waiting[id]
	if !ok {
		return nil
	}
	call := q.head
	if call.next == nil {
		delete(w.waiting, id)
	} else {
		q.head = call.next
		w.waiting[id] = q
	}
	call.next = nil
	return call
}

type nreply struct {
	a   nline.Answer
	err error
}

// dialPing is the ping a native connection begins with (ndial): after
// AUTH when the client has a token, else first, before the pingLoop's
// first ping. A node answers it as any ping. It is there for an HTTP
// server that a baton:// address names by mistake (a node's listen
// address): net/http reads the first 14 bytes of a connection (the
// length of HTTP/2's preface line, "PRI * HTTP/2.0") before it parses a
// request line, and with fewer waits for ReadHeaderTimeout (baton's: 10
// s), which the client took for a paused node ("answered no ping"); with
// them, it answers the malformed request line 400 at once (notNative).
// Its line alone is that long (TestDialPingFillsHTTP2Preface).
var dialPing = nid{nline.OpPing, "native-hello"}

// ndial opens a native connection to base: TCP, TLS for batons://, and
// AUTH with the client's token when it has one (its answer awaited, so
// that a refused token fails the dial with a *StatusError that Is
// ErrUnauthorized). ctx bounds all of it.
func (c *Client) ndial(ctx context.Context, base *url.URL) (*nwire, error) {
	nc, err := c.dial(ctx, "tcp", base.Host)
	if err != nil {
		return nil, err
	}
	if base.Scheme == "batons" {
		cfg := &tls.Config{}
		if c.cfg.TLSConfig != nil {
			cfg = c.cfg.TLSConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = base.Hostname()
		}
		tc := tls.Client(nc, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, fmt.Errorf("TLS handshake: %w", err)
		}
		nc = tc
	}
	br := bufio.NewReaderSize(nc, 16<<10)
	// The dial's ping (dialPing) goes with the connection's first line,
	// AUTH's or the pingLoop's ping, when the node is pinged.
	pings := c.cfg.PingInterval > 0 && !c.noPing(base)
	if c.cfg.Token != "" {
		if dl, ok := ctx.Deadline(); ok {
			_ = nc.SetDeadline(dl)
		}
		stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
		err := func() error {
			hello := nline.AppendAuth(nil, c.cfg.Token)
			if pings {
				hello = nline.AppendPing(hello, dialPing.key)
			}
			if _, err := nc.Write(hello); err != nil {
				return err
			}
			line, err := br.ReadSlice('\n')
			if err != nil {
				return fmt.Errorf("AUTH: no answer: %w", err)
			}
			a, err := nline.ParseAnswer(string(line[:len(line)-1]))
			switch {
			case errors.Is(err, nline.ErrHTTP):
				return notNative(base.String())
			case err != nil:
				return fmt.Errorf("AUTH: %w", err)
			case a.Op == nline.OpAuth && a.Outcome == nline.OK:
				return nil
			case a.Outcome == nline.Error:
				return answerError(&a)
			}
			return fmt.Errorf("AUTH: unexpected answer %q", line)
		}()
		stop()
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
		_ = nc.SetDeadline(time.Time{})
	}
	w := &nwire{
		nc:      nc,
		node:    base.String(),
		wake:    make(chan struct{}, 1),
		dead:    make(chan struct{}),
		rdone:   make(chan struct{}),
		wdone:   make(chan struct{}),
		pdone:   make(chan struct{}),
		waiting: map[nid]nqueue{},
		pings:   pings,
	}
	if pings {
		// Its answer is dropped (it tells what the pingLoop's first
		// ping does).
		call := &ncall{ch: make(chan nreply, 1), late: dropLate{}}
		if c.cfg.Token != "" {
			w.mu.Lock()
			w.push(dialPing, call) // written after AUTH
			w.mu.Unlock()
		} else {
			_ = w.send(dialPing, nline.AppendPing(nil, dialPing.key), call)
		}
	}
	go w.readLoop(br)
	go w.writeLoop()
	if w.pings {
		go w.pingLoop(c.cfg.PingInterval, c.cfg.PingTimeout)
	} else {
		close(w.pdone)
	}
	return w, nil
}

// post sends line (its answer matched by id) without waiting for the
// answer, which is dropped; nothing when the connection has ended.
func (w *nwire) post(id nid, line []byte) {
	w.send(id, line, &ncall{ch: make(chan nreply, 1), late: dropLate{}})
}

// send queues line for the writer, its answer to go to call; it returns
// the connection's error, nothing queued, when the connection has ended.
func (w *nwire) send(id nid, line []byte, call *ncall) error {
	w.mu.Lock()
	if err := w.err; err != nil {
		w.mu.Unlock()
		return err
	}
	w.out = append(w.out, line...)
	w.push(id, call)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return nil
}

// cancel sends the cancel line (its answer matched by id, and dropped)
// of an acquire its caller gave up, if the node knows the op: at once
// when the connection's first ping was answered, else when that answer
// comes (readLoop sends it then), so that an acquire given up right
// after the connection opened leaves the node's queue as soon as the
// node is known to take it. Without pings (PingInterval off, or a node
// that does not know P) nothing is sent.
func (w *nwire) cancel(id nid, line []byte) {
	w.mu.Lock()
	if !w.cancels.Load() {
		if w.pings && w.err == nil {
			w.due = append(w.due, ncancel{id, line})
		}
		w.mu.Unlock()
		return
	}
	w.mu.Unlock()
	w.post(id, line)
}

// pinged reports whether a ping of the connection waits for its answer.
func (w *nwire) pinged() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for id := range w.waiting {
		if id.op == nline.OpPing {
			return true
		}
	}
	return false
}

// noPing reports whether a connection to the node at base ended because
// the node does not know the ping (errNoPing): its connections are not
// pinged (they rely on TCP keep-alive and the acquires' attempt limits).
func (c *Client) noPing(base *url.URL) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.addrs {
		if a.base.String() == base.String() {
			return a.noPing
		}
	}
	return false
}

// errSilent ends a native connection whose node answered no ping within
// PingTimeout (paused, or cut off without a reset): a waiter on it may be
// granted when that node resumes.
var errSilent = errors.New("baton: the node answered no ping")

// errNoPing ends a native connection whose node does not know the ping
// (a version before it answers "- - E invalid_argument op: ..." and
// closes the connection).
var errNoPing = errors.New("baton: the node does not know the ping op (P)")

// pingLoop pings the node once at once (its answer tells that the node
// knows P, and so C: nwire.cancels), then checks that the node answers
// while the connection is quiet: once nothing was read for PingInterval
// (counted in halves of it: after one to one and a half of them), it
// sends "P <n>". No answer within PingTimeout ends the connection with
// errSilent, so that the calls on it move on to the next connection (a
// paused node keeps its TCP connections open, and its kernel answers TCP
// keep-alives). It ends with the connection.
func (w *nwire) pingLoop(every, timeout time.Duration) {
	defer close(w.pdone)
	t := time.NewTicker(max(every/2, time.Millisecond))
	defer t.Stop()
	seen, idle := w.reads.Load(), 2 // the first ping at once: the node knows P (and C)
	var n uint64
	var buf [32]byte
	for {
		if idle < 2 {
			select {
			case <-t.C:
			case <-w.dead:
				return
			}
			if r := w.reads.Load(); r != seen {
				seen, idle = r, 0
				continue
			}
			if idle++; idle < 2 {
				continue
			}
		}
		n++
		word := strconv.FormatUint(n, 36)
		_, err := w.do(context.Background(), nid{nline.OpPing, word}, nline.AppendPing(buf[:0], word), nil, timeout)
		if errors.Is(err, errNoAnswer) {
			w.fail(fmt.Errorf("%w within %v", errSilent, timeout))
			return
		}
		if err != nil {
			return // the connection ended
		}
		seen, idle = w.reads.Load(), 0
	}
}

// fail ends the connection with err (the first error wins): no request is
// taken any more, every waiting one gets the error (as *errConn), and the
// socket is closed, which ends the reader and the writer.
func (w *nwire) fail(err error) {
	var lates []nlate
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return
	}
	w.err = err
	w.due = nil
	close(w.dead)
	ce := &errConn{err: err}
	for _, q := range w.waiting {
		for call := q.head; call != nil; {
			next := call.next
			call.next = nil
			if call.late != nil {
				lates = append(lates, call.late)
			} else {
				call.ch <- nreply{err: ce}
			}
			call = next
		}
	}
	w.waiting = nil
	w.mu.Unlock()
	w.nc.Close()
	for _, l := range lates {
		l.late(nil, ce)
	}
}

// close ends the connection with err and waits for its goroutines.
func (w *nwire) close(err error) {
	w.fail(err)
	<-w.rdone
	<-w.wdone
	<-w.pdone
}

// pending reports whether a request with this (op, key) waits for its
// answer.
func (w *nwire) pending(id nid) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.waiting[id]
	return ok
}

// do sends line (a request whose answer is matched by id; do keeps no
// reference to line) and waits for its answer. A connection that ended
// (before or after sending) is an *errConn. When ctx ends first, do
// returns ctx's error at once (a notSent wrapping it when ctx had ended
// before do sent anything); when limit > 0 and passes first, do
// returns errNoAnswer. Either way the answer, when it comes (or the
// connection's end), goes to late (nil: dropped).
func (w *nwire) do(ctx context.Context, id nid, line []byte, late nlate, limit time.Duration) (nline.Answer, error) {
	if err := ctx.Err(); err != nil {
		return nline.Answer{}, notSent{err}
	}
	call := ncalls.Get().(*ncall)
	if err := w.send(id, line, call); err != nil {
		ncalls.Put(call)
		return nline.Answer{}, &errConn{err: err}
	}
	var expired <-chan time.Time // nil: no limit
	if limit > 0 {
		if call.timer == nil {
			call.timer = time.NewTimer(limit)
		} else {
			call.timer.Reset(limit)
		}
		expired = call.timer.C
	}
	var gaveUp error
	select {
	case r := <-call.ch:
		// Answered: nobody refers to call any more (the reader or fail
		// took it off waiting before sending).
		if call.timer != nil {
			call.timer.Stop()
		}
		ncalls.Put(call)
		return r.a, r.err
	case <-ctx.Done():
		gaveUp = ctx.Err()
		if call.timer != nil {
			call.timer.Stop()
		}
	case <-expired:
		gaveUp = errNoAnswer
	}
	if late == nil {
		late = dropLate{}
	}
	w.mu.Lock()
	select {
	case r := <-call.ch:
		// Answered as the caller gave up: it has gone all the same.
		w.mu.Unlock()
		if r.err != nil {
			late.late(nil, r.err)
		} else {
			late.late(&r.a, nil)
		}
	default:
		call.late = late
		w.mu.Unlock()
		if h, ok := late.(lateHolder); ok && !errors.Is(gaveUp, errNoAnswer) {
			// The caller gave up (its ctx ended): Close waits for the
			// answer, which late settles (a silent node's, after the
			// limit, is not waited for).
			h.hold()
		}
	}
	return nline.Answer{}, gaveUp
}

// notSent is the error of a call do never sent, its ctx having ended
// first: errors.Is sees ctx's error through it; no late answer comes.
type notSent struct{ error }

func (e notSent) Unwrap() error { return e.error }

// writeLoop writes the queued lines until the connection ends.
func (w *nwire) writeLoop() {
	defer close(w.wdone)
	for {
		select {
		case <-w.wake:
		case <-w.dead:
			return
		}
		// Let the callers running now queue their lines too: one write
		// carries them all (issue 17 measured the gain).
		runtime.Gosched()
		w.mu.Lock()
		buf := w.out
		w.out = w.spare[:0]
		w.mu.Unlock()
		if len(buf) > 0 {
			if _, err := w.nc.Write(buf); err != nil {
				w.fail(fmt.Errorf("write: %w", err))
				return
			}
		}
		w.spare = buf[:0]
	}
}

// readLoop matches answers to requests until the connection ends. An
// error line that answers nothing asked (the node refused the connection:
// AUTH missing or refused, a line it could not read) is kept as the
// reason of the end that follows.
func (w *nwire) readLoop(br *bufio.Reader) {
	defer close(w.rdone)
	var refused error
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			switch {
			case refused != nil:
				err = refused
			case errors.Is(err, io.EOF):
				err = errors.New("the node closed the connection")
			}
			w.fail(err)
			return
		}
		w.reads.Add(1)
		a, err := nline.ParseAnswer(string(line[:len(line)-1]))
		if err != nil {
			if errors.Is(err, nline.ErrHTTP) {
				err = notNative(w.node)
			}
			w.fail(err)
			return
		}
		if a.Op == nline.OpPing && a.Outcome == nline.OK && !w.cancels.Load() {
			// The node knows C: the cancels due go out now.
			w.mu.Lock()
			w.cancels.Store(true)
			due := w.due
			w.due = nil
			w.mu.Unlock()
			for _, d := range due {
				w.post(d.id, d.line)
			}
		}
		w.mu.Lock()
		call := w.pop(nid{a.Op, a.Key})
		if call == nil {
			w.mu.Unlock()
			if a.Op == "-" && a.Outcome == nline.Error && a.Code == CodeInvalidArgument && strings.Contains(a.Message, `"P"`) && w.pinged() {
				// The node took the ping for an unknown op: it
				// closes the connection.
				refused = errNoPing
				continue
			}
			if a.Outcome == nline.Error {
				refused = answerError(&a)
				continue
			}
			w.fail(fmt.Errorf("an answer to no request: %q", line))
			return
		}
		late := call.late
		if late == nil {
			call.ch <- nreply{a: a}
		}
		w.mu.Unlock()
		if late != nil {
			// A copy of its own: a pointer to a would put every answer
			// on the heap, not only the late ones.
			la := a
			late.late(&la, nil)
		}
	}
}

// refusal returns the node's refusal of the client that err is or wraps,
// nil for any other error: E unauthorized to the AUTH of a dial, or to the
// first line of a connection without AUTH, which the node then closes
// (that line was not served); or an HTTP answer (notNative). A refusal is
// a definite answer, the one the HTTP path gets as a 401 or 400: returned
// at once, neither retried nor reported as ErrUnavailable.
func refusal(err error) *StatusError {
	var se *StatusError
	if err != nil && errors.As(err, &se) && (se.Code == CodeUnauthorized || se.Field == fieldAddresses) {
		return se
	}
	return nil
}

// fieldAddresses is the Field of notNative's error: Config.Addresses (the
// CLI's --addr, BATON_ADDR). No answer of a node names it.
const fieldAddresses = "addresses"

// notNative is the error of a native connection to node whose server
// answered in HTTP (nline.ErrHTTP): the baton:// address is the node's
// listen address, where its native_listen address was meant. The HTTP
// server answered the client's lines 400 and closed the connection:
// nothing was served. It is a refusal (see refusal): a wrong address does
// not get better by asking again.
func notNative(node string) *StatusError {
	return &StatusError{
		StatusCode: http.StatusBadRequest,
		Code:       CodeInvalidArgument,
		Field:      fieldAddresses,
		Message:    node + " serves HTTP, not baton's native protocol: baton:// takes a node's native_listen address, http:// its listen address",
	}
}

// answerError is the *StatusError of an E line (StatusCode 0: no HTTP
// status on the native protocol).
func answerError(a *nline.Answer) *StatusError {
	return &StatusError{Code: a.Code, Message: a.Message, Field: a.Field()}
}

// nkeep owns one native slot's connection: dial, wait for the break,
// pause, redial, until Close.
func (c *Client) nkeep(s *slot) {
	defer c.wg.Done()
	pause := time.NewTimer(0)
	defer pause.Stop()
	for {
		dctx, cancel := context.WithTimeout(context.WithValue(c.ctx, heardKey{}, &s.heard), c.cfg.DialTimeout)
		w, err := c.ndial(dctx, s.addr.base)
		cancel()
		if c.ctx.Err() != nil {
			if w != nil {
				w.close(ErrClosed)
			}
			return
		}
		if err == nil {
			c.mu.Lock()
			s.state, s.nw, s.lastErr = slotUp, w, nil
			c.notifyLocked()
			c.mu.Unlock()
			select {
			case <-w.dead:
			case <-c.ctx.Done():
			}
			w.close(ErrClosed) // no-op if it broke first
			c.mu.Lock()
			if s.nw == w { // else nbroken took it out already
				s.state, s.nw = slotDown, nil
			}
			w.mu.Lock()
			s.lastErr = w.err
			w.mu.Unlock()
			if errors.Is(s.lastErr, errNoPing) {
				s.addr.noPing = true
			}
			c.notifyLocked()
			c.mu.Unlock()
			if c.ctx.Err() != nil {
				return
			}
		} else {
			c.markDown(s, err)
		}
		if !c.awaitRedial(s, pause) {
			return
		}
	}
}

// nbroken takes w, which failed under a call, out of service at once if it
// is still s's connection: the call's next pick must not choose it again
// before nkeep has seen it end (the HTTP side's markBroken). With the
// active named by an M gone, that second pick was the same dead
// connection, and the acquire failed within a millisecond of a failover.
func (c *Client) nbroken(s *slot, w *nwire) {
	select {
	case <-w.dead:
	default:
		return // the connection is still up: only the call failed
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if s.nw != w || s.state != slotUp {
		return
	}
	s.state, s.nw = slotDown, nil
	w.mu.Lock()
	s.lastErr = w.err
	w.mu.Unlock()
	c.notifyLocked()
}

// npick returns a live native connection, round-robin, as pick does for
// HTTP (the preferred address first; avoid only when there is another;
// waiting for a dial in progress; a dial at once of those that are down,
// then ErrUnavailable, with none: noConnLocked). For an
// acquire (acquire set, its (op, key) in id) it prefers a connection with
// no acquire of the same key waiting: a node serves a connection's
// acquires of one key one after the other. A wait for a connection ends
// with ctx, and with context.DeadlineExceeded at until when it is not
// zero (a bound without a context and its timer per call: the wait is
// the rare case). want, if not nil, stands in for the preferred address
// (npickLocked).
func (c *Client) npick(ctx context.Context, want *address, avoid *slot, acquire bool, id nid, until time.Time) (*slot, *nwire, error) {
	s, w, _, err := c.npickBusy(ctx, want, avoid, acquire, id, until)
	return s, w, err
}

// npickBusy is npick that also reports, for an acquire, whether the
// connection it returns has an acquire of the same key waiting already
// (every live candidate had one).
func (c *Client) npickBusy(ctx context.Context, want *address, avoid *slot, acquire bool, id nid, until time.Time) (*slot, *nwire, bool, error) {
	var timeout <-chan time.Time
	redialed := false
	for {
		var buf [8]npicked
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil, nil, false, ErrClosed
		}
		cands := c.npickLocked(buf[:0], want, avoid, acquire)
		if len(cands) > 0 {
			c.mu.Unlock()
			if !acquire {
				return cands[0].s, cands[0].w, false, nil
			}
			// pending takes the connection's own mutex: after c.mu, not
			// under it, so that picks and answers do not queue on each
			// other.
			for _, p := range cands {
				if !p.w.pending(id) {
					return p.s, p.w, false, nil
				}
			}
			return cands[0].s, cands[0].w, true, nil
		}
		ch, err := c.noConnLocked(&redialed)
		c.mu.Unlock()
		if err != nil {
			return nil, nil, false, err
		}
		if timeout == nil && !until.IsZero() {
			t := time.NewTimer(time.Until(until))
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil, false, ctx.Err()
		case <-timeout:
			return nil, nil, false, context.DeadlineExceeded
		}
	}
}

// errSoloDone ends a connection of nsolo once its attempt is over.
var errSoloDone = errors.New("baton: the attempt on a connection of its own is over")

// nsolo dials a connection of its own to s's node, for one attempt of an
// acquire (or of its settling repeat) when every live connection to the
// node has an acquire of the same key waiting. A node serves a
// connection's acquires of one key one after the other: behind another
// acquire of the key, a first attempt would not reach the node's queue
// (its wait would not start) until that one ended, and a repeat, whose
// id may already hold a grant or a place on the node (granted, or kept
// over a failover or a handoff, before the repeat), would get its own
// grant only once its lease had run out (and then grant_ended), the
// other acquire waiting for that grant. done ends the connection: call it
// once the attempt has an answer or was given up (a waiter given up
// leaves the node's queue with the connection, as over a broken one). The
// connection also ends with the client.
func (c *Client) nsolo(ctx context.Context, s *slot) (w *nwire, done func(), err error) {
	dctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	w, err = c.ndial(dctx, s.addr.base)
	cancel()
	if err != nil {
		return nil, nil, err
	}
	stop := context.AfterFunc(c.ctx, func() { w.fail(ErrClosed) })
	return w, func() {
		stop()
		w.close(errSoloDone)
	}, nil
}

// npicked is a candidate of npick: a slot and its connection as they were
// under c.mu.
type npicked struct {
	s *slot
	w *nwire
}

// npickLocked is candidatesLocked and the round robin of npick without a
// slice per call (a pick is on the path of every request): it appends to
// cands the live connections to try, in round-robin order (only the first
// one unless acquire), none when no connection is up. When avoid is the
// preferred address's, that node is what failed, and its connections are
// tried only when no other is up (as in candidatesLocked). want, if not
// nil, stands in for the preferred address: asked first when up, never
// waited for (the node that granted what a settle or a release is about,
// which may be gone while the active is up).
func (c *Client) npickLocked(cands []npicked, want *address, avoid *slot, acquire bool) []npicked {
	list := c.slots
	p, wait := c.preferred, true
	if want != nil {
		p, wait = want, false
	}
	failed := avoid != nil && avoid.addr == p
	if p != nil && !failed {
		switch {
		case upCount(p.slots) > 0:
			list = p.slots
		case wait && anyDialing(p.slots):
			return cands // wait for the active's first dial
		}
	}
	up := upCount(list)
	if up == 0 {
		return cands
	}
	if failed && up == upCount(avoid.addr.slots) {
		failed = false // no other node is up
	}
	n := uint64(len(list))
	start := c.rr
	c.rr++
	for i := range n {
		s := list[(start+i)%n]
		if s.state != slotUp || (s == avoid && up > 1) || (failed && s.addr == avoid.addr) {
			continue
		}
		cands = append(cands, npicked{s, s.nw})
		if !acquire {
			break
		}
	}
	return cands
}

func upCount(ss []*slot) int {
	n := 0
	for _, s := range ss {
		if s.state == slotUp {
			n++
		}
	}
	return n
}

// nmove follows an M answer from s's node: the active is at addr (a
// host:port of the same scheme), which becomes the preferred address.
func (c *Client) nmove(s *slot, addr string) error {
	return c.prefer(&url.URL{Scheme: s.addr.base.Scheme, Host: addr})
}

// nacq is one native acquire: its line is the same on every attempt (the
// same id), but for the wait of a settling repeat.
type nacq struct {
	c        *Client
	key, raw string
	lease    time.Duration
	wait     time.Duration
	opts     nline.AcquireOptions
	// at is the node of the last attempt (nil before the first): the one
	// that may hold its place or grant, which its settling asks first.
	at atomic.Pointer[address]
	lh lateHold // its late answer, once its caller gave up (late)
	// withdrawn is set once a cancel (C) of the acquire was sent: a T
	// that answers it then says nothing held on that node only (nsettle).
	withdrawn atomic.Bool
}

// line appends the acquire's line with wait to b.
func (q *nacq) line(b []byte, wait time.Duration) []byte {
	return nline.AppendAcquire(b, q.raw, q.lease, wait, q.opts)
}

// late implements nlate for an acquire given up by its caller: what its
// answer (from the node of its last attempt) leaves on the node is
// settled (nsettle).
func (q *nacq) late(a *nline.Answer, _ error) {
	q.c.nsettle(q, a, q.at.Load())
	q.lh.done(q.c)
}

// hold implements lateHolder.
func (q *nacq) hold() { q.lh.hold(q.c) }

// lateHolder is an nlate that keeps Client.Close waiting for its answer
// once its caller gave up (do calls hold then; the nlate's late, which
// settles the answer, ends the wait).
type lateHolder interface {
	nlate
	hold()
}

// lateHold is the state of a lateHolder: hold counts the answer in
// Client.lates (lateOut) unless it has come already; done, called by late once
// the answer is settled (nsettle registered in Client.settling), ends the
// count. Without it Close, called just after the caller gave up, set
// closing before the answer came, and a grant in it was never released.
type lateHold struct {
	mu        sync.Mutex
	ran, held bool
}

func (h *lateHold) hold(c *Client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ran && !h.held {
		h.held = true
		c.lateOut()
	}
}

func (h *lateHold) done(c *Client) {
	h.mu.Lock()
	h.ran = true
	held := h.held
	h.held = false
	h.mu.Unlock()
	if held {
		c.lateIn()
	}
}

// nattemptLate is the nlate of an acquire attempt with a limit (nAcquire):
// its late answer is settled as q's (nsettle) when the caller gave up on
// ctx, and dropped when the limit passed (the node was silent): the next
// attempts ask again under the same id, and when the acquire gives up it
// settles the id. Settling the silent node's late grant would release the
// grant a later attempt got under the same id from the promoted standby;
// an acquire that ends without a grant settles it all the same (abandon).
// The answer may come before do returns: it is kept until decide.
type nattemptLate struct {
	q       *nacq
	at      *address // the attempt's node
	mu      sync.Mutex
	decided bool
	settle  bool
	kept    *nline.Answer // an answer that came before decide
	came    bool
	lh      lateHold // once the caller gave up (ctx), for Close
}

// hold implements lateHolder.
func (l *nattemptLate) hold() { l.lh.hold(l.q.c) }

func (l *nattemptLate) late(a *nline.Answer, _ error) {
	defer l.lh.done(l.q.c) // after what follows settled it (or kept it for decide)
	l.mu.Lock()
	if !l.decided || !l.settle {
		// Kept until decide, or, dropped, until the acquire ends
		// without a grant (abandon).
		if a != nil {
			ac := *a
			l.kept = &ac
		}
		l.came = true
		l.mu.Unlock()
		return
	}
	l.mu.Unlock()
	l.q.c.nsettle(l.q, a, l.at)
}

// decide says what a late answer gets: settled (settle) or dropped.
func (l *nattemptLate) decide(settle bool) {
	l.mu.Lock()
	l.decided, l.settle = true, settle
	came, a := l.came, l.kept
	l.mu.Unlock()
	if came && settle {
		l.q.c.nsettle(l.q, a, l.at)
	}
}

// abandon settles the late answer of an attempt decided dropped, come or
// to come, once the acquire has ended without a grant: the caller holds
// nothing under q's id, so a grant the silent node made late is nobody's.
// Without it such a grant held its key for its whole lease when another
// node answered the acquire's last attempt T (TestHistoryChaosTimeouts
// CHAOS_NODES=5 CHAOS_SEED=2607: a node stopped with acquires in its
// socket granted them when it resumed, won the split brain, and kept
// three grants no client held for 12 s).
func (l *nattemptLate) abandon() {
	l.decide(true)
}

// nAcquire is Acquire over the native protocol. An acquire that ends
// without a grant settles the late answers of its attempts that a silent
// node left unanswered (nattemptLate.abandon); one that ends with a grant
// drops them, as a later attempt may have got the same grant under the
// same id.
func (c *Client) nAcquire(ctx context.Context, key string, o acquireOpts, owner string) (*Lock, error) {
	var dropped []*nattemptLate
	l, err := c.nAcquireAttempts(ctx, key, o, owner, &dropped)
	if l == nil {
		for _, d := range dropped {
			d.abandon()
		}
	}
	return l, err
}

// nAcquireAttempts is nAcquire's loop of attempts; it adds the attempts a
// silent node left unanswered to dropped.
func (c *Client) nAcquireAttempts(ctx context.Context, key string, o acquireOpts, owner string, dropped *[]*nattemptLate) (*Lock, error) {
	if err := checkNativeKey(key); err != nil {
		return nil, err
	}
	derived := false // o.wait is ctx's deadline (ctxWait), not WithWait's
	if o.wait == 0 {
		o.wait, derived = ctxWait(ctx)
	}
	q := &nacq{c: c, key: key, raw: nline.Escape(key), lease: o.lease, wait: o.wait,
		opts: nline.AcquireOptions{ID: newKey(), Owner: owner, Mode: o.mode, Limit: o.limit}}
	id := nid{nline.OpAcquire, q.raw}
	var buf [256]byte // do copies the line: no allocation for it
	line := q.line(buf[:0], q.wait)
	attempts, redirects := 0, 0
	failed := 0        // the attempts failed since a node last answered
	max := 0           // c.numConns() when an attempt has failed: the bound on failed
	extra := false     // as in Acquire: the one round beyond max
	redialled := false // as in Acquire
	var avoid *slot
	var silent *slot // as in Acquire: the last attempt's that got no answer
	wait := q.wait   // the wait line names (0: none)
	var unavailableSince time.Time
	start, restarts := time.Now(), 0
	var since time.Time // as in Acquire: see grantSince
	var lost *address   // as in Acquire: an attempt under q's id whose answer was lost
	asked := false      // as in Acquire: a line under q's id went out
	for {
		s, w, busy, err := c.npickBusy(ctx, nil, avoid, true, id, time.Time{})
		if err != nil {
			if keepAsking(ctx, err, o.wait, start, &unavailableSince) {
				// As in Acquire: no dial succeeded; asked again.
				if err = sleep(ctx, reconnectPause); err == nil {
					failed, extra, avoid, redialled = 0, false, nil, true
					if o.wait > 0 {
						wait = leftOf(o.wait, start)
						line = q.line(buf[:0], wait)
					}
					continue
				}
			}
			if asked && (ctx.Err() != nil || extra || redialled) {
				// An attempt went out: on a connection that broke (the
				// node may have delivered a grant to it), or answered M
				// (a demoted active: the place went with the role to the
				// node it names).
				c.nsettle(q, nil, q.at.Load())
			}
			return nil, err
		}
		q.at.Store(s.addr)
		sent := time.Now()
		if since.IsZero() {
			since = sent
		}
		var a nline.Answer
		// An attempt with a wait is bounded (attemptLimit): a node that
		// is paused never answers, and nothing pings its connection.
		var late nlate = q
		var bounded *nattemptLate
		if limit := c.attemptLimit(wait); limit > 0 {
			bounded = &nattemptLate{q: q, at: s.addr}
			late = bounded
		}
		// unsent: nothing of this attempt went out (its own connection
		// could not be made, or ctx ended before do sent the line).
		var unsent bool
		if busy {
			sw, done, derr := c.nsolo(ctx, s)
			if err, unsent = derr, derr != nil; err == nil {
				w = sw
				a, err = w.do(ctx, id, line, late, c.attemptLimit(wait))
				done()
				unsent = errors.As(err, new(notSent))
			}
		} else {
			a, err = w.do(ctx, id, line, late, c.attemptLimit(wait))
			unsent = errors.As(err, new(notSent))
			if err != nil && ctx.Err() != nil && !unsent {
				// The caller gave up: the node withdraws the waiter at
				// once (C), as over HTTP, instead of granting it when
				// its turn comes (the grant would be released, late),
				// if it knows the op (see cancel). The answer, T or a
				// grant made first, goes to late.
				q.withdrawn.Store(true)
				w.cancel(nid{nline.OpCancel, q.raw}, nline.AppendCancel(nil, q.raw, q.opts.ID))
			}
		}
		served(&unavailableSince, sent)
		asked = asked || !unsent
		if bounded != nil && err != nil {
			bounded.decide(!errors.Is(err, errNoAnswer))
			if errors.Is(err, errNoAnswer) {
				*dropped = append(*dropped, bounded)
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				if unsent && asked {
					// The caller gave up before this attempt went out
					// (while a connection of its own was dialled, or
					// just before its line was sent, after an M): nothing
					// of it reached a node, but an earlier attempt may
					// have left a place (a broken connection's node,
					// replicated to the standby that takes over; the
					// successor an M named), which no late answer
					// settles there: settled as when no answer came.
					c.nsettle(q, nil, q.at.Load())
				}
				return nil, ctx.Err()
			}
			if c.ctx.Err() != nil {
				return nil, ErrClosed
			}
			c.nbroken(s, w)
			if se := refusal(err); se != nil {
				return nil, se // the line was not served: nothing to settle
			}
			if max == 0 {
				max = c.numConns()
			}
			attempts++
			failed++
			if failed == max && !extra && !errors.Is(err, errNoAnswer) && !errors.Is(err, errSilent) {
				extra = true // as in Acquire: every connection may have broken at once
				failed = 0
			}
			if failed >= max {
				c.nsettle(q, nil, s.addr) // as in Acquire: a grant may be lost with the connection
				if errors.Is(err, errNoAnswer) {
					err = fmt.Errorf("%w (its wait + %v) from %s", err, c.cfg.AcquireGrace, s.addr.base.Host)
				}
				return nil, fmt.Errorf("%w: acquire %q: %d attempts failed, last: %w", ErrUnavailable, key, failed, err)
			}
			avoid = s
			if errors.Is(err, errSilent) {
				// The connection's ping went unanswered: the node is
				// silent (paused), and may grant when it resumes,
				// though no answer can come on this connection: the
				// id is settled there if this acquire ends without a
				// grant (abandon), as after an attempt's limit.
				*dropped = append(*dropped, &nattemptLate{q: q, at: s.addr, came: true})
				silent = s
				c.markSilent(s)
			}
			if !errors.Is(err, errNoAnswer) {
				lost = s.addr // a late answer cannot come (dropped has those)
			} else {
				// As in Acquire: the next attempt (same id) waits only
				// what is left of the wait.
				silent = s
				c.markSilent(s)
				wait = leftOf(o.wait, start)
				line = q.line(buf[:0], wait)
			}
			continue
		}
		failed = 0      // a node answered: as in Acquire
		var ended error // a grant found ended by grantSince
		switch a.Outcome {
		case nline.OK:
			c.answered(s)
			l := &Lock{
				Key: key, Token: a.Token, Lease: a.Lease, ExpiresAt: a.Expires, Node: w.node,
				c: c, lease: a.Lease, expiry: a.Expires, deadline: sent.Add(a.Lease), lost: make(chan struct{}),
				from: s.addr,
			}
			gl, gerr := l.grantSince(ctx, since, sent, silent)
			if !errors.Is(gerr, ErrGrantEnded) {
				return gl, gerr
			}
			// The renewal of a grant answered late found it ended:
			// nothing is held, as after E grant_ended, and the
			// acquire starts again the same way (below).
			ended = gerr
		case nline.Timeout:
			if derived {
				// The wait was ctx's deadline, which the node's timer
				// (started later, rounded up) does not precede: ctx's
				// error, as without the wait.
				<-ctx.Done()
				return nil, ctx.Err()
			}
			return nil, &StatusError{Code: CodeTimeout, Message: "the wait ran out before the lock was granted; nothing is held"}
		case nline.Moved:
			if redirects++; redirects > maxRedirects {
				// The nodes still name an active that does not answer
				// (a failover in progress): like E unavailable, another
				// round after a pause, for failoverPatience.
				if !patient(o.wait, start, &unavailableSince) {
					return nil, fmt.Errorf("%w: acquire %q: more than %d redirects", ErrUnavailable, key, maxRedirects)
				}
				if err := sleep(ctx, redirectPause); err != nil {
					// A node that redirects granted nothing: the
					// preferred one (named last) is asked.
					c.nsettle(q, nil, nil)
					return nil, err
				}
				redirects = 0
			}
			if err := c.nmove(s, a.Addr); err != nil {
				return nil, err
			}
			if since.Equal(sent) {
				since = time.Time{} // as in Acquire
			}
			if !c.stillSilent(avoid, silent) {
				avoid = nil
			}
			continue
		}
		se := answerError(&a)
		var ae error = se
		if ended != nil {
			ae = ended
		}
		left, again, aerr := afresh(ae, o.wait, start, &restarts)
		if again {
			// The grant ended unclaimed: nothing is held; a new
			// acquire (a new id), with what is left of the wait. What
			// the old id's attempts left on another node, which may be
			// another active, is nobody's: their late answers, and a
			// lost answer's node, are settled (as in Acquire).
			for _, d := range *dropped {
				d.abandon()
			}
			*dropped = (*dropped)[:0]
			if lost != nil && lost != s.addr {
				c.nsettle(q, nil, lost)
			}
			lost = nil
			q = &nacq{c: c, key: key, raw: q.raw, lease: q.lease, wait: left, opts: q.opts}
			q.opts.ID = newKey()
			line = q.line(buf[:0], q.wait)
			wait = left
			avoid, redirects, since = nil, 0, time.Time{}
			continue
		}
		if ended != nil {
			return nil, aerr
		}
		if derived && se.Code == CodeInvalidArgument && se.Field == "wait" {
			// ctx's deadline is beyond the node's wait_max: asked
			// again (the refusal left nothing) without a wait, which
			// the node bounds by wait_max.
			o.wait, derived, q.wait, wait = 0, false, 0, 0
			line = q.line(buf[:0], 0)
			continue
		}
		if a.Code != CodeUnavailable {
			return nil, aerr
		}
		// No active node known (a failover), the node shutting down, or
		// one that has just resumed from a pause (which keeps a grant for
		// the repeat under the same id): another attempt, after a second,
		// for failoverPatience.
		if !patient(o.wait, start, &unavailableSince) {
			// A node that resumed from a pause may still keep a grant
			// for the repeat: settled as after a cancel.
			c.nsettle(q, nil, s.addr)
			return nil, se
		}
		if err := sleep(ctx, time.Second); err != nil {
			c.nsettle(q, nil, s.addr)
			return nil, err
		}
		avoid, redirects = s, 0
	}
}

// nsettle ends, in the background, what an acquire given up by its caller
// may leave on the node, given its late answer a (nil: none came, the
// connection ended). A grant is released at once. Without an answer, with
// E unavailable (a node resuming from a pause keeps the grant for a
// repeat) or with M (the node handed its role off, or was demoted: the
// waiter's place, replicated, is kept on the active it names, which would
// grant it to nobody), the outcome is unknown: the acquire is repeated
// under its id with a wait of 1 ms, and a grant that repeat gets is
// released (a repeat that M answers follows it). So is a T that answers
// an acquire withdrawn by its cancel (C) during a failover: it comes from
// the node the C reached, which may not be the one that keeps the place
// (a demoted active withdraws it from its own state, which its successor
// no longer follows; a standby promoted meanwhile answers T to the
// attempt parked on it while the place replicated from the old active
// stays), as over HTTP, where a cancelled acquire gets no answer and is
// always settled. Any other answer leaves nothing. Bounded as
// settleAcquire; Close waits for it. at is the node that answered a, or
// that q's last attempt went to (nil: not known): as in settleAcquire,
// the repeat asks it first, and the release goes to the node that
// granted, where a not_held or not_holder from another node is no answer
// (two actives at once).
func (c *Client) nsettle(q *nacq, a *nline.Answer, at *address) {
	mayHold := a == nil || a.Outcome == nline.OK || a.Outcome == nline.Moved ||
		(a.Outcome == nline.Error && a.Code == CodeUnavailable) || (a.Outcome == nline.Timeout && q.withdrawn.Load())
	if !mayHold {
		return
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.settling.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.settling.Done()
		var token uint64
		if a != nil && a.Outcome == nline.OK {
			token = a.Token
		} else {
			token, at = c.naskAgain(q, at)
		}
		if token == 0 {
			return
		}
		rctx, cancel := context.WithTimeout(c.ctx, c.cfg.ReleaseTimeout)
		defer cancel()
		_ = c.nRelease(rctx, q.key, token, at)
	}()
}

// naskAgain repeats the acquire q under its id with a wait of 1 ms until a
// node gives a definite answer, for at most ReleaseTimeout, each attempt
// asking at first (nil: the preferred node). It returns the token of a
// grant and the node that granted it, or 0 when nothing is held under q
// (or no answer came in time).
func (c *Client) naskAgain(q *nacq, at *address) (uint64, *address) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.ReleaseTimeout)
	defer cancel()
	id := nid{nline.OpAcquire, q.raw}
	line := q.line(nil, time.Millisecond)
	var avoid *slot
	for redirects := 0; redirects <= maxRedirects; {
		s, w, busy, err := c.npickBusy(ctx, at, avoid, true, id, time.Time{})
		done := func() {}
		if err == nil && busy {
			// Not behind another acquire of the key, which may wait
			// for the very grant this repeat is to find and release.
			var sw *nwire
			if sw, done, err = c.nsolo(ctx, s); err == nil {
				w = sw
			}
		}
		if err == nil {
			a, err := w.do(ctx, id, line, &naskLate{q, s.addr}, releaseAttempt)
			done()
			switch {
			case refusal(err) != nil:
				return 0, nil // not served
			case err != nil:
				avoid = s
			case a.Outcome == nline.OK:
				c.answered(s)
				return a.Token, s.addr
			case a.Outcome == nline.Moved:
				redirects++
				if c.nmove(s, a.Addr) == nil {
					// The node named is asked (a standby granted
					// nothing).
					at = nil
					continue
				}
			case a.Outcome == nline.Error && (a.Code == CodeUnavailable || a.Code == CodeInternal):
			default:
				return 0, nil // T, grant_ended, superseded, ...: nothing held
			}
		}
		if refusal(err) != nil || sleep(ctx, c.cfg.ReleaseRetry) != nil {
			return 0, nil
		}
	}
	return 0, nil
}

// isConnErr reports whether err is (or wraps) an *errConn; a function so
// that the target of errors.As is allocated only when there is an error.
func isConnErr(err error) bool {
	var ce *errConn
	return errors.As(err, &ce)
}

// naskLate is the nlate of naskAgain's repeats: a grant that answers one
// given up is settled on the node that made it (at); nothing else needs
// anything.
type naskLate struct {
	q  *nacq
	at *address
}

func (l *naskLate) late(a *nline.Answer, _ error) {
	if a != nil && a.Outcome == nline.OK {
		l.q.c.nsettle(l.q, a, l.at)
	}
}

// nRelease is release over the native protocol, from as there: each round
// of attempts asks from first, and a not_held or not_holder ends it only
// when from answered it, or a node it named in an M. Each attempt is
// bounded by releaseAttempt and by the ReleaseTimeout window, with no
// context of its own: a release is on the hot path of every cycle, and
// the attempt's bound is the pooled timer of its call (see do), not a
// context, a timer and a cancel registration with ctx per attempt.
func (c *Client) nRelease(ctx context.Context, key string, token uint64, from *address) error {
	if err := checkNativeKey(key); err != nil {
		return err
	}
	end := time.Now().Add(c.cfg.ReleaseTimeout)
	raw := nline.Escape(key)
	id := nid{nline.OpRelease, raw}
	var buf [128]byte // do copies the line: no allocation for it
	line := nline.AppendRelease(buf[:0], raw, token)
	ambiguous := false // an attempt may have reached the node
	elsewhere := false // not_held/not_holder from a node not from (release)
	var last error
	redirects := 0
	var avoid *slot
	want := from     // the node a round asks first (nil after an M)
	var via *address // the node this round asked first
	for {
		until := minTime(end, time.Now().Add(releaseAttempt))
		s, w, err := c.npick(ctx, want, avoid, false, id, until)
		want = nil
		if err == nil && via == nil {
			via = s.addr
		}
		if err == nil {
			var a nline.Answer
			if lim := time.Until(until); lim > 0 {
				a, err = w.do(ctx, id, line, nil, lim)
			} else {
				err = context.DeadlineExceeded // the window's end: nothing sent
			}
			if errors.Is(err, errNoAnswer) {
				if time.Now().Before(end) {
					err = &errConn{err: fmt.Errorf("no answer within %v", releaseAttempt)}
				} else {
					err = context.DeadlineExceeded // the window's end
				}
			}
			switch {
			case refusal(err) != nil:
				return refusal(err) // the line was not served
			case err != nil && isConnErr(err):
				ambiguous = true
				avoid = s
			case err != nil:
			case a.Outcome == nline.OK:
				c.answered(s)
				return nil
			case a.Outcome == nline.Moved:
				if redirects++; redirects > maxRedirects {
					// The nodes still name an active that does not
					// answer (a failover in progress): retried after
					// the pause, within ReleaseTimeout.
					err = fmt.Errorf("%w: release %q: more than %d redirects", ErrUnavailable, key, maxRedirects)
					redirects = 0
					break
				}
				if err := c.nmove(s, a.Addr); err != nil {
					return err
				}
				// The node named is the one to ask, even if an attempt
				// there went unanswered before (avoid would skip it).
				avoid = nil
				continue
			case (a.Code == CodeNotHeld || a.Code == CodeNotHolder) && from != nil && via != from:
				// Not the node that granted, nor one it named: that
				// node is asked again (also after it failed).
				err = answerError(&a)
				avoid = nil
				elsewhere = true
			case a.Code == CodeNotHeld || a.Code == CodeNotHolder:
				if ambiguous {
					return nil
				}
				return answerError(&a)
			case a.Code == CodeUnavailable || a.Code == CodeInternal || a.Code == CodeTooManyKeys || a.Code == CodeTooManyWaiters:
				err = answerError(&a)
				ambiguous = ambiguous || a.Code == CodeUnavailable || a.Code == CodeInternal
			default:
				return answerError(&a)
			}
		}
		redirects = 0 // not a redirect: the next attempt counts anew
		want, via = from, nil
		if errors.Is(err, ErrClosed) {
			return err
		}
		if se := refusal(err); se != nil {
			return se // npick: the node refused the token at the dial
		}
		if err != nil && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			last = err
		}
		if ctx.Err() != nil || !time.Now().Before(end) || sleep(ctx, min(c.cfg.ReleaseRetry, time.Until(end))) != nil || !time.Now().Before(end) {
			if ambiguous && elsewhere {
				return nil // as release: the unanswered attempt released it
			}
			if last == nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return c.releaseUnconfirmed(key)
			}
			return fmt.Errorf("baton: release %q not confirmed: %w", key, last)
		}
	}
}

// ncall makes a request that is safe to repeat (a renewal): on a
// connection failure it moves on to the next connection, failing after
// as many attempts as there are connections; M answers are followed. It
// returns the first answer that is not an M. Its first attempt passes
// over the connection avoid (nil: none), as npick does after a failure:
// the one a caller's earlier call left unanswered (a silent node); an M
// naming another node than avoid's lifts it. It also returns the slot of
// its last attempt (nil when none was sent), also when ctx ended before
// that attempt was answered, for the caller's next call to avoid (as
// callAvoiding).
func (c *Client) ncall(ctx context.Context, what string, id nid, line []byte, avoid *slot) (nline.Answer, string, *slot, error) {
	attempts, redirects := 0, 0
	max := c.numConns()
	given := avoid
	var last *slot
	for {
		s, w, err := c.npick(ctx, nil, avoid, false, id, time.Time{})
		if err != nil {
			return nline.Answer{}, "", last, err
		}
		last = s
		a, err := w.do(ctx, id, line, nil, 0)
		if err != nil {
			if ctx.Err() != nil {
				return nline.Answer{}, "", s, ctx.Err()
			}
			if c.ctx.Err() != nil {
				return nline.Answer{}, "", s, ErrClosed
			}
			c.nbroken(s, w)
			if se := refusal(err); se != nil {
				return nline.Answer{}, "", s, se // not served
			}
			if attempts++; attempts >= max {
				return nline.Answer{}, "", s, fmt.Errorf("%w: %s: %d attempts failed, last: %w", ErrUnavailable, what, attempts, err)
			}
			avoid, given = s, nil
			continue
		}
		if a.Outcome == nline.Moved {
			if redirects++; redirects > maxRedirects {
				return nline.Answer{}, "", s, fmt.Errorf("baton: %s: more than %d redirects", what, maxRedirects)
			}
			if err := c.nmove(s, a.Addr); err != nil {
				return nline.Answer{}, "", s, err
			}
			if avoid != nil && !c.stillSilent(avoid, given) {
				avoid, given = nil, nil
			}
			continue
		}
		if a.Outcome == nline.OK {
			c.answered(s)
		}
		return a, w.node, s, nil
	}
}

// nRenew is Renew over the native protocol; its first attempt passes over
// the connection avoid (ncall), and it returns the slot of its last
// attempt.
func (c *Client) nRenew(ctx context.Context, key string, token uint64, lease time.Duration, avoid *slot) (*Grant, *slot, error) {
	if err := checkNativeKey(key); err != nil {
		return nil, nil, err
	}
	raw := nline.Escape(key)
	a, node, s, err := c.ncall(ctx, "renew "+fmt.Sprintf("%q", key), nid{nline.OpRenew, raw}, nline.AppendRenew(nil, raw, token, lease), avoid)
	if err != nil {
		return nil, s, err
	}
	if a.Outcome != nline.OK {
		return nil, s, answerError(&a)
	}
	return &Grant{Key: key, Token: a.Token, Lease: a.Lease.Seconds(), ExpiresAt: a.Expires, Node: node}, s, nil
}

// nForceRelease is ForceRelease over the native protocol: "R <key>
// force id=<id>" under a fresh id, which makes a repeat after a lost
// answer (ncall's) safe, as an HTTP force's Idempotency-Key does.
func (c *Client) nForceRelease(ctx context.Context, key string) error {
	if err := checkNativeKey(key); err != nil {
		return err
	}
	raw := nline.Escape(key)
	a, _, _, err := c.ncall(ctx, "force release "+fmt.Sprintf("%q", key), nid{nline.OpRelease, raw}, nline.AppendForceRelease(nil, raw, newKey()), nil)
	if err != nil {
		return err
	}
	if a.Outcome != nline.OK {
		return answerError(&a)
	}
	return nil
}
