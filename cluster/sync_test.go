package cluster_test

// Synchronous standbys (issue 13, SPEC section 3 "Synchronous standbys"),
// with real processes: the history checker with sync_standbys 1; a standby
// that is down, paused or cut off makes the active degrade after
// sync_timeout and say so, until it is back.

import (
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/internal/history"
)

// syncFlags makes every node wait for one standby before answering a
// change, and give up on it after half a second.
var syncFlags = []string{"--sync-standbys", "1", "--sync-timeout", "500ms"}

// TestSyncHistoryUnderKills is the history run with sync_standbys 1 under
// kill -9 of the active, each node down longer than failover_timeout (a
// real failover every time), with no fault window: no two holders, no
// token out of order and no lost hold, through the failovers too. One hold
// in twenty lasts a second, so that a grant the new active lacks shows as
// a second holder beside it.
func TestSyncHistoryUnderKills(t *testing.T) {
	runHistory(t, nemesis{keys: history.PlainKeys("a", "b", "c"), clients: 8, hold: 3 * time.Millisecond,
		longHold: time.Second, longShare: 0.05, faults: []string{"kill", "kill", "kill"}, seed: 13,
		extra: syncFlags, strict: map[string]bool{"kill": true}})
}

// TestSyncHistoryUnderPauseAndCut is the history run with sync_standbys 1
// under a pause and a cut of the active: SPEC section 3 promises mutual
// exclusion only outside such partitions, so overlaps are allowed inside
// their windows alone.
func TestSyncHistoryUnderPauseAndCut(t *testing.T) {
	runHistory(t, nemesis{keys: history.PlainKeys("a", "b", "c"), clients: 8, hold: 3 * time.Millisecond,
		faults: []string{"pause", "cut"}, seed: 31, extra: syncFlags})
}

// syncDegraded reports whether node i's GET /cluster says it answers
// without its synchronous standbys (SPEC section 3).
func (c *testCluster) syncDegraded(i int) (bool, error) {
	v, err := c.view(i)
	if err != nil {
		return false, err
	}
	if v.SyncStandbys != 1 {
		return false, fmt.Errorf("GET /cluster on node %d says sync_standbys %d, want 1", i, v.SyncStandbys)
	}
	return v.SyncDegraded, nil
}

// waitDegraded waits until node i's GET /cluster says degraded is want;
// a bounded wait (15 s).
func (c *testCluster) waitDegraded(i int, want bool) {
	c.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		var got bool
		if got, err = c.syncDegraded(i); err == nil && got == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("node %d: GET /cluster never said degraded=%v (%v)", i, want, err)
}

// metric reads one unlabelled sample of node i's GET /metrics.
func (c *testCluster) metric(i int, name string) (float64, error) {
	c.t.Helper()
	resp, err := httpc.Get("http://" + c.nodes[i].listen + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, fmt.Errorf("node %d has no metric %s", i, name)
}

// The log lines of an active that degrades and recovers.
var (
	degradeLine = regexp.MustCompile(`sync_standbys: degraded: fewer standbys acknowledged within sync_timeout`)
	recoverLine = regexp.MustCompile(`sync_standbys: recovered`)
)

// TestSyncStandbyDownDegradesThenRecovers: with sync_standbys 1 and one
// standby, the standby killed, paused or cut off (its node unreachable
// and its replication stream held back at the active's proxy) makes the
// active answer without it once sync_timeout has passed and say so in GET
// /cluster and its log, and recover when the standby is back, which then
// holds what was granted meanwhile.
func TestSyncStandbyDownDegradesThenRecovers(t *testing.T) {
	for _, fault := range []string{"kill", "pause", "cut"} {
		t.Run(fault, func(t *testing.T) {
			c := newCluster(t, 2, true, syncFlags...)
			c.startAll()
			c.waitActive(0, 1)
			before := c.acquire(0, "before", "lease=60")
			c.waitHolder(1, "before", before.Token)
			c.waitDegraded(0, false)

			switch fault {
			case "kill":
				c.kill9(1)
			case "pause":
				c.signal(1, syscall.SIGSTOP)
			case "cut":
				c.nodes[1].proxy.setCut(true)
				c.nodes[0].proxy.hold(streamOf(c.nodes[1].url), true, true)
			}
			during := c.acquire(0, "during", "lease=60") // answered, once sync_timeout has passed
			c.waitDegraded(0, true)
			if !degradeLine.MatchString(c.nodes[0].log.String()) {
				t.Errorf("the active did not log that it degraded:\n%s", c.nodes[0].log)
			}
			if v, err := c.metric(0, "baton_sync_degraded"); err != nil || v != 1 {
				t.Errorf("baton_sync_degraded %v (%v) while degraded, want 1", v, err)
			}
			mark := len(c.nodes[0].log.String())

			switch fault {
			case "kill":
				c.start(1)
			case "pause":
				c.signal(1, syscall.SIGCONT)
			case "cut":
				c.nodes[1].proxy.setCut(false)
				c.nodes[0].proxy.release()
			}
			c.waitDegraded(0, false)
			c.waitActive(0, 1)
			after := c.acquire(0, "after", "lease=60")
			c.waitHolder(1, "after", after.Token)
			for key, tok := range map[string]uint64{"before": before.Token, "during": during.Token, "after": after.Token} {
				if got := c.holder(1, key); got != tok {
					t.Errorf("%s: held by %d on the standby, want %d", key, got, tok)
				}
			}
			since := c.nodes[0].log.String()[mark:]
			if !recoverLine.MatchString(since) {
				t.Errorf("the active did not log that it recovered:\n%s", since)
			}
			if v, err := c.metric(0, "baton_sync_degraded"); err != nil || v != 0 {
				t.Errorf("baton_sync_degraded %v (%v) after the recovery, want 0", v, err)
			}
			if v, err := c.metric(0, "baton_sync_degradations_total"); err != nil || v < 1 {
				t.Errorf("baton_sync_degradations_total %v (%v), want at least 1", v, err)
			}
		})
	}
}

// TestSyncSequentialChangesNeverDegrade: one client's acquires and
// releases one after the other, with a healthy standby, are each answered
// once it acknowledged them, never by going on without it. (Each ack came
// back before the active noted what its stream had sent, was taken for
// less, and the change waited for sync_timeout: one change in five
// degraded.)
func TestSyncSequentialChangesNeverDegrade(t *testing.T) {
	c := newCluster(t, 2, false, "--sync-standbys", "1", "--sync-timeout", "5s")
	c.startAll()
	c.waitActive(0, 1)
	c.waitDegraded(0, false)
	for i := range 30 {
		g := c.acquire(0, "k", "lease=60")
		c.release(0, "k", g.Token)
		if i == 29 {
			c.waitHolder(1, "k", 0)
		}
	}
	if v, err := c.metric(0, "baton_sync_degradations_total"); err != nil || v != 0 {
		t.Errorf("baton_sync_degradations_total %v (%v) after 60 changes with a healthy standby, want 0:\n%s", v, err, c.nodes[0].log)
	}
}
