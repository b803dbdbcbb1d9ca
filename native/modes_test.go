package native_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/native"
)

// TestOwnerAndLimit: limit= makes a counting semaphore with the first
// acquire of the key, owner= labels each holder (percent-decoded), and a
// holder above the limit waits.
func TestOwnerAndLimit(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	a, b, c := e.dial(), e.dial(), e.dial()
	a.send("A sem 10 - limit=2 owner=job%201")
	ta := grant(t, a.read(), "sem")
	b.send("A sem 10 - owner=job2 limit=2")
	tb := grant(t, b.read(), "sem")
	c.send("A sem 10 0.05 limit=2 owner=job3")
	if line := c.read(); line != "A sem T" {
		t.Fatalf("a third holder under limit 2: %q", line)
	}
	li, _ := e.eng.Status("sem")
	if li.Limit != 2 || len(li.Holders) != 2 || li.Waiters != 0 {
		t.Fatalf("sem: limit %d, %d holders, %d waiters", li.Limit, len(li.Holders), li.Waiters)
	}
	for i, want := range []struct {
		token uint64
		owner string
	}{{ta, "job 1"}, {tb, "job2"}} {
		if h := li.Holders[i]; h.Token != want.token || h.Owner != want.owner || h.Mode != engine.Exclusive {
			t.Errorf("holder %d: token %d owner %q mode %v, want %d %q exclusive", i, h.Token, h.Owner, h.Mode, want.token, want.owner)
		}
	}
	// The released slot goes to the waiter, with its owner.
	c.send("A sem 10 - owner=job3")
	waitFor(t, func() bool { li, _ := e.eng.Status("sem"); return li.Waiters == 1 })
	a.send("R sem " + strconv.FormatUint(ta, 10))
	if line := a.read(); line != "R sem OK" {
		t.Fatal(line)
	}
	tc := grant(t, c.read(), "sem")
	if li, _ := e.eng.Status("sem"); len(li.Holders) != 2 || li.Holders[1].Token != tc || li.Holders[1].Owner != "job3" {
		t.Fatalf("after the handoff: %+v", li.Holders)
	}
}

// TestSharedMode: mode=shared holders hold together, an exclusive one
// waits for all of them, and a shared one never joins an exclusive holder.
func TestSharedMode(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	r1, r2, w := e.dial(), e.dial(), e.dial()
	r1.send("A rw 10 - mode=shared")
	t1 := grant(t, r1.read(), "rw")
	r2.send("A rw 10 - mode=shared owner=reader2")
	t2 := grant(t, r2.read(), "rw")
	w.send("A rw 10 - mode=exclusive")
	waitFor(t, func() bool { li, _ := e.eng.Status("rw"); return li.Waiters == 1 })
	li, _ := e.eng.Status("rw")
	if len(li.Holders) != 2 || li.Holders[0].Mode != engine.Shared || li.Holders[1].Mode != engine.Shared || li.OldestMode != engine.Exclusive {
		t.Fatalf("rw: %+v", li)
	}
	r1.send("R rw " + strconv.FormatUint(t1, 10))
	if line := r1.read(); line != "R rw OK" {
		t.Fatal(line)
	}
	if !w.quiet(50e6) {
		t.Fatal("the writer was answered while a reader holds")
	}
	r2.send("R rw " + strconv.FormatUint(t2, 10))
	if line := r2.read(); line != "R rw OK" {
		t.Fatal(line)
	}
	tw := grant(t, w.read(), "rw")
	r1.send("A rw 10 0.05 mode=shared")
	if line := r1.read(); line != "A rw T" {
		t.Fatalf("a reader beside the writer: %q", line)
	}
	if li, _ := e.eng.Status("rw"); len(li.Holders) != 1 || li.Holders[0].Token != tw || li.Holders[0].Mode != engine.Exclusive {
		t.Fatalf("rw: %+v", li.Holders)
	}
}

