package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// waitReplicated waits until node i has seen token (its last_token).
func (c *testCluster) waitReplicated(i int, token uint64) {
	c.t.Helper()
	for range 500 {
		if v, err := c.view(i); err == nil && v.LastToken >= token {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatalf("node %d never saw token %d", i, token)
}

// waitHolder waits until node i (a standby: its replica) shows key held
// under token; a bounded wait (10 s). Unlike waitReplicated it reads the
// replica itself: a standby's last_token also rises with the active's
// polled status.
func (c *testCluster) waitHolder(i int, key string, token uint64) {
	c.t.Helper()
	var got uint64
	for range 500 {
		if got = c.holderOf(i, key); got == token {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("node %d never showed %s held by %d (it shows %d)", i, key, token, got)
}

func TestKillActiveFailsOverWithHoldersAndTokens(t *testing.T) {
	c := newCluster(t, 3, false)
	c.startAll()
	c.waitActive(0, 1, 2)

	held := map[string]uint64{}
	var last uint64
	for i := range 10 {
		key := fmt.Sprintf("held/%d", i)
		g := c.acquire(0, key, "lease=60")
		held[key], last = g.Token, g.Token
	}
	c.waitReplicated(1, last)
	// One more grant right before the kill: it may not reach the standbys,
	// but no later token may be at or below it.
	final := c.acquire(0, "unreplicated", "lease=60").Token

	killed := time.Now()
	c.kill9(0)
	c.waitActive(1, 2)
	g := c.acquire(1, "after", "lease=60")
	t.Logf("kill -9 of the active to the first grant on node 1: %v (failover_timeout %v)", time.Since(killed), failoverTimeout)

	for key, tok := range held {
		if got := c.holder(1, key); got != tok {
			t.Errorf("%s: held by %d on the new active, want %d (replicated before the kill)", key, got, tok)
		}
	}
	if g.Token <= final {
		t.Errorf("first token after failover %d is not above %d, granted by the dead active", g.Token, final)
	}
	if g.Token >= api.MaxToken {
		t.Errorf("token %d is not below 2^53", g.Token)
	}
}

func TestSigstopActiveThenResumeStepsDownWithoutLoss(t *testing.T) {
	c := newCluster(t, 3, false)
	c.startAll()
	c.waitActive(0, 1, 2)
	before := c.acquire(0, "before", "lease=60")
	c.waitReplicated(1, before.Token)

	c.signal(0, syscall.SIGSTOP)
	c.waitActive(1, 2)
	during := c.acquire(1, "during", "lease=60")
	if during.Token <= before.Token {
		t.Fatalf("token %d on the new active is not above %d", during.Token, before.Token)
	}

	// A call that reaches the paused node waits in its socket; when it
	// resumes it must not grant under a role it has lost (it would hand
	// out a token above the new active's for a lock the new active holds).
	paused := postNoFollow("http://" + c.nodes[0].listen + "/locks/during?lease=60")
	time.Sleep(200 * time.Millisecond) // the call is in node 0's socket
	c.signal(0, syscall.SIGCONT)
	if a := <-paused; a.status == http.StatusOK {
		t.Errorf("the resumed node granted a call made while it was paused: %s", a.body)
	} else if a.status != http.StatusServiceUnavailable && a.status != http.StatusTemporaryRedirect {
		t.Errorf("the call made while node 0 was paused got %d %s, want 503 or 307", a.status, a.body)
	}
	// The resumed node finds the newer active, steps down, resyncs, and,
	// having the higher priority, takes the role back through a handoff.
	c.waitActive(0, 1, 2)
	if got := c.holder(0, "during"); got != during.Token {
		t.Errorf("during: held by %d after the step-down, want %d (granted while node 0 was paused)", got, during.Token)
	}
	if got := c.holder(0, "before"); got != before.Token {
		t.Errorf("before: held by %d, want %d", got, before.Token)
	}
	after := c.acquire(0, "after", "lease=60")
	if after.Token <= during.Token {
		t.Errorf("token %d after the step-down is not above %d", after.Token, during.Token)
	}
	if r := c.roles(); !slices.Equal(r, []string{api.RoleActive, api.RoleStandby, api.RoleStandby}) {
		t.Errorf("roles %v, want one active (node 0) and two standbys", r)
	}
}

// postNoFollow sends a POST in the background and delivers its answer
// (status 0 if it failed) without following a redirect.
func postNoFollow(u string, hdr ...string) <-chan answer {
	return sendNoFollow(http.MethodPost, u, hdr...)
}

// sendNoFollow is postNoFollow with another method.
func sendNoFollow(method, u string, hdr ...string) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		noFollow := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		a := answer{}
		req, err := http.NewRequest(method, u, nil)
		if err != nil {
			ch <- a
			return
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := noFollow.Do(req)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			a = answer{status: resp.StatusCode, body: string(b)}
		}
		ch <- a
	}()
	return ch
}

// pauseWithWaiter starts two nodes, takes k on node 0 with a 1 s lease and
// queues a waiter for it there (with the headers hdr: name, value, ...).
func pauseWithWaiter(t *testing.T, hdr ...string) (*testCluster, api.Grant, <-chan answer) {
	c := newCluster(t, 2, false)
	c.startAll()
	c.waitActive(0, 1)
	held := c.acquire(0, "k", "lease=1")
	waiter := postNoFollow("http://"+c.nodes[0].listen+"/locks/k?lease=60&wait=30", hdr...)
	deadline := time.Now().Add(20 * time.Second)
	for c.waitersOn(0, "k") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued on node 0")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c, held, waiter
}

// resumeAndCheckWaiter pauses node 0 until node 1 is promoted and the
// lease of held has run out, resumes it, and checks that the waiter was
// not told it holds k.
func resumeAndCheckWaiter(t *testing.T, c *testCluster, held api.Grant, waiter <-chan answer) {
	t.Helper()
	c.signal(0, syscall.SIGSTOP)
	c.waitActive(1) // promoted after the failover timeout
	// The 1 s lease runs out while node 0 is paused: its timer hands k to
	// the waiter the moment it runs again, before it knows its role.
	time.Sleep(time.Until(held.ExpiresAt) + 200*time.Millisecond)
	c.signal(0, syscall.SIGCONT)
	select {
	case a := <-waiter:
		t.Logf("waiter: %d %s", a.status, a.body)
		if a.status == http.StatusOK {
			t.Errorf("the resumed node delivered the grant its timer made while it was not known to be active: %s", a.body)
		} else if a.status != http.StatusServiceUnavailable && a.status != http.StatusTemporaryRedirect {
			t.Errorf("the waiter got %d %s, want 503 or 307", a.status, a.body)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the waiter got no answer")
	}
}

// The same with a waiter that came with an Idempotency-Key (as every
// official client's does): its grant stays for a repeat, but the resumed
// node must not answer it 200 either.
func TestPausedActiveDeliversNoGrantOnResumeToAKeyedWaiter(t *testing.T) {
	c, held, waiter := pauseWithWaiter(t, api.HeaderIdempotencyKey, "paused-waiter-1")
	resumeAndCheckWaiter(t, c, held, waiter)
}

// A lease that runs out while the active is paused is taken back by the
// paused node's own timer the moment it resumes, and the lock passes to
// its first waiter; but a standby has been promoted meanwhile, so the
// waiter must be told to retry, not that it holds the lock.
func TestPausedActiveDeliversNoGrantOnResume(t *testing.T) {
	c, held, waiter := pauseWithWaiter(t)
	resumeAndCheckWaiter(t, c, held, waiter)
	// Node 1 granted nothing: both states end with the same grant, and node
	// 0 keeps the role by priority (or steps down and takes it back).
	c.waitActive(0, 1)
	// The waiter came without an Idempotency-Key and was told to retry:
	// nobody can claim that grant, so it does not hold k for its lease.
	if got := c.holderOf(0, "k"); got != 0 {
		t.Errorf("k is held by %d after the resume, a grant its waiter was told to retry and that nobody can claim", got)
	}
}

// With sync_standbys, the grant a paused active's timer makes the moment
// it runs again waits for acknowledgements; the node steps down (the
// node promoted meanwhile has the newer state), takes the standby's
// snapshot, and takes the role back by a handoff (its priority is
// higher). The new term's acknowledgements, at the same indexes, then
// released the waiting grant, and the waiter was told it holds k under a
// token that no node's state has: k was the promoted node's grant to the
// same waiter (its lease ran out there too), which nobody claimed.
// Found by a newcomer's trial with SIGSTOP, where the grant went to one
// client and the promoted node's to another: two holders.
func TestPausedSyncActiveDeliversNoGrantOfTheTermItLeft(t *testing.T) {
	c := newCluster(t, 2, false, "--sync-standbys", "1", "--sync-timeout", "3s")
	c.startAll()
	c.waitActive(0, 1)
	held := c.acquire(0, "k", "lease=1")
	waiter := postNoFollow("http://"+c.nodes[0].listen+"/locks/k?lease=60&wait=30", api.HeaderIdempotencyKey, "sync-paused-waiter")
	deadline := time.Now().Add(20 * time.Second)
	for c.waitersOn(0, "k") != 1 {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued on node 0")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.signal(0, syscall.SIGSTOP)
	c.waitActive(1)
	c.acquire(1, "newer", "lease=60") // node 1's state is the newer one
	time.Sleep(time.Until(held.ExpiresAt) + 200*time.Millisecond)
	c.signal(0, syscall.SIGCONT)
	var a answer
	select {
	case a = <-waiter:
		t.Logf("waiter: %d %s", a.status, a.body)
	case <-time.After(40 * time.Second):
		t.Fatal("the waiter got no answer")
	}
	c.waitActive(0, 1)
	if a.status == http.StatusOK {
		var g api.Grant
		if err := json.Unmarshal([]byte(a.body), &g); err != nil {
			t.Fatal(err)
		}
		if got := c.holder(0, "k"); got != g.Token {
			t.Errorf("the waiter was told it holds k under token %d; the active's k is held by %d", g.Token, got)
		}
	}
}

// With sync_standbys, a renewal or a release that waits for its
// acknowledgements when the active is paused (its standby's stream was
// held back, so none came) is not answered as made once the node resumes,
// steps down (the node promoted meanwhile has the newer state) and takes
// the role back by a handoff (its priority is higher): the promoted
// node's state, which the cluster keeps, never had the change. Found by
// a tester: the new term's acknowledgements, at the same log indexes,
// released the wait, and the client was told 200 (its lease extended,
// its lock released) while the active still had the lease as it was.
func TestPausedSyncActiveAnswersNoChangeOfTheTermItLeft(t *testing.T) {
	for _, method := range []string{http.MethodPatch, http.MethodDelete} {
		t.Run(method, func(t *testing.T) {
			c := newCluster(t, 2, true, "--sync-standbys", "1", "--sync-timeout", "20s")
			// Node 1, once active, goes on without node 0 (paused) soon.
			c.args = map[int][]string{1: {"--sync-timeout", "2s"}}
			c.startAll()
			c.waitActive(0, 1)
			held := c.acquire(0, "k", "lease=30")
			// Node 1 gets no more records, so no acknowledgement comes.
			c.nodes[0].proxy.hold(streamOf(c.nodes[1].url), false, true)
			u := fmt.Sprintf("http://%s/locks/k?token=%d", c.nodes[0].listen, held.Token)
			if method == http.MethodPatch {
				u += "&lease=600"
			}
			pending := sendNoFollow(method, u)
			// In node 0's memory, waiting for its acknowledgement.
			c.waitMade(0, "k", "the "+method, func(e feedEvent) bool {
				if method == http.MethodPatch {
					return e.Kind == "renew" && e.Lease == 600
				}
				return e.Kind == "release"
			})
			c.signal(0, syscall.SIGSTOP)
			c.nodes[0].proxy.reset() // the records held back are lost
			c.waitActive(1)
			c.acquire(1, "newer", "lease=60") // node 1's state is the newer one
			c.signal(0, syscall.SIGCONT)
			var a answer
			select {
			case a = <-pending:
				t.Logf("%s: %d %s", method, a.status, a.body)
			case <-time.After(40 * time.Second):
				t.Fatalf("the %s got no answer", method)
			}
			active := c.waitActive(-1, 0, 1)
			if a.status == http.StatusOK {
				h := c.lockStatus(active, "k").Holder
				switch {
				case method == http.MethodPatch && (h == nil || h.Lease != 600):
					t.Errorf("the renewal was answered 200; the active's k is held with %+v", h)
				case method == http.MethodDelete && h != nil:
					t.Errorf("the release was answered 200; the active's k is held by %d", h.Token)
				}
			}
		})
	}
}

func TestCutLinkMakesTwoActivesAndHealingLeavesOne(t *testing.T) {
	c := newCluster(t, 2, true)
	c.startAll()
	c.waitActive(0, 1)

	c.nodes[0].proxy.setCut(true)
	c.nodes[1].proxy.setCut(true)
	// Each side sees the other as dead: node 1 promotes itself, node 0 stays.
	c.waitActive(1)
	if r := c.roles(); r[0] != api.RoleActive {
		t.Fatalf("roles during the partition %v; want both active", r)
	}
	a := c.acquire(0, "split", "lease=60")
	b := c.acquire(1, "split", "lease=60")
	t.Logf("during the partition key split is held twice: token %d on node 0, %d on node 1", a.Token, b.Token)

	c.nodes[0].proxy.setCut(false)
	c.nodes[1].proxy.setCut(false)
	c.waitActive(0, 1)
	if r := c.roles(); !slices.Equal(r, []string{api.RoleActive, api.RoleStandby}) {
		t.Errorf("roles after healing %v; want node 0 active, node 1 standby", r)
	}
	next := c.acquire(0, "next", "lease=60")
	if next.Token <= max(a.Token, b.Token) {
		t.Errorf("token %d after healing is not above both sides' %d and %d", next.Token, a.Token, b.Token)
	}
}

func TestRestartedHigherPriorityNodeSyncsThenTakesOver(t *testing.T) {
	c := newCluster(t, 3, false)
	c.startAll()
	c.waitActive(0, 1, 2)
	first := c.acquire(0, "first", "lease=60")
	c.waitReplicated(1, first.Token)
	c.kill9(0)
	c.waitActive(1, 2)
	second := c.acquire(1, "second", "lease=60")
	// A waiter queued on node 1 keeps its place across the handoff to node 0.
	type res struct {
		a   answer
		err error
	}
	waiter := make(chan res, 1)
	go func() {
		a, err := do(http.MethodPost, "http://"+c.nodes[1].listen+"/locks/second?wait=30", "Idempotency-Key", "restart-waiter")
		waiter <- res{a, err}
	}()
	for range 500 {
		if st := c.waitersOn(1, "second"); st == 1 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}

	c.start(0)
	c.waitActive(0, 1, 2)
	for key, tok := range map[string]uint64{"first": first.Token, "second": second.Token} {
		if got := c.holder(0, key); got != tok {
			t.Errorf("%s: held by %d after node 0 took over, want %d", key, got, tok)
		}
	}
	if _, err := do(http.MethodDelete, fmt.Sprintf("http://%s/locks/second?token=%d", c.nodes[0].listen, second.Token)); err != nil {
		t.Fatal(err)
	}
	r := <-waiter
	if r.err != nil || r.a.status != http.StatusOK || r.a.grant.Token <= second.Token {
		t.Fatalf("the waiter queued before the handoff got %v %d %s; want a grant above %d", r.err, r.a.status, r.a.body, second.Token)
	}
}

func TestTwoNodesAndALastSurvivorKeepServing(t *testing.T) {
	t.Run("two nodes, standby lost", func(t *testing.T) {
		c := newCluster(t, 2, false)
		c.startAll()
		c.waitActive(0, 1)
		c.kill9(1)
		g := c.acquire(0, "k", "lease=5")
		if c.holder(0, "k") != g.Token {
			t.Fatal("the lone active does not hold what it granted")
		}
	})
	t.Run("three nodes, two lost", func(t *testing.T) {
		c := newCluster(t, 3, false)
		c.startAll()
		c.waitActive(0, 1, 2)
		g := c.acquire(0, "k", "lease=60")
		c.waitReplicated(2, g.Token)
		c.kill9(0)
		c.kill9(1)
		c.waitActive(2)
		if got := c.holder(2, "k"); got != g.Token {
			t.Errorf("k: held by %d on the survivor, want %d", got, g.Token)
		}
		if g2 := c.acquire(2, "k2", "lease=5"); g2.Token <= g.Token {
			t.Errorf("token %d on the survivor is not above %d", g2.Token, g.Token)
		}
	})
}

func TestStandbyRedirectsAndReadyz(t *testing.T) {
	c := newCluster(t, 2, false)
	c.startAll()
	c.waitActive(0, 1)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Post("http://"+c.nodes[1].listen+"/locks/a/b?lease=5&wait=1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := c.nodes[0].url + "/locks/a/b?lease=5&wait=1"; resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != want {
		t.Errorf("standby answered %d Location %q; want 307 to %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	for i, want := range []int{http.StatusOK, http.StatusServiceUnavailable} {
		resp, err := http.Get("http://" + c.nodes[i].listen + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("node %d /readyz: %d, want %d", i, resp.StatusCode, want)
		}
	}
	// Peer endpoints refuse a wrong secret.
	req, _ := http.NewRequest(http.MethodGet, "http://"+c.nodes[0].listen+"/_cluster/status", nil)
	req.Header.Set("X-Baton-Cluster-Secret", "wrong")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("peer endpoint with a wrong secret: %d, want 401", resp.StatusCode)
	}
}

// waitersOn returns the queue length of key on the active, asked through
// node i (following the redirect).
func (c *testCluster) waitersOn(i int, key string) int {
	resp, err := httpc.Get("http://" + c.nodes[i].listen + "/locks/" + key)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var st api.LockStatus
	if decodeJSON(resp, &st) != nil {
		return -1
	}
	return st.Waiters
}

func TestWrongClusterSecretIsRefusedAndLogged(t *testing.T) {
	c := newCluster(t, 2, false)
	c.args = map[int][]string{1: {"--cluster-secret", "not-the-secret"}}
	c.startAll()
	c.waitActive(0)
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(c.nodes[0].log.String(), "refused peer request") &&
			strings.Contains(c.nodes[1].log.String(), "cluster_secret differs") {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(c.nodes[0].log.String(), "refused peer request") {
		t.Errorf("node 0 did not log the refusal of node 1's requests")
	}
	if !strings.Contains(c.nodes[1].log.String(), "cluster_secret differs") {
		t.Errorf("node 1 did not log that its peer refuses it")
	}
	if strings.Contains(c.nodes[1].log.String(), "synced with the active") {
		t.Errorf("node 1 replicated from node 0 with the wrong secret")
	}
	if strings.Contains(c.nodes[0].log.String(), "standby subscribed") {
		t.Errorf("node 0 streamed its state to a node with the wrong secret")
	}
	// Refused is not dead: node 1 must not promote itself beside node 0.
	time.Sleep(3 * failoverTimeout)
	if r := c.roles(); r[0] != api.RoleActive || r[1] != api.RoleStandby {
		t.Errorf("roles %v with a wrong secret on node 1; want node 0 active and node 1 a standby", r)
	}
	// Its clients are told why it serves nothing: a 503 that names the
	// secret, not the "no active node is known" of a failover.
	resp, err := httpc.Post("http://"+c.nodes[1].listen+"/locks/k?wait=1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.Error
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(e.Message, "cluster_secret differs") {
		t.Errorf("POST on node 1 (its secret differs): %d %+v (%v); want 503 naming cluster_secret", resp.StatusCode, e, err)
	}
}

// TestActiveWithAWrongSecretStepsDownWhenItsPeersComeUp: a node whose
// cluster_secret differs, started before its peers, is elected alone (a
// cold start, nobody to refuse it). Once its peers are up they refuse it
// and elect an active of their own: it steps down (three nodes: both
// others refuse it; two nodes: the other one, of higher priority, does)
// and answers 503 naming the secret. Before, it stayed active beside
// theirs, and a key was granted on both (breaker U, 2026-12-06).
func TestActiveWithAWrongSecretStepsDownWhenItsPeersComeUp(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes int
		odd   int // the node with the other secret, started first
	}{
		{"three nodes, the first", 3, 0},
		{"two nodes, the second", 2, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, tc.nodes, false)
			c.args = map[int][]string{tc.odd: {"--cluster-secret", "not-the-secret"}}
			c.start(tc.odd)
			c.waitActive(tc.odd)
			c.acquire(tc.odd, "x", "lease=60")
			var rest []int
			for i := range tc.nodes {
				if i != tc.odd {
					rest = append(rest, i)
					c.start(i)
				}
			}
			a := c.waitActive(-1, rest...)
			if a == tc.odd {
				t.Fatalf("node %d (its secret differs) is the agreed active of %v", a, rest)
			}
			deadline := time.Now().Add(15 * time.Second)
			for time.Now().Before(deadline) {
				if v, err := c.view(tc.odd); err == nil && v.Role == api.RoleStandby {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			r := c.roles()
			for i, role := range r {
				if want := map[bool]string{true: api.RoleActive, false: api.RoleStandby}[i == a]; role != want {
					t.Fatalf("roles %v: node %d is %q, want %q (node %d active; node %d's secret differs)", r, i, role, want, a, tc.odd)
				}
			}
			if !strings.Contains(c.nodes[tc.odd].log.String(), "cluster_secret differs") {
				t.Errorf("node %d did not log that its peers refuse it", tc.odd)
			}
			resp, err := httpc.Post("http://"+c.nodes[tc.odd].listen+"/locks/x?wait=1", "", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var e api.Error
			if err := json.NewDecoder(resp.Body).Decode(&e); err != nil || resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(e.Message, "cluster_secret differs") {
				t.Errorf("POST on node %d (its secret differs): %d %+v (%v); want 503 naming cluster_secret", tc.odd, resp.StatusCode, e, err)
			}
		})
	}
}

// TestRestartedStandbyResumesFromItsIndex: a standby killed with kill -9
// while the active goes on granting comes back from its own log and
// resumes the stream from its log's index: no snapshot, on either side's
// word (the active logs that the standby resumes, the standby that it
// resumed), and it then holds what was granted before, while it was down,
// and after.
func TestRestartedStandbyResumesFromItsIndex(t *testing.T) {
	c := newCluster(t, 2, false)
	c.startAll()
	c.waitActive(0, 1)
	want := map[string]uint64{}
	for i := range 5 {
		key := fmt.Sprintf("before/%d", i)
		want[key] = c.acquire(0, key, "lease=60").Token
	}
	c.waitHolder(1, "before/4", want["before/4"])
	c.kill9(1)
	for i := range 5 {
		key := fmt.Sprintf("down/%d", i)
		want[key] = c.acquire(0, key, "lease=60").Token
	}
	marks := []int{len(c.nodes[0].log.String()), len(c.nodes[1].log.String())}
	c.start(1)
	c.waitActive(0, 1)
	last := c.acquire(0, "after", "lease=60")
	want["after"] = last.Token
	c.waitHolder(1, "after", last.Token)
	for key, tok := range want {
		if got := c.holderOf(1, key); got != tok {
			t.Errorf("%s: held by %d on the restarted standby, want %d", key, got, tok)
		}
	}
	active, standby := c.nodes[0].log.String()[marks[0]:], c.nodes[1].log.String()[marks[1]:]
	if !strings.Contains(active, "standby resumes from its log") || strings.Contains(active, "standby gets a snapshot") {
		t.Errorf("the active did not resume the restarted standby's stream from its index:\n%s", active)
	}
	if !strings.Contains(standby, "synced with the active: resumed from its log") || strings.Contains(standby, "installed the active's snapshot") {
		t.Errorf("the restarted standby did not resume from its log:\n%s", standby)
	}
}

// A Go client that a standby's 307 sent to the active keeps calling the
// active; when the active is paused (its connections stay open and go
// silent), a release attempt is cut off after a second, and the next one
// must leave that node, not wait on it again until the release gives up
// (SPEC section 4: releases retried for 5 s, the client fails over).
func TestReleaseLeavesAPausedActive(t *testing.T) {
	c := newCluster(t, 2, false)
	c.startAll()
	c.waitActive(0, 1)
	// The client knows only the standby: the acquire's 307 makes node 0,
	// the active, its preferred node.
	releaseLeavesAPausedActive(t, c, "http://"+c.nodes[1].listen)
}

// The same over the native protocol: an M answer makes the active
// preferred.
func TestNativeReleaseLeavesAPausedActive(t *testing.T) {
	c := newCluster(t, 2, false)
	native := []string{freeAddr(t, nodeHost(0)), freeAddr(t, nodeHost(1))}
	c.args = map[int][]string{0: {"--native-listen", native[0]}, 1: {"--native-listen", native[1]}}
	c.startAll()
	c.waitActive(0, 1)
	releaseLeavesAPausedActive(t, c, "baton://"+native[1])
}

// releaseLeavesAPausedActive takes k through addr (node 1's, a standby),
// stops node 0 (the active) until node 1 is promoted, and releases k.
func releaseLeavesAPausedActive(t *testing.T, c *testCluster, addr string) {
	cl, err := api.NewClient(api.Config{Addresses: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := cl.Acquire(ctx, "k", api.WithLease(60*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	c.waitReplicated(1, l.Token)
	c.signal(0, syscall.SIGSTOP)
	defer c.signal(0, syscall.SIGCONT)
	c.waitActive(1) // promoted after the failover timeout
	if err := cl.Release(ctx, "k", l.Token); err != nil {
		t.Fatalf("release with the active paused and node 1 promoted: %v", err)
	}
	if got := c.holderOf(1, "k"); got != 0 {
		t.Errorf("k is still held by %d on the new active", got)
	}
}
