package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// ---- helpers ---------------------------------------------------------------

type result struct {
	g   Grant
	err error
}

func newEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return e
}

// goAcquire runs Acquire in its own goroutine; the answer lands in the
// returned one-slot channel (len(ch) == 1 once it is there).
func goAcquire(e *Engine, ctx context.Context, req AcquireRequest) <-chan result {
	ch := make(chan result, 1)
	go func() {
		g, err := e.Acquire(ctx, req)
		ch <- result{g, err}
	}()
	return ch
}

// mustAcquire takes a lock that must be granted at once (or repeats an ID
// whose outcome is known).
func mustAcquire(t testing.TB, e *Engine, req AcquireRequest) Grant {
	t.Helper()
	g, err := e.Acquire(context.Background(), req)
	if err != nil {
		t.Fatalf("Acquire(%+v): %v", req, err)
	}
	if g.Key != req.Key || g.Token == 0 {
		t.Fatalf("Acquire(%+v) = %+v: bad grant", req, g)
	}
	return g
}

// answered returns the answer in ch, failing if there is none yet. In a
// synctest bubble call it after synctest.Wait.
func answered(t testing.TB, what string, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	default:
		t.Fatalf("%s: no answer yet, want one", what)
		return result{}
	}
}

// parked fails if ch has an answer.
func parked(t testing.TB, what string, ch <-chan result) {
	t.Helper()
	if len(ch) != 0 {
		r := <-ch
		t.Fatalf("%s: answered %+v / %v, want it still queued", what, r.g, r.err)
	}
}

func wantCounts(t testing.TB, e *Engine, keys, waiters int) {
	t.Helper()
	if k, w := e.Counts(); k != keys || w != waiters {
		t.Fatalf("Counts() = %d keys, %d waiters; want %d, %d", k, w, keys, waiters)
	}
}

// wantHolder checks Status(key): token 0 means nobody holds it.
func wantHolder(t testing.TB, e *Engine, key string, token uint64, waiters int) {
	t.Helper()
	st, err := e.Status(key)
	if err != nil {
		t.Fatalf("Status(%q): %v", key, err)
	}
	var got uint64
	if st.Holder != nil {
		got = st.Holder.Token
	}
	if got != token || st.Waiters != waiters {
		t.Fatalf("Status(%q): holder token %d, %d waiters; want %d, %d", key, got, st.Waiters, token, waiters)
	}
}

func wantErr(t testing.TB, what string, got, want error) {
	t.Helper()
	if !errors.Is(got, want) {
		t.Fatalf("%s: error %v, want %v", what, got, want)
	}
}

// recorder collects events from Config.OnEvent.
type recorder struct {
	mu  sync.Mutex
	evs []Event
}

func (r *recorder) add(ev Event) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
}

func (r *recorder) take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	evs := r.evs
	r.evs = nil
	return evs
}

func kinds(evs []Event) string {
	var b []string
	for _, ev := range evs {
		b = append(b, ev.Kind.String())
	}
	return strings.Join(b, ",")
}

// ---- FIFO, handoff, lease expiry -------------------------------------------

func TestFIFOOrderAndRisingTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		const key, n = "orders/42", 20
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		chs := make([]<-chan result, n)
		for i := range n {
			req := AcquireRequest{Key: key}
			if i%2 == 0 { // anonymous and identified waiters share the queue
				req.ID = fmt.Sprintf("w%02d", i)
			}
			chs[i] = goAcquire(e, context.Background(), req)
			synctest.Wait() // arrival order = i
		}
		wantCounts(t, e, 1, n)
		ws := e.Waiters(key, 100)
		if len(ws) != n {
			t.Fatalf("Waiters: %d entries, want %d", len(ws), n)
		}
		for i, w := range ws {
			if want := map[bool]string{true: fmt.Sprintf("w%02d", i)}[i%2 == 0]; w.ID != want {
				t.Fatalf("Waiters[%d].ID = %q, want %q", i, w.ID, want)
			}
		}
		prev := h
		for i := range n {
			if err := e.Release(key, prev.Token); err != nil {
				t.Fatalf("Release #%d: %v", i, err)
			}
			synctest.Wait()
			r := answered(t, fmt.Sprintf("waiter %d", i), chs[i])
			if r.err != nil {
				t.Fatalf("waiter %d: %v", i, r.err)
			}
			for j := i + 1; j < n; j++ {
				parked(t, fmt.Sprintf("waiter %d after grant to %d", j, i), chs[j])
			}
			if r.g.Token <= prev.Token {
				t.Fatalf("waiter %d: token %d, not above the previous %d", i, r.g.Token, prev.Token)
			}
			wantHolder(t, e, key, r.g.Token, n-1-i)
			prev = r.g
		}
		if err := e.Release(key, prev.Token); err != nil {
			t.Fatal(err)
		}
		wantCounts(t, e, 0, 0)
	})
}

