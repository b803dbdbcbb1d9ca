package engine

import (
	"errors"
	"time"
)

// apply makes the state change r describes: the one path every change of
// a key's holder, lease or queue runs through, whether the active made it
// (decide, build the Record, append it to the log, apply it) or a standby
// replays it (Apply). Times come from r (wall clock, converted against
// now), never from the clock. lk is r.Key's lock when the caller has it
// (nil: looked up). It returns the waiter the change concerns (granted,
// timed out, detached), if any: what only an active does with it (deliver
// an outcome to its parked request) hangs off that, not off a second copy
// of the change. Timers are armed only on an active engine (armLease and
// schedule check). A record that does not fit the state (a release of
// another token, a waiter not queued) changes nothing. s.mu is held.
//
// A release or an expiry leaves the key's state in place even when
// nobody holds or waits for it any more: an active hands it to the next
// waiter first. The caller frees an idle key then (dropIfIdle, or idle).
func (s *shard) apply(lk *lock, r *Record, now stamp) *waiter {
	if lk == nil {
		switch r.Kind {
		case RecGrant, RecEnqueue:
			lk = s.lockFor(r.Key)
		case RecRelease, RecExpire, RecRenew, RecClaim, RecForce:
			if lk = s.locks[r.Key]; lk == nil {
				return nil
			}
		}
	}
	if r.At > now.wall {
		// Made "later" than this clock reads: the clock that wrote it is
		// ahead (this one was stepped back while the node was down, or a
		// peer's runs ahead). Its deadlines count from now, as if it were
		// made now: none lasts longer than it was given.
		now.wall = r.At
	}
	at := now // the active applying its own change, made now
	if r.At != now.wall {
		at = now.at(r.At)
	}
	switch r.Kind {
	case RecGrant:
		return s.applyGrant(lk, r, at)
	case RecRelease, RecExpire:
		h := lk.find(r.Token)
		if h == nil {
			return nil
		}
		kind := EventRelease
		if r.Kind == RecExpire {
			kind = EventExpire
		}
		forget := r.Kind == RecRelease && r.WaiterID != ""
		t := h.holder
		s.endGrant(lk, h, at, kind, false)
		if forget && t != nil && t.id == r.WaiterID {
			s.retire(t, tForget, at)
		}
		// The key may be idle now: the caller drops it (idle) once the
		// active has handed it on to its next waiter (see idle).
	case RecForce:
		lk.each(func(h *hold) { s.endGrant(lk, h, at, EventRelease, true) })
		if r.WaiterID != "" {
			// The force's own ID, remembered so that a repeat under it
			// changes nothing (ForceReleaseID).
			s.retire(s.ticket(lk.key, r.WaiterID), tForced, at)
		}
	case RecRenew:
		h := lk.find(r.Token)
		if h == nil {
			return nil
		}
		h.lease = r.Lease
		h.expires = now.monoAt(r.Expires)
		h.clearClaim()
		s.armLease(h)
		if s.e.cfg.OnEvent != nil {
			s.emit(Event{Kind: EventRenew, Key: lk.key, Token: r.Token, Lease: r.Lease, At: r.At, ExpiresAt: r.Expires, Waiters: lk.n, Owner: lk.owner(h), Mode: lk.mode(), Limit: lk.limit()})
		}
	case RecEnqueue:
		t := s.ticket(lk.key, r.WaiterID)
		if t.w != nil {
			s.dropIfIdle(lk)
			return nil // queued already: a duplicate
		}
		t.asked(r)
		s.setLimit(lk, r.Limit)
		w := &waiter{lk: lk, t: t, state: detached, mode: r.Mode, owner: r.Owner, lease: r.Lease, defaulted: r.LeaseDefaulted, arrived: at.mono, waitUntil: now.monoAt(r.WaitUntil), dl: deadline{idx: -1}}
		w.dl.owner = w
		t.state, t.w = tWaiting, w
		s.heap.remove(&t.dl)
		lk.enqueue(w)
		if s.admitted {
			s.admitted = false // counted by the acquire (admit)
		} else {
			s.e.waiters.Add(1)
		}
		s.schedule(w)
		if s.e.cfg.OnEvent != nil {
			s.emit(Event{Kind: EventEnqueue, Key: lk.key, WaiterID: t.id, Lease: r.Lease, At: r.At, WaitUntil: r.WaitUntil, Waiters: lk.n, Owner: r.Owner, Mode: r.Mode, Limit: lk.limit()})
		}
		return w
	case RecLeave, RecTimeout:
		t := s.tickets[ticketKey{r.Key, r.WaiterID}]
		if t == nil || t.w == nil || t.w.lk == nil {
			return nil
		}
		w := t.w
		lk = w.lk
		s.dequeue(w)
		w.lk = nil
		if r.Kind == RecTimeout {
			t.w = nil
			t.state = tTimedOut
			s.retain(t, now.monoAt(r.Until))
			if s.e.cfg.OnEvent != nil {
				s.emit(Event{Kind: EventTimeout, Key: lk.key, WaiterID: t.id, At: r.At, Waiters: lk.n, Waited: time.Duration(at.mono - w.arrived), Owner: w.owner, Mode: w.mode, Limit: lk.limit()})
			}
		} else {
			if s.e.cfg.OnEvent != nil {
				s.emit(Event{Kind: EventLeave, Key: lk.key, WaiterID: t.id, At: r.At, Waiters: lk.n, Owner: w.owner, Mode: w.mode, Limit: lk.limit()})
			}
			s.retire(t, tForget, at)
		}
		s.dropIfIdle(lk)
		return w
	case RecDetach:
		t := s.tickets[ticketKey{r.Key, r.WaiterID}]
		if t == nil || t.w == nil || t.w.lk == nil {
			return nil
		}
		w := t.w
		w.state, w.pollUntil, w.graceUntil = detached, 0, now.monoAt(r.Until)
		if r.WaitUntil != 0 {
			w.waitUntil = now.monoAt(r.WaitUntil)
		}
		s.schedule(w)
		return w
	case RecClaim:
		if h := lk.find(r.Token); h != nil && h.holder != nil && h.holder.id == r.WaiterID {
			h.holder.claimBy = now.monoAt(r.Until)
			s.armLease(h)
			if s.e.cfg.OnEvent != nil && r.Until == 0 {
				// The grant now runs to its lease's end.
				s.emit(Event{Kind: EventClaim, Key: lk.key, Token: r.Token, WaiterID: r.WaiterID, At: at.wall, ExpiresAt: at.wallAt(h.expires), Waiters: lk.n})
			}
		}
	case RecEpoch:
		s.e.epoch.Store(&EpochMark{Epoch: r.Epoch, By: r.Owner})
	case RecOutcome:
		t := s.ticket(r.Key, r.WaiterID)
		if t.w != nil || t.state == tGranted {
			return nil
		}
		switch r.Outcome {
		case OutcomeEnded:
			t.state = tEnded
		case OutcomeForced:
			t.state = tForced
		case OutcomeForceNotHeld:
			t.state = tForceNotHeld
		default:
			t.state = tTimedOut
		}
		t.asked(r)
		s.heap.set(&t.dl, now.monoAt(r.Until))
		s.arm()
	}
	return nil
}

