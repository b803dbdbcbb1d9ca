package engine

import (
	"context"
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
