package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/wal"
)

// indexLog is an active's log in memory: indexes 1, 2, 3...
type indexLog struct {
	mu sync.Mutex
	n  uint64
}

func (l *indexLog) Append([]byte) (uint64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	return l.n, nil
}

func (l *indexLog) Wait(uint64) error { return nil }

func (l *indexLog) last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// A node starts from a snapshot that holds records of some shards beyond
// its log's end: one a standby installed from its active (shards dumped
// at rising indexes while the active went on), whose stream ended before
// those records came. The records this node then writes itself at those
// indexes (its grants and releases, answered) are still there after its
// next restart: not taken for records the snapshot holds and skipped.
func TestSnapshotAheadOfTheLogKeepsLaterRecords(t *testing.T) {
	leakCheck(t)
	dir := t.TempDir()
	cfg, err := loadConfig([]string{"--listen", "127.0.0.1:0", "--data-dir", dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	shards := cfg.engineConfig().Shards
	alog := &indexLog{}
	a, err := engine.New(engine.Config{DataDir: "", Shards: shards, Log: alog})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	keyIn := func(shard int, prefix string, skip int) string {
		for i := 0; ; i++ {
			if k := fmt.Sprintf("%s-%d", prefix, i); a.ShardOf(k) == shard {
				if skip == 0 {
					return k
				}
				skip--
			}
		}
	}
	acquire := func(e *engine.Engine, key string) engine.Grant {
		t.Helper()
		g, err := e.Acquire(context.Background(), engine.AcquireRequest{Key: key, Lease: time.Hour})
		if err != nil {
			t.Fatalf("acquire %s: %v", key, err)
		}
		return g
	}
	acquire(a, keyIn(0, "pre", 0))
	var during []engine.Grant
	var dump bytes.Buffer
	base, err := a.WriteDump(&dump, func() uint64 {
		i := alog.last()
		if during == nil {
			// While the dump runs: changes in the last shard, which its
			// dump (at the index after them) holds.
			for k := range 5 {
				during = append(during, acquire(a, keyIn(shards-1, "during", k)))
			}
		}
		return i
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := wal.Open(wal.DefaultConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Install(base, func(w io.Writer) error { _, err := w.Write(dump.Bytes()); return err }); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	n, err := OpenNode(cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	own := acquire(n.Engine(), keyIn(shards-1, "own", 0))
	if err := n.Engine().Release(during[0].Key, during[0].Token); err != nil {
		t.Fatal(err)
	}
	if got := n.wal.LastIndex(); got > alog.last() {
		t.Fatalf("the test's premise: this node's records end at %d, past the snapshot's reach %d", got, alog.last())
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}

	n, err = OpenNode(cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	holder := func(key string) uint64 {
		st, err := n.Engine().Status(key)
		if err != nil || st.Holder == nil {
			return 0
		}
		return st.Holder.Token
	}
	if got := holder(own.Key); got != own.Token {
		t.Errorf("after a restart %s is held by %d; want %d, granted by this node", own.Key, got, own.Token)
	}
	if got := holder(during[0].Key); got != 0 {
		t.Errorf("after a restart %s is held by %d; want free, released by this node", during[0].Key, got)
	}
}
