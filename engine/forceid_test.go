package engine

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
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

// TestForceReleaseNotHeldRepeatedUnderItsIDChangesNothing: a force under
// an ID that finds nobody holding the key is answered ErrNotHeld, and that
// answer is remembered under the ID as a force's is: its client may never
// read it (the connection broke) and retry under the same ID after someone
// else took the key; the repeat is answered ErrNotHeld again and releases
// nobody (breaker Q, 2026-12-06: it released the new holder), on this
// engine, after the log's replay and after a snapshot. The ID stays the
// force's: an acquire under it is ErrKeyReused.
func TestForceReleaseNotHeldRepeatedUnderItsIDChangesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memLog{}
		e := newEngine(t, Config{Log: log})
		// A full disk: the answer cannot be remembered, so it is not
		// ErrNotHeld (its repeat could not be answered the same), and
		// nothing is remembered under the ID.
		log.setRefuse(func(k RecordKind) bool { return k == RecOutcome })
		if err := e.ForceReleaseID("k", "op-1"); err == nil || errors.Is(err, ErrNotHeld) {
			t.Fatalf("force on a free key, its record refused: %v, want the log's error", err)
		}
		if s := e.shard("k"); s.tickets[ticketKey{"k", "op-1"}] != nil {
			t.Fatal("the ID is remembered although its record was refused")
		}
		log.setRefuse(nil)
		if err := e.ForceReleaseID("k", "op-1"); !errors.Is(err, ErrNotHeld) {
			t.Fatalf("force on a free key: %v, want ErrNotHeld", err)
		}
		g := mustAcquire(t, e, AcquireRequest{Key: "k", Lease: time.Hour})
		check := func(what string, r *Engine) {
			t.Helper()
			if err := r.ForceReleaseID("k", "op-1"); !errors.Is(err, ErrNotHeld) {
				t.Errorf("%s: the force repeated under its ID: %v, want ErrNotHeld (answered as the first)", what, err)
			}
			if st, _ := r.Status("k"); st.Holder == nil || st.Holder.Token != g.Token {
				t.Errorf("%s: holder %+v after the repeat; want the one that came between (token %d)", what, st.Holder, g.Token)
			}
			var kr *KeyReusedError
			if _, err := r.Acquire(context.Background(), AcquireRequest{Key: "k", ID: "op-1", Lease: time.Minute, Wait: time.Millisecond}); !errors.As(err, &kr) || kr.Field != "Idempotency-Key" {
				t.Errorf("%s: acquire under the force's ID: %v, want a KeyReusedError naming Idempotency-Key", what, err)
			}
		}
		check("on the node", e)
		replayed := newEngine(t, Config{Standby: true})
		defer replayed.Close()
		replayLog(t, replayed, log)
		snap := copyBySnapshot(t, e)
		defer snap.Close()
		// Another ID is another force; the remembered one ends with
		// Retention.
		if err := e.ForceReleaseID("k", "op-2"); err != nil {
			t.Fatalf("a force under another ID: %v", err)
		}
		e.Demote()
		e.Close()
		replayed.Promote(Failover)
		check("after replay", replayed)
		snap.Promote(Failover)
		check("after a snapshot", snap)
		time.Sleep(snap.cfg.Retention + time.Second)
		if err := snap.ForceReleaseID("k", "op-1"); err != nil {
			t.Errorf("a force under the ID once Retention passed: %v, want nil (a new force releases the holder)", err)
		}
	})
}
