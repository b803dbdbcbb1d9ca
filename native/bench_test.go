package native_test

import (
	"runtime"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/native"
)

// BenchmarkParkedAcquire reports what one more parked native acquire costs
// the server, beyond its connection (whose reader and writer are warmed
// up first): goroutine stack and heap, in bytes per waiter.
func BenchmarkParkedAcquire(b *testing.B) {
	const n = 2000
	for range b.N {
		e := newEnv(b, engine.Config{}, native.Config{})
		h := e.dial()
		h.send("A m 600 -")
		grant(b, h.read(), "m")
		cs := make([]*client, n)
		for i := range cs {
			cs[i] = e.dial()
			cs[i].send("R warm 1", "A k%20x - 1e3")
			cs[i].read()
			cs[i].read()
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		for _, c := range cs {
			c.send("A m 600 -")
		}
		waitFor(b, func() bool { li, _ := e.eng.Status("m"); return li.Waiters == n })
		runtime.GC()
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(int64(m1.StackInuse)-int64(m0.StackInuse))/n, "stack-B/waiter")
		b.ReportMetric(float64(int64(m1.HeapInuse)-int64(m0.HeapInuse))/n, "heap-B/waiter")
		for _, c := range cs {
			c.nc.Close()
		}
		waitFor(b, func() bool { li, _ := e.eng.Status("m"); return li.Waiters == 0 })
	}
}
