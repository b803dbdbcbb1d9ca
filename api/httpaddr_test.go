package api_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A baton:// address that names a node's HTTP listen address (the mix-up
// of listen and native_listen) is a definite error, at once, for every
// call, with or without a token: ErrInvalidArgument naming the address
// field and the address, not ErrUnavailable. Before, an acquire failed
// after two attempts as ErrUnavailable, and a release and a renewal
// ended with "the node answered no ping" (the HTTP server waited for the
// rest of a request whose first line was the client's ping), which told
// the user nothing of the address (found running the CLI with
// BATON_ADDR=baton://<listen address>).
func TestNativeAtAnHTTPAddressRefusedAtOnce(t *testing.T) {
	// Room for a loaded machine; a call that retries takes ReleaseTimeout
	// (a minute here), a wait (a minute) or ctx's bound.
	const refusedWithin = 15 * time.Second
	srv := startServerWith(t, engine.Config{}, handlers.Config{}, nil)
	addr := "baton://" + srv.Addr
	// Short lines (a one-letter token and key): the client's own lines
	// do not fill the 14 bytes net/http waits for.
	for _, token := range []string{"", "t"} {
		c := newClient(t, func(c *api.Config) { c.Token, c.ReleaseTimeout = token, time.Minute }, addr)
		ctx := ctxBound(t)
		check := func(what string, err error, took time.Duration) {
			t.Helper()
			if !errors.Is(err, api.ErrInvalidArgument) || errors.Is(err, api.ErrUnavailable) {
				t.Errorf("token %q: %s: %v, want ErrInvalidArgument (and not ErrUnavailable)", token, what, err)
			}
			var se *api.StatusError
			if !errors.As(err, &se) || se.Field != "addresses" || !strings.Contains(se.Message, addr) ||
				!strings.Contains(se.Message, "serves HTTP") || !strings.Contains(se.Message, "native_listen") {
				t.Errorf("token %q: %s: %v, want a *StatusError naming the field addresses, %s, that it serves HTTP, and native_listen", token, what, err, addr)
			}
			if took > refusedWithin {
				t.Errorf("token %q: %s took %v: retried", token, what, took)
			}
		}
		for range 2 { // the first calls and those after the connection's end
			start := time.Now()
			_, err := c.Acquire(ctx, "k", api.WithWait(time.Minute))
			check("acquire", err, time.Since(start))
			start = time.Now()
			err = c.Release(ctx, "k", 1)
			check("release", err, time.Since(start))
			start = time.Now()
			_, err = c.Renew(ctx, "k", 1, 0)
			check("renew", err, time.Since(start))
		}
	}
}

// net/http reads a connection's first 14 bytes (HTTP/2's preface line)
// before it answers a malformed request line: the ping a native
// connection begins with fills them alone, whatever follows it.
func TestDialPingFillsHTTP2Preface(t *testing.T) {
	if line, preface := api.DialPingLine(), "PRI * HTTP/2.0"; len(line) < len(preface) {
		t.Fatalf("the dial's ping %q is %d bytes, fewer than %q's %d", line, len(line), preface, len(preface))
	}
}
