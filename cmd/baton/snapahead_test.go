package main

import (
	"io"
	"testing"

	"github.com/baton-io/baton/internal/dumptest"
	"github.com/baton-io/baton/wal"
)

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
	_, alog, dump, base, during := dumptest.Ahead(t, shards)
	l, err := wal.Open(wal.DefaultConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Install(base, func(w io.Writer) error { _, err := w.Write(dump); return err }); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	n, err := OpenNode(cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	own := dumptest.Acquire(t, n.Engine(), dumptest.KeyIn(n.Engine(), shards-1, "own", 0))
	if err := n.Engine().Release(during[0].Key, during[0].Token); err != nil {
		t.Fatal(err)
	}
	if got := n.wal.LastIndex(); got > alog.Last() {
		t.Fatalf("the test's premise: this node's records end at %d, past the snapshot's reach %d", got, alog.Last())
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
