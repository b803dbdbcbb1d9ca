package cluster_test

import (
	"testing"
	"time"
)

// TestDegradedSpanEndsWhenTheNodeIsPromotedAgain: a node promoted to
// active starts its term not degraded (promoteLocked clears the flag
// without a "recovered" line). A span that began in an earlier term, when
// the node was cut off from its standbys and then stepped down, ends at
// that promotion at the latest: held open until the next "recovered" line
// it widened the windows over a later, healthy term, and excused strict
// faults there (TestSyncFirewallHistoryChaos CHAOS_SEED=5 under address
// cuts: node 0, degraded at 49.232 in fw-isolate, stepped down, took the
// role back by a handoff, and its span still covered the handoff-kill at
// 50.570, which gets no window).
func TestDegradedSpanEndsWhenTheNodeIsPromotedAgain(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, "2026-12-03T20:22:"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	settle := 4*failoverTimeout + 10*heartbeat
	node0 := `time=2026-12-03T20:22:30.000Z level=INFO msg="cluster node started" self=http://127.0.27.1:1000 priority=0 peers=3` + "\n" +
		`time=2026-12-03T20:22:30.500Z level=INFO msg="promoted to active" why=election epoch=1 first_token=1` + "\n" +
		`time=2026-12-03T20:22:49.232Z level=WARN msg="sync_standbys: degraded: fewer standbys acknowledged within sync_timeout; answering without them until they are back" sync_standbys=1 acknowledged=0 index=900 sync_timeout=500ms` + "\n" +
		`time=2026-12-03T20:22:49.900Z level=INFO msg="following the active" active=http://127.0.27.2:1000` + "\n" +
		`time=2026-12-03T20:22:50.300Z level=INFO msg="promoted to active" why=handoff epoch=3 first_token=2` + "\n" +
		`time=2026-12-03T20:22:58.000Z level=WARN msg="sync_standbys: degraded: fewer standbys acknowledged within sync_timeout; answering without them until they are back" sync_standbys=1 acknowledged=0 index=1200 sync_timeout=500ms` + "\n" +
		`time=2026-12-03T20:22:58.300Z level=INFO msg="sync_standbys: recovered from degraded: enough standbys acknowledged the current index" sync_standbys=1 index=1210` + "\n"
	ws := degradedSpans([]string{node0}, settle)
	want := [][2]time.Time{{at("49.232"), at("50.300").Add(settle)}, {at("58.000"), at("58.300").Add(settle)}}
	if len(ws) != len(want) {
		t.Fatalf("spans %v, want %d", ws, len(want))
	}
	for i, w := range ws {
		if !w.Start.Equal(want[i][0]) || !w.End.Equal(want[i][1]) {
			t.Errorf("span %d: %s to %s, want %s to %s", i, w.Start.Format("15:04:05.000"), w.End.Format("15:04:05.000"),
				want[i][0].Format("15:04:05.000"), want[i][1].Format("15:04:05.000"))
		}
	}
}

// TestUnwrittenSpansFollowTheLogsLines: a node's log refuses writes from
// its "refusing changes" line to its "writes succeed again" line, or to
// its next start (a node killed while its disk was full), and a renewal
// it announced then is not a lease its holder was told to count on
// (history.CheckExpiries). The lines are those of TestDiskHistoryChaos
// seed 1, whose renewal announced at 21.36 in a full disk's second was
// lost with the handoff that followed, and the successor expired the
// lease as it was.
func TestUnwrittenSpansFollowTheLogsLines(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, "2026-12-06T08:15:"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	node0 := `time=2026-12-06T08:15:15.116Z level=INFO msg="cluster node started" self=http://127.0.0.1:28903 priority=0 peers=3` + "\n" +
		`time=2026-12-06T08:15:20.355Z level=ERROR msg="wal: write failed; refusing changes until the log can write again" dir=/tmp/x/001 pending_from=320 err="no space left on device"` + "\n" +
		`time=2026-12-06T08:15:21.517Z level=WARN msg="handing off: this node's log cannot write (a full disk?): a synced standby takes over" to=http://127.0.0.2:27392` + "\n" +
		`time=2026-12-06T08:15:21.600Z level=INFO msg="wal: writes succeed again; accepting changes" dir=/tmp/x/001 last_record=331 failed_for=1.245s` + "\n" +
		`time=2026-12-06T08:15:30.000Z level=ERROR msg="wal: sync failed; refusing changes until the log can write again" dir=/tmp/x/001 pending_from=400 err="no space left on device"` + "\n" +
		`time=2026-12-06T08:15:31.000Z level=INFO msg="cluster node started" self=http://127.0.0.1:28903 priority=0 peers=3` + "\n"
	spans := unwrittenSpans([]string{node0, ""})
	want := [][2]time.Time{{at("20.355"), at("21.600")}, {at("30.000"), at("31.000")}}
	if len(spans) != 2 || len(spans[1]) != 0 || len(spans[0]) != len(want) {
		t.Fatalf("spans %v, want %d for node 0 and none for node 1", spans, len(want))
	}
	for i, w := range spans[0] {
		if !w.Start.Equal(want[i][0]) || !w.End.Equal(want[i][1]) {
			t.Errorf("span %d: %s to %s, want %s to %s", i, w.Start.Format("15:04:05.000"), w.End.Format("15:04:05.000"),
				want[i][0].Format("15:04:05.000"), want[i][1].Format("15:04:05.000"))
		}
	}
}
