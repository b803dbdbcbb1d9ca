package native

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/nline"
)

// TestClientCodec checks the clients' line encoder (internal/nline)
// against this package's parser, the reference: every line it writes
// parses back to the values it was given.
func TestClientCodec(t *testing.T) {
	keys := []string{"a", "orders/42", "with space", "100%", "ünï/ cödé"}
	for _, key := range keys {
		raw := nline.Escape(key)
		o := nline.AcquireOptions{ID: "ID-1%x", Owner: "host one:42", Mode: "shared", Limit: 3}
		line := nline.AppendAcquire(nil, raw, 1500*time.Millisecond, 250*time.Millisecond, o)
		r, err := parse(trimNL(t, line))
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if r.op != OpAcquire || r.rawKey != raw || r.key != key || r.lease != 1500*time.Millisecond || r.wait != 250*time.Millisecond ||
			r.id != o.ID || r.owner != o.Owner || r.mode != engine.Shared || r.limit != 3 {
			t.Errorf("%q parsed as %+v", line, r)
		}
		line = nline.AppendAcquire(nil, raw, 0, 0, nline.AcquireOptions{})
		if r, err = parse(trimNL(t, line)); err != nil || r.lease != 0 || r.wait != 0 || r.id != "" || r.mode != engine.Exclusive {
			t.Errorf("%q parsed as %+v, %v", line, r, err)
		}
		line = nline.AppendRelease(nil, raw, 1<<53-1)
		if r, err = parse(trimNL(t, line)); err != nil || r.op != OpRelease || r.key != key || r.token != 1<<53-1 || r.force {
			t.Errorf("%q parsed as %+v, %v", line, r, err)
		}
		line = nline.AppendForceRelease(nil, raw, o.ID)
		if r, err = parse(trimNL(t, line)); err != nil || r.op != OpRelease || r.key != key || !r.force || r.id != o.ID {
			t.Errorf("%q parsed as %+v, %v", line, r, err)
		}
		line = nline.AppendRenew(nil, raw, 7, 2*time.Second)
		if r, err = parse(trimNL(t, line)); err != nil || r.op != OpRenew || r.key != key || r.token != 7 || r.lease != 2*time.Second {
			t.Errorf("%q parsed as %+v, %v", line, r, err)
		}
		line = nline.AppendRenew(nil, raw, 7, 0)
		if r, err = parse(trimNL(t, line)); err != nil || r.lease != 0 {
			t.Errorf("%q parsed as %+v, %v", line, r, err)
		}
	}
	line := nline.AppendAuth(nil, "s3cret")
	if r, err := parse(trimNL(t, line)); err != nil || r.op != OpAuth || r.auth != "s3cret" {
		t.Errorf("%q parsed as %+v, %v", line, r, err)
	}
	line = nline.AppendPing(nil, "1z")
	if r, err := parse(trimNL(t, line)); err != nil || r.op != OpPing || r.rawKey != "1z" {
		t.Errorf("%q parsed as %+v, %v", line, r, err)
	}
}

// TestClientAnswers checks nline.ParseAnswer on the lines this server
// writes.
func TestClientAnswers(t *testing.T) {
	exp := time.UnixMilli(1_700_000_000_123)
	g := engine.Grant{Key: "k", Token: 42, Lease: 1500 * time.Millisecond, ExpiresAt: exp}
	grant := string(appendGrant([]byte("A a%20b OK "), g))
	a, err := nline.ParseAnswer(strings.TrimSuffix(grant, "\n"))
	if err != nil || a.ID() != "A a%20b" || a.Outcome != nline.OK || a.Token != 42 || a.Lease != 1500*time.Millisecond || !a.Expires.Equal(exp) {
		t.Errorf("%q read as %+v, %v", grant, a, err)
	}
	e := string(errorLine("R", "k", "not_holder", "the lock is\nheld under another token").line)
	a, err = nline.ParseAnswer(strings.TrimSuffix(e, "\n"))
	if err != nil || a.ID() != "R k" || a.Outcome != nline.Error || a.Code != "not_holder" || a.Message != "the lock is held under another token" {
		t.Errorf("%q read as %+v, %v", e, a, err)
	}
	e = string(errorLine("A", "k", "invalid_argument", "lease: must be greater than 0 seconds").line)
	if a, err = nline.ParseAnswer(strings.TrimSuffix(e, "\n")); err != nil || a.Field() != "lease" {
		t.Errorf("%q read as %+v (field %q), %v", e, a, a.Field(), err)
	}
	for line, id := range map[string]string{
		"A k T":                                "A k",
		"R k OK":                               "R k",
		"N k M 10.0.0.2:7071":                  "N k",
		"AUTH OK":                              "AUTH ",
		"P 1z OK":                              "P 1z",
		"AUTH E unauthorized " + authFailed:    "AUTH ",
		"- - E invalid_argument op: not an op": "- -",
	} {
		if a, err := nline.ParseAnswer(line); err != nil || a.ID() != id {
			t.Errorf("%q read as %+v (id %q), %v; want id %q", line, a, a.ID(), err, id)
		}
	}
	for _, line := range []string{"", "A", "A k", "A k OK", "A k OK 0 1 2", "A k OK x 1 2", "A k X", "R k T", "A k M", "A k M a b", "A k E", "R k OK extra"} {
		if a, err := nline.ParseAnswer(line); err == nil {
			t.Errorf("%q read as %+v, want an error", line, a)
		}
	}
}

func trimNL(t *testing.T, line []byte) []byte {
	t.Helper()
	if len(line) == 0 || line[len(line)-1] != '\n' {
		t.Fatalf("%q does not end in a newline", line)
	}
	if strings.Count(string(line), "\n") != 1 {
		t.Fatalf("%q has more than one line", line)
	}
	return line[:len(line)-1]
}
