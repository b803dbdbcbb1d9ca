package cluster

import (
	"sync"
	"time"

	"github.com/baton-io/baton/engine"
)

// DefaultTailBytes bounds, in bytes (16 MiB), the records a node keeps in
// memory for its standbys' streams (Config.TailBytes).
const DefaultTailBytes = 16 << 20

// mark is where an epoch began in a log: the RecEpoch record at index,
// written by the node by (its URL) when it became the active with epoch.
// Two logs in force under the same mark (epoch and node) at the same index
// hold the same records up to it: a node writes a mark before any record
// of its own term and never writes two marks with the same epoch, and a
// standby's log is the active's records at the active's indexes.
type mark struct {
	index uint64
	epoch uint64
	by    string
}

// tailRec is one record of the tail.
type tailRec struct {
	index uint64
	rec   []byte // a copy in an arena, never changed: shared by every reader
	at    int64  // when it was appended, Unix ns (replication lag)
}

// tail is the shared in-memory end of this node's log: the records
// appended most recently, in index order, bounded by bytes, which every
// standby's stream reads by its own cursor (no copy per standby). It is
// fed by the log's tap (wal.Log.SetTap) under the log's append mutex, so
// add must stay cheap: one copy into an arena, and a channel closed only
// when a reader waits. It also knows the epoch marks of the records it holds and the
// one in force before them, to tell where two logs part (agrees).
type tail struct {
	mu sync.Mutex
	// blocks hold the records, tailBlock each, in index order: the held
	// ones are the n from blocks[0][start] on. A record is never moved: a
	// block is added when the last is full and dropped when all of its
	// records are evicted.
	blocks  [][]tailRec
	start   int
	n       int
	first   uint64 // index of the oldest held record (last+1 when empty)
	last    uint64 // index of the last record appended (or reset to)
	bytes   int
	max     int
	before  mark   // the epoch mark in force at first-1
	marks   []mark // marks of the held records, in index order
	waiting bool
	ch      chan struct{} // closed on add while waiting
	// written is the last index the log has written (its write tap,
	// wal.Log.SetWriteTap); at most last. The active streams only the
	// records up to it (readWritten): wch is closed when it rises while
	// wwaiting.
	written  uint64
	wwaiting bool
	wch      chan struct{}
	// idle is set while a stream waits on wch with nothing left to send
	// (readWritten): an append then does not wake it (the change's own
	// Wait writes the record at once, and that write wakes it, once),
	// but arms linger, which wakes it streamLinger later if the log has
	// not written the record by then (a change nobody waits for: a
	// waiter's place, a lease that ran out), so that it asks the log to
	// write (wal.Log.WriteSoon).
	idle        bool
	linger      *time.Timer
	lingerArmed bool
	// arena holds the copies of the records added last, one after the
	// other: one allocation per tailArena bytes instead of one per
	// record. Bytes once written are never changed; an arena is freed
	// when none of its records is held or read any more.
	arena []byte

	// The marks are known at every index from base on, held or not:
	// baseMark is the one in force at base (where the tail was last
	// reset), past those of the records evicted since, in index order
	// (at most maxPastMarks: the oldest move base on). base is noBase
	// when none is known (the log was replaced without a reset).
	base     uint64
	baseMark mark
	past     []mark
}

// tailArena is the size of the tail's arenas, in bytes.
const tailArena = 64 << 10

// tailBlock is the number of records of a block of the tail.
const tailBlock = 1024

// maxPastMarks bounds the marks of evicted records the tail keeps (one per
// promotion seen).
const maxPastMarks = 1024

// noBase is tail.base when no mark is known.
const noBase = ^uint64(0)

// at returns the k-th held record (0: the oldest). t.mu is held.
func (t *tail) at(k int) *tailRec {
	p := t.start + k
	return &t.blocks[p/tailBlock][p%tailBlock]
}

