package engine

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"time"
)

// This file holds what a cluster needs from the engine: the roles (active,
// standby) and the epochs. A standby replays the active's log records
// (Replay, ReplayAt) through the one apply path (apply.go), after a dump
// (dump.go, snapshot.go) when it starts from a snapshot; every time comes
// from the record, never from the clock, so that a standby holds exactly
// the active's holders, leases and queues. Times cross between nodes on the
// wall clock (Unix ns): a dump converts each monotonic deadline against
// one reading of the clock, and Replay converts back against its own (see
// Clock).

// ErrNotActive: the engine is a standby and serves no calls.
var ErrNotActive = errors.New("engine: not the active node")

// ErrMoved is matched (errors.Is) by a *MovedError.
var ErrMoved = errors.New("engine: the lock state moved to another node")

// MovedError is what a parked Acquire returns when its engine stops being
// active (handoff, step-down) while the waiter keeps its place in the
// replicated queue. ID is the waiter's ID: a repeat with it on the new
// active resumes the place; for a caller without an ID of its own it is a
// server ticket (IsTicket), which the HTTP layer carries in the redirect.
type MovedError struct{ ID string }

// Error is ErrMoved's message (the ID is not in it: it may be a ticket).
func (e *MovedError) Error() string { return ErrMoved.Error() }

// Is makes errors.Is(err, ErrMoved) true.
func (e *MovedError) Is(target error) bool { return target == ErrMoved }

// AnonPrefix starts the IDs the engine gives queued waiters that came
// without one. No client ID starts with it: client IDs are printable ASCII.
const AnonPrefix = "\x1f"

// IsTicket reports whether id was made by the engine (AnonPrefix).
func IsTicket(id string) bool { return strings.HasPrefix(id, AnonPrefix) }

// TicketID turns a ticket as it travels in a URL into the waiter ID.
func TicketID(ticket string) string { return AnonPrefix + ticket }

// Ticket returns the URL form of an engine-made id ("" for a client ID).
func Ticket(id string) string {
	if t, ok := strings.CutPrefix(id, AnonPrefix); ok {
		return t
	}
	return ""
}

// localMark follows AnonPrefix in a ticket that no promotion keeps
// (IsLocalTicket); it is not a hex digit, which the others have there.
const localMark = "n"

// newTicketID returns a new ticket ID; local: one no promotion keeps
// (AcquireRequest.NoTicket).
func newTicketID(local bool) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	if local {
		return AnonPrefix + localMark + hex.EncodeToString(b[:])
	}
	return AnonPrefix + hex.EncodeToString(b[:])
}

// IsLocalTicket reports whether id is a ticket made for an acquire whose
// redirect cannot carry it (AcquireRequest.NoTicket): every promotion,
// a handoff's too, drops its waiter, and releases a grant to it that
// awaits its claim.
func IsLocalTicket(id string) bool { return strings.HasPrefix(id, AnonPrefix+localMark) }

// serving reports why calls are refused, if they are. s.mu is held.
func (e *Engine) serving() error {
	switch {
	case e.closed.Load():
		return ErrClosed
	case !e.active.Load():
		return ErrNotActive
	}
	return nil
}

// Generation counts the times the engine's state stopped being the
// cluster's: Diverged (this node stepped down to an active whose state is
// newer) and Reset (it loads another node's snapshot). A change made in
// one generation and answered in another (its answer waited for the log,
// or for sync standbys, across a pause and a step-down) may not be in the
// state the cluster serves, which may have given its lock to another
// holder: it is answered ErrReplaced, by the rule stated there. A
// handoff (Demote alone) starts no generation: the successor got this
// state.
func (e *Engine) Generation() uint64 { return e.resets.Load() }

// Diverged starts a new Generation: this node stepped down to an active
// whose state is newer, and what it made on its own is discarded when it
// resyncs.
func (e *Engine) Diverged() { e.resets.Add(1) }

// Replaced reports whether the engine's state was replaced since
// Generation returned gen (see Generation).
func (e *Engine) Replaced(gen uint64) bool { return e.resets.Load() != gen }

// Active reports whether the engine serves calls.
func (e *Engine) Active() bool { return e.active.Load() }

