package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// raw returns copies of the records appended so far.
func (l *memLog) raw() [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([][]byte, len(l.recs))
	for i, b := range l.recs {
		out[i] = append([]byte(nil), b...)
	}
	return out
}

// replayLog replays every record of log into dst, in order, as a
// standby or a restart does; a record dst refuses fails the test.
func replayLog(t testing.TB, dst *Engine, log *memLog) {
	t.Helper()
	for i, b := range log.raw() {
		if err := dst.Replay(b); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
}

// dump is an engine's full state, one line per key and per waiter ID it
// remembers, sorted; times on the wall clock. It reads the shards
// directly, to see more than a Snapshot carries (claim deadlines, granted
// tickets). A waiter's poll and grace deadlines are left out: they belong
// to its parked request on the active (a replica gives every waiter
// PollGrace anew when it takes over).
func dump(e *Engine) []string {
	var out []string
	for i := range e.shards {
		s := &e.shards[i]
		s.mu.Lock()
		now := e.now()
		for _, lk := range s.locks {
			var b strings.Builder
			fmt.Fprintf(&b, "key %q limit %d", lk.key, lk.limit())
			if lk.holders() > 0 {
				fmt.Fprintf(&b, " mode %v", lk.mode())
			}
			// Holders by token (oldest grant first): which slot a holder
			// sits in is not part of the state.
			var hs []string
			lk.each(func(h *hold) {
				var hb strings.Builder
				fmt.Fprintf(&hb, " holder{token %020d lease %v granted %d expires %d owner %q", h.token, h.lease, now.wallAt(h.granted), now.wallAt(h.expires), lk.owner(h))
				if t := h.holder; t != nil {
					fmt.Fprintf(&hb, " id %q claim by %d", t.id, now.wallAt(t.claimBy))
				}
				hb.WriteString("}")
				hs = append(hs, hb.String())
			})
			slices.Sort(hs)
			b.WriteString(strings.Join(hs, ""))
			for w := lk.head; w != nil; w = w.next {
				fmt.Fprintf(&b, " waiter{id %q lease %v arrived %d until %d owner %q mode %v}", w.t.id, w.lease, now.wallAt(w.arrived), now.wallAt(w.waitUntil), w.owner, w.mode)
			}
			out = append(out, b.String())
		}
		for _, t := range s.tickets {
			line := fmt.Sprintf("ticket %q %q state %d token %d", t.key, t.id, t.state, t.token)
			if t.dl.idx >= 0 || t.dl.idx == inRetained {
				line += fmt.Sprintf(" forgotten at %d", now.wallAt(t.dl.when))
			}
			out = append(out, line)
		}
		s.mu.Unlock()
	}
	slices.Sort(out)
	return out
}

// Replay equals the live state (issue 12): random sequences of acquires
// (with and without an Idempotency-Key, repeats, waits, polls that end
// early), releases, renewals, cancelled and abandoned requests, and time
// passing (leases and waits running out, places kept and lost), applied
// live and then replayed from the log's records into a fresh engine, give
// equal snapshots.
func TestReplayEqualsLive(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { replayEqualsLive(t, seed) })
		})
	}
}

