package handlers_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// The fuzz targets drive the real handler (router, auth, parsing,
// validation, engine) with httptest and check after every request:
//
//   - no answer is a 5xx;
//   - a 400 is {"error":"invalid_argument"} with a field that its message names;
//   - an answer other than 2xx left the lock state exactly as it was;
//   - a 200 grant has a token in (0, 2^53).
//
// Run one for a while with: go test -run='^$' -fuzz=FuzzKeyPath ./handlers/
// (scripts/fuzz.sh runs each for a bounded time). Inputs that once failed
// live in testdata/fuzz/<Target>/ and run with every plain go test.

const fuzzToken = "fuzz-token"

// fuzzEnv is one engine with a lock "held" held by the fixture, and the
// handler in front of it; fuzz functions run one input at a time per
// process, so it is shared by the inputs of one target.
type fuzzEnv struct {
	eng  *engine.Engine
	h    http.Handler
	held engine.Grant
}

func newFuzzEnv(f *testing.F) *fuzzEnv {
	eng, err := engine.New(engine.Config{
		DataDir:          f.TempDir(),
		WaitMax:          2 * time.Millisecond, // a wait of 0 waits this long: no input blocks
		MaxKeys:          64,
		MaxWaitersPerKey: 4,
		MaxWaiters:       8,
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = eng.Close() })
	e := &fuzzEnv{eng: eng, h: handlers.New(eng, handlers.Config{MaxBody: 4096, AuthTokens: []string{fuzzToken}})}
	e.hold(f)
	return e
}

func (e *fuzzEnv) hold(t testing.TB) {
	g, err := e.eng.Acquire(t.Context(), engine.AcquireRequest{Key: "held", Lease: time.Hour})
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	e.held = g
}

// state is everything a request could change, as comparable text.
func (e *fuzzEnv) state() string {
	var b strings.Builder
	e.eng.Range(func(li engine.LockInfo) bool {
		fmt.Fprintf(&b, "%q holder=%v waiters=%d\n", li.Key, li.Holder != nil && li.Holder.Token != 0, li.Waiters)
		if li.Holder != nil {
			fmt.Fprintf(&b, "  token=%d\n", li.Holder.Token)
		}
		return true
	})
	keys, waiters := e.eng.Counts()
	fmt.Fprintf(&b, "keys=%d waiters=%d last=%d", keys, waiters, e.eng.LastToken())
	return b.String()
}

