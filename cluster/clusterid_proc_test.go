package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The defect, with real processes (as a tester found it): cluster A, two
// nodes through two kill -9 failovers (epoch 3), grants a lock and stops.
// Cluster B (epoch 1, five locks held for 600 s) has its standby node 2
// stopped, its data_dir replaced by a copy of A's, and started again.
// Node 2 took the role as "restarted with a newer state", node 0 stepped
// down and discarded its state: B held only A's lock. Now node 2 follows
// node 0, installs its state and adopts B's cluster ID.
func TestProcForeignDataDirDoesNotWipeTheCluster(t *testing.T) {
	b := newCluster(t, 3, false)
	b.startAll()
	b.waitActive(0, 0, 1, 2)
	held := map[string]uint64{}
	var last uint64
	for i := range 5 {
		key := fmt.Sprintf("b%d", i)
		g := b.grantOn(0, key, "lease=600")
		held[key], last = g.Token, g.Token
	}
	b.waitReplicated(2, last)

	a := newCluster(t, 2, false)
	a.startAll()
	a.waitActive(0, 0, 1)
	a.kill9(0)
	a.waitActive(1, 1)
	a.start(0)
	a.waitActive(0, 0, 1) // by a handoff, once synced
	a.kill9(0)
	a.waitActive(1, 1)
	a.grantOn(1, "a", "lease=600")
	av, err := a.view(1)
	if err != nil || av.Epoch < 3 || av.ClusterID == "" {
		t.Fatalf("the test's premise: cluster A at epoch %d (want 3 or more), ID %q (%v)", av.Epoch, av.ClusterID, err)
	}
	a.kill9(1)

	bv, err := b.view(0)
	if err != nil || bv.ClusterID == "" || bv.ClusterID == av.ClusterID {
		t.Fatalf("cluster IDs: A %q, B %q (%v)", av.ClusterID, bv.ClusterID, err)
	}
	b.stop(2)
	replaceDir(t, a.nodes[1].dir, b.nodes[2].dir)
	b.start(2)
	b.waitActive(0, 0, 1, 2)
	// Node 2 adopts B's ID once it has installed node 0's state.
	deadline := time.Now().Add(15 * time.Second)
	for v, err := b.view(2); err != nil || v.ClusterID != bv.ClusterID; v, err = b.view(2) {
		if time.Now().After(deadline) {
			t.Fatalf("node 2's cluster ID %q (%v), want B's %q; roles %v", v.ClusterID, err, bv.ClusterID, b.roles())
		}
		time.Sleep(20 * time.Millisecond)
	}
	for i := range b.nodes {
		for key, tok := range held {
			if got := b.holderOf(i, key); got != tok {
				t.Errorf("node %d: %s held by %d, want %d", i, key, got, tok)
			}
		}
		if got := b.holderOf(i, "a"); got != 0 {
			t.Errorf("node %d holds cluster A's lock (%d)", i, got)
		}
	}
	if n := strings.Count(b.nodes[0].log.String(), "stepping down"); n != 0 {
		t.Errorf("node 0 stepped down %d times", n)
	}
}

// replaceDir makes dir to a copy of dir from, as cp -a of a data_dir.
func replaceDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.RemoveAll(to); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		bs, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, bs, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
