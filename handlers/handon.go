package handlers

import (
	"context"
	"math"
	"net/http"
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
// handoff tail was that queue. Now a grant over HTTP/1.x is listed
// (handedOn) instead of waking its handler, and the answers are written
// one after the other, in grant order, by the handler of the release once
// its record is written and by a goroutine started when the list fills
// (any grant: a lease's end, a withdrawn waiter, a release over the native
// protocol) while no HTTP release is in flight, or by a release's handler
// for the grants it leaves (releaseDone); both take from the list, and
// each answer's handler is woken once its answer is written. Over HTTP/2 the stream's handler still
// answers, as before (Engine.Acquire): its writes go through the
// connection's one writer anyway.

// parkedAcquire is an HTTP acquire queued in the engine (its
// engine.Receiver), over HTTP/1.x (HTTP/2 acquires park in
// Engine.Acquire). The engine puts the outcome in o (Done); a grant is
// listed in the Server's handedOn and answered from there, any other
// outcome wakes the handler to answer it.
type parkedAcquire struct {
	s  *Server
	w  http.ResponseWriter
	r  *http.Request
	id string
	// shared: a shared acquire, which a release may grant in a run of
	// several (Done).
	shared bool
	o      engine.AcquireResult
	// woke receives once: when o is set, for an outcome the handler
	// answers; once the answer is written, for a listed grant.
	woke chan struct{}
	// claim is set by the one goroutine that answers o: the handler
	// (an outcome not listed, or a request that ended as it was granted)
	// or one that takes it from the list (answerHandedOn).
	claim atomic.Bool
}

// parkedAcquires holds parkedAcquires that no engine or list refers to:
// most acquires are granted at once, and theirs goes back (free).
var parkedAcquires = sync.Pool{New: func() any { return &parkedAcquire{woke: make(chan struct{}, 1)} }}

// newParkedAcquire returns the receiver of an acquire on w and r.
func newParkedAcquire(s *Server, w http.ResponseWriter, r *http.Request, id string) *parkedAcquire {
	p := parkedAcquires.Get().(*parkedAcquire)
	p.s, p.w, p.r, p.id = s, w, r, id
	return p
}

// free returns p, which the engine never parked (so it never received),
// to the pool.
func (p *parkedAcquire) free() {
	p.s, p.w, p.r, p.id, p.shared = nil, nil, nil, "", false
	parkedAcquires.Put(p)
}

// Done is the engine's callback (engine.Receiver): it runs with the key's
// shard locked and never blocks.
func (p *parkedAcquire) Done(o engine.AcquireResult) bool {
	p.o = o
	if o.Err() == nil {
		// While an HTTP release is between its engine call and its
		// answerHandedOn (most grants are made by one: this one's, on
		// this goroutine), an exclusive grant starts no goroutine: the
		// release's handler takes the grants written with its step, and
		// starts one for those it leaves (releaseDone). In a handoff
		// with sync_standbys the goroutine, started at once, took the
		// grant and waited for its acknowledgement beside the release's
		// handler: two goroutines to wake per acknowledgement instead of
		// one, and a goroutine started per grant. A shared grant may be
		// the first of a run, which the goroutine and the release's
		// handler answer together, on two processors when both are free.
		if p.s.handedOn.add(p) && (p.shared || p.s.releasing.Load() == 0) {
			go p.s.answerHandedOn(math.MaxUint64)
		}
		return true
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
// acquire the engine queued (wt) to be answered, answering it itself
// when it is not a listed grant, or for ctx to end.
func (s *Server) acquireParked(ctx context.Context, p *parkedAcquire, wt *engine.Waiting) {
	select {
	case <-p.woke:
		// A listed grant's answer is written (its claim taken); any
		// other outcome is this handler's to answer.
		if p.claim.CompareAndSwap(false, true) {
			p.answer()
		}
		return
	case <-ctx.Done():
		if wt.Cancel() {
			s.writeError(p.w, p.r, ctx.Err())
			return
		}
		// The outcome raced with the cancellation. Claimed here, it is
		// answered here: answerAcquire finds the request's context done
		// and abandons a grant, as Engine.Acquire did. Otherwise the
		// list's goroutine does the same, and this one waits for it.
	}
	if p.claim.CompareAndSwap(false, true) {
		p.answer()
		return
	}
	<-p.woke
}

// handedOnList is the grants made to parked HTTP/1.x acquires and not yet
// taken to be answered, oldest first.
type handedOnList struct {
	mu   sync.Mutex
	q    []*parkedAcquire
	head int // q[head:] are listed
	// n is len(q)-head, set under mu and read without it: a release that
	// granted nothing finds 0 (most do) and locks nothing.
	n atomic.Int32
}

// add lists p and reports whether the list was empty: its caller then
// starts a goroutine to answer it (answerHandedOn).
func (l *handedOnList) add(p *parkedAcquire) (first bool) {
	l.mu.Lock()
	first = l.head == len(l.q)
	if first {
		clear(l.q)
		l.q, l.head = l.q[:0], 0
	}
	l.q = append(l.q, p)
	l.n.Store(int32(len(l.q) - l.head))
	l.mu.Unlock()
	return first
}

// next takes the oldest listed grant off the list, if its record's log
// index is at most upTo (nil: none, or the oldest is above upTo).
func (l *handedOnList) next(upTo engine.LogIndex) *parkedAcquire {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.head == len(l.q) || l.q[l.head].o.LogIndex() > upTo {
		return nil
	}
	p := l.q[l.head]
	l.q[l.head] = nil
	l.head++
	l.n.Store(int32(len(l.q) - l.head))
	return p
}

// releaseDone ends an HTTP release's turn with the list (Server.releasing),
// once: *done is set. Done started no goroutine for a grant listed
// meanwhile, so when the list still holds grants (those above the
// release's own step: another key's, made while it waited for its
// records) it starts one. releasing is decremented before the list is
// read, and Done reads releasing after it listed its grant: either Done
// saw no release and started the goroutine, or this sees its grant.
func (s *Server) releaseDone(done *bool) {
	if *done {
		return
	}
	*done = true
	s.releasing.Add(-1)
	if s.handedOn.n.Load() > 0 {
		go s.answerHandedOn(math.MaxUint64)
	}
}

// handOnWriteLimit bounds the write of an answer made away from its
// request's handler (answerHandedOn): as long as the native protocol
// gives a client that takes nothing before it closes it.
const handOnWriteLimit = time.Second

// answerHandedOn answers the listed grants, in grant order, until the
// list is empty or its oldest grant's record is above log index upTo.
// Done starts it on a goroutine of its own whenever the list fills, with
// no bound (it waits for each record). A release's handler calls it once
// its release and the grants it made are written, before it answers its
// own client, with upTo the highest index its step appended
// (Engine.ReleaseLogged): it takes only grants already written, so its
// client never waits for another change's record (a grant made after
// the release, on any key, whose write or sync standbys' acknowledgement
// may take up to sync_timeout); the goroutine answers those.
func (s *Server) answerHandedOn(upTo engine.LogIndex) {
	if s.handedOn.n.Load() == 0 {
		return
	}
	for p := s.handedOn.next(upTo); p != nil; p = s.handedOn.next(upTo) {
		if !p.claim.CompareAndSwap(false, true) {
			continue // its handler answers it (its request ended)
		}
		// A client that does not read its answers must not hold up the
		// grants after its own, nor a release's own answer: its write
		// gets handOnWriteLimit (its handler's own write had no limit).
		// A write cut off is a grant not delivered: it is abandoned and
		// passes on (answerAcquire), and net/http closes the connection.
		// The limit starts once the grant is settled: the wait for its
		// record (an fsync, a sync standby's acknowledgement, up to
		// sync_timeout) is no write, and a deadline that ran during it
		// cut off the answer of a client that reads at once.
		g, err := p.o.Settle()
		rc := http.NewResponseController(p.w)
		_ = rc.SetWriteDeadline(time.Now().Add(handOnWriteLimit))
		s.answerAcquire(p.w, p.r, p.id, g, err)
		_ = rc.SetWriteDeadline(time.Time{})
		p.woke <- struct{}{}
	}
}
