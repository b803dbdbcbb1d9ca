// Package dumptest makes, for tests, the snapshot that reaches past a
// log's end: an active's dump taken shard by shard while it went on
// granting, so that the shards dumped last hold records beyond the index
// the dump started at (issue 12's install gap). The cluster's and
// cmd/baton's tests of that gap share it.
package dumptest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
)

// IndexLog is an engine.Log that only numbers its records (1, 2, ...):
// nothing is written, every Wait returns at once.
type IndexLog struct {
	mu sync.Mutex
	n  uint64
}

// Append returns the next index and a nil error.
func (l *IndexLog) Append([]byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return l.n, nil
}

// Wait returns nil.
func (l *IndexLog) Wait(uint64) error { return nil }

// Last is the last index given.
func (l *IndexLog) Last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// KeyIn returns the skip-th key named "prefix-N" that e keeps in shard.
func KeyIn(e *engine.Engine, shard int, prefix string, skip int) string {
	for n := 0; ; n++ {
		if k := fmt.Sprintf("%s-%d", prefix, n); e.ShardOf(k) == shard {
			if skip == 0 {
				return k
			}
			skip--
		}
	}
}

// Acquire takes key on e for an hour, or fails the test.
func Acquire(t testing.TB, e *engine.Engine, key string) engine.Grant {
	t.Helper()
	g, err := e.Acquire(context.Background(), engine.AcquireRequest{Key: key, Lease: time.Hour})
	if err != nil {
		t.Fatalf("acquire %s: %v", key, err)
	}
	return g
}

// Ahead returns an active's dump that reaches past its start: a new
// engine of shards shards over an IndexLog grants a key of shard 0, then
// dumps, and while the dump runs (after the first shard) grants five keys
// of the last shard, which that shard's dump holds. It returns the
// engine (closed with the test), its log, the dump, the index the dump
// started at, and the five grants made during it; the log's last index
// is then at least base+4.
func Ahead(t testing.TB, shards int) (e *engine.Engine, l *IndexLog, dump []byte, base uint64, during []engine.Grant) {
	t.Helper()
	l = &IndexLog{}
	e, err := engine.New(engine.Config{DataDir: "", Shards: shards, Log: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	Acquire(t, e, KeyIn(e, 0, "pre", 0))
	var buf bytes.Buffer
	base, err = e.WriteDump(&buf, func() uint64 {
		i := l.Last()
		if during == nil {
			for k := range 5 {
				during = append(during, Acquire(t, e, KeyIn(e, shards-1, "during", k)))
			}
		}
		return i
	})
	if err != nil {
		t.Fatal(err)
	}
	if l.Last() <= base+3 {
		t.Fatalf("the test's premise: the last shard dumped at %d, the dump's base %d", l.Last(), base)
	}
	return e, l, buf.Bytes(), base, during
}