// applyGrant makes lk held as r (a RecGrant) says; at is r.At as a
// reading. The waiter r names, if queued, leaves the queue and is
// returned. s.mu is held.
func (s *shard) applyGrant(lk *lock, r *Record, at stamp) *waiter {
	var t *ticket
	var w *waiter
	waited := time.Duration(0)
	if r.WaiterID != "" {
		if h := lk.head; h != nil && h.t.id == r.WaiterID {
			t = h.t // the first waiter, as a grant most often is: no lookup
		} else {
			t = s.ticket(lk.key, r.WaiterID)
		}
		if w = t.w; w != nil && w.lk == lk {
			s.dequeue(w) // w.lk stays: a parked request may yet hand the grant back
			waited = time.Duration(at.mono - w.arrived)
		} else {
			w = nil
		}
	}
	s.e.tokens.observe(r.Token)
	s.newest = max(s.newest, r.Token)
	s.setLimit(lk, r.Limit)
	h := lk.find(r.Token) // a duplicate grant takes its own slot again
	newest := uint64(0)   // the highest token the holders have
	if h == nil && !lk.canGrant(r.Mode) {
		// Only a grant that does not fit beside the holders looks at
		// them: the cases below. A scan of every holder on each grant
		// made the grants of a key with many shared holders cost in
		// proportion to them (TestManySharedHoldersCostNoMorePerGrant).
		lk.each(func(o *hold) { newest = max(newest, o.token) })
	}
	if h == nil && newest != 0 && r.Token < newest && lk.limit() == 1 && !lk.canGrant(r.Mode) {
		// An earlier grant applied again over the state its own effects
		// led to (a standby that resumes its log after installing a
		// snapshot whose shards were dumped at later indexes): it takes
		// the first slot, and the records after it, applied again too,
		// rebuild the holders. No holder's ticket ends: the later ones
		// are still granted.
		h = &lk.hold
	}
	if h == nil && newest != 0 && r.Token > newest && !lk.canGrant(r.Mode) && (lk.limit() == 1 || r.Mode != lk.mode()) {
		// A grant, newer than every holder, that the holders this
		// replica still has leave no room for: it missed their ends, which the active made before it (a
		// release its log refused but that it applied, as a promotion's
		// take-back of an undelivered grant does). With one slot, or in
		// another mode than theirs, every one of them is over: each ends
		// here, its waiter ID remembered as ended (a repeat is told
		// ErrGrantEnded), before the grant takes a slot in its own mode.
		// Only its first slot taken over, a reader's grant over a writer
		// kept the writer's mode, the next reader took that slot again
		// and the first was lost; a writer's left readers beside it; and
		// the replaced holder's ticket stayed granted with a token no
		// slot held (repeat dereferenced a nil slot). With a limit above
		// 1 in their mode, which of them ended cannot be told: the grant
		// takes a slot of its own until their leases end.
		lk.each(func(o *hold) {
			if o.holder == t {
				o.holder = nil // its own waiter ID, granted again
			}
			s.endGrant(lk, o, at, EventRelease, false)
		})
	}
	if lk.holders() == 0 && (r.Mode != Exclusive || lk.x != nil) {
		lk.ext().mode = r.Mode
	}
	if h == nil {
		h = lk.freeSlot()
	}
	s.setToken(lk, h, r.Token)
	lk.setOwner(h, r.Owner)
	h.lease = r.Lease
	h.granted = at.mono
	h.expires = at.monoAt(r.Expires)
	h.holder = t
	if t != nil {
		t.state, t.token, t.w, t.answers = tGranted, r.Token, nil, 0
		t.asked(r)
		t.claimBy = at.monoAt(r.Until)
		s.heap.remove(&t.dl)
		if IsTicket(t.id) && r.Until == 0 && w != nil {
			// Granted to a caller with no ID of its own: nobody can
			// repeat, so nothing is remembered.
			h.holder = nil
			s.retire(t, tForget, at)
		}
	}
	s.armLease(h)
	if s.e.cfg.OnEvent != nil {
		// A grant made while its waiter was away ends at its claim
		// deadline when that comes first (hold.takenBack), as
		// GET /locks/{key} says: so does its event.
		expires := r.Expires
		if r.Until != 0 && r.Until < expires {
			expires = r.Until
		}
		s.emit(Event{Kind: EventGrant, Key: lk.key, Token: r.Token, Lease: r.Lease, At: r.At, ExpiresAt: expires, Waited: waited, Waiters: lk.n, WaiterID: r.WaiterID, ClaimBy: r.Until, Owner: r.Owner, Mode: r.Mode, Limit: lk.limit()})
	}
	return w
}