// TestLimitMismatch: naming another limit than the key's is E
// limit_mismatch and changes nothing; naming none takes the key's.
func TestLimitMismatch(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	c := e.dial()
	c.send("A lm 10 - limit=3")
	grant(t, c.read(), "lm")
	c.send("A lm 10 - limit=2")
	if line := c.read(); line != "A lm E limit_mismatch limit: the key exists with limit 3: name that limit, or none" {
		t.Fatalf("limit 2 on a key of limit 3: %q", line)
	}
	if li, _ := e.eng.Status("lm"); li.Limit != 3 || len(li.Holders) != 1 || li.Waiters != 0 {
		t.Fatalf("lm after the mismatch: limit %d, %d holders, %d waiters", li.Limit, len(li.Holders), li.Waiters)
	}
	c.send("A lm 10 -")
	grant(t, c.read(), "lm")
	c.send("A lm 10 - limit=3")
	grant(t, c.read(), "lm")
}

// TestForceRelease: on a node without tokens, "R <key> force" releases
// every holder and the queue moves on; the old tokens no longer release.
func TestForceRelease(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	h1, h2, w, op := e.dial(), e.dial(), e.dial(), e.dial()
	h1.send("A fr 10 - mode=shared")
	t1 := grant(t, h1.read(), "fr")
	h2.send("A fr 10 - mode=shared")
	grant(t, h2.read(), "fr")
	w.send("A fr 10 - owner=next")
	waitFor(t, func() bool { li, _ := e.eng.Status("fr"); return li.Waiters == 1 })

	op.send("R fr force")
	if line := op.read(); line != "R fr OK" {
		t.Fatalf("forced release: %q", line)
	}
	tw := grant(t, w.read(), "fr")
	if li, _ := e.eng.Status("fr"); len(li.Holders) != 1 || li.Holders[0].Token != tw || li.Holders[0].Owner != "next" {
		t.Fatalf("fr after the forced release: %+v", li.Holders)
	}
	h1.send("R fr " + strconv.FormatUint(t1, 10))
	if line := h1.read(); line != "R fr E not_holder the lock is held under another token" {
		t.Fatalf("release by a forced-out holder: %q", line)
	}
	op.send("R free force")
	if line := op.read(); line != "R free E not_held nobody holds the lock" {
		t.Fatalf("forced release of a free key: %q", line)
	}
}

// TestForceReleaseUnderAnID: "R <key> force id=<id>" is a force the node
// remembers under id, as DELETE ?force=true with an Idempotency-Key: a
// repeat (on any connection) is answered OK as the first was and changes
// nothing, though the waiter the first force granted now holds the key;
// an id an acquire of the key holds, or an acquire under a force's id, is
// E idempotency_key_reused, nothing changed.
func TestForceReleaseUnderAnID(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	h, w, op, op2 := e.dial(), e.dial(), e.dial(), e.dial()
	h.send("A fi 10 - id=acq-1")
	grant(t, h.read(), "fi")
	w.send("A fi 10 - owner=next")
	waitFor(t, func() bool { li, _ := e.eng.Status("fi"); return li.Waiters == 1 })

	op.send("R fi force id=acq-1")
	if line := op.read(); !strings.HasPrefix(line, "R fi E idempotency_key_reused ") {
		t.Fatalf("force under an acquire's id: %q", line)
	}
	if li, _ := e.eng.Status("fi"); len(li.Holders) != 1 || li.Holders[0].Owner == "next" || li.Waiters != 1 {
		t.Fatalf("fi after the refused force: %+v, %d waiters", li.Holders, li.Waiters)
	}
	op.send("R fi force id=ops%201")
	if line := op.read(); line != "R fi OK" {
		t.Fatalf("forced release under an id: %q", line)
	}
	tw := grant(t, w.read(), "fi")
	for _, c := range []*client{op, op2} {
		c.send("R fi force id=ops%201")
		if line := c.read(); line != "R fi OK" {
			t.Fatalf("repeat of the force: %q", line)
		}
	}
	if li, _ := e.eng.Status("fi"); len(li.Holders) != 1 || li.Holders[0].Token != tw {
		t.Fatalf("fi after the repeats: %+v, want the waiter's grant %d alone", li.Holders, tw)
	}
	op.send("A fi 10 0 id=ops%201")
	if line := op.read(); !strings.HasPrefix(line, "A fi E idempotency_key_reused ") {
		t.Fatalf("acquire under a force's id: %q", line)
	}
	op.send("R fi force id=ops-2")
	if line := op.read(); line != "R fi OK" {
		t.Fatalf("a force under a new id: %q", line)
	}
	if li, _ := e.eng.Status("fi"); len(li.Holders) != 0 {
		t.Fatalf("fi after a force under a new id: %+v", li.Holders)
	}
}

