package main

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// epoch is the origin of the shared in-process monotonic clock: every
// timestamp the workloads record is nanoseconds since epoch, read through
// the monotonic reading time.Now carries, so timestamps taken by different
// clients compare directly.
var epoch = time.Now()

// now returns the shared monotonic clock in nanoseconds since epoch.
func now() int64 { return int64(time.Since(epoch)) }

// field is one optional key=value of a RESULT line.
type field struct {
	name  string
	value float64
}

// Result is the outcome of one run of one workload against one target. Its
// String form is the RESULT line; its fields are what the median and the
// ratios are computed from.
type Result struct {
	Workload string
	Proto    string
	Client   string
	Target   string
	C        int
	// OpsS is the workload's rate: cycles/s (uncontended), grants/s
	// (contended), drain grants/s (waiters), acquires/s while filling (keys).
	OpsS float64
	// P50, P99 and P999 are acquire latencies (request sent to grant
	// received) in microseconds.
	P50, P99, P999 float64
	// Extra holds the workload-specific fields, in print order.
	Extra []field
	// Errors counts failed calls during the run.
	Errors int64
	// Run is "i/N" for a single run or "median/N" for the median line.
	Run string
}

// set sets (or replaces) an extra field.
func (r *Result) set(name string, v float64) {
	for i := range r.Extra {
		if r.Extra[i].name == name {
			r.Extra[i].value = v
			return
		}
	}
	r.Extra = append(r.Extra, field{name, v})
}

// get returns an extra or core numeric field by name.
func (r *Result) get(name string) (float64, bool) {
	switch name {
	case "c":
		return float64(r.C), true
	case "ops_s":
		return r.OpsS, true
	case "p50_us":
		return r.P50, true
	case "p99_us":
		return r.P99, true
	case "p999_us":
		return r.P999, true
	case "errors":
		return float64(r.Errors), true
	}
	for _, f := range r.Extra {
		if f.name == name {
			return f.value, true
		}
	}
	return 0, false
}

// fmtNum prints a figure compactly: integers as integers, else 3
// significant decimals at most.
func fmtNum(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "NaN"
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return strconv.FormatInt(int64(v), 10)
	}
	if math.Abs(v) >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}

// String renders the RESULT line.
func (r *Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "RESULT workload=%s proto=%s client=%s target=%s c=%d ops_s=%s p50_us=%s p99_us=%s p999_us=%s",
		r.Workload, r.Proto, r.Client, r.Target, r.C, fmtNum(r.OpsS), fmtNum(r.P50), fmtNum(r.P99), fmtNum(r.P999))
	for _, f := range r.Extra {
		fmt.Fprintf(&b, " %s=%s", f.name, fmtNum(f.value))
	}
	fmt.Fprintf(&b, " errors=%d", r.Errors)
	if r.Run != "" {
		fmt.Fprintf(&b, " run=%s", r.Run)
	}
	return b.String()
}

// parseResult splits a RESULT line into its key=value pairs. It reports an
// error if the line is not a RESULT line or a pair is malformed.
func parseResult(line string) (map[string]string, error) {
	parts := strings.Fields(line)
	if len(parts) == 0 || parts[0] != "RESULT" {
		return nil, fmt.Errorf("not a RESULT line: %q", line)
	}
	m := make(map[string]string, len(parts))
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("malformed pair %q in %q", p, line)
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("duplicate key %q in %q", k, line)
		}
		m[k] = v
	}
	for _, k := range []string{"workload", "proto", "client", "target", "c", "ops_s", "p50_us", "p99_us", "p999_us"} {
		if _, ok := m[k]; !ok {
			return nil, fmt.Errorf("missing %s in %q", k, line)
		}
	}
	return m, nil
}

// median returns the per-field median of runs (all of one workload and
// target). Fields missing from some runs take the median of the runs that
// have them.
func median(runs []*Result) *Result {
	if len(runs) == 0 {
		return nil
	}
	first := runs[0]
	m := &Result{
		Workload: first.Workload, Proto: first.Proto, Client: first.Client,
		Target: first.Target, C: first.C,
		Run: fmt.Sprintf("median/%d", len(runs)),
	}
	med := func(name string) float64 {
		var vs []float64
		for _, r := range runs {
			if v, ok := r.get(name); ok {
				vs = append(vs, v)
			}
		}
		return medianOf(vs)
	}
	m.OpsS = med("ops_s")
	m.P50, m.P99, m.P999 = med("p50_us"), med("p99_us"), med("p999_us")
	m.Errors = int64(med("errors"))
	seen := map[string]bool{}
	for _, r := range runs {
		for _, f := range r.Extra {
			if !seen[f.name] {
				seen[f.name] = true
				m.Extra = append(m.Extra, field{f.name, med(f.name)})
			}
		}
	}
	return m
}

// medianOf returns the median of vs (the mean of the middle two for an even
// count), NaN for none.
func medianOf(vs []float64) float64 {
	if len(vs) == 0 {
		return math.NaN()
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// percentiles returns the p50, p99 and p99.9 of samples (nanoseconds) in
// microseconds, sorting samples in place. Nearest-rank; zeros for none.
func percentiles(samples []int64) (p50, p99, p999 float64) {
	if len(samples) == 0 {
		return 0, 0, 0
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	at := func(q float64) float64 {
		i := int(math.Ceil(q*float64(len(samples)))) - 1
		if i < 0 {
			i = 0
		}
		if i >= len(samples) {
			i = len(samples) - 1
		}
		return float64(samples[i]) / 1e3
	}
	return at(0.50), at(0.99), at(0.999)
}
