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
)

// memLog is an in-memory Log for the engine's tests: it keeps every
// record, refuses appends (all, or of some kinds) while told to, and can
// hold Wait back or fail it.
type memLog struct {
	mu      sync.Mutex
	recs    [][]byte
	taken   uint64                // records take has removed: indexes go on after them
	refuse  func(RecordKind) bool // nil: take everything
	gate    chan struct{}         // non-nil: Wait blocks until it is closed
	waitErr error
}

var errDiskFull = errors.New("no space left on device")

func (l *memLog) Append(rec []byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse != nil && l.refuse(RecordKind(rec[1])) {
		return 0, errDiskFull
	}
	l.recs = append(l.recs, append([]byte(nil), rec...))
	return l.taken + uint64(len(l.recs)), nil
}

func (l *memLog) Wait(idx uint64) error {
	l.mu.Lock()
	gate, err, n := l.gate, l.waitErr, l.taken+uint64(len(l.recs))
	l.mu.Unlock()
	if idx == 0 || idx > n {
		panic("Wait for an index never appended")
	}
	if gate != nil {
		<-gate
	}
	return err
}

func (l *memLog) setRefuse(f func(RecordKind) bool) {
	l.mu.Lock()
	l.refuse = f
	l.mu.Unlock()
}

// hold makes Wait block until the returned func is called.
func (l *memLog) hold() (release func()) {
	gate := make(chan struct{})
	l.mu.Lock()
	l.gate = gate
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		l.gate = nil
		l.mu.Unlock()
		close(gate)
	}
}

// take decodes and forgets the records so far.
func (l *memLog) take(t testing.TB) []Record {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Record
	for i, b := range l.recs {
		r, err := DecodeRecord(b)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		out = append(out, r)
	}
	l.taken += uint64(len(l.recs))
	l.recs = l.recs[:0:0]
	return out
}

func recKinds(rs []Record) string {
	var b []string
	for _, r := range rs {
		b = append(b, r.Kind.String())
	}
	return strings.Join(b, ",")
}

