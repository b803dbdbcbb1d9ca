package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// appendHookLog is a memLog that calls onAppend inside Append (with the
// appending shard's lock held).
type appendHookLog struct {
	memLog
	onAppend func()
}

func (l *appendHookLog) Append(rec []byte) (uint64, error) {
	if f := l.onAppend; f != nil {
		f()
	}
	return l.memLog.Append(rec)
}

// TestGrantNowTakesItsGenerationUnderTheShardLock: a grant made at once
// (grantNow) must carry the generation it was made in, read while its
// shard is locked, as stepDownLocked's comment promises ("a grant made
// before it took the grant's shard has the generation before this one").
// grantNow reads it after s.mu.Unlock: a Demote+Diverged that takes the
// shard in that gap gives the grant the new generation, and settle then
// answers the grant although the node stepped down after making it (the
// cluster may give the lock to another holder). The interleaving is
// forced with one P: the shard's mutex is driven into starvation mode, so
// that the grant's Unlock hands the lock (and the P) straight to the
// goroutine that steps down.
func TestGrantNowTakesItsGenerationUnderTheShardLock(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	forceInterleaving(t, func() (string, bool) {
		log := &appendHookLog{}
		e := newEngine(t, Config{Shards: 1, Log: log})
		defer e.Close()

		stepped := make(chan struct{})
		started := false // the step-down goroutine: waited for
		defer func() {
			if started {
				<-stepped
			}
		}()
		// First grant: in its Append (shard locked) start the step-down, which
		// blocks on the shard for more than the mutex's 1 ms starvation bound.
		log.onAppend = func() {
			log.onAppend = nil
			started = true
			go func() {
				// Blocks on the shard first (Demote would mark the engine
				// inactive before it takes the shard, refusing the second
				// acquire): any call that locks the shard.
				_, _, _ = e.ReleaseNoWait("zzz", 1)
				e.Demote()
				e.Diverged()
				close(stepped)
			}()
			time.Sleep(3 * time.Millisecond)
		}
		res, p := e.AcquireFunc(AcquireRequest{Key: "a", Lease: time.Minute}, func(AcquireResult) bool { return true })
		if p != nil || res.Err() != nil {
			t.Fatalf("first acquire: parked %v, err %v", p != nil, res.Err())
		}
		// Second grant, same shard: its Append yields, so that the step-down
		// goroutine, woken by the first Unlock, finds the shard locked again
		// and marks the mutex starving; the Unlock after this grant hands off.
		log.onAppend = func() {
			log.onAppend = nil
			runtime.Gosched()
		}
		res, p = e.AcquireFunc(AcquireRequest{Key: "b", Lease: time.Minute}, func(AcquireResult) bool { return true })
		if p != nil || res.Err() != nil {
			return fmt.Sprintf("second acquire parked %v, err %v", p != nil, res.Err()), false
		}
		select {
		case <-stepped:
		default:
			return "the step-down came after the grant's answer was made", false
		}
		g, err := res.Settle()
		if !errors.Is(err, ErrReplaced) {
			t.Fatalf("a grant made before the node stepped down (Demote, Diverged) settled as %+v, %v; want ErrReplaced: its generation was read after the shard was unlocked", g, err)
		}
		return "", true
	})
}

// forceInterleaving runs attempt, which sets up a forced interleaving and
// checks what follows it, until one attempt reaches the interleaving
// (attempt returns true), up to interleavingAttempts times; it fails the
// test if none did (why: the last attempt's reason), as a check that
// skipped itself would pass unnoticed.
func forceInterleaving(t *testing.T, attempt func() (why string, reached bool)) {
	t.Helper()
	var why string
	for i := 0; i < interleavingAttempts; i++ {
		var reached bool
		if why, reached = attempt(); reached {
			if i > 0 {
				t.Logf("the interleaving was reached at attempt %d", i+1)
			}
			return
		}
		if t.Failed() {
			return
		}
	}
	t.Fatalf("the interleaving was not reached in %d attempts (last: %s)", interleavingAttempts, why)
}

