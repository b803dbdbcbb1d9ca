package cluster_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// TestSyncReadShowsNothingUnacknowledged: with sync_standbys 1, a read on
// the active (GET /locks/{key}, GET /locks) shows a change only once it
// stands as an answered change does: the standby wrote it, or the active
// degraded. Before, a read showed a grant (its holder and token) or a
// release the moment the active made it, while the change itself still
// waited for the standby: a failover then would lose it, and a client
// that took the read for the truth (did my cut-off acquire go through? is
// the key free?) or a fenced resource that checks the holder's token would
// act on a change the cluster never made. The only standby is stopped
// (SIGSTOP, waited for) before the change is made, so it acknowledges
// nothing of it; the change is seen made on the active's event feed
// (which announces changes as they are made); the read's answer must then
// come only after the active degraded (baton_sync_degradations_total
// rose), as the change's own answer does, and show the change.
func TestSyncReadShowsNothingUnacknowledged(t *testing.T) {
	c := newCluster(t, 2, false, "--sync-standbys", "1", "--sync-timeout", "2s")
	c.startAll()
	c.waitActive(0, 1)
	active := "http://" + c.nodes[0].listen
	for i, tc := range []struct {
		change, read string
	}{
		{"grant", "/locks/%s"},
		{"grant", "/locks?prefix=%s"},
		{"release", "/locks/%s"},
	} {
		key := fmt.Sprintf("read%d", i)
		t.Run(tc.change+strings.ReplaceAll(strings.Split(tc.read, "%")[0], "/", "_"), func(t *testing.T) {
			// Synced and not degraded: a change the standby acknowledged.
			held := c.acquire(0, key, "lease=60")
			c.waitHolder(1, key, held.Token)
			c.waitDegraded(0, false)
			if tc.change == "grant" {
				a, err := do(http.MethodDelete, active+"/locks/"+key, "Lock-Token", fmt.Sprint(held.Token))
				if err != nil || a.status != http.StatusOK {
					t.Fatalf("release: %v %d %s", err, a.status, a.body)
				}
				c.waitHolder(1, key, 0)
				c.waitDegraded(0, false)
			}
			before, err := c.metric(0, "baton_sync_degradations_total")
			if err != nil {
				t.Fatal(err)
			}
			c.stopStandby(t, 1)
			answered := make(chan answer, 1)
			go func() {
				var a answer
				var err error
				if tc.change == "grant" {
					a, err = do(http.MethodPost, active+"/locks/"+key+"?lease=60")
				} else {
					a, err = do(http.MethodDelete, active+"/locks/"+key, "Lock-Token", fmt.Sprint(held.Token))
				}
				if err != nil {
					a.body = err.Error()
				}
				answered <- a
			}()
			c.waitEvent(0, key, tc.change)
			r, err := do(http.MethodGet, active+fmt.Sprintf(tc.read, key))
			if err != nil || r.status != http.StatusOK {
				t.Fatalf("GET %s: %v %d %s", tc.read, err, r.status, r.body)
			}
			after, err := c.metric(0, "baton_sync_degradations_total")
			if err != nil {
				t.Fatal(err)
			}
			if after <= before {
				t.Fatalf("GET %s on the active answered %s while its %s waited for the stopped standby, before the active degraded (baton_sync_degradations_total still %v)", fmt.Sprintf(tc.read, key), r.body, tc.change, after)
			}
			a := <-answered
			if a.status != http.StatusOK {
				t.Fatalf("the %s: %d %s", tc.change, a.status, a.body)
			}
			var st api.LockStatus
			if strings.HasPrefix(tc.read, "/locks?") {
				var l api.LockList
				if err := json.Unmarshal([]byte(r.body), &l); err != nil || len(l.Locks) != 1 {
					t.Fatalf("GET %s: %v %s", tc.read, err, r.body)
				}
				st = l.Locks[0]
			} else if err := json.Unmarshal([]byte(r.body), &st); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.change == "grant" && (st.Holder == nil || st.Holder.Token != a.grant.Token):
				t.Fatalf("the read after the degradation shows %s, want the grant's token %d", r.body, a.grant.Token)
			case tc.change == "release" && st.Holder != nil:
				t.Fatalf("the read after the degradation shows %s, want the key released", r.body)
			}
		})
	}
}

// stopStandby stops node i, the standby (SIGSTOP: it returns once every
// thread is stopped), until the end of t, which resumes it and waits
// until node 0, the active, is no longer degraded.
func (c *testCluster) stopStandby(t *testing.T, i int) {
	c.signal(i, syscall.SIGSTOP)
	t.Cleanup(func() {
		c.signal(i, syscall.SIGCONT)
		c.waitDegraded(0, false)
	})
}

// feedEvent is what the tests read of an event of a node's feed (GET
// /events): the feed announces each change as the node makes it, before
// any standby acknowledged it, where a read (GET /locks/{key}) on the
// active shows it only once acknowledged (or degraded).
type feedEvent struct {
	Kind  string
	Token uint64
	Lease float64 // seconds
}

// waitMade waits until the last event of key on node i's feed is one
// made reports true for (a bounded wait, 20 s): the node made that
// change, whether or not a standby acknowledged it. what names it in the
// failure.
func (c *testCluster) waitMade(i int, key, what string, made func(feedEvent) bool) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		resp, err := httpc.Get("http://" + c.nodes[i].listen + "/events?key=" + key)
		if err == nil {
			var feed struct{ Events []feedEvent }
			err = json.NewDecoder(resp.Body).Decode(&feed)
			resp.Body.Close()
			if n := len(feed.Events); err == nil && n > 0 && made(feed.Events[n-1]) {
				return
			}
			last = fmt.Sprint(feed.Events, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.t.Fatalf("node %d never made %s of %s; its events of it: %s", i, what, key, last)
}

// waitEvent waits until the last event of key on node i's feed is of kind.
func (c *testCluster) waitEvent(i int, key, kind string) {
	c.t.Helper()
	c.waitMade(i, key, "a "+kind, func(e feedEvent) bool { return e.Kind == kind })
}
