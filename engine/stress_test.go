package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestStressTimeoutsRacingReleases runs many acquires on few keys in real
// time, with waits as short as the holds, so that waits run out at the very
// moment of releases, and some callers go away or repeat. It checks, from
// the callers' answers and the engine's events:
//   - at most one caller holds a key at a time, and Status agrees;
//   - every grant went to the caller it names and was received, or (caller
//     gone) was released at once; none went to a caller told ErrTimeout;
//   - a repeat of a timed-out request is ErrTimeout at once;
//   - in the end no key is stuck: every key is free and the engine empty.
//
// No assertion depends on timing; run it with -race.
func TestStressTimeoutsRacingReleases(t *testing.T) {
	type grantEv struct {
		id    string
		ended bool
	}
	var mu sync.Mutex
	grants := map[uint64]*grantEv{} // token -> grant event
	e := newEngine(t, Config{Shards: 4, OnEvent: func(ev Event) {
		mu.Lock()
		defer mu.Unlock()
		switch ev.Kind {
		case EventGrant:
			if grants[ev.Token] != nil {
				t.Errorf("token %d granted twice", ev.Token)
			}
			grants[ev.Token] = &grantEv{id: ev.WaiterID}
		case EventRelease, EventExpire:
			if g := grants[ev.Token]; g == nil || g.ended {
				t.Errorf("token %d ended but not held", ev.Token)
			} else {
				g.ended = true
			}
		}
	}})
	defer e.Close()

	keys := []string{"s/0", "s/1", "s/2"}
	var inside [3]atomic.Int32
	workers, iters := 16, 300
	if testing.Short() {
		iters = 40
	}
	type answer struct {
		token uint64
		err   error
	}
	answers := make([]map[string]answer, workers)
	var wg sync.WaitGroup
	for w := range workers {
		answers[w] = map[string]answer{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range iters {
				ki := r.IntN(len(keys))
				key := keys[ki]
				id := fmt.Sprintf("%d-%d", w, i)
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if r.IntN(6) == 0 {
					ctx, cancel = context.WithTimeout(ctx, time.Duration(50+r.IntN(1500))*time.Microsecond)
				}
				wait := time.Duration(50+r.IntN(1500)) * time.Microsecond
				g, err := e.Acquire(ctx, AcquireRequest{Key: key, Lease: time.Minute, Wait: wait, ID: id})
				cancel()
				answers[w][id] = answer{g.Token, err}
				switch {
				case err == nil:
					if n := inside[ki].Add(1); n != 1 {
						t.Errorf("%s: %d holders of %s at once", id, n, key)
					}
					if st, _ := e.Status(key); st.Holder == nil || st.Holder.Token != g.Token {
						t.Errorf("%s: Status(%s) holder %+v; want token %d", id, key, st.Holder, g.Token)
					}
					for range r.IntN(200) {
						runtime.Gosched()
					}
					if r.IntN(4) == 0 {
						time.Sleep(time.Duration(r.IntN(1000)) * time.Microsecond)
					}
					inside[ki].Add(-1)
					if r.IntN(10) == 0 {
						e.Abandon(g, id)
					} else if err := e.Release(key, g.Token); err != nil {
						t.Errorf("%s: Release: %v", id, err)
					}
				case errors.Is(err, ErrTimeout):
					if r.IntN(3) == 0 {
						_, err := e.Acquire(context.Background(), AcquireRequest{Key: key, Lease: time.Minute, ID: id})
						if !errors.Is(err, ErrTimeout) {
							t.Errorf("%s: repeat after timeout: %v", id, err)
						}
					}
				case errors.Is(err, context.DeadlineExceeded):
				default:
					t.Errorf("%s: %v", id, err)
				}
			}
		}()
	}
	wg.Wait()

	byID := map[string]answer{}
	var granted, timedOut, gone int
	for _, m := range answers {
		for id, a := range m {
			byID[id] = a
			switch {
			case a.err == nil:
				granted++
			case errors.Is(a.err, ErrTimeout):
				timedOut++
			default:
				gone++
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for tok, g := range grants {
		a, ok := byID[g.id]
		switch {
		case !ok:
			t.Errorf("token %d granted to unknown waiter %q", tok, g.id)
		case !g.ended:
			t.Errorf("token %d (%s) never ended", tok, g.id)
		case a.err == nil && a.token != tok:
			t.Errorf("token %d granted to %s, which received %d", tok, g.id, a.token)
		case errors.Is(a.err, ErrTimeout):
			t.Errorf("token %d granted to %s, which was told ErrTimeout", tok, g.id)
		case a.err != nil && !errors.Is(a.err, context.DeadlineExceeded):
			t.Errorf("token %d granted to %s, which got %v", tok, g.id, a.err)
		}
	}
	for id, a := range byID {
		if a.err == nil && (grants[a.token] == nil || grants[a.token].id != id) {
			t.Errorf("%s received token %d, granted to someone else", id, a.token)
		}
	}
	for _, k := range keys {
		if st, _ := e.Status(k); st.Holder != nil || st.Waiters != 0 {
			t.Errorf("%s stuck: %+v", k, st)
		}
	}
	if k, w := e.Counts(); k != 0 || w != 0 {
		t.Errorf("Counts() = %d, %d at the end; want 0, 0", k, w)
	}
	t.Logf("%d grants received, %d timeouts, %d gone; %d grants in all", granted, timedOut, gone, len(grants))
	if granted == 0 || timedOut == 0 {
		t.Errorf("the mix did not exercise both grants and timeouts")
	}
}
