package main

import (
	"strconv"
	"strings"
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

// A negative number of seconds is called negative, as a negative Go
// duration is: before, --lease -1 said only that "-1" was out of range
// while --lease -1s said it was negative.
func TestParseSecondsNegativeSaysSo(t *testing.T) {
	for _, in := range []string{"-1", "-0.5", "-1e3", "-1s", "-2m"} {
		_, err := parseSeconds(in)
		if err == nil || err.Error() != strconv.Quote(in)+" is negative" {
			t.Errorf("parseSeconds(%q) error = %v; want %q is negative", in, err, in)
		}
	}
}

// NaN is no number of seconds: refused as "abc" is (exit 2), for every
// duration flag. Before, strconv.ParseFloat took "NaN" (any case), which
// passed the range checks and became the duration -2562047h47m16s: --lease
// NaN and --wait NaN went to the node as a negative duration, and
// --acquire-grace NaN was blamed on BATON_ADDR.
func TestParseSecondsRefusesNaN(t *testing.T) {
	for _, in := range []string{"NaN", "nan", "+NaN", "-nan"} {
		got, err := parseSeconds(in)
		if err == nil {
			t.Errorf("parseSeconds(%q) = %v, nil; want an error", in, got)
			continue
		}
		if want := strconv.Quote(in) + " is neither seconds nor a Go duration"; err.Error() != want {
			t.Errorf("parseSeconds(%q) error = %q; want %q", in, err, want)
		}
	}
}

// A number too large for a float64 (1e400) is out of range, as 1e300 is:
// before, ParseFloat's range error sent it on to time.ParseDuration, and
// it was "neither seconds nor a Go duration".
func TestParseSecondsHugeIsOutOfRange(t *testing.T) {
	for _, in := range []string{"1e300", "1e400", "Inf", "+Inf"} {
		_, err := parseSeconds(in)
		if err == nil || !strings.HasSuffix(err.Error(), " is out of range (at most 4611686018 seconds)") {
			t.Errorf("parseSeconds(%q) error = %v; want out of range", in, err)
		}
	}
}
