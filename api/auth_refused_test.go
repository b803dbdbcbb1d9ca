package api_test

import (
	"errors"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
	"github.com/baton-io/baton/native"
)

// A refused token (a wrong one: AUTH refused at the dial; none: the
// first request refused) is the same answer over both protocols, at once:
// an error that Is ErrUnauthorized and not ErrUnavailable (nothing to
// wait for or retry), for an acquire, a release and a renewal alike.
// Over baton:// it was ErrUnavailable wrapping the refusal, and a release
// retried for ReleaseTimeout (5 s).
func TestProtoAuthRefusedAtOnce(t *testing.T) {
	// Room for a loaded machine; a call that retries takes ReleaseTimeout
	// (a minute here) or ctx's bound.
	const refusedWithin = 15 * time.Second
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{AuthTokens: []string{"user"}}, native.Config{})
		for _, token := range []string{"wrong", ""} {
			// A release retried for ReleaseTimeout was the defect: with a
			// minute of it, a retrying call runs into ctx's bound (20 s), far
			// above what a refusal takes on any machine.
			c := newClient(t, func(c *api.Config) { c.Token, c.ReleaseTimeout = token, time.Minute }, srv.Base(proto))
			ctx := ctxBound(t)
			check := func(what string, err error, took time.Duration) {
				t.Helper()
				if !errors.Is(err, api.ErrUnauthorized) || errors.Is(err, api.ErrUnavailable) {
					t.Errorf("token %q: %s: %v, want ErrUnauthorized (and not ErrUnavailable)", token, what, err)
				}
				var se *api.StatusError
				if !errors.As(err, &se) || se.Code != api.CodeUnauthorized {
					t.Errorf("token %q: %s: %v, want a *StatusError with code %q", token, what, err, api.CodeUnauthorized)
				}
				if took > refusedWithin {
					t.Errorf("token %q: %s took %v: retried", token, what, took)
				}
			}
			for range 2 { // the first calls and those after the refusal
				start := time.Now()
				_, err := c.Acquire(ctx, "k")
				check("acquire", err, time.Since(start))
				start = time.Now()
				err = c.Release(ctx, "k", 1)
				check("release", err, time.Since(start))
				start = time.Now()
				_, err = c.Renew(ctx, "k", 1, 0)
				check("renew", err, time.Since(start))
			}
		}
	})
}
