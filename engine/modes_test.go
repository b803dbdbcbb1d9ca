package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A semaphore (issue 14): up to limit shared holders at once, each with
// its own token; the next waits, and a release hands the freed slot on in
// the same step. Another limit while the key exists is ErrLimitMismatch.
func TestSemaphoreHoldsUpToLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		sem := AcquireRequest{Key: "api", Mode: Shared, Limit: 3}
		var gs []Grant
		for range 3 {
			gs = append(gs, mustAcquire(t, e, sem))
		}
		fourth := goAcquire(e, t.Context(), sem)
		synctest.Wait()
		parked(t, "a 4th acquire of a semaphore of 3", fourth)
		st, _ := e.Status("api")
		if len(st.Holders) != 3 || st.Limit != 3 || st.Holder.Token != gs[0].Token {
			t.Fatalf("Status = %+v; want 3 holders, the first %d, limit 3", st, gs[0].Token)
		}
		for i := 1; i < 3; i++ {
			if st.Holders[i].Token <= st.Holders[i-1].Token || st.Holders[i].Mode != Shared {
				t.Fatalf("holders %+v: want shared, oldest grant first", st.Holders)
			}
		}
		_, err := e.Acquire(t.Context(), AcquireRequest{Key: "api", Mode: Shared, Limit: 4})
		var lm *LimitMismatchError
		if !errors.As(err, &lm) || lm.Limit != 3 || !errors.Is(err, ErrLimitMismatch) {
			t.Fatalf("limit 4 on a semaphore of 3: %v, want ErrLimitMismatch naming 3", err)
		}
		if err := e.Release("api", gs[1].Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		g := answered(t, "the 4th after a release", fourth)
		if g.err != nil || g.g.Token <= gs[2].Token {
			t.Fatalf("4th: %+v %v; want a grant above %d", g.g, g.err, gs[2].Token)
		}
		// An acquire that names no limit takes the key's.
		ch := goAcquire(e, t.Context(), AcquireRequest{Key: "api", Mode: Shared})
		synctest.Wait()
		parked(t, "a 5th, no limit named", ch)
		if err := e.Release("api", gs[0].Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if r := answered(t, "the 5th", ch); r.err != nil {
			t.Fatal(r.err)
		}
	})
}

// A read/write lock: shared holders hold together; an exclusive waiter
// holds back every shared waiter behind it (no writer starves); when it
// releases, the consecutive shared waiters at the head are granted
// together, up to an exclusive one.
func TestReadWriteLockFIFOAcrossModes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		read := AcquireRequest{Key: "cfg", Mode: Shared, Limit: 8, Owner: "reader"}
		write := AcquireRequest{Key: "cfg", Owner: "writer"}
		r1, r2 := mustAcquire(t, e, read), mustAcquire(t, e, read)
		w := goAcquire(e, t.Context(), write)
		synctest.Wait()
		r3 := goAcquire(e, t.Context(), read)
		synctest.Wait()
		r4 := goAcquire(e, t.Context(), read)
		synctest.Wait()
		w2 := goAcquire(e, t.Context(), write)
		synctest.Wait()
		r5 := goAcquire(e, t.Context(), read)
		synctest.Wait()
		for i, ch := range []<-chan result{w, r3, r4, w2, r5} {
			parked(t, fmt.Sprint("waiter ", i), ch)
		}
		st, _ := e.Status("cfg")
		if st.OldestOwner != "writer" || st.OldestMode != Exclusive || st.Waiters != 5 {
			t.Fatalf("Status = %+v; want the writer first of 5 waiters", st)
		}
		_ = e.Release("cfg", r1.Token)
		synctest.Wait()
		parked(t, "the writer while a reader holds", w)
		_ = e.Release("cfg", r2.Token)
		synctest.Wait()
		wg := answered(t, "the writer", w)
		if wg.err != nil || wg.g.Mode != Exclusive || wg.g.Owner != "writer" {
			t.Fatalf("writer: %+v %v", wg.g, wg.err)
		}
		parked(t, "a reader behind the writer", r3)
		_ = e.Release("cfg", wg.g.Token)
		synctest.Wait()
		g3, g4 := answered(t, "reader 3", r3), answered(t, "reader 4", r4)
		if g3.err != nil || g4.err != nil || g4.g.Token <= g3.g.Token {
			t.Fatalf("readers 3, 4: %+v %v, %+v %v; want both, in order", g3.g, g3.err, g4.g, g4.err)
		}
		parked(t, "the second writer", w2)
		parked(t, "reader 5, behind the second writer", r5)
		if err := e.ForceRelease("cfg"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if r := answered(t, "the second writer after a forced release", w2); r.err != nil {
			t.Fatal(r.err)
		}
		parked(t, "reader 5", r5)
	})
}