// Reset drops all state (a standby about to take a fresh snapshot), the
// epoch mark included. It keeps the fencing-token high-water mark. It
// counts as a new Generation.
func (e *Engine) Reset() {
	defer e.resets.Add(1)
	e.epoch.Store(nil)
	for i := range e.shards {
		s := &e.shards[i]
		s.mu.Lock()
		for _, lk := range s.locks {
			for w := lk.head; w != nil; w = w.next {
				if w.state == queued {
					w.deliver(AcquireResult{err: &MovedError{ID: w.t.id}})
				}
				e.waiters.Add(-1)
			}
		}
		e.keys.Add(-int64(len(s.locks)))
		for _, lk := range s.locks {
			if lk.holders() != 0 {
				e.held.Add(-1)
			}
		}
		s.locks = make(map[string]*lock)
		s.tickets = make(map[ticketKey]*ticket)
		clear(s.heap)
		s.heap = s.heap[:0]
		s.retained = retainedQueue{}
		s.newest = 0
		s.last = 0
		s.mu.Unlock()
	}
}

// NewestGrant returns the highest fencing token of a grant applied to the
// engine since New or the last Reset, whoever made it: granted here,
// replicated, replayed from the log at start, or loaded from a dump (of a
// grant the dump holds: one released before the dump was written is not
// in it). 0 = none. A cluster node starts its state token from it (the
// newest grant its replayed state holds). It locks each shard in turn.
func (e *Engine) NewestGrant() uint64 {
	var v uint64
	for i := range e.shards {
		s := &e.shards[i]
		s.mu.Lock()
		v = max(v, s.newest)
		s.mu.Unlock()
	}
	return v
}

func (s *shard) lockFor(key string) *lock {
	lk := s.locks[key]
	if lk == nil {
		s.e.keys.Add(1)
		lk = s.newLock(key)
	}
	return lk
}

// newLock adds the lock of key, a key s does not have, already counted in
// Engine.keys. s.mu is held.
func (s *shard) newLock(key string) *lock {
	// The key is copied: the caller's string may share its memory with a
	// whole request (an HTTP request line), which a held key would
	// otherwise keep alive.
	lk := &lock{key: strings.Clone(key), hold: hold{dl: deadline{idx: -1}}}
	lk.dl.owner = lk
	s.locks[lk.key] = lk
	return lk
}

func (s *shard) ticket(key, id string) *ticket {
	t := s.tickets[ticketKey{key, id}]
	if t == nil {
		t = &ticket{id: id, key: key, dl: deadline{idx: -1}}
		t.dl.owner = t
		s.tickets[ticketKey{key, id}] = t
	}
	return t
}

// Promotion says how a standby becomes the active. It decides the fate of
// the waiters that came without an ID of their own, whose engine-made
// ticket (IsTicket) only the old active's redirect can carry to a client.
type Promotion uint8

const (
	// Failover: the active is gone (crash, kill -9, partition). The
	// requests of its waiters died with it; one with an ID of its own may
	// come back with it, but nobody ever learnt a ticket: waiters with a
	// ticket are dropped, and a grant to one that awaits its claim is
	// released at once (as Config.PollTimeout does on a single node).
	Failover Promotion = iota
	// Handoff: the old active hands its state over on purpose and
	// redirects its parked calls, each waiter with its ticket, to this
	// node: every waiter keeps its place, but one whose ticket no
	// redirect carries (IsLocalTicket), which is dropped.
	Handoff
	// Restart: a single node (no peers) starts on its own data_dir. Its
	// waiters are treated as in a Failover (their requests died with the
	// old process), but its tokens continue just above max(every token
	// seen, now), without TokenMargin: its token high-water mark, reserved
	// ahead and fsynced before any token above it is issued, bounds every
	// token it ever issued, and no other node issued any. (With the
	// margin, each start put the tokens one more second ahead of the
	// clock.)
	Restart
)

