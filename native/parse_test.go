package native

import (
	"strings"
	"testing"
)

// A wait or lease written with so many zeros after the point that it
// underflows a float64 is still a positive number of seconds: the
// shortest, 1 ns (a try-lock for a wait), never 0, which for a wait means
// no limit. Before, such a wait parsed as 0 and waited for ever, and such
// a lease was refused as 0.
func TestDurationThatUnderflowsIsNotZero(t *testing.T) {
	tiny := "0." + strings.Repeat("0", 400) + "1"
	r, err := parse([]byte("A k 30 " + tiny))
	if err != nil || r.wait != 1 {
		t.Fatalf("A k 30 %.12s…: wait %v, %v; want 1ns", tiny, r.wait, err)
	}
	r, err = parse([]byte("A k " + tiny + " -"))
	if err != nil || r.lease != 1 {
		t.Fatalf("A k %.12s… -: lease %v, %v; want 1ns", tiny, r.lease, err)
	}
	zero := "0." + strings.Repeat("0", 400)
	if r, err = parse([]byte("A k 30 " + zero)); err != nil || r.wait != 0 {
		t.Fatalf("A k 30 0.000…0: wait %v, %v; want 0 (no limit)", r.wait, err)
	}
	if _, err = parse([]byte("A k " + zero + " -")); err == nil {
		t.Fatalf("A k 0.000…0 -: a lease of 0 accepted")
	}
}

// BenchmarkParse reads the lines of a cycle: the Go client's acquire (an
// id= and an owner=), a plain acquire and a release.
func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct{ name, line string }{
		{"acquire-id-owner", "A jobs/nightly 30 - id=QWERTYUIOPASDFGHJKLZXCVBNM-1k2 owner=build-host-7%3A4242"},
		{"acquire", "A jobs/nightly 30 -"},
		{"release", "R jobs/nightly 123456"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			line := []byte(bc.line)
			b.ReportAllocs()
			for range b.N {
				if _, err := parse(line); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
