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

// An argument the client itself refuses is an ErrInvalidArgument as the
// server's are: a *StatusError whose Field names it (Acquire's doc says
// "ErrInvalidArgument (as *StatusError)"), and a negative lease given to
// Renew is refused, not sent as "the grant's lease".
func TestClientRefusalsNameTheField(t *testing.T) {
	eachProto(t, func(t *testing.T, proto string) {
		srv := startBoth(t, engine.Config{}, handlers.Config{}, native.Config{})
		c := newClient(t, nil, srv.Base(proto))
		ctx := ctxBound(t)
		check := func(what, field string, err error) {
			t.Helper()
			var se *api.StatusError
			if !errors.Is(err, api.ErrInvalidArgument) || !errors.As(err, &se) || se.Field != field {
				t.Errorf("%s: err %v (%T); want a *StatusError, ErrInvalidArgument, Field %q", what, err, err, field)
			}
		}
		_, err := c.Acquire(ctx, "f", api.WithLease(-time.Second))
		check("WithLease(-1s)", "lease", err)
		_, err = c.Acquire(ctx, "f", api.WithWait(-time.Second))
		check("WithWait(-1s)", "wait", err)
		_, err = c.Acquire(ctx, "f", api.WithLimit(0))
		check("WithLimit(0)", "limit", err)
		l, err := c.Acquire(ctx, "f", api.WithLease(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(ctx)
		_, err = c.Renew(ctx, "f", l.Token, -time.Second)
		check("Client.Renew(-1s)", "lease", err)
		check("Lock.Renew(-1s)", "lease", l.Renew(ctx, -time.Second))
		select {
		case <-l.Lost():
			t.Errorf("a refused argument marked the lock lost: %v", l.Err())
		default:
		}
	})
}
