package cluster_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// staleRenewCluster starts two nodes with sync_standbys 1 (each with a
// native_listen), takes k on node 0 with a 2 s lease, and holds back the
// replication stream to node 1: a renewal made on node 0 now waits for an
// acknowledgement that does not come.
func staleRenewCluster(t *testing.T) (*testCluster, api.Grant, []string) {
	c := newCluster(t, 2, true, "--sync-standbys", "1", "--sync-timeout", "1500ms")
	native := []string{freeAddr(t, nodeHost(0)), freeAddr(t, nodeHost(1))}
	c.args = map[int][]string{0: {"--native-listen", native[0]}, 1: {"--native-listen", native[1]}}
	c.startAll()
	c.waitActive(0, 1)
	g := c.acquire(0, "k", "lease=2")
	c.waitHolder(1, "k", g.Token)
	c.nodes[0].proxy.hold(streamOf(c.nodes[1].url), true, true)
	return c, g, native
}

// pauseUntilGivenAway waits until node 0 made the renewal of g (its
// lease of 60 s), stops node 0 until node 1 is promoted and has given
// k to another holder once g's lease ran out there, then drops the held
// stream and resumes node 0.
func pauseUntilGivenAway(t *testing.T, c *testCluster, g api.Grant) api.Grant {
	t.Helper()
	c.waitChanged(0, "k", fmt.Sprint(g.Token))
	c.signal(0, syscall.SIGSTOP)
	c.waitActive(1)
	// Node 1 never got the renewal: g's lease ends there at its grant's
	// expires_at, and k goes to the next acquire.
	time.Sleep(time.Until(g.ExpiresAt) + 200*time.Millisecond)
	next := c.grantOn(1, "k", "lease=60&wait=5")
	c.nodes[0].proxy.reset()
	c.signal(0, syscall.SIGCONT)
	return next
}