// Every change the engine makes, asked for or made by its own timers,
// reaches the log as a record with the fields a replica needs, on the
// wall clock, in the order of the changes.
func TestLogRecordsEveryChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memLog{}
		clock := newStepClock(nil)
		e := newEngine(t, Config{Shards: 1, Clock: clock, Log: log, PollTimeout: 3 * time.Second, PollGrace: 5 * time.Second})
		defer e.Close()
		_, t0 := clock.Now()
		a := mustAcquire(t, e, AcquireRequest{Key: "k", Lease: 10 * time.Second})
		b := goAcquire(e, context.Background(), AcquireRequest{Key: "k", ID: "b", Lease: 4 * time.Second})
		synctest.Wait()
		c := goAcquire(e, context.Background(), AcquireRequest{Key: "k", Wait: 2 * time.Second})
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		d := goAcquire(e, ctx, AcquireRequest{Key: "k", ID: "d"})
		synctest.Wait()
		cancel()
		synctest.Wait()
		wantErr(t, "the cancelled acquire", answered(t, "d", d).err, context.Canceled)
		recs := log.take(t)
		if got := recKinds(recs); got != "grant,enqueue,enqueue,enqueue,leave" {
			t.Fatalf("records %s", got)
		}
		want := Record{Kind: RecGrant, Key: "k", Token: a.Token, Lease: 10 * time.Second, At: t0, Expires: t0 + int64(10*time.Second)}
		if recs[0] != want {
			t.Fatalf("grant record %+v, want %+v", recs[0], want)
		}
		if want := (Record{Kind: RecEnqueue, Key: "k", WaiterID: "b", Lease: 4 * time.Second, At: t0}); recs[1] != want {
			t.Fatalf("enqueue record %+v, want %+v", recs[1], want)
		}
		if r := recs[2]; !IsTicket(r.WaiterID) || r.WaitUntil != t0+int64(2*time.Second) || r.Lease != 30*time.Second {
			t.Fatalf("the anonymous waiter's enqueue record %+v", r)
		}
		if want := (Record{Kind: RecLeave, Key: "k", WaiterID: "d", At: t0}); recs[4] != want {
			t.Fatalf("leave record %+v, want %+v", recs[4], want)
		}

		clock.Step(time.Hour) // the records follow the wall clock; the deadlines do not
		time.Sleep(2 * time.Second)
		synctest.Wait()
		wantErr(t, "the 2 s wait", answered(t, "c", c).err, ErrTimeout)
		_, w := clock.Now()
		if g, err := e.Renew("k", a.Token, 20*time.Second); err != nil {
			t.Fatal(err)
		} else if g.ExpiresAt.UnixNano() != w+int64(20*time.Second) {
			t.Fatalf("renewed grant %+v", g)
		}
		recs = log.take(t)
		if got := recKinds(recs); got != "timeout,renew" {
			t.Fatalf("records %s", got)
		}
		if r := recs[0]; r.At != w || r.Until != w+int64(e.cfg.Retention) || !IsTicket(r.WaiterID) {
			t.Fatalf("timeout record %+v", r)
		}
		if want := (Record{Kind: RecRenew, Key: "k", Token: a.Token, Lease: 20 * time.Second, At: w, Expires: w + int64(20*time.Second)}); recs[1] != want {
			t.Fatalf("renew record %+v, want %+v", recs[1], want)
		}

		// b's poll ends (3 s after it began): its place is kept for the
		// grace, and the release grants the key to it, to be claimed.
		time.Sleep(time.Second)
		synctest.Wait()
		wantErr(t, "b's poll", answered(t, "b", b).err, ErrPollTimeout)
		if err := e.Release("k", a.Token); err != nil {
			t.Fatal(err)
		}
		_, w = clock.Now()
		recs = log.take(t)
		if got := recKinds(recs); got != "detach,release,grant" {
			t.Fatalf("records %s", got)
		}
		if r := recs[0]; r.WaiterID != "b" || r.Until != w+int64(5*time.Second) {
			t.Fatalf("detach record %+v", r)
		}
		if r := recs[2]; r.WaiterID != "b" || r.Token <= a.Token || r.Until != w+int64(5*time.Second) || r.Expires != w+int64(4*time.Second) {
			t.Fatalf("grant record of the detached waiter %+v", r)
		}
		// The repeat claims it; then its 4 s lease runs out.
		g := mustAcquire(t, e, AcquireRequest{Key: "k", ID: "b", Lease: 4 * time.Second})
		time.Sleep(4 * time.Second)
		synctest.Wait()
		recs = log.take(t)
		if got := recKinds(recs); got != "claim,expire" {
			t.Fatalf("records %s", got)
		}
		if r := recs[0]; r.Token != g.Token || r.WaiterID != "b" || r.Until != 0 {
			t.Fatalf("claim record %+v", r)
		}
		if r := recs[1]; r.Token != g.Token || r.At != w+int64(4*time.Second) {
			t.Fatalf("expire record %+v", r)
		}
	})
}

// A change the log refuses is not made: the caller gets ErrUnavailable and
// the state is as before. A change the engine makes by itself (a lease
// that ran out, the grant to the next waiter) is tried again until the log
// takes it.
func TestLogRefusalChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memLog{}
		rec := &recorder{}
		e := newEngine(t, Config{Shards: 1, Log: log, OnEvent: rec.add})
		defer e.Close()
		a := mustAcquire(t, e, AcquireRequest{Key: "k", Lease: 2 * time.Second})
		rec.take()
		log.take(t)

		log.setRefuse(func(RecordKind) bool { return true })
		_, err := e.Acquire(context.Background(), AcquireRequest{Key: "free"})
		wantErr(t, "acquire of a free key", err, ErrUnavailable)
		_, err = e.Acquire(context.Background(), AcquireRequest{Key: "k", ID: "w"})
		wantErr(t, "acquire that would queue", err, ErrUnavailable)
		wantErr(t, "release", e.Release("k", a.Token), ErrUnavailable)
		_, err = e.Renew("k", a.Token, time.Minute)
		wantErr(t, "renew", err, ErrUnavailable)
		wantCounts(t, e, 1, 0)
		if st := peekStatus(e, "k"); st.Holder == nil || !st.Holder.ExpiresAt.Equal(a.ExpiresAt) {
			t.Fatalf("after refused changes: %+v; want the grant as it was (%v)", st.Holder, a.ExpiresAt)
		}
		// Its lease runs out while the log refuses: the expiry waits.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		wantHolder(t, e, "k", a.Token, 0)
		if evs := rec.take(); len(evs) != 0 {
			t.Fatalf("events while the log refused everything: %s", kinds(evs))
		}
		log.setRefuse(nil)
		time.Sleep(logRetry)
		synctest.Wait()
		wantHolder(t, e, "k", 0, 0)
		if got := recKinds(log.take(t)); got != "expire" {
			t.Fatalf("records %s", got)
		}

		// The release is logged, the grant to the next waiter refused: the
		// key stays free with its waiter first in line, until the log takes
		// the grant.
		h := mustAcquire(t, e, AcquireRequest{Key: "k", Lease: time.Minute})
		x := goAcquire(e, context.Background(), AcquireRequest{Key: "k"})
		synctest.Wait()
		log.setRefuse(func(k RecordKind) bool { return k == RecGrant })
		if err := e.Release("k", h.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		wantHolder(t, e, "k", 0, 1)
		parked(t, "the waiter whose grant the log refused", x)
		log.setRefuse(nil)
		time.Sleep(logRetry)
		synctest.Wait()
		r := answered(t, "x", x)
		if r.err != nil {
			t.Fatalf("the waiter once the log takes its grant: %v", r.err)
		}
		wantHolder(t, e, "k", r.g.Token, 0)
	})
}

