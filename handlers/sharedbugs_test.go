package handlers_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/handlers"
)

// Replays over HTTP of bug reports against other lock services'
// semaphores and read/write locks (see each test's comment).

// DELETE ?force=true while waiters of both modes are queued answers the
// shared waiters at the head at once, together (200, mode shared, their
// owners), and leaves the exclusive waiter first in the queue with the
// shared one behind it still waiting; a second force grants the writer
// alone. Replays hazelcast/hazelcast#16810 (freeing an ISemaphore a
// dead member held, by an operator) and apache/curator#1166
// (CURATOR-650: revoking a semaphore lease).
func TestHTTPForceReleaseWithBothModesQueued(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{AdminTokens: []string{"ops"}})
	ops := []string{"Authorization", "Bearer ops"}
	e.acquire("/locks/k?owner=stuck")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chs []<-chan resp
	for i, q := range []string{"mode=shared&owner=r1", "mode=shared&owner=r2", "owner=w1", "mode=shared&owner=r3"} {
		chs = append(chs, e.async(ctx, e.client, http.MethodPost, "/locks/k?"+q, ""))
		e.waitWaiters("k", i+1)
	}
	if r := e.do(http.MethodDelete, "/locks/k?force=true", "", ops...); r.code != http.StatusOK {
		t.Fatalf("force: %d %s", r.code, r.body)
	}
	for i, owner := range []string{"r1", "r2"} {
		g := recv(t, chs[i], owner).grant(t)
		if g.Key != "k" {
			t.Fatalf("%s: %+v", owner, g)
		}
	}
	st := e.status("k")
	if len(st.Holders) != 2 || st.Holders[0].Owner != "r1" || st.Holders[1].Owner != "r2" || st.Holders[0].Mode != api.ModeShared ||
		st.Waiters != 2 || st.OldestWaiterOwner != "w1" || st.OldestWaiterMode != api.ModeExclusive {
		t.Fatalf("after the force: %+v; want r1, r2 holding shared, w1 first of 2 waiters", st)
	}
	if !pending(chs[2]) || !pending(chs[3]) {
		t.Fatal("w1 or r3 answered while r1 and r2 hold")
	}
	if r := e.do(http.MethodDelete, "/locks/k?force=true", "", ops...); r.code != http.StatusOK {
		t.Fatalf("second force: %d %s", r.code, r.body)
	}
	recv(t, chs[2], "w1").grant(t)
	if st := e.status("k"); len(st.Holders) != 1 || st.Holders[0].Owner != "w1" || st.Holders[0].Mode != api.ModeExclusive || st.Waiters != 1 {
		t.Fatalf("after the second force: %+v; want w1 alone, r3 waiting", st)
	}
	if !pending(chs[3]) {
		t.Fatal("r3 answered while w1 holds")
	}
}

// A 409 limit_mismatch changes nothing, Idempotency-Key included: the
// key's limit, holders and queue stay; the refused request's key is not
// remembered, so its retry with the key's limit queues at the tail like
// any new acquire (no 422 for a key reused, no answer of the refusal).
// Replays redisson/redisson#4678 (trySetPermits overwrote the permits of
// a semaphore whose permits were all taken).
func TestHTTPLimitMismatchWithIdempotencyKeyChangesNothing(t *testing.T) {
	e := newEnv(t, engine.Config{}, handlers.Config{})
	a := e.acquire("/locks/sem?limit=2&owner=a&mode=shared")
	b := e.acquire("/locks/sem?owner=b&mode=shared")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := e.async(ctx, e.client, http.MethodPost, "/locks/sem?owner=q", "")
	e.waitWaiters("sem", 1)
	before := e.status("sem")
	r := e.do(http.MethodPost, "/locks/sem?limit=5&mode=shared&owner=x", "", api.HeaderIdempotencyKey, "x-1")
	if eb := r.errBody(t); r.code != http.StatusConflict || eb.Code != api.CodeLimitMismatch || eb.Field != "limit" {
		t.Fatalf("limit 5 on a semaphore of 2: %d %s; want 409 limit_mismatch naming limit", r.code, r.body)
	}
	after := e.status("sem")
	if after.Limit != before.Limit || len(after.Holders) != len(before.Holders) || after.Waiters != before.Waiters || after.OldestWaiterOwner != "q" {
		t.Fatalf("after the limit_mismatch: %+v; want %+v", after, before)
	}
	x := e.async(ctx, e.client, http.MethodPost, "/locks/sem?limit=2&mode=shared&owner=x", "", api.HeaderIdempotencyKey, "x-1")
	e.waitWaiters("sem", 2)
	if st := e.status("sem"); st.OldestWaiterOwner != "q" {
		t.Fatalf("the retry with the key's limit: %+v; want it behind q", st)
	}
	e.release("sem", a.Token)
	e.release("sem", b.Token)
	recv(t, q, "q").grant(t)
	if !pending(x) {
		t.Fatal("x granted beside q, an exclusive holder")
	}
}
