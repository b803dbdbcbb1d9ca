package api_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// TestBadKeyErrorsAreTheNodesOverBothProtocols: a key the node refuses is
// refused with the node's own sentence over baton:// too, where the client
// checks it before sending (a bad key field would close the connection),
// so that one rule says what is wrong with a key. The client's copy of the
// rule said it in other words ("must be at most 256 bytes" for the node's
// "is 300 bytes; at most 256 are allowed", "must be valid UTF-8" for "is
// not valid UTF-8").
func TestBadKeyErrorsAreTheNodesOverBothProtocols(t *testing.T) {
	srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
	ctx := ctxBound(t)
	for _, key := range []string{"", strings.Repeat("k", 300), strings.Repeat("é", 129), "\xff", "a\x00b", "a\u0085b", "a\x7fb"} {
		want := engine.CheckKey(key)
		if want == nil {
			t.Fatalf("engine.CheckKey(%q) takes it", key)
		}
		for _, proto := range protos {
			c := newClient(t, nil, srv.Base(proto))
			_, err := c.Acquire(ctx, key)
			var se *api.StatusError
			if !errors.Is(err, api.ErrInvalidArgument) || !errors.As(err, &se) || se.Field != "key" {
				t.Errorf("%s: acquire %.20q: %v, want invalid_argument naming key", proto, key, err)
				continue
			}
			if se.Message != want.Error() {
				t.Errorf("%s: acquire %.20q: %q, want the node's %q", proto, key, se.Message, want.Error())
			}
			if err := c.Release(ctx, key, 1); !errors.As(err, &se) || se.Message != want.Error() {
				t.Errorf("%s: release %.20q: %v, want the node's %q", proto, key, err, want.Error())
			}
		}
	}
}
