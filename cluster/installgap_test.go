package cluster

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/dumptest"
	"github.com/baton-io/baton/wal"
)

// A standby installs the active's snapshot, whose shards were dumped at
// rising indexes (the changes made while the dump ran are in the shards
// dumped after them), and the active dies before the records up to the
// last shard's dump index reach the standby. The standby is promoted and
// writes its own records at those indexes. Its installed snapshot still
// says that those indexes of the shards dumped last are in it: a restart
// of the promoted node skips its own records there (answered grants and
// releases), as held by the snapshot.
func TestPromotedAfterAnInstallKeepsItsOwnRecordsAcrossARestart(t *testing.T) {
	const shards = 16
	_, alog, dump, base, onA := dumptest.Ahead(t, shards)

	// The standby: its own log and engine, the active's snapshot
	// installed through the stream's apply path; no record follows (the
	// active is gone).
	dir := t.TempDir()
	open := func() (*wal.Log, *engine.Engine) {
		wc := wal.DefaultConfig(filepath.Join(dir, "log"))
		l, err := wal.Open(wc)
		if err != nil {
			t.Fatal(err)
		}
		e, err := engine.New(engine.Config{DataDir: dir, Standby: true, Shards: shards, Log: NewSyncLog(l)})
		if err != nil {
			t.Fatal(err)
		}
		replayLog(t, e, l)
		return l, e
	}
	l, b := open()
	n, err := New(Config{Self: "http://b", Peers: []string{"http://a", "http://b"}, Log: l}, b)
	if err != nil {
		t.Fatal(err)
	}
	var begun bool
	var dumps engine.Dumps
	var dumpMax, last uint64
	for _, f := range []frame{{kind: frameBegin, epoch: 1}, {kind: frameSnapshot, index: base, data: dump}} {
		if err := n.applyFrame(context.Background(), &f, &begun, &dumps, &dumpMax, &last); err != nil {
			t.Fatal(err)
		}
	}
	// Promoted (failover): its own records follow its log's end.
	n.mu.Lock()
	n.promoteLocked("failover", engine.Failover, 2)
	n.mu.Unlock()
	own := dumptest.Acquire(t, b, dumptest.KeyIn(b, shards-1, "own", 0))
	if err := b.Release(onA[0].Key, onA[0].Token); err != nil {
		t.Fatal(err)
	}
	if got := l.LastIndex(); got > alog.Last() {
		t.Fatalf("the test's premise: the promoted node's records end at %d, past the last shard's dump index %d", got, alog.Last())
	}
	n.wal.SetTap(nil)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// A restart replays the snapshot and the log.
	l, b = open()
	defer l.Close()
	defer b.Close()
	holder := func(key string) uint64 {
		st, err := b.Status(key)
		if err != nil || st.Holder == nil {
			return 0
		}
		return st.Holder.Token
	}
	if got := holder(own.Key); got != own.Token {
		t.Errorf("after a restart %s is held by %d; want %d, granted (and answered) by this node once promoted", own.Key, got, own.Token)
	}
	if got := holder(onA[0].Key); got != 0 {
		t.Errorf("after a restart %s is held by %d; want free, released (and answered) by this node once promoted", onA[0].Key, got)
	}
}