// push adds r after the held records. t.mu is held.
func (t *tail) push(r tailRec) {
	if len(t.blocks) == 0 || len(t.blocks[len(t.blocks)-1]) == tailBlock {
		t.blocks = append(t.blocks, make([]tailRec, 0, tailBlock))
	}
	b := &t.blocks[len(t.blocks)-1]
	*b = append(*b, r)
	t.n++
}

// pop evicts the oldest held record and returns it. t.mu is held.
func (t *tail) pop() tailRec {
	r := t.at(0)
	old := *r
	*r = tailRec{}
	t.start++
	t.n--
	if t.start == tailBlock {
		t.blocks[0] = nil
		t.blocks = t.blocks[1:]
		t.start = 0
	}
	return old
}

// drop empties the tail's records. t.mu is held.
func (t *tail) drop() {
	clear(t.blocks)
	t.blocks, t.start, t.n = t.blocks[:0], 0, 0
}

func newTail(max int) *tail {
	t := &tail{max: max, first: 1, ch: make(chan struct{}), wch: make(chan struct{})}
	t.linger = time.AfterFunc(time.Hour, t.lingered)
	t.linger.Stop()
	return t
}

// lingered is the linger timer's: the records appended while a stream
// was idle waited streamLinger without being written; the stream is woken
// to have them written.
func (t *tail) lingered() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lingerArmed = false
	if t.written < t.last {
		t.wroteLocked()
	}
}

// stop stops the linger timer (the node closes).
func (t *tail) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.linger.Stop()
	t.lingerArmed = false
}

// reset empties the tail: the log's last index is last, under mark m.
func (t *tail) reset(last uint64, m mark) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.drop()
	t.bytes, t.marks = 0, nil
	t.first, t.last, t.before = last+1, last, m
	t.written = last
	t.base, t.baseMark, t.past = last, m, nil
	t.wakeLocked()
	t.wroteLocked()
}

// wrote records that the log has written every record up to index (the
// log's write tap).
func (t *tail) wrote(index uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.written = index
	t.wroteLocked()
}

func (t *tail) wroteLocked() {
	if t.lingerArmed && t.written >= t.last {
		t.linger.Stop()
		t.lingerArmed = false
	}
	if t.wwaiting {
		close(t.wch)
		t.wch = make(chan struct{})
		t.wwaiting, t.idle = false, false
	}
}

// add appends the record at index (the log's tap).
func (t *tail) add(index uint64, rec []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if index != t.last+1 {
		// The log was replaced (Install) without a reset: start over here.
		t.drop()
		t.bytes, t.marks = 0, nil
		t.first, t.before = index, mark{}
		t.written = index - 1
		t.base, t.baseMark, t.past = noBase, mark{}, nil
		t.wroteLocked()
	}
	if cap(t.arena)-len(t.arena) < len(rec) {
		t.arena = make([]byte, 0, max(tailArena, len(rec)))
	}
	k := len(t.arena)
	t.arena = append(t.arena, rec...)
	t.push(tailRec{index, t.arena[k:len(t.arena):len(t.arena)], time.Now().UnixNano()})
	t.last = index
	t.bytes += len(rec)
	if len(rec) > 1 && engine.RecordKind(rec[1]) == engine.RecEpoch {
		if r, err := engine.DecodeRecord(rec); err == nil {
			t.marks = append(t.marks, mark{index, r.Epoch, r.Owner})
		}
	}
	for t.bytes > t.max && t.n > 1 {
		old := t.pop()
		t.first = old.index + 1
		t.bytes -= len(old.rec)
		if len(t.marks) > 0 && t.marks[0].index == old.index {
			t.before = t.marks[0]
			t.marks = t.marks[1:]
			if t.base != noBase {
				t.past = append(t.past, t.before)
				if len(t.past) > maxPastMarks {
					t.base, t.baseMark = t.past[0].index, t.past[0]
					t.past = t.past[1:]
				}
			}
		}
	}
	t.wakeLocked()
	if t.idle && !t.lingerArmed {
		t.lingerArmed = true
		t.linger.Reset(streamLinger)
	}
}