// setLimit sets lk's holder limit from a record's (0 = 1): the active
// wrote the key's limit into every grant and enqueue. s.mu is held.
func (s *shard) setLimit(lk *lock, limit int) {
	switch {
	case limit > 1:
		lk.ext().limit = limit
	case lk.x != nil:
		lk.x.limit = 1
	}
}

// Replay applies one record of the log (as Log.Append got it) to a
// standby engine, through the same apply path as the active's own changes
// and replicated ones: replay at start runs it over the log, record by
// record, in index order. It returns an error wrapping ErrRecordCorrupt or
// ErrRecordVersion for a record that does not decode (nothing changes
// then), or an error on an active engine, where two writers would diverge.
func (e *Engine) Replay(rec []byte) error {
	if e.active.Load() {
		return errors.New("engine: Replay on an active engine")
	}
	r, err := DecodeRecord(rec)
	if err != nil {
		return err
	}
	if r.Token != 0 {
		e.tokens.observe(r.Token)
	}
	if r.Kind == RecReserve {
		return nil
	}
	s := e.shard(r.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apply(nil, &r, e.now())
	s.idle(r.Key)
	return nil
}

// idle frees key's state if nobody holds or waits for it. s.mu is held.
func (s *shard) idle(key string) {
	if lk := s.locks[key]; lk != nil {
		s.dropIfIdle(lk)
	}
}
