package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Benchmarks of the engine alone (no HTTP). Figures for the closing note:
//
//	go test -run XXX -bench . ./engine/

// BenchmarkAcquireReleaseUncontended: every goroutine takes and releases its
// own key, so the work spreads over the shards.
func BenchmarkAcquireReleaseUncontended(b *testing.B) {
	e := newEngine(b, Config{DataDir: b.TempDir()})
	defer e.Close()
	var next atomic.Int64
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprint("bench/", next.Add(1))
		for pb.Next() {
			g, err := e.Acquire(ctx, AcquireRequest{Key: key})
			if err != nil {
				b.Error(err)
				return
			}
			if err := e.Release(key, g.Token); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAcquireReleaseContended: 4 goroutines per CPU on one key; each
// acquire queues and is handed the lock by the previous holder's release.
func BenchmarkAcquireReleaseContended(b *testing.B) {
	e := newEngine(b, Config{DataDir: b.TempDir()})
	defer e.Close()
	const key = "bench/hot"
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(4)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			g, err := e.Acquire(ctx, AcquireRequest{Key: key})
			if err != nil {
				b.Error(err)
				return
			}
			if err := e.Release(key, g.Token); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkAcquireReleaseWithID: as uncontended, with a waiter ID (the
// Idempotency-Key path: a ticket is kept for the retention period). The
// IDs are as long as the Go client's (26 random characters, "-", a
// sequence number) and made before the timer starts.
func BenchmarkAcquireReleaseWithID(b *testing.B) {
	e := newEngine(b, Config{DataDir: b.TempDir()})
	defer e.Close()
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("QWERTYUIOPASDFGHJKLZXCVBNM-%d", i)
	}
	var next, seq atomic.Int64
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		key := fmt.Sprint("bench/", next.Add(1))
		for pb.Next() {
			g, err := e.Acquire(ctx, AcquireRequest{Key: key, ID: ids[seq.Add(1)-1]})
			if err != nil {
				b.Error(err)
				return
			}
			if err := e.Release(key, g.Token); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func heapInUse() (heap, stack uint64) {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, ms.StackInuse
}

// BenchmarkMemoryPerHeldKey holds 200,000 keys (each with its lease in the
// timer heap) and reports the heap growth per key. The key strings are
// made before the first measurement: B/key is the engine's own state.
func BenchmarkMemoryPerHeldKey(b *testing.B) {
	const n = 200_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("orders/%08d", i)
	}
	var perKey float64
	for range b.N {
		e := newEngine(b, Config{})
		before, _ := heapInUse()
		for _, k := range keys {
			if _, err := e.Acquire(context.Background(), AcquireRequest{Key: k}); err != nil {
				b.Fatal(err)
			}
		}
		after, _ := heapInUse()
		perKey += float64(int64(after)-int64(before)) / n
		if k, _ := e.Counts(); k != n {
			b.Fatalf("%d keys held", k)
		}
		e.Close()
	}
	b.ReportMetric(perKey/float64(b.N), "B/key")
}

// BenchmarkMemoryPerWaiter parks 20,000 acquires (each a goroutine blocked
// in Acquire, as an HTTP handler would be) behind held keys and reports heap
// plus goroutine stack growth per waiter.
func BenchmarkMemoryPerWaiter(b *testing.B) {
	const n, nkeys = 20_000, 100
	var perWaiter, queueHeap float64
	for range b.N {
		e := newEngine(b, Config{})
		for i := range nkeys {
			if _, err := e.Acquire(context.Background(), AcquireRequest{Key: fmt.Sprint("hot/", i)}); err != nil {
				b.Fatal(err)
			}
		}
		keys := make([]string, nkeys)
		for i := range keys {
			keys[i] = fmt.Sprint("hot/", i)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		heap0, stack0 := heapInUse()
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if _, err := e.Acquire(context.Background(), AcquireRequest{Key: keys[i%nkeys], Lease: time.Minute}); err != ErrClosed {
					b.Errorf("parked acquire: %v", err)
				}
			}()
		}
		// B/waiter: heap and stacks of the parked goroutines, from before
		// they started. heapB/waiter: only the heap Acquire adds to an
		// already running goroutine (the queue entry, its channel, ticket).
		heap1, stack1 := heapInUse()
		close(start)
		for {
			if _, w := e.Counts(); w == n {
				break
			}
			time.Sleep(time.Millisecond)
		}
		heap2, stack2 := heapInUse()
		_ = stack1
		queueHeap += float64(int64(heap2)-int64(heap1)) / n
		perWaiter += float64(int64(heap2)-int64(heap0)+int64(stack2)-int64(stack0)) / n
		e.Close()
		wg.Wait()
	}
	b.ReportMetric(perWaiter/float64(b.N), "B/waiter")
	b.ReportMetric(queueHeap/float64(b.N), "heapB/waiter")
}