// TestForceReleaseNotHeldUnderAnIDRepeated: a force under an id that finds
// the key free answers E not_held; a repeat under the same id (its answer
// lost) after another client took the key answers E not_held again and
// releases nobody (breaker Q, 2026-12-06: it answered OK and released the
// new holder).
func TestForceReleaseNotHeldUnderAnIDRepeated(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{})
	op, h := e.dial(), e.dial()
	op.send("R fn force id=op-n1")
	first := op.read()
	if !strings.HasPrefix(first, "R fn E not_held ") {
		t.Fatalf("force on a free key: %q", first)
	}
	h.send("A fn 60 -")
	tok := grant(t, h.read(), "fn")
	op.send("R fn force id=op-n1")
	if line := op.read(); line != first {
		t.Fatalf("repeat of the force under its id: %q, want %q as the first", line, first)
	}
	if li, _ := e.eng.Status("fn"); len(li.Holders) != 1 || li.Holders[0].Token != tok {
		t.Fatalf("fn after the repeat: %+v, want the holder %d that came between", li.Holders, tok)
	}
}

// TestForceReleaseNeedsAdmin: with auth_tokens or admin_tokens set, only
// a connection that AUTHed with an admin token may force (E forbidden,
// nothing changed, otherwise); a later AUTH changes the connection's
// rights, and an unknown token there is E unauthorized without a close.
func TestForceReleaseNeedsAdmin(t *testing.T) {
	const forbidden = "R k E forbidden a forced release needs one of the node's admin_tokens (AUTH <token>)"
	held := func(t *testing.T, e *env, tok uint64) {
		t.Helper()
		if li, _ := e.eng.Status("k"); li.Holder == nil || li.Holder.Token != tok {
			t.Fatalf("k: holder %+v, want token %d", li.Holder, tok)
		}
	}
	t.Run("auth and admin tokens", func(t *testing.T) {
		e := newEnv(t, engine.Config{}, native.Config{AuthTokens: []string{"user"}, AdminTokens: []string{"ops"}})
		u := e.dial()
		// AUTH and R are answered in order; an A may overtake them.
		u.send("AUTH user", "A k 10 -")
		if line := u.read(); line != "AUTH OK" {
			t.Fatal(line)
		}
		tok := grant(t, u.read(), "k")
		u.send("R k force")
		if line := u.read(); line != forbidden {
			t.Fatalf("force with a user token: %q", line)
		}
		held(t, e, tok)
		u.send("AUTH wrong", "R k force")
		if line := u.read(); !strings.HasPrefix(line, "AUTH E unauthorized ") || strings.Contains(line, "first line") {
			t.Fatalf("a later AUTH with an unknown token: %q (not the first line's message)", line)
		}
		if line := u.read(); line != forbidden {
			t.Fatalf("force after a refused AUTH: %q", line)
		}
		held(t, e, tok)

		// An admin token authenticates too, and may force.
		a := e.dial()
		a.send("AUTH ops", "R k force")
		if line := a.read(); line != "AUTH OK" {
			t.Fatal(line)
		}
		if line := a.read(); line != "R k OK" {
			t.Fatalf("force with an admin token: %q", line)
		}
		a.send("A k2 10 -")
		grant(t, a.read(), "k2")
		if li, _ := e.eng.Status("k"); li.Holder != nil {
			t.Fatalf("k still held: %+v", li.Holder)
		}

		// A later AUTH with the admin token gives the user connection the
		// right; one with a user token takes it away again.
		u.send("A k 10 -")
		tok = grant(t, u.read(), "k")
		u.send("AUTH ops", "R k force")
		if line := u.read(); line != "AUTH OK" {
			t.Fatal(line)
		}
		if line := u.read(); line != "R k OK" {
			t.Fatalf("force after AUTH with an admin token: %q", line)
		}
		u.send("A k 10 -")
		tok = grant(t, u.read(), "k")
		u.send("AUTH user", "R k force")
		if line := u.read(); line != "AUTH OK" {
			t.Fatal(line)
		}
		if line := u.read(); line != forbidden {
			t.Fatalf("force after AUTH with a user token again: %q", line)
		}
		held(t, e, tok)
	})
	t.Run("admin tokens only", func(t *testing.T) {
		e := newEnv(t, engine.Config{}, native.Config{AdminTokens: []string{"ops"}})
		c := e.dial()
		c.send("A k 10 -")
		tok := grant(t, c.read(), "k")
		c.send("R k force")
		if line := c.read(); line != forbidden {
			t.Fatalf("force without AUTH: %q", line)
		}
		held(t, e, tok)
		c.send("AUTH nope", "AUTH ops", "R k force")
		if line := c.read(); !strings.HasPrefix(line, "AUTH E unauthorized ") {
			t.Fatalf("AUTH with an unknown token: %q", line)
		}
		if line := c.read(); line != "AUTH OK" {
			t.Fatal(line)
		}
		if line := c.read(); line != "R k OK" {
			t.Fatalf("force after AUTH with an admin token: %q", line)
		}
		if li, _ := e.eng.Status("k"); li.Holder != nil {
			t.Fatalf("k still held: %+v", li.Holder)
		}
	})
}

