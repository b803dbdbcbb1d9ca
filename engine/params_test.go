package engine

import (
	"errors"
	"strings"
	"testing"
)

// TestParseParams: the parsers both wire adapters use for owner, mode and
// limit accept exactly the documented values and refuse the rest with an
// *ArgError naming the field.
func TestParseParams(t *testing.T) {
	argField := func(err error) string {
		var ae *ArgError
		if !errors.As(err, &ae) {
			t.Fatalf("error %v is not an *ArgError", err)
		}
		return ae.Field
	}
	for v, want := range map[string]Mode{"exclusive": Exclusive, "shared": Shared} {
		if m, err := ParseMode(v); err != nil || m != want {
			t.Errorf("ParseMode(%q) = %v, %v", v, m, err)
		}
	}
	for _, v := range []string{"", "Shared", "read", "shared ", "1"} {
		if _, err := ParseMode(v); err == nil || argField(err) != "mode" {
			t.Errorf("ParseMode(%q) = %v", v, err)
		}
	}
	for v, want := range map[string]int{"1": 1, "7": 7, "10000": MaxLimit} {
		if n, err := ParseLimit(v); err != nil || n != want {
			t.Errorf("ParseLimit(%q) = %d, %v", v, n, err)
		}
	}
	for v, reason := range map[string]string{
		"": "an integer from 1", "0": "an integer from 1", "01": "an integer from 1", "-1": "an integer from 1",
		"+1": "an integer from 1", "1.0": "an integer from 1", " 1": "an integer from 1", "1e3": "an integer from 1",
		"10001": "at most 10000", "99999999999999999999999": "at most 10000",
	} {
		_, err := ParseLimit(v)
		if err == nil || argField(err) != "limit" || !strings.Contains(err.Error(), reason) {
			t.Errorf("ParseLimit(%q) = %v, want %q", v, err, reason)
		}
	}
	if o, err := ParseOwner("host-1 / job 7"); err != nil || o != "host-1 / job 7" {
		t.Errorf("ParseOwner = %q, %v", o, err)
	}
	for _, v := range []string{"", strings.Repeat("x", MaxOwnerBytes+1), "a\x07b", "\xff"} {
		if _, err := ParseOwner(v); err == nil || argField(err) != "owner" {
			t.Errorf("ParseOwner(%q) = %v", v, err)
		}
	}
}

// ValidID is the one rule for a waiter ID, over HTTP (Idempotency-Key) and
// the native protocol (id=): 1 to MaxIDBytes printable ASCII characters.
func TestValidID(t *testing.T) {
	for id, want := range map[string]bool{
		"":                                   false,
		"a":                                  true,
		"job-7 retry:2":                      true,
		strings.Repeat("x", MaxIDBytes):      true,
		strings.Repeat("x", MaxIDBytes+1):    false,
		"tab\there":                          false,
		"del\x7f":                            false,
		"caf\u00e9":                          false,
		"~!\"#$%&'()*+,-./0123456789:;<=>?@": true,
	} {
		if got := ValidID(id); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", id, got, want)
		}
	}
}
