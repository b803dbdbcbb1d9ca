package cluster_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// The shared modes (a semaphore's limit, a read/write lock's shared and
// exclusive holders, owners) and an operator's forced release, through a
// kill -9 of the active and through a kill of every node: what was
// answered is there, and what is there keeps the rules of its key.

// modeHold is one holder that a grant answered: its token, mode, owner.
type modeHold struct {
	token uint64
	mode  string
	owner string
}

func (h modeHold) String() string { return fmt.Sprintf("%d %s %q", h.token, h.mode, h.owner) }

// modeKeys is what setUpModes had answered: each key's limit and holders
// (oldest grant first) once every call was answered, every holder it
// ever granted (released ones too), and the highest token.
type modeKeys struct {
	limit   map[string]int
	holders map[string][]modeHold
	granted map[string][]modeHold
	top     uint64
}

// setUpModes makes, on node i (the active), a semaphore of 3 with three
// holders ("sem"); a read/write lock with two shared holders
// ("rw/read"), another with an exclusive one ("rw/write"); and a
// read/write lock whose two shared holders an operator's forced release
// ends, which hands it to the exclusive waiter queued behind them
// ("forced"). Every holder has an owner. The waiter's place reaches
// every standby in standbys before the force (parkOn).
func (c *testCluster) setUpModes(i int, standbys ...int) modeKeys {
	c.t.Helper()
	m := modeKeys{limit: map[string]int{}, holders: map[string][]modeHold{}, granted: map[string][]modeHold{}}
	grant := func(key, mode, owner string, limit int) {
		g := c.grantOn(i, key, fmt.Sprintf("lease=60&mode=%s&owner=%s&limit=%d", mode, owner, limit))
		h := modeHold{g.Token, mode, owner}
		m.holders[key] = append(m.holders[key], h)
		m.granted[key] = append(m.granted[key], h)
		m.limit[key] = limit
		m.top = max(m.top, g.Token)
	}
	for n := range 3 {
		grant("sem", api.ModeExclusive, fmt.Sprint("sem-", n), 3)
	}
	grant("rw/read", api.ModeShared, "reader-0", 1)
	grant("rw/read", api.ModeShared, "reader-1", 1)
	grant("rw/write", api.ModeExclusive, "writer", 1)
	grant("forced", api.ModeShared, "forced-0", 1)
	grant("forced", api.ModeShared, "forced-1", 1)
	waiter := c.parkOn(i, "forced", "lease=60&wait=20&mode=exclusive&owner=forced-w", "", false, standbys...)
	a, err := do(http.MethodDelete, "http://"+c.nodes[i].listen+"/locks/forced?force=true", api.HeaderIdempotencyKey, forceKey)
	if err != nil || a.status != http.StatusOK {
		c.t.Fatalf("force release of forced on node %d: %v %d %s", i, err, a.status, a.body)
	}
	var w answer
	select {
	case w = <-waiter:
	case <-time.After(20 * time.Second):
		c.t.Fatal("the exclusive waiter of forced was not answered after the force")
	}
	if w.status != http.StatusOK {
		c.t.Fatalf("the exclusive waiter of forced after the force: %d %s, want its grant", w.status, w.body)
	}
	h := modeHold{w.grant.Token, api.ModeExclusive, "forced-w"}
	m.holders["forced"] = []modeHold{h}
	m.granted["forced"] = append(m.granted["forced"], h)
	m.top = max(m.top, h.token)
	return m
}

// forceKey is the Idempotency-Key of setUpModes's forced release.
const forceKey = "force-of-forced"

// repeatForce sends setUpModes's forced release again, under its
// Idempotency-Key, to node i (the active, after a failover or a restart):
// the force is remembered with the rest of the state, so the repeat is
// answered 200 and changes nothing (waitModes then still finds the
// exclusive holder the first force granted).
func (c *testCluster) repeatForce(i int) {
	c.t.Helper()
	a, err := do(http.MethodDelete, "http://"+c.nodes[i].listen+"/locks/forced?force=true", api.HeaderIdempotencyKey, forceKey)
	if err != nil || a.status != http.StatusOK {
		c.t.Fatalf("the force repeated under its Idempotency-Key on node %d: %v %d %s, want 200", i, err, a.status, a.body)
	}
}

