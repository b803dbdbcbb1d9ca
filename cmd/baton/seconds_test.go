package main

import (
	"testing"
	"time"
)

// A --wait or --lease below a nanosecond is still positive: the shortest
// duration, never 0, which for --wait means no limit (and for --lease the
// server's default). Before, --wait 0.0000000001 on a held lock waited
// for ever.
func TestParseSecondsBelowANanosecond(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"0.0000000001", 1}, {"1e-12", 1}, {"1e-400", 1}, {"0.5ns", 1}, {"0.9ns", 1},
		{"1ns", 1}, {"0.5", 500 * time.Millisecond}, {"1m30s", 90 * time.Second},
		{"0", 0}, {"0.000", 0}, {"0s", 0}, {"0e5", 0},
	} {
		got, err := parseSeconds(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseSeconds(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}
