package engine

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// A replica that missed the end of a grant (its record never reached the
// replica: a promotion's release of an undelivered grant is applied even
// when the log refuses it, see TestMissedReleaseOfAnUndeliveredWriter)
// and then gets the next grant of the key must end the grants it still
// has that leave the new one no room, as the active did before it made
// it: all of them when the modes differ, the one holder of a key of
// limit 1. The grant only took over the key's first slot: a reader
// granted over a missed writer kept the writer's mode, so the next
// reader took the same slot again and the first reader's grant was lost;
// a writer granted over missed readers left all but one holding beside
// it, shown as shared; and the replaced holder's waiter ID stayed
// "granted" with a token no slot held, so a repeat of it (a client's
// retry after a failover) dereferenced a nil slot with the shard locked:
// a panic, and every key of that shard hung. Found by review while
// replaying, across a failover, the orphaned lease of apache/curator#835
// (CURATOR-315) and the lost read lock holders of redisson/redisson#1219.
func TestGrantOverMissedEndsEndsTheStaleHolders(t *testing.T) {
	grant := func(token uint64, id string, mode Mode) Record {
		now := time.Now().UnixNano()
		return Record{Kind: RecGrant, Key: "k", Token: token, Lease: time.Minute, At: now, Expires: now + int64(time.Minute), WaiterID: id, Mode: mode}
	}
	semGrant := func(token uint64, id string) Record {
		r := grant(token, id, Exclusive)
		r.Limit = 2
		return r
	}
	for _, c := range []struct {
		name  string
		recs  []Record
		ended []string // waiter IDs whose grants the replica missed the end of
		held  []string // waiter IDs holding after the replay, oldest first
		mode  Mode
	}{
		{"readers over a writer", []Record{grant(10, "w", Exclusive), grant(11, "r1", Shared), grant(12, "r2", Shared)}, []string{"w"}, []string{"r1", "r2"}, Shared},
		{"a writer over readers", []Record{grant(10, "r1", Shared), grant(11, "r2", Shared), grant(12, "w", Exclusive)}, []string{"r1", "r2"}, []string{"w"}, Exclusive},
		{"a writer over a writer", []Record{grant(10, "w1", Exclusive), grant(11, "w2", Exclusive)}, []string{"w1"}, []string{"w2"}, Exclusive},
		// The missed end was a release that forgot the waiter ID, which
		// then acquired again: the ID holds its new grant.
		{"a writer over its own waiter ID", []Record{grant(10, "w", Exclusive), grant(11, "w", Exclusive)}, nil, []string{"w"}, Exclusive},
		// A semaphore in one mode cannot tell which holder ended: the
		// grant takes a slot of its own, and every holder stays.
		{"a semaphore at its limit", []Record{semGrant(10, "s1"), semGrant(11, "s2"), semGrant(12, "s3")}, nil, []string{"s1", "s2", "s3"}, Exclusive},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newEngine(t, Config{Standby: true})
				wedged := false // a shard left locked: Close would hang
				defer func() {
					if !wedged {
						b.Close()
					}
				}()
				tokens := map[string]uint64{}
				modes := map[string]Mode{}
				for _, r := range c.recs {
					tokens[r.WaiterID], modes[r.WaiterID] = r.Token, r.Mode
					if err := b.Replay(AppendRecord(nil, &r)); err != nil {
						t.Fatal(err)
					}
				}
				check := func(when string) {
					t.Helper()
					st, _ := b.Status("k")
					var got []uint64
					for _, h := range st.Holders {
						got = append(got, h.Token)
						if h.Mode != c.mode {
							t.Errorf("%s: holder %d shown %v; want %v", when, h.Token, h.Mode, c.mode)
						}
					}
					var want []uint64
					for _, id := range c.held {
						want = append(want, tokens[id])
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%s: holders %v; want %v (%v)", when, got, want, c.held)
					}
				}
				check("replayed")
				b.Promote(Failover)
				check("promoted")
				for _, id := range c.ended {
					// Not a nil slot dereferenced with the shard locked: the
					// grant ended.
					var err error
					func() {
						defer func() {
							if p := recover(); p != nil {
								wedged = true
								t.Fatalf("a repeat of %s, whose grant ended, panicked with its shard locked: %v", id, p)
							}
						}()
						_, err = b.Acquire(t.Context(), AcquireRequest{Key: "k", ID: id, Lease: time.Minute, Mode: modes[id], Wait: time.Second})
					}()
					wantErr(t, "a repeat of "+id+", whose grant ended", err, ErrGrantEnded)
				}
				for _, id := range c.held {
					g, err := b.Acquire(t.Context(), AcquireRequest{Key: "k", ID: id, Lease: time.Minute, Mode: modes[id]})
					if err != nil || g.Token != tokens[id] {
						t.Fatalf("a repeat of %s: %+v %v; want its grant %d", id, g, err, tokens[id])
					}
					if err := b.Release("k", tokens[id]); err != nil {
						t.Fatalf("release of %s's grant: %v", id, err)
					}
				}
				wantCounts(t, b, 0, 0)
			})
		})
	}
}

