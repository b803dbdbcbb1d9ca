package api_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// A semaphore's acquire cancelled at the moment a slot is released to it
// never leaves that slot held by nobody: either Acquire returns the
// grant, or, once the Client is closed (it settles cancelled acquires),
// the key holds only the holder that stayed. The slot freed is not the
// key's first one (the semaphore's second holder releases), and the
// holders are shared. Replays apache/curator#982 (CURATOR-462:
// InterProcessSemaphoreV2 left an orphaned lease node when an acquire
// was interrupted at the wrong time, so the semaphore stayed full) and
// apache/curator#835 (CURATOR-315), as TestCancelledAcquireLeavesNoHolder
// does for a plain lock.
func TestCancelledSemaphoreAcquireLeavesNoSlotHeld(t *testing.T) {
	srv := startServer(t, engine.Config{}, nil)
	direct := newClient(t, nil, srv.URL)
	ctx := ctxBound(t)
	const races = 40
	granted, cancelled := 0, 0
	for i := range races {
		key := fmt.Sprintf("sem/%d", i)
		opts := []api.AcquireOption{api.WithLimit(2), api.WithShared(), api.WithLease(30 * time.Second)}
		a, err := direct.Acquire(ctx, key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		b, err := direct.Acquire(ctx, key, opts...)
		if err != nil {
			t.Fatal(err)
		}
		c, err := api.NewClient(api.Config{Addresses: []string{srv.URL}})
		if err != nil {
			t.Fatal(err)
		}
		actx, cancel := context.WithCancel(ctx)
		res := acquireAsync(actx, c, key, opts...)
		waitWaiters(t, direct, key, 1)
		// From 400 µs before b's release to 800 µs after it, in 30 µs
		// steps.
		offset := time.Duration(i)*30*time.Microsecond - 400*time.Microsecond
		go func() {
			time.Sleep(max(offset, 0))
			cancel()
		}()
		if offset < 0 {
			time.Sleep(-offset)
		}
		if err := b.Release(ctx); err != nil {
			t.Fatal(err)
		}
		r := <-res
		c.Close()
		want := []uint64{a.Token}
		switch {
		case r.err == nil:
			granted++
			want = append(want, r.l.Token)
		case errors.Is(r.err, context.Canceled):
			cancelled++
		default:
			t.Fatalf("race %d: acquire: %v", i, r.err)
		}
		deadline := time.Now().Add(time.Second)
		for {
			st := status(t, direct, key)
			var got []uint64
			for _, h := range st.Holders {
				got = append(got, h.Token)
			}
			if fmt.Sprint(got) == fmt.Sprint(want) && st.Waiters == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("race %d (acquire %v): holders %v, %d waiters; want %v and none waiting", i, r.err, got, st.Waiters, want)
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, tok := range want {
			if err := direct.Release(ctx, key, tok); err != nil {
				t.Fatal(err)
			}
		}
		cancel()
	}
	t.Logf("%d races: %d granted, %d cancelled", races, granted, cancelled)
}
