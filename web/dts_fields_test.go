package web_test

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
)

// TestTypesDeclareEveryAnswerField: baton.d.ts, kept by hand, declares
// every member of the answers the JavaScript client passes on as they came
// (status, list, acquire): the Go client's wire types are the server's
// answers, so each of their JSON names is a member of the interface of
// the same name. LockStatus lacked oldest_waiter_owner and
// oldest_waiter_mode: a TypeScript page could not read the first
// waiter's owner (SPEC section 1: shown wherever the waiter is) without a
// cast, though GET /locks/{key} sent it.
func TestTypesDeclareEveryAnswerField(t *testing.T) {
	b, err := os.ReadFile("js/baton.d.ts")
	if err != nil {
		t.Fatal(err)
	}
	dts := string(b)
	for _, c := range []struct {
		name string
		typ  reflect.Type
	}{
		{"Grant", reflect.TypeFor[api.Grant]()},
		{"Holder", reflect.TypeFor[api.Holder]()},
		{"LockStatus", reflect.TypeFor[api.LockStatus]()},
		{"LockList", reflect.TypeFor[api.LockList]()},
		// cluster() passes GET /cluster on as it came; ClusterView takes
		// any member ([field: string]: unknown), its peers' PeerView not.
		{"PeerView", reflect.TypeFor[api.PeerView]()},
	} {
		m := regexp.MustCompile(`(?s)export interface ` + c.name + ` \{\n(.*?)\n\}`).FindStringSubmatch(dts)
		if m == nil {
			t.Fatalf("baton.d.ts declares no interface %s", c.name)
		}
		declared := map[string]string{} // member: its type
		for _, d := range regexp.MustCompile(`(?m)^  ([a-z_]+)\??: (.*);$`).FindAllStringSubmatch(m[1], -1) {
			declared[d[1]] = d[2]
		}
		for i := range c.typ.NumField() {
			f := c.typ.Field(i)
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			typ, ok := declared[name]
			if !ok {
				t.Errorf("baton.d.ts: interface %s has no %s (api.%s.%s)", c.name, name, c.typ.Name(), f.Name)
				continue
			}
			// A pointer without omitempty is sent as null when nil.
			if f.Type.Kind() == reflect.Pointer && !strings.Contains(opts, "omitempty") && !strings.Contains(typ, "null") {
				t.Errorf("baton.d.ts: %s.%s is %q, but the server sends null for it (api.%s.%s)", c.name, name, typ, c.typ.Name(), f.Name)
			}
		}
	}
}
