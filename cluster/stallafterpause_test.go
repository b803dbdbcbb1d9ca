package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/internal/history"
)

// TestStallAfterAPauseGetsAWindow replays TestSyncHistoryChaos
// CHAOS_SEED=4811 (CHAOS_KINDS=handoff,kill,handoff,pause-standby,
// handoff,kill-standby CHAOS_STRICT=pause-standby CHAOS_CLIENTS=25, load
// average 4 on two cores): node 1, a standby, was stopped (SIGSTOP) from
// 18.915 to 20.147, a strict fault; it logged that gap at 20.185, then,
// starved by the machine, another of 756 ms at 20.976, which began after
// its SIGCONT. Node 0, the active, answered node 1's polls too slowly
// meanwhile and went degraded at 21.808 (neither standby acknowledged
// within sync_timeout); it answered two releases at 21.836, and node 1,
// which had not heard node 0 for a failover timeout, promoted itself at
// 21.924 beside it without them: lost releases, reported outside any
// window, for the second gap and the failover were taken for the strict
// pause's own. A gap that began after its node was continued is the
// machine's, a partition with its window; so is a span in which the
// active answered degraded (README: while degraded, a crash of the
// active loses what only it had, as with sync_standbys 0).
func TestStallAfterAPauseGetsAWindow(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, "2026-12-03T16:35:"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	settle := 4*failoverTimeout + 10*heartbeat
	started := func(i int) string {
		return fmt.Sprintf(`time=2026-12-03T16:34:40.000Z level=INFO msg="cluster node started" self=http://127.0.45.%d:1000 priority=%d peers=3`+"\n", i+1, i)
	}
	gap := func(tm, d string) string {
		return `time=2026-12-03T16:35:` + tm + `Z level=WARN msg="this node did not run for longer than failover_timeout: not serving until every peer has been polled again" gap=` + d + "\n"
	}
	degraded := `time=2026-12-03T16:35:21.808Z level=WARN msg="sync_standbys: degraded: fewer standbys acknowledged within sync_timeout; answering without them until they are back" sync_standbys=1 acknowledged=0 index=1581 sync_timeout=500ms` + "\n" +
		`time=2026-12-03T16:35:21.951Z level=INFO msg="sync_standbys: recovered from degraded: enough standbys acknowledged the current index" sync_standbys=1 index=1591` + "\n"
	node1 := func(gaps string) string {
		return started(1) + `time=2026-12-03T16:35:18.452Z level=INFO msg="following the active" active=http://127.0.45.1:1000` + "\n" +
			"=== signal stopped (signal) to node 1 at 2026-12-03T16:35:18.915322422Z\n" +
			"=== signal continued to node 1 at 2026-12-03T16:35:20.147264385Z\n" + gaps +
			`time=2026-12-03T16:35:21.924Z level=INFO msg="promoted to active" why=failover epoch=8 first_token=1796315722923286` + "\n"
	}
	strict := []history.Window{{Name: "pause-standby node 1", Start: at("18.915"), End: at("20.175").Add(settle)}}
	released := history.Grant{Key: "m", Client: 2, Owner: "c2-18", Mode: api.ModeExclusive, Limit: 1, Token: 1796315720733297,
		Asked: at("19.104"), Granted: at("20.736"), Ending: at("20.742"), Released: at("21.836")}
	seen := []history.Sighting{{Node: 1, Key: "m", Limit: 1, Mode: api.ModeExclusive, Owner: "c2-18", Token: released.Token, Asked: at("21.928"), Seen: at("21.949")}}
	for _, tc := range []struct {
		name       string
		node0, gap string
		bad        bool
	}{
		{"a stall after the SIGCONT", started(0), gap("20.185", "1.276s") + gap("20.976", "756ms"), false},
		{"the active degraded", started(0) + degraded, gap("20.185", "1.276s"), false},
		{"the pause's own gap only", started(0), gap("20.185", "1.276s"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := []string{tc.node0, node1(tc.gap), started(2)}
			ws := append(unforcedFaults(logs, settle, strict), degradedSpans(logs, settle)...)
			bad, _ := history.CheckReleases([]history.Grant{released}, seen, ws)
			if (len(bad) > 0) != tc.bad {
				t.Errorf("windows %v: violations %q, want some: %v", ws, bad, tc.bad)
			}
		})
	}
}
