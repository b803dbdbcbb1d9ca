package nline

import (
	"testing"
	"time"
)

// A grant has exactly three fields after OK: token, lease, expiry.
func TestParseAnswerGrantFields(t *testing.T) {
	a, err := ParseAnswer("A k OK 7 1.5 1700000000123")
	if err != nil || a.Op != OpAcquire || a.Key != "k" || a.Token != 7 || a.Lease != 1500*time.Millisecond || a.Expires.UnixMilli() != 1700000000123 {
		t.Fatalf("read as %+v, %v", a, err)
	}
	for _, line := range []string{
		"A k OK", "A k OK 7", "A k OK 7 1", "A k OK 7 1 2 3", "A k OK 7  1 2",
		"A k OK 7 1 2 ", "A k OK 7 -1 2", "A k OK 7 1 x", "N k OK 0 1 2",
	} {
		if a, err := ParseAnswer(line); err == nil {
			t.Errorf("%q read as %+v, want an error", line, a)
		}
	}
}