// An operator's release ends every holder, hands the slots on, says so in
// its events, and remembers the holders' waiter IDs as ended.
func TestForceRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		e := newEngine(t, Config{OnEvent: rec.add})
		defer e.Close()
		wantErr(t, "force on a free key", e.ForceRelease("k"), ErrNotHeld)
		if err := e.ForceRelease(""); !errors.As(err, new(*ArgError)) {
			t.Fatalf("force with a bad key: %v, want an ArgError", err)
		}
		a := mustAcquire(t, e, AcquireRequest{Key: "k", Mode: Shared, Limit: 2, ID: "a", Owner: "job-a"})
		mustAcquire(t, e, AcquireRequest{Key: "k", Mode: Shared, Limit: 2})
		next := goAcquire(e, t.Context(), AcquireRequest{Key: "k"})
		synctest.Wait()
		rec.take()
		if err := e.ForceRelease("k"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if r := answered(t, "the waiter", next); r.err != nil {
			t.Fatal(r.err)
		}
		evs := rec.take()
		if kinds(evs) != "release,release,grant" || !evs[0].Forced || !evs[1].Forced || evs[2].Forced {
			t.Fatalf("events %s %+v; want two forced releases, then a grant", kinds(evs), evs)
		}
		_, err := e.Acquire(t.Context(), AcquireRequest{Key: "k", Mode: Shared, Limit: 2, ID: "a", Owner: "job-a"})
		wantErr(t, "a repeat of a force-released grant", err, ErrGrantEnded)
		wantErr(t, "the holder's own release after force", e.Release("k", a.Token), ErrNotHolder)
	})
}

// Bad input is an *ArgError naming the field, and changes nothing.
func TestModesBadInput(t *testing.T) {
	e := newEngine(t, Config{})
	defer e.Close()
	for _, c := range []struct {
		req   AcquireRequest
		field string
	}{
		{AcquireRequest{Key: "k", Limit: -1}, "limit"},
		{AcquireRequest{Key: "k", Limit: MaxLimit + 1}, "limit"},
		{AcquireRequest{Key: "k", Mode: 2}, "mode"},
		{AcquireRequest{Key: "k", Owner: strings.Repeat("x", MaxOwnerBytes+1)}, "owner"},
		{AcquireRequest{Key: "k", Owner: "a\nb"}, "owner"},
		{AcquireRequest{Key: "k", Owner: "a\u0085b"}, "owner"},
		{AcquireRequest{Key: "k", Owner: "\xff"}, "owner"},
	} {
		_, err := e.Acquire(context.Background(), c.req)
		var ae *ArgError
		if !errors.As(err, &ae) || ae.Field != c.field {
			t.Errorf("%+v: %v, want an ArgError for %q", c.req, err, c.field)
		}
	}
	wantCounts(t, e, 0, 0)
	g := mustAcquire(t, e, AcquireRequest{Key: "k", Owner: strings.Repeat("é", MaxOwnerBytes/2)})
	if st, _ := e.Status("k"); st.Holder.Owner != g.Owner || st.Limit != 1 {
		t.Fatalf("Status %+v: want the owner and limit 1", st)
	}
}

// The properties of issue 14 under random operation sequences (acquires of
// both modes with owners, releases, forced releases, renewals, cancelled
// waiters, time passing so that leases and waits run out): a key never
// has more than its limit of holders, never a shared and an exclusive
// holder together; every grant to a waiter goes to the first of its queue
// (FIFO across modes); no waiter is left queued while its grant would fit
// (every freed slot is handed on in the same step); every token is above
// every earlier one.
func TestModesProperties(t *testing.T) {
	for seed := range uint64(30) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { modesProperties(t, seed) })
		})
	}
}

