package engine

import (
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// Replays of bug reports against other lock services' semaphores and
// read/write locks (Redisson, Curator, Consul, Hazelcast), on baton's
// engine: see each test's comment for the report.

// ownersOf returns the owners of key's holders, oldest grant first.
func ownersOf(t *testing.T, e *Engine, key string) []string {
	t.Helper()
	st, err := e.Status(key)
	if err != nil {
		t.Fatal(err)
	}
	var o []string
	for _, h := range st.Holders {
		o = append(o, h.Owner)
	}
	return o
}

// A semaphore whose holders die (kill -9 of the client: nobody releases)
// gives their slots back when their leases run out, to the waiters in
// queue order, each in the same step as the expiry that freed it; a slot
// is never left free while a waiter that fits is queued. Replays
// redisson/redisson#2045 and #4462 ("RSemaphore never released when the
// machine holding it is down"), apache/curator#1112 (CURATOR-595:
// "InterProcessSemaphoreV2 LOST isn't releasing permits for other
// clients") and hazelcast/hazelcast#16810 ("release dangling ISemaphore"
// after kill -9 of the holder): three holders' leases run out at the same
// instant, then one by one.
func TestSemaphoreLeaseExpiryHandsSlotsOnInQueueOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		e := newEngine(t, Config{OnEvent: rec.add})
		defer e.Close()
		for i := range 3 {
			mustAcquire(t, e, AcquireRequest{Key: "pool", Limit: 3, Lease: 5 * time.Second, Owner: fmt.Sprint("dead-", i)})
		}
		// Five waiters; w0..w2 with leases of 2, 4 and 6 s, so that after
		// the first three leases end together their own end one by one.
		var ws []<-chan result
		for i := range 5 {
			ws = append(ws, goAcquire(e, t.Context(), AcquireRequest{Key: "pool", Lease: time.Duration(2+2*i) * time.Second, Owner: fmt.Sprint("w", i), ID: fmt.Sprint("id", i)}))
			synctest.Wait()
		}
		rec.take()
		time.Sleep(5 * time.Second) // the dead holders' leases end together
		synctest.Wait()
		var gs []Grant
		for i := range 3 {
			r := answered(t, fmt.Sprint("w", i), ws[i])
			if r.err != nil {
				t.Fatalf("w%d: %v", i, r.err)
			}
			if len(gs) > 0 && r.g.Token <= gs[len(gs)-1].Token {
				t.Fatalf("w%d got token %d, not above w%d's %d: not in queue order", i, r.g.Token, i-1, gs[len(gs)-1].Token)
			}
			gs = append(gs, r.g)
		}
		parked(t, "w3", ws[3])
		parked(t, "w4", ws[4])
		if o := ownersOf(t, e, "pool"); !slices.Equal(o, []string{"w0", "w1", "w2"}) {
			t.Fatalf("holders %v after the three leases ended; want w0, w1, w2", o)
		}
		// Each expiry is followed by its grant before the next expiry:
		// no slot is free while a waiter is queued.
		evs := rec.take()
		if k := kinds(evs); k != "expire,grant,expire,grant,expire,grant" {
			t.Fatalf("events %s; want each expiry followed by its grant", k)
		}
		// Then w0..w2 die too; their leases end one by one (2, 4, 6 s
		// after their grants): w3, then w4, each at the first end.
		late := goAcquire(e, t.Context(), AcquireRequest{Key: "pool", Owner: "late"})
		synctest.Wait()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if r := answered(t, "w3 after w0's lease ended", ws[3]); r.err != nil || r.g.Token <= gs[2].Token {
			t.Fatalf("w3: %+v %v", r.g, r.err)
		}
		parked(t, "w4 while two slots are held by w1, w2 and one by w3", ws[4])
		parked(t, "late", late)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if r := answered(t, "w4 after w1's lease ended", ws[4]); r.err != nil {
			t.Fatal(r.err)
		}
		parked(t, "late, behind w4", late)
		if o := ownersOf(t, e, "pool"); !slices.Equal(o, []string{"w2", "w3", "w4"}) {
			t.Fatalf("holders %v; want w2, w3, w4", o)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if r := answered(t, "late after w2's lease ended", late); r.err != nil {
			t.Fatal(r.err)
		}
	})
}

