package engine

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// first is the acquire every case below repeats: a waiter ID's request
// with every parameter a repeat must match set.
var first = AcquireRequest{Key: "k", ID: "k1", Lease: 5 * time.Second, Owner: "job-1", Mode: Shared, Limit: 2}

// others are requests under first's ID that are not repeats of it, with
// the field each must be refused for.
var others = []struct {
	field string
	req   func(AcquireRequest) AcquireRequest
}{
	{"mode", func(r AcquireRequest) AcquireRequest { r.Mode = Exclusive; return r }},
	{"limit", func(r AcquireRequest) AcquireRequest { r.Limit = 3; return r }},
	{"limit", func(r AcquireRequest) AcquireRequest { r.Limit = 1; return r }},
	{"lease", func(r AcquireRequest) AcquireRequest { r.Lease = 6 * time.Second; return r }},
	{"lease", func(r AcquireRequest) AcquireRequest { r.Lease = 0; return r }}, // lease_default
	{"owner", func(r AcquireRequest) AcquireRequest { r.Owner = "job-2"; return r }},
	{"owner", func(r AcquireRequest) AcquireRequest { r.Owner = ""; return r }},
}

// wantReused checks that err refuses a reused ID, naming field.
func wantReused(t *testing.T, what string, err error, field string) {
	t.Helper()
	var kr *KeyReusedError
	if !errors.As(err, &kr) || !errors.Is(err, ErrKeyReused) || kr.Field != field {
		t.Fatalf("%s: error %v; want ErrKeyReused naming %q", what, err, field)
	}
}

// An ID sent again with another mode, limit, lease or owner is not a
// repeat (SPEC section 2, "Waiter identity"; the IETF Idempotency-Key
// draft, section 2.7): it is refused naming the field, and the first
// request's grant or place stays as it was, whatever state its ticket is
// in. A repeat may change its wait, and leave the limit out. (Before, each
// of these got the first request's outcome: its token, in another mode.)
func TestIDReusedWithOtherParametersIsRefused(t *testing.T) {
	for _, state := range []string{"granted", "waiting", "timed out", "ended"} {
		t.Run(state, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEngine(t, Config{LeaseDefault: 10 * time.Second})
				defer e.Close()
				var g Grant
				var parkedFirst <-chan result
				switch state {
				case "granted":
					g = mustAcquire(t, e, first)
				case "waiting", "timed out":
					h := mustAcquire(t, e, AcquireRequest{Key: "k", Limit: 2, Lease: time.Hour})
					req := first
					if state == "timed out" {
						req.Wait = time.Second
					}
					parkedFirst = goAcquire(e, context.Background(), req)
					synctest.Wait()
					if state == "timed out" {
						time.Sleep(time.Second)
						synctest.Wait()
						wantErr(t, "first", answered(t, "first", parkedFirst).err, ErrTimeout)
						parkedFirst = nil
					}
					g = h
				case "ended":
					f := mustAcquire(t, e, first)
					if err := e.Release("k", f.Token); err != nil {
						t.Fatal(err)
					}
				}
				tok := e.LastToken()
				before, _ := e.Status("k")
				for _, o := range others {
					_, err := e.Acquire(context.Background(), o.req(first))
					wantReused(t, o.field, err, o.field)
				}
				synctest.Wait()
				if parkedFirst != nil {
					parked(t, "the first request, after the refusals", parkedFirst)
				}
				after, _ := e.Status("k")
				if e.LastToken() != tok || after.Waiters != before.Waiters || (after.Holder == nil) != (before.Holder == nil) {
					t.Fatalf("state changed by refused requests: %+v -> %+v, last token %d -> %d", before, after, tok, e.LastToken())
				}
				// The same request, with another wait and no limit, is a repeat.
				rep := first
				rep.Wait, rep.Limit = time.Minute, 0
				switch state {
				case "granted":
					if g2 := mustAcquire(t, e, rep); g2 != g {
						t.Fatalf("repeat = %+v, want %+v", g2, g)
					}
				case "waiting":
					again := goAcquire(e, context.Background(), rep)
					synctest.Wait()
					wantErr(t, "first", answered(t, "first", parkedFirst).err, ErrSuperseded)
					parked(t, "the repeat", again)
					if err := e.Release("k", g.Token); err != nil {
						t.Fatal(err)
					}
					synctest.Wait()
					if r := answered(t, "the repeat", again); r.err != nil || r.g.Mode != Shared || r.g.Owner != "job-1" {
						t.Fatalf("the repeat: %+v, %v", r.g, r.err)
					}
				case "timed out":
					_, err := e.Acquire(context.Background(), rep)
					wantErr(t, "repeat", err, ErrTimeout)
				case "ended":
					_, err := e.Acquire(context.Background(), rep)
					wantErr(t, "repeat", err, ErrGrantEnded)
				}
			})
		})
	}
}

