package api_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/baton-io/baton/api"
)

// A negative Limit is refused by the client, as a negative lease or an
// out-of-range WithLimit is: ErrInvalidArgument, Field limit, and no
// request is sent. It was sent as no limit at all, and the server's
// default page of 100 came back as if asked for.
func TestListPageRefusesNegativeLimit(t *testing.T) {
	var lists atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/locks" {
			lists.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"locks":[],"total":0}`))
	}))
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true) // the client speaks h2c
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	c := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	for _, call := range []struct {
		name string
		do   func() (*api.LockList, error)
	}{
		{"ListPage Limit -1", func() (*api.LockList, error) { return c.ListPage(ctx, api.ListOptions{Limit: -1}) }},
		{"ListPage After, Limit -5", func() (*api.LockList, error) {
			return c.ListPage(ctx, api.ListOptions{After: "a", Limit: -5})
		}},
		{"List limit -1", func() (*api.LockList, error) { return c.List(ctx, "", -1) }},
	} {
		ll, err := call.do()
		var se *api.StatusError
		if !errors.Is(err, api.ErrInvalidArgument) || !errors.As(err, &se) || se.Field != "limit" {
			t.Errorf("%s: %+v, %v; want ErrInvalidArgument naming limit", call.name, ll, err)
		}
	}
	if n := lists.Load(); n != 0 {
		t.Errorf("%d GET /locks sent, want none", n)
	}
	if _, err := c.ListPage(ctx, api.ListOptions{}); err != nil || lists.Load() != 1 {
		t.Errorf("ListPage with Limit 0 (the server's default): %v, %d sent", err, lists.Load())
	}
}
