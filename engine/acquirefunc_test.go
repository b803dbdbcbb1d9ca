package engine

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// funcWaiter collects what AcquireFunc's done receives.
type funcWaiter struct {
	mu   sync.Mutex
	got  []AcquireResult
	take bool // what done answers
}

func (f *funcWaiter) done(o AcquireResult) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, o)
	return f.take
}

func (f *funcWaiter) results() []AcquireResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]AcquireResult(nil), f.got...)
}

func TestAcquireFuncGrantsAtOnceWithoutDone(t *testing.T) {
	e := newEngine(t, Config{DataDir: ""})
	defer e.Close()
	f := &funcWaiter{take: true}
	o, p := e.AcquireFunc(AcquireRequest{Key: "k"}, f.done)
	if p != nil {
		t.Fatal("a free key's acquire was queued")
	}
	g, err := o.Settle()
	if err != nil || g.Token == 0 || g.Key != "k" {
		t.Fatalf("Settle() = %+v, %v; want a grant of k", g, err)
	}
	if len(f.results()) != 0 {
		t.Fatal("done was called for an acquire that ended at once")
	}
	o, p = e.AcquireFunc(AcquireRequest{Key: ""}, f.done)
	var ae *ArgError
	if p != nil || !errors.As(o.Err(), &ae) || ae.Field != "key" {
		t.Fatalf("empty key: %v, %v; want an *ArgError for key", o.Err(), p)
	}
	if o, p := e.AcquireFunc(AcquireRequest{Key: "x"}, nil); p != nil || o.Err() == nil {
		t.Fatal("a nil done was accepted")
	}
	wantCounts(t, e, 1, 0)
}

func TestAcquireFuncParksAndIsHandedTheLock(t *testing.T) {
	e := newEngine(t, Config{})
	defer e.Close()
	g1 := mustAcquire(t, e, AcquireRequest{Key: "k"})
	f := &funcWaiter{take: true}
	_, p := e.AcquireFunc(AcquireRequest{Key: "k", ID: "w1"}, f.done)
	if p == nil {
		t.Fatal("an acquire of a held key was not queued")
	}
	wantCounts(t, e, 1, 1)
	if len(f.results()) != 0 {
		t.Fatal("done was called before the release")
	}
	if err := e.Release("k", g1.Token); err != nil {
		t.Fatal(err)
	}
	rs := f.results()
	if len(rs) != 1 {
		t.Fatalf("done called %d times, want once", len(rs))
	}
	g2, err := rs[0].Settle()
	if err != nil || g2.Token <= g1.Token {
		t.Fatalf("handed %+v, %v; want a grant above token %d", g2, err, g1.Token)
	}
	wantHolder(t, e, "k", g2.Token, 0)
	if p.Cancel() {
		t.Fatal("Cancel after done reported true")
	}
	// A repeat with the same id gets the same grant.
	o, p2 := e.AcquireFunc(AcquireRequest{Key: "k", ID: "w1"}, f.done)
	if g, err := o.Settle(); p2 != nil || err != nil || g.Token != g2.Token {
		t.Fatalf("repeat: %+v, %v; want token %d", g, err, g2.Token)
	}
}

func TestAcquireFuncCancelLeavesTheQueue(t *testing.T) {
	e := newEngine(t, Config{})
	defer e.Close()
	g1 := mustAcquire(t, e, AcquireRequest{Key: "k"})
	f := &funcWaiter{take: true}
	_, p := e.AcquireFunc(AcquireRequest{Key: "k"}, f.done)
	ch := goAcquire(e, t.Context(), AcquireRequest{Key: "k"})
	for {
		if _, w := e.Counts(); w == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if !p.Cancel() {
		t.Fatal("Cancel of a queued acquire reported false")
	}
	wantHolder(t, e, "k", g1.Token, 1)
	if err := e.Release("k", g1.Token); err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatalf("the waiter behind the cancelled one: %v", r.err)
	}
	if len(f.results()) != 0 {
		t.Fatal("done was called after Cancel")
	}
}