// The lease a repeat leaves out is lease_default, and matches a first
// request that named it; a limit named explicitly matches the key's.
func TestIDRepeatMatchesDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEngine(t, Config{LeaseDefault: 10 * time.Second})
		defer e.Close()
		g := mustAcquire(t, e, AcquireRequest{Key: "k", ID: "a"})
		if g2 := mustAcquire(t, e, AcquireRequest{Key: "k", ID: "a", Lease: 10 * time.Second, Limit: 1}); g2 != g {
			t.Fatalf("repeat = %+v, want %+v", g2, g)
		}
	})
}

// What a ticket asked for survives a restart's replay of the log and a
// snapshot (a standby that subscribes late, a compacted log): the snapshot
// carries the fingerprints, since its grant's lease may be a renewal's and
// its remembered outcomes have no owner.
func TestIDReusedAfterReplayAndSnapshot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memLog{}
		e := newEngine(t, Config{Log: log})
		held := first
		g := mustAcquire(t, e, held)
		// Renewed with another lease: the repeat still names the first.
		if _, err := e.Renew("k", g.Token, time.Minute); err != nil {
			t.Fatal(err)
		}
		ended := first
		ended.Key = "ended"
		eg := mustAcquire(t, e, ended)
		if err := e.Release("ended", eg.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		check := func(what string, r *Engine) {
			t.Helper()
			for _, req := range []AcquireRequest{held, ended} {
				for _, o := range others {
					_, err := r.Acquire(context.Background(), o.req(req))
					wantReused(t, what+" "+req.Key, err, o.field)
				}
			}
			if g2 := mustAcquire(t, r, held); g2.Token != g.Token {
				t.Fatalf("%s: repeat got token %d, want %d", what, g2.Token, g.Token)
			}
			_, err := r.Acquire(context.Background(), ended)
			wantErr(t, what+": repeat of the ended grant", err, ErrGrantEnded)
		}

		replayed := newEngine(t, Config{Standby: true})
		defer replayed.Close()
		replayLog(t, replayed, log)
		snap := copyBySnapshot(t, e)
		defer snap.Close()
		e.Demote()
		e.Close()
		replayed.Promote(Failover)
		check("after replay", replayed)
		snap.Promote(Failover)
		check("after a snapshot", snap)
	})
}

// A repeat that names no lease, of an acquire that named none, is a repeat
// on a node whose lease_default differs from the node that took the first
// (a failover between nodes configured apart): what the client sent is
// compared, not the default each node filled in. This holds for a grant
// made at once, a waiter still queued and a waiter granted on a release,
// after the log's replay and after a snapshot. A lease named in one and
// not the other still counts as the same only where it is the answering
// node's default. (The default was compared: 422 lease.)
func TestIDRepeatWithoutLeaseAfterFailoverToAnotherDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memLog{}
		e := newEngine(t, Config{Log: log, LeaseDefault: 10 * time.Second})
		granted := AcquireRequest{Key: "g", ID: "g1"}
		g := mustAcquire(t, e, granted)
		mustAcquire(t, e, AcquireRequest{Key: "q", Lease: time.Hour})
		queued := AcquireRequest{Key: "q", ID: "q1"}
		parkedQ := goAcquire(e, context.Background(), queued)
		h := mustAcquire(t, e, AcquireRequest{Key: "h", Lease: time.Hour})
		handed := AcquireRequest{Key: "h", ID: "h1"}
		parkedH := goAcquire(e, context.Background(), handed)
		synctest.Wait()
		if err := e.Release("h", h.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		hg := answered(t, "the handed-on waiter", parkedH)
		if hg.err != nil {
			t.Fatal(hg.err)
		}
		parked(t, "the queued waiter", parkedQ)

		check := func(what string, r *Engine) {
			t.Helper()
			if g2 := mustAcquire(t, r, granted); g2.Token != g.Token {
				t.Fatalf("%s: repeat of the grant got token %d, want %d", what, g2.Token, g.Token)
			}
			if g2 := mustAcquire(t, r, handed); g2.Token != hg.g.Token {
				t.Fatalf("%s: repeat of the handed-on grant got token %d, want %d", what, g2.Token, hg.g.Token)
			}
			// The queued one's repeat takes its place over: it waits (the
			// holder stays), where a reused key is answered at once.
			ctx, cancel := context.WithCancel(context.Background())
			p := goAcquire(r, ctx, queued)
			synctest.Wait()
			parked(t, what+": repeat of the queued waiter", p)
			cancel()
			synctest.Wait()
			<-p
			// Another lease is another request; the answering node's
			// default is the one the first (none named) comes to here.
			other := granted
			other.Lease = 10 * time.Second
			_, err := r.Acquire(context.Background(), other)
			wantReused(t, what+": a lease of the first node's default", err, "lease")
			other.Lease = 45 * time.Second
			if g2 := mustAcquire(t, r, other); g2.Token != g.Token {
				t.Fatalf("%s: repeat naming this node's default got token %d, want %d", what, g2.Token, g.Token)
			}
		}

		replayed := newEngine(t, Config{Standby: true, LeaseDefault: 45 * time.Second})
		defer replayed.Close()
		replayLog(t, replayed, log)
		snap := newEngine(t, Config{Standby: true, LeaseDefault: 45 * time.Second})
		defer snap.Close()
		var buf bytes.Buffer
		if _, err := e.WriteDump(&buf, func() uint64 { return 0 }); err != nil {
			t.Fatal(err)
		}
		if _, err := snap.LoadDump(&buf); err != nil {
			t.Fatal(err)
		}
		e.Demote()
		e.Close()
		<-parkedQ
		replayed.Promote(Failover)
		check("after replay", replayed)
		snap.Promote(Failover)
		check("after a snapshot", snap)
	})
}

