package engine

import (
	"errors"
	"fmt"
	"time"
)

// Log is where the Engine writes every state change before any client
// hears of it (SPEC section 1, "Durability"; issue 12). The Engine defines
// it so that it imports no file code; the wal package implements it.
//
// Append is called with the key's shard locked, so the order of indexes
// is the order of the changes of each key; it must be cheap (a copy into a
// buffer) and must not call back into the Engine. It returns the record's
// index (> 0, rising) or an error when the log cannot take it (disk full,
// a write error): the Engine then refuses the change before making it.
// rec is the Engine's buffer: Append copies what it keeps.
//
// Wait blocks until the record at index is written (and synced, as the
// log's fsync mode says), or returns the error that prevents it. It is
// called without any lock held, before the change is answered.
type Log interface {
	Append(rec []byte) (index uint64, err error)
	Wait(index uint64) error
}

// PendingAppender is a Log that also takes a record while it fails to
// write (wal.Log.AppendPending): the record waits behind those the
// failure left pending and is written with them when the log recovers
// (in the write right after theirs, if it came during it).
// The take-back of a grant whose record the failure caught appends its
// release so (retake): appended only once the log took changes again, a
// logRetry after it had written the grant, the release was missing from a
// node stopped in between, which then held the key, by a grant nobody
// was told of, for its whole lease (a tester: 50 of 50 keys, kill -9 or
// SIGTERM up to 250 ms after the disk had room again).
type PendingAppender interface {
	AppendPending(rec []byte) (index uint64, err error)
}

// logRetry is how long a change the Engine must make by itself (a lease
// or a wait that ran out, a grant to the next waiter) waits before it is
// tried again when the log refused it.
const logRetry = 250 * time.Millisecond

// append writes r to the log. It returns the record's index, 0 without a
// log, or an error wrapping ErrUnavailable. s.mu is held.
func (s *shard) append(r *Record) (uint64, error) {
	s.buf = AppendRecord(s.buf[:0], r)
	return s.appended(s.e.log.Append(s.buf))
}

// appended is what an append of s.buf returned, made the shard's: its
// index as the shard's last, or the log's error wrapped in
// ErrUnavailable. s.mu is held.
func (s *shard) appended(idx uint64, err error) (uint64, error) {
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	s.last = idx
	return idx, nil
}

// recordPending is record for a release that must go with a pending
// grant (retake): appended even while the log fails, when the log can
// (PendingAppender). s.mu is held.
func (s *shard) recordPending(r *Record) (uint64, error) {
	pa, ok := s.e.log.(PendingAppender)
	if !ok {
		return s.record(r)
	}
	s.buf = AppendRecord(s.buf[:0], r)
	return s.appended(pa.AppendPending(s.buf))
}

// record writes r to the log, if the Engine keeps one: its index, 0
// without a log, or an error wrapping ErrUnavailable. s.mu is held.
func (s *shard) record(r *Record) (uint64, error) {
	if s.e.log == nil {
		return 0, nil
	}
	return s.append(r)
}

// judged is where an answer judged on the shard's state now stands (a
// refusal, a repeat under a remembered ID): the log index of the shard's
// last change, which every change of its keys is at or below, and the
// Generation. s.mu is held.
func (s *shard) judged() (LogIndex, uint64) {
	return LogIndex(s.last), s.e.resets.Load()
}

