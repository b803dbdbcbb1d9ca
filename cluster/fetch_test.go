package cluster

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
	"time"
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
