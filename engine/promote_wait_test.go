package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// replicaWithLateWaiters returns a standby whose replica holds key ("rw")
// shared under token 7 (lease 12 s) with three shared waiters queued
// behind it, each asked at t = 0 with a wait of 100 ms: what node 2 of
// TestHistoryChaosTimeouts (CHAOS_NODES=5 CHAOS_SEED=2415) held when it
// was promoted by failover at 06:39:44.558, 0.8 s after the clients of
// those waiters had given up. The exclusive waiter that held them back
// timed out on the old active; the grants the old active made next
// never reached the replica.
func replicaWithLateWaiters(t *testing.T, key string, ids []string) *Engine {
	t.Helper()
	e := newEngine(t, Config{Standby: true})
	now := time.Now().UnixNano()
	const lease, wait = 12 * time.Second, 100 * time.Millisecond
	recs := []Record{
		{Kind: RecGrant, Key: key, Token: 7, Lease: lease, At: now, Expires: now + int64(lease), Mode: Shared},
		{Kind: RecEnqueue, Key: key, WaiterID: "x", Lease: lease, At: now, WaitUntil: now + int64(wait), Mode: Exclusive},
	}
	for _, id := range ids {
		recs = append(recs, Record{Kind: RecEnqueue, Key: key, WaiterID: id, Lease: lease, At: now, WaitUntil: now + int64(wait), Mode: Shared})
	}
	recs = append(recs, Record{Kind: RecTimeout, Key: key, WaiterID: "x", At: now + int64(wait), Until: now + int64(time.Minute)})
	for _, r := range recs {
		if err := e.Replay(AppendRecord(nil, &r)); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// A promotion never grants a replicated waiter whose wait ran out before
// it (SPEC section 1: when the wait runs out the caller is not granted):
// the waiter times out, and a repeat of its ID is answered the timeout.
// The promotion granted them, before any timer ran: in the chaos run
// above node 2 made its first three grants to the waiters of clients
// that had given up 0.8 s before, and rw, held by those grants, refused
// every exclusive acquire for 11 s.
func TestPromoteTimesOutWaitersWhoseWaitRanOut(t *testing.T) {
	for _, how := range []Promotion{Failover, Handoff} {
		t.Run([]string{"failover", "handoff"}[how], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const key = "rw"
				ids := []string{"w8", "w6", "w4"}
				e := replicaWithLateWaiters(t, key, ids)
				defer e.Close()
				time.Sleep(900 * time.Millisecond) // the waits ran out 0.8 s ago
				e.Promote(how)
				synctest.Wait()
				st, err := e.Status(key)
				if err != nil {
					t.Fatal(err)
				}
				if len(st.Holders) != 1 || st.Holders[0].Token != 7 || st.Waiters != 0 {
					t.Fatalf("after the promotion: holders %+v, %d waiters; want only token 7, no waiter", st.Holders, st.Waiters)
				}
				for _, id := range ids {
					_, err := e.Acquire(context.Background(), AcquireRequest{Key: key, ID: id, Mode: Shared, Lease: 12 * time.Second, Wait: 100 * time.Millisecond})
					wantErr(t, "repeat of "+id, err, ErrTimeout)
				}
			})
		})
	}
}

// What the chaos run above did not show: the claim deadline of a grant
// made at a promotion to a waiter that is away (here one whose wait has
// no end) crosses a snapshot, a handoff, another snapshot and a second
// failover, and releases the grant there (engine/replica.go Promote,
// engine/snapshot.go).
func TestClaimDeadlineSurvivesHandoffThenFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const key = "rw"
		b := newEngine(t, Config{Standby: true})
		now := time.Now().UnixNano()
		const lease = 12 * time.Second
		for _, r := range []Record{
			{Kind: RecGrant, Key: key, Token: 7, Lease: lease, At: now, Expires: now + int64(lease), Mode: Shared},
			{Kind: RecEnqueue, Key: key, WaiterID: "x", Lease: lease, At: now, Mode: Exclusive},
			{Kind: RecEnqueue, Key: key, WaiterID: "w8", Lease: lease, At: now, Mode: Shared},
			{Kind: RecEnqueue, Key: key, WaiterID: "w6", Lease: lease, At: now, Mode: Shared},
			{Kind: RecLeave, Key: key, WaiterID: "x", At: now},
		} {
			if err := b.Replay(AppendRecord(nil, &r)); err != nil {
				t.Fatal(err)
			}
		}
		b.Promote(Failover) // t = 0: w8 and w6 are granted, to be claimed by t = 5 s
		if st, _ := b.Status(key); len(st.Holders) != 3 {
			t.Fatalf("after the failover: holders %+v; want 7 and the grants to w8 and w6", st.Holders)
		}
		time.Sleep(time.Second)
		c := copyBySnapshot(t, b)
		b.Demote()
		b.Close()
		c.Promote(Handoff)
		time.Sleep(time.Second)
		d := copyBySnapshot(t, c)
		defer d.Close()
		c.Close() // t = 2 s: a crash
		time.Sleep(time.Second)
		d.Promote(Failover) // t = 3 s
		time.Sleep(1999 * time.Millisecond)
		synctest.Wait()
		if st, _ := d.Status(key); len(st.Holders) != 3 {
			t.Fatalf("at t = 4.999 s: holders %+v; want the two grants still awaiting their claim", st.Holders)
		}
		time.Sleep(time.Millisecond) // t = 5 s: the claim deadline
		synctest.Wait()
		if st, _ := d.Status(key); len(st.Holders) != 1 || st.Holders[0].Token != 7 {
			t.Fatalf("at the claim deadline: holders %+v; want only token 7", st.Holders)
		}
	})
}

// The same on a running active that resumes from a pause in which a
// lease ended (at 1 s) and then the wait of the waiter behind it (at
// 2 s): the first call handles both deadlines in order, and the lease's
// end must not hand the lock to the waiter whose wait ran out too; it
// times out.
func TestPausedActiveTimesOutAWaiterWhoseWaitRanOutAfterTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &pauseClock{base: time.Now()}
		e := newEngine(t, Config{Shards: 1, Clock: clock})
		defer e.Close()
		mustAcquire(t, e, AcquireRequest{Key: "k", Lease: time.Second})
		x := goAcquire(e, context.Background(), AcquireRequest{Key: "k", ID: "x", Wait: 2 * time.Second})
		synctest.Wait()
		clock.paused.Add(int64(3 * time.Second))
		wantHolder(t, e, "k", 0, 0)
		synctest.Wait()
		wantErr(t, "the waiter", answered(t, "the waiter", x).err, ErrTimeout)
	})
}
