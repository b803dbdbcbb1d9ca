package cluster

import "testing"

// The calls that waited for an active take their turns in their order of
// arrival: the first holds it at once, a call that leaves from the middle
// (its client gone) passes nothing on, the holder's leave passes it to the
// next still waiting, and a second leave does nothing.
func TestArrivalsTakeTurnsInOrder(t *testing.T) {
	var as arrivals
	a, b, c := as.join(), as.join(), as.join()
	has := func(x *arrival) bool {
		select {
		case <-x.turn:
			return true
		default:
			return false
		}
	}
	if !has(a) || has(b) || has(c) {
		t.Fatalf("turns after three joins: %v %v %v, want only the first", has(a), has(b), has(c))
	}
	as.leave(b)
	if has(c) {
		t.Fatal("the third holds the turn after the second left while the first held it")
	}
	as.leave(a)
	if !has(c) {
		t.Fatal("the third does not hold the turn once the first left")
	}
	as.leave(a) // a second leave: nothing (closing c's turn twice would panic)
	as.leave(c)
	if !as.empty() {
		t.Fatalf("%d left after every leave", len(as.q))
	}
	if d := as.join(); !has(d) {
		t.Fatal("a call that joins an empty queue does not hold the turn")
	}
}
