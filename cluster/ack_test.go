package cluster

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
)

// The acknowledgement connection (POST /_cluster/ack, upgraded): with
// sync_standbys 1 a grant is answered once the standby acknowledged it; a
// request without a peer in from, or without the upgrade, is refused with
// the field named; what a peer sends is never counted past what the active
// sent it.
func TestMemAckStream(t *testing.T) {
	c := newMemCluster(t, 2, func(cfg *Config) { cfg.SyncStandbys = 1 })
	c.start(0, 1)
	c.waitActive(0)
	act := c.nodes[0].node
	before := act.wal.LastIndex() // the grant's record comes after
	g := c.grant(0, "k")          // answered: acknowledged by node 1
	if got := act.hub.acked()[c.nodes[1].url]; got <= before {
		t.Fatalf("grant answered with node 1's acknowledged index %d, not past %d (the log before it)", got, before)
	}
	if c.holds(1, "k") != g.Token {
		t.Fatal("node 1 acknowledged the grant but does not hold it")
	}
	if act.degraded.Load() {
		t.Fatal("the active degraded")
	}
	// The batches are counted on both sides: the grant's record was sent,
	// applied and acknowledged.
	as, ss := act.ReplicationStats(), c.nodes[1].node.ReplicationStats()
	if as.SentRecords == 0 || as.SentWrites == 0 || as.SentWrites > as.SentRecords || as.AcksRead == 0 {
		t.Errorf("the active's counts: %d records sent in %d writes, %d acknowledgements read", as.SentRecords, as.SentWrites, as.AcksRead)
	}
	if ss.AppliedRecords == 0 || ss.AcksSent == 0 {
		t.Errorf("the standby's counts: %d records applied, %d acknowledgements sent", ss.AppliedRecords, ss.AcksSent)
	}

	open := func(q string, upgrade bool) *http.Response {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, c.nodes[0].url+PathPrefix+"/ack"+q, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(HeaderSecret, "mem-secret")
		if upgrade {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", ackUpgrade)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	far := make([]byte, 8)
	binary.BigEndian.PutUint64(far, 1<<40)
	for _, tc := range []struct {
		q       string
		upgrade bool
		status  int
		names   string
	}{
		{"", true, http.StatusBadRequest, "from"},
		{"?from=http://127.0.0.1:1", true, http.StatusBadRequest, "from"},
		{"?from=" + c.nodes[0].url, true, http.StatusBadRequest, "from"},
		{"?from=" + c.nodes[1].url, false, http.StatusUpgradeRequired, "Upgrade"},
	} {
		resp := open(tc.q, tc.upgrade)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(b), tc.names) {
			t.Errorf("ack%s (upgrade %v): %d %q; want %d naming %s", tc.q, tc.upgrade, resp.StatusCode, b, tc.status, tc.names)
		}
	}
	// A peer's ack beyond what its stream was sent counts only up to that;
	// acks read together are recorded as their highest, each counted.
	read := act.acksRead.Load()
	resp := open("?from="+c.nodes[1].url, true)
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		resp.Body.Close()
		t.Fatalf("a peer's ack connection: %d (%T)", resp.StatusCode, resp.Body)
	}
	near := binary.BigEndian.AppendUint64(nil, 1)
	if _, err := rw.Write(append(append(near, far...), near...)); err != nil {
		t.Fatal(err)
	}
	c.waitFor("3 acknowledgements counted", func() bool { return act.acksRead.Load()-read >= 3 })
	rw.Close()
	if got, last := act.hub.acked()[c.nodes[1].url], act.wal.LastIndex(); got > last {
		t.Errorf("acknowledged index %d beyond the log's last %d", got, last)
	}
}

// With sync_standbys 0 nothing waits for a standby's acknowledgements: it
// sends them at most every ackEvery, and what that left out goes with the
// next heartbeat, so the active's acknowledged index still reaches its
// log's end once the stream is idle (replication lag 0).
func TestMemPacedAcks(t *testing.T) {
	// Restored after the cluster's own cleanup (cleanups run last first),
	// once its stream readers have stopped reading it.
	t.Cleanup(func(d time.Duration) func() { return func() { ackEvery = d } }(ackEvery))
	ackEvery = time.Hour // only the first batch and the heartbeats acknowledge
	c := newMemCluster(t, 2)
	c.start(0, 1)
	c.waitActive(0)
	act := c.nodes[0].node
	c.waitFor("node 1 synced", func() bool { return len(act.hub.synced()) == 1 })
	var g engine.Grant
	for k := range 5 {
		g = c.grant(0, fmt.Sprint("k", k))
	}
	c.waitFor("node 1 holds the last grant", func() bool { return c.holds(1, "k4") == g.Token })
	c.waitFor("every record acknowledged", func() bool {
		return act.hub.acked()[c.nodes[1].url] == act.wal.LastIndex()
	})
	st := act.ReplicationStats()
	if len(st.Standbys) != 1 || st.Standbys[0].LagRecords != 0 || st.Standbys[0].LagSeconds != 0 {
		t.Errorf("replication lag after the acknowledgements: %+v", st.Standbys)
	}
}
