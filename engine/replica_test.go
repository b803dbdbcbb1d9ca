package engine

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fwdLog is a Log that replays each record into a standby engine as it is
// appended, in order, as a standby writes and applies the active's log.
type fwdLog struct {
	t   testing.TB
	mu  sync.Mutex
	n   uint64
	dst *Engine
}

func (l *fwdLog) Append(rec []byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.dst.Replay(rec); err != nil {
		l.t.Errorf("Replay(%v): %v", RecordKind(rec[1]), err)
	}
	l.n++
	return l.n, nil
}

func (l *fwdLog) Wait(uint64) error { return nil }

// replicaPair returns an active engine whose every change is applied, in
// order, to a standby engine, as the cluster's replication of the log
// does.
func replicaPair(t *testing.T) (active, standby *Engine) {
	t.Helper()
	standby = newEngine(t, Config{Standby: true})
	active = newEngine(t, Config{Log: &fwdLog{t: t, dst: standby}})
	return active, standby
}

// copyBySnapshot returns a new standby that holds src's state, taken by a
// dump as a standby that subscribes late takes it.
func copyBySnapshot(t *testing.T, src *Engine) *Engine {
	t.Helper()
	dst := newEngine(t, Config{Standby: true})
	var buf bytes.Buffer
	if _, err := src.WriteDump(&buf, func() uint64 { return 0 }); err != nil {
		t.Fatal(err)
	}
	if _, err := dst.LoadDump(&buf); err != nil {
		t.Fatal(err)
	}
	return dst
}

// A failover drops the waiters that came without an ID (nobody can ever
// resume them: their ticket never left the dead active) and keeps those
// with one for PollGrace; a handoff keeps both, the first to be resumed by
// the ticket the old active's redirect carries (issue 11, defect 1).
func TestPromoteDropsTicketWaitersOnFailoverOnly(t *testing.T) {
	for _, tc := range []struct {
		how     Promotion
		waiters int
	}{{Failover, 1}, {Handoff, 2}} {
		t.Run([]string{"failover", "handoff"}[tc.how], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := replicaPair(t)
				defer b.Close()
				const key = "k"
				h := mustAcquire(t, a, AcquireRequest{Key: key})
				anon := goAcquire(a, context.Background(), AcquireRequest{Key: key})
				synctest.Wait()
				named := goAcquire(a, context.Background(), AcquireRequest{Key: key, ID: "named"})
				synctest.Wait()
				var ticket string
				if tc.how == Handoff {
					a.Demote()
					synctest.Wait()
					r := answered(t, "anonymous waiter", anon)
					wantErr(t, "anonymous waiter", r.err, ErrMoved)
					ticket = Ticket(r.err.(*MovedError).ID)
					if ticket == "" {
						t.Fatalf("the moved anonymous waiter got no ticket: %v", r.err)
					}
				}
				a.Close()
				synctest.Wait()
				<-named
				if tc.how == Failover {
					<-anon
				}
				wantHolder(t, b, key, h.Token, 2)

				b.Promote(tc.how)
				wantHolder(t, b, key, h.Token, tc.waiters)
				if err := b.Release(key, h.Token); err != nil {
					t.Fatal(err)
				}
				if tc.how == Failover {
					// The named waiter was granted (it may still claim it);
					// no grant went to the dropped ghost.
					st, _ := b.Status(key)
					g := mustAcquire(t, b, AcquireRequest{Key: key, ID: "named"})
					if st.Holder == nil || g.Token != st.Holder.Token {
						t.Fatalf("after the release the holder is %+v and the named waiter's repeat got %d; want the named waiter granted", st.Holder, g.Token)
					}
					wantHolder(t, b, key, g.Token, 0)
					return
				}
				// The redirected anonymous waiter resumes its place (first)
				// by its ticket.
				g := mustAcquire(t, b, AcquireRequest{Key: key, ID: TicketID(ticket)})
				wantHolder(t, b, key, g.Token, 1)
			})
		})
	}
}

