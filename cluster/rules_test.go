package cluster

import (
	"math/rand/v2"
	"testing"
)

// The split-brain rule, rule by rule (SPEC section 3; issue 11, defect 3).
func TestKeepsState(t *testing.T) {
	st := func(prio int, token uint64) Status { return Status{Priority: prio, StateToken: token, Role: "active"} }
	for _, tc := range []struct {
		name string
		a, b Status
		want bool
	}{
		{"the newer state keeps it, though its priority is lower", st(1, 200), st(0, 100), true},
		{"the older state steps down, though its priority is higher", st(0, 100), st(1, 200), false},
		{"a node that granted nothing steps down before one that did", st(0, 0), st(2, 1), false},
		{"equal state tokens: the higher priority keeps", st(0, 100), st(1, 100), true},
		{"equal state tokens: the lower priority steps down", st(2, 100), st(1, 100), false},
		{"neither granted anything: the higher priority keeps", st(0, 0), st(1, 0), true},
		{"epochs decide nothing", Status{Priority: 1, StateToken: 5, Epoch: 1}, Status{Priority: 0, StateToken: 4, Epoch: 9}, true},
		{"the last token heard of decides nothing", Status{Priority: 1, StateToken: 5, LastToken: 5}, Status{Priority: 0, StateToken: 4, LastToken: 99}, true},
	} {
		if got := keepsState(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: keepsState(%+v, %+v) = %v, want %v", tc.name, tc.a, tc.b, got, tc.want)
		}
		if keepsState(tc.a, tc.b) == keepsState(tc.b, tc.a) {
			t.Errorf("%s: both or neither keep their state", tc.name)
		}
	}
}

// Two actives each decide at their own steps, from the other's last answer
// (given at any earlier instant), while both keep granting: never do both
// step down, and once both have decided after seeing each other's final
// state exactly one is left. This is why the timing of the heartbeats
// does not matter.
func TestKeepsStateNeverStepsDownBoth(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	for range 20000 {
		const steps = 12
		// tok[i][t]: node i's state token at instant t, rising while active.
		var tok [2][steps]uint64
		for i := range 2 {
			v := uint64(rng.IntN(3))
			for k := range steps {
				v += uint64(rng.IntN(3))
				tok[i][k] = v
			}
		}
		down := [2]int{-1, -1} // instant of the step-down, -1 = none
		for k := 1; k < steps; k++ {
			for _, i := range rng.Perm(2) {
				j := 1 - i
				if down[i] >= 0 {
					continue
				}
				s := rng.IntN(k) // the other's answer is from instant s < k
				if down[j] >= 0 && down[j] <= s {
					continue // it answered as a standby
				}
				self := Status{Priority: i, StateToken: tok[i][k]}
				other := Status{Priority: j, StateToken: tok[j][s]}
				if !keepsState(self, other) {
					down[i] = k
				}
			}
		}
		if down[0] >= 0 && down[1] >= 0 {
			t.Fatalf("both actives stepped down (at %d and %d); tokens %v", down[0], down[1], tok)
		}
	}
}
