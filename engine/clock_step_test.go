package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// Leases and waits run on the monotonic clock (SPEC section 1, "Time";
// issue 11, defect 4): a step of the wall clock, either way, neither
// shortens nor lengthens a lease or a wait in a running engine, even when
// another deadline of the same shard makes the shard's timer fire in the
// meantime. Answers and events carry wall-clock times as the stepped clock
// reads them.
func TestWallClockStepMovesNoDeadline(t *testing.T) {
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := newStepClock(nil)
				rec := &recorder{}
				e := newEngine(t, Config{Shards: 1, Clock: clock, OnEvent: rec.add})
				defer e.Close()
				ctx := context.Background()
				a := mustAcquire(t, e, AcquireRequest{Key: "k", Lease: 6 * time.Second})
				x := goAcquire(e, ctx, AcquireRequest{Key: "k"}) // no wait limit
				b := mustAcquire(t, e, AcquireRequest{Key: "w", Lease: time.Minute})
				y := goAcquire(e, ctx, AcquireRequest{Key: "w", Wait: 4 * time.Second})
				// Another deadline of the same (only) shard, due first: the
				// timer fires for it while the other deadlines are pending.
				mustAcquire(t, e, AcquireRequest{Key: "short", Lease: 2 * time.Second})
				synctest.Wait()
				rec.take()

				clock.Step(step)
				_, wall := clock.Now()
				st, _ := e.Status("k")
				if want := time.Unix(0, wall).Add(6 * time.Second); st.Holder == nil || !st.Holder.ExpiresAt.Equal(want) {
					t.Fatalf("after the step, Status(k).Holder = %+v; want ExpiresAt %v (the stepped wall clock + 6 s)", st.Holder, want)
				}

				time.Sleep(2 * time.Second)
				synctest.Wait()
				wantHolder(t, e, "short", 0, 0)
				wantHolder(t, e, "k", a.Token, 1)
				wantHolder(t, e, "w", b.Token, 1)
				parked(t, "the waiter behind the 6 s lease, at 2 s", x)
				parked(t, "the 4 s wait, at 2 s", y)

				time.Sleep(2*time.Second - time.Nanosecond)
				synctest.Wait()
				parked(t, "the 4 s wait, 1 ns before its end", y)
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				wantErr(t, "the 4 s wait, at 4 s", answered(t, "y", y).err, ErrTimeout)

				time.Sleep(2*time.Second - time.Nanosecond)
				synctest.Wait()
				parked(t, "the waiter behind the 6 s lease, 1 ns before its end", x)
				if _, err := e.Renew("k", a.Token, 0); err != nil {
					t.Fatalf("the holder's renew 1 ns before its 6 s lease ends: %v", err)
				}
				// The renew restarted the lease: 6 s from now, on the
				// monotonic clock.
				time.Sleep(6*time.Second - time.Nanosecond)
				synctest.Wait()
				parked(t, "the waiter behind the renewed lease, 1 ns before its end", x)
				rec.take()
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				r := answered(t, "x", x)
				if r.err != nil {
					t.Fatalf("the waiter behind the renewed lease, at its end: %v", r.err)
				}
				_, wall = clock.Now()
				if !r.g.GrantedAt.Equal(time.Unix(0, wall)) || !r.g.ExpiresAt.Equal(time.Unix(0, wall).Add(30*time.Second)) {
					t.Fatalf("grant %+v; want GrantedAt %v (the stepped wall clock), ExpiresAt 30 s later", r.g, time.Unix(0, wall))
				}
				if _, err := e.Renew("k", a.Token, 0); err != ErrNotHolder {
					t.Fatalf("the first holder's renew after its lease ended: %v, want ErrNotHolder", err)
				}
				evs := rec.take()
				if kinds(evs) != "expire,grant" || evs[1].At != wall || evs[1].ExpiresAt != wall+int64(30*time.Second) {
					t.Fatalf("events %s %+v; want expire,grant at the stepped wall clock %d", kinds(evs), evs, wall)
				}
			})
		})
	}
}