// A grant made to a waiter whose request is gone waits PollGrace for its
// claim; that claim deadline crosses a snapshot, the change stream, a
// Demote and a Promote like a lease deadline (issue 11, defect 2), and a
// claim made on the old active crosses them too.
func TestClaimDeadlineSurvivesReplicationAndHandoff(t *testing.T) {
	for _, claimed := range []bool{false, true} {
		name := map[bool]string{false: "unclaimed", true: "claimed"}[claimed]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a, b := replicaPair(t)
				const key = "k"
				h := mustAcquire(t, a, AcquireRequest{Key: key, Lease: time.Minute})
				w := goAcquire(a, context.Background(), AcquireRequest{Key: key, ID: "w", Lease: time.Minute})
				synctest.Wait()
				a.Close() // a crash: w's request ends with it
				synctest.Wait()
				<-w
				b.Promote(Failover) // t = 0: w keeps its place until t = 5s
				time.Sleep(time.Second)
				if err := b.Release(key, h.Token); err != nil {
					t.Fatal(err)
				}
				st, _ := b.Status(key)
				if st.Holder == nil {
					t.Fatal("the detached waiter was not granted")
				}
				ghost := st.Holder.Token
				if claimed {
					if g := mustAcquire(t, b, AcquireRequest{Key: key, ID: "w", Lease: time.Minute}); g.Token != ghost {
						t.Fatalf("the claim got token %d, want %d", g.Token, ghost)
					}
				}
				// The successor takes b's state by a snapshot.
				c := copyBySnapshot(t, b)
				defer c.Close()
				time.Sleep(time.Second) // t = 2s
				b.Demote()
				b.Close()
				c.Promote(Handoff)
				wantHolder(t, c, key, ghost, 0)
				time.Sleep(2999 * time.Millisecond) // t = 4.999s
				synctest.Wait()
				wantHolder(t, c, key, ghost, 0)
				time.Sleep(time.Millisecond) // t = 5s: w's claim deadline
				synctest.Wait()
				if claimed {
					wantHolder(t, c, key, ghost, 0)
					return
				}
				wantHolder(t, c, key, 0, 0)
			})
		})
	}
}

// The claim deadline also crosses the change stream itself: the grant
// event carries it, and the claim event clears it.
func TestClaimDeadlineCrossesTheChangeStream(t *testing.T) {
	for _, claimed := range []bool{false, true} {
		name := map[bool]string{false: "unclaimed", true: "claimed"}[claimed]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newEngine(t, Config{Standby: true})
				defer c.Close()
				b := newEngine(t, Config{Standby: true, Log: &fwdLog{t: t, dst: c}})
				const key, held = "k", 7
				now := time.Now().UnixNano()
				for _, r := range []Record{
					{Kind: RecGrant, Key: key, Token: held, Lease: time.Minute, At: now, Expires: now + int64(time.Minute)},
					{Kind: RecEnqueue, Key: key, WaiterID: "w", Lease: time.Minute, At: now},
				} {
					if err := b.Replay(AppendRecord(nil, &r)); err != nil {
						t.Fatal(err)
					}
				}
				// c saw none of that (Replay logs nothing): it takes the
				// same state by a dump, then follows b's log.
				var buf bytes.Buffer
				if _, err := b.WriteDump(&buf, func() uint64 { return 0 }); err != nil {
					t.Fatal(err)
				}
				if _, err := c.LoadDump(&buf); err != nil {
					t.Fatal(err)
				}
				b.Promote(Failover) // t = 0: w keeps its place until t = 5s
				time.Sleep(time.Second)
				if err := b.Release(key, held); err != nil {
					t.Fatal(err)
				}
				st, _ := b.Status(key)
				ghost := st.Holder.Token
				if claimed {
					mustAcquire(t, b, AcquireRequest{Key: key, ID: "w", Lease: time.Minute})
				}
				b.Demote()
				b.Close()
				c.Promote(Handoff)
				wantHolder(t, c, key, ghost, 0)
				time.Sleep(4 * time.Second) // t = 5s
				synctest.Wait()
				if claimed {
					wantHolder(t, c, key, ghost, 0)
					return
				}
				wantHolder(t, c, key, 0, 0)
			})
		})
	}
}