// Promote makes a standby active: every replicated lease and claim deadline
// keeps its deadline (one that passed meanwhile is taken back and handed on
// at once); every replicated waiter that can come back (see Promotion)
// keeps its place for Config.PollGrace, for its client to resume it by
// repeating its acquire with the same ID; and fencing tokens continue above
// max(every token seen, now) + TokenMargin, which is above any token the
// old active can have issued unreplicated when clocks agree (SPEC section
// 1), and at most 2^53-1 (a Restart: above max(every token seen, now)).
// It returns the first token the node may issue (MaxToken or above when
// none is left).
//
// undelivered are grants to take back as the promotion's first changes,
// each by a release that names its waiter ID: the ones the node that
// hands off could not take back itself (Undelivered). They are released
// before the engine serves anything (it serves a shard while Promote
// still goes through the others), so a repeat of their waiter ID queues
// anew and is never answered with a grant taken back after.
func (e *Engine) Promote(how Promotion, undelivered ...Grant) uint64 {
	now := e.now()
	// TokenMargin above the clock and above every token seen: tokens run
	// ahead of the clock's microseconds while grants come faster than one
	// a microsecond per class (a cluster's stride, cluster.MaxPeers), and
	// the old active's last changes, unreplicated with sync_standbys 0,
	// may hold tokens above the last one seen here.
	// Never past the last token there is (2^53-1): a node whose tokens
	// came that close is out of them, and its mark stays one it starts
	// on.
	margin := uint64(e.cfg.TokenMargin.Microseconds())
	if how == Restart {
		margin = 0
	}
	reserve := min(max(uint64(max(now.wall, 0)/1e3), e.tokens.last.Load())+margin, MaxToken-1)
	e.tokens.observe(reserve)
	raise(&e.tokens.floor, reserve)
	if e.log != nil {
		// Logged, so that a standby that replicates this log, or this node
		// replaying it, continues above the reservation too. A log that
		// cannot take it: the tokens still rise here, and the token
		// high-water mark in data_dir keeps them rising after a restart.
		s := e.shard("")
		s.mu.Lock()
		_, _ = s.record(&Record{Kind: RecReserve, Token: max(reserve, e.tokens.last.Load())})
		s.mu.Unlock()
	}
	// The undelivered grants are taken back before the engine serves:
	// it serves every shard once active is set, while the loop below has
	// yet to reach it, and a repeat of such a grant's waiter ID would be
	// answered with the grant, released just after.
	for _, g := range undelivered {
		s := e.shard(g.Key)
		s.mu.Lock()
		if lk := s.locks[g.Key]; lk != nil {
			if h := lk.find(g.Token); h != nil {
				r := Record{Kind: RecRelease, Key: lk.key, Token: g.Token, At: now.wall}
				if t := h.holder; t != nil {
					r.WaiterID = t.id
				}
				_, _ = s.record(&r)
				s.apply(lk, &r, now)
			}
		}
		s.mu.Unlock()
	}
	e.active.Store(true)
	grace := after(now.mono, e.cfg.PollGrace)
	for i := range e.shards {
		s := &e.shards[i]
		s.mu.Lock()
		for _, lk := range s.locks {
			var next *waiter
			for w := lk.head; w != nil; w = next {
				next = w.next
				if w.req != nil {
					// Resumed here already: the engine serves from the
					// first shard on, and a repeat of its acquire took
					// the place over and parked (queued, its deadlines
					// armed). It must stay queued: a detached waiter's
					// grant waits for a repeat and is never delivered.
					continue
				}
				if (how != Handoff && IsTicket(w.t.id)) || IsLocalTicket(w.t.id) {
					s.leave(w, now)
					s.retire(w.t, tForget, now)
					continue
				}
				if w.graceUntil != 0 {
					// Its request went away before this promotion (its
					// poll ran out, or it was on an active that
					// promoted, and no repeat came since: RecDetach):
					// its grace runs on from then. Given anew at every
					// promotion, a waiter whose client gave up lived
					// through each failover and handoff back, was
					// granted and held the key to its lease, a queue of
					// them one after another.
					w.state, w.pollUntil, w.graceUntil = detached, 0, min(w.graceUntil, grace)
					s.schedule(w)
					continue
				}
				// Its request was parked on the old active: its grace
				// starts now, logged so that a later promotion (of a
				// node that streams or replays this log) continues it.
				r := Record{Kind: RecDetach, Key: lk.key, WaiterID: w.t.id, At: now.wall, Until: now.wallAt(grace)}
				_, _ = s.record(&r)
				s.apply(lk, &r, now)
			}
			lk.each(func(h *hold) {
				if t := h.holder; t != nil && t.claimBy != 0 && ((how != Handoff && IsTicket(t.id)) || IsLocalTicket(t.id)) {
					// Logged like every other change, through the one apply
					// path: a release whose answer nobody can get.
					r := Record{Kind: RecRelease, Key: lk.key, Token: h.token, WaiterID: t.id, At: now.wall}
					_, _ = s.record(&r)
					s.apply(lk, &r, now)
					return
				}
				s.armLease(h)
			})
		}
		for _, lk := range s.locks {
			s.grantNext(lk, now)
			s.dropIfIdle(lk)
		}
		s.mu.Unlock()
	}
	return e.tokens.classed(e.tokens.last.Load() + 1)
}

// EpochMark is what a RecEpoch record says: By (a node's URL) became the
// active with Epoch.
type EpochMark struct {
	Epoch uint64
	By    string
}