// A renewal that node 0 applied but that no standby acknowledged when the
// node was stopped, for longer than the failover timeout and the lease:
// node 1 was promoted without it and gave k away when the lease ran out.
// The resumed node must not confirm the renewal (its acknowledgement wait
// ends by sync_timeout, not by a standby's word): the holder would go on
// under a lock another holder has. It is told to retry (307 or 503).
func TestPausedActiveConfirmsNoStaleRenewal(t *testing.T) {
	c, g, _ := staleRenewCluster(t)
	renewed := make(chan answer, 1)
	go func() {
		noFollow := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		req, _ := http.NewRequest(http.MethodPatch, fmt.Sprintf("http://%s/locks/k?token=%d&lease=60", c.nodes[0].listen, g.Token), nil)
		a := answer{}
		if resp, err := noFollow.Do(req); err == nil {
			var b strings.Builder
			_, _ = fmt.Fprint(&b, resp.Status)
			resp.Body.Close()
			a = answer{status: resp.StatusCode, body: b.String()}
		}
		renewed <- a
	}()
	next := pauseUntilGivenAway(t, c, g)
	select {
	case a := <-renewed:
		if a.status == http.StatusOK {
			t.Errorf("the resumed node confirmed the renewal of %d, while node 1 had given k to %d", g.Token, next.Token)
		} else if a.status != http.StatusServiceUnavailable && a.status != http.StatusTemporaryRedirect {
			t.Errorf("the renewal got %d %s, want 503 or 307", a.status, a.body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the renewal got no answer")
	}
}

// The same over the native protocol: the renewal is answered M or E
// unavailable, not OK.
func TestNativePausedActiveConfirmsNoStaleRenewal(t *testing.T) {
	c, g, native := staleRenewCluster(t)
	conn, err := net.Dial("tcp", native[0])
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "N k %d 60\n", g.Token); err != nil {
		t.Fatal(err)
	}
	renewed := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		renewed <- strings.TrimSpace(line)
	}()
	next := pauseUntilGivenAway(t, c, g)
	select {
	case line := <-renewed:
		if strings.HasPrefix(line, "N k OK") {
			t.Errorf("the resumed node confirmed the renewal of %d (%q), while node 1 had given k to %d", g.Token, line, next.Token)
		} else if !strings.HasPrefix(line, "N k M ") && !strings.HasPrefix(line, "N k E "+api.CodeUnavailable) {
			t.Errorf("the renewal got %q, want M or E %s", line, api.CodeUnavailable)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the renewal got no answer")
	}
}

// staleAfterStepDown starts three nodes with sync_standbys 1 and a
// sync_timeout longer than the whole scenario, holds back both standbys'
// streams, and sends call (a request on node 0 that changes k) in the
// background: it is made on node 0 and waits for an acknowledgement.
// Node 0 is stopped until node 1 is promoted (node 2 follows it and
// acknowledges) and has granted k to another holder; then node 0 is
// resumed, steps down (node 1's state is newer), installs node 1's
// snapshot, which lacks call's change, and takes the role back by a
// handoff (its priority). The standbys acknowledge its log again, which
// ends call's wait: its answer must not be 200.
func staleAfterStepDown(t *testing.T, before func(c *testCluster) string, call func(c *testCluster, arg string) answer) {
	c := newCluster(t, 3, true, "--sync-standbys", "1", "--sync-timeout", "20s")
	c.args = map[int][]string{0: {"--native-listen", freeAddr(t, nodeHost(0))}}
	c.startAll()
	c.waitActive(0, 1, 2)
	arg := before(c)
	one, two := streamOf(c.nodes[1].url), streamOf(c.nodes[2].url)
	c.nodes[0].proxy.hold(func(l string) bool { return one(l) || two(l) }, true, true)
	answered := make(chan answer, 1)
	go func() { answered <- call(c, arg) }()
	// Made on node 0 (its engine shows it), not acknowledged.
	c.waitChanged(0, "k", arg)
	c.signal(0, syscall.SIGSTOP)
	c.waitActive(1, 2)
	other := c.grantOn(1, "k", "lease=60&wait=10")
	c.nodes[0].proxy.reset()
	c.signal(0, syscall.SIGCONT)
	select {
	case a := <-answered:
		t.Logf("answer: %d %s", a.status, a.body)
		if a.status == http.StatusOK || strings.Contains(a.body, " OK ") {
			t.Errorf("node 0 confirmed (%d %s) a change its state lost when it stepped down; k is held by %d", a.status, a.body, other.Token)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer")
	}
	c.waitActive(0, 1, 2)
	if got := c.holderOf(0, "k"); got != other.Token {
		t.Errorf("k is held by %d after node 0 took the role back, want %d", got, other.Token)
	}
}

// noFollowDo makes one request to u without following a redirect.
func noFollowDo(method, u string) answer {
	noFollow := &http.Client{Timeout: 60 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(method, u, nil)
	resp, err := noFollow.Do(req)
	if err != nil {
		return answer{body: err.Error()}
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	n, _ := resp.Body.Read(buf)
	b.Write(buf[:n])
	return answer{status: resp.StatusCode, body: b.String()}
}

// A grant made just before node 0 was stopped, whose answer waited for an
// acknowledgement until after node 0 had stepped down and come back as the
// active with node 1's state: that state never had the grant, and gave k
// to another holder.
func TestGrantLostInAStepDownIsNotAnswered(t *testing.T) {
	staleAfterStepDown(t, func(*testCluster) string { return "" }, func(c *testCluster, _ string) answer {
		return noFollowDo(http.MethodPost, "http://"+c.nodes[0].listen+"/locks/k?lease=60&wait=5")
	})
}

// The same with a renewal: node 1 has the grant (acknowledged) but not the
// renewal; its lease ran out there and k went to another holder.
func TestRenewalLostInAStepDownIsNotConfirmed(t *testing.T) {
	staleAfterStepDown(t, func(c *testCluster) string {
		g := c.acquire(0, "k", "lease=1.5")
		c.waitHolder(2, "k", g.Token)
		return fmt.Sprint(g.Token)
	}, func(c *testCluster, token string) answer {
		return noFollowDo(http.MethodPatch, "http://"+c.nodes[0].listen+"/locks/k?lease=60&token="+token)
	})
}

// The same over the native protocol: an acquire and a renewal.
func TestNativeGrantLostInAStepDownIsNotAnswered(t *testing.T) {
	staleAfterStepDown(t, func(*testCluster) string { return "" }, func(c *testCluster, _ string) answer {
		return nativeLine(c, "A k 60 5 id=lost-1")
	})
}

func TestNativeRenewalLostInAStepDownIsNotConfirmed(t *testing.T) {
	staleAfterStepDown(t, func(c *testCluster) string {
		g := c.acquire(0, "k", "lease=1.5")
		c.waitHolder(2, "k", g.Token)
		return fmt.Sprint(g.Token)
	}, func(c *testCluster, token string) answer {
		return nativeLine(c, "N k "+token+" 60")
	})
}

// nativeLine sends line to node 0's native_listen and returns the answer
// line as an answer's body.
func nativeLine(c *testCluster, line string) answer {
	conn, err := net.Dial("tcp", c.args[0][1])
	if err != nil {
		return answer{body: err.Error()}
	}
	defer conn.Close()
	if _, err := fmt.Fprintf(conn, "%s\n", line); err != nil {
		return answer{body: err.Error()}
	}
	got, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return answer{body: err.Error()}
	}
	return answer{body: strings.TrimSpace(got)}
}

// A grant made on node 0 just before it was stopped, whose answer waited
// for an acknowledgement until after node 0 had stepped down (node 1,
// promoted meanwhile, had given k to another holder) and before it could
// resync: node 0, a standby now whose state is discarded, must not answer
// it 200 when the wait runs out (sync_timeout).
func TestGrantMadeBeforeAStepDownIsNotAnsweredAfterIt(t *testing.T) {
	c := newCluster(t, 3, true, "--sync-standbys", "1", "--sync-timeout", "5s")
	c.startAll()
	c.waitActive(0, 1, 2)
	one, two := streamOf(c.nodes[1].url), streamOf(c.nodes[2].url)
	c.nodes[0].proxy.hold(func(l string) bool { return one(l) || two(l) }, true, true)
	answered := make(chan answer, 1)
	go func() {
		answered <- noFollowDo(http.MethodPost, "http://"+c.nodes[0].listen+"/locks/k?lease=60&wait=5")
	}()
	c.waitChanged(0, "k", "")
	c.signal(0, syscall.SIGSTOP)
	c.waitActive(1, 2)
	other := c.grantOn(1, "k", "lease=60&wait=10")
	// Node 0 will not get node 1's state: it stays a standby that
	// stepped down, with its own.
	c.nodes[1].proxy.hold(streamOf(c.nodes[0].url), true, true)
	c.nodes[0].proxy.reset()
	c.signal(0, syscall.SIGCONT)
	select {
	case a := <-answered:
		t.Logf("answer: %d %s", a.status, a.body)
		if a.status == http.StatusOK {
			t.Errorf("node 0 answered 200 (%s) after it stepped down, for a grant the active never had; k is held by %d", a.body, other.Token)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer")
	}
	// The answer may come first: node 0, back from a pause longer than
	// failover_timeout, answers the grant's wait before its poll finds
	// node 1 (503, no active known); the step-down follows that poll.
	if !c.waitLog(0, "stepping down", 10*time.Second) {
		t.Errorf("node 0 did not step down within 10 s of its resume")
	}
	c.nodes[1].proxy.reset()
	c.waitActive(0, 1, 2)
	if got := c.holderOf(0, "k"); got != other.Token {
		t.Errorf("k is held by %d after node 0 took the role back, want %d", got, other.Token)
	}
}

// waitChanged waits until node i (the active) made a change of k that
// holds it with a lease of 60 s (a grant, a renewal): the change of a call
// above, made whether or not it is acknowledged (so seen on the node's
// event feed: a read waits for the acknowledgement); token is the
// holder's token before it ("" for none).
func (c *testCluster) waitChanged(i int, key, token string) {
	c.t.Helper()
	c.waitMade(i, key, "a grant or renewal of 60 s", func(e feedEvent) bool {
		return (e.Kind == "grant" || e.Kind == "renew") && e.Lease == 60 && (token == "" || fmt.Sprint(e.Token) == token)
	})
}