// hookLog is a Log that calls hook (when set) with each record it takes,
// without a lock of its own held.
type hookLog struct {
	mu   sync.Mutex
	n    uint64
	hook func(rec []byte)
}

func (l *hookLog) Append(rec []byte) (uint64, error) {
	if l.hook != nil {
		l.hook(rec)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return l.n, nil
}

func (l *hookLog) Wait(uint64) error { return nil }

// keyInShard returns a key that the engine e puts in shard i.
func keyInShard(t *testing.T, e *Engine, i int, prefix string) string {
	t.Helper()
	for n := 0; n < 1000; n++ {
		if k := prefix + string(rune('a'+n%26)) + string(rune('a'+n/26)); e.ShardOf(k) == i {
			return k
		}
	}
	t.Fatalf("no key in shard %d", i)
	return ""
}

// Promote serves calls from its first shard on, while it still goes
// through the others: a client that repeats its acquire at that moment
// (it failed over, its ID in hand) takes over its replicated place and
// parks. Promote must leave that waiter as it is, queued with its
// request, not mark it detached again: a detached waiter's grant is kept
// for a repeat to claim and never delivered, so the parked request would
// hang, never answered, while its grant runs out unclaimed.
func TestPromoteKeepsAWaiterResumedMeanwhile(t *testing.T) {
	log := &hookLog{}
	b := newEngine(t, Config{Standby: true, Shards: 2, Log: log})
	defer b.Close()
	k0, k1 := keyInShard(t, b, 0, "zero-"), keyInShard(t, b, 1, "one-")
	now := time.Now()
	replay := func(r Record) {
		t.Helper()
		r.At = now.UnixNano()
		if err := b.Replay(AppendRecord(nil, &r)); err != nil {
			t.Fatal(err)
		}
	}
	lease := now.Add(time.Minute).UnixNano()
	// k0 (shard 0): held, with an anonymous waiter, which a failover
	// drops: a record Promote writes in shard 0.
	replay(Record{Kind: RecGrant, Key: k0, Token: 100, Lease: time.Minute, Expires: lease})
	replay(Record{Kind: RecEnqueue, Key: k0, WaiterID: AnonPrefix + "a", Lease: time.Minute})
	// k1 (shard 1): the waiter "w", first in the queue of a lock that its
	// holder released just before the active died (its grant to "w" not
	// replicated).
	replay(Record{Kind: RecGrant, Key: k1, Token: 101, Lease: time.Minute, Expires: lease})
	replay(Record{Kind: RecEnqueue, Key: k1, WaiterID: "w", Lease: time.Minute})
	replay(Record{Kind: RecRelease, Key: k1, Token: 101})

	got := make(chan AcquireResult, 1)
	var parked *Waiting
	log.hook = func(rec []byte) {
		if !b.Active() || parked != nil {
			return
		}
		// Shard 0 is being promoted (this record is its), shard 1 not
		// yet: the client of "w" repeats its acquire now.
		res, p := b.AcquireFunc(AcquireRequest{Key: k1, ID: "w", Lease: time.Minute}, func(o AcquireResult) bool { got <- o; return true })
		if p == nil {
			t.Errorf("the repeat of w was answered at once (%v); want it parked on w's place", res.Err())
			return
		}
		parked = p
	}
	b.Promote(Failover)
	if parked == nil {
		t.Fatal("the test's premise: no record written in shard 0 while it was promoted")
	}
	select {
	case o := <-got:
		g, err := o.Settle()
		if err != nil {
			t.Fatalf("the resumed waiter: %v", err)
		}
		wantHolder(t, b, k1, g.Token, 0)
	default:
		st, _ := b.Status(k1)
		t.Fatalf("the resumed waiter's request was never answered; %s holder %+v, %d waiters", k1, st.Holder, st.Waiters)
	}
}

// failingFwdLog is a fwdLog whose disk fills: once failing, Wait fails and
// Append takes only allow more records (handed to the log, and so to the
// standby, before the failed write), then refuses every one, as wal.Log.
type failingFwdLog struct {
	fwdLog
	failing bool
	allow   int
}

func (l *failingFwdLog) Append(rec []byte) (uint64, error) {
	l.fwdLog.mu.Lock()
	refuse := l.failing && l.allow == 0
	if l.failing && l.allow > 0 {
		l.allow--
	}
	l.fwdLog.mu.Unlock()
	if refuse {
		return 0, errDiskFull
	}
	return l.fwdLog.Append(rec)
}

func (l *failingFwdLog) Wait(uint64) error {
	l.fwdLog.mu.Lock()
	defer l.fwdLog.mu.Unlock()
	if l.failing {
		return errDiskFull
	}
	return nil
}

// A grant whose record reached the standby while the active's own write
// failed, answered ErrUnavailable ("nothing was changed"), could not be
// taken back by the active (its log refused the release): the standby
// held it, and kept it when it took the role over (a handoff away from
// the failing log, or a failover), for the grant's whole lease, while the
// client had been told that nothing changed. The active lists it
// (Undelivered) and the successor takes it back as it is promoted; a
// repeat of its waiter ID then gets a grant of its own.
func TestUndeliveredGrantIsTakenBackByTheSuccessor(t *testing.T) {
	b := newEngine(t, Config{Standby: true})
	defer b.Close()
	log := &failingFwdLog{fwdLog: fwdLog{t: t, dst: b}}
	a := newEngine(t, Config{Log: log})
	defer a.Close()
	log.mu.Lock()
	log.failing, log.allow = true, 1
	log.mu.Unlock()
	req := AcquireRequest{Key: "k", ID: "w", Lease: time.Hour}
	_, err := a.Acquire(context.Background(), req)
	wantErr(t, "acquire whose grant could not be written", err, ErrUnavailable)
	st, err := b.Status("k")
	if err != nil || st.Holder == nil {
		t.Fatalf("the standby does not hold the grant it replicated (%+v, %v): the test no longer sets up the fault", st, err)
	}
	ghost := st.Holder.Token
	und := a.Undelivered()
	if len(und) != 1 || und[0].Key != "k" || und[0].Token != ghost {
		t.Fatalf("Undelivered() = %+v, want the grant of k with token %d", und, ghost)
	}
	a.Demote()
	b.Promote(Handoff, a.Undelivered()...)
	wantHolder(t, b, "k", 0, 0)
	if g := mustAcquire(t, b, req); g.Token == ghost {
		t.Fatalf("the repeat of w got the grant taken back (%d)", g.Token)
	}
}

// Promote serves calls from its first shard on while it still goes
// through the others, so the grants to take back (undelivered) must be
// taken back before it serves any: a repeat of the waiter ID of one in a
// later shard, made while an earlier shard was promoted, was answered
// with that grant, which Promote then released: the client held a lock
// that the node had handed on (two holders once a waiter queued).
func TestPromoteTakesBackUndeliveredBeforeServing(t *testing.T) {
	log := &hookLog{}
	b := newEngine(t, Config{Standby: true, Shards: 2, Log: log})
	defer b.Close()
	k0, k1 := keyInShard(t, b, 0, "zero-"), keyInShard(t, b, 1, "one-")
	now := time.Now()
	lease := now.Add(time.Minute).UnixNano()
	for _, r := range []Record{
		{Kind: RecGrant, Key: k0, Token: 100, WaiterID: "v", Lease: time.Minute, Expires: lease},
		{Kind: RecGrant, Key: k1, Token: 101, WaiterID: "w", Lease: time.Minute, Expires: lease},
	} {
		r.At = now.UnixNano()
		if err := b.Replay(AppendRecord(nil, &r)); err != nil {
			t.Fatal(err)
		}
	}
	var repeated bool
	var res AcquireResult
	log.hook = func(rec []byte) {
		r, err := DecodeRecord(rec)
		if err != nil || repeated || r.Kind != RecRelease || r.Key != k0 {
			return
		}
		// Shard 0's undelivered grant is taken back (this record is its
		// release), shard 1's not yet: the client of "w" repeats now.
		repeated = true
		var p *Waiting
		res, p = b.AcquireFunc(AcquireRequest{Key: k1, ID: "w", Lease: time.Minute}, func(AcquireResult) bool { return false })
		if p != nil {
			p.Cancel()
		}
	}
	b.Promote(Handoff, Grant{Key: k0, Token: 100}, Grant{Key: k1, Token: 101})
	if !repeated {
		t.Fatal("the test's premise: Promote wrote no release of the undelivered grant of " + k0)
	}
	if g, err := res.Settle(); err == nil {
		// Answered with a grant: the node must still hold it.
		wantHolder(t, b, k1, g.Token, 0)
	}
	wantHolder(t, b, k0, 0, 0)
}

// A waiter whose request went away keeps its place for PollGrace from
// then, not anew at every later promotion: the failover that detached it
// logs its grace, which a standby that streams the log, one that loads a
// snapshot, and the node itself once demoted keep when they are promoted
// in turn (a handoff back). TestSyncHistoryChaos CHAOS_NODES=5
// CHAOS_SEED=2701: after a kill-all the waiters of acquires whose clients
// had given up were replayed; a failover (a pause) and the handoff back
// each gave them 5 s more, and four of them in turn were granted, unclaimed,
// and held rw to their 2 s lease while every client waited on it: no grant
// for 4 s after the cluster had settled. A waiter that a repeat resumed
// meanwhile gets its grace anew (its request was parked again).
func TestPromoteKeepsAWaitersGraceRunning(t *testing.T) {
	for _, via := range []string{"stream", "snapshot", "demoted", "resumed"} {
		t.Run(via, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newEngine(t, Config{Standby: true})
				defer c.Close()
				b := newEngine(t, Config{Standby: true, Log: &fwdLog{t: t, dst: c}})
				defer b.Close()
				const key = "k"
				now := time.Now()
				// The dead active's state, on both standbys: k held, and
				// the waiter w, its request parked on the dead active.
				for _, r := range []Record{
					{Kind: RecGrant, Key: key, Token: 100, Lease: time.Minute, Expires: now.Add(time.Minute).UnixNano()},
					{Kind: RecEnqueue, Key: key, WaiterID: "w", Lease: time.Minute},
				} {
					r.At = now.UnixNano()
					for _, e := range []*Engine{b, c} {
						if err := e.Replay(AppendRecord(nil, &r)); err != nil {
							t.Fatal(err)
						}
					}
				}
				b.Promote(Failover)
				wantHolder(t, b, key, 100, 1)
				var repeat <-chan result
				if via == "resumed" {
					repeat = goAcquire(b, context.Background(), AcquireRequest{Key: key, ID: "w", Lease: time.Minute})
				}
				time.Sleep(3 * time.Second)
				synctest.Wait()
				b.Demote()
				synctest.Wait()
				if via == "resumed" {
					wantErr(t, "the resumed waiter's request", answered(t, "the resumed waiter's request", repeat).err, ErrMoved)
				}
				next := c
				switch via {
				case "snapshot":
					next = copyBySnapshot(t, b)
					defer next.Close()
				case "demoted":
					next = b
				}
				next.Promote(Handoff)
				// 5.5 s after the failover, 2.5 s after the handoff.
				time.Sleep(2500 * time.Millisecond)
				synctest.Wait()
				if via == "resumed" {
					wantHolder(t, next, key, 100, 1)
					return
				}
				wantHolder(t, next, key, 100, 0)
			})
		})
	}
}