// A snapshot carries deadlines on the wall clock, converted at the
// crossing; the replica converts them back to its monotonic clock when it
// applies them, so a later step of its wall clock moves none of them.
func TestSnapshotCarriesWallClockDeadlines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{Shards: 1, Clock: newStepClock(nil)})
		defer e.Close()
		g := mustAcquire(t, e, AcquireRequest{Key: "k", Lease: 10 * time.Second})
		time.Sleep(4 * time.Second)
		var recs [][]byte
		e.SnapshotRecords(func(_ int, rec []byte) { recs = append(recs, append([]byte(nil), rec...)) }, func(int) {})
		var grants []Record
		for _, b := range recs {
			if r, err := DecodeRecord(b); err == nil && r.Kind == RecGrant {
				grants = append(grants, r)
			}
		}
		if len(grants) != 1 || grants[0].Expires != g.ExpiresAt.UnixNano() {
			t.Fatalf("snapshot grants %+v; want the holder expiring at %v", grants, g.ExpiresAt)
		}
		// The replica's wall clock agrees when it applies the snapshot;
		// stepped an hour ahead afterwards, it still runs the lease for the
		// 6 s it had left.
		clock := newStepClock(nil)
		r := newEngine(t, Config{Shards: 1, Standby: true, Clock: clock})
		defer r.Close()
		for _, b := range recs {
			if err := r.Replay(b); err != nil {
				t.Fatal(err)
			}
		}
		st, _ := r.Status("k")
		if st.Holder == nil || !st.Holder.ExpiresAt.Equal(g.ExpiresAt) {
			t.Fatalf("replica holder %+v; want ExpiresAt %v", st.Holder, g.ExpiresAt)
		}
		clock.Step(time.Hour)
		r.Promote(Failover)
		x := goAcquire(r, context.Background(), AcquireRequest{Key: "k"})
		time.Sleep(6*time.Second - time.Nanosecond)
		synctest.Wait()
		parked(t, "the waiter on the promoted replica, 1 ns before the lease ends", x)
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if res := answered(t, "x", x); res.err != nil {
			t.Fatalf("the waiter when the replicated lease ends: %v", res.err)
		}
	})
}

// The wall-clock time of a deadline stays the same from one answer to the
// next while the wall clock drifts less than offsetSlack from the
// monotonic one (NTP's slew), and follows the wall clock beyond that.
func TestWallClockDriftWithinSlackKeepsAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := newStepClock(nil)
		e := newEngine(t, Config{Clock: clock})
		defer e.Close()
		g := mustAcquire(t, e, AcquireRequest{Key: "k", Lease: time.Minute})
		clock.Step(time.Duration(offsetSlack) / 2)
		if st, _ := e.Status("k"); !st.Holder.ExpiresAt.Equal(g.ExpiresAt) {
			t.Fatalf("after a drift of half the slack, ExpiresAt %v; want %v unchanged", st.Holder.ExpiresAt, g.ExpiresAt)
		}
		clock.Step(time.Duration(offsetSlack))
		want := g.ExpiresAt.Add(3 * time.Duration(offsetSlack) / 2)
		if st, _ := e.Status("k"); !st.Holder.ExpiresAt.Equal(want) {
			t.Fatalf("after a drift of 1.5 times the slack, ExpiresAt %v; want %v", st.Holder.ExpiresAt, want)
		}
	})
}

// A wall clock stepped back while the node was down (an NTP correction at
// boot, a VM restored from an older image) lengthens no lease: the log
// holds deadlines on the wall clock that wrote it, which now reads as the
// future, and a holder that died with the node must still lose its lock
// when its lease runs out, not a step later (the lease "safety net" of
// SPEC section 1; lock services whose TTLs are kept as wall-clock
// deadlines shipped this bug). The same holds for a lease renewed before
// the crash and for a snapshot's holders.
func TestWallClockStepBackWhileDownLengthensNoLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memLog{}
		e := newEngine(t, Config{Log: log})
		a := mustAcquire(t, e, AcquireRequest{Key: "granted", Lease: 10 * time.Second})
		b := mustAcquire(t, e, AcquireRequest{Key: "renewed", Lease: time.Second})
		if _, err := e.Renew("renewed", b.Token, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		var snap [][]byte
		e.SnapshotRecords(func(_ int, rec []byte) { snap = append(snap, append([]byte(nil), rec...)) }, func(int) {})
		e.Demote()
		e.Close()

		time.Sleep(2 * time.Second) // down for 2 s; its clock goes back an hour
		clock := newStepClock(nil)
		clock.Step(-time.Hour)
		r := newEngine(t, Config{Log: log, Standby: true, Clock: clock})
		defer r.Close()
		replayLog(t, r, log)
		s := newEngine(t, Config{Standby: true, Clock: clock})
		defer s.Close()
		for i, rec := range snap {
			if err := s.Replay(rec); err != nil {
				t.Fatalf("snapshot record %d: %v", i, err)
			}
		}
		r.Promote(Failover)
		s.Promote(Failover)
		_, wall := clock.Now()
		for _, c := range []struct {
			what string
			e    *Engine
			key  string
		}{{"log", r, "granted"}, {"log", r, "renewed"}, {"snapshot", s, "granted"}, {"snapshot", s, "renewed"}} {
			st, _ := c.e.Status(c.key)
			if st.Holder == nil || st.Holder.ExpiresAt.After(time.Unix(0, wall).Add(10*time.Second)) {
				t.Fatalf("%s: %q after a restart with the clock an hour back: holder %+v; want one expiring within its 10 s lease of %v", c.what, c.key, st.Holder, time.Unix(0, wall))
			}
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		for _, e := range []*Engine{r, s} {
			wantHolder(t, e, "granted", 0, 0)
			wantHolder(t, e, "renewed", 0, 0)
		}
		if g := mustAcquire(t, r, AcquireRequest{Key: "granted"}); g.Token <= a.Token {
			t.Fatalf("token %d after the restart, not above %d", g.Token, a.Token)
		}
	})
}

