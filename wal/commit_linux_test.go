package wal

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkGroupCommit models a node under fsync: always: 16 clients
// (b.RunParallel) each loop on request work (a fixed amount of CPU,
// standing for the HTTP round trip: parsing, handler, answer), Append
// and Wait, on GOMAXPROCS cores. disk=real fdatasyncs the file; disk=300us
// replaces the fsync by a blocking 300 µs nanosleep(2) (a disk whose
// fdatasync takes 300 µs, as this VM's when idle, without the noise of the
// other processes' I/O). mode=none is the same loop without a log (the
// ceiling, as the null server is the bench's). It reports records/fsync
// (the mean batch), disk_busy_pct (the share of the wall time an fsync
// was in flight: the rest of the time the disk idles while records wait)
// and cpu_us/op (the process's user and system time per change, the
// clients' work included: the figure that stays meaningful on a loaded
// machine). Compare between builds in interleaved runs (-count).
func BenchmarkGroupCommit(b *testing.B) {
	const work = 40 * time.Microsecond
	iters := calibrateSpin(work)
	payload := make([]byte, 96)
	for _, disk := range []string{"300us", "real"} {
		for _, mode := range []string{"always", "none"} {
			if mode == "none" && disk == "real" {
				continue
			}
			b.Run(fmt.Sprintf("disk=%s/mode=%s", disk, mode), func(b *testing.B) {
				var l *Log
				var st syncTimer
				if mode == "always" {
					cfg := DefaultConfig(b.TempDir())
					cfg.Sync = SyncAlways
					cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
					model := disk == "300us"
					cfg.WrapFile = func(_ string, f File) File {
						return &timedSync{File: f, model: model, t: &st}
					}
					var err error
					if l, err = Open(cfg); err != nil {
						b.Fatal(err)
					}
					defer l.Close()
				}
				b.SetParallelism(8) // × GOMAXPROCS (2 here): 16 clients
				b.ResetTimer()
				st.reset()
				cpu0 := cpuTime()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						spin(iters)
						if l != nil {
							appendWaitB(b, l, payload)
						}
					}
				})
				b.StopTimer()
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu_us/op")
				if l != nil {
					s := l.Stats()
					b.ReportMetric(s.RecordsPerFsync(), "records/fsync")
					b.ReportMetric(100*float64(st.busy())/float64(b.Elapsed()), "disk_busy_pct")
				}
			})
		}
	}
}

// timedSync is a File whose Sync time is summed in t; with model, Sync is
// a blocking 300 µs nanosleep(2) instead of an fdatasync.
type timedSync struct {
	File
	model bool
	t     *syncTimer
}

func (f *timedSync) Sync() error {
	start := time.Now()
	var err error
	if f.model {
		ts := syscall.NsecToTimespec(300_000)
		for {
			if err = syscall.Nanosleep(&ts, &ts); err != syscall.EINTR {
				break
			}
		}
	} else {
		err = f.File.Sync()
	}
	f.t.add(time.Since(start))
	return err
}

// syncTimer sums the time spent in Syncs.
type syncTimer struct {
	mu    sync.Mutex
	total time.Duration
}

func (s *syncTimer) add(d time.Duration) {
	s.mu.Lock()
	s.total += d
	s.mu.Unlock()
}

func (s *syncTimer) reset() { s.mu.Lock(); s.total = 0; s.mu.Unlock() }

func (s *syncTimer) busy() time.Duration { s.mu.Lock(); defer s.mu.Unlock(); return s.total }

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var spinSink atomic.Uint64

// spin burns CPU for iters rounds of a multiply-add.
func spin(iters int) {
	x := uint64(1)
	for i := range iters {
		x = x*6364136223846793005 + uint64(i)
	}
	spinSink.Add(x & 1)
}

// calibrateSpin returns the spin rounds that take about d of CPU.
func calibrateSpin(d time.Duration) int {
	const n = 1 << 20
	best := time.Hour
	for range 5 {
		start := time.Now()
		spin(n)
		best = min(best, time.Since(start))
	}
	return int(float64(n) * float64(d) / float64(best))
}