// refuseReleasesLog is a fwdLog that refuses release records while
// refuse is set, as a full disk refuses them (wal.Log), and forwards
// every record it takes to its standby.
type refuseReleasesLog struct {
	fwdLog
	rmu    sync.Mutex
	refuse bool
}

func (l *refuseReleasesLog) Append(rec []byte) (uint64, error) {
	l.rmu.Lock()
	refuse := l.refuse && RecordKind(rec[1]) == RecRelease
	l.rmu.Unlock()
	if refuse {
		return 0, errDiskFull
	}
	return l.fwdLog.Append(rec)
}

// The end to-end case: a node promoted with its log refusing takes back
// an undelivered grant of a writer (applied, but its release is not
// written, so its standby never gets it); once the log takes records
// again it grants two readers, which reach the standby; the standby,
// promoted in turn (kill -9 of the active), must hold both readers, as
// the clients were told, and its state must not panic on the writer's
// waiter ID. Before, the second reader's grant replaced the first one's
// on the standby (a reader told it holds the lock was lost there: its
// release on the new active was not_holder) and both showed as
// exclusive.
func TestMissedReleaseOfAnUndeliveredWriter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newEngine(t, Config{Standby: true})
		wedged := false
		defer func() {
			if !wedged {
				c.Close()
			}
		}()
		log := &refuseReleasesLog{fwdLog: fwdLog{t: t, dst: c}, refuse: true}
		b := newEngine(t, Config{Standby: true, Log: log})
		defer b.Close()
		now := time.Now().UnixNano()
		w := Record{Kind: RecGrant, Key: "k", Token: 10, Lease: time.Minute, At: now, Expires: now + int64(time.Minute), WaiterID: "w"}
		for _, e := range []*Engine{b, c} {
			if err := e.Replay(AppendRecord(nil, &w)); err != nil {
				t.Fatal(err)
			}
		}
		b.Promote(Handoff, Grant{Key: "k", Token: 10})
		wantHolder(t, b, "k", 0, 0)
		log.rmu.Lock()
		log.refuse = false
		log.rmu.Unlock()
		r1 := mustAcquire(t, b, AcquireRequest{Key: "k", Mode: Shared, ID: "r1", Lease: time.Minute})
		r2 := mustAcquire(t, b, AcquireRequest{Key: "k", Mode: Shared, ID: "r2", Lease: time.Minute})
		c.Promote(Failover)
		st, _ := c.Status("k")
		if len(st.Holders) != 2 || st.Holders[0].Token != r1.Token || st.Holders[1].Token != r2.Token || st.Holders[0].Mode != Shared || st.Holders[1].Mode != Shared {
			t.Fatalf("the standby promoted holds %+v; want the two readers %d and %d, shared, as the clients were told", st.Holders, r1.Token, r2.Token)
		}
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					wedged = true
					t.Fatalf("a repeat of the writer's waiter ID panicked with its shard locked: %v", p)
				}
			}()
			_, err = c.Acquire(t.Context(), AcquireRequest{Key: "k", ID: "w", Lease: time.Minute, Wait: time.Second})
		}()
		if err == nil {
			t.Fatal("a repeat of the writer's waiter ID was granted beside two readers")
		}
		for _, g := range []Grant{r1, r2} {
			if err := c.Release("k", g.Token); err != nil {
				t.Fatalf("release of reader %d on the new active: %v", g.Token, err)
			}
		}
	})
}
