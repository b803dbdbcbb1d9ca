package cluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/baton-io/baton/api"
)

// Cluster IDs: the rules never compare the logs of two cluster IDs (a
// data_dir copied from another cluster must not wipe this one).
const idA, idB = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

// ruleRestartNewer never fires against an active of another cluster ID:
// the restarted node's higher state token and epoch are another log's.
// It follows the active instead (ruleForeignFollow), and says so.
func TestRuleRestartNewerNeverAgainstAnotherClusterID(t *testing.T) {
	v := restartedView()
	wantAction(t, v, actPromote, "") // the premise: same (no) IDs
	v.self.ClusterID = idA
	for i := range v.peers {
		v.peers[i].ClusterID = idB
	}
	a := wantAction(t, v, actFollow, v.peers[v.bestActive()].URL)
	if !strings.Contains(a.why, idA) || !strings.Contains(a.why, idB) {
		t.Errorf("why = %q: both IDs should be named", a.why)
	}
	// A node without an ID yet (fresh, or an older baton's data_dir) is of
	// no other cluster: the rule applies.
	v.self.ClusterID = ""
	wantAction(t, v, actPromote, "")
}

func (v view) bestActive() int {
	for i, p := range v.peers {
		if p.live && p.Role == api.RoleActive {
			return i
		}
	}
	return -1
}

// Two actives of different cluster IDs (a fresh cluster split at its
// first start, each side created one) are settled as any two: the newer
// state keeps (SPEC section 3; TestSplitBrainAfterPauseEndsTheSameWay),
// the other steps down, whatever the IDs.
func TestRuleTwoActivesOfDifferentClusterIDs(t *testing.T) {
	v := standbyView(livePeer("a", 2, api.RoleActive, 200))
	v.peers[0].ClusterID = idA
	v.role, v.self.Role, v.self.StateToken, v.self.ClusterID = api.RoleActive, api.RoleActive, 100, idB
	wantAction(t, v, actStepDown, "a")
	v.self.StateToken = 300
	wantAction(t, v, actStay, "")
}

// The fetch before a promotion never takes records from a log of another
// cluster ID.
func TestRuleFetchNotFromAnotherClusterID(t *testing.T) {
	c := livePeer("c", 2, api.RoleStandby, 10)
	c.LastIndex, c.LogEpoch, c.ClusterID = 20, 3, idA
	v := standbyView(deadPeer("a", 0), c)
	v.self.LastIndex, v.self.LogEpoch, v.self.ClusterID = 10, 1, idB
	wantAction(t, v, actPromote, "")
	v.peers[1].ClusterID = idB
	wantAction(t, v, actFetch, "c")
}

// A cold start compares no logs across cluster IDs: the ID more live
// nodes hold is elected, ties by priority.
func TestRuleColdStartAcrossClusterIDs(t *testing.T) {
	a, c := livePeer("a", 0, api.RoleStandby, 0), livePeer("c", 2, api.RoleStandby, 0)
	a.LastIndex, a.LogEpoch, a.ClusterID = 50, 3, idA // a more advanced log, of another cluster
	c.LastIndex, c.LogEpoch, c.ClusterID = 5, 1, idB
	v := standbyView(a, c)
	v.wasSynced = false
	v.self.LastIndex, v.self.LogEpoch, v.self.ClusterID = 9, 1, idB
	wantAction(t, v, actPromote, "") // two nodes hold B, one A
	v.peers[1].ClusterID = idA
	wantAction(t, v, actStay, "") // now A is held by two
	v.peers[1].live = false
	wantAction(t, v, actStay, "") // one each: a's priority is higher
	v.peers[0].Priority, v.self.Priority = 2, 0
	wantAction(t, v, actPromote, "")
}