// StartEpoch writes a RecEpoch record for epoch, begun by the node by, to
// the log and applies it (Epoch returns it from then on): a cluster node
// calls it when it becomes the active, before Promote, so that its log
// says where each epoch began. Errors: one wrapping ErrUnavailable (the
// log refused it; nothing changed), ErrClosed.
func (e *Engine) StartEpoch(epoch uint64, by string) error {
	if e.closed.Load() {
		return ErrClosed
	}
	r := Record{Kind: RecEpoch, Epoch: epoch, Owner: by, At: e.now().wall}
	s := e.shard("")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.record(&r); err != nil {
		return err
	}
	s.apply(nil, &r, e.now())
	return nil
}

// Epoch is the last RecEpoch the engine applied or wrote (the zero value:
// none): the epoch of the active whose log this engine's state follows.
func (e *Engine) Epoch() EpochMark {
	if m := e.epoch.Load(); m != nil {
		return *m
	}
	return EpochMark{}
}

// Demote makes an active engine a standby: calls are refused with
// ErrNotActive from now on, lease, claim and wait deadlines stop (the new
// active runs them; they are kept, for a Promote after a failed handoff),
// and every parked Acquire returns a *MovedError while its
// waiter stays in the queue, to be resumed on the new active.
func (e *Engine) Demote() {
	e.active.Store(false)
	for i := range e.shards {
		s := &e.shards[i]
		s.mu.Lock()
		for _, lk := range s.locks {
			s.heap.remove(&lk.dl)
			if lk.x != nil {
				for _, sl := range lk.x.more {
					s.heap.remove(&sl.dl)
				}
			}
			for w := lk.head; w != nil; w = w.next {
				s.heap.remove(&w.dl)
				if w.state == queued {
					w.deliver(AcquireResult{err: &MovedError{ID: w.t.id}})
				}
				// A detached waiter keeps its grace (Promote).
				w.state, w.pollUntil = detached, 0
			}
		}
		s.mu.Unlock()
	}
}

// SetTokenClass makes every token this engine issues from now on equal to
// offset modulo stride (stride 0 or 1: any token), so that the nodes of
// one cluster, each with its own offset and one stride (cluster.MaxPeers),
// never issue the same token: not even two actives in a partition,
// each of which raises its tokens above the last token its polls of the
// other show (ObserveToken), and would otherwise count up from the same
// one (SPEC section 1: a fencing token is above every token issued before
// it, and a resource that rejects lower tokens accepts equal ones). Tokens
// still rise: a token is only ever rounded up into the class. Call it
// before the engine issues tokens; offset must be below stride.
func (e *Engine) SetTokenClass(stride, offset int) {
	if stride <= 1 || offset < 0 || offset >= stride {
		e.tokens.stride.Store(0)
		return
	}
	e.tokens.offset.Store(uint64(offset))
	e.tokens.stride.Store(uint64(stride))
}

// ObserveToken raises the fencing-token high-water mark to at least token
// (a token another node issued), so that the next grant is above it.
func (e *Engine) ObserveToken(token uint64) {
	e.tokens.observe(token)
	raise(&e.tokens.floor, token)
}

// paceTokens holds a new acquire back while this node, an active that
// issues tokens in a class (SetTokenClass: a cluster, where each grant
// takes the class's next token, stride microseconds on), has run its
// tokens more than TokenMargin/2 ahead of max(the wall clock, the
// highest token it did not issue itself: its promotion's reservation, a
// peer's). A standby promoted after this node dies continues TokenMargin
// above max(every token it saw, its clock) (Promote), a failover timeout
// at least after this node last spoke: bounded so, every token this node
// issued lies below that, however far the standby's replication lagged,
// as long as the clocks agree within that failover timeout plus
// TokenMargin/2 (SPEC section 1 asks within the failover detection time:
// a token is above every token issued before it). Only
// grants faster than one token a microsecond reach the bound (with
// cluster.MaxPeers as the stride, 62,500 a second); from there acquires
// wait, at most a millisecond at a time, until the clock has caught up.
// A single node (no class) needs no bound: its token high-water mark
// bounds every token it issued.
func (e *Engine) paceTokens() {
	if e.tokens.stride.Load() <= 1 {
		return
	}
	half := e.tokens.margin / 2
	for e.Active() {
		wall := uint64(max(e.now().wall, 0) / 1e3)
		bound := max(wall, e.tokens.floor.Load()) + half
		last := e.tokens.last.Load()
		if last <= bound {
			return
		}
		time.Sleep(min(time.Duration(last-bound)*time.Microsecond, time.Millisecond))
	}
}