// pauseClock is an injected Clock that a test can move forward at once,
// both readings together, without the timers firing: what a node sees when
// it resumes from a pause (SIGSTOP, a frozen VM, a long GC) before its
// timer goroutine has run.
type pauseClock struct {
	base   time.Time
	paused atomic.Int64 // ns the process was stopped for
}

func (c *pauseClock) Now() (mono, wall int64) {
	d := int64(time.Since(c.base)) + c.paused.Load()
	return d + 1, c.base.UnixNano() + d
}

// A renew (or a release) that arrives once the lease has run out fails,
// even when the lease's timer has not fired yet (a node resuming from a pause answers
// the calls waiting in its sockets before its timers run): the lease is
// over, the lock has passed to the waiter, and the late renew must not
// take it back (etcd-io/etcd#19091: expiry decided by a background loop
// that runs late; etcd-io/etcd#20590: a renew answered success for a lease
// that was gone). Just before the end, the renew succeeds.
func TestRenewOrReleaseAfterTheLeaseRanOutFailsBeforeItsTimerFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &pauseClock{base: time.Now()}
		e := newEngine(t, Config{Shards: 1, Clock: clock})
		defer e.Close()
		a := mustAcquire(t, e, AcquireRequest{Key: "k", Lease: 2 * time.Second})
		x := goAcquire(e, context.Background(), AcquireRequest{Key: "k"})
		synctest.Wait()
		clock.paused.Add(int64(2*time.Second - time.Nanosecond))
		if _, err := e.Renew("k", a.Token, 0); err != nil {
			t.Fatalf("renew 1 ns before the lease ends: %v", err)
		}
		clock.paused.Add(int64(2 * time.Second))
		if g, err := e.Renew("k", a.Token, 0); err != ErrNotHolder {
			t.Fatalf("renew once the lease ran out (its timer not fired): %+v, %v; want ErrNotHolder", g, err)
		}
		synctest.Wait()
		r := answered(t, "the waiter behind the lease that ran out", x)
		if r.err != nil {
			t.Fatalf("the waiter: %v", r.err)
		}
		wantHolder(t, e, "k", r.g.Token, 0)

		b := mustAcquire(t, e, AcquireRequest{Key: "alone", Lease: time.Second})
		clock.paused.Add(int64(time.Second))
		if _, err := e.Renew("alone", b.Token, 0); err != ErrNotHeld {
			t.Fatalf("renew of a lease that ran out, nobody waiting: %v; want ErrNotHeld", err)
		}
		wantHolder(t, e, "alone", 0, 0)

		// A release answers for the lease as it stands, too: once it ran
		// out, the lock is not the caller's to release (it passed on).
		c := mustAcquire(t, e, AcquireRequest{Key: "rel", Lease: time.Second})
		y := goAcquire(e, context.Background(), AcquireRequest{Key: "rel"})
		synctest.Wait()
		clock.paused.Add(int64(time.Second))
		if err := e.Release("rel", c.Token); err != ErrNotHolder {
			t.Fatalf("release once the lease ran out (its timer not fired): %v; want ErrNotHolder", err)
		}
		synctest.Wait()
		if r := answered(t, "the waiter behind the released lease", y); r.err != nil {
			t.Fatalf("the waiter: %v", r.err)
		}
	})
}