func (t *tail) wakeLocked() {
	if t.waiting {
		close(t.ch)
		t.ch = make(chan struct{})
		t.waiting = false
	}
}

// position is the log's position: its last index and the mark in force
// there.
func (t *tail) position() (uint64, mark) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last, t.markAtLocked(t.last)
}

func (t *tail) markAtLocked(i uint64) mark {
	m := t.before
	for _, k := range t.marks {
		if k.index > i {
			break
		}
		m = k
	}
	return m
}

// markKnown returns the mark in force at index i, if the tail knows it:
// i is at most the log's last index and not before where the tail was
// last reset (the node's start, or a snapshot installed), whether or not
// the tail still holds the record at i.
func (t *tail) markKnown(i uint64) (mark, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.base == noBase || i < t.base || i > t.last {
		return mark{}, false
	}
	m := t.baseMark
	for _, k := range t.past {
		if k.index > i {
			return m, true
		}
		m = k
	}
	return t.markAtLocked(i), true
}

// agrees reports whether a log whose last index is index, under mark m,
// is a prefix of this one that the tail can continue: index is within
// [first-1, last] and the mark in force there is m.
func (t *tail) agrees(index uint64, m mark) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if index+1 < t.first || index > t.last {
		return false
	}
	return t.markAtLocked(index).same(m)
}

// held returns the index of the oldest record the tail holds (last+1
// when it holds none) and the epoch mark in force just before it.
func (t *tail) held() (first uint64, before mark) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.first, t.before
}

// same reports whether a and b mark the same epoch of the same node (the
// index of a mark loaded from a dump is not known).
func (a mark) same(b mark) bool { return a.epoch == b.epoch && a.by == b.by }

// read returns the held records from index from on, up to about max
// bytes (at least one), and a channel closed when more arrive. ok is
// false when from was evicted (read it from the log's segments).
func (t *tail) read(from uint64, max int, into []tailRec) (recs []tailRec, more <-chan struct{}, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if from < t.first {
		return into[:0], nil, false
	}
	into = into[:0]
	size := 0
	for k := int(from - t.first); k < t.n && (size < max || len(into) == 0); k++ {
		r := t.at(k)
		into = append(into, *r)
		size += len(r.rec)
	}
	if len(into) == 0 {
		t.waiting = true
	}
	return into, t.ch, true
}

// readWritten is read for a stream to a standby: only the records the
// log has written (up to t.written). When none of them is left from
// from, more is closed once the log writes more, if pending reports
// records appended but not written yet, and otherwise once a record is
// appended. ok is false when from was evicted and is written (read it
// from the log's segments); evicted and not written yet, it is pending.
func (t *tail) readWritten(from uint64, max int, into []tailRec) (recs []tailRec, more <-chan struct{}, pending, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if from < t.first {
		if from > t.written {
			// Evicted before the log wrote it (more records wait to be
			// written than the tail holds): the log's segments hold it
			// only once it is written. Read from them now, it is not
			// there, and the stream would loop at once, without a wait.
			t.wwaiting = true
			return into[:0], t.wch, true, true
		}
		return into[:0], nil, false, false
	}
	into = into[:0]
	size := 0
	for k := int(from - t.first); k < t.n && (size < max || len(into) == 0); k++ {
		r := t.at(k)
		if r.index > t.written {
			break
		}
		into = append(into, *r)
		size += len(r.rec)
	}
	if len(into) > 0 {
		return into, t.ch, false, true
	}
	if from <= t.last {
		t.wwaiting = true
		return into, t.wch, true, true
	}
	// Idle: woken by the write of what is appended next (see idle).
	t.wwaiting, t.idle = true, true
	return into, t.wch, false, true
}

// appendedAt returns when the record at index was appended (Unix ns); for
// a record no longer held, when the oldest held one was; ok is false when
// index is beyond the log.
func (t *tail) appendedAt(index uint64) (at int64, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if index > t.last || t.n == 0 {
		return 0, false
	}
	if index < t.first {
		index = t.first
	}
	return t.at(int(index - t.first)).at, true
}
