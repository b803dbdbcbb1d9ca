package api_test

import (
	"errors"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// The Go client's options of issue 14: WithLimit and WithShared make a
// semaphore, WithOwner labels the holder (DefaultOwner without it),
// another limit is ErrLimitMismatch, and ForceRelease frees every holder.
func TestClientModesAndOwner(t *testing.T) {
	srv := startServer(t, engine.Config{}, nil)
	c := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	a, err := c.Acquire(ctx, "sem", api.WithLimit(2), api.WithShared(), api.WithOwner("job-a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Acquire(ctx, "sem", api.WithShared())
	if err != nil {
		t.Fatal(err)
	}
	third := acquireAsync(ctx, c, "sem", api.WithMode(api.ModeShared), api.WithOwner(""))
	waitWaiters(t, c, "sem", 1)
	st := status(t, c, "sem")
	if st.Limit != 2 || len(st.Holders) != 2 || st.Holders[0].Token != a.Token || st.Holders[0].Owner != "job-a" ||
		st.Holders[1].Owner != api.DefaultOwner() || st.Holders[1].Mode != api.ModeShared {
		t.Fatalf("status %+v; want job-a then %q, both shared, limit 2", st, api.DefaultOwner())
	}
	if st.OldestWaiterOwner != "" {
		t.Fatalf("WithOwner(\"\") sent an owner: %q", st.OldestWaiterOwner)
	}
	if _, err := c.Acquire(ctx, "sem", api.WithLimit(3), api.WithShared()); !errors.Is(err, api.ErrLimitMismatch) {
		t.Fatalf("another limit: %v, want ErrLimitMismatch", err)
	}
	if err := c.ForceRelease(ctx, "sem"); err != nil {
		t.Fatal(err)
	}
	l := get(t, third)
	heldOnce(t, c, "sem", l.Token)
	if err := c.Release(ctx, "sem", b.Token); !errors.Is(err, api.ErrNotHolder) {
		t.Fatalf("release after force: %v, want ErrNotHolder", err)
	}
	if err := c.ForceRelease(ctx, "free"); !errors.Is(err, api.ErrNotHeld) {
		t.Fatalf("force on a free key: %v, want ErrNotHeld", err)
	}
}

// With admin_tokens set, ForceRelease needs one: ErrForbidden otherwise.
func TestClientForceReleaseNeedsAdminToken(t *testing.T) {
	srv := startServerWith(t, engine.Config{}, handlers.Config{AuthTokens: []string{"user"}, AdminTokens: []string{"ops"}}, nil)
	user := newClient(t, func(c *api.Config) { c.Token = "user" }, srv.URL)
	ops := newClient(t, func(c *api.Config) { c.Token = "ops" }, srv.URL)
	ctx := ctxBound(t)
	if _, err := user.Acquire(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if err := user.ForceRelease(ctx, "k"); !errors.Is(err, api.ErrForbidden) {
		t.Fatalf("force with a user token: %v, want ErrForbidden", err)
	}
	if err := ops.ForceRelease(ctx, "k"); err != nil {
		t.Fatalf("force with an admin token: %v", err)
	}
}
