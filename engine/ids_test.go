package engine

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// Waiter identity (AcquireRequest.ID, the HTTP Idempotency-Key) and early
// poll ends (Config.PollTimeout / PollGrace).

func TestIDRepeatWhileGrantedReturnsSameGrant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		g := mustAcquire(t, e, AcquireRequest{Key: "k", ID: "x", Lease: time.Minute})
		time.Sleep(time.Second)
		last := e.LastToken()
		// A repeat gets the first outcome; its wait may differ.
		g2 := mustAcquire(t, e, AcquireRequest{Key: "k", ID: "x", Lease: time.Minute, Wait: 5 * time.Second})
		if g2 != g {
			t.Fatalf("repeat = %+v; want the same grant %+v", g2, g)
		}
		if e.LastToken() != last {
			t.Fatal("a repeat issued a token")
		}
		wantCounts(t, e, 1, 0)
		// The same ID on another key is another request.
		o := mustAcquire(t, e, AcquireRequest{Key: "other", ID: "x"})
		if o.Token <= g.Token {
			t.Fatalf("other key: token %d", o.Token)
		}
	})
}

func TestIDRepeatWhileWaitingTakesOverPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		first := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		later := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "b"})
		synctest.Wait()
		time.Sleep(5 * time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		repeat := goAcquire(e, ctx, AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		wantErr(t, "first request", answered(t, "first", first).err, ErrSuperseded)
		parked(t, "repeat", repeat)
		wantCounts(t, e, 1, 2)
		ws := e.Waiters(key, 10)
		if len(ws) != 2 || ws[0].ID != "a" || ws[1].ID != "b" {
			t.Fatalf("Waiters: %+v; want a (its original place) then b", ws)
		}
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		r := answered(t, "repeat", repeat)
		if r.err != nil {
			t.Fatalf("repeat: %v", r.err)
		}
		if r.g.Key != key || r.g.Token <= h.Token {
			t.Fatalf("repeat: %+v", r.g)
		}
		if waited := r.g.GrantedAt.Sub(time.Now()); waited != 0 {
			t.Fatalf("GrantedAt off by %v", waited)
		}
		parked(t, "b", later)
		if err := e.Release(key, r.g.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if rb := answered(t, "b", later); rb.err != nil || rb.g.Token <= r.g.Token {
			t.Fatalf("b: %+v, %v", rb.g, rb.err)
		}
	})
}

// A repeat that takes over a place and then goes away takes the place with
// it; the superseded request going away does not.
func TestIDRepeatCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		ctx1, cancel1 := context.WithCancel(context.Background())
		first := goAcquire(e, ctx1, AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		ctx2, cancel2 := context.WithCancel(context.Background())
		repeat := goAcquire(e, ctx2, AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		wantErr(t, "first", answered(t, "first", first).err, ErrSuperseded)
		cancel1()
		synctest.Wait()
		wantCounts(t, e, 1, 1)
		parked(t, "repeat", repeat)
		cancel2()
		synctest.Wait()
		wantErr(t, "repeat", answered(t, "repeat", repeat).err, context.Canceled)
		wantCounts(t, e, 1, 0)
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, e, 0, 0)
	})
}

func TestIDRepeatAfterTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{Retention: time.Minute})
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		a := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a", Wait: time.Second})
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		wantErr(t, "a", answered(t, "a", a).err, ErrTimeout)
		last := e.LastToken()
		for _, wait := range []time.Duration{0, time.Hour} {
			r := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a", Wait: wait})
			synctest.Wait()
			wantErr(t, "repeat while held", answered(t, "repeat", r).err, ErrTimeout)
		}
		wantCounts(t, e, 1, 0)
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		time.Sleep(58 * time.Second) // still within the retention
		r := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		wantErr(t, "repeat on the free key", answered(t, "repeat", r).err, ErrTimeout)
		wantHolder(t, e, key, 0, 0)
		if e.LastToken() != last {
			t.Fatal("a token was issued for a timed-out ID")
		}
		// After the retention the ID is new again.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		mustAcquire(t, e, AcquireRequest{Key: key, ID: "a"})
	})
}

func TestIDRepeatAfterGrantEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		g := mustAcquire(t, e, AcquireRequest{Key: "rel", ID: "a"})
		if err := e.Release("rel", g.Token); err != nil {
			t.Fatal(err)
		}
		_, err := e.Acquire(context.Background(), AcquireRequest{Key: "rel", ID: "a"})
		wantErr(t, "repeat after release", err, ErrGrantEnded)
		wantHolder(t, e, "rel", 0, 0)

		mustAcquire(t, e, AcquireRequest{Key: "exp", ID: "a", Lease: time.Second})
		time.Sleep(time.Second)
		synctest.Wait()
		_, err = e.Acquire(context.Background(), AcquireRequest{Key: "exp", ID: "a", Lease: time.Second})
		wantErr(t, "repeat after lease expiry", err, ErrGrantEnded)
		wantCounts(t, e, 0, 0)
	})
}

// ---- early poll ends -----------------------------------------------------------