// interleavingAttempts bounds forceInterleaving's attempts.
const interleavingAttempts = 50

// termLog is a memLog with cluster.SyncLog's step-down rule: a Wait
// reads the engine's generation as it begins and, once the record is
// written, fails with ErrReplaced if the generation changed meanwhile
// (SyncLog.term, SyncLog.acked).
type termLog struct {
	appendHookLog
	e *Engine
}

func (l *termLog) Wait(idx uint64) error {
	term := l.e.Generation()
	if err := l.appendHookLog.Wait(idx); err != nil {
		return err
	}
	if l.e.Replaced(term) {
		return fmt.Errorf("stepped down while waiting: %w", ErrReplaced)
	}
	return nil
}

// TestReleaseMadeBeforeAStepDownIsNotAnsweredAsDone: a release appended
// to the log, then a step-down (Demote, Diverged) before its wait for the
// log begins: the release is answered as done (200, "R OK") although the
// node stepped down before it was answered, and the active it now follows
// may never have had it (the lock stays held there until its lease ends;
// with sync_standbys, SPEC section 3 says it is answered only once the
// standbys have it). A renewal in the same place is ErrReplaced (Renew
// reads the generation before it is made); a release has no such rule,
// and SyncLog's term is read only when the wait begins, after the gap.
// Natively the gap is the whole time the answer sits in the connection's
// queue (format's WaitLoggedGathered). The interleaving is forced as in
// TestGrantNowTakesItsGenerationUnderTheShardLock.
func TestReleaseMadeBeforeAStepDownIsNotAnsweredAsDone(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	forceInterleaving(t, func() (string, bool) {
		log := &termLog{}
		e := newEngine(t, Config{Shards: 1, Log: log})
		log.e = e
		defer e.Close()

		stepped := make(chan struct{})
		started := false // the step-down goroutine: waited for
		defer func() {
			if started {
				<-stepped
			}
		}()
		log.onAppend = func() {
			log.onAppend = nil
			started = true
			go func() {
				_, _, _ = e.ReleaseNoWait("zzz", 1) // blocks on the shard
				e.Demote()
				e.Diverged()
				close(stepped)
			}()
			time.Sleep(3 * time.Millisecond)
		}
		res, p := e.AcquireFunc(AcquireRequest{Key: "k", Lease: time.Minute}, func(AcquireResult) bool { return true })
		if p != nil || res.Err() != nil {
			t.Fatalf("acquire: parked %v, err %v", p != nil, res.Err())
		}
		log.onAppend = func() {
			log.onAppend = nil
			runtime.Gosched()
		}
		err := e.Release("k", res.g.Token)
		select {
		case <-stepped:
		default:
			return fmt.Sprintf("release: %v", err), false
		}
		if err == nil {
			t.Fatal("a release made before the node stepped down (Demote, Diverged before its log wait began) was answered as done; want ErrReplaced, as a renewal gets")
		}
		if !errors.Is(err, ErrReplaced) {
			t.Fatalf("release: %v, want ErrReplaced", err)
		}
		return "", true
	})
}

// TestAReleaseWaitingAcrossAStepDownIsReplaced: a release or an
// operator's release made, then waiting for its log write while the node
// steps down (Demote, Diverged), returns ErrReplaced, not nil: the active
// the node now follows may never have had it.
func TestAReleaseWaitingAcrossAStepDownIsReplaced(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%v", force), func(t *testing.T) {
			log := &memLog{}
			e := newEngine(t, Config{Shards: 1, Log: log})
			defer e.Close()
			g, err := e.Acquire(context.Background(), AcquireRequest{Key: "k", Lease: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			goOn := log.hold()
			done := make(chan error, 1)
			go func() {
				if force {
					done <- e.ForceRelease("k")
				} else {
					done <- e.Release("k", g.Token)
				}
			}()
			for { // made: the lock is free, the answer waits for the log
				if li := peekStatus(e, "k"); li.Holder == nil {
					break
				}
				time.Sleep(time.Millisecond)
			}
			e.Demote()
			e.Diverged()
			goOn()
			if err := <-done; !errors.Is(err, ErrReplaced) {
				t.Fatalf("a release waiting for the log across a step-down: %v, want ErrReplaced", err)
			}
		})
	}
}