// No answer before the record of its change is written: Acquire, Release
// and Renew wait for their own record, a waiter granted by another's
// release for its grant's. A grant the log cannot write is released again
// and answered ErrUnavailable.
func TestAnswerWaitsForTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memLog{}
		e := newEngine(t, Config{Shards: 1, Log: log})
		defer e.Close()
		open := log.hold()
		a := goAcquire(e, context.Background(), AcquireRequest{Key: "k", Lease: time.Minute})
		synctest.Wait()
		parked(t, "the acquire whose grant is not written yet", a)
		open()
		synctest.Wait()
		g := answered(t, "a", a)
		if g.err != nil {
			t.Fatal(g.err)
		}
		x := goAcquire(e, context.Background(), AcquireRequest{Key: "k", ID: "x"})
		synctest.Wait()

		open = log.hold()
		rel := make(chan error, 1)
		go func() { rel <- e.Release("k", g.g.Token) }()
		synctest.Wait()
		if len(rel) != 0 {
			t.Fatal("Release answered before its record was written")
		}
		parked(t, "the waiter whose grant is not written yet", x)
		open()
		synctest.Wait()
		if err := <-rel; err != nil {
			t.Fatal(err)
		}
		xg := answered(t, "x", x)
		if xg.err != nil {
			t.Fatal(xg.err)
		}
		// A repeat of x waits for the grant's record too.
		open = log.hold()
		rep := goAcquire(e, context.Background(), AcquireRequest{Key: "k", ID: "x"})
		ren := make(chan error, 1)
		go func() { _, err := e.Renew("k", xg.g.Token, 0); ren <- err }()
		synctest.Wait()
		parked(t, "the repeat", rep)
		if len(ren) != 0 {
			t.Fatal("Renew answered before its record was written")
		}
		open()
		synctest.Wait()
		if r := answered(t, "rep", rep); r.err != nil || r.g.Token != xg.g.Token {
			t.Fatalf("repeat: %+v %v", r.g, r.err)
		}
		if err := <-ren; err != nil {
			t.Fatal(err)
		}
		if err := e.Release("k", xg.g.Token); err != nil {
			t.Fatal(err)
		}

		// The log took the grant but cannot write it: not answered, and
		// the grant is released again.
		h := mustAcquire(t, e, AcquireRequest{Key: "h", Lease: time.Minute})
		log.mu.Lock()
		log.waitErr = errDiskFull
		log.mu.Unlock()
		_, err := e.Acquire(context.Background(), AcquireRequest{Key: "k2"})
		wantErr(t, "acquire whose grant could not be written", err, ErrUnavailable)
		if errors.Is(err, ErrNotWritten) {
			t.Fatalf("acquire whose grant could not be written: %v; want ErrUnavailable, not ErrNotWritten (nothing was granted)", err)
		}
		// A renewal or release it took but cannot write stands in
		// memory: ErrNotWritten, the outcome unknown to the caller.
		_, err = e.Renew("h", h.Token, 2*time.Minute)
		wantErr(t, "renew whose record could not be written", err, ErrNotWritten)
		wantErr(t, "release whose record could not be written", e.Release("h", h.Token), ErrNotWritten)
		log.mu.Lock()
		log.waitErr = nil
		log.mu.Unlock()
		wantHolder(t, e, "k2", 0, 0)
		wantHolder(t, e, "h", 0, 0)
	})
}