// validHeader reports whether a real server would pass v through as a
// header value (net/http refuses control characters before any handler).
func validHeader(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

var fuzzMethods = []string{http.MethodPost, http.MethodDelete, http.MethodPatch, http.MethodGet, http.MethodPut, http.MethodHead}

// serve runs req and checks the invariants; it restores the fixture when a
// request legitimately changed state (a grant is released again).
func (e *fuzzEnv) serve(t *testing.T, req *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	before := e.state()
	rec := httptest.NewRecorder()
	e.h.ServeHTTP(rec, req)
	res := rec.Result()
	body, _ := io.ReadAll(res.Body)
	desc := fmt.Sprintf("%s %q (raw query %q) body? %v: %d %s", req.Method, req.URL.Path, req.URL.RawQuery, req.ContentLength != 0, res.StatusCode, body)
	if res.StatusCode >= 500 {
		t.Fatalf("5xx: %s", desc)
	}
	if res.StatusCode == http.StatusBadRequest {
		var eb api.Error
		if err := json.Unmarshal(body, &eb); err != nil || eb.Code != api.CodeInvalidArgument || eb.Field == "" || !strings.Contains(eb.Message, eb.Field) {
			t.Fatalf("a 400 that names no field: %s", desc)
		}
	}
	if res.StatusCode/100 != 2 {
		if after := e.state(); after != before {
			t.Fatalf("%s changed state:\nbefore %s\nafter  %s", desc, before, after)
		}
		return rec
	}
	// A success: put the fixture back.
	if req.Method == http.MethodPost && res.StatusCode == http.StatusOK {
		var g api.Grant
		if err := json.Unmarshal(body, &g); err != nil || g.Token == 0 || g.Token >= api.MaxToken {
			t.Fatalf("a grant with a bad body: %s", desc)
		}
		if err := e.eng.Release(g.Key, g.Token); err != nil {
			t.Fatalf("releasing %q/%d: %v", g.Key, g.Token, err)
		}
	}
	if st, err := e.eng.Status("held"); err != nil || st.Holder == nil || st.Holder.Token != e.held.Token {
		e.hold(t) // the fuzzer guessed the token and released or renewed it
	}
	return rec
}

func newRequest(t *testing.T, method, target string, body io.Reader, hdr ...string) *http.Request {
	req, err := http.NewRequestWithContext(t.Context(), method, "http://baton"+target, body)
	if err != nil {
		t.Skip("not a request a client could send:", err)
	}
	req.Header.Set("Authorization", "Bearer "+fuzzToken)
	for i := 0; i+1 < len(hdr); i += 2 {
		if !validHeader(hdr[i+1]) {
			t.Skip("header value net/http refuses")
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req
}

// FuzzKeyPath: any path under /locks/ with any method.
func FuzzKeyPath(f *testing.F) {
	for _, s := range []string{"k", "held", "a/b/c", "%00", "a%0Ab", "%FF", "%C2%85", "é", strings.Repeat("x", 256), strings.Repeat("x", 257),
		"", "/", "..", "a%2Fb", "%", "%zz", "held?x=1", "k#frag", "\u202e", "a\x7fb"} {
		for m := range 4 {
			f.Add(uint8(m), s)
		}
	}
	e := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, m uint8, key string) {
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		e.serve(t, newRequest(t, method, "/locks/"+key, nil))
	})
}

// FuzzQuery: any raw query string on each call.
func FuzzQuery(f *testing.F) {
	for _, s := range []string{"lease=1", "wait=0.001", "lease=0", "lease=-1", "lease=NaN", "lease=1e309", "wait=1e-300", "lease=0x10",
		"token=1", "token=0", "token=9007199254740992", "token=18446744073709551616", "token=%2B1", "token= 1", "lease=1&lease=2",
		"prefix=a&limit=0", "limit=10001", "limit=1", "a=%zz", "%", "&&&", "=", "lease", "lease=1;wait=2", "token=1&lease=0.5"} {
		for m := range 4 {
			f.Add(uint8(m), s)
		}
	}
	e := newFuzzEnv(f)
	paths := []string{"/locks/held", "/locks/k", "/locks"}
	f.Fuzz(func(t *testing.T, m uint8, q string) {
		method := fuzzMethods[int(m)%4]
		req := newRequest(t, method, paths[int(m/4)%len(paths)], nil)
		req.URL.RawQuery = q
		e.serve(t, req)
	})
}

// FuzzJSONBody: any body on POST, DELETE and PATCH.
func FuzzJSONBody(f *testing.F) {
	for _, s := range []string{`{"lease":1}`, `{"wait":0}`, `{"lease":1,"wait":0.001}`, `{"token":1}`, `{"token":1,"lease":2}`,
		`{"lease":"1"}`, `{"lease":null}`, `{"lease":1e999}`, `{"lease":-0}`, `{"token":1.0}`, `{"token":9007199254740993}`,
		`{"lease":1}{}`, `{"lease":1} x`, `[]`, `null`, `""`, `{`, `{"a":{"b":[1,2,{}]}}`, `{"lease":1,"lease":2}`,
		"{\"lease\":1\u0000}", "\xff\xfe", `{"token":"` + strings.Repeat("9", 400) + `"}`, ""} {
		for m := range 3 {
			f.Add(uint8(m), []byte(s))
		}
	}
	e := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, m uint8, body []byte) {
		method := fuzzMethods[int(m)%3]
		path := "/locks/k"
		if m%2 == 1 {
			path = "/locks/held"
		}
		e.serve(t, newRequest(t, method, path, strings.NewReader(string(body)), "Content-Type", "application/json"))
	})
}

// FuzzToken: the bearer token and the Lock-Token header. Without the
// exact bearer token every call is a 401; with it, a token that is not the
// holder's never releases or renews.
func FuzzToken(f *testing.F) {
	for _, s := range [][2]string{{"Bearer " + fuzzToken, "1"}, {"bearer " + fuzzToken, "abc"}, {"Bearer " + fuzzToken + " ", "0"},
		{"Bearer", ""}, {"Bearer ", "1"}, {"Basic Zm9vOmJhcg==", "1"}, {fuzzToken, "1"}, {"Bearer fuzz-toke", "1"},
		{"Bearer fuzz-tokenn", "1"}, {"", "9007199254740991"}, {"Bearer " + fuzzToken, " 1 "}, {"Bearer " + fuzzToken, "+1"},
		{"Bearer " + fuzzToken, "-1"}, {"Bearer " + fuzzToken, "1e3"}, {"Bearer " + fuzzToken, "18446744073709551615"}} {
		f.Add(s[0], s[1], uint8(0))
		f.Add(s[0], s[1], uint8(1))
	}
	e := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, auth, lockToken string, m uint8) {
		method := []string{http.MethodDelete, http.MethodPatch}[m%2]
		req := newRequest(t, method, "/locks/held", nil, api.HeaderLockToken, lockToken, "Authorization", auth)
		if lockToken == "" {
			req.Header.Del(api.HeaderLockToken)
		}
		if auth == "" {
			req.Header.Del("Authorization")
		}
		rec := e.serve(t, req)
		authorized := len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") && strings.TrimSpace(auth[7:]) == fuzzToken
		if !authorized && rec.Code != http.StatusUnauthorized {
			t.Fatalf("Authorization %q: %d, want 401", auth, rec.Code)
		}
		if authorized && rec.Code == http.StatusUnauthorized {
			t.Fatalf("Authorization %q: refused", auth)
		}
		if rec.Code/100 == 2 && lockToken != strconv.FormatUint(e.held.Token, 10) && strings.TrimSpace(lockToken) != strconv.FormatUint(e.held.Token, 10) {
			t.Fatalf("Lock-Token %q released or renewed the lock held under %d", lockToken, e.held.Token)
		}
	})
}
