package api

import (
	"encoding/json"
	"testing"
	"time"
)

// A holder object carries every field SPEC section 2 lists for it, owner
// included: null when the acquire carried none (it was left out, so a
// reader of the documented shape found no "owner" key), the label
// otherwise; and it reads back into the same Holder.
func TestHolderHasEveryFieldOfItsShape(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, h := range []Holder{
		{Token: 7, Lease: 30, ExpiresAt: at.Add(30 * time.Second), GrantedAt: at, Mode: ModeExclusive},
		{Token: 8, Lease: 5, ExpiresAt: at, GrantedAt: at, Owner: "web-1:42", Mode: ModeShared},
	} {
		b, err := json.Marshal(LockStatus{Key: "k", Holder: &h, Holders: []Holder{h}, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		var raw struct {
			Holder  map[string]any   `json:"holder"`
			Holders []map[string]any `json:"holders"`
		}
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		for _, obj := range []map[string]any{raw.Holder, raw.Holders[0]} {
			for _, f := range []string{"token", "lease", "expires_at", "granted_at", "owner", "mode"} {
				if _, ok := obj[f]; !ok {
					t.Errorf("%s: no %q", b, f)
				}
			}
			if want := any(nil); h.Owner != "" {
				want = h.Owner
				if obj["owner"] != want {
					t.Errorf("%s: owner %v, want %v", b, obj["owner"], want)
				}
			} else if obj["owner"] != want {
				t.Errorf("%s: owner %v, want null", b, obj["owner"])
			}
		}
		var back LockStatus
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if *back.Holder != h {
			t.Errorf("read back %+v, want %+v", *back.Holder, h)
		}
	}
}