// A read/write lock's shared holders whose leases end one by one: an
// exclusive waiter queued behind them gets the lock when the last one
// ends, not before, and no shared acquire that comes after it overtakes
// it meanwhile (no writer starvation), however many readers keep
// arriving; the readers queued behind the writer are granted together
// when its lease ends. Replays apache/curator#1138 (CURATOR-621: the write
// lock taken while a read lock was not released), redisson/redisson#1604
// (read locks' leases not kept apart: a renewal of one reader's lease
// must not be another's) and the writer starvation of
// dynamodb-lock-client#14 and gephi/graphstore#282.
func TestSharedLeasesEndOneByOneWriterNotOvertaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		read := func(owner string, lease time.Duration) AcquireRequest {
			return AcquireRequest{Key: "cfg", Mode: Shared, Owner: owner, Lease: lease}
		}
		r1 := mustAcquire(t, e, read("r1", 2*time.Second))
		r2 := mustAcquire(t, e, read("r2", 4*time.Second))
		w := goAcquire(e, t.Context(), AcquireRequest{Key: "cfg", Owner: "writer", Lease: 3 * time.Second})
		synctest.Wait()
		var later []<-chan result
		for i := range 3 {
			later = append(later, goAcquire(e, t.Context(), read(fmt.Sprint("late-", i), 10*time.Second)))
			synctest.Wait()
			parked(t, fmt.Sprint("reader late-", i, " behind a queued writer"), later[i])
			time.Sleep(time.Second)
		}
		// At 3 s: r1's lease ended (2 s) and r2 renewed its own; the
		// writer still waits for r2.
		synctest.Wait()
		parked(t, "the writer while r2 holds", w)
		if _, err := e.Renew("cfg", r2.Token, 4*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Renew("cfg", r1.Token, 0); err == nil {
			t.Fatal("r1 renewed after its lease ended")
		}
		if o := ownersOf(t, e, "cfg"); !slices.Equal(o, []string{"r2"}) {
			t.Fatalf("holders %v at 3 s; want r2 alone", o)
		}
		time.Sleep(3999 * time.Millisecond)
		synctest.Wait()
		parked(t, "the writer 1 ms before r2's renewed lease ends", w)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		g := answered(t, "the writer when r2's lease ended", w)
		if g.err != nil || g.g.Mode != Exclusive {
			t.Fatalf("writer: %+v %v", g.g, g.err)
		}
		for i, ch := range later {
			parked(t, fmt.Sprint("late-", i, " while the writer holds"), ch)
		}
		time.Sleep(3 * time.Second) // the writer dies too
		synctest.Wait()
		for i, ch := range later {
			if r := answered(t, fmt.Sprint("late-", i, " after the writer's lease"), ch); r.err != nil || r.g.Token <= g.g.Token {
				t.Fatalf("late-%d: %+v %v", i, r.g, r.err)
			}
		}
		if o := ownersOf(t, e, "cfg"); !slices.Equal(o, []string{"late-0", "late-1", "late-2"}) {
			t.Fatalf("holders %v; want the three late readers together", o)
		}
	})
}

// An operator's release while waiters of both modes are queued ends every
// holder and grants the head of the queue as a release would: the
// consecutive shared waiters at the head together, up to the first
// exclusive one, which a second force grants alone; the shared waiter
// behind it stays queued. Replays hazelcast/hazelcast#16810 (an
// operator's way to free a semaphore a dead member held) and
// apache/curator#1166 (CURATOR-650: revoke a semaphore lease), checking
// the queue's order across modes through the forced release.
func TestForceReleaseWithBothModesQueued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{})
		defer e.Close()
		mustAcquire(t, e, AcquireRequest{Key: "k", Owner: "stuck-writer"})
		var chs []<-chan result
		for _, w := range []AcquireRequest{
			{Key: "k", Mode: Shared, Owner: "r1"},
			{Key: "k", Mode: Shared, Owner: "r2"},
			{Key: "k", Owner: "w1"},
			{Key: "k", Mode: Shared, Owner: "r3"},
		} {
			chs = append(chs, goAcquire(e, t.Context(), w))
			synctest.Wait()
		}
		if err := e.ForceRelease("k"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		for i := range 2 {
			if r := answered(t, fmt.Sprint("r", i+1), chs[i]); r.err != nil || r.g.Mode != Shared {
				t.Fatalf("r%d: %+v %v", i+1, r.g, r.err)
			}
		}
		parked(t, "w1 behind the readers", chs[2])
		parked(t, "r3 behind w1", chs[3])
		if o := ownersOf(t, e, "k"); !slices.Equal(o, []string{"r1", "r2"}) {
			t.Fatalf("holders %v; want r1, r2", o)
		}
		if st, _ := e.Status("k"); st.Waiters != 2 || st.OldestOwner != "w1" || st.OldestMode != Exclusive {
			t.Fatalf("status %+v; want w1 first of 2 waiters", st)
		}
		if err := e.ForceRelease("k"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if r := answered(t, "w1", chs[2]); r.err != nil || r.g.Mode != Exclusive {
			t.Fatalf("w1: %+v %v", r.g, r.err)
		}
		parked(t, "r3 behind w1 holding", chs[3])
		if err := e.ForceRelease("k"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if r := answered(t, "r3", chs[3]); r.err != nil {
			t.Fatal(r.err)
		}
	})
}

