package cluster

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/wal"
)

// A standby whose snapshot install failed (a full disk) keeps its old log
// (wal.Install writes the new snapshot first) but takes no record until an
// install succeeds. Its log's position still agreed with the active's, so
// every reopened stream resumed from it, every record was refused, and the
// node stayed failing after the disk had room again, until a restart
// (README said to restart it). It now asks its active for a snapshot
// while its last install failed, at most once per backoff, and syncs by
// itself once the disk has room.
func TestMemStandbyRetriesAFailedInstall(t *testing.T) {
	c, standby := syncedStandby(t)
	standby.diskFull.Store(true)
	err := standby.wal.Install(standby.wal.LastIndex(), func(w io.Writer) error {
		_, err := w.Write(make([]byte, 4096))
		return err
	})
	if err == nil {
		t.Fatal("an install on a full disk succeeded: the case is not tested")
	}
	g := c.grant(0, "b")
	time.Sleep(500 * time.Millisecond) // streams reopened onto the failed log
	standby.diskFull.Store(false)
	c.waitFor("b replicated once the disk has room", func() bool { return c.holds(1, "b") == g.Token })
	c.waitFor("the standby's log writes", func() bool { return !standby.node.status().LogFailing && standby.wal.Healthy() })
}

// A standby whose disk stays full asks for the active's snapshot at most
// once per backoff (a failover timeout, doubling): each one costs the
// active a dump of its whole state, and the stream was reopened every few
// hundred ms. Once the disk has room, the next snapshot installs.
func TestMemFailedInstallsBackOff(t *testing.T) {
	var lines logLines
	// As TestMemFirstSyncIsNoReset: node 0's log no longer holds its
	// first records, so node 1 syncs by a snapshot.
	c := newMemClusterLog(t, 2, func(wc *wal.Config) { wc.SegmentSize = 4096 }, func(cfg *Config) {
		cfg.TailBytes = 1
		cfg.Logger = slog.New(slog.NewTextHandler(&lines, &slog.HandlerOptions{Level: slog.LevelInfo})).With("self", cfg.Self)
	})
	c.start(0)
	c.waitActive(0, 0)
	var g engine.Grant
	for k := range 100 {
		g = c.grant(0, fmt.Sprintf("k%d", k))
	}
	c.snapshotLog(0)
	active := "self=" + c.nodes[0].url
	c.nodes[1].diskFull.Store(true)
	c.start(1)
	c.waitFor("a snapshot sent to node 1", func() bool { return lines.count(active, "standby gets a snapshot") >= 1 })
	time.Sleep(3500 * time.Millisecond)
	// At 0, 1 s and 3 s (backoff 1 s, then 2 s): 3; a stream reopened at
	// each heartbeat sent one every few hundred ms.
	if n := lines.count(active, "standby gets a snapshot"); n > 4 {
		t.Errorf("%d snapshots sent to a standby whose disk is full, in 3.5 s; want at most 4", n)
	}
	c.nodes[1].diskFull.Store(false)
	c.waitFor("the grants replicated once the disk has room", func() bool { return c.holds(1, "k99") == g.Token })
}