// TestATimeoutMadeBeforeAStepDownIsNotAnsweredAsATimeout: a timeout
// (ErrTimeout, 408: no grant, nothing pending) made in one generation and
// settled after a step-down (Demote, Diverged) is ErrReplaced, not a
// timeout: the active the node now follows may never have had it, and
// the waiter may still be queued there. A timeout settled in a later
// generation whose active state holds it too stays a timeout.
func TestATimeoutMadeBeforeAStepDownIsNotAnsweredAsATimeout(t *testing.T) {
	for _, stepDown := range []bool{true, false} {
		t.Run(fmt.Sprintf("stepDown=%v", stepDown), func(t *testing.T) {
			e := newEngine(t, Config{Shards: 1, Log: &memLog{}})
			defer e.Close()
			if _, err := e.Acquire(context.Background(), AcquireRequest{Key: "k", Lease: time.Minute}); err != nil {
				t.Fatal(err)
			}
			got := make(chan AcquireResult, 1)
			res, p := e.AcquireFunc(AcquireRequest{Key: "k", Lease: time.Minute, Wait: 20 * time.Millisecond, ID: "w"},
				func(r AcquireResult) bool { got <- r; return true })
			if p == nil {
				t.Fatalf("the second acquire was not queued: %v", res.Err())
			}
			res = <-got
			if !errors.Is(res.Err(), ErrTimeout) {
				t.Fatalf("the wait ran out: %v, want ErrTimeout", res.Err())
			}
			if stepDown {
				e.Demote()
			}
			e.Diverged() // alone: a new generation whose (active) state holds the timeout
			_, err := res.Settle()
			switch {
			case stepDown && !errors.Is(err, ErrReplaced):
				t.Fatalf("a timeout made before a step-down, settled after it: %v, want ErrReplaced (not a 408)", err)
			case !stepDown && !errors.Is(err, ErrTimeout):
				t.Fatalf("a timeout settled in a later generation whose active state holds it: %v, want ErrTimeout", err)
			}
		})
	}
}

// TestALogErrorAcrossAGenerationTakesNothingBack: a grant whose log write
// fails after the engine's state became another generation's is not
// released as undeliverable: the state now served, which holds a grant
// under the same key and token (here: the same state, in a new
// generation, Diverged alone), is not the one it was made in, and its
// ticket's count of answers is not this answer's. It is ErrReplaced and
// the lock stays held (a repeat of the waiter ID gets it, or its lease
// ends).
func TestALogErrorAcrossAGenerationTakesNothingBack(t *testing.T) {
	log := &memLog{}
	e := newEngine(t, Config{Shards: 1, Log: log})
	defer e.Close()
	res, p := e.AcquireFunc(AcquireRequest{Key: "k", Lease: time.Minute, ID: "g"}, func(AcquireResult) bool { return true })
	if p != nil || res.Err() != nil {
		t.Fatalf("acquire: parked %v, err %v", p != nil, res.Err())
	}
	e.Diverged()
	log.mu.Lock()
	log.waitErr = errDiskFull
	log.mu.Unlock()
	_, err := res.Settle()
	if !errors.Is(err, ErrReplaced) {
		t.Errorf("a grant whose log write failed in another generation: %v, want ErrReplaced", err)
	}
	if li := peekStatus(e, "k"); li.Holder == nil || li.Holder.Token != res.g.Token {
		t.Fatalf("the lock of the state now served was taken back by an answer of another generation: holder %+v, want token %d", li.Holder, res.g.Token)
	}
}
