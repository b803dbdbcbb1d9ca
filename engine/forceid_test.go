package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestForceReleaseRepeatedUnderItsIDChangesNothing: a forced release is
// not safe to repeat (the repeat releases the waiters the first one handed
// the lock to), and its answer can be lost: a client retrying it, or a
// browser sending a DELETE again on a broken keep-alive connection. Under
// an ID (an Idempotency-Key), the force is remembered for Retention, as a
// waiter ID's outcome is: a repeat is answered as the first was and
// changes nothing, also once the key is free; the ID is the force's alone
// (an acquire under it, or a force under an acquire's ID, is
// ErrKeyReused, naming Idempotency-Key).
func TestForceReleaseRepeatedUnderItsIDChangesNothing(t *testing.T) {
	e := newEngine(t, Config{})
	defer e.Close()
	mustAcquire(t, e, AcquireRequest{Key: "k", Lease: time.Minute})
	waiter := goAcquire(e, context.Background(), AcquireRequest{Key: "k", ID: "w1", Lease: time.Minute})
	for st, _ := e.Status("k"); st.Waiters != 1; st, _ = e.Status("k") {
		time.Sleep(time.Millisecond)
	}
	if err := e.ForceReleaseID("k", "f1"); err != nil {
		t.Fatalf("force: %v", err)
	}
	r := <-waiter
	if r.err != nil {
		t.Fatalf("the waiter: %v", r.err)
	}
	if err := e.ForceReleaseID("k", "f1"); err != nil {
		t.Fatalf("the force repeated under its ID: %v, want nil (answered as the first)", err)
	}
	if st, _ := e.Status("k"); st.Holder == nil || st.Holder.Token != r.g.Token {
		t.Fatalf("holder %+v after the repeat; want the waiter the first force granted (token %d)", st.Holder, r.g.Token)
	}
	// Another ID is another force.
	if err := e.ForceReleaseID("k", "f2"); err != nil {
		t.Fatalf("a second force under another ID: %v", err)
	}
	if st, _ := e.Status("k"); st.Holder != nil {
		t.Fatalf("holder %+v after a force under a new ID", st.Holder)
	}
	// A repeat once the key is free is answered as the first, not 404.
	for _, id := range []string{"f1", "f2"} {
		if err := e.ForceReleaseID("k", id); err != nil {
			t.Errorf("repeat of %s on a free key: %v, want nil", id, err)
		}
	}
	if err := e.ForceReleaseID("k", "f3"); !errors.Is(err, ErrNotHeld) {
		t.Errorf("a new force on a free key: %v, want ErrNotHeld", err)
	}
	// The ID is the force's: an acquire under it is refused, and nothing
	// is granted; a force under an acquire's ID is refused, and nothing
	// is released.
	var kr *KeyReusedError
	if _, err := e.Acquire(context.Background(), AcquireRequest{Key: "k", ID: "f1", Lease: time.Minute}); !errors.As(err, &kr) || kr.Field != "Idempotency-Key" {
		t.Errorf("acquire under a force's ID: %v, want a KeyReusedError naming Idempotency-Key", err)
	}
	if st, _ := e.Status("k"); st.Holder != nil {
		t.Errorf("holder %+v after an acquire under a force's ID", st.Holder)
	}
	g := mustAcquire(t, e, AcquireRequest{Key: "k", ID: "a1", Lease: time.Minute})
	if err := e.ForceReleaseID("k", "a1"); !errors.As(err, &kr) || kr.Field != "Idempotency-Key" {
		t.Errorf("force under an acquire's ID: %v, want a KeyReusedError naming Idempotency-Key", err)
	}
	if st, _ := e.Status("k"); st.Holder == nil || st.Holder.Token != g.Token {
		t.Errorf("holder %+v after a force under an acquire's ID; want token %d", st.Holder, g.Token)
	}
	var ae *ArgError
	if err := e.ForceReleaseID("k", "bad id\n"); !errors.As(err, &ae) || ae.Field != "Idempotency-Key" {
		t.Errorf("force under an invalid ID: %v, want an ArgError naming Idempotency-Key", err)
	}
	if st, _ := e.Status("k"); st.Holder == nil || st.Holder.Token != g.Token {
		t.Errorf("holder %+v after a force under an invalid ID; want token %d", st.Holder, g.Token)
	}
}
