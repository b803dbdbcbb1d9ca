package handlers_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A semaphore of 3 over HTTP (issue 14): three shared holders at once,
// each with its own token and owner, shown in GET /locks/{key} oldest
// grant first with the limit; the 4th waits and gets the slot a release
// frees; another limit is a 409 limit_mismatch.
func TestHTTPSemaphore(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	var gs []api.Grant
	for _, owner := range []string{"web-1", "web-2", "web-3"} {
		gs = append(gs, e.acquire("/locks/quota?limit=3&mode=shared&owner="+owner))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fourth := e.async(ctx, e.client, http.MethodPost, "/locks/quota", `{"limit":3,"mode":"shared","owner":"web-4"}`)
	e.waitWaiters("quota", 1)
	st := e.status("quota")
	if st.Limit != 3 || len(st.Holders) != 3 || st.Holder == nil || st.Holder.Token != gs[0].Token {
		t.Fatalf("status %+v: want 3 holders, limit 3, holder = the first", st)
	}
	for i, h := range st.Holders {
		if h.Token != gs[i].Token || h.Mode != api.ModeShared || h.Owner != []string{"web-1", "web-2", "web-3"}[i] {
			t.Fatalf("holder %d: %+v; want token %d, shared, web-%d", i, h, gs[i].Token, i+1)
		}
	}
	if st.OldestWaiterOwner != "web-4" || st.OldestWaiterMode != api.ModeShared {
		t.Fatalf("oldest waiter %q %q; want web-4, shared", st.OldestWaiterOwner, st.OldestWaiterMode)
	}
	r := e.do(http.MethodPost, "/locks/quota?limit=4&mode=shared", "")
	if eb := r.errBody(t); r.code != http.StatusConflict || eb.Code != api.CodeLimitMismatch || eb.Field != "limit" || !strings.Contains(eb.Message, "limit 3") {
		t.Fatalf("limit 4 on a semaphore of 3: %d %s; want 409 limit_mismatch naming the field limit and the key's limit 3", r.code, r.body)
	}
	if after := e.status("quota"); after.Limit != 3 || len(after.Holders) != 3 || after.Waiters != 1 {
		t.Fatalf("status after the limit_mismatch %+v: want it unchanged (limit 3, 3 holders, 1 waiter)", after)
	}
	e.release("quota", gs[1].Token)
	g := recv(t, fourth, "the 4th").grant(t)
	if g.Token <= gs[2].Token {
		t.Fatalf("4th token %d, not above %d", g.Token, gs[2].Token)
	}
	l := e.list()
	if len(l.Locks) != 1 || len(l.Locks[0].Holders) != 3 || l.Locks[0].Holders[2].Owner != "web-4" {
		t.Fatalf("GET /locks %+v: want quota's 3 holders, web-4 last", l)
	}
}

// A read/write lock over HTTP: readers hold together, a writer waits for
// them and holds alone, and a reader behind the writer waits for it.
func TestHTTPReadWriteLock(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	r1 := e.acquire("/locks/cfg?mode=shared&limit=10&owner=reader-1")
	r2 := e.acquire("/locks/cfg?mode=shared&owner=reader-2") // the key's limit
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writer := e.async(ctx, e.client, http.MethodPost, "/locks/cfg?mode=exclusive&owner=writer", "")
	e.waitWaiters("cfg", 1)
	reader3 := e.async(ctx, e.client, http.MethodPost, "/locks/cfg?mode=shared&owner=reader-3", "")
	e.waitWaiters("cfg", 2)
	e.release("cfg", r1.Token)
	if pending(writer) == false {
		t.Fatal("the writer was granted while a reader holds")
	}
	e.release("cfg", r2.Token)
	w := recv(t, writer, "the writer").grant(t)
	st := e.status("cfg")
	if len(st.Holders) != 1 || st.Holder.Mode != api.ModeExclusive || st.Holder.Owner != "writer" || st.Waiters != 1 {
		t.Fatalf("status %+v: want the writer alone, reader 3 waiting", st)
	}
	e.release("cfg", w.Token)
	recv(t, reader3, "reader 3").grant(t)
}

// Operator release: DELETE ?force=true releases every holder and moves the
// queue on; without auth anyone may; with auth_tokens only admin_tokens
// (403 forbidden for others); bad combinations are 400s naming force.
func TestHTTPForceRelease(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{AuthTokens: []string{"user"}, AdminTokens: []string{"ops"}})
	user := []string{"Authorization", "Bearer user"}
	ops := []string{"Authorization", "Bearer ops"}
	e.acquire("/locks/k?mode=shared&limit=2", user...)
	e.acquire("/locks/k?mode=shared&limit=2", user...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	next := e.async(ctx, e.client, http.MethodPost, "/locks/k", "", user...)
	for range 20000 {
		if r := e.do(http.MethodGet, "/locks/k", "", user...); strings.Contains(string(r.body), `"waiters":1`) {
			break
		}
	}
	for _, c := range []struct {
		path, body string
		hdr        []string
		code       int
		errCode    string
		field      string
	}{
		{"/locks/k?force=true", "", user, 403, api.CodeForbidden, ""},
		{"/locks/k?force=yes", "", ops, 400, api.CodeInvalidArgument, "force"},
		{"/locks/k?force=", "", ops, 400, api.CodeInvalidArgument, "force"},
		{"/locks/k?force=true&token=5", "", ops, 400, api.CodeInvalidArgument, "force"},
		{"/locks/k?force=true", "", append([]string{api.HeaderLockToken, "5"}, ops...), 400, api.CodeInvalidArgument, "force"},
		{"/locks/k", `{"force":false}`, ops, 400, api.CodeInvalidArgument, "force"},
		{"/locks/free?force=true", "", ops, 404, api.CodeNotHeld, ""},
	} {
		r := e.do(http.MethodDelete, c.path, c.body, c.hdr...)
		if r.code != c.code || r.errBody(t).Code != c.errCode || r.errBody(t).Field != c.field {
			t.Errorf("DELETE %s %s: %d %s; want %d %s naming %q", c.path, c.body, r.code, r.body, c.code, c.errCode, c.field)
		}
	}
	var st api.LockStatus
	_ = json.Unmarshal(e.do(http.MethodGet, "/locks/k", "", ops...).body, &st)
	if len(st.Holders) != 2 || st.Waiters != 1 {
		t.Fatalf("after refused forces: %+v; want nothing changed", st)
	}
	r := e.do(http.MethodDelete, "/locks/k", `{"force":true}`, ops...)
	if r.code != http.StatusOK {
		t.Fatalf("forced release: %d %s", r.code, r.body)
	}
	recv(t, next, "the waiter after a forced release").grant(t)
}

// Without auth_tokens and admin_tokens, anyone may force a release.
func TestHTTPForceReleaseWithoutAuth(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	e.acquire("/locks/k")
	if r := e.do(http.MethodDelete, "/locks/k?force=true", ""); r.code != http.StatusOK {
		t.Fatalf("force: %d %s", r.code, r.body)
	}
	if st := e.status("k"); st.Holder != nil || len(st.Holders) != 0 || st.Limit != 1 {
		t.Fatalf("after force: %+v", st)
	}
}

// Bad owner, mode and limit: each a 400 naming the field, nothing changed.
func TestHTTPModesBadInput(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	for _, c := range []struct{ query, body, field string }{
		{"limit=0", "", "limit"},
		{"limit=-1", "", "limit"},
		{"limit=1.5", "", "limit"},
		{"limit=x", "", "limit"},
		{"limit=01", "", "limit"},
		{"limit=10001", "", "limit"},
		{"limit=99999999999999999999", "", "limit"},
		{"", `{"limit":0}`, "limit"},
		{"", `{"limit":"3"}`, "limit"},
		{"mode=read", "", "mode"},
		{"mode=Shared", "", "mode"},
		{"mode=", "", "mode"},
		{"", `{"mode":1}`, "mode"},
		{"owner=", "", "owner"},
		{"owner=" + strings.Repeat("x", 129), "", "owner"},
		{"owner=a%0Ab", "", "owner"},
		{"owner=a%7Fb", "", "owner"},
		{"owner=%FF", "", "owner"},
		{"", `{"owner":""}`, "owner"},
		{"", `{"owner":7}`, "owner"},
		{"owner=a", `{"owner":"b"}`, "owner"},
	} {
		path := "/locks/k"
		if c.query != "" {
			path += "?" + c.query
		}
		r := e.do(http.MethodPost, path, c.body)
		if r.code != http.StatusBadRequest || r.errBody(t).Field != c.field || !strings.Contains(r.errBody(t).Message, c.field) {
			t.Errorf("POST %s %s: %d %s; want a 400 naming %s", path, c.body, r.code, r.body, c.field)
		}
	}
	if l := e.list(); l.Total != 0 {
		t.Fatalf("bad input changed state: %+v", l)
	}
	// The longest owner and a non-ASCII one are fine.
	e.acquire("/locks/a?owner=" + strings.Repeat("é", 64))
	g := e.acquire("/locks/b?limit=10000&mode=shared&owner=job%207")
	if st := e.status("b"); st.Limit != 10000 || st.Holder.Owner != "job 7" || st.Holder.Token != g.Token {
		t.Fatalf("status %+v", st)
	}
}

// An Idempotency-Key repeat returns the same grant of a semaphore slot,
// not a second slot.
func TestHTTPSemaphoreRepeatIsTheSameGrant(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	a := e.acquire("/locks/s?limit=2&mode=shared", api.HeaderIdempotencyKey, "one")
	b := e.acquire("/locks/s?limit=2&mode=shared", api.HeaderIdempotencyKey, "one")
	if a.Token != b.Token {
		t.Fatalf("repeat got token %d, first %d", b.Token, a.Token)
	}
	if st := e.status("s"); len(st.Holders) != 1 {
		t.Fatalf("a repeat took a second slot: %+v", st)
	}
}

// The events feed shows owner, mode, limit, and a forced release as such.
func TestHTTPEventsShowOwnerAndForce(t *testing.T) {
	evs := handlers.NewEventLog(100)
	t.Cleanup(evs.Close)
	e := newEnv(t, engine.Config{OnEvent: evs.Add}, handlers.Config{Events: evs})
	e.acquire("/locks/k?mode=shared&limit=2&owner=batch")
	if r := e.do(http.MethodDelete, "/locks/k?force=true", ""); r.code != http.StatusOK {
		t.Fatalf("force: %d %s", r.code, r.body)
	}
	r := e.do(http.MethodGet, "/events", "")
	var l api.EventList
	if err := json.Unmarshal(r.body, &l); err != nil || len(l.Events) != 2 {
		t.Fatalf("events %s: %v", r.body, err)
	}
	g, rel := l.Events[0], l.Events[1]
	if g.Kind != api.EventGrant || g.Owner != "batch" || g.Mode != api.ModeShared || g.Limit != 2 {
		t.Fatalf("grant event %+v", g)
	}
	if rel.Kind != api.EventRelease || !rel.Forced || rel.Owner != "batch" || rel.Limit != 2 {
		t.Fatalf("release event %+v: want forced, owner batch, limit 2", rel)
	}
}

// The two recipes of SPEC section 1 as a user writes them: `limit=3` alone
// is a counting semaphore of 3 (the default mode, exclusive, takes one of
// its places each), and `mode=shared` alone, with the default limit of 1,
// is a read/write lock whose readers hold together while a writer holds
// alone.
func TestHTTPLimitAloneIsASemaphoreAndSharedAloneIsAReadWriteLock(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	var gs []api.Grant
	for range 3 {
		gs = append(gs, e.acquire("/locks/jobs?limit=3"))
	}
	if r := e.do(http.MethodPost, "/locks/jobs?limit=3&wait=0.05", ""); r.code != http.StatusRequestTimeout {
		t.Fatalf("a 4th holder of a semaphore of 3: %d %s; want 408", r.code, r.body)
	}
	if st := e.status("jobs"); len(st.Holders) != 3 || st.Limit != 3 {
		t.Fatalf("status %+v: want 3 exclusive holders under limit 3", st)
	}
	e.release("jobs", gs[0].Token)
	e.acquire("/locks/jobs?limit=3&wait=1")

	var readers []api.Grant
	for range 5 {
		readers = append(readers, e.acquire("/locks/doc?mode=shared"))
	}
	if st := e.status("doc"); len(st.Holders) != 5 || st.Limit != 1 {
		t.Fatalf("status %+v: want 5 readers under the default limit", st)
	}
	if r := e.do(http.MethodPost, "/locks/doc?wait=0.05", ""); r.code != http.StatusRequestTimeout {
		t.Fatalf("a writer beside 5 readers: %d %s; want 408", r.code, r.body)
	}
	for _, g := range readers {
		e.release("doc", g.Token)
	}
	w := e.acquire("/locks/doc?wait=1")
	if r := e.do(http.MethodPost, "/locks/doc?mode=shared&wait=0.05", ""); r.code != http.StatusRequestTimeout {
		t.Fatalf("a reader beside the writer: %d %s; want 408", r.code, r.body)
	}
	e.release("doc", w.Token)
}

// SPEC section 2: "Every error body is {"error": "<code>", "message":
// "<human sentence>"}; a 400 names the offending field." The sentence
// names the type the member takes: `{"force":"true"}` was told "force:
// must be a JSON number", a type force never takes.
func TestBodyMemberOfTheWrongType(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	e.acquire("/locks/k")
	for _, c := range []struct{ method, body, field, want string }{
		{"DELETE", `{"force":"true"}`, "force", "force: must be the JSON value true"},
		{"DELETE", `{"force":null}`, "force", "force: must be the JSON value true"},
		{"DELETE", `{"force":1}`, "force", "force: must be the JSON value true"},
		{"DELETE", `{"token":true}`, "token", "token: must be a JSON number"},
		{"POST", `{"owner":true}`, "owner", "owner: must be a JSON string"},
		{"POST", `{"mode":1}`, "mode", "mode: must be a JSON string"},
		{"POST", `{"lease":"30"}`, "lease", "lease: must be a JSON number"},
		{"PATCH", `{"lease":null}`, "lease", "lease: must be a JSON number"},
	} {
		r := e.do(c.method, "/locks/k", c.body)
		if eb := r.errBody(t); r.code != http.StatusBadRequest || eb.Field != c.field || eb.Message != c.want {
			t.Errorf("%s %s: %d %s; want 400 naming %s: %q", c.method, c.body, r.code, r.body, c.field, c.want)
		}
	}
	if st := e.status("k"); st.Holder == nil || st.Waiters != 0 {
		t.Fatalf("after bad bodies: %+v; want nothing changed", st)
	}
}

// SPEC section 1: an owner is "1–128 bytes of printable UTF-8". A JSON
// body may write a character as a \u escape, and encoding/json decodes
// an escape of a lone UTF-16 surrogate (\ud800, \udc00) as U+FFFD: the
// owner was taken as "\ufffd", another value than the client sent, where
// the same bytes sent raw or in the query (invalid UTF-8) are a 400. A pair
// (\ud83d\ude00) is one character and stays accepted.
func TestBodyLoneSurrogateEscapeIsRefused(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	for _, body := range []string{
		`{"owner":"\ud800"}`,
		`{"owner":"a\udc00b"}`,
		`{"owner":"\ud800\u0041"}`,
		`{"owner":"\ud83d"}`,
		`{"mode":"shared\udfff"}`,
	} {
		r := e.do(http.MethodPost, "/locks/s?wait=0.01", body)
		field := "owner"
		if strings.Contains(body, "mode") {
			field = "mode"
		}
		if eb := r.errBody(t); r.code != http.StatusBadRequest || eb.Field != field || !strings.Contains(eb.Message, "surrogate") {
			t.Errorf("POST %s: %d %s; want 400 naming %s and the surrogate", body, r.code, r.body, field)
		}
	}
	if st := e.status("s"); st.Holder != nil || st.Waiters != 0 {
		t.Fatalf("after bad bodies: %+v; want nothing changed", st)
	}
	for _, c := range []struct{ body, owner string }{
		{`{"owner":"\ud83d\ude00"}`, "\U0001F600"},
		{`{"owner":"a\\ud800"}`, `a\ud800`},
		{`{"owner":"\u00e9"}`, "é"},
	} {
		r := e.do(http.MethodPost, "/locks/ok?wait=0.01", c.body)
		if r.code != http.StatusOK {
			t.Fatalf("POST %s: %d %s; want 200", c.body, r.code, r.body)
		}
		st := e.status("ok")
		if st.Holder == nil || st.Holder.Owner != c.owner {
			t.Fatalf("POST %s: holder %+v; want owner %q", c.body, st.Holder, c.owner)
		}
		e.release("ok", st.Holder.Token)
	}
}

// With auth_tokens and no admin_tokens nobody may force a release; the
// 403 says so (it said "needs one of the node's admin_tokens", of which
// there were none), and the key keeps its holder.
func TestHTTPForceReleaseWithoutAdminTokensSaysSo(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{AuthTokens: []string{"user"}})
	user := []string{"Authorization", "Bearer user"}
	e.acquire("/locks/k", user...)
	r := e.do(http.MethodDelete, "/locks/k?force=true", "", user...)
	if r.code != http.StatusForbidden || r.errBody(t).Code != api.CodeForbidden || !strings.Contains(r.errBody(t).Message, "has none") {
		t.Errorf("DELETE ?force=true without admin_tokens: %d %s; want 403 saying the node has none", r.code, r.body)
	}
	var st api.LockStatus
	_ = json.Unmarshal(e.do(http.MethodGet, "/locks/k", "", user...).body, &st)
	if len(st.Holders) != 1 {
		t.Errorf("after a refused force: %+v; want the holder kept", st)
	}
}
