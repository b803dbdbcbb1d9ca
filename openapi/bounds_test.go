package openapi_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/openapi"
)

// The bounds a node enforces on limit, owner, mode and force (each a 400
// naming the field outside them, issue 14) are in the document in a form
// a generated client or validator reads (minimum, maximum, minLength,
// maxLength, enum), in the query parameters and in the JSON bodies alike,
// not only in the prose: force, a boolean in the schema, takes true alone
// (force=false is a 400).
func TestBoundsOfParametersAreDocumented(t *testing.T) {
	var d struct {
		Paths map[string]map[string]struct {
			Parameters []map[string]any `json:"parameters"`
		} `json:"paths"`
		Definitions map[string]struct {
			Properties map[string]map[string]any `json:"properties"`
		} `json:"definitions"`
	}
	if err := json.Unmarshal(openapi.JSON, &d); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"limit": {"minimum": "1", "maximum": fmt.Sprint(api.MaxLimit)},
		"owner": {"minLength": "1", "maxLength": fmt.Sprint(api.MaxOwnerBytes)},
		"mode":  {"enum": fmt.Sprint([]any{api.ModeExclusive, api.ModeShared})},
		"force": {"enum": "[true]"},
	}
	check := func(where, name string, got map[string]any) {
		for k, v := range want[name] {
			if g, ok := got[k]; !ok || fmt.Sprint(g) != v {
				t.Errorf("%s: %s: %s is %v, want %s", where, name, k, got[k], v)
			}
		}
	}
	query := map[string]string{"limit": "post", "owner": "post", "mode": "post", "force": "delete"}
	for name, method := range query {
		found := false
		for _, p := range d.Paths["/locks/{key}"][method].Parameters {
			if p["name"] == name && p["in"] == "query" {
				found = true
				check(method+" /locks/{key} query", name, p)
			}
		}
		if !found {
			t.Errorf("%s /locks/{key}: no query parameter %s", method, name)
		}
	}
	body := map[string]string{"limit": "api.AcquireRequest", "owner": "api.AcquireRequest", "mode": "api.AcquireRequest", "force": "api.TokenRequest"}
	for name, def := range body {
		p, ok := d.Definitions[def].Properties[name]
		if !ok {
			t.Errorf("%s has no property %s", def, name)
			continue
		}
		check(def, name, p)
	}
}