func replayEqualsLive(t *testing.T, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 12))
	log := &memLog{}
	cfg := Config{Shards: 2, Log: log, PollTimeout: 3 * time.Second, PollGrace: 2 * time.Second, Retention: time.Minute}
	e := newEngine(t, cfg)
	defer e.Close()
	keys := []string{"a", "b", "c/d", "sem", "rw"}
	limits := map[string]int{"sem": 3, "rw": 4} // the others: 1
	type req struct {
		ch     <-chan result
		cancel context.CancelFunc
		id     string
	}
	var reqs []req
	var grants []Grant
	grantIDs := map[uint64]string{} // the waiter ID each grant was answered to
	ids := 0
	collect := func() {
		synctest.Wait()
		reqs = slices.DeleteFunc(reqs, func(r req) bool {
			select {
			case res := <-r.ch:
				if res.err == nil {
					grants = append(grants, res.g)
					grantIDs[res.g.Token] = r.id
				}
				r.cancel()
				return true
			default:
				return false
			}
		})
	}
	r := newEngine(t, Config{Shards: 2, Standby: true, Retention: time.Minute})
	defer r.Close()
	replayed := 0
	// check replays the records appended since the last check into r (a
	// replay of the log's prefix up to now) and compares the states.
	check := func(step int) {
		t.Helper()
		recs := log.raw()
		for i, b := range recs[replayed:] {
			if err := r.Replay(b); err != nil {
				t.Fatalf("record %d: %v", replayed+i, err)
			}
		}
		replayed = len(recs)
		synctest.Wait()
		live, got := dump(e), dump(r)
		if !slices.Equal(live, got) {
			t.Fatalf("step %d, after %d records, replay differs from the live state:\nlive:\n\t%s\nreplayed:\n\t%s", step, len(recs), strings.Join(live, "\n\t"), strings.Join(got, "\n\t"))
		}
		if r.LastToken() != e.LastToken() {
			t.Fatalf("step %d: replayed last token %d, live %d", step, r.LastToken(), e.LastToken())
		}
		// A snapshot in records, replayed into a fresh engine, gives the
		// same state too.
		fresh := newEngine(t, Config{Shards: 2, Standby: true, Retention: time.Minute})
		defer fresh.Close()
		dumped := make([]bool, 2)
		e.SnapshotRecords(func(shard int, rec []byte) {
			if dumped[shard] {
				t.Errorf("a record of shard %d after its done", shard)
			}
			if err := fresh.Replay(rec); err != nil {
				t.Fatalf("snapshot record: %v", err)
			}
		}, func(shard int) { dumped[shard] = true })
		synctest.Wait()
		if got := dump(fresh); !slices.Equal(live, got) {
			t.Fatalf("step %d: the snapshot replayed differs from the live state:\nlive:\n\t%s\nreplayed:\n\t%s", step, strings.Join(live, "\n\t"), strings.Join(got, "\n\t"))
		}
	}
	for step := range 400 {
		if step%10 == 0 {
			check(step)
		}
		switch op := rnd.IntN(10); {
		case op < 4:
			ar := AcquireRequest{Key: keys[rnd.IntN(len(keys))], Lease: time.Duration(1+rnd.IntN(5)) * time.Second}
			ar.Limit = limits[ar.Key]
			switch ar.Key {
			case "sem":
				ar.Mode = Shared
			case "rw":
				ar.Mode = Mode(rnd.IntN(2))
			}
			if rnd.IntN(2) == 0 {
				ar.Owner = fmt.Sprint("host-", rnd.IntN(3), ":", rnd.IntN(100))
			}
			if rnd.IntN(2) == 0 {
				ar.Wait = time.Duration(1+rnd.IntN(4)) * time.Second
			}
			switch rnd.IntN(3) {
			case 0: // anonymous
			case 1:
				ids++
				ar.ID = fmt.Sprint("id-", ids)
			case 2:
				if ids > 0 {
					ar.ID = fmt.Sprint("id-", 1+rnd.IntN(ids)) // a repeat, maybe of another key
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			reqs = append(reqs, req{ch: goAcquire(e, ctx, ar), cancel: cancel, id: ar.ID})
		case op == 4 && len(grants) > 0:
			g := grants[rnd.IntN(len(grants))]
			_ = e.Release(g.Key, g.Token)
		case op == 5 && len(grants) > 0:
			g := grants[max(0, len(grants)-1-rnd.IntN(3))] // a recent one, likely held still
			_, _ = e.Renew(g.Key, g.Token, time.Duration(rnd.IntN(4))*time.Second)
		case op == 6 && len(reqs) > 0:
			reqs[rnd.IntN(len(reqs))].cancel()
		case op == 7 && len(grants) > 0:
			g := grants[rnd.IntN(len(grants))]
			if rnd.IntN(4) == 0 {
				// An operator's release, now and then under an ID that
				// may repeat: the remembered force is state too.
				if rnd.IntN(2) == 0 {
					_ = e.ForceReleaseID(g.Key, fmt.Sprintf("force-%d", rnd.IntN(3)))
				} else {
					_ = e.ForceRelease(g.Key)
				}
				break
			}
			e.Abandon(g, grantIDs[g.Token]) // its answer could not be delivered
		default:
			time.Sleep(time.Duration(rnd.IntN(2500)) * time.Millisecond)
		}
		collect()
	}
	check(400)
	for _, q := range reqs {
		q.cancel()
	}
	collect()
}

// A restart (issue 12): a new engine replays the log of one that crashed
// (no Close), then takes the role; every holder is back with its token and
// lease deadline, a lease that ran out while the node was down has ended,
// a remembered Idempotency-Key outcome is kept, a detached waiter with an
// ID keeps its place for the grace, and tokens continue above every token
// in the log.
func TestRestartReplaysTheLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		log := &memLog{}
		cfg := Config{Log: log, PollGrace: 5 * time.Second}
		e := newEngine(t, cfg)
		long := mustAcquire(t, e, AcquireRequest{Key: "long", ID: "owner-1", Lease: time.Hour})
		short := mustAcquire(t, e, AcquireRequest{Key: "short", Lease: 2 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		w := goAcquire(e, ctx, AcquireRequest{Key: "long", ID: "waiter-1"})
		ended := mustAcquire(t, e, AcquireRequest{Key: "ended", ID: "once"})
		if err := e.Release("ended", ended.Token); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		last := e.LastToken()
		// The crash: the process is gone, its requests with it.
		e.Demote()
		cancel()
		synctest.Wait()
		answered(t, "the parked acquire of the crashed node", w)
		e.Close()

		time.Sleep(3 * time.Second) // down for 3 s
		r := newEngine(t, Config{Log: log, PollGrace: 5 * time.Second, Standby: true})
		defer r.Close()
		replayLog(t, r, log)
		r.Promote(Failover)
		synctest.Wait()
		st, _ := r.Status("long")
		if st.Holder == nil || st.Holder.Token != long.Token || !st.Holder.ExpiresAt.Equal(long.ExpiresAt) || st.Waiters != 1 {
			t.Fatalf("long after the restart: %+v (holder %+v); want %d until %v, one waiter", st, st.Holder, long.Token, long.ExpiresAt)
		}
		wantHolder(t, r, "short", 0, 0) // its 2 s lease ran out while down
		if _, err := r.Acquire(context.Background(), AcquireRequest{Key: "ended", ID: "once"}); err != ErrGrantEnded {
			t.Fatalf("a repeat of an ended grant's ID after the restart: %v, want ErrGrantEnded", err)
		}
		if g := mustAcquire(t, r, AcquireRequest{Key: "short"}); g.Token <= last || g.Token <= short.Token {
			t.Fatalf("token %d after the restart, not above %d", g.Token, last)
		}
		// The waiter's client comes back within the grace: it resumes its
		// place, and is granted when the holder releases.
		back := goAcquire(r, context.Background(), AcquireRequest{Key: "long", ID: "waiter-1"})
		synctest.Wait()
		parked(t, "the resumed waiter", back)
		if err := r.Release("long", long.Token); err != nil {
			t.Fatalf("the holder's release after the restart: %v", err)
		}
		synctest.Wait()
		if res := answered(t, "back", back); res.err != nil {
			t.Fatalf("the resumed waiter: %v", res.err)
		}
	})
}