func modesProperties(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 14))
	var mu sync.Mutex
	var failures []string
	queues := map[string][]string{} // waiter IDs per key, from the events
	// Tokens rise per key (a key's events come in order) and are never
	// issued twice; across keys, events of different shards may arrive
	// in another order than their tokens were issued.
	last := map[string]uint64{}
	issued := map[uint64]bool{}
	onEvent := func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		q := queues[ev.Key]
		switch ev.Kind {
		case EventEnqueue:
			queues[ev.Key] = append(q, ev.WaiterID)
		case EventLeave, EventTimeout:
			queues[ev.Key] = slices.DeleteFunc(q, func(id string) bool { return id == ev.WaiterID })
		case EventGrant:
			if ev.Token <= last[ev.Key] || issued[ev.Token] {
				failures = append(failures, fmt.Sprintf("%s: token %d after %d (issued before: %v)", ev.Key, ev.Token, last[ev.Key], issued[ev.Token]))
			}
			last[ev.Key] = ev.Token
			issued[ev.Token] = true
			if i := slices.Index(q, ev.WaiterID); i > 0 {
				failures = append(failures, fmt.Sprintf("%s granted to %s, behind %v", ev.Key, ev.WaiterID, q[:i]))
			} else if i == 0 {
				queues[ev.Key] = q[1:]
			}
		}
	}
	e := newEngine(t, Config{Shards: 2, OnEvent: onEvent})
	defer e.Close()
	// sem: a counting semaphore of exclusive holders; rw: a read/write lock
	// (the default limit, any number of shared holders); rwsem: both modes
	// under a limit; plain: a mutex.
	keys := []string{"sem", "rw", "rwsem", "plain"}
	limits := map[string]int{"sem": 3, "rw": 1, "rwsem": 5, "plain": 1}
	var grants []Grant
	var cancels []context.CancelFunc
	var chans []<-chan result
	ids := 0
	forced := map[string]bool{} // keys force-released in this step
	check := func(step int) {
		t.Helper()
		synctest.Wait()
		chans = slices.DeleteFunc(chans, func(ch <-chan result) bool {
			select {
			case r := <-ch:
				if r.err == nil {
					grants = append(grants, r.g)
					// A grant just answered holds its key, unless its lease
					// ran out or an operator forced the key meanwhile.
					if li, _ := e.Status(r.g.Key); !forced[r.g.Key] && time.Now().Before(r.g.ExpiresAt) &&
						!slices.ContainsFunc(li.Holders, func(h Grant) bool { return h.Token == r.g.Token }) {
						t.Errorf("step %d: %s was granted token %d, which is not among its holders %v", step, r.g.Key, r.g.Token, li.Holders)
					}
				}
				return true
			default:
				return false
			}
		})
		for i := range e.shards {
			s := &e.shards[i]
			s.mu.Lock()
			for _, lk := range s.locks {
				n := lk.holders()
				readers := lk.limit() == 1 && lk.mode() == Shared // a read/write lock's readers: any number
				if n > lk.limit() && !readers {
					t.Errorf("step %d: %s has %d holders, limit %d", step, lk.key, n, lk.limit())
				}
				if n > 1 && lk.mode() == Exclusive && lk.limit() == 1 {
					t.Errorf("step %d: %s has %d holders, one exclusive under limit 1", step, lk.key, n)
				}
				// A key's holders share one mode (extra.mode): a shared and an
				// exclusive holder cannot even be represented together.
				if lk.head != nil && lk.canGrant(lk.head.mode) {
					t.Errorf("step %d: %s's first waiter (%v) fits beside %d %v holders but waits", step, lk.key, lk.head.mode, n, lk.mode())
				}
			}
			s.mu.Unlock()
		}
		mu.Lock()
		defer mu.Unlock()
		if len(failures) > 0 {
			t.Fatalf("step %d: %s", step, strings.Join(failures, "; "))
		}
	}
	for step := range 300 {
		switch op := rnd.IntN(10); {
		case op < 5:
			key := keys[rnd.IntN(len(keys))]
			ids++
			ar := AcquireRequest{Key: key, Lease: time.Duration(1+rnd.IntN(6)) * time.Second, Limit: limits[key], ID: fmt.Sprint("w", ids), Owner: fmt.Sprint("owner-", rnd.IntN(4))}
			if (key == "rw" || key == "rwsem") && rnd.IntN(3) > 0 {
				ar.Mode = Shared
			}
			if rnd.IntN(2) == 0 {
				ar.Wait = time.Duration(1+rnd.IntN(5)) * time.Second
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			chans = append(chans, goAcquire(e, ctx, ar))
		case op == 5 && len(grants) > 0:
			g := grants[rnd.IntN(len(grants))]
			_ = e.Release(g.Key, g.Token)
		case op == 6 && len(grants) > 0:
			g := grants[rnd.IntN(len(grants))]
			_, _ = e.Renew(g.Key, g.Token, 0)
		case op == 7 && len(cancels) > 0:
			cancels[rnd.IntN(len(cancels))]()
		case op == 8 && rnd.IntN(4) == 0:
			k := keys[rnd.IntN(len(keys))]
			forced[k] = true
			_ = e.ForceRelease(k)
		default:
			time.Sleep(time.Duration(rnd.IntN(2000)) * time.Millisecond)
		}
		check(step)
		clear(forced)
	}
	for _, c := range cancels {
		c()
	}
	check(300)
}
