package cluster_test

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestCtrlCWithoutTheStandbysWordAnswersNoWaitingChange: with
// sync_standbys 1 and the only standby stopped (SIGSTOP, waited for), a
// grant waits for its acknowledgement; the active is then stopped with
// SIGINT (Ctrl+C). Its handoff cannot be confirmed (the successor does not
// run), so it leaves demoted, before sync_timeout (10 s) would have let it
// degrade. The grant must not be answered 200: nobody acknowledged it and
// the active never said it went on without its standby, and the standby
// that promotes may not hold it. A newcomer saw it answered 200 at the
// SIGINT (3 of 5 runs), then lost (the stopped standby killed and
// restarted promoted without it and granted the key to another client).
// It is answered 503, as a change caught by a step-down is.
func TestCtrlCWithoutTheStandbysWordAnswersNoWaitingChange(t *testing.T) {
	c := newCluster(t, 2, false, "--sync-standbys", "1", "--sync-timeout", "10s")
	c.startAll()
	c.waitActive(0, 1)
	warm := c.acquire(0, "warm", "lease=60")
	c.waitHolder(1, "warm", warm.Token)
	c.waitDegraded(0, false)
	c.signal(1, syscall.SIGSTOP) // returns once every thread is stopped
	defer c.signal(1, syscall.SIGCONT)
	answered := make(chan answer, 1)
	go func() {
		a, err := do(http.MethodPost, "http://"+c.nodes[0].listen+"/locks/k?lease=60")
		if err != nil {
			a.body = err.Error()
		}
		answered <- a
	}()
	c.waitEvent(0, "k", "grant") // made, waiting for the acknowledgement
	c.signal(0, syscall.SIGINT)
	select {
	case a := <-answered:
		t.Logf("answer: %d %s", a.status, a.body)
		if a.status == http.StatusOK {
			t.Fatalf("the active answered a grant 200 as it left without its standby's acknowledgement and without degrading: %s", a.body)
		}
		if a.status != http.StatusServiceUnavailable && a.status != 0 {
			t.Errorf("answer %d %s, want 503 (or no answer)", a.status, a.body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer")
	}
	if strings.Contains(c.nodes[0].log.String(), "sync_standbys: degraded") {
		t.Fatal("the active degraded before it left: the scenario needs it to leave first (sync_timeout 10 s)")
	}
}