func pollConfig() Config {
	return Config{PollTimeout: 10 * time.Second, PollGrace: 5 * time.Second, LeaseDefault: time.Minute}
}

func TestPollTimeoutRepeatResumesPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, pollConfig())
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		a := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		time.Sleep(time.Second)
		c := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "c"})
		synctest.Wait()
		time.Sleep(9 * time.Second) // t = 10s: a's poll ends
		synctest.Wait()
		wantErr(t, "a", answered(t, "a", a).err, ErrPollTimeout)
		parked(t, "c", c)
		wantCounts(t, e, 1, 2)      // a's place is kept
		time.Sleep(2 * time.Second) // t = 12s, within a's grace; c's poll ended at 11s
		synctest.Wait()
		wantErr(t, "c", answered(t, "c", c).err, ErrPollTimeout)
		a2 := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		parked(t, "repeat of a", a2)
		if ws := e.Waiters(key, 10); len(ws) != 2 || ws[0].ID != "a" || ws[1].ID != "c" {
			t.Fatalf("Waiters: %+v; want a, c", ws)
		}
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		r := answered(t, "repeat of a", a2)
		if r.err != nil {
			t.Fatalf("repeat of a: %v", r.err)
		}
		wantHolder(t, e, key, r.g.Token, 1)
		// The resumed request gets a fresh poll: it ends 10s after the repeat.
		time.Sleep(15 * time.Second) // c's grace ended at 16s: it left
		synctest.Wait()
		wantHolder(t, e, key, r.g.Token, 0)
	})
}

func TestPollTimeoutLeavesAfterGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, pollConfig())
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		a := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		wantErr(t, "a", answered(t, "a", a).err, ErrPollTimeout)
		time.Sleep(4999 * time.Millisecond)
		synctest.Wait()
		wantCounts(t, e, 1, 1)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		wantCounts(t, e, 1, 0)
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		wantHolder(t, e, key, 0, 0)
		wantCounts(t, e, 0, 0)
	})
}

func TestPollTimeoutAnonymousLeaves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, pollConfig())
		defer e.Close()
		h := mustAcquire(t, e, AcquireRequest{Key: "k"})
		a := goAcquire(e, context.Background(), AcquireRequest{Key: "k"})
		synctest.Wait()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		wantErr(t, "anonymous", answered(t, "a", a).err, ErrPollTimeout)
		wantCounts(t, e, 1, 0) // nobody could resume it: no place kept
		if err := e.Release("k", h.Token); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, e, 0, 0)
	})
}

func TestPollTimeoutGrantWhileDetachedIsClaimed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, pollConfig())
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		a := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		wantErr(t, "a", answered(t, "a", a).err, ErrPollTimeout)
		time.Sleep(time.Second)
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		st, _ := e.Status(key)
		if st.Holder == nil || st.Holder.Token <= h.Token {
			t.Fatalf("after Release: holder %+v; want the detached waiter", st.Holder)
		}
		wantCounts(t, e, 1, 0)
		time.Sleep(3 * time.Second) // t = 14s < 15s
		g := mustAcquire(t, e, AcquireRequest{Key: key, ID: "a"})
		if g.Token != st.Holder.Token {
			t.Fatalf("repeat got token %d; want the grant made while detached, %d", g.Token, st.Holder.Token)
		}
		// Claimed: it lasts its lease, not just the grace.
		time.Sleep(10 * time.Second)
		synctest.Wait()
		wantHolder(t, e, key, g.Token, 0)
		if err := e.Release(key, g.Token); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPollTimeoutGrantWhileDetachedUnclaimedIsReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, pollConfig())
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		a := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		wantErr(t, "a", answered(t, "a", a).err, ErrPollTimeout)
		time.Sleep(time.Second) // t = 11s
		b := goAcquire(e, context.Background(), AcquireRequest{Key: key})
		synctest.Wait()
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		st, _ := e.Status(key)
		if st.Holder == nil {
			t.Fatal("the detached waiter was not granted")
		}
		synctest.Wait()
		parked(t, "b", b)
		time.Sleep(3999 * time.Millisecond) // t = 14.999s
		synctest.Wait()
		parked(t, "b", b)
		time.Sleep(time.Millisecond) // t = 15s: a's grace is over
		synctest.Wait()
		rb := answered(t, "b", b)
		if rb.err != nil || rb.g.Token <= st.Holder.Token {
			t.Fatalf("b: %+v, %v; want the lock once a's grace ended", rb.g, rb.err)
		}
		wantHolder(t, e, key, rb.g.Token, 0)
		// The late repeat is not granted.
		_, err := e.Acquire(context.Background(), AcquireRequest{Key: key, ID: "a", Wait: time.Second})
		if err == nil {
			t.Fatal("late repeat of a was granted")
		}
		if !errors.Is(err, ErrGrantEnded) && !errors.Is(err, ErrTimeout) {
			t.Fatalf("late repeat of a: %v", err)
		}
		wantHolder(t, e, key, rb.g.Token, 0)
	})
}

