package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/wal"
)

// A node serves the records a peer lacks (GET /_cluster/records, fetched
// before a promotion: "promotion never with less") from its log, not only
// from its in-memory tail, which holds only what was appended since the
// node started. Found in review: a standby restarted since (its tail
// begins at its restart) answered 409 to a peer behind that point; the
// peer then took it for a diverged log (unfetchable) and promoted itself
// without the records the restarted node had acknowledged, and the
// restarted node resynced from it and lost them too.
//
// With handoffs, epochs began between the peer's index and the tail: the
// mark in force at the peer's index is then read further back in the log.
func TestRecordsServedFromTheLogBeforeTheTail(t *testing.T) {
	for _, handoffs := range []bool{false, true} {
		t.Run("handoffs="+strconv.FormatBool(handoffs), func(t *testing.T) { testRecordsFromTheLog(t, handoffs) })
	}
}

func testRecordsFromTheLog(t *testing.T, handoffs bool) {
	c := newMemCluster(t, 2, func(cfg *Config) { cfg.SyncStandbys = 1 })
	c.start(0, 1)
	c.waitActive(0)
	c.grant(0, "a")
	// Where a peer that fell behind here is.
	behind, m := c.nodes[1].node.tail.position()
	c.grant(0, "b")
	if handoffs {
		// To node 1 and, once it is synced, back to node 0 (its priority).
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := c.nodes[0].node.handoff(ctx, ""); err != nil {
			t.Fatal(err)
		}
		c.waitActive(0)
	}
	c.grant(0, "c")
	// Node 1 restarts and resumes from its log: its tail begins after it.
	c.crash(1)
	c.open(1)
	c.start(1)
	c.waitActive(0)
	last := c.nodes[1].wal.LastIndex()
	if last <= behind {
		t.Fatalf("node 1's log ends at %d, not beyond %d", last, behind)
	}
	if first, _ := c.nodes[1].node.tail.held(); first <= behind+1 {
		t.Fatalf("node 1's tail holds %d on, want after %d", first, behind+1)
	}
	if _, e := c.nodes[1].node.tail.position(); handoffs != (e.epoch > m.epoch) {
		t.Fatalf("node 1's log is in epoch %d, the peer's %d (handoffs %v)", e.epoch, m.epoch, handoffs)
	}

	q := url.Values{"from": {c.urls[0]}, "index": {strconv.FormatUint(behind, 10)},
		"epoch": {strconv.FormatUint(m.epoch, 10)}, "by": {m.by}}
	rec := httptest.NewRecorder()
	c.nodes[1].node.serveRecords(rec, httptest.NewRequest(http.MethodGet, "/_cluster/records?"+q.Encode(), nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("records after %d (node 1's log: %d..%d): %d %s, want 200", behind, c.nodes[1].wal.FirstIndex(), last, rec.Code, rec.Body)
	}
	br := bufio.NewReader(rec.Body)
	if _, err := br.Discard(len(streamMagic)); err != nil {
		t.Fatal(err)
	}
	want := behind + 1
	var f frame
	for {
		err := readFrame(br, &f)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.kind == frameBegin {
			if f.resumeFrom != behind+1 {
				t.Fatalf("begin frame resumes from %d, want %d", f.resumeFrom, behind+1)
			}
			continue
		}
		if f.kind != frameRecord || f.index != want {
			t.Fatalf("frame %c index %d, want record %d", f.kind, f.index, want)
		}
		want++
	}
	if want != last+1 {
		t.Fatalf("records %d..%d served, want %d..%d", behind+1, want-1, behind+1, last)
	}

	// A position the log does not agree with is still refused.
	q.Set("by", "http://elsewhere")
	rec = httptest.NewRecorder()
	c.nodes[1].node.serveRecords(rec, httptest.NewRequest(http.MethodGet, "/_cluster/records?"+q.Encode(), nil))
	if rec.Code != http.StatusConflict {
		t.Fatalf("records after %d under another node's mark: %d, want 409", behind, rec.Code)
	}
}

// The standby promoted after a failover fetches what it lacks from the
// most advanced live node even when that node's log no longer holds the
// records after the standby's position: a snapshot of its log removed
// them (cmd/baton saves one every 16 MB of log), or it installed one. That
// node then sends a snapshot, and the records after it. Found in review:
// it answered 409, the standby took it for a diverged log (unfetchable)
// and promoted itself without the grants only the other standby had
// acknowledged (sync_standbys 1), which that standby then lost too as it
// resynced from it. A position under another epoch's mark is still
// refused.
func TestMemPromotionFetchesASnapshotWhenThePeersLogBeginsAfterIt(t *testing.T) {
	c := newMemClusterLog(t, 3, func(wc *wal.Config) { wc.SegmentSize = 4096 },
		func(cfg *Config) { cfg.SyncStandbys, cfg.TailBytes = 1, 1 })
	c.start(0, 1, 2)
	c.waitActive(0)
	c.grant(0, "before")
	// Node 1's stream is held back: the grants below are answered once
	// node 2 has them.
	c.links.holdStream(1, true)
	var gs []engine.Grant
	for k := range 200 {
		gs = append(gs, c.grant(0, fmt.Sprintf("lock-%03d", k)))
	}
	behind, m := c.nodes[1].node.tail.position()
	l2 := c.nodes[2].wal
	err := l2.SaveSnapshot(l2.LastIndex(), func(w io.Writer) error {
		_, err := c.nodes[2].eng.WriteDump(w, l2.LastIndex)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := c.nodes[2].node.tail.held(); l2.FirstIndex() <= behind+1 || first <= behind+1 {
		t.Fatalf("the test's premise: node 2's log holds %d.. (its tail %d..), not only after node 1's index %d",
			l2.FirstIndex(), first, behind)
	}

	// Under another epoch's mark, node 1's log would have diverged from
	// node 2's: refused, no snapshot.
	q := url.Values{"from": {c.urls[1]}, "index": {strconv.FormatUint(behind, 10)},
		"epoch": {strconv.FormatUint(m.epoch, 10)}, "by": {"http://elsewhere"}}
	rec := httptest.NewRecorder()
	c.nodes[2].node.serveRecords(rec, httptest.NewRequest(http.MethodGet, "/_cluster/records?"+q.Encode(), nil))
	if rec.Code != http.StatusConflict {
		t.Fatalf("records after %d under another node's mark: %d, want 409", behind, rec.Code)
	}

	c.crash(0)
	c.links.holdStream(1, false)
	c.waitActive(1, 1, 2)
	for i := 1; i <= 2; i++ {
		for _, g := range gs {
			if got := c.holds(i, g.Key); got != g.Token {
				t.Fatalf("node %d: %s held by %d, want %d (answered with node 2's acknowledgement)", i, g.Key, got, g.Token)
			}
		}
	}
}

// A node knows the epoch mark in force at every index since it started or
// last installed a snapshot, even once its tail has evicted the records
// there and the mark was in the snapshot, not in its log's records. Found
// in review: node 1 installed node 0's snapshot, was promoted after node
// 0's crash and wrote on past its tail's size; node 0's position (its
// last index, under its own epoch) was then taken for a diverged log: the
// mark in force there was looked for in node 1's log records, which begin
// after the snapshot that holds it. Node 0 answered 409 for the fetch
// before a promotion (and took a snapshot instead of resuming its
// stream).
func TestRecordsServedAfterAnInstallPastTheTail(t *testing.T) {
	c := newMemClusterLog(t, 2, func(wc *wal.Config) { wc.SegmentSize = 4096 },
		func(cfg *Config) { cfg.SyncStandbys, cfg.TailBytes = 1, 1 })
	c.start(0)
	c.waitActive(0, 0)
	for k := range 100 {
		c.grant(0, fmt.Sprintf("alone-%d", k))
	}
	c.snapshotLog(0)
	c.start(1) // node 0's log no longer holds its first records: a snapshot
	c.waitActive(0)
	if c.nodes[1].node.installs.Load() == 0 {
		t.Fatal("the test's premise: node 1 synced by installing node 0's snapshot")
	}
	for k := range 5 {
		c.grant(0, fmt.Sprintf("e1-%d", k))
	}
	pos, m := c.nodes[0].node.tail.position()
	c.crash(0)
	c.waitActive(1, 1)
	for k := range 5 {
		c.grant(1, fmt.Sprintf("e2-%d", k))
	}
	l1 := c.nodes[1].wal
	if first, _ := c.nodes[1].node.tail.held(); l1.FirstIndex() > pos+1 || first <= pos+2 {
		t.Fatalf("the test's premise: node 1's log holds %d.., its tail %d.., node 0's position %d", l1.FirstIndex(), first, pos)
	}

	q := url.Values{"from": {c.urls[0]}, "index": {strconv.FormatUint(pos, 10)},
		"epoch": {strconv.FormatUint(m.epoch, 10)}, "by": {m.by}}
	rec := httptest.NewRecorder()
	c.nodes[1].node.serveRecords(rec, httptest.NewRequest(http.MethodGet, "/_cluster/records?"+q.Encode(), nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("records after %d under node 0's mark (node 1's log: %d..%d): %d %s, want 200",
			pos, l1.FirstIndex(), l1.LastIndex(), rec.Code, rec.Body)
	}
	br := bufio.NewReader(rec.Body)
	if _, err := br.Discard(len(streamMagic)); err != nil {
		t.Fatal(err)
	}
	want := pos + 1
	var f frame
	for {
		err := readFrame(br, &f)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.kind == frameBegin && f.resumeFrom == pos+1 {
			continue
		}
		if f.kind != frameRecord || f.index != want {
			t.Fatalf("frame %c index %d resume_from %d, want record %d", f.kind, f.index, f.resumeFrom, want)
		}
		want++
	}
	if want != l1.LastIndex()+1 {
		t.Fatalf("records %d..%d served, want %d..%d", pos+1, want-1, pos+1, l1.LastIndex())
	}

	// Under the epoch node 1 began, that position would have diverged.
	e2 := c.nodes[1].eng.Epoch()
	q.Set("epoch", strconv.FormatUint(e2.Epoch, 10))
	q.Set("by", e2.By)
	rec = httptest.NewRecorder()
	c.nodes[1].node.serveRecords(rec, httptest.NewRequest(http.MethodGet, "/_cluster/records?"+q.Encode(), nil))
	if rec.Code != http.StatusConflict {
		t.Fatalf("records after %d under node 1's own mark: %d, want 409", pos, rec.Code)
	}
}

// agrees reads the mark in force at a peer's index from this node's log
// when its tail does not know it; a snapshot that removes segments between
// its reading of the log's first index and its scan (here: just before the
// scan from there) made the scan fail (wal.ErrCompacted), and agrees
// answered false: the fetch was answered 409 (a diverged log), and the
// peer passed this node over until it synced. The scan is made again.
func TestAgreesScansAgainAfterASnapshotRemovedSegments(t *testing.T) {
	wc := wal.DefaultConfig(t.TempDir())
	wc.SegmentSize = 4096
	l, err := wal.Open(wc)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	add := func(r engine.Record) uint64 {
		t.Helper()
		i, err := l.Append(engine.AppendRecord(nil, &r))
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Wait(i); err != nil {
			t.Fatal(err)
		}
		return i
	}
	fill := func(k int) {
		for i := range k {
			add(engine.Record{Kind: engine.RecGrant, Key: fmt.Sprintf("key-%04d", i), Token: uint64(i + 1), Lease: time.Minute})
		}
	}
	add(engine.Record{Kind: engine.RecEpoch, Epoch: 1, Owner: "http://a"})
	fill(200)
	second := add(engine.Record{Kind: engine.RecEpoch, Epoch: 2, Owner: "http://a"})
	fill(50)
	index := l.LastIndex() // the peer's position, under epoch 2's mark
	fill(50)
	add(engine.Record{Kind: engine.RecEpoch, Epoch: 3, Owner: "http://b"})
	fill(50)
	if l.FirstIndex() != 1 {
		t.Fatal("the test's premise: the log begins at 1")
	}
	n := &Node{wal: l, tail: newTail(1)}
	n.tail.reset(l.LastIndex(), mark{epoch: 3, by: "http://b"}) // as at a restart: no mark known before
	snapped := false
	scanHook = func(from uint64) {
		if from == 1 && !snapped {
			snapped = true
			if err := l.SaveSnapshot(second-1, func(io.Writer) error { return nil }); err != nil {
				t.Error(err)
			}
		}
	}
	defer func() { scanHook = nil }()
	if !n.agrees(index, mark{epoch: 2, by: "http://a"}) {
		t.Errorf("agrees(%d, epoch 2) = false after a snapshot removed the segments before epoch 2's mark at %d", index, second)
	}
	if !snapped || l.FirstIndex() <= 1 || l.FirstIndex() > second {
		t.Errorf("the test's premise: the snapshot removed the segments before %d (snapshot taken %v, log begins at %d)", second, snapped, l.FirstIndex())
	}
	if n.agrees(index, mark{epoch: 1, by: "http://a"}) {
		t.Errorf("agrees(%d, epoch 1) = true, a mark not in force there", index)
	}
}