func TestHandoffOnReleaseIsDirect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		e := newEngine(t, Config{OnEvent: rec.add})
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		a := goAcquire(e, context.Background(), AcquireRequest{Key: key})
		synctest.Wait()
		rec.take()
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		// Same step: the waiter holds before its goroutine even ran, so no
		// newcomer can get in between.
		st, _ := e.Status(key)
		if st.Holder == nil || st.Holder.Token <= h.Token {
			t.Fatalf("right after Release, holder = %+v; want the waiter with a new token", st.Holder)
		}
		evs := rec.take()
		if kinds(evs) != "release,grant" || evs[0].Token != h.Token || evs[1].Token != st.Holder.Token {
			t.Fatalf("events of Release: %+v; want release of %d then grant", evs, h.Token)
		}
		newcomer := goAcquire(e, context.Background(), AcquireRequest{Key: key, Wait: time.Second})
		synctest.Wait()
		r := answered(t, "waiter", a)
		if r.err != nil || r.g.Token != st.Holder.Token {
			t.Fatalf("waiter got %+v, %v; want token %d", r.g, r.err, st.Holder.Token)
		}
		parked(t, "newcomer", newcomer)
		time.Sleep(time.Second)
		synctest.Wait()
		wantErr(t, "newcomer", answered(t, "newcomer", newcomer).err, ErrTimeout)
		wantHolder(t, e, key, r.g.Token, 0)
	})
}

func TestHandoffOnLeaseExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		e := newEngine(t, Config{OnEvent: rec.add})
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key, Lease: 300 * time.Millisecond})
		if want := h.GrantedAt.Add(300 * time.Millisecond); !h.ExpiresAt.Equal(want) || h.Lease != 300*time.Millisecond {
			t.Fatalf("grant %+v: want lease 300ms, expires %v", h, want)
		}
		a := goAcquire(e, context.Background(), AcquireRequest{Key: key, Lease: 300 * time.Millisecond})
		synctest.Wait() // a arrives first
		b := goAcquire(e, context.Background(), AcquireRequest{Key: key})
		synctest.Wait()
		time.Sleep(299 * time.Millisecond)
		synctest.Wait()
		parked(t, "a before the lease ran out", a)
		wantHolder(t, e, key, h.Token, 2)
		rec.take()
		time.Sleep(time.Millisecond)
		synctest.Wait()
		ra := answered(t, "a", a)
		if ra.err != nil || ra.g.Token <= h.Token {
			t.Fatalf("a: %+v, %v; want a grant above %d", ra.g, ra.err, h.Token)
		}
		if evs := rec.take(); kinds(evs) != "expire,grant" || evs[0].Token != h.Token {
			t.Fatalf("events at lease end: %+v; want expire of %d, grant", evs, h.Token)
		}
		wantErr(t, "Release by the old holder", e.Release(key, h.Token), ErrNotHolder)
		_, err := e.Renew(key, h.Token, 0)
		wantErr(t, "Renew by the old holder", err, ErrNotHolder)
		parked(t, "b", b)
		// a's lease runs out too: b is next.
		time.Sleep(300 * time.Millisecond)
		synctest.Wait()
		rb := answered(t, "b", b)
		if rb.err != nil || rb.g.Token <= ra.g.Token {
			t.Fatalf("b: %+v, %v; want a grant above %d", rb.g, rb.err, ra.g.Token)
		}
		wantHolder(t, e, key, rb.g.Token, 0)
		// Nobody waits: the lease end frees the key entirely.
		time.Sleep(30 * time.Second)
		synctest.Wait()
		wantHolder(t, e, key, 0, 0)
		wantCounts(t, e, 0, 0)
		wantErr(t, "Release after expiry", e.Release(key, rb.g.Token), ErrNotHeld)
	})
}

