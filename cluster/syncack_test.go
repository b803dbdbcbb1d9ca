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
)

// TestSyncGrantAfterStandbyStopWaitsForDegrade: with sync_standbys 1 and
// one standby stopped (SIGSTOP, waited for), an acquire on the active is
// answered only once the active degraded (baton_sync_degradations_total
// rose before the answer), in every situation where an acknowledgement
// of another stream, connection, term or log could have been counted for
// it: a fresh cluster, a standby restarted (kill -9) and resumed, an
// active restarted (SIGINT: handoff to the standby) that took the role
// back by a handoff, an active killed (failover to the standby) that took
// the role back, and over the native protocol.
func TestSyncGrantAfterStandbyStopWaitsForDegrade(t *testing.T) {
	for _, how := range []string{"fresh", "standby restarted", "handed back", "failed back", "native"} {
		t.Run(strings.ReplaceAll(how, " ", "_"), func(t *testing.T) {
			c := newCluster(t, 2, false, "--sync-standbys", "1", "--sync-timeout", "1s")
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
