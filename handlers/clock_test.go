package handlers_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// stepClock is an engine.Clock on the real clocks whose wall reading can
// be stepped (NTP, a resumed VM, an operator's date) while its monotonic
// reading runs on untouched.
type stepClock struct {
	base time.Time
	step atomic.Int64 // ns added to the wall reading
}

func (c *stepClock) Now() (mono, wall int64) {
	return int64(time.Since(c.base)) + 1, time.Now().UnixNano() + c.step.Load()
}

// Step moves the wall reading by d; the monotonic reading does not move.
func (c *stepClock) Step(d time.Duration) { c.step.Add(int64(d)) }

// wall is the stepped wall-clock reading.
func (c *stepClock) wall() time.Time { _, w := c.Now(); return time.Unix(0, w) }

// near fails unless got is within a few seconds of want: enough to tell a
// time on the stepped wall clock from one an hour away, with room for a
// loaded machine. Nothing is asserted about how long anything took.
func near(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if d := got.Sub(want).Abs(); d > 5*time.Second {
		t.Fatalf("%s = %v; want about %v (the stepped wall clock), off by %v", what, got, want, d)
	}
}

// A step of the node's wall clock, either way, neither shortens nor
// lengthens a lease or a wait (SPEC section 1, "Time"; issue 11, defect 4),
// while the answers' expires_at and granted_at follow the stepped wall
// clock. Another deadline of the same shard makes the shard's timer fire
// in between, as in the "two holders" report.
func TestWallClockStepThroughHTTP(t *testing.T) {
	for _, step := range []time.Duration{time.Hour, -time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			clock := &stepClock{base: time.Now()}
			e := newEnv(t, engine.Config{Shards: 1, Clock: clock}, handlers.Config{})
			a := e.acquire("/locks/k?lease=30")
			e.acquire("/locks/short?lease=0.5")
			c := e.acquire("/locks/c?lease=1")

			clock.Step(step)
			st := e.status("k")
			if st.Holder == nil || st.Holder.Token != a.Token {
				t.Fatalf("k after the step: %+v; want holder %d", st, a.Token)
			}
			now := clock.wall()
			near(t, "k's expires_at", st.Holder.ExpiresAt, now.Add(30*time.Second))
			near(t, "k's granted_at", st.Holder.GrantedAt, now)

			// Not lengthened: c's 1 s lease ends and its waiter is granted
			// (wait=20 only turns a lease lengthened by an hour into a 408).
			x := e.async(context.Background(), e.client, http.MethodPost, "/locks/c?lease=30&wait=20", "")
			// Not shortened: this 1.5 s wait runs out behind k's 30 s lease,
			// although the shard's timer fires for short's lease meanwhile.
			y := e.async(context.Background(), e.client, http.MethodPost, "/locks/k?wait=1.5", "")

			g := recv(t, x, "the waiter behind the 1 s lease").grant(t)
			if g.Token <= c.Token {
				t.Fatalf("c granted token %d, not above %d", g.Token, c.Token)
			}
			near(t, "the new grant's expires_at", g.ExpiresAt, clock.wall().Add(30*time.Second))
			if r := recv(t, y, "the 1.5 s wait behind the 30 s lease"); r.code != http.StatusRequestTimeout || r.errBody(t).Code != api.CodeTimeout {
				t.Fatalf("the 1.5 s wait behind k's 30 s lease: %d %s, want 408 timeout", r.code, r.body)
			}
			if st := e.status("short"); st.Holder != nil {
				t.Fatalf("short's 0.5 s lease still held: %+v", st.Holder)
			}
			if st := e.status("k"); st.Holder == nil || st.Holder.Token != a.Token || st.Waiters != 0 {
				t.Fatalf("k: %+v; want still held by %d, nobody waiting", st, a.Token)
			}
			if r := e.do(http.MethodPatch, "/locks/k?token="+tok(a.Token), ""); r.code != http.StatusOK {
				t.Fatalf("renew by k's holder: %d %s", r.code, r.body)
			}
			e.release("k", a.Token)
			e.release("c", g.Token)
		})
	}
}