// The wait still bounds a waiter across polls.
func TestPollTimeoutThenWaitRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, pollConfig())
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		a := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a", Wait: 12 * time.Second})
		synctest.Wait()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		wantErr(t, "a", answered(t, "a", a).err, ErrPollTimeout)
		time.Sleep(time.Second)
		a2 := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		parked(t, "repeat", a2)
		time.Sleep(time.Second)
		synctest.Wait()
		wantErr(t, "repeat", answered(t, "repeat", a2).err, ErrTimeout)
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		wantHolder(t, e, key, 0, 0)
		_, err := e.Acquire(context.Background(), AcquireRequest{Key: key, ID: "a"})
		wantErr(t, "repeat after timeout", err, ErrTimeout)
	})
}

// TestIDRepeatOfAGrantNoSlotHoldsIsGrantEnded: a repeat of a granted
// acquire whose grant no slot of its key holds any more (an invariant
// some other path broke: the replica bug of missedend_test.go left such
// a ticket) is answered ErrGrantEnded. It dereferenced the missing slot
// with the shard's lock held: a panic, and every key of that shard hung.
func TestIDRepeatOfAGrantNoSlotHoldsIsGrantEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		g := mustAcquire(t, e, AcquireRequest{Key: "k", ID: "x", Lease: time.Minute})
		s := e.shard("k")
		s.mu.Lock()
		s.locks["k"].token = g.Token + 1 // the ticket's grant is no slot's now
		s.mu.Unlock()
		_, err := e.Acquire(context.Background(), AcquireRequest{Key: "k", ID: "x", Lease: time.Minute})
		if !errors.Is(err, ErrGrantEnded) {
			t.Fatalf("repeat of a grant no slot holds: %v, want ErrGrantEnded", err)
		}
		// The shard still serves.
		if _, err := e.Acquire(context.Background(), AcquireRequest{Key: "other"}); err != nil {
			t.Fatalf("another key after the repeat: %v", err)
		}
	})
}

// A repeat that takes over a waiting place with a shorter wait than the
// first request has left ends the place at its own deadline: its client
// waits no longer (a cancelled acquire's ask, 1 ms). A longer wait, or
// none, keeps the first request's deadline: a repeat never lengthens it.
func TestIDRepeatWaitEndsThePlaceOnlySooner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{Retention: time.Minute})
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key, Lease: time.Hour})
		first := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a", Wait: time.Minute})
		synctest.Wait()
		time.Sleep(5 * time.Second)
		ask := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a", Wait: time.Millisecond})
		synctest.Wait()
		wantErr(t, "first", answered(t, "first", first).err, ErrSuperseded)
		parked(t, "ask", ask)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		wantErr(t, "ask", answered(t, "ask", ask).err, ErrTimeout)
		wantCounts(t, e, 1, 0)
		again := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a", Wait: time.Minute})
		synctest.Wait()
		wantErr(t, "a repeat after the ask's timeout", answered(t, "again", again).err, ErrTimeout)

		for _, wait := range []time.Duration{0, time.Hour, 9 * time.Second} {
			first := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "b" + wait.String(), Wait: 10 * time.Second})
			synctest.Wait()
			time.Sleep(time.Second)
			repeat := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "b" + wait.String(), Wait: wait})
			synctest.Wait()
			wantErr(t, "first", answered(t, "first", first).err, ErrSuperseded)
			time.Sleep(9*time.Second - time.Nanosecond)
			synctest.Wait()
			parked(t, "repeat with wait "+wait.String(), repeat)
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			wantErr(t, "repeat with wait "+wait.String(), answered(t, "repeat", repeat).err, ErrTimeout)
		}
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, e, 0, 0)
	})
}

// The wait a repeat ended sooner is the standbys' too: promoted after a
// failover, a standby times the place out at the repeat's deadline, not
// at the first request's.
func TestIDRepeatWaitEndsThePlaceSoonerOnTheStandby(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := replicaPair(t)
		defer a.Close()
		defer b.Close()
		const key = "k"
		mustAcquire(t, a, AcquireRequest{Key: key, Lease: time.Hour})
		first := goAcquire(a, context.Background(), AcquireRequest{Key: key, ID: "w", Wait: time.Minute})
		synctest.Wait()
		repeat := goAcquire(a, context.Background(), AcquireRequest{Key: key, ID: "w", Wait: 3 * time.Second})
		synctest.Wait()
		wantErr(t, "first", answered(t, "first", first).err, ErrSuperseded)
		parked(t, "repeat", repeat)
		want := time.Now().Add(3 * time.Second)
		for name, e := range map[string]*Engine{"active": a, "standby": b} {
			if ws := e.Waiters(key, 10); len(ws) != 1 || !ws[0].WaitEnd.Equal(want) {
				t.Fatalf("%s: Waiters = %+v; want w, its wait ending at %v", name, ws, want)
			}
		}
		a.Demote()
		synctest.Wait()
		b.Promote(Failover)
		wantCounts(t, b, 1, 1)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		wantCounts(t, b, 1, 0)
	})
}
