package handlers_test

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// TestIdempotencyKeyWhitespaceIsTheSameOverBothProtocols: Go's HTTP/1.1
// server trims the whitespace around a header's value (RFC 9110 section
// 5.5: it is not part of the value), its HTTP/2 server does not, so
// "Idempotency-Key: k1 " over h2c named another request than "k1": a
// repeat of an acquire (or of a forced release) that differed only there
// was a new one over HTTP/2 and a repeat over HTTP/1.1. The node now
// trims it on every protocol; a key of blanks alone is a 400 naming
// Idempotency-Key, as an empty one is.
func TestIdempotencyKeyWhitespaceIsTheSameOverBothProtocols(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	var dials atomic.Int64
	h2 := h2cClient(t, &dials)
	acquire := func(id, query string) (int, api.Grant, api.Error) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+"/locks/ws?"+query, nil)
		req.Header.Set(api.HeaderIdempotencyKey, id)
		res, err := h2.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.ProtoMajor != 2 {
			t.Fatalf("answered over %s, want HTTP/2", res.Proto)
		}
		var g api.Grant
		var ae api.Error
		if res.StatusCode == http.StatusOK {
			_ = json.NewDecoder(res.Body).Decode(&g)
		} else {
			_ = json.NewDecoder(res.Body).Decode(&ae)
		}
		return res.StatusCode, g, ae
	}
	code, first, _ := acquire("k1 ", "lease=30")
	if code != http.StatusOK {
		t.Fatalf("acquire under \"k1 \": %d", code)
	}
	code, again, ae := acquire("\tk1", "lease=30&wait=0")
	if code != http.StatusOK || again.Token != first.Token {
		t.Fatalf("repeat under \"\\tk1\" over HTTP/2: %d %+v %+v; want the first's grant, token %d", code, again, ae, first.Token)
	}
	if code, _, ae := acquire("   ", "lease=30&wait=0"); code != http.StatusBadRequest || ae.Field != api.HeaderIdempotencyKey {
		t.Fatalf("acquire under a key of blanks over HTTP/2: %d %+v; want 400 naming %s", code, ae, api.HeaderIdempotencyKey)
	}
}
