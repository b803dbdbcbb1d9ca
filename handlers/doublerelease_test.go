package handlers_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// A holder of a semaphore's slot, or of a read lock, that releases twice
// frees one slot, not two. Redisson's RSemaphore.release() is a bare
// INCRBY, so a repeated release adds a permit nobody gave back
// (redisson/redisson#5066); its read lock's unlock counts readers by
// thread (redisson/redisson#4871). Here each holder has its own token:
// the second release of a token is 409 not_holder while others hold, the
// other holders keep their grants, and no waiter gets the slot that was
// not freed.
func TestSecondReleaseFreesNoSecondSlot(t *testing.T) {
	for _, c := range []struct{ name, acquire string }{
		{"semaphore", "?limit=2&lease=30"},
		{"read lock", "?mode=shared&limit=2&lease=30"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, engine.Config{}, handlers.Config{})
			a := e.acquire("/locks/s" + c.acquire)
			b := e.acquire("/locks/s" + c.acquire)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := e.async(ctx, e.client, http.MethodPost, "/locks/s"+c.acquire, "")
			e.waitWaiters("s", 1)
			x := e.async(ctx, e.client, http.MethodPost, "/locks/s"+c.acquire, "")
			e.waitWaiters("s", 2)

			e.release("s", a.Token)
			wg := recv(t, w, "the first waiter after a's release").grant(t)
			r := e.do(http.MethodDelete, "/locks/s?token="+tok(a.Token), "")
			if r.code != http.StatusConflict || r.errBody(t).Code != "not_holder" {
				t.Errorf("second release of a's token: %d %s, want 409 not_holder", r.code, r.body)
			}
			st := e.status("s")
			if len(st.Holders) != 2 || st.Waiters != 1 {
				t.Fatalf("after the second release: %d holders, %d waiters; want 2 (b, w) and 1 (x)", len(st.Holders), st.Waiters)
			}
			for i, want := range []uint64{b.Token, wg.Token} {
				if st.Holders[i].Token != want {
					t.Errorf("holder %d: token %d, want %d", i, st.Holders[i].Token, want)
				}
			}
			if !pending(x) {
				t.Fatal("the second waiter was granted a slot nobody freed")
			}
			e.release("s", b.Token)
			recv(t, x, "the second waiter after b's release").grant(t)
		})
	}
}
