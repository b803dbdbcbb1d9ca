package openapi_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/openapi"
)

// document is the part of a Swagger 2.0 document the tests read.
type document struct {
	Swagger string `json:"swagger"`
	Paths   map[string]map[string]struct {
		Parameters []struct {
			Name string `json:"name"`
			In   string `json:"in"`
		} `json:"parameters"`
		Responses map[string]struct {
			Headers map[string]any `json:"headers"`
			Schema  struct {
				Ref  string `json:"$ref"`
				Type string `json:"type"`
			} `json:"schema"`
		} `json:"responses"`
	} `json:"paths"`
}

func load(t *testing.T, b []byte) document {
	t.Helper()
	var d document
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("the OpenAPI document is not JSON: %v", err)
	}
	if d.Swagger != "2.0" {
		t.Fatalf("swagger %q, want 2.0", d.Swagger)
	}
	return d
}

// notAPI are routes that are served but are not the API: the cluster's
// peer protocol (internal, authenticated by the cluster secret), the
// status page's static assets, and Go's profiles (the pprof setting).
var notAPI = []string{"/_cluster/", "/static/", "/debug/"}

// docPath turns a chi route into its document path: the /locks/* wildcard
// is the key (which may contain slashes), other wildcards are {path}.
func docPath(route string) string {
	route = strings.TrimSuffix(route, "/") // chi reports groups' routes with a trailing "/" at times
	if route == "" {
		route = "/"
	}
	if route == "/locks/*" {
		return "/locks/{key}"
	}
	if strings.HasSuffix(route, "/*") {
		return strings.TrimSuffix(route, "*") + "{path}"
	}
	return route
}

// routes lists "METHOD path" for every route of the real router, as chi
// reports them.
func routes(t *testing.T) []string {
	t.Helper()
	eng, err := engine.New(engine.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	s := handlers.New(eng, handlers.Config{})
	var out []string
	err = chi.Walk(s.Router(), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		for _, skip := range notAPI {
			if strings.HasPrefix(route, skip) {
				return nil
			}
		}
		out = append(out, method+" "+docPath(route))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// HEAD is GET without the body (RFC 9110 section 9.3.2): a HEAD route
	// beside a GET one needs no operation of its own in the document.
	gets := map[string]bool{}
	for _, r := range out {
		if path, ok := strings.CutPrefix(r, http.MethodGet+" "); ok {
			gets[path] = true
		}
	}
	out = slices.DeleteFunc(out, func(r string) bool {
		path, ok := strings.CutPrefix(r, http.MethodHead+" ")
		return ok && gets[path]
	})
	sort.Strings(out)
	return slices.Compact(out)
}

// TestRoutesMatchDocument checks that every route the router serves is in
// the document and every operation in the document is routed.
func TestRoutesMatchDocument(t *testing.T) {
	doc := load(t, openapi.JSON)
	var documented []string
	for path, ops := range doc.Paths {
		for method := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
		}
	}
	sort.Strings(documented)
	routed := routes(t)
	for _, r := range routed {
		if !slices.Contains(documented, r) {
			t.Errorf("%s is routed but not in openapi/swagger.json: annotate its handler and run scripts/openapi.sh", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(routed, d) {
			t.Errorf("%s is in openapi/swagger.json but not routed", d)
		}
	}
	if t.Failed() {
		t.Logf("routed:     %v\ndocumented: %v", routed, documented)
	}
}

// TestStatusCodesOfSpec checks the answers SPEC section 2 lists for each
// call (and 401 with auth_tokens, 413 over max_body) against the document.
func TestStatusCodesOfSpec(t *testing.T) {
	doc := load(t, openapi.JSON)
	want := []struct {
		method, path string
		codes        []string
	}{
		{"post", "/locks/{key}", []string{"200", "307", "400", "401", "408", "413", "429"}},
		{"delete", "/locks/{key}", []string{"200", "307", "400", "401", "404", "409", "413"}},
		{"patch", "/locks/{key}", []string{"200", "307", "400", "401", "404", "409", "413"}},
		{"get", "/locks/{key}", []string{"200", "401"}},
		{"get", "/locks", []string{"200", "401"}},
		{"get", "/healthz", []string{"200"}},
		{"get", "/readyz", []string{"200", "503"}},
		{"get", "/metrics", []string{"200", "401"}},
		{"get", "/openapi.json", []string{"200"}},
	}
	for _, w := range want {
		op, ok := doc.Paths[w.path][w.method]
		if !ok {
			t.Errorf("%s %s is not documented", strings.ToUpper(w.method), w.path)
			continue
		}
		for _, c := range w.codes {
			if _, ok := op.Responses[c]; !ok {
				t.Errorf("%s %s does not document %s", strings.ToUpper(w.method), w.path, c)
			}
		}
	}
	post := doc.Paths["/locks/{key}"]["post"]
	if _, ok := post.Responses["200"].Headers["Lock-Token"]; !ok {
		t.Error("POST /locks/{key}: the Lock-Token header of the 200 is not documented")
	}
	for _, p := range []string{"lease", "wait"} {
		if !slices.ContainsFunc(post.Parameters, func(q struct {
			Name string `json:"name"`
			In   string `json:"in"`
		}) bool {
			return q.Name == p && q.In == "query"
		}) {
			t.Errorf("POST /locks/{key}: query parameter %s is not documented", p)
		}
	}
}

// TestProtocolHeadersAreDocumented: the headers the answers carry for
// the client's next step are in the document wherever their status is: a
// 307's Location (and its api.Error body), a 401's WWW-Authenticate, a
// 429's Retry-After (a tester's report: only Lock-Token was declared,
// and 307 was declared a string).
func TestProtocolHeadersAreDocumented(t *testing.T) {
	doc := load(t, openapi.JSON)
	for path, ops := range doc.Paths {
		for method, op := range ops {
			for code, header := range map[string]string{"307": "Location", "401": "WWW-Authenticate", "429": "Retry-After"} {
				r, ok := op.Responses[code]
				if !ok {
					continue
				}
				if _, ok := r.Headers[header]; !ok {
					t.Errorf("%s %s: its %s does not declare %s", strings.ToUpper(method), path, code, header)
				}
				if r.Schema.Ref != "#/definitions/api.Error" {
					t.Errorf("%s %s: its %s body is %q%s, want api.Error", strings.ToUpper(method), path, code, r.Schema.Ref, r.Schema.Type)
				}
			}
		}
	}
}
