package handlers

import (
	"errors"
	"math"
	"net/url"
	"regexp"
	"strconv"
	"testing"
)

// The number syntaxes are hand-written scanners; these tests hold them to
// the regular expressions they replace, which state the rule plainly.
var (
	secondsRE = regexp.MustCompile(`^-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$`)
	tokenRE   = regexp.MustCompile(`^[1-9][0-9]*$`)
)

var syntaxSeeds = []string{
	"", "0", "1", "30", "0.5", ".5", "5.", "-1", "-0.5", "-.5", "1e3", "1E3", "1e+3", "1e-3",
	"1.5e3", ".5e1", "5.e1", "e3", ".e3", ".", "-", "+1", "1e", "1e+", "1e3.5", "0x10", "1_000",
	"Inf", "NaN", " 1", "1 ", "01", "007", "12a", "١", "1e99999", "9007199254740991",
}

func TestNumberSyntaxMatchesRule(t *testing.T) {
	for _, v := range syntaxSeeds {
		if got, want := secondsSyntax(v), secondsRE.MatchString(v); got != want {
			t.Errorf("secondsSyntax(%q) = %v, the rule says %v", v, got, want)
		}
		if got, want := tokenSyntax(v), tokenRE.MatchString(v); got != want {
			t.Errorf("tokenSyntax(%q) = %v, the rule says %v", v, got, want)
		}
	}
}

func FuzzNumberSyntax(f *testing.F) {
	for _, v := range syntaxSeeds {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if got, want := secondsSyntax(v), secondsRE.MatchString(v); got != want {
			t.Errorf("secondsSyntax(%q) = %v, the rule says %v", v, got, want)
		}
		if got, want := tokenSyntax(v), tokenRE.MatchString(v); got != want {
			t.Errorf("tokenSyntax(%q) = %v, the rule says %v", v, got, want)
		}
	})
}

// FuzzQueryString holds setQuery to url.ParseQuery: it accepts exactly the
// query strings ParseQuery does, and finds the same values.
func FuzzQueryString(f *testing.F) {
	for _, q := range []string{"", "lease=30", "lease=30&wait=1", "lease=1&lease=2", "a;b", "lease=%zz",
		"lease=%33", "le%61se=3", "lease=1+2", "&&lease=1&", "wait", "ticket=ab&wait=0.5", "bogus=1"} {
		f.Add(q)
	}
	names := allowed["POST"]
	f.Fuzz(func(t *testing.T, q string) {
		var p lockParams
		var from sources
		err := p.setQuery(q, "POST", names, &from)
		vals, perr := url.ParseQuery(q)
		if perr != nil {
			if err == nil {
				t.Fatalf("setQuery(%q) accepted what url.ParseQuery refuses: %v", q, perr)
			}
			return
		}
		valid := true
		for name, vs := range vals {
			if index(names, name) < 0 || len(vs) != 1 {
				valid = false
			}
		}
		if !valid {
			if err == nil {
				t.Fatalf("setQuery(%q) accepted unknown or repeated parameters %v", q, vals)
			}
			return
		}
		var want lockParams
		for name, vs := range vals {
			if err := want.set(name, vs[0]); err != nil {
				valid = false
			}
		}
		if !valid {
			if err == nil {
				t.Fatalf("setQuery(%q) accepted a bad value", q)
			}
			return
		}
		if err != nil {
			t.Fatalf("setQuery(%q): %v; url.ParseQuery reads %v", q, err, vals)
		}
		for i, name := range names {
			if (from[i] == "query") != (vals[name] != nil) {
				t.Fatalf("setQuery(%q) marked %s as %q; url.ParseQuery reads %v", q, name, from[i], vals)
			}
		}
		if p.Lease != want.Lease || p.Wait != want.Wait || p.Ticket != want.Ticket {
			t.Fatalf("setQuery(%q) = %+v, want %+v", q, p, want)
		}
	})
}

// FuzzSecondsValue holds parseSeconds to strconv.ParseFloat, bit for bit:
// its fast path must round exactly as ParseFloat does. A number too large
// for a float64 (ParseFloat: ±Inf, ErrRange) is the largest float64 of its
// sign.
func FuzzSecondsValue(f *testing.F) {
	for _, v := range append(syntaxSeeds, "0.1", "0.3", "123456789012345", "1234567890123456", "9.999999999999999e22",
		"1e22", "1e23", "1e-22", "1e-23", "0.000000000000000000001", "4.35", "-0", "00030.500", "1e+007") {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got, err := parseSeconds("lease", v)
		want, perr := strconv.ParseFloat(v, 64)
		if errors.Is(perr, strconv.ErrRange) && math.IsInf(want, 0) {
			want, perr = math.Copysign(math.MaxFloat64, want), nil
		}
		valid := secondsSyntax(v) && perr == nil && !math.IsInf(want, 0) && !math.IsNaN(want)
		if valid != (err == nil) {
			t.Fatalf("parseSeconds(%q) error = %v; ParseFloat gives %v, %v", v, err, want, perr)
		}
		if valid && math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("parseSeconds(%q) = %v (%x), ParseFloat = %v (%x)", v, got, math.Float64bits(got), want, math.Float64bits(want))
		}
	})
}
