package handlers_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A waiter whose client closed its connection just before the lock was
// handed to it gets no grant held for nobody: the next waiter has the lock
// at once (SPEC section 1: a grant that raced the disconnect and could not
// be delivered is released to the next waiter at once, not held for a
// whole lease). The kernel holds the close before net/http's reader of the
// connection has run, which the grant's answer must not wait for: each
// round closes the waiter's connection and releases the holder straight
// after. Before the node read the socket's state, 9 of 40 such rounds (a
// breaker's script, an idle machine) left the lock held by the gone
// waiter, and the next one got 408.
func TestGrantToAJustClosedConnectionPassesOn(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	addr := strings.TrimPrefix(e.srv.URL, "http://")
	for i := range 20 {
		key := fmt.Sprintf("k%d", i)
		h := e.acquire("/locks/" + key + "?lease=60")
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fmt.Fprintf(c, "POST /locks/%s?lease=60&wait=20 HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", key); err != nil {
			t.Fatal(err)
		}
		e.waitWaiters(key, 1)
		next := e.async(context.Background(), e.client, "POST", "/locks/"+key+"?lease=60&wait=5", "")
		e.waitWaiters(key, 2)
		_ = c.Close()
		e.release(key, h.Token)
		r := recv(t, next, "the next waiter")
		if r.code != 200 {
			t.Fatalf("round %d: the waiter after the one whose connection closed got %d %s; want the grant (holders now %+v)", i, r.code, r.body, e.status(key).Holders)
		}
	}
}