// NewestGrant is the highest token of a grant applied, whoever made it:
// the active's own grants, and on a standby the grants replayed from the
// log, a released one included (a restarted cluster node starts its state
// token from it); a Reset (a standby about to install a snapshot) clears it.
func TestNewestGrantCountsReplayedGrants(t *testing.T) {
	log := &memLog{}
	e := newEngine(t, Config{Log: log})
	if got := e.NewestGrant(); got != 0 {
		t.Fatalf("NewestGrant of a fresh engine: %d, want 0", got)
	}
	mustAcquire(t, e, AcquireRequest{Key: "a", Lease: time.Minute})
	b := mustAcquire(t, e, AcquireRequest{Key: "b", Lease: time.Minute})
	if err := e.Release("b", b.Token); err != nil {
		t.Fatal(err)
	}
	if got := e.NewestGrant(); got != b.Token {
		t.Fatalf("the active's NewestGrant: %d, want %d", got, b.Token)
	}
	e.Close()

	r := newEngine(t, Config{Log: log, Standby: true})
	defer r.Close()
	replayLog(t, r, log)
	if got := r.NewestGrant(); got != b.Token {
		t.Fatalf("NewestGrant after the replay: %d, want %d (b's, released since)", got, b.Token)
	}
	r.Reset()
	if got := r.NewestGrant(); got != 0 {
		t.Fatalf("NewestGrant after Reset: %d, want 0", got)
	}
}