// TestSnapshotAskedReadByAnOlderNode: a snapshot wrote the fingerprint of
// an acquire that named no lease as "no lease" (leaseSum(0)) in Asked. A
// node of the version before Record.LeaseDefaulted skips that tag and
// compares a repeat on the lease it fills in (its lease_default): none of
// them matched, and an old node that had installed a newer node's
// snapshot (a rolling upgrade: the upgraded node active, the old one
// resyncing from it) refused every repeat of such an acquire 422
// idempotency_key_reused, field lease. The snapshot now writes the
// writer's lease_default's fingerprint there, and LeaseDefaulted, which a
// current reader takes for none (the repeat's checks after a snapshot are
// TestIDRepeatWithoutLeaseAfterFailoverToAnotherDefault's). The older
// reader's rule is restated here: Asked's low 32 bits against
// leaseSum(the lease it fills in).
func TestSnapshotAskedReadByAnOlderNode(t *testing.T) {
	const def = 30 * time.Second
	e := newEngine(t, Config{LeaseDefault: def})
	defer e.Close()
	mustAcquire(t, e, AcquireRequest{Key: "none", ID: "n1"})
	mustAcquire(t, e, AcquireRequest{Key: "named", ID: "h1", Lease: time.Hour})
	// An outcome remembered for an acquire that named no lease: timed out.
	if _, err := e.Acquire(context.Background(), AcquireRequest{Key: "none", ID: "t1", Wait: time.Millisecond}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("acquire of a held key with a 1 ms wait: %v, want ErrTimeout", err)
	}
	seen := map[string]Record{}
	e.SnapshotRecords(func(_ int, rec []byte) {
		r, err := DecodeRecord(rec)
		if err != nil {
			t.Fatal(err)
		}
		if r.WaiterID != "" {
			seen[r.WaiterID] = r
		}
	}, func(int) {})
	for id, lease := range map[string]time.Duration{"n1": def, "t1": def, "h1": time.Hour} {
		r, ok := seen[id]
		if !ok || r.Asked == 0 {
			t.Fatalf("%s: no snapshot record with Asked: %+v", id, r)
		}
		if got, want := uint32(r.Asked), leaseSum(lease); got != want {
			t.Errorf("%s (%v record): lease fingerprint %#x, want %#x (%v, as an older node fills it in)", id, r.Kind, got, want, lease)
		}
		if r.LeaseDefaulted != (lease == def) {
			t.Errorf("%s (%v record): LeaseDefaulted %v", id, r.Kind, r.LeaseDefaulted)
		}
		var tk ticket
		tk.asked(&r)
		if named := tk.leaseSum != leaseSum(0); named != (lease != def) {
			t.Errorf("%s (%v record): read back as a named lease: %v", id, r.Kind, named)
		}
	}
}
