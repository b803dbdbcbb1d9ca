package handlers_test

import (
	"strings"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// TestTicketIsNotABodyField: a server ticket travels only in the query
// string of a handoff's redirect (SPEC section 3). A JSON body that names
// one is a 400 naming ticket, as any member that is not a field of the
// call's body is, and changes nothing: before, {"ticket":5} was taken as
// the hex ticket "5" (a JSON number read as hex) and the acquire queued
// under it, while a body with a real (hex string) ticket was refused as
// "must be a JSON number".
func TestTicketIsNotABodyField(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	for _, body := range []string{`{"ticket":5,"wait":0.01}`, `{"ticket":1e5,"wait":0.01}`, `{"ticket":"0a1b","wait":0.01}`} {
		r := e.do("POST", "/locks/tb", body)
		if r.code != 400 {
			t.Fatalf("POST %s: got %d %s, want 400", body, r.code, r.body)
		}
		eb := r.errBody(t)
		if eb.Field != "ticket" || !strings.Contains(eb.Message, "not a field of this call's body") {
			t.Fatalf("POST %s: got %+v, want a 400 naming ticket as no body field", body, eb)
		}
		if strings.Contains(eb.Message, "expected lease, wait, ticket") {
			t.Fatalf("POST %s: the message offers ticket as a body field: %q", body, eb.Message)
		}
		if st := e.status("tb"); st.Holder != nil || st.Waiters != 0 {
			t.Fatalf("POST %s changed the key: %+v", body, st)
		}
	}
	// The query string still takes it (the redirect's Location).
	if r := e.do("POST", "/locks/tq?ticket=0a1b&wait=0.01", ""); r.code != 200 {
		t.Fatalf("POST ?ticket=0a1b: got %d %s, want 200", r.code, r.body)
	}
}

// TestTicketIsHexInEitherCase: a ticket is hex, and names its waiter;
// upper-case hex was refused as "not the ticket of a redirect (hex)" (a
// breaker). It is taken in lower case: a repeat that spells it in the
// other case names the same waiter (granted at once here: answered the
// same grant). What is not hex is still a 400 naming ticket that changes
// nothing.
func TestTicketIsHexInEitherCase(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	first := e.do("POST", "/locks/tc?ticket=DEADBEEF&wait=0.01", "")
	if first.code != 200 {
		t.Fatalf("POST ?ticket=DEADBEEF: got %d %s, want 200", first.code, first.body)
	}
	again := e.do("POST", "/locks/tc?ticket=deadbeef&wait=0.01", "")
	if again.code != 200 || again.hdr.Get("Lock-Token") != first.hdr.Get("Lock-Token") {
		t.Fatalf("the retry as ?ticket=deadbeef: got %d %s token %q, want 200 with the first grant's token %q",
			again.code, again.body, again.hdr.Get("Lock-Token"), first.hdr.Get("Lock-Token"))
	}
	for _, bad := range []string{"xyz", "12-34", strings.Repeat("a", 65)} {
		r := e.do("POST", "/locks/tbad?wait=0.01&ticket="+bad, "")
		if r.code != 400 || r.errBody(t).Field != "ticket" {
			t.Fatalf("POST ?ticket=%s: got %d %s, want a 400 naming ticket", bad, r.code, r.body)
		}
		if st := e.status("tbad"); st.Holder != nil || st.Waiters != 0 {
			t.Fatalf("POST ?ticket=%s changed the key: %+v", bad, st)
		}
	}
}

// A repeat under a ticket that asks for something else than the first
// acquire is a 422 whose message names the waiter ID it repeats, a ticket
// among them: it named only "this Idempotency-Key" (a breaker).
func TestTicketRepeatThatDiffersNamesTheWaiterID(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	if r := e.do("POST", "/locks/tr?ticket=ab12&wait=0.01&mode=shared", ""); r.code != 200 {
		t.Fatalf("first: got %d %s, want 200", r.code, r.body)
	}
	r := e.do("POST", "/locks/tr?ticket=ab12&wait=0.01&mode=exclusive", "")
	if r.code != 422 || !strings.Contains(r.errBody(t).Message, "ticket") {
		t.Fatalf("the repeat as exclusive: got %d %s, want a 422 whose message names the ticket", r.code, r.body)
	}
}
