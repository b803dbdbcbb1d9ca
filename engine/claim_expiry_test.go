package engine

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestUnclaimedGrantShowsWhenItIsTakenBack: a grant made while its
// waiter's request was away (its poll ended; the place kept under its ID)
// awaits the repeat's claim until its claim deadline, and is taken back
// then. Status says so: the holder's ExpiresAt is that deadline, not the
// lease's end (it showed the full lease while the node took the lock back
// seconds later). Once claimed, the grant runs to its lease's end, as the
// claim's answer says.
func TestUnclaimedGrantShowsWhenItIsTakenBack(t *testing.T) {
	for _, claim := range []bool{false, true} {
		name := "unclaimed"
		if claim {
			name = "claimed"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := pollConfig() // lease a minute, poll 10 s, grace 5 s
				e := newEngine(t, cfg)
				defer e.Close()
				const key = "k"
				grantToAbsentWaiter(t, e, key, "a")
				granted := time.Now()
				st, err := e.Status(key)
				if err != nil || st.Holder == nil {
					t.Fatalf("status after the grant to the absent waiter: %+v, %v", st, err)
				}
				takenBack := st.Holder.ExpiresAt
				if !takenBack.After(granted) || !takenBack.Before(granted.Add(cfg.LeaseDefault)) {
					t.Fatalf("the unclaimed grant expires at %v (granted %v, lease %v): want its claim deadline, before the lease's end",
						takenBack.UTC(), granted.UTC(), cfg.LeaseDefault)
				}
				if claim {
					g := mustAcquire(t, e, AcquireRequest{Key: key, ID: "a"})
					if want := granted.Add(cfg.LeaseDefault); !g.ExpiresAt.Equal(want) {
						t.Fatalf("the claim's answer expires at %v, want the lease's end %v", g.ExpiresAt.UTC(), want.UTC())
					}
					if st, _ := e.Status(key); st.Holder == nil || !st.Holder.ExpiresAt.Equal(g.ExpiresAt) {
						t.Fatalf("status after the claim: %+v; want the holder to expire at %v", st.Holder, g.ExpiresAt.UTC())
					}
					time.Sleep(takenBack.Sub(time.Now()) + time.Millisecond)
					synctest.Wait()
					if st, _ := e.Status(key); st.Holder == nil || st.Holder.Token != g.Token {
						t.Fatalf("the claimed grant was taken back at the claim deadline: %+v", st.Holder)
					}
					return
				}
				time.Sleep(takenBack.Sub(time.Now()) - time.Millisecond)
				synctest.Wait()
				if st, _ := e.Status(key); st.Holder == nil {
					t.Fatalf("the unclaimed grant was taken back before %v", takenBack.UTC())
				}
				time.Sleep(2 * time.Millisecond)
				synctest.Wait()
				if st, _ := e.Status(key); st.Holder != nil {
					t.Fatalf("the unclaimed grant is still held after the %v it showed: %+v", takenBack.UTC(), st.Holder)
				}
			})
		})
	}
}