// settle waits until the grant g, made at log index idx, is written, and
// only then lets it be answered. When the log cannot write it, the grant
// is released as undeliverable (nobody is told of it) and the caller gets
// ErrUnavailable, if the state is still the generation gen it was made
// in; if not, nothing is taken back and the caller gets ErrReplaced. t
// is the grant's ticket, if any. s.mu is not held.
func (s *shard) settle(g Grant, idx uint64, t *ticket, gen uint64) (Grant, error) {
	if idx == 0 {
		return g, nil
	}
	err := s.e.log.Wait(idx)
	replaced := s.e.Replaced(gen)
	if err != nil && !errors.Is(err, ErrReplaced) {
		if replaced {
			// The log failed, and the state is another generation's
			// now: what it holds under this key and token (and t's
			// count of answers) is not this grant's to take back; it
			// stays for a repeat of its waiter ID, or its lease.
			return Grant{}, fmt.Errorf("%w (and the log could not write the grant: %w)", ErrReplaced, err)
		}
		s.mu.Lock()
		if lk := s.locks[g.Key]; lk != nil && lk.find(g.Token) != nil {
			s.undeliverable(lk, g.Token, t)
		}
		s.mu.Unlock()
		return Grant{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// A Log that says the state was replaced while the grant waited
	// (cluster.SyncLog after a step-down) leaves the decision to the
	// rule below, the one every answer across a generation follows: the
	// state was discarded or replaced while the answer waited, and the
	// grant stands only if this node is the active again and its state
	// holds it too (it was replicated).
	stands, active := s.holds(g.Key, g.Token)
	if (err != nil || replaced) && !(stands && active) {
		return Grant{}, ErrReplaced
	}
	if !stands {
		// Its lease ran out while it waited (for sync_standbys, up to
		// sync_timeout): the lock may be the next waiter's already.
		return Grant{}, ErrGrantEndedUnanswered
	}
	return g, nil
}

// holds reports whether token holds key in this engine's state, its lease
// not run out, and whether the engine is the active: a change waited for
// its record, and is answered as made only if it stands (settle, Renew;
// after a handoff, which keeps the state, on the node it was made on;
// across a step-down, only if the node is the active again). s.mu is not
// held.
func (s *shard) holds(key string, token uint64) (stands, active bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if active = s.e.serving() == nil; active {
		s.overdue(s.e.now()) // a lease that ran out while the change waited
	}
	lk := s.locks[key]
	return lk != nil && lk.find(token) != nil, active
}

// RenewalStands is Renew's last check, for a caller that waited for a
// renewal's record itself (RenewNoWait, then WaitLogged: the native
// protocol's batches): nil if token still holds key, else
// ErrRenewalEndedUnanswered (its lease ran out while it waited). A node
// that stepped down meanwhile is the caller's to refuse (Replaced) first.
func (e *Engine) RenewalStands(key string, token uint64) error {
	if stands, _ := e.shard(key).holds(key, token); !stands {
		return ErrRenewalEndedUnanswered
	}
	return nil
}

// LogIndex is the log index of a change made and appended to the log,
// not yet known to be written (0: there is no log). WaitLogged waits for
// it; indexes rise, and a written index means every lower one is written
// too.
type LogIndex uint64

// WaitLogged waits until the change at idx is written (and synced, as
// the log's fsync mode says); 0 returns at once. It returns an error
// wrapping ErrNotWritten (and so ErrUnavailable) when the log cannot
// write it: the change must then be answered as neither made nor not
// made. Call it without holding anything an AcquireFunc callback takes.
func (e *Engine) WaitLogged(idx LogIndex) error {
	return e.waitLogged(uint64(idx))
}

// waitShown is a read's wait (Status, Page) for the state it shows, whose
// changes are at or below idx: the Log's Wait, as an answered change's
// (written, and acknowledged by sync_standbys), so that a read shows
// nothing a crash would take back. 0 returns at once. Errors: one
// wrapping ErrReplaced when the node stepped down meanwhile (read again),
// else ErrReadNotWritten wrapping the log's.
func (e *Engine) waitShown(idx LogIndex) error {
	if idx == 0 {
		return nil
	}
	if err := e.log.Wait(uint64(idx)); err != nil {
		if errors.Is(err, ErrReplaced) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrReadNotWritten, err)
	}
	return nil
}

// GatheredWaiter is a Log that can also wait for a record without
// batching on its own behalf (wal.Log, cluster.SyncLog): WaitGathered is
// Wait for a caller that has gathered what it waits for itself, whose
// write need not wait for other goroutines' records first. A Log that
// wraps another must define it itself (or hide it), or its own Wait's
// rules are bypassed.
type GatheredWaiter interface {
	WaitGathered(index uint64) error
}

// WaitLoggedGathered is WaitLogged for a caller that waits once for a
// batch of changes it gathered itself (the native server's answers): with
// a Log that is a GatheredWaiter its write starts at once, without the
// Log's own batching. Its results are WaitLogged's.
func (e *Engine) WaitLoggedGathered(idx LogIndex) error {
	gw, ok := e.log.(GatheredWaiter)
	if idx == 0 || !ok {
		return e.waitLogged(uint64(idx))
	}
	if err := gw.WaitGathered(uint64(idx)); err != nil {
		return fmt.Errorf("%w: %w", ErrNotWritten, err)
	}
	return nil
}

// SettleRefusal answers err, a release's or a renewal's error. A refusal
// (ErrNotHeld, ErrNotHolder), which ReleaseNoWait, RenewNoWait and
// ForceReleaseNoWait return with the log index idx of the last change of
// the key's shard when it was judged and the Generation gen it was judged
// in, is answered as a change is: once the state it rests on is written
// (and synced, and acknowledged, as the log's Wait says). It returns
// ErrRefusalNotWritten when the log cannot write it, ErrReplaced when the
// state was replaced since (the active's may hold the lock), else err.
// Any other error is returned as it is. Release, Renew and ForceRelease
// settle their refusals themselves.
func (e *Engine) SettleRefusal(err error, idx LogIndex, gen uint64) error {
	if err != ErrNotHeld && err != ErrNotHolder {
		return err
	}
	if idx != 0 {
		if werr := e.log.Wait(uint64(idx)); werr != nil {
			return fmt.Errorf("%w: %w", ErrRefusalNotWritten, werr)
		}
	}
	if e.Replaced(gen) {
		return ErrReplaced
	}
	return err
}

// waitLogged waits until the change at log index idx is written; 0 (no
// log) returns at once. s.mu is not held.
func (e *Engine) waitLogged(idx uint64) error {
	if idx == 0 {
		return nil
	}
	if err := e.log.Wait(idx); err != nil {
		return fmt.Errorf("%w: %w", ErrNotWritten, err)
	}
	return nil
}