// A waiter whose grace ran out before a promotion that keeps it (a
// handoff 6 s after the failover that detached it) leaves as the new
// active takes over, never granted, also when the lock is free then: it
// was granted, unclaimed, and released at once, a grant nobody could
// take.
func TestPromoteGrantsNoWaiterWhoseGraceRanOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var grants []Event
		c := newEngine(t, Config{Standby: true, OnEvent: func(ev Event) {
			if ev.Kind == EventGrant {
				grants = append(grants, ev)
			}
		}})
		defer c.Close()
		b := newEngine(t, Config{Standby: true, Log: &fwdLog{t: t, dst: c}})
		defer b.Close()
		const key = "k"
		now := time.Now()
		// k held until 3 s from now, and w waiting.
		for _, r := range []Record{
			{Kind: RecGrant, Key: key, Token: 100, Lease: 3 * time.Second, Expires: now.Add(3 * time.Second).UnixNano()},
			{Kind: RecEnqueue, Key: key, WaiterID: "w", Lease: time.Minute},
		} {
			r.At = now.UnixNano()
			for _, e := range []*Engine{b, c} {
				if err := e.Replay(AppendRecord(nil, &r)); err != nil {
					t.Fatal(err)
				}
			}
		}
		// The failover gives w 5 s; b is stopped past both deadlines
		// before it handles either, then hands off.
		b.Promote(Failover)
		b.Demote()
		time.Sleep(6 * time.Second)
		grants = nil
		c.Promote(Handoff)
		synctest.Wait()
		wantHolder(t, c, key, 0, 0)
		if len(grants) != 0 {
			t.Fatalf("grants on the promotion: %+v; want none (w's grace had run out)", grants)
		}
	})
}

