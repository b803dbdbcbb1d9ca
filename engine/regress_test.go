package engine

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"
)

// A wait too long to have an end (here the largest Duration, which once
// wrapped the deadline around and stopped the shard's timer) waits without
// limit, and every other deadline of the shard still fires.
func TestHugeWaitDoesNotStopTheShardTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{Shards: 1})
		defer e.Close()
		mustAcquire(t, e, AcquireRequest{Key: "held", Lease: time.Minute})
		huge := goAcquire(e, context.Background(), AcquireRequest{Key: "held", Wait: math.MaxInt64})
		synctest.Wait()
		other := mustAcquire(t, e, AcquireRequest{Key: "other", Lease: time.Second})
		short := goAcquire(e, context.Background(), AcquireRequest{Key: "held", Wait: 500 * time.Millisecond})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		wantErr(t, "the short wait", answered(t, "short", short).err, ErrTimeout)
		if li, _ := e.Status("other"); li.Holder != nil {
			t.Fatalf("other (token %d, 1 s lease) still held after 2 s", other.Token)
		}
		parked(t, "the huge wait", huge)
	})
}

// An answer that could not be delivered releases the grant only if no
// repeat of the request was answered with the same grant meanwhile: the
// client may hold it through the repeat.
func TestAbandonAfterARepeatKeepsTheGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		req := AcquireRequest{Key: "k", ID: "id-1", Lease: time.Minute}
		first := mustAcquire(t, e, req)
		repeat := mustAcquire(t, e, req)
		if repeat.Token != first.Token {
			t.Fatalf("repeat got token %d, want %d", repeat.Token, first.Token)
		}
		e.Abandon(first, req.ID) // the first answer was lost
		wantHolder(t, e, "k", first.Token, 0)
		e.Abandon(repeat, req.ID) // and the repeat's too: now nobody has it
		if li, _ := e.Status("k"); li.Holder != nil {
			t.Fatalf("still held by %d after every answer was lost", li.Holder.Token)
		}
	})
}

// Held counts the held locks through grants, handoffs, releases, expiries,
// replication and Reset.
func TestHeldCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		want := func(n int) {
			t.Helper()
			if got := e.Held(); got != n {
				t.Fatalf("Held() = %d, want %d", got, n)
			}
		}
		a := mustAcquire(t, e, AcquireRequest{Key: "a", Lease: time.Second})
		mustAcquire(t, e, AcquireRequest{Key: "b", Lease: time.Minute})
		want(2)
		w := goAcquire(e, context.Background(), AcquireRequest{Key: "a", Lease: time.Minute})
		synctest.Wait()
		if err := e.Release("a", a.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		answered(t, "waiter", w)
		want(2) // handed over, still held
		time.Sleep(2 * time.Second)
		want(2)
		mustAcquire(t, e, AcquireRequest{Key: "c", Lease: time.Second})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		want(2) // c expired

		standby := newEngine(t, Config{Standby: true})
		defer standby.Close()
		e.SnapshotRecords(func(_ int, rec []byte) {
			if err := standby.Replay(rec); err != nil {
				t.Fatal(err)
			}
		}, func(int) {})
		if got := standby.Held(); got != 2 {
			t.Fatalf("standby Held() = %d after the snapshot, want 2", got)
		}
		standby.Reset()
		if got := standby.Held(); got != 0 {
			t.Fatalf("standby Held() = %d after Reset, want 0", got)
		}
	})
}
