package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A --wait or --lease above 0 but below a nanosecond is refused, as the
// node refuses lease=1e-10 and wait=1e-10 (a 400 naming the field): it is
// never 0, which for --wait means no limit, and never rounded up to 1 ns,
// another request than the one written. Before, the CLI sent 1 ns.
func TestParseSecondsBelowANanosecond(t *testing.T) {
	for _, in := range []string{"0.0000000001", "1e-12", "1e-400", "0.5ns", "0.9ns", "0.0000000009"} {
		if got, err := parseSeconds(in); err == nil || !strings.Contains(err.Error(), "below 1 ns") {
			t.Errorf("parseSeconds(%q) = %v, %v; want an error saying it is below 1 ns", in, got, err)
		}
	}
	for _, c := range []struct {
		in   string
		want time.Duration
	}{
		{"1ns", 1}, {"0.000000001", 1}, {"1e-9", 1}, {"0.5", 500 * time.Millisecond}, {"1m30s", 90 * time.Second},
		{"0", 0}, {"0.000", 0}, {"0s", 0}, {"0e5", 0}, {"0e-400", 0},
	} {
		got, err := parseSeconds(c.in)
		if err != nil || got != c.want {
			t.Errorf("parseSeconds(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

// Through the commands: a --lease or --wait below 1 ns is a usage error
// (exit 2) naming the flag, and nothing reaches the node. Before, acquire
// --lease 1e-10 was granted a 1 ns lease (and, the grant ended before its
// answer was read, acquired again up to ten more times).
func TestDurationFlagBelowANanosecondIsUsage(t *testing.T) {
	url := startNode(t)
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"acquire", "k", "--lease", "1e-10"}, "--lease"},
		{[]string{"acquire", "k", "--lease", "0.5ns"}, "--lease"},
		{[]string{"acquire", "k", "--wait", "0.0000000001"}, "--wait"},
		{[]string{"acquire", "k", "--wait", "1e-400"}, "--wait"},
		{[]string{"renew", "k", "1", "--lease", "1e-12"}, "--lease"},
		{[]string{"run", "k", "--wait", "1e-10", "--", "true"}, "--wait"},
		{[]string{"run", "k", "--lease", "0.1ns", "--", "true"}, "--lease"},
	} {
		r := runCLI(t, url, false, c.args[0], c.args[1:]...)
		if msg := r.stderr.String(); r.code != exitUsage || !strings.Contains(msg, c.flag) || !strings.Contains(msg, "below 1 ns") {
			t.Errorf("baton %s: exit %d, stderr %q; want exit %d naming %s, below 1 ns", strings.Join(c.args, " "), r.code, msg, exitUsage, c.flag)
		}
	}
	resp, err := http.Get(url + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ev struct{ Events []json.RawMessage }
	if err := json.NewDecoder(resp.Body).Decode(&ev); err != nil {
		t.Fatal(err)
	}
	if len(ev.Events) != 0 {
		t.Errorf("the node has %d events after refused commands, want none: %s", len(ev.Events), ev.Events[0])
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
