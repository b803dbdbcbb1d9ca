package cluster_test

import (
	"strings"
	"syscall"
	"testing"
)

// TestHarnessNamesANodeThatExitedUnbidden replays what ended
// TestSyncHistoryChaos CHAOS_SEED=5001 (CHAOS_FAULTS=12, --fsync always)
// and CHAOS_SEED=5007 (CHAOS_NODES=5): a SIGTERM from outside the test
// (every node at once at 06:53:34.716, "shutting down" signal=terminated;
// node 3 alone in the other run) ended nodes the nemesis had not touched,
// and the run failed with "no agreed active node", which reads as a
// failover that never came. Both seeds pass when run again. The harness
// names a node whose process ended without a signal of its own
// (c.signal: SIGKILL, SIGINT, SIGTERM), with its exit and the log line
// that says why, and names none that it ended itself.
func TestHarnessNamesANodeThatExitedUnbidden(t *testing.T) {
	c := newCluster(t, 1, false)
	c.startAll()
	c.waitActive(0, 0)
	if u := c.exitedUnbidden(); len(u) > 0 {
		t.Fatalf("a running node named as exited: %q", u)
	}
	// Not through c.signal: as another process's kill(1) would.
	if err := syscall.Kill(c.nodes[0].cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-c.nodes[0].exited
	u := c.exitedUnbidden()
	if len(u) != 1 || !strings.Contains(u[0], "node 0") || !strings.Contains(u[0], "signal=terminated") {
		t.Fatalf("exitedUnbidden() = %q, want node 0 named with its shutdown line", u)
	}
	c.start(0)
	if u := c.exitedUnbidden(); len(u) > 0 {
		t.Fatalf("a restarted node named as exited: %q", u)
	}
	c.kill9(0)
	if u := c.exitedUnbidden(); len(u) > 0 {
		t.Fatalf("a node the harness killed named as exited unbidden: %q", u)
	}
}
