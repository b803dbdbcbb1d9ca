package cluster

import (
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
)

// skewClock is the system clock with its wall reading off by off: a node
// whose clock disagrees with the others' (engine.Clock).
type skewClock struct {
	base time.Time
	off  time.Duration
}

func (c skewClock) Now() (mono, wall int64) {
	t := time.Now()
	return int64(t.Sub(c.base)), t.Add(c.off).UnixNano()
}

// TestMemSkewedStandbyKeepsTokensAndLeases fails over to a standby whose
// wall clock is off from the active's. Tokens rise above every token the
// standby replicated whatever the clocks, and above the grant the cut-off
// active made that never reached it while the clocks agree within
// failover_timeout (SPEC section 1, fencing token); the holder the
// standby replicated keeps its lease there, moved by the skew at most
// (leases cross the process boundary on the wall clock: SPEC section 1,
// Time).
func TestMemSkewedStandbyKeepsTokensAndLeases(t *testing.T) {
	for _, tc := range []struct {
		name string
		skew time.Duration
		// within: the clocks agree within failover_timeout; tokens rise
		// above the unreplicated grant, and the lease moves by the skew
		// at most.
		within bool
	}{
		{"the standby's clock 300 ms ahead", 300 * time.Millisecond, true},
		{"the standby's clock 300 ms behind", -300 * time.Millisecond, true},
		{"the standby's clock an hour behind", -time.Hour, false},
		{"the standby's clock an hour ahead", time.Hour, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newMemClusterClocks(t, 2, nil, map[int]engine.Clock{1: skewClock{base: time.Now(), off: tc.skew}})
			c.start(0, 1)
			c.waitActive(0)
			held := c.grant(0, "held") // a one-minute lease
			c.waitFor("node 1 replicated the grant", func() bool { return c.holds(1, "held") == held.Token })
			c.isolate(0, true)
			lost := c.grant(0, "lost") // made by the cut-off active: never replicated
			c.waitFor("node 1 promoted", func() bool { return c.nodes[1].eng.Active() })
			next := c.grant(1, "next")
			if next.Token <= held.Token {
				t.Errorf("node 1's first grant has token %d, not above the replicated %d", next.Token, held.Token)
			}
			if !tc.within {
				return
			}
			if next.Token <= lost.Token {
				t.Errorf("node 1's first grant has token %d, not above the cut-off active's %d (clocks %v apart)", next.Token, lost.Token, tc.skew)
			}
			info, err := c.nodes[1].eng.Status("held")
			if err != nil || info.Holder == nil || info.Holder.Token != held.Token {
				t.Fatalf("node 1, active: held is %+v (%v), want token %d holding", info.Holder, err, held.Token)
			}
			// What is left of the lease on node 1, by node 1's own clock,
			// against what is left of it by the active's.
			_, wall := skewClock{off: tc.skew}.Now()
			left := info.Holder.ExpiresAt.Sub(time.Unix(0, wall))
			want := time.Until(held.ExpiresAt)
			if d := left - want; d > tc.skew.Abs()+100*time.Millisecond || d < -tc.skew.Abs()-100*time.Millisecond {
				t.Errorf("node 1 ends the replicated lease in %v, the active would have in %v: moved by more than the %v skew", left, want, tc.skew)
			}
		})
	}
}