func TestAcquireFuncUntakenGrantGoesToTheNext(t *testing.T) {
	e := newEngine(t, Config{})
	defer e.Close()
	g1 := mustAcquire(t, e, AcquireRequest{Key: "k"})
	gone := &funcWaiter{take: false} // a client that went away
	_, _ = e.AcquireFunc(AcquireRequest{Key: "k", ID: "gone"}, gone.done)
	_, _ = e.AcquireFunc(AcquireRequest{Key: "k", ID: "gone2"}, gone.done)
	next := &funcWaiter{take: true}
	_, _ = e.AcquireFunc(AcquireRequest{Key: "k"}, next.done)
	if err := e.Release("k", g1.Token); err != nil {
		t.Fatal(err)
	}
	if n := len(gone.results()); n != 2 {
		t.Fatalf("the gone waiters' done called %d times, want 2", n)
	}
	rs := next.results()
	if len(rs) != 1 {
		t.Fatalf("the next waiter's done called %d times, want 1", len(rs))
	}
	g, err := rs[0].Settle()
	if err != nil {
		t.Fatal(err)
	}
	wantHolder(t, e, "k", g.Token, 0)
	// The untaken grant's waiter ID is forgotten: a repeat queues afresh.
	again := &funcWaiter{take: true}
	if _, p := e.AcquireFunc(AcquireRequest{Key: "k", ID: "gone"}, again.done); p == nil {
		t.Fatal("a repeat of an untaken grant's id did not queue afresh")
	}
}

func TestAcquireFuncTimeoutAndSuperseded(t *testing.T) {
	e := newEngine(t, Config{})
	defer e.Close()
	mustAcquire(t, e, AcquireRequest{Key: "k"})
	first := &funcWaiter{take: true}
	_, p1 := e.AcquireFunc(AcquireRequest{Key: "k", ID: "a", Wait: time.Hour}, first.done)
	second := &funcWaiter{take: true}
	_, p2 := e.AcquireFunc(AcquireRequest{Key: "k", ID: "a", Wait: time.Hour}, second.done)
	if p1 == nil || p2 == nil {
		t.Fatal("not queued")
	}
	if rs := first.results(); len(rs) != 1 || !errors.Is(rs[0].Err(), ErrSuperseded) {
		t.Fatalf("first request: %v; want ErrSuperseded", rs)
	}
	if p1.Cancel() {
		t.Fatal("Cancel of a superseded request reported true")
	}
	wantCounts(t, e, 1, 1)
	timed := &funcWaiter{take: true}
	_, _ = e.AcquireFunc(AcquireRequest{Key: "k", Wait: time.Millisecond}, timed.done)
	deadline := time.Now().Add(20 * time.Second)
	for len(timed.results()) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if rs := timed.results(); len(rs) != 1 || !errors.Is(rs[0].Err(), ErrTimeout) {
		t.Fatalf("short wait: %v; want ErrTimeout", rs)
	}
	if !p2.Cancel() {
		t.Fatal("Cancel of the queued repeat reported false")
	}
	wantCounts(t, e, 1, 0)
}

