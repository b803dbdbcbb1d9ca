package native_test

import (
	"bytes"
	"runtime"
	"strconv"
	"sync/atomic"
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

// BenchmarkCycle is one acquire+release of a free key per iteration,
// each of 4 connections looping on its own key (send the acquire, read
// the grant, send the release, read its answer), with a raw client that
// allocates nothing per cycle: allocs/op are the server's. "id+owner"
// sends an id= and an owner= with every acquire, as the Go client does;
// "plain" sends neither. For CPU per cycle, run the test binary with
// -test.benchtime Nx under /usr/bin/time (the engine has no log here).
// kept-B/op is the heap the node still holds per cycle afterwards: the
// waiter ID's ticket, remembered for the retention period.
func BenchmarkCycle(b *testing.B) {
	for _, bc := range []struct {
		name string
		id   bool
	}{{"plain", false}, {"id+owner", true}} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnv(b, engine.Config{}, native.Config{})
			var next atomic.Int64
			var m0, m1 runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&m0)
			b.ReportAllocs()
			b.SetParallelism(2) // 2 per CPU: 4 on 2 cores
			b.RunParallel(func(pb *testing.PB) {
				c := e.dial()
				n := next.Add(1)
				key := "bench/" + strconv.FormatInt(n, 10)
				var buf []byte
				seq := 0
				for pb.Next() {
					seq++
					buf = append(append(buf[:0], "A "...), key...)
					buf = append(buf, " 60 -"...)
					if bc.id {
						buf = append(buf, " id=QWERTYUIOPASDFGHJKLZXCVBN-"...)
						buf = strconv.AppendInt(strconv.AppendInt(buf, n, 10), int64(seq), 36)
						buf = append(buf, " owner=bench-host-1234"...)
					}
					buf = append(buf, '\n')
					tok := c.cycleCall(b, buf, 3)
					buf = append(append(append(buf[:0], "R "...), key...), ' ')
					buf = append(append(buf, tok...), '\n')
					c.cycleCall(b, buf, -1)
				}
			})
			b.StopTimer()
			runtime.GC()
			runtime.ReadMemStats(&m1)
			b.ReportMetric(float64(int64(m1.HeapAlloc)-int64(m0.HeapAlloc))/float64(b.N), "kept-B/op")
		})
	}
}

// cycleCall writes line and reads its answer, which must be OK; it
// returns the answer's field i (-1: none), valid until the next read.
func (c *client) cycleCall(b *testing.B, line []byte, i int) []byte {
	if _, err := c.nc.Write(line); err != nil {
		b.Fatal(err)
	}
	a, err := c.br.ReadSlice('\n')
	if err != nil {
		b.Fatal(err)
	}
	a = a[:len(a)-1]
	for f := 0; ; f++ {
		j := bytes.IndexByte(a, ' ')
		field := a
		if j >= 0 {
			field = a[:j]
		}
		if f == 2 && string(field) != "OK" {
			b.Fatalf("answer %q to %q", a, line)
		}
		if f == i || j < 0 {
			if f < max(i, 2) {
				b.Fatalf("answer %q to %q", a, line)
			}
			return field
		}
		a = a[j+1:]
	}
}