// A waiter queued without an ID by a caller whose redirect cannot carry
// a ticket (NoTicket: the native protocol) does not outlive a handoff:
// the successor drops it at its promotion instead of keeping its place
// for a repeat that cannot come. One with a ticket a redirect carries,
// and one with an ID, keep theirs.
func TestHandoffDropsWaitersWhoseTicketNoRedirectCarries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := replicaPair(t)
		defer b.Close()
		const key = "k"
		h := mustAcquire(t, a, AcquireRequest{Key: key})
		local := goAcquire(a, context.Background(), AcquireRequest{Key: key, NoTicket: true})
		synctest.Wait()
		anon := goAcquire(a, context.Background(), AcquireRequest{Key: key})
		synctest.Wait()
		named := goAcquire(a, context.Background(), AcquireRequest{Key: key, ID: "named", NoTicket: true})
		synctest.Wait()
		a.Demote()
		synctest.Wait()
		r := answered(t, "waiter without a ticket", local)
		wantErr(t, "waiter without a ticket", r.err, ErrMoved)
		if id := r.err.(*MovedError).ID; !IsTicket(id) || !IsLocalTicket(id) {
			t.Fatalf("the moved waiter's ID %q is not a local ticket", id)
		}
		r = answered(t, "anonymous waiter", anon)
		ticket := Ticket(r.err.(*MovedError).ID)
		if IsLocalTicket(r.err.(*MovedError).ID) {
			t.Fatalf("a waiter a redirect can carry got a local ticket")
		}
		<-named
		a.Close()
		wantHolder(t, b, key, h.Token, 3)

		b.Promote(Handoff)
		wantHolder(t, b, key, h.Token, 2)
		if err := b.Release(key, h.Token); err != nil {
			t.Fatal(err)
		}
		// The anonymous waiter, first of the two kept, resumes by its
		// ticket and holds; the named one waits behind.
		g := mustAcquire(t, b, AcquireRequest{Key: key, ID: TicketID(ticket)})
		wantHolder(t, b, key, g.Token, 1)
	})
}
