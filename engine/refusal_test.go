package engine

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// setWaitErr makes Wait fail with err (nil: succeed again).
func (l *memLog) setWaitErr(err error) {
	l.mu.Lock()
	l.waitErr = err
	l.mu.Unlock()
}

// A release caught by a failing log stands in memory only (ErrNotWritten).
// A repeat of it found nobody holding the lock and answered ErrNotHeld at
// once, and the official clients count that as done; but the answer rested
// on the unwritten release, which a handoff (to a standby that never got
// it) or a stop loses: the key then stayed held under the released token
// for the rest of its lease. A refusal (ErrNotHeld, ErrNotHolder) is now
// answered as a change is, once the state it was judged on is written:
// ErrRefusalNotWritten (retry) while the log cannot write it, the refusal
// once it has.
func TestRefusalWaitsForTheStateItRestsOn(t *testing.T) {
	log := &memLog{}
	e := newEngine(t, Config{Shards: 1, Log: log})
	defer e.Close()
	h := mustAcquire(t, e, AcquireRequest{Key: "h", Lease: time.Minute})
	o := mustAcquire(t, e, AcquireRequest{Key: "o", Lease: time.Minute})

	log.setWaitErr(errDiskFull)
	wantErr(t, "the release caught by the failure", e.Release("h", h.Token), ErrNotWritten)
	refusedUnwritten := func(what string, err error) {
		t.Helper()
		wantErr(t, what, err, ErrRefusalNotWritten)
		if errors.Is(err, ErrNotHeld) || errors.Is(err, ErrNotHolder) || errors.Is(err, ErrNotWritten) {
			t.Fatalf("%s: %v; want only ErrRefusalNotWritten: the refusal rests on a change not written", what, err)
		}
	}
	refusedUnwritten("a repeated release", e.Release("h", h.Token))
	_, err := e.Renew("h", h.Token, 0)
	refusedUnwritten("a renewal of the released token", err)
	refusedUnwritten("an operator's release of the released key", e.ForceRelease("h"))
	idx, gen, err := e.ReleaseNoWait("h", h.Token)
	wantErr(t, "ReleaseNoWait's refusal", err, ErrNotHeld)
	if idx == 0 {
		t.Fatal("ReleaseNoWait's refusal gave no log index to settle it at")
	}
	refusedUnwritten("SettleRefusal of ReleaseNoWait's refusal", e.SettleRefusal(err, idx, gen))
	_, idx, err = e.RenewNoWait("h", h.Token, 0)
	wantErr(t, "RenewNoWait's refusal", err, ErrNotHeld)
	refusedUnwritten("SettleRefusal of RenewNoWait's refusal", e.SettleRefusal(err, idx, gen))

	// The log writes again: the refusals stand.
	log.setWaitErr(nil)
	wantErr(t, "a repeated release, the log writing", e.Release("h", h.Token), ErrNotHeld)
	_, err = e.Renew("h", h.Token, 0)
	wantErr(t, "a renewal of the released token, the log writing", err, ErrNotHeld)
	wantErr(t, "a release under another token", e.Release("o", o.Token+1), ErrNotHolder)
	wantErr(t, "SettleRefusal of ReleaseNoWait's refusal, the log writing", e.SettleRefusal(ErrNotHeld, idx, gen), ErrNotHeld)
	// Errors that are not refusals pass through.
	wantErr(t, "SettleRefusal of another error", e.SettleRefusal(ErrClosed, 0, gen), ErrClosed)

	// A refusal judged in a state that was replaced since is not answered
	// as it stands: the active's state may hold the lock.
	_, idx, err = e.RenewNoWait("h", h.Token, 0)
	e.Diverged()
	wantErr(t, "a refusal across a new generation", e.SettleRefusal(err, idx, gen), ErrReplaced)
}

// After Reset (a standby installing its active's snapshot, whose log may
// end below the index this node's shards had reached), a refusal on a
// shard that appended nothing since does not wait for an index the new
// log has not reached (memLog.Wait panics on one never appended).
func TestRefusalAfterResetWaitsForNoStaleIndex(t *testing.T) {
	log := &memLog{}
	e := newEngine(t, Config{Shards: 4, Log: log})
	defer e.Close()
	key := ""
	for _, k := range []string{"a", "b", "c", "d", "e", "f", "g", "h"} {
		if e.shard(k) != e.shard("") {
			key = k
			break
		}
	}
	if key == "" {
		t.Fatal("no key outside shard(\"\")")
	}
	for range 5 {
		g := mustAcquire(t, e, AcquireRequest{Key: key, Lease: time.Minute})
		if err := e.Release(key, g.Token); err != nil {
			t.Fatal(err)
		}
	}
	e.Demote()
	e.Reset()
	log.mu.Lock()
	log.recs = log.recs[:1] // the installed snapshot's log ends lower
	log.mu.Unlock()
	e.Promote(Handoff)
	wantErr(t, "a release of a key nobody holds after a reset", e.Release(key, 1), ErrNotHeld)
}

// A waiter whose wait ran out while the log refused records (a full disk)
// got no answer until the log wrote again: its timeout must be logged
// before it is answered, and the log refused it, so it was retried every
// logRetry without a word to the client (breaker: 408s 26 s to 259 s
// late, a wait of 5 s to 60 s). Its request is now answered when its wait
// runs out, ErrTimeoutNotWritten (a 503: not granted; the timeout is
// written once the log can), and it is never granted meanwhile: a release
// then finds a waiter past its wait and times it out instead.
func TestWaitRunOutOnARefusingLogIsAnswered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memLog{}
		e := newEngine(t, Config{Shards: 1, Log: log})
		defer e.Close()
		h := mustAcquire(t, e, AcquireRequest{Key: "k", Lease: time.Hour})
		w := goAcquire(e, context.Background(), AcquireRequest{Key: "k", ID: "w", Wait: 5 * time.Second})
		synctest.Wait()
		parked(t, "the waiter", w)

		log.setRefuse(func(RecordKind) bool { return true })
		time.Sleep(5 * time.Second)
		synctest.Wait()
		r := answered(t, "the waiter whose wait ran out, the log refusing", w)
		wantErr(t, "the waiter whose wait ran out, the log refusing", r.err, ErrTimeoutNotWritten)
		wantErr(t, "the waiter whose wait ran out, the log refusing", r.err, ErrUnavailable)

		// The log takes records again: the release does not grant the
		// waiter, whose wait is over; its timeout is written.
		log.setRefuse(nil)
		if err := e.Release("k", h.Token); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		wantHolder(t, e, "k", 0, 0)
		var timeouts int
		for _, rec := range log.take(t) {
			if rec.Kind == RecTimeout && rec.WaiterID == "w" {
				timeouts++
			}
			if rec.Kind == RecGrant && rec.WaiterID == "w" {
				t.Fatalf("the waiter past its wait was granted: %+v", rec)
			}
		}
		if timeouts != 1 {
			t.Fatalf("%d timeout records of w, want 1", timeouts)
		}
	})
}

// peekStatus is Status without its wait for the log: the state in memory,
// written or not, for tests that look at a change while the log holds it.
func peekStatus(e *Engine, key string) LockInfo {
	s := e.shard(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if lk := s.locks[key]; lk != nil {
		return lk.info(e.now())
	}
	return LockInfo{Key: key}
}