// A grant the log took but cannot write is released again whichever
// holder slot it took: a second shared holder, or a semaphore's second
// holder, is not left holding (unknown to anyone) until its lease ends.
func TestUnwrittenGrantInAFurtherSlotIsReleased(t *testing.T) {
	for _, c := range []struct {
		name string
		req  AcquireRequest
	}{
		{"shared", AcquireRequest{Key: "k", Lease: time.Minute, Mode: Shared}},
		{"semaphore", AcquireRequest{Key: "k", Lease: time.Minute, Limit: 2}},
		{"shared with id", AcquireRequest{Key: "k", Lease: time.Minute, Mode: Shared, ID: "second"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			log := &memLog{}
			e := newEngine(t, Config{Shards: 1, Log: log})
			defer e.Close()
			first := c.req
			first.ID = ""
			g := mustAcquire(t, e, first)
			log.mu.Lock()
			log.waitErr = errDiskFull
			log.mu.Unlock()
			_, err := e.Acquire(context.Background(), c.req)
			wantErr(t, "second acquire whose grant could not be written", err, ErrUnavailable)
			log.mu.Lock()
			log.waitErr = nil
			log.mu.Unlock()
			st, err := e.Status("k")
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Holders) != 1 || st.Holders[0].Token != g.Token {
				t.Fatalf("holders %+v; want only the first grant, %d (the unwritten grant still holds)", st.Holders, g.Token)
			}
		})
	}
}

// A wait that runs out is a change (RecTimeout: the waiter leaves the
// queue, and its ID answers 408 for the retention period): its 408 is
// answered only once the record is written, to the waiter and to a
// repeat of its ID. Answered before, a crash could drop the record: the
// node would come back with the waiter still queued, and grant the lock
// to the ID that was told "timeout".
func TestTimeoutWaitsForTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memLog{}
		e := newEngine(t, Config{Shards: 1, Log: log})
		defer e.Close()
		mustAcquire(t, e, AcquireRequest{Key: "k", Lease: time.Hour})
		w := goAcquire(e, context.Background(), AcquireRequest{Key: "k", ID: "w", Wait: time.Second})
		synctest.Wait()
		open := log.hold()
		time.Sleep(time.Second)
		synctest.Wait()
		parked(t, "the waiter whose timeout is not written yet", w)
		rep := goAcquire(e, context.Background(), AcquireRequest{Key: "k", ID: "w"})
		synctest.Wait()
		parked(t, "a repeat of the ID whose timeout is not written yet", rep)
		open()
		synctest.Wait()
		wantErr(t, "the waiter", answered(t, "w", w).err, ErrTimeout)
		wantErr(t, "the repeat", answered(t, "rep", rep).err, ErrTimeout)
	})
}

// A grant or a renewal whose answer waited for the log while the engine
// stepped down (Demote, Diverged: its state is discarded) is refused with
// ErrReplaced, also once the engine is the active again, unless the
// active state holds the grant; across a Demote alone (a handoff, whose
// successor has the state) both are answered.
func TestAnswerAcrossADivergenceIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memLog{}
		e := newEngine(t, Config{Shards: 1, Log: log})
		defer e.Close()
		h := mustAcquire(t, e, AcquireRequest{Key: "h", Lease: time.Minute})

		// Across a handoff: answered.
		open := log.hold()
		a := goAcquire(e, context.Background(), AcquireRequest{Key: "a", Lease: time.Minute})
		ren := make(chan error, 1)
		go func() { _, err := e.Renew("h", h.Token, 0); ren <- err }()
		synctest.Wait()
		e.Demote()
		open()
		synctest.Wait()
		if r := answered(t, "a", a); r.err != nil {
			t.Fatalf("a grant answered across a handoff: %v", r.err)
		}
		if err := <-ren; err != nil {
			t.Fatalf("a renewal answered across a handoff: %v", err)
		}
		e.Promote(Handoff)

		// Across a step-down, the engine a standby still: refused.
		open = log.hold()
		b := goAcquire(e, context.Background(), AcquireRequest{Key: "b", Lease: time.Minute})
		go func() { _, err := e.Renew("h", h.Token, 0); ren <- err }()
		synctest.Wait()
		e.Demote()
		e.Diverged()
		open()
		synctest.Wait()
		wantErr(t, "a grant answered after a step-down", answered(t, "b", b).err, ErrReplaced)
		wantErr(t, "a renewal answered after a step-down", <-ren, ErrReplaced)

		// Across a step-down and a promotion: refused, unless the state
		// holds the grant (here it does: nothing replaced it).
		e.Promote(Handoff)
		open = log.hold()
		c := goAcquire(e, context.Background(), AcquireRequest{Key: "c", Lease: time.Minute})
		go func() { _, err := e.Renew("h", h.Token, 0); ren <- err }()
		synctest.Wait()
		e.Demote()
		e.Diverged()
		e.Promote(Handoff)
		open()
		synctest.Wait()
		if r := answered(t, "c", c); r.err != nil {
			t.Fatalf("a grant the active state holds, answered after a step-down and a promotion: %v", r.err)
		}
		wantErr(t, "a renewal answered after a step-down and a promotion", <-ren, ErrReplaced)
		e.Demote()
		e.Reset()
		e.Promote(Handoff)
		open = log.hold()
		d := goAcquire(e, context.Background(), AcquireRequest{Key: "d", Lease: time.Minute})
		synctest.Wait()
		e.Demote()
		e.Reset()
		e.Promote(Handoff)
		open()
		synctest.Wait()
		wantErr(t, "a grant the replaced state lacks", answered(t, "d", d).err, ErrReplaced)
	})
}

