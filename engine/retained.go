package engine

// A waiter ID's final outcome (an ended grant, a wait that ran out) is
// remembered for Config.Retention, and every acquire with an ID leaves
// one: a node serving the Go client, which sends an ID with every
// acquire, remembers one per acquire of the last two minutes. Their ends
// come in the order they were set (now plus the same Retention, on the
// monotonic clock), so a shard keeps them in a queue, not in its deadline
// heap: remembering one and forgetting the oldest cost O(1), and the heap
// holds the leases and waiters alone, whose every grant and release would
// otherwise sift through the retention ends.
//
// A ticket in the queue has dl.idx == inRetained and dl.when its end. One
// taken out before its end (deadlines.remove, or deadlines.set moving it
// to the heap) stays in the queue until its end comes and is skipped
// then: its dl.idx or dl.when no longer match the entry's.

// inRetained is deadline.idx of a ticket in its shard's retained queue.
const inRetained = -2

// retainedEnd is one entry of the retained queue.
type retainedEnd struct {
	t    *ticket
	when int64 // t.dl.when when it was queued
}

// retainedQueue is a shard's tickets kept until their retention ends, in
// the order of their ends: q[head:].
type retainedQueue struct {
	q    []retainedEnd
	head int
}

// retain keeps t until when (monotonic ns), then forgets it. An end
// earlier than the queue's last (a record's, made on another clock) goes
// to the heap. s.mu is held.
func (s *shard) retain(t *ticket, when int64) {
	r := &s.retained
	if n := len(r.q); n > r.head && r.q[n-1].when > when {
		s.heap.set(&t.dl, when)
		s.arm()
		return
	}
	s.heap.remove(&t.dl)
	t.dl.when, t.dl.idx = when, inRetained
	r.q = append(r.q, retainedEnd{t, when})
	s.arm()
}

// nextRetained returns the earliest end in the retained queue, skipping
// the entries of tickets taken out; ok is false when there is none.
// s.mu is held.
func (s *shard) nextRetained() (when int64, ok bool) {
	r := &s.retained
	for r.head < len(r.q) {
		e := r.q[r.head]
		if e.t.dl.idx == inRetained && e.t.dl.when == e.when {
			return e.when, true
		}
		r.pop()
	}
	return 0, false
}

// pop drops the queue's first entry.
func (r *retainedQueue) pop() {
	r.q[r.head] = retainedEnd{}
	r.head++
	switch {
	case r.head == len(r.q):
		r.q, r.head = r.q[:0], 0
	case r.head >= 1024 && 2*r.head >= len(r.q):
		// Half the slice is popped: move the rest to its start, so that
		// the queue's memory follows its length (amortised O(1)).
		n := copy(r.q, r.q[r.head:])
		clear(r.q[n:])
		r.q, r.head = r.q[:n], 0
	}
}

// forgetRetained forgets the tickets whose retention has ended at now
// (monotonic ns). s.mu is held.
func (s *shard) forgetRetained(now int64) {
	for {
		when, ok := s.nextRetained()
		if !ok || when > now {
			return
		}
		t := s.retained.q[s.retained.head].t
		s.retained.pop()
		t.dl.idx = -1
		if k := (ticketKey{t.key, t.id}); s.tickets[k] == t {
			delete(s.tickets, k)
		}
	}
}

// earliest returns the shard's earliest deadline, the heap's or the
// retained queue's; ok is false when it has none. s.mu is held.
func (s *shard) earliest() (when int64, ok bool) {
	when, ok = s.nextRetained()
	if d := s.heap.min(); d != nil && (!ok || d.when < when) {
		return d.when, true
	}
	return when, ok
}