// A later AUTH line without its token, or with more than one, changes
// nothing and keeps the connection (README's table: "on a later line:
// AUTH E unauthorized …, nothing changes"; a malformed line whose op can
// be read is answered, not a reason to close). Before, both were fatal:
// "AUTH - E invalid_argument fields: …" and the connection closed, its
// parked acquires leaving their queues.
func TestLaterMalformedAuthKeepsTheConnection(t *testing.T) {
	e := newEnv(t, engine.Config{}, native.Config{AuthTokens: []string{"user"}, AdminTokens: []string{"ops"}})
	c := e.dial()
	c.send("AUTH ops", "A k 10 -")
	if line := c.read(); line != "AUTH OK" {
		t.Fatal(line)
	}
	grant(t, c.read(), "k")
	for _, bad := range []struct{ line, want string }{
		{"AUTH", "AUTH E unauthorized "},
		{"AUTH ", "AUTH E unauthorized "},
		{"AUTH a b", "AUTH - E invalid_argument fields: "},
		{"AUTH  ops", "AUTH - E invalid_argument fields: "},
	} {
		c.send(bad.line, "P alive")
		if line := c.read(); !strings.HasPrefix(line, bad.want) {
			t.Fatalf("%q: got %q, want %q…", bad.line, line, bad.want)
		}
		if line := c.read(); line != "P alive OK" {
			t.Fatalf("after %q: got %q, want the connection to go on", bad.line, line)
		}
	}
	// The connection kept its admin rights.
	c.send("R k force")
	if line := c.read(); line != "R k OK" {
		t.Fatalf("force after the refused AUTH lines: %q", line)
	}
}