// The cluster ID is kept in its file and read back; a damaged one is
// refused, a missing one is none.
func TestClusterIDFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), IDFileName)
	if id, err := readClusterID(p); id != "" || err != nil {
		t.Fatalf("missing file: %q, %v", id, err)
	}
	id := newClusterID()
	if err := writeClusterID(p, id); err != nil {
		t.Fatal(err)
	}
	if got, err := readClusterID(p); got != id || err != nil {
		t.Fatalf("read %q, %v; wrote %q", got, err, id)
	}
	// Too short, 32 characters but not hex, hex but too long.
	for _, bad := range []string{"zz", strings.Repeat("z", 32), id + "00"} {
		if err := os.WriteFile(p, []byte(bad+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := readClusterID(p); err == nil || !strings.Contains(err.Error(), "is not 32 hex digits") {
			t.Errorf("damaged ID %q: %v, want the error naming 32 hex digits", bad, err)
		}
	}
}

// copyDir copies the files of dir from into dir to (made empty first), as
// an operator's cp -a of a data_dir does.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	olds, err := os.ReadDir(to)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range olds {
		if err := os.RemoveAll(filepath.Join(to, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	err = filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The defect: a standby restarted on a copy of another cluster's data_dir
// (a later epoch, a higher state token) took the active role as
// "restarted with a newer state", and the live active stepped down and
// discarded its state: five held locks lost. With cluster IDs, node 2
// follows the active, installs its snapshot and adopts its ID; nothing is
// lost, nobody steps down.
func TestMemForeignDataDirDoesNotWipeTheCluster(t *testing.T) {
	// Cluster B: three nodes, five locks held, then stopped while cluster
	// A runs (tokens rise with the clock: A's state token is then the
	// higher), and started again, its locks replayed.
	b := newMemCluster(t, 3)
	b.start(0, 1, 2)
	b.waitActive(0)
	var held [5]uint64
	for i := range held {
		held[i] = b.grant(0, "B"+strings.Repeat("x", i)).Token
	}
	bID := b.nodes[0].node.status().ClusterID
	b.closeNode(2)
	b.closeNode(1)
	b.closeNode(0)

	// Cluster A: two nodes through two failovers (a later epoch), a lock
	// granted, then stopped.
	a := newMemCluster(t, 2)
	t.Cleanup(b.closeAll) // before a's leak check
	a.start(0, 1)
	a.waitActive(0)
	a.crash(0)
	a.waitActive(1, 1)
	a.open(0)
	a.start(0)
	a.waitActive(0) // by a handoff, once synced
	a.grant(0, "A")
	aID := a.nodes[0].node.status().ClusterID
	if bID == "" || aID == "" || bID == aID {
		t.Fatalf("cluster IDs: A %q, B %q", aID, bID)
	}
	a.closeNode(1)
	a.crash(0)

	b.open(0)
	b.open(1)
	b.start(0, 1)
	b.waitActive(0, 0, 1)
	b.closeNode(2)
	copyDir(t, a.nodes[0].dir, b.nodes[2].dir)
	b.open(2)
	if st, act := b.nodes[2].node.status(), b.nodes[0].node.status(); st.ClusterID != aID || st.StateToken <= act.StateToken || st.LogEpoch <= act.LogEpoch {
		t.Fatalf("the test's premise: node 2 replays A's log (ID %q, state token %d, log epoch %d) against the active's (%q, %d, %d)",
			st.ClusterID, st.StateToken, st.LogEpoch, act.ClusterID, act.StateToken, act.LogEpoch)
	}
	b.start(2)
	b.waitFor("node 2 synced with node 0, or node 0 stepped down", func() bool {
		n2 := b.nodes[2].node
		n2.mu.Lock()
		synced := n2.following == b.nodes[0].url && n2.synced
		n2.mu.Unlock()
		return synced || b.nodes[0].changed("step_down") > 0
	})
	if got := b.nodes[0].changed("step_down"); got != 0 {
		t.Fatalf("node 0 stepped down %d times to the node restarted on cluster A's data_dir", got)
	}
	b.waitActive(0)
	for i := range b.nodes {
		for k, tok := range held {
			key := "B" + strings.Repeat("x", k)
			if got := b.holds(i, key); got != tok {
				t.Errorf("node %d: %s held by %d, want %d", i, key, got, tok)
			}
		}
		if got := b.holds(i, "A"); got != 0 {
			t.Errorf("node %d holds cluster A's lock (%d)", i, got)
		}
	}
	if got := b.nodes[2].node.status().ClusterID; got != bID {
		t.Errorf("node 2's cluster ID %q after syncing, want B's %q", got, bID)
	}
	if got, err := readClusterID(filepath.Join(b.nodes[2].dir, IDFileName)); got != bID || err != nil {
		t.Errorf("node 2's ID file holds %q (%v), want B's %q", got, err, bID)
	}
}

// A node started on another cluster's data_dir while no active is live
// (the active died before it synced): it does not win the election by
// its priority. It defers to a node of another ID that has synced or
// been active since it started (Settled), and such a node, at its
// failover, does not defer to it.
func TestRuleNoPromotionOnAForeignDataDirBesideASettledNode(t *testing.T) {
	// The foreign node: a cold start, priority 0, beside a settled node
	// of another ID (the last active is dead).
	c := livePeer("c", 2, api.RoleStandby, 5)
	c.ClusterID = idB
	v := standbyView(deadPeer("b", 1), c)
	v.wasSynced, v.self.Priority, v.self.ClusterID = false, 0, idA
	wantAction(t, v, actPromote, "") // one ID each, and this node's priority is the higher
	v.peers[1].Settled = true
	wantAction(t, v, actStay, "")

	// The settled node at its failover, beside the foreign one of higher
	// priority.
	a := livePeer("a", 0, api.RoleStandby, 500)
	a.ClusterID = idA
	w := standbyView(a, deadPeer("b", 1))
	w.self.Priority, w.self.ClusterID, w.self.Settled = 2, idB, true
	wantAction(t, w, actPromote, "")
	w.peers[0].ClusterID = idB // the same ID: it defers by priority, as before
	wantAction(t, w, actStay, "")
}

// A fresh cluster split at its first start (node a, the first active,
// paused before any standby synced; b elected by the others under a new
// ID, s synced with b), then b dies and a runs again. s holds b's state,
// whose grants s acknowledged (with sync_standbys, answered), newer than
// a's: it neither follows a (which would replace that state with a's
// snapshot) nor waits for a's priority; it promotes, and the two actives
// then settle as any two (the newer state keeps). Found by a tester: the
// standby followed the resumed first active and an answered grant was
// gone.
func TestRuleSettledStandbyDoesNotFollowAnOlderActiveOfAnotherClusterID(t *testing.T) {
	a := livePeer("a", 0, api.RoleActive, 100)
	a.ClusterID, a.Settled = idA, true
	b := deadPeer("b", 1)
	b.ClusterID, b.Settled = idB, true
	v := standbyView(a, b)
	v.self.Priority, v.self.ClusterID, v.self.Settled, v.self.StateToken = 2, idB, true, 200
	wantAction(t, v, actPromote, "")

	// a's state is the newer (it granted after b's last grant): s
	// follows it and takes its state, as the two actives would have
	// settled it (ruleForeignFollow).
	v.peers[0].StateToken = 300
	wantAction(t, v, actFollow, "a")
	v.peers[0].StateToken = 200 // as new: nothing of s's to keep against a
	wantAction(t, v, actFollow, "a")
	v.peers[0].StateToken = 100

	// A node that has not synced since it started (a data_dir copied
	// from another cluster) holds no running cluster's state: it follows.
	v.self.Settled, v.wasSynced = false, false
	wantAction(t, v, actFollow, "a")
	v.self.Settled, v.wasSynced = true, true

	// Nor when its log cannot write: it could not serve as the active.
	v.logDown, v.self.LogDown = true, true
	wantAction(t, v, actFollow, "a")
}

// The other side of the rule above: the resumed first active steps down,
// following nobody, beside a live node of another cluster ID that has
// synced since it started and holds the newer state, and does not
// promote again while that node is live (it promotes; this node then
// follows it). With the newer state itself, it keeps the role.
func TestRuleActiveStepsDownBesideANewerSettledNodeOfAnotherClusterID(t *testing.T) {
	s := livePeer("s", 2, api.RoleStandby, 200)
	s.ClusterID, s.Settled = idB, true
	v := standbyView(s, deadPeer("b", 1))
	v.peers[1].ClusterID = idB
	v.role, v.self.Role, v.self.Priority, v.self.ClusterID, v.self.Settled, v.self.StateToken = api.RoleActive, api.RoleActive, 0, idA, true, 100
	wantAction(t, v, actStepDown, "")

	// Stepped down, following nobody: it waits for s, whatever the
	// priorities.
	v.role, v.self.Role = api.RoleStandby, api.RoleStandby
	wantAction(t, v, actStay, "")

	// s promoted: this node follows it (ruleForeignFollow).
	v.peers[0].Role = api.RoleActive
	wantAction(t, v, actFollow, "s")

	// With the newer state, or beside a node that has not synced since
	// it started, or one whose log cannot write, the active keeps the
	// role.
	v.peers[0].Role = api.RoleStandby
	v.role, v.self.Role = api.RoleActive, api.RoleActive
	for _, change := range []func(p *peerView){
		func(p *peerView) { p.StateToken = 50 },
		func(p *peerView) { p.Settled = false },
		func(p *peerView) { p.LogDown = true },
	} {
		w := v
		w.peers = slices.Clone(v.peers)
		change(&w.peers[0])
		wantAction(t, w, actStay, "")
	}
}

// A lone cluster ID (created by a node at its election, a fresh data_dir,
// and adopted by no standby since: a fresh data_dir started alone, or
// cut off from the nodes that hold the state) keeps nothing against a
// node of another ID, whatever the state tokens: one grant of its own,
// its token ahead of the clock after its promotion, would replace all of
// the cluster's state (found by a tester: 0 of 50 answered locks left).
func TestRuleLoneClusterIDKeepsNothingAgainstAnotherID(t *testing.T) {
	// Two actives.
	v := standbyView(livePeer("a", 0, api.RoleActive, 100))
	v.peers[0].ClusterID, v.peers[0].Settled = idA, true
	v.role, v.self.Role, v.self.Priority, v.self.ClusterID, v.self.Settled, v.self.StateToken = api.RoleActive, api.RoleActive, 2, idB, true, 300
	wantAction(t, v, actStay, "") // the newer state keeps, as before
	v.self.LoneID = true
	wantAction(t, v, actStepDown, "a")
	v.peers[0].LoneID = true // both lone: the newer state keeps again
	wantAction(t, v, actStay, "")
	v.peers[0].ClusterID = idB // one ID: LoneID says nothing
	wantAction(t, v, actStay, "")

	// A settled standby whose active died, beside a lone active of
	// another ID with the newer state: it promotes, and does not follow.
	w := standbyView(livePeer("a", 0, api.RoleActive, 300), deadPeer("b", 1))
	w.peers[0].ClusterID, w.peers[0].Settled, w.peers[0].LoneID = idA, true, true
	w.peers[1].ClusterID = idB
	w.self.Priority, w.self.ClusterID, w.self.Settled, w.self.StateToken = 2, idB, true, 100
	wantAction(t, w, actPromote, "")
	w.peers[0].LoneID = false
	wantAction(t, w, actFollow, "a")
}
