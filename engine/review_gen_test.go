package engine

import (
	"errors"
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
	log := &appendHookLog{}
	e := newEngine(t, Config{Shards: 1, Log: log})
	defer e.Close()

	stepped := make(chan struct{})
	// First grant: in its Append (shard locked) start the step-down, which
	// blocks on the shard for more than the mutex's 1 ms starvation bound.
	log.onAppend = func() {
		log.onAppend = nil
		go func() {
			// Blocks on the shard first (Demote would mark the engine
			// inactive before it takes the shard, refusing the second
			// acquire): any call that locks the shard.
			_, _ = e.ReleaseNoWait("zzz", 1)
			e.Demote()
			e.Diverged()
			close(stepped)
		}()
		time.Sleep(3 * time.Millisecond)
	}
	res, p := e.AcquireFunc(AcquireRequest{Key: "a", Lease: time.Minute}, func(AcquireResult) bool { return true })
	if p != nil || res.Err() != nil {
		t.Skipf("first acquire: parked %v, err %v", p != nil, res.Err())
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
		t.Skipf("the interleaving was not reached: second acquire parked %v, err %v", p != nil, res.Err())
	}
	select {
	case <-stepped:
	default:
		t.Skip("the interleaving was not reached: the step-down came after the grant's answer was made")
	}
	g, err := res.Settle()
	if !errors.Is(err, ErrReplaced) {
		t.Fatalf("a grant made before the node stepped down (Demote, Diverged) settled as %+v, %v; want ErrReplaced: its generation was read after the shard was unlocked", g, err)
	}
}
