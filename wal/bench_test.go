package wal

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
)

// BenchmarkAppendWait is one change made durable as the mode promises:
// Append then Wait, serial (one caller) and parallel (16 callers on
// b.RunParallel). records/fsync is the mean group-commit batch.
func BenchmarkAppendWait(b *testing.B) {
	payload := make([]byte, 96) // about one engine record
	for _, mode := range []SyncMode{SyncAlways, SyncInterval, SyncNever} {
		for _, par := range []int{0, 16} {
			name := mode.String() + "/serial"
			if par > 0 {
				name = mode.String() + "/parallel16"
			}
			b.Run(name, func(b *testing.B) {
				cfg := DefaultConfig(b.TempDir())
				cfg.Sync = mode
				cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
				l, err := Open(cfg)
				if err != nil {
					b.Fatal(err)
				}
				defer l.Close()
				b.SetBytes(int64(len(payload) + frameHeader))
				b.ResetTimer()
				if par == 0 {
					for b.Loop() {
						appendWaitB(b, l, payload)
					}
				} else {
					b.SetParallelism((par + 1) / 2) // × GOMAXPROCS (2 in CI)
					b.RunParallel(func(pb *testing.PB) {
						for pb.Next() {
							appendWaitB(b, l, payload)
						}
					})
				}
				b.StopTimer()
				st := l.Stats()
				b.ReportMetric(st.RecordsPerWrite(), "records/write")
				if mode == SyncAlways {
					b.ReportMetric(st.RecordsPerFsync(), "records/fsync")
				}
			})
		}
	}
}

func appendWaitB(b *testing.B, l *Log, payload []byte) {
	i, err := l.Append(payload)
	if err == nil {
		err = l.Wait(i)
	}
	if err != nil {
		b.Error(err)
	}
}

// BenchmarkAppend is the part of a change made with an engine shard
// locked: no I/O (the background goroutine writes what piles up).
func BenchmarkAppend(b *testing.B) {
	cfg := DefaultConfig(b.TempDir())
	cfg.Sync = SyncNever
	l, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payload := make([]byte, 96)
	for b.Loop() {
		if _, err := l.Append(payload); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkReplay reads records back as a restart does.
func BenchmarkReplay(b *testing.B) {
	cfg := DefaultConfig(b.TempDir())
	cfg.Sync = SyncNever
	l, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	payload := make([]byte, 96)
	const n = 100_000
	for range n {
		if _, err := l.Append(payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(n * int64(len(payload)+frameHeader))
	for b.Loop() {
		if err := l.Replay(1, func(uint64, []byte) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/record")
}

// BenchmarkPreallocate is one change at a time in SyncAlways mode (a
// write and an fsync each) with and without zeros written ahead
// (Config.Preallocate): without, every fdatasync also commits the grown
// file size. Run with -count and compare the pairs; the disk, not the
// CPU, sets ns/op.
func BenchmarkPreallocate(b *testing.B) {
	payload := make([]byte, 96)
	for _, pre := range []int64{0, 1 << 20} {
		b.Run(fmt.Sprintf("zeros_ahead=%d", pre), func(b *testing.B) {
			cfg := DefaultConfig(b.TempDir())
			cfg.Sync, cfg.Preallocate = SyncAlways, pre
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			l, err := Open(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			for b.Loop() {
				appendWaitB(b, l, payload)
			}
		})
	}
}