// An acquire naming another limit than the key's is refused
// (ErrLimitMismatch) and changes nothing: not the holders, the queue, the
// limit, the counts, the tokens, nor the waiter ID it carried (a repeat
// under that ID with the right limit is a new acquire, queued at the
// tail). Replays redisson/redisson#4678 (trySetPermits overwrote a
// semaphore's permits while they were all taken) and hashicorp/consul#933
// (a semaphore's limit kept after every holder left, so that it could not
// be changed): once the key is idle, another limit is taken.
func TestLimitMismatchChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		e := newEngine(t, Config{OnEvent: rec.add})
		defer e.Close()
		a := mustAcquire(t, e, AcquireRequest{Key: "sem", Limit: 2, Owner: "a"})
		b := mustAcquire(t, e, AcquireRequest{Key: "sem", Limit: 2, Owner: "b"})
		q1 := goAcquire(e, t.Context(), AcquireRequest{Key: "sem", Owner: "q1", ID: "q1"})
		synctest.Wait()
		before, _ := e.Status("sem")
		last := e.LastToken()
		rec.take()
		for _, req := range []AcquireRequest{
			{Key: "sem", Limit: 3, Owner: "x", ID: "x"},
			{Key: "sem", Limit: 1, ID: "y"},
			{Key: "sem", Limit: 3, Mode: Shared, Wait: time.Second},
		} {
			_, err := e.Acquire(t.Context(), req)
			wantErr(t, fmt.Sprintf("limit %d on a key of 2", req.Limit), err, ErrLimitMismatch)
		}
		synctest.Wait()
		after, _ := e.Status("sem")
		before.Holder, after.Holder = nil, nil // pointers into Holders
		if fmt.Sprint(after) != fmt.Sprint(before) || e.LastToken() != last {
			t.Fatalf("after the refused acquires: %+v, last token %d; want %+v, %d", after, e.LastToken(), before, last)
		}
		if evs := rec.take(); len(evs) != 0 {
			t.Fatalf("events %s after refused acquires; want none", kinds(evs))
		}
		wantCounts(t, e, 1, 1)
		x := goAcquire(e, t.Context(), AcquireRequest{Key: "sem", Limit: 2, Owner: "x", ID: "x"})
		synctest.Wait()
		if ws := e.Waiters("sem", 10); len(ws) != 2 || ws[0].ID != "q1" || ws[1].ID != "x" {
			t.Fatalf("waiters %+v; want q1, then x", ws)
		}
		_ = e.Release("sem", a.Token)
		_ = e.Release("sem", b.Token)
		synctest.Wait()
		g1, gx := answered(t, "q1", q1), answered(t, "x", x)
		if g1.err != nil || gx.err != nil {
			t.Fatal(g1.err, gx.err)
		}
		_ = e.Release("sem", g1.g.Token)
		_ = e.Release("sem", gx.g.Token)
		wantCounts(t, e, 0, 0)
		// Idle, the key is gone with its limit: another one is taken.
		g := mustAcquire(t, e, AcquireRequest{Key: "sem", Limit: 5})
		if st, _ := e.Status("sem"); st.Limit != 5 || len(st.Holders) != 1 || st.Holder.Token != g.Token {
			t.Fatalf("status %+v; want limit 5", st)
		}
	})
}

// A writer queued behind readers with a wait gets its timeout when the
// wait runs out, not a grant, and the readers queued behind it, whom it
// held back, are granted in the same step; the readers that hold are
// untouched. Replays redisson/redisson#1458 ("ReadWriteLock timeout does
// not work as expected": a write lock's tryLock behind read locks) and
// factcast/factcast#1794 (a Redisson-based write lock ignored maxWait).
func TestWriterWaitRunsOutBehindReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		e := newEngine(t, Config{OnEvent: rec.add})
		defer e.Close()
		r1 := mustAcquire(t, e, AcquireRequest{Key: "cfg", Mode: Shared, Owner: "r1", Lease: time.Minute})
		r2 := mustAcquire(t, e, AcquireRequest{Key: "cfg", Mode: Shared, Owner: "r2", Lease: time.Minute})
		w := goAcquire(e, t.Context(), AcquireRequest{Key: "cfg", Owner: "writer", Wait: 2 * time.Second})
		synctest.Wait()
		r3 := goAcquire(e, t.Context(), AcquireRequest{Key: "cfg", Mode: Shared, Owner: "r3"})
		synctest.Wait()
		rec.take()
		time.Sleep(2*time.Second - time.Millisecond)
		synctest.Wait()
		parked(t, "the writer before its wait ran out", w)
		parked(t, "r3 behind the writer", r3)
		time.Sleep(time.Millisecond)
		synctest.Wait()
		wantErr(t, "the writer when its wait ran out", answered(t, "the writer", w).err, ErrTimeout)
		if g := answered(t, "r3", r3); g.err != nil || g.g.Mode != Shared {
			t.Fatalf("r3: %+v %v", g.g, g.err)
		}
		if k := kinds(rec.take()); k != "timeout,grant" {
			t.Fatalf("events %s; want the writer's timeout, then r3's grant in the same step", k)
		}
		if o := ownersOf(t, e, "cfg"); !slices.Equal(o, []string{"r1", "r2", "r3"}) {
			t.Fatalf("holders %v; want r1, r2 and r3", o)
		}
		for _, g := range []Grant{r1, r2} {
			if _, err := e.Renew("cfg", g.Token, 0); err != nil {
				t.Fatalf("renew of %s: %v", g.Owner, err)
			}
		}
	})
}