// The same for an acquire: a repeat of a grant's Idempotency-Key once its
// lease ran out (its timer not fired yet) is told the grant ended, not
// handed the grant as if it stood; and a try-lock on the key finds it
// free, as it would a moment later. Status shows no holder past its
// lease either.
func TestAcquireOrStatusAfterTheLeaseRanOutSeesItEndedBeforeItsTimerFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &pauseClock{base: time.Now()}
		e := newEngine(t, Config{Shards: 1, Clock: clock})
		defer e.Close()
		a := mustAcquire(t, e, AcquireRequest{Key: "k", ID: "a", Lease: time.Second})
		mustAcquire(t, e, AcquireRequest{Key: "shown", Lease: time.Second})
		clock.paused.Add(int64(time.Second))
		wantHolder(t, e, "shown", 0, 0) // Status shows no holder past its lease
		if g, err := e.Acquire(context.Background(), AcquireRequest{Key: "k", ID: "a", Lease: time.Second}); err != ErrGrantEnded {
			t.Fatalf("a repeat once the lease ran out (its timer not fired): %+v, %v; want ErrGrantEnded", g, err)
		}
		g, err := e.Acquire(context.Background(), AcquireRequest{Key: "k", Wait: time.Nanosecond})
		if err != nil || g.Token <= a.Token {
			t.Fatalf("a try-lock once the lease ran out: %+v, %v; want a grant above %d", g, err, a.Token)
		}
	})
}

// A listing (Page, Range) shows no holder past its lease either, its timer
// not fired yet: after an election a node listed for a few ms a holder
// whose lease had run out while every node was down (history checker,
// seed 2625), which the node expired on its next tick.
func TestListingAfterTheLeaseRanOutShowsNoHolderBeforeItsTimerFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := &pauseClock{base: time.Now()}
		e := newEngine(t, Config{Shards: 1, Clock: clock})
		defer e.Close()
		mustAcquire(t, e, AcquireRequest{Key: "listed", Lease: time.Second})
		clock.paused.Add(int64(time.Second))
		page, total, err := e.Page("", "", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, li := range page {
			if li.Holder != nil {
				t.Fatalf("Page lists %q held by token %d past its lease (total %d)", li.Key, li.Holder.Token, total)
			}
		}
		e.Range(func(li LockInfo) bool {
			if li.Holder != nil {
				t.Fatalf("Range shows %q held by token %d past its lease", li.Key, li.Holder.Token)
			}
			return true
		})
	})
}

// A forced release answers for the leases as they stand too, its timers not
// fired yet (a node resuming from a pause answers the calls waiting in its
// sockets before its timers run): a key whose only lease ran out is not
// held (ErrNotHeld, as a Status just before would have shown it free), and
// the end of that lease is an expiry, not a release the operator forced.
// Where a waiter was queued, the expiry handed it the lock, and the force
// ends that grant: the same outcome as when the timer was on time.
func TestForceReleaseAfterTheLeaseRanOutSeesItEndedBeforeItsTimerFires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		clock := &pauseClock{base: time.Now()}
		e := newEngine(t, Config{Shards: 1, Clock: clock, OnEvent: rec.add})
		defer e.Close()
		mustAcquire(t, e, AcquireRequest{Key: "alone", Lease: time.Second, Owner: "gone"})
		rec.take()
		clock.paused.Add(int64(time.Second))
		wantErr(t, "force once the only lease ran out (its timer not fired)", e.ForceRelease("alone"), ErrNotHeld)
		if evs := rec.take(); kinds(evs) != "expire" {
			t.Fatalf("events %s %+v; want the lease's expiry alone, no forced release", kinds(evs), evs)
		}
		wantHolder(t, e, "alone", 0, 0)

		mustAcquire(t, e, AcquireRequest{Key: "k", Lease: time.Second, Owner: "gone"})
		first := goAcquire(e, t.Context(), AcquireRequest{Key: "k", Owner: "first"})
		synctest.Wait()
		second := goAcquire(e, t.Context(), AcquireRequest{Key: "k", Owner: "second"})
		synctest.Wait()
		rec.take()
		clock.paused.Add(int64(time.Second))
		if err := e.ForceRelease("k"); err != nil {
			t.Fatalf("force once the lease ran out, two waiting: %v", err)
		}
		synctest.Wait()
		f := answered(t, "the first waiter", first)
		s := answered(t, "the second waiter", second)
		if f.err != nil || s.err != nil {
			t.Fatalf("the waiters: %v, %v", f.err, s.err)
		}
		evs := rec.take()
		if kinds(evs) != "expire,grant,release,grant" || evs[0].Owner != "gone" || evs[1].Owner != "first" ||
			!evs[2].Forced || evs[2].Owner != "first" || evs[3].Owner != "second" {
			t.Fatalf("events %s %+v; want the expiry, the grant to the first waiter, its forced release, the grant to the second", kinds(evs), evs)
		}
		wantHolder(t, e, "k", s.g.Token, 0)
	})
}