// holdsOf returns the holders of st as modeHolds, oldest first.
func holdsOf(st api.LockStatus) []modeHold {
	var hs []modeHold
	for _, h := range st.Holders {
		hs = append(hs, modeHold{h.Token, h.Mode, h.Owner})
	}
	return hs
}

// waitLogged waits until the active (node active) sees each node in
// standbys acknowledge its log's last index: those standbys have written
// every record of the active's log to their own (an acknowledgement is
// sent once its records are written). A bounded wait: 10 s.
func (c *testCluster) waitLogged(active int, standbys ...int) {
	c.t.Helper()
	var last string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		v, err := c.view(active)
		if err != nil {
			last = err.Error()
			continue
		}
		acked := map[string]uint64{}
		for _, p := range v.Peers {
			if p.AckedIndex != nil {
				acked[p.URL] = *p.AckedIndex
			}
		}
		done := true
		for _, i := range standbys {
			if acked[c.nodes[i].url] < v.LastIndex {
				done = false
			}
		}
		if done {
			return
		}
		last = fmt.Sprintf("last_index %d, acknowledged %v", v.LastIndex, acked)
	}
	c.t.Fatalf("node %d: standbys %v did not acknowledge its last index within 10 s: %s", active, standbys, last)
}

// waitModes waits until node i (the active, or a standby: its replica)
// shows every key with the limit and the holders, modes and owners m
// answered (10 s), and fails the test with what it shows otherwise.
func (c *testCluster) waitModes(i int, m modeKeys) {
	c.t.Helper()
	var diffs []string
	for deadline := time.Now().Add(10 * time.Second); ; {
		diffs = diffs[:0]
		for key, want := range m.holders {
			st := c.lockStatus(i, key)
			if got := holdsOf(st); !slices.Equal(got, want) || st.Limit != m.limit[key] {
				diffs = append(diffs, fmt.Sprintf("%s: limit %d, holders %v; want limit %d, holders %v", key, st.Limit, got, m.limit[key], want))
			}
		}
		if len(diffs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("node %d (%s):\n%s", i, c.roles()[i], strings.Join(diffs, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkModesConsistent checks what node i (the active) shows of m's keys,
// whatever of it the node has: each holder is one that was granted,
// with its mode and owner; no key has more holders than its limit; an
// exclusive holder of a read/write lock holds alone. Then the rules hold
// on: a semaphore of 3 admits new holders up to 3 and no more, a
// read/write lock with readers admits no writer, one with a writer no
// reader, and every new token is above every token answered before.
func (c *testCluster) checkModesConsistent(i int, m modeKeys) {
	c.t.Helper()
	for key, granted := range m.granted {
		st := c.lockStatus(i, key)
		hs := holdsOf(st)
		for _, h := range hs {
			if !slices.Contains(granted, h) {
				c.t.Errorf("%s on node %d: holder %v was never granted (granted: %v)", key, i, h, granted)
			}
		}
		if len(hs) > 0 && st.Limit != m.limit[key] {
			c.t.Errorf("%s on node %d: limit %d, want %d", key, i, st.Limit, m.limit[key])
		}
		exclusive := slices.ContainsFunc(hs, func(h modeHold) bool { return h.mode == api.ModeExclusive })
		switch {
		case m.limit[key] > 1 && len(hs) > m.limit[key]:
			c.t.Errorf("%s on node %d: %d holders %v, above its limit %d", key, i, len(hs), hs, m.limit[key])
		case m.limit[key] == 1 && exclusive && len(hs) > 1:
			c.t.Errorf("%s on node %d: holders %v, an exclusive one among others", key, i, hs)
		}
	}
	probe := func(key, query string) answer {
		c.t.Helper()
		a, err := do(http.MethodPost, "http://"+c.nodes[i].listen+"/locks/"+key+"?lease=60&wait=0.2&"+query)
		if err != nil {
			c.t.Fatalf("acquire %s?%s on node %d: %v", key, query, i, err)
		}
		if a.status == http.StatusOK && a.grant.Token <= m.top {
			c.t.Errorf("%s on node %d: token %d is not above %d, answered before the kill", key, i, a.grant.Token, m.top)
		}
		return a
	}
	// The semaphore fills up to 3, then times out.
	held := len(c.lockStatus(i, "sem").Holders)
	for range 3 - held {
		if a := probe("sem", "limit=3&owner=late"); a.status != http.StatusOK {
			c.t.Errorf("sem on node %d with %d holders of 3: %d %s, want a grant", i, held, a.status, a.body)
		}
	}
	if a := probe("sem", "limit=3&owner=late"); a.status != http.StatusRequestTimeout {
		c.t.Errorf("sem on node %d, full: %d %s, want 408", i, a.status, a.body)
	}
	if hs := c.lockStatus(i, "sem").Holders; len(hs) != 3 {
		c.t.Errorf("sem on node %d: %d holders, want 3", i, len(hs))
	}
	// Readers keep writers out, a writer keeps readers out.
	if len(c.lockStatus(i, "rw/read").Holders) > 0 {
		if a := probe("rw/read", "mode=exclusive&owner=late"); a.status != http.StatusRequestTimeout {
			c.t.Errorf("rw/read on node %d, held shared: an exclusive acquire got %d %s, want 408", i, a.status, a.body)
		}
	}
	if len(c.lockStatus(i, "rw/write").Holders) > 0 {
		if a := probe("rw/write", "mode=shared&owner=late"); a.status != http.StatusRequestTimeout {
			c.t.Errorf("rw/write on node %d, held exclusive: a shared acquire got %d %s, want 408", i, a.status, a.body)
		}
	}
	probe("after", "owner=late") // a new key: its token too
}

// TestModesSurviveAKillOfTheActive: semaphore holders (limit 3), read/write
// holders (shared and exclusive, with owners) and a forced release, then
// kill -9 of the active. With sync_standbys 1 every answered grant is on
// the promoted node, with its mode and owner, and the forced holders are
// gone; with sync_standbys 0 the promoted node may lack the last of
// them, but what it has is consistent (checkModesConsistent).
func TestModesSurviveAKillOfTheActive(t *testing.T) {
	for _, sync := range []int{0, 1} {
		t.Run(fmt.Sprint("sync_standbys ", sync), func(t *testing.T) {
			c := newCluster(t, 3, false, "--sync-standbys", fmt.Sprint(sync), "--sync-timeout", "10s")
			c.startAll()
			c.waitActive(0, 1, 2)
			m := c.setUpModes(0)
			c.kill9(0)
			act := c.waitActive(-1, 1, 2)
			if sync == 1 {
				c.waitModes(act, m)
				c.repeatForce(act)
				c.waitModes(act, m)
			}
			c.checkModesConsistent(act, m)
		})
	}
}

// TestModesSurviveAKillOfEveryNode: the same holders and forced release,
// replicated to every node, then kill -9 of every node and restarts in
// three orders. The first node back serves alone with every holder,
// mode, limit and owner that was answered; once the others are back the
// cluster ends where the priorities say, every node with the same.
func TestModesSurviveAKillOfEveryNode(t *testing.T) {
	for _, order := range [][]int{{0, 1, 2}, {2, 1, 0}, {1, 2, 0}} {
		t.Run(fmt.Sprint("restarts ", order), func(t *testing.T) {
			c := newCluster(t, 3, false)
			c.startAll()
			c.waitActive(0, 1, 2)
			m := c.setUpModes(0, 1, 2)
			for _, i := range []int{1, 2} {
				c.waitModes(i, m)
			}
			// What a standby shows may not be in its log yet (it applies
			// a batch of records, then writes them): the node restarted
			// first must have written the state it showed before the kill.
			c.waitLogged(0, 1, 2)
			for i := range c.nodes {
				c.signal(i, syscall.SIGKILL)
			}
			for _, nd := range c.nodes {
				<-nd.exited
			}
			c.start(order[0])
			c.waitActive(order[0])
			c.waitModes(order[0], m)
			c.repeatForce(order[0])
			c.waitModes(order[0], m)
			for _, i := range order[1:] {
				c.start(i)
			}
			c.waitActive(0, 1, 2)
			for i := range c.nodes {
				c.waitModes(i, m)
			}
			c.checkModesConsistent(0, m)
		})
	}
}