// ---- wait runs out ---------------------------------------------------------

func TestWaitTimeoutNeverGrants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		a := goAcquire(e, context.Background(), AcquireRequest{Key: key, Wait: time.Second, ID: "a"})
		anon := goAcquire(e, context.Background(), AcquireRequest{Key: key, Wait: time.Second})
		synctest.Wait()
		time.Sleep(999 * time.Millisecond)
		synctest.Wait()
		parked(t, "a", a)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		wantErr(t, "a", answered(t, "a", a).err, ErrTimeout)
		wantErr(t, "anonymous", answered(t, "anonymous", anon).err, ErrTimeout)
		wantCounts(t, e, 1, 0)
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		// Nobody got it: the timed-out callers were out of the queue.
		wantHolder(t, e, key, 0, 0)
		wantCounts(t, e, 0, 0)
		// The repeat of a timed-out request is answered at once, even now
		// that the key is free.
		r := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		wantErr(t, "repeat after timeout", answered(t, "repeat", r).err, ErrTimeout)
		wantHolder(t, e, key, 0, 0)
	})
}

// TestWaitEndsAtLeaseEnd: a wait and a lease end at the same instant. Either
// outcome is valid, but never both: a caller told ErrTimeout does not hold,
// and the lock is not lost.
func TestWaitEndsAtLeaseEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key, Lease: time.Second})
		a := goAcquire(e, context.Background(), AcquireRequest{Key: key, Wait: time.Second})
		synctest.Wait() // a arrives first
		b := goAcquire(e, context.Background(), AcquireRequest{Key: key})
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		ra := answered(t, "a", a)
		switch {
		case ra.err == nil:
			if ra.g.Token <= h.Token {
				t.Fatalf("a: token %d not above %d", ra.g.Token, h.Token)
			}
			parked(t, "b", b)
			wantHolder(t, e, key, ra.g.Token, 1)
			if err := e.Release(key, ra.g.Token); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			rb := answered(t, "b", b)
			wantHolder(t, e, key, rb.g.Token, 0)
		case errors.Is(ra.err, ErrTimeout):
			rb := answered(t, "b", b)
			if rb.err != nil {
				t.Fatalf("b: %v", rb.err)
			}
			wantHolder(t, e, key, rb.g.Token, 0)
		default:
			t.Fatalf("a: %v", ra.err)
		}
	})
}

// TestWaitEndsAtRelease: the holder releases at the very instant the
// waiter's wait ends (two goroutines woken at the same virtual time).
func TestWaitEndsAtRelease(t *testing.T) {
	for i := range 50 {
		synctest.Test(t, func(t *testing.T) {
			e := newEngine(t, Config{Shards: 1})
			defer e.Close()
			const key = "k"
			h := mustAcquire(t, e, AcquireRequest{Key: key})
			a := goAcquire(e, context.Background(), AcquireRequest{Key: key, Wait: time.Second, ID: "a"})
			synctest.Wait()
			time.Sleep(time.Second) // wakes with the shard timer
			relErr := e.Release(key, h.Token)
			synctest.Wait()
			if relErr != nil {
				t.Fatalf("run %d: Release: %v", i, relErr)
			}
			ra := answered(t, "a", a)
			switch {
			case ra.err == nil:
				wantHolder(t, e, key, ra.g.Token, 0)
				// The repeat gets the same grant.
				if g := mustAcquire(t, e, AcquireRequest{Key: key, ID: "a"}); g.Token != ra.g.Token {
					t.Fatalf("run %d: repeat token %d, want %d", i, g.Token, ra.g.Token)
				}
			case errors.Is(ra.err, ErrTimeout):
				wantHolder(t, e, key, 0, 0)
				wantCounts(t, e, 0, 0)
			default:
				t.Fatalf("run %d: a: %v", i, ra.err)
			}
		})
	}
}

// ---- waiters that go away ----------------------------------------------------

func TestCancelledWaiterLeavesQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		e := newEngine(t, Config{OnEvent: rec.add})
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		ctx, cancel := context.WithCancel(context.Background())
		a := goAcquire(e, ctx, AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		b := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "b"})
		synctest.Wait()
		wantCounts(t, e, 1, 2)
		rec.take()
		cancel()
		synctest.Wait()
		wantErr(t, "a", answered(t, "a", a).err, context.Canceled)
		wantCounts(t, e, 1, 1)
		if ws := e.Waiters(key, 10); len(ws) != 1 || ws[0].ID != "b" {
			t.Fatalf("Waiters after cancel: %+v; want only b", ws)
		}
		if evs := rec.take(); kinds(evs) != "leave" {
			t.Fatalf("events of the cancel: %s; want leave", kinds(evs))
		}
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		rb := answered(t, "b", b)
		if rb.err != nil {
			t.Fatal(rb.err)
		}
		wantHolder(t, e, key, rb.g.Token, 0)
		// The cancelled request's ID is forgotten: a retry queues afresh.
		a2 := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		parked(t, "retry of a", a2)
		wantCounts(t, e, 1, 1)
		if err := e.Release(key, rb.g.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if r := answered(t, "retry of a", a2); r.err != nil || r.g.Token <= rb.g.Token {
			t.Fatalf("retry of a: %+v, %v", r.g, r.err)
		}
	})
}

// TestGrantRacingCancelIsHandedOn: the waiter's context ends at the moment
// its grant is made (the cancel happens inside the Release, under the shard
// lock, so the waiter's select has chosen ctx.Done before the grant lands in
// its channel). The grant cannot be delivered and must go to the next
// waiter at once.
func TestGrantRacingCancelIsHandedOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		var hook func(Event)
		e := newEngine(t, Config{OnEvent: func(ev Event) {
			rec.add(ev)
			if hook != nil {
				hook(ev)
			}
		}})
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a := goAcquire(e, ctx, AcquireRequest{Key: key, ID: "a"})
		synctest.Wait()
		b := goAcquire(e, context.Background(), AcquireRequest{Key: key})
		synctest.Wait()
		hook = func(ev Event) {
			if ev.Kind == EventRelease && ev.Token == h.Token {
				cancel()
			}
		}
		rec.take()
		if err := e.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		hook = nil
		wantErr(t, "a", answered(t, "a", a).err, context.Canceled)
		rb := answered(t, "b", b)
		if rb.err != nil {
			t.Fatalf("b: %v", rb.err)
		}
		wantHolder(t, e, key, rb.g.Token, 0)
		wantCounts(t, e, 1, 0)
		evs := rec.take()
		if kinds(evs) != "release,grant,release,grant" || evs[1].WaiterID != "a" || evs[2].Token != evs[1].Token || evs[3].Token != rb.g.Token {
			t.Fatalf("events: %+v; want release h, grant a, release a's grant, grant b", evs)
		}
		// a's ID is forgotten (not "grant ended"): a retry queues.
		a2 := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "a", Wait: time.Second})
		synctest.Wait()
		parked(t, "retry of a", a2)
		time.Sleep(time.Second)
		synctest.Wait()
		wantErr(t, "retry of a", answered(t, "retry", a2).err, ErrTimeout)
	})
}

func TestAbandonHandsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		const key = "k"
		h := mustAcquire(t, e, AcquireRequest{Key: key, ID: "h"})
		b := goAcquire(e, context.Background(), AcquireRequest{Key: key})
		synctest.Wait()
		e.Abandon(h, "h")
		synctest.Wait()
		rb := answered(t, "b", b)
		if rb.err != nil || rb.g.Token <= h.Token {
			t.Fatalf("b: %+v, %v; want a grant above %d", rb.g, rb.err, h.Token)
		}
		wantHolder(t, e, key, rb.g.Token, 0)
		// A stale Abandon (h's grant is over) changes nothing.
		e.Abandon(h, "h")
		wantHolder(t, e, key, rb.g.Token, 0)
		// h's ID is forgotten: its retry queues behind b.
		h2 := goAcquire(e, context.Background(), AcquireRequest{Key: key, ID: "h"})
		synctest.Wait()
		parked(t, "retry of h", h2)
		wantCounts(t, e, 1, 1)
		// Abandon of a grant without ID, nobody waiting: the key is freed.
		if err := e.Release(key, rb.g.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		r := answered(t, "retry of h", h2)
		if r.err != nil {
			t.Fatal(r.err)
		}
		e.Abandon(r.g, "h")
		wantHolder(t, e, key, 0, 0)
		wantCounts(t, e, 0, 0)
	})
}
