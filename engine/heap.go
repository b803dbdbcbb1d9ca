package engine

// deadline is one entry of a shard's timer heap: a lease expiry (owner is
// a *lock for its first slot, a *slot for another), a waiter's
// wait/poll/grace deadline (*waiter), or the end of a waiter ID's
// retention (*ticket). The entry is embedded in its owner, so
// arming a deadline allocates nothing; it is 32 bytes, since every held key
// carries one.
type deadline struct {
	when int64 // monotonic nanoseconds (Clock)
	idx  int32 // position in the heap; -1 when not in it
	// retake, on a holder slot's deadline: it retries the take-back of
	// an undeliverable grant whose release the log refused (see
	// shard.retake), not the lease's end. In what was padding.
	retake bool
	owner  any // *lock, *slot, *waiter or *ticket
}

// deadlines is a binary min-heap on when. One per shard, under the shard's
// mutex, with one runtime timer armed for its earliest entry: a million held
// keys cost a million heap slots, not a million timers.
type deadlines []*deadline

func (h *deadlines) push(d *deadline) {
	d.idx = int32(len(*h))
	*h = append(*h, d)
	h.up(len(*h) - 1)
}

func (h *deadlines) remove(d *deadline) {
	i := int(d.idx)
	if i < 0 {
		d.idx = -1 // out of a shard's retained queue too (see retain)
		return
	}
	last := len(*h) - 1
	if i != last {
		h.swap(i, last)
	}
	(*h)[last] = nil
	*h = (*h)[:last]
	d.idx = -1
	if i != last {
		if !h.down(i) {
			h.up(i)
		}
	}
	if cap(*h) > 1024 && len(*h) < cap(*h)/4 {
		*h = append(deadlines(nil), (*h)...)
	}
}

// set moves d to when, inserting it if it is not in the heap.
func (h *deadlines) set(d *deadline, when int64) {
	d.when = when
	if d.idx < 0 {
		h.push(d)
		return
	}
	if i := int(d.idx); !h.down(i) {
		h.up(i)
	}
}

func (h deadlines) min() *deadline {
	if len(h) == 0 {
		return nil
	}
	return h[0]
}

func (h deadlines) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = int32(i)
	h[j].idx = int32(j)
}

func (h deadlines) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if h[i].when <= h[j].when {
			break
		}
		h.swap(i, j)
		j = i
	}
}

func (h deadlines) down(i0 int) bool {
	i, n := i0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && h[r].when < h[l].when {
			j = r
		}
		if h[i].when <= h[j].when {
			break
		}
		h.swap(i, j)
		i = j
	}
	return i > i0
}
