package keyrule

import (
	"strings"
	"testing"
)

func TestProblem(t *testing.T) {
	for _, c := range []struct{ s, want string }{
		{"", ""},
		{"orders/42", ""},
		{strings.Repeat("é", 128), ""},
		{strings.Repeat("k", MaxBytes+1), "is 257 bytes; at most 256 are allowed"},
		{"\xff", "is not valid UTF-8"},
		{"a\x00b", "contains the control character U+0000"},
		{"a\tb", "contains the control character U+0009"},
		{"a\x7fb", "contains the control character U+007F"},
		{"a\u0085b", "contains the control character U+0085"},
		{"a\u00a0b", ""},
		{"a\u202eb", ""},
	} {
		if got := Problem(c.s); got != c.want {
			t.Errorf("Problem(%.20q) = %q, want %q", c.s, got, c.want)
		}
	}
}
