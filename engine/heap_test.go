package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// checkHeap verifies the heap property and the idx back-pointers, and that
// the heap holds exactly the entries of want.
func checkHeap(t *testing.T, h deadlines, want map[*deadline]bool) {
	t.Helper()
	if len(h) != len(want) {
		t.Fatalf("heap has %d entries; want %d", len(h), len(want))
	}
	for i, d := range h {
		if int(d.idx) != i {
			t.Fatalf("entry at %d has idx %d", i, d.idx)
		}
		if !want[d] {
			t.Fatalf("entry at %d (when %d) should not be in the heap", i, d.when)
		}
		if i > 0 && h[(i-1)/2].when > d.when {
			t.Fatalf("heap property broken at %d: parent %d > child %d", i, h[(i-1)/2].when, d.when)
		}
	}
}

// TestDeadlineHeapAgainstSort drives the heap with random push, remove and
// set operations and compares it with a sorted reference after each step.
func TestDeadlineHeapAgainstSort(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 42))
		pool := make([]*deadline, 1+r.IntN(200))
		for i := range pool {
			pool[i] = &deadline{idx: -1}
		}
		var h deadlines
		in := map[*deadline]bool{}
		spread := int64(1 + r.IntN(1000)) // small spreads give many ties
		for step := range 3000 {
			d := pool[r.IntN(len(pool))]
			switch op := r.IntN(10); {
			case op < 4:
				if !in[d] {
					d.when = r.Int64N(spread)
					h.push(d)
					in[d] = true
				}
			case op < 7:
				h.remove(d) // also a no-op on entries not in the heap
				delete(in, d)
				if d.idx != -1 {
					t.Fatalf("seed %d step %d: removed entry keeps idx %d", seed, step, d.idx)
				}
			default:
				when := r.Int64N(spread)
				h.set(d, when)
				in[d] = true
				if d.when != when {
					t.Fatalf("set did not store when")
				}
			}
			checkHeap(t, h, in)
			var minWant *deadline
			for d := range in {
				if minWant == nil || d.when < minWant.when {
					minWant = d
				}
			}
			if m := h.min(); (m == nil) != (minWant == nil) || (m != nil && m.when != minWant.when) {
				t.Fatalf("seed %d step %d: min %v; want %v", seed, step, m, minWant)
			}
		}
		// Draining by min gives the sorted order.
		var want []int64
		for d := range in {
			want = append(want, d.when)
		}
		slices.Sort(want)
		var got []int64
		for m := h.min(); m != nil; m = h.min() {
			got = append(got, m.when)
			h.remove(m)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("seed %d: drained %v; want %v", seed, got, want)
		}
	}
}

// TestDeadlineHeapShrinks: a heap that grew and emptied gives its memory
// back and stays consistent through the copy.
func TestDeadlineHeapShrinks(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var h deadlines
	in := map[*deadline]bool{}
	all := make([]*deadline, 10000)
	for i := range all {
		all[i] = &deadline{idx: -1, when: r.Int64N(1e6)}
		h.push(all[i])
		in[all[i]] = true
	}
	peak := cap(h)
	for _, d := range all[:9900] {
		h.remove(d)
		delete(in, d)
	}
	checkHeap(t, h, in)
	if cap(h) >= peak/4 {
		t.Fatalf("cap %d after emptying from %d; want it shrunk", cap(h), peak)
	}
	for _, d := range all[9900:] {
		h.set(d, r.Int64N(1e6))
	}
	checkHeap(t, h, in)
}
