package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
)

// BenchmarkMemReplication is the cost of replication without HTTP clients:
// a memCluster of an active and one standby (real engines and logs, the
// stream and the acknowledgements over loopback HTTP, as between two
// processes), and 16 goroutines that acquire and release on the active's
// engine: each its own key (uncontended) or all one key (contended: every
// acquire but the first queues). An op is one acquire+release. Besides
// ns/op (wall clock, which a loaded machine stretches), it reports
// cpu-us/op: this process's CPU time (user + system) per op, the active's
// and the standby's together, which moves less with the load; and the
// batches: recs/write, the records per stream write, and recs/ack, per
// acknowledgement.
//
//	go test -run '^$' -bench MemReplication -benchtime 20000x -count 3 ./cluster
func BenchmarkMemReplication(b *testing.B) {
	for _, syncN := range []int{0, 1} {
		for _, contended := range []bool{false, true} {
			name := "uncontended"
			if contended {
				name = "contended"
			}
			b.Run(fmt.Sprintf("sync=%d/%s", syncN, name), func(b *testing.B) {
				benchReplication(b, syncN, contended)
			})
		}
	}
}

func benchReplication(b *testing.B, syncN int, contended bool) {
	c := newMemCluster(b, 2, func(cfg *Config) { cfg.SyncStandbys = syncN })
	c.start(0, 1)
	c.waitActive(0)
	c.waitFor("node 1 synced", func() bool { return len(c.nodes[0].node.hub.synced()) == 1 })
	act := c.nodes[0].eng
	const clients = 16
	var next atomic.Int64
	var failed atomic.Bool
	run := func(k int) {
		key := "bench/hot"
		if !contended {
			key = fmt.Sprint("bench/", k)
		}
		ctx := context.Background()
		for next.Add(1) <= int64(b.N) && !failed.Load() {
			g, err := act.Acquire(ctx, engine.AcquireRequest{Key: key, Lease: time.Minute})
			if err == nil {
				err = act.Release(key, g.Token)
			}
			if err != nil {
				b.Error(err)
				failed.Store(true)
			}
		}
	}
	before := c.nodes[0].node.ReplicationStats()
	sbefore := c.nodes[1].node.ReplicationStats()
	cpu0 := cpuTime(b)
	b.ResetTimer()
	var wg sync.WaitGroup
	for k := range clients {
		wg.Go(func() { run(k) })
	}
	wg.Wait()
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	after := c.nodes[0].node.ReplicationStats()
	safter := c.nodes[1].node.ReplicationStats()
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-us/op")
	if w := after.SentWrites - before.SentWrites; w > 0 {
		b.ReportMetric(float64(after.SentRecords-before.SentRecords)/float64(w), "recs/write")
	}
	if a := safter.AcksSent - sbefore.AcksSent; a > 0 {
		b.ReportMetric(float64(safter.AppliedRecords-sbefore.AppliedRecords)/float64(a), "recs/ack")
	}
}

// cpuTime is the CPU time (user + system) this process used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
