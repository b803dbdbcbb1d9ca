package native

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/baton-io/baton/engine"
)

// FuzzParse: the line parser never panics; what it accepts is a valid
// request (a ping with one word; a cancel with a key and an id the engine
// takes; a key the engine takes, a lease >= 0, a token below 2^53, an
// owner, mode and limit the engine takes) that
// reads back the same after Escape; what it refuses is a *lineError that
// names a field and, unless fatal, repeats the line's op and key field.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"A k 10 -", "A k - - id=x", "A k%20b 0.5 .5 id=a%25b", "R k 12", "R k force",
		"N k 1 30", "AUTH tok", "A k", "GET / HTTP/1.1", "A %zz 1 1", "A k 1e3 -",
		"A k 10 - owner=me", "A k 10 - mode=shared limit=3 owner=a%20b", "A k - - limit=0",
		"A k - - mode=x", "A k - - limit=10001", "A k - - owner=", "R k 9007199254740992", "\xff", "A k 10 \xff", "N k 1 -\r",
		"P 1", "P a b", "C k x", "C 0 0", "C k%20b a%25b", "C k", "C k x y",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		r, err := parse(line)
		if err != nil {
			var le *lineError
			if !errors.As(err, &le) || le.field == "" || le.msg == "" {
				t.Fatalf("%q: error %v is not a lineError naming a field", line, err)
			}
			if !le.fatal {
				fields := strings.Split(strings.TrimSuffix(string(line), "\r"), " ")
				// (A malformed AUTH, which has no key, repeats "-".)
				if le.op == OpAuth && le.rawKey == "-" {
					return
				}
				if le.op != fields[0] || le.rawKey != fields[1] || !utf8.ValidString(le.rawKey) {
					t.Fatalf("%q: non-fatal error with op %q key %q", line, le.op, le.rawKey)
				}
			}
			return
		}
		switch r.op {
		case OpAuth:
			// A missing token is "" (refused by checkAuth), never a
			// field of more than one word.
			if strings.Contains(r.auth, " ") {
				t.Fatalf("%q: AUTH token %q", line, r.auth)
			}
			return
		case OpPing:
			// The word is echoed as sent: one field, no space.
			if r.rawKey == "" || strings.ContainsAny(r.rawKey, " \n") {
				t.Fatalf("%q: ping word %q", line, r.rawKey)
			}
			return
		case OpCancel:
			if engine.CheckKey(r.key) != nil || !engine.ValidID(r.id) {
				t.Fatalf("%q: accepted cancel of key %q id %q", line, r.key, r.id)
			}
			return
		case OpAcquire, OpRelease, OpRenew:
		default:
			t.Fatalf("%q: accepted op %q", line, r.op)
		}
		if err := engine.CheckKey(r.key); err != nil {
			t.Fatalf("%q: accepted key %q: %v", line, r.key, err)
		}
		if engine.CheckOwner(r.owner) != nil || r.mode != engine.Exclusive && r.mode != engine.Shared || r.limit < 0 || r.limit > engine.MaxLimit {
			t.Fatalf("%q: accepted owner %q mode %v limit %d", line, r.owner, r.mode, r.limit)
		}
		if r.lease < 0 || r.wait < 0 || r.token >= 1<<53 {
			t.Fatalf("%q: accepted %+v", line, r)
		}
		if (r.op == OpRenew || r.op == OpRelease && !r.force) && r.token == 0 {
			t.Fatalf("%q: no token", line)
		}
		back, ok := unescape(Escape(r.key))
		if !ok || back != r.key {
			t.Fatalf("%q: Escape(%q) reads back as %q", line, r.key, back)
		}
	})
}