// gatherLog is a memLog that is also a GatheredWaiter: it notes the
// indexes waited for by WaitGathered and by Wait.
type gatherLog struct {
	memLog
	waitsMu          sync.Mutex
	waited, gathered []uint64
}

func (l *gatherLog) Wait(idx uint64) error {
	l.waitsMu.Lock()
	l.waited = append(l.waited, idx)
	l.waitsMu.Unlock()
	return l.memLog.Wait(idx)
}

func (l *gatherLog) WaitGathered(idx uint64) error {
	l.waitsMu.Lock()
	l.gathered = append(l.gathered, idx)
	l.waitsMu.Unlock()
	return l.memLog.Wait(idx)
}

// waits returns and forgets the indexes waited for so far.
func (l *gatherLog) waits() (waited, gathered []uint64) {
	l.waitsMu.Lock()
	defer l.waitsMu.Unlock()
	waited, gathered = l.waited, l.gathered
	l.waited, l.gathered = nil, nil
	return waited, gathered
}

// A release that hands the lock on waits for its record as a gathered
// batch (the waiters it granted were appended with it, and their requests
// are woken to wait for the same write): the write starts at once,
// instead of letting every woken request run first only to find it not
// done (Wait's yield), which in a read/write lock's batch of readers put
// one more wake-up before each answer (issue 14: the last reader's
// handoff). It waits for the last record of its step, so that the grants
// are written too when it returns (Engine.ReleaseLogged). A release with
// nobody to hand on to waits as before.
func TestReleaseThatHandsOnWaitsGathered(t *testing.T) {
	log := &gatherLog{}
	e := newEngine(t, Config{Shards: 1, Log: log})
	defer e.Close()
	w := mustAcquire(t, e, AcquireRequest{Key: "rw", Lease: time.Minute, Limit: 3})
	var granted []AcquireResult
	for range 2 {
		o, p := e.AcquireFunc(AcquireRequest{Key: "rw", Lease: time.Minute, Mode: Shared},
			func(o AcquireResult) bool { granted = append(granted, o); return true })
		if p == nil {
			t.Fatalf("a shared acquire behind the exclusive holder was answered at once: %+v", o)
		}
	}
	log.waits()
	relIdx := uint64(len(log.recs)) + 1
	if err := e.Release("rw", w.Token); err != nil {
		t.Fatal(err)
	}
	if len(granted) != 2 {
		t.Fatalf("%d readers granted by the release, want 2", len(granted))
	}
	// It waits once, for the last record of its step (the grants follow
	// the release's): the grants it made are written when it returns.
	if waited, gathered := log.waits(); len(waited) != 0 || len(gathered) != 1 || gathered[0] != relIdx+2 {
		t.Fatalf("the release that granted 2 readers waited with Wait %v and WaitGathered %v; want WaitGathered [%d]", waited, gathered, relIdx+2)
	}
	var tokens []uint64
	for _, o := range granted {
		g, err := o.Settle()
		if err != nil {
			t.Fatal(err)
		}
		tokens = append(tokens, g.Token)
	}
	log.waits()
	if err := e.Release("rw", tokens[0]); err != nil {
		t.Fatal(err)
	}
	if waited, gathered := log.waits(); len(waited) != 1 || len(gathered) != 0 {
		t.Fatalf("a release with nobody to hand on to waited with Wait %v and WaitGathered %v; want one Wait", waited, gathered)
	}
}