// TestNoWaitChangesAreMadeBeforeTheLogWrites: ReleaseNoWait and
// RenewNoWait make the change (the lock handed on, the lease renewed) and
// return its log index without waiting for the log; WaitLogged waits, and
// reports the log's failure as ErrUnavailable. AcquireResult.LogIndex is
// the grant's index, which Settle waits for.
func TestNoWaitChangesAreMadeBeforeTheLogWrites(t *testing.T) {
	log := &memLog{}
	e := newEngine(t, Config{Log: log})
	defer e.Close()
	g1 := mustAcquire(t, e, AcquireRequest{Key: "k"})
	next := &funcWaiter{take: true}
	if _, p := e.AcquireFunc(AcquireRequest{Key: "k"}, next.done); p == nil {
		t.Fatal("not queued")
	}
	release := log.hold()
	idx, _, err := e.ReleaseNoWait("k", g1.Token)
	if err != nil || idx == 0 {
		t.Fatalf("ReleaseNoWait = %d, %v; want an index", idx, err)
	}
	rs := next.results()
	if len(rs) != 1 || rs[0].Err() != nil || rs[0].LogIndex() <= idx {
		t.Fatalf("the next waiter got %v; want its grant, logged after index %d", rs, idx)
	}
	st := peekStatus(e, "k")
	if st.Holder == nil || st.Holder.Token == g1.Token {
		t.Fatal("the lock was not handed on before the log wrote the release")
	}
	g2 := st.Holder
	_, ridx, err := e.RenewNoWait("k", g2.Token, time.Minute)
	if err != nil || ridx <= rs[0].LogIndex() {
		t.Fatalf("RenewNoWait = %d, %v", ridx, err)
	}
	waited := make(chan error, 1)
	go func() { waited <- e.WaitLogged(ridx) }()
	select {
	case <-waited:
		t.Fatal("WaitLogged returned while the log held its writes")
	case <-time.After(20 * time.Millisecond):
	}
	release()
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	if g, err := rs[0].Settle(); err != nil || g.Token != g2.Token {
		t.Fatalf("Settle = %+v, %v; want token %d", g, err, g2.Token)
	}
	log.mu.Lock()
	log.waitErr = errDiskFull
	log.mu.Unlock()
	if err := e.WaitLogged(ridx); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("WaitLogged with a failing log = %v; want ErrUnavailable", err)
	}
	if err := e.WaitLogged(0); err != nil {
		t.Fatalf("WaitLogged(0) = %v", err)
	}
}

// receiverWaiter is a funcWaiter as an engine.Receiver (AcquireTo).
type receiverWaiter struct{ funcWaiter }

func (r *receiverWaiter) Done(o AcquireResult) bool { return r.done(o) }

// AcquireTo is AcquireFunc with a Receiver: its Done is handed the lock
// as done would be, and passing a pointer allocates nothing more than
// the acquire does (a method value as done allocates a closure per call).
func TestAcquireToParksAndIsHandedTheLock(t *testing.T) {
	e := newEngine(t, Config{})
	defer e.Close()
	g1 := mustAcquire(t, e, AcquireRequest{Key: "k"})
	rw := &receiverWaiter{funcWaiter{take: true}}
	if _, p := e.AcquireTo(AcquireRequest{Key: "k", ID: "w1"}, rw); p == nil {
		t.Fatal("an acquire of a held key was not queued")
	}
	if err := e.Release("k", g1.Token); err != nil {
		t.Fatal(err)
	}
	rs := rw.results()
	if len(rs) != 1 {
		t.Fatalf("Done called %d times, want once", len(rs))
	}
	if g2, err := rs[0].Settle(); err != nil || g2.Token <= g1.Token {
		t.Fatalf("handed %+v, %v; want a grant above token %d", g2, err, g1.Token)
	}
	if o, p := e.AcquireTo(AcquireRequest{Key: "x"}, nil); p != nil || o.Err() == nil {
		t.Fatal("a nil Receiver was accepted")
	}
	// A free key's acquire and release: the engine's own allocations,
	// the same through either call.
	cycle := func(acq func(AcquireRequest) AcquireResult) float64 {
		return testing.AllocsPerRun(100, func() {
			g, err := acq(AcquireRequest{Key: "free"}).Settle()
			if err != nil {
				t.Fatal(err)
			}
			if err := e.Release("free", g.Token); err != nil {
				t.Fatal(err)
			}
		})
	}
	to := cycle(func(r AcquireRequest) AcquireResult { o, _ := e.AcquireTo(r, rw); return o })
	fn := cycle(func(r AcquireRequest) AcquireResult { o, _ := e.AcquireFunc(r, rw.done); return o })
	if to >= fn {
		t.Errorf("allocations per cycle: AcquireTo %v, AcquireFunc with a method value %v; want fewer", to, fn)
	}
}
