package cluster_test

// SPEC section 3, "Synchronous standbys": a grant is answered only once
// sync_standbys standbys have written it to their logs, or once the active
// has degraded (sync_timeout passed without them). A tester once saw two
// acquires answered within about 20 ms of a SIGSTOP of the only standby
// (sync_standbys 1, sync_timeout 1 s), with no degradation logged. This
// asserts the contract in a form that does not depend on signal timing:
// the standby is certainly stopped (every thread in state T, see
// testCluster.signal) before the acquire is sent, so it can acknowledge
// nothing the acquire appends; the answer may then come only after the
// active degraded, which its degradation counter says.

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"

	"github.com/baton-io/baton/api"
)

// TestSyncGrantAfterStandbyStopWaitsForDegrade: with sync_standbys 1 and
// one standby stopped (SIGSTOP, waited for), an acquire on the active is
// answered only once the active degraded (baton_sync_degradations_total
// rose before the answer), in every situation where an acknowledgement
// of another stream, connection, term or log could have been counted for
// it: a fresh cluster, a standby restarted (kill -9) and resumed, an
// active restarted (SIGINT: handoff to the standby) that took the role
// back by a handoff, an active killed (failover to the standby) that took
// the role back, a split brain healed either way (the standby's log ran
// further than the active's during it and was replaced by a snapshot at a
// lower index; or the active's state was the older, replaced by the
// standby's, and it took the role back), and over the native protocol.
func TestSyncGrantAfterStandbyStopWaitsForDegrade(t *testing.T) {
	for _, how := range []string{"fresh", "standby restarted", "handed back", "failed back",
		"split, standby's log ahead", "split, active's state replaced", "native"} {
		t.Run(strings.ReplaceAll(how, " ", "_"), func(t *testing.T) {
			split := strings.HasPrefix(how, "split")
			c := newCluster(t, 2, split, "--sync-standbys", "1", "--sync-timeout", "1s")
			if how == "native" {
				c.args = map[int][]string{0: {"--native-listen", freeAddr(t, nodeHost(0))}}
			}
			c.startAll()
			c.waitActive(0, 1)
			synced := func(key string) {
				t.Helper()
				g := c.acquire(0, key, "lease=60")
				c.waitHolder(1, key, g.Token)
				c.waitDegraded(0, false)
			}
			synced("warm")
			switch how {
			case "standby restarted":
				c.kill9(1)
				c.start(1)
				c.waitActive(0, 1)
				synced("warm2")
			case "handed back":
				if code := c.stop(0); code != 0 {
					t.Fatalf("node 0 exited %d after SIGINT", code)
				}
				c.waitActive(1)
				c.start(0) // the higher priority: it asks for the role back
				c.waitActive(0, 1)
				synced("warm2")
			case "failed back":
				c.kill9(0)
				c.waitActive(1)
				c.acquire(1, "during", "lease=60")
				c.start(0)
				c.waitActive(0, 1)
				synced("warm2")
			case "split, standby's log ahead", "split, active's state replaced":
				// Both active; the older state is the one that granted
				// first, the newer the one that granted last (a higher
				// token: node 1's run up to 2 s ahead of the clock after
				// its promotion).
				c.nodes[0].proxy.setCut(true)
				c.nodes[1].proxy.setCut(true)
				c.waitActive(1)
				older, newer, records := 1, 0, 20
				if how == "split, active's state replaced" {
					older, newer, records = 0, 1, 1
				}
				var last api.Grant
				for i := range records {
					last = c.grantOn(older, fmt.Sprintf("older/%d", i), "lease=60")
				}
				if newer == 0 {
					untilClockPasses(last.Token)
				}
				c.grantOn(newer, "newer", "lease=60")
				c.nodes[0].proxy.setCut(false)
				c.nodes[1].proxy.setCut(false)
				c.waitActive(0, 1)
				synced("warm2")
				// What the situation is about happened: the older side
				// stepped down and got the newer one's snapshot.
				for _, line := range []string{"stepping down", "installed the active's snapshot"} {
					if !strings.Contains(c.nodes[older].log.String(), line) {
						t.Fatalf("node %d's log has no %q: the split brain did not end as this test needs", older, line)
					}
				}
			}
			before, err := c.metric(0, "baton_sync_degradations_total")
			if err != nil {
				t.Fatal(err)
			}
			c.signal(1, syscall.SIGSTOP) // returns once every thread is stopped
			var got string
			if how == "native" {
				a := nativeLine(c, "A k 60 -")
				if !strings.HasPrefix(a.body, "A k OK ") {
					t.Fatalf("native acquire: %q, want A k OK", a.body)
				}
				got = a.body
			} else {
				a, err := do(http.MethodPost, "http://"+c.nodes[0].listen+"/locks/k?lease=60")
				if err != nil || a.status != http.StatusOK {
					t.Fatalf("acquire: %v %d %s", err, a.status, a.body)
				}
				got = fmt.Sprint(a.grant.Token)
			}
			after, err := c.metric(0, "baton_sync_degradations_total")
			if err != nil {
				t.Fatal(err)
			}
			if after <= before {
				t.Fatalf("granted (%s) with the only standby stopped before the grant was made, and baton_sync_degradations_total still %v: the grant was answered before a standby wrote it and without degrading", got, after)
			}
			c.waitDegraded(0, true)
		})
	}
}