// A Log whose Wait says the state was replaced meanwhile (an error
// wrapping ErrReplaced: cluster.SyncLog when the node stepped down while
// the grant waited for its acknowledgements) does not make the grant
// undeliverable: the generation rule decides, as for any answer across a
// step-down. A grant the state of the node, active again, still holds is
// delivered, and stays held; one it does not hold is ErrReplaced.
func TestWaitSayingReplacedLeavesTheGrantToTheGenerationRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memLog{}
		e := newEngine(t, Config{Shards: 1, Log: log})
		defer e.Close()
		log.mu.Lock()
		log.waitErr = fmt.Errorf("stepped down while waiting: %w", ErrReplaced)
		log.mu.Unlock()
		open := log.hold()
		c := goAcquire(e, context.Background(), AcquireRequest{Key: "c", Lease: time.Minute})
		synctest.Wait()
		e.Demote()
		e.Diverged()
		e.Promote(Handoff)
		open()
		synctest.Wait()
		r := answered(t, "c", c)
		if r.err != nil {
			t.Fatalf("a grant the active state holds, its wait answered replaced: %v, want it delivered", r.err)
		}
		if st := peekStatus(e, "c"); st.Holder == nil || st.Holder.Token != r.g.Token {
			t.Fatalf("after the delivered grant: %+v, want held by %d", st.Holder, r.g.Token)
		}

		open = log.hold()
		d := goAcquire(e, context.Background(), AcquireRequest{Key: "d", Lease: time.Minute})
		synctest.Wait()
		e.Demote()
		e.Diverged()
		open()
		synctest.Wait()
		wantErr(t, "a grant answered on a node that stepped down", answered(t, "d", d).err, ErrReplaced)
	})
}

// A grant whose record the log took but could not write is answered
// ErrUnavailable ("nothing was changed"), and its take-back is a release
// the log must take too. A failed log refuses every append (wal.Log), so
// the release was dropped and the grant stood unknown to anyone until its
// lease ended; once the disk had room again, the log wrote the pending
// grant record: a holder nobody was told of, for the whole lease (an hour
// with lease=3600), also after a restart. The take-back is tried again
// until the log takes it; a repeat of the waiter ID answered with the
// grant in between keeps it.
func TestUnwrittenGrantIsReleasedOnceTheLogTakesAppendsAgain(t *testing.T) {
	for _, c := range []struct {
		name   string
		id     string
		repeat bool // a repeat of the ID is answered before the retry
	}{
		{"without id", "", false},
		{"with id", "w", false},
		{"with id, repeated after the recovery", "w", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				log := &memLog{}
				e := newEngine(t, Config{Shards: 1, Log: log})
				defer e.Close()
				req := AcquireRequest{Key: "k", Lease: time.Hour, ID: c.id}
				// The disk fills while the grant's record waits to be
				// written: the write fails, and from then on the log
				// refuses every append until it can write again.
				open := log.hold()
				log.mu.Lock()
				log.waitErr = errDiskFull
				log.mu.Unlock()
				a := goAcquire(e, context.Background(), req)
				synctest.Wait()
				parked(t, "the acquire whose grant is not written yet", a)
				log.setRefuse(func(RecordKind) bool { return true })
				open()
				synctest.Wait()
				wantErr(t, "acquire whose grant could not be written", answered(t, "a", a).err, ErrUnavailable)
				// Room again: the pending grant record is written.
				log.mu.Lock()
				log.waitErr, log.refuse = nil, nil
				log.mu.Unlock()
				if c.repeat {
					r := mustAcquire(t, e, req)
					time.Sleep(time.Second)
					synctest.Wait()
					wantHolder(t, e, "k", r.Token, 0)
					return
				}
				time.Sleep(time.Second)
				synctest.Wait()
				wantHolder(t, e, "k", 0, 0)
				if got := recKinds(log.take(t)); got != "grant,release" {
					t.Fatalf("log %s; want grant,release (the unanswered grant taken back)", got)
				}
				g := mustAcquire(t, e, req)
				if err := e.Release("k", g.Token); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
