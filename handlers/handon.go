package handlers

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/engine"
)

// A release that hands a lock on grants its waiters in the same step: a
// release of an exclusive holder can grant dozens of shared waiters at
// once. Each waiter's HTTP/1.1 handler was woken to write its own answer,
// and the last of them ran only after every one before it had run its
// whole turn on the node's processors (its answer, the end of its
// request, the next request of its connection): issue 14's read-heavy
// handoff tail was that queue. Now the handler of the release writes the
// answers of the grants it made (and of any others not yet answered) one
// after the other once its own record is written, while the waiters'
// handlers, woken as before, answer whichever grant they reach first.
// Each answer is written once: by whoever claims it (parkedAcquire.claim).
// Over HTTP/2 the stream's handler still answers (its writes go through
// the connection's one writer anyway).

// parkedAcquire is an HTTP acquire queued in the engine (its
// engine.Receiver). The engine puts the outcome in o (Done) and wakes the
// handler through woke; a grant over HTTP/1.x is also listed in the
// Server's handedOn, so that a release's handler may answer it.
type parkedAcquire struct {
	s  *Server
	w  http.ResponseWriter
	r  *http.Request
	id string
	o  engine.AcquireResult
	// woke receives once when o is set, and once more when another
	// goroutine has answered the grant (it claimed it first).
	woke chan struct{}
	// claim is set by the one goroutine that answers o: the handler or
	// a release's handler (answerHandedOn).
	claim atomic.Bool
}

// parkedAcquires holds parkedAcquires that no engine or list refers to:
// most acquires are granted at once, and theirs goes back (free).
var parkedAcquires = sync.Pool{New: func() any { return &parkedAcquire{woke: make(chan struct{}, 2)} }}

// newParkedAcquire returns the receiver of an acquire on w and r.
func newParkedAcquire(s *Server, w http.ResponseWriter, r *http.Request, id string) *parkedAcquire {
	p := parkedAcquires.Get().(*parkedAcquire)
	p.s, p.w, p.r, p.id = s, w, r, id
	return p
}

// free returns p, which the engine never parked (so it never received),
// to the pool.
func (p *parkedAcquire) free() {
	p.s, p.w, p.r, p.id = nil, nil, nil, ""
	parkedAcquires.Put(p)
}

// Done is the engine's callback (engine.Receiver): it runs with the key's
// shard locked and never blocks (woke has room for both of its sends).
func (p *parkedAcquire) Done(o engine.AcquireResult) bool {
	p.o = o
	if o.Err() == nil && p.r.ProtoMajor == 1 {
		p.s.handedOn.add(p)
	}
	p.woke <- struct{}{}
	return true
}

// answer writes p's outcome to its client (the claim's holder only).
func (p *parkedAcquire) answer() {
	g, err := p.o.Settle()
	p.s.answerAcquire(p.w, p.r, p.id, g, err)
}

// acquireParked is Acquire over AcquireTo: it waits for the outcome of an
// acquire the engine queued (wt), or for ctx to end, and answers it
// unless a release's handler claimed it first; then it waits for that
// answer to be written.
func (s *Server) acquireParked(ctx context.Context, p *parkedAcquire, wt *engine.Waiting) {
	select {
	case <-p.woke:
	case <-ctx.Done():
		if wt.Cancel() {
			s.writeError(p.w, p.r, ctx.Err())
			return
		}
		// The outcome raced with the cancellation: whoever claims it
		// finds the request's context done and abandons the grant
		// (answerAcquire), as Engine.Acquire did.
		<-p.woke
	}
	if p.claim.CompareAndSwap(false, true) {
		p.answer()
		return
	}
	<-p.woke // the release's handler wrote the answer
}

// handedOnList is the grants made to parked HTTP/1.x acquires and not yet
// known to be answered, oldest first.
type handedOnList struct {
	mu sync.Mutex
	q  []*parkedAcquire
	// n is len(q), set under mu and read without it: a release that
	// granted nothing finds 0 (most do) and locks nothing.
	n atomic.Int32
	// compactAt is the length at which add drops the entries already
	// claimed (grants made by a lease's end or a withdrawn waiter are
	// answered by their own handlers, and no release may come to take
	// them off).
	compactAt int
}

func (l *handedOnList) add(p *parkedAcquire) {
	l.mu.Lock()
	if len(l.q) >= l.compactAt {
		l.q = slices.DeleteFunc(l.q, func(p *parkedAcquire) bool { return p.claim.Load() })
		l.compactAt = max(64, 2*len(l.q))
	}
	l.q = append(l.q, p)
	l.n.Store(int32(len(l.q)))
	l.mu.Unlock()
}

// take returns every listed grant and empties the list; buf is reused.
func (l *handedOnList) take(buf []*parkedAcquire) []*parkedAcquire {
	l.mu.Lock()
	buf = append(buf[:0], l.q...)
	clear(l.q)
	l.q = l.q[:0]
	l.n.Store(0)
	l.mu.Unlock()
	return buf
}

// handOnWriteLimit bounds the write of an answer that a release's handler
// makes for another request (answerHandedOn): as long as the native
// protocol gives a client that takes nothing before it closes it.
const handOnWriteLimit = time.Second

var handedOnBufs = sync.Pool{New: func() any { return new([]*parkedAcquire) }}

// answerHandedOn answers, in grant order, the listed grants that no
// handler has claimed yet: a release's handler calls it once its release
// is written, before it answers its own client.
func (s *Server) answerHandedOn() {
	if s.handedOn.n.Load() == 0 {
		return
	}
	bp := handedOnBufs.Get().(*[]*parkedAcquire)
	ps := s.handedOn.take(*bp)
	for i, p := range ps {
		if p.claim.CompareAndSwap(false, true) {
			// A client that does not read its answers must not hold up
			// this release's own answer and the grants after its own:
			// its write gets handOnWriteLimit (its handler's own write
			// had no limit). A write cut off is a grant not delivered:
			// it is abandoned and passes on (answerAcquire), and net/http
			// closes the connection.
			rc := http.NewResponseController(p.w)
			_ = rc.SetWriteDeadline(time.Now().Add(handOnWriteLimit))
			p.answer()
			_ = rc.SetWriteDeadline(time.Time{})
			p.woke <- struct{}{}
		}
		ps[i] = nil
	}
	*bp = ps[:0]
	handedOnBufs.Put(bp)
}
