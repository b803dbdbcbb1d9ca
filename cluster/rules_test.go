package cluster

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// The split-brain rule, rule by rule (SPEC section 3; issue 11, defect 3).
func TestKeepsState(t *testing.T) {
	st := func(prio int, token uint64) Status { return Status{Priority: prio, StateToken: token, Role: "active"} }
	for _, tc := range []struct {
		name string
		a, b Status
		want bool
	}{
		{"the newer state keeps it, though its priority is lower", st(1, 200), st(0, 100), true},
		{"the older state steps down, though its priority is higher", st(0, 100), st(1, 200), false},
		{"a node that granted nothing steps down before one that did", st(0, 0), st(2, 1), false},
		{"equal state tokens: the higher priority keeps", st(0, 100), st(1, 100), true},
		{"equal state tokens: the lower priority steps down", st(2, 100), st(1, 100), false},
		{"neither granted anything: the higher priority keeps", st(0, 0), st(1, 0), true},
		{"epochs do not outweigh the newer state", Status{Priority: 1, StateToken: 5, Epoch: 1}, Status{Priority: 0, StateToken: 4, Epoch: 9}, true},
		{"equal state tokens: the later promotion keeps, though its priority is lower", Status{Priority: 1, StateToken: 7, Epoch: 3}, Status{Priority: 0, StateToken: 7, Epoch: 2}, true},
		{"equal state tokens: the earlier promotion steps down, though its priority is higher", Status{Priority: 0, StateToken: 7, Epoch: 2}, Status{Priority: 1, StateToken: 7, Epoch: 3}, false},
		{"the last token heard of decides nothing", Status{Priority: 1, StateToken: 5, LastToken: 5}, Status{Priority: 0, StateToken: 4, LastToken: 99}, true},
	} {
		if got := keepsState(tc.a, tc.b); got != tc.want {
			t.Errorf("%s: keepsState(%+v, %+v) = %v, want %v", tc.name, tc.a, tc.b, got, tc.want)
		}
		if keepsState(tc.a, tc.b) == keepsState(tc.b, tc.a) {
			t.Errorf("%s: both or neither keep their state", tc.name)
		}
	}
}

// Two actives each decide at their own steps, from the other's last answer
// (given at any earlier instant), while both keep granting: never do both
// step down, and once both have decided after seeing each other's final
// state exactly one is left. This is why the timing of the heartbeats
// does not matter.
func TestKeepsStateNeverStepsDownBoth(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	for range 20000 {
		const steps = 12
		// tok[i][t]: node i's state token at instant t, rising while active.
		// ep[i][t]: node i's epoch, rising now and then (promotions).
		var tok, ep [2][steps]uint64
		for i := range 2 {
			v, e := uint64(rng.IntN(3)), uint64(rng.IntN(2))
			for k := range steps {
				v += uint64(rng.IntN(3))
				if rng.IntN(4) == 0 {
					e++
				}
				tok[i][k], ep[i][k] = v, e
			}
		}
		down := [2]int{-1, -1} // instant of the step-down, -1 = none
		for k := 1; k < steps; k++ {
			for _, i := range rng.Perm(2) {
				j := 1 - i
				if down[i] >= 0 {
					continue
				}
				s := rng.IntN(k) // the other's answer is from instant s < k
				if down[j] >= 0 && down[j] <= s {
					continue // it answered as a standby
				}
				self := Status{Priority: i, StateToken: tok[i][k], Epoch: ep[i][k]}
				other := Status{Priority: j, StateToken: tok[j][s], Epoch: ep[j][s]}
				if !keepsState(self, other) {
					down[i] = k
				}
			}
		}
		if down[0] >= 0 && down[1] >= 0 {
			t.Fatalf("both actives stepped down (at %d and %d); tokens %v, epochs %v", down[0], down[1], tok, ep)
		}
	}
}

// The role rules of decide, one test per rule (the package comment; SPEC
// section 3). Node "s" is this node; peers are a, b, c, priority in that
// order unless a test says otherwise.

const ft = time.Second

// standbyView is a standby of priority 1 with state, ten seconds after
// start, that follows nothing (any more: it followed an active since it
// started, so a promotion is a failover, not a cold start).
func standbyView(peers ...peerView) view {
	return view{
		self: Status{URL: "s", Role: api.RoleStandby, Priority: 1, HasState: true},
		role: api.RoleStandby, uptime: 10 * ft, sinceAsked: 10 * ft, failoverTimeout: ft, peers: peers,
		wasSynced: true,
	}
}

func livePeer(u string, prio int, role string, stateToken uint64) peerView {
	return peerView{Status: Status{URL: u, Role: role, Priority: prio, HasState: true, StateToken: stateToken}, live: true, recent: true, fresh: true}
}

func deadPeer(u string, prio int) peerView {
	return peerView{Status: Status{URL: u, Role: api.RoleActive, Priority: prio, HasState: true}}
}

func wantAction(t *testing.T, v view, kind actionKind, to string) action {
	t.Helper()
	a := decide(v)
	if a.kind != kind || a.to != to {
		t.Fatalf("decide = %v %q (%s), want %v %q", a.kind, a.to, a.why, kind, to)
	}
	return a
}

func TestRuleActiveStaysWithoutAnotherActive(t *testing.T) {
	v := standbyView(livePeer("a", 0, api.RoleStandby, 0))
	v.role, v.self.Role = api.RoleActive, api.RoleActive
	wantAction(t, v, actStay, "")
}

func TestRuleTwoActivesTheOlderStateStepsDown(t *testing.T) {
	v := standbyView(livePeer("a", 2, api.RoleActive, 200))
	v.role, v.self.Role, v.self.StateToken = api.RoleActive, api.RoleActive, 100
	wantAction(t, v, actStepDown, "a") // its priority is lower, its state newer
	v.self.StateToken = 300
	wantAction(t, v, actStay, "") // this node's state is the newer
}

func TestRuleTwoActivesEqualStateTheLowerPriorityStepsDown(t *testing.T) {
	v := standbyView(livePeer("a", 0, api.RoleActive, 100))
	v.role, v.self.Role, v.self.StateToken = api.RoleActive, api.RoleActive, 100
	wantAction(t, v, actStepDown, "a")
	v.peers[0].Priority = 2
	wantAction(t, v, actStay, "")
}

// The step-down's log line says which rule decided: in a trial, two
// actives with equal state tokens were resolved by the epoch, and the line
// said the other's priority was higher when it was lower.
func TestRuleTwoActivesStepDownSaysWhichRuleDecided(t *testing.T) {
	v := standbyView(livePeer("a", 2, api.RoleActive, 200))
	v.role, v.self.Role, v.self.StateToken, v.self.Epoch = api.RoleActive, api.RoleActive, 100, 5
	if a := wantAction(t, v, actStepDown, "a"); !strings.Contains(a.why, "state token is higher") {
		t.Errorf("newer state: why = %q", a.why)
	}
	v.self.StateToken, v.peers[0].Epoch = 200, 6 // equal states, a later promotion, a lower priority
	if a := wantAction(t, v, actStepDown, "a"); !strings.Contains(a.why, "epoch is higher") || strings.Contains(a.why, "priority") {
		t.Errorf("equal states, later epoch: why = %q", a.why)
	}
	v.peers[0].Epoch, v.peers[0].Priority = 5, 0 // equal epochs too, a higher priority
	if a := wantAction(t, v, actStepDown, "a"); !strings.Contains(a.why, "priority is higher") {
		t.Errorf("equal states and epochs, higher priority: why = %q", a.why)
	}
}

func TestRuleTwoActivesADeadActiveIsIgnored(t *testing.T) {
	v := standbyView(deadPeer("a", 0))
	v.peers[0].StateToken = 500
	v.role, v.self.Role = api.RoleActive, api.RoleActive
	wantAction(t, v, actStay, "")
}

func TestRuleFollowBestLiveActive(t *testing.T) {
	v := standbyView(livePeer("a", 0, api.RoleStandby, 5), livePeer("b", 2, api.RoleActive, 5))
	wantAction(t, v, actFollow, "b")
	v.following = "b"
	wantAction(t, v, actStay, "")
}

func TestRuleFollowTheActiveThatKeepsItsStateAmongTwo(t *testing.T) {
	v := standbyView(livePeer("a", 0, api.RoleActive, 10), livePeer("b", 2, api.RoleActive, 20))
	wantAction(t, v, actFollow, "b")
}

func TestRuleNewerActiveIsFollowedInstead(t *testing.T) {
	v := standbyView(livePeer("a", 0, api.RoleActive, 10), livePeer("b", 2, api.RoleActive, 20))
	v.following, v.synced = "a", true
	wantAction(t, v, actFollow, "b")
	v.peers[1].StateToken = 5 // a keeps its state against b: stay with a
	wantAction(t, v, actStay, "")
}

// A synced standby's state is its active's, replicated: its own state
// token is a floor of the active's, whatever the active's last poll said.
// Right after a handoff, the successor's status (its answer to the
// promotion) lacks the grants it made since; a resumed old active whose
// state token lay between the two looked newer, and the standby followed
// it and acknowledged its snapshot, so that the old active confirmed a
// grant its step-down a moment later lost
// (TestNativeGrantLostInAStepDownIsNotAnswered).
func TestRuleSyncedStandbyKnowsItsActiveAtLeastAsNewAsItself(t *testing.T) {
	v := standbyView(livePeer("a", 0, api.RoleActive, 15), livePeer("b", 2, api.RoleActive, 10))
	v.following, v.synced, v.self.StateToken = "b", true, 20
	v.sinceAsked = ft / 2 // (else it asks b for a handoff: its priority is higher)
	wantAction(t, v, actStay, "")
	v.peers[0].StateToken = 25 // newer than anything b's stream brought
	wantAction(t, v, actFollow, "a")
	v.peers[0].StateToken, v.synced = 15, false // not synced: b as its poll says
	wantAction(t, v, actFollow, "a")
}

func TestRuleAskHandoffWhenSyncedAndOfHigherPriority(t *testing.T) {
	v := standbyView(livePeer("b", 2, api.RoleActive, 10))
	v.following = "b"
	wantAction(t, v, actStay, "") // not synced yet
	v.synced = true
	wantAction(t, v, actAskHandoff, "b")
	v.sinceAsked = ft / 2
	wantAction(t, v, actStay, "") // asked less than a failover timeout ago
	v.sinceAsked, v.peers[0].Priority = 10*ft, 0
	wantAction(t, v, actStay, "") // the active's priority is higher
}

// A standby whose peers list differs from the active's asks it for a
// handoff only if the active's list too ranks the standby first (as when
// a node is added at the end of the list, one node at a time): otherwise
// the active refuses it, every time.
func TestRuleAskHandoffWhenThePeersListsDiffer(t *testing.T) {
	v := standbyView(livePeer("b", 2, api.RoleActive, 10))
	v.following, v.synced = "b", true
	v.self.Peers = []string{"a", "s", "b", "d"}
	v.peers[0].Peers = []string{"a", "s", "b"}
	wantAction(t, v, actAskHandoff, "b")
	v.peers[0].Peers = []string{"a", "b", "s"}
	wantAction(t, v, actStay, "")
}

func TestRuleWaitWhileTheFollowedNodeHandsOff(t *testing.T) {
	// a answers as a standby (it demoted its engine for a handoff); its
	// successor is not yet seen as active: wait, promote nothing.
	v := standbyView(livePeer("a", 0, api.RoleStandby, 10), livePeer("b", 2, api.RoleStandby, 10))
	v.following, v.synced = "a", true
	wantAction(t, v, actStay, "")
}

func TestRuleListenAFailoverTimeoutAfterStart(t *testing.T) {
	v := standbyView(deadPeer("a", 0))
	v.self.Priority = 0
	v.uptime = ft / 2
	wantAction(t, v, actStay, "")
	v.uptime = ft
	wantAction(t, v, actPromote, "")
}

func TestRuleListenThreeFailoverTimeoutsWithoutState(t *testing.T) {
	v := standbyView(deadPeer("a", 1))
	v.self.Priority, v.self.HasState = 0, false
	v.uptime = 2 * ft
	wantAction(t, v, actStay, "")
	v.uptime = 3 * ft
	wantAction(t, v, actPromote, "")
}

// A node that restarted while the cluster ran (a live peer has synced
// with an active or been one since it started: Settled) listens one
// failover timeout, as a standby does before a failover, not three: the
// cluster did not stop, and a peer it has not heard went silent while
// that peer was up (breaker O: the active killed, its successor killed
// 50 ms after the old active restarted; the restarted node, as advanced
// as the standby that stayed up and of higher priority, listened 3 s
// while that standby deferred to it). On a cold start of the whole
// cluster no live peer is Settled, and it still listens three.
func TestRuleRestartWhileTheClusterRunsListensOneTimeout(t *testing.T) {
	b := livePeer("b", 2, api.RoleStandby, 0)
	b.LastIndex, b.LogEpoch = 9, 3
	v := standbyView(deadPeer("a", 1), b)
	v.wasSynced, v.self.Priority = false, 0
	v.self.LastIndex, v.self.LogEpoch = 9, 3
	v.uptime = ft
	wantListening(t, v) // b restarted too: a cold start
	v.peers[1].Settled = true
	if a := wantAction(t, v, actPromote, ""); !a.blind {
		t.Fatalf("a promotion with a not heard: not blind (%s)", a.why)
	}
	v.uptime = ft / 2
	wantListening(t, v)
	// A peer of another cluster ID, or one that refuses this node, is no
	// sign that this node's cluster runs.
	v.uptime = ft
	v.peers[1].ClusterID, v.self.ClusterID = "other", "mine"
	wantListening(t, v)
	v.peers[1].ClusterID = "mine"
	v.peers[1].refused = true
	wantListening(t, v)
	// Without state of its own it listens three, whoever runs.
	v.peers[1].refused, v.self.HasState = false, false
	wantListening(t, v)
}

// wantListening asserts that decide(v) stays to listen after the start.
func wantListening(t *testing.T, v view) {
	t.Helper()
	if a := wantAction(t, v, actStay, ""); a.why != "listening after start" {
		t.Fatalf("decide = stay (%s), want stay (listening after start)", a.why)
	}
}

func TestRuleWaitOutTheSilenceOfARecentActive(t *testing.T) {
	p := deadPeer("a", 0)
	p.recent = true // heard within the failover timeout, a call failed since
	v := standbyView(p)
	wantAction(t, v, actStay, "")
	v.peers[0].recent = false
	wantAction(t, v, actPromote, "")
}

func TestRuleNeverPromoteWithEmptyStateWhileAnotherHoldsState(t *testing.T) {
	v := standbyView(deadPeer("a", 0), livePeer("c", 2, api.RoleStandby, 10))
	v.self.Priority, v.self.HasState = 0, false
	wantAction(t, v, actStay, "")
	v.peers[1].HasState = false // nobody holds state: the highest priority may
	wantAction(t, v, actPromote, "")

	// ruleEmptyWaits: nor once a node that said it holds state went
	// silent (paused, cut off, dead), live or not, cold start or not:
	// this node's empty state would replace its grants.
	for _, synced := range []bool{true, false} {
		w := standbyView(deadPeer("a", 0), deadPeer("c", 2))
		w.self.Priority, w.self.HasState, w.wasSynced = 0, false, synced
		wantAction(t, w, actPromote, "")
		w.peers[1].hadGrants = true
		wantAction(t, w, actStay, "")
	}
}

func TestRuleALiveHigherPriorityNodePromotesFirst(t *testing.T) {
	v := standbyView(deadPeer("a", 2), livePeer("b", 0, api.RoleStandby, 10))
	wantAction(t, v, actStay, "")
	v.peers[1].HasState = false // it lacks the state this node holds
	wantAction(t, v, actPromote, "")
}

func TestRuleFailoverTakesEpochAboveEveryEpochSeen(t *testing.T) {
	v := standbyView(deadPeer("a", 0), livePeer("c", 2, api.RoleStandby, 10))
	v.self.Epoch, v.peers[0].Epoch, v.peers[1].Epoch = 3, 7, 5
	a := wantAction(t, v, actPromote, "")
	if a.epoch != 8 || a.why != "failover" {
		t.Fatalf("promote epoch %d (%s), want 8 (failover)", a.epoch, a.why)
	}
}

func TestRuleFirstPromotionOfAFreshClusterIsAnElection(t *testing.T) {
	v := standbyView(deadPeer("a", 0))
	a := wantAction(t, v, actPromote, "")
	if a.epoch != 1 || a.why != "election" {
		t.Fatalf("promote epoch %d (%s), want 1 (election)", a.epoch, a.why)
	}
}

func TestRulePausedNodeDecidesNothingUntilEveryPeerPolled(t *testing.T) {
	v := standbyView(livePeer("a", 0, api.RoleActive, 10))
	v.role, v.self.Role, v.self.StateToken = api.RoleActive, api.RoleActive, 5
	v.stale = true
	wantAction(t, v, actStay, "")
	v.stale = false
	wantAction(t, v, actStepDown, "a")
}

func TestRuleNothingDecidedDuringAHandoffOrClose(t *testing.T) {
	v := standbyView(deadPeer("a", 0))
	v.moving = true
	wantAction(t, v, actStay, "")
	v.moving, v.closing = false, true
	wantAction(t, v, actStay, "")
}

func TestRuleHandoffPromoteOnlyASyncedStandbyOfTheSender(t *testing.T) {
	v := standbyView(livePeer("a", 2, api.RoleStandby, 10))
	v.self.Epoch, v.peers[0].Epoch = 4, 4
	v.req = &request{kind: reqPromote, peer: "a"}
	wantAction(t, v, actRefuse, "") // not following a
	v.following = "a"
	wantAction(t, v, actRefuse, "") // not synced
	v.synced = true
	a := wantAction(t, v, actPromote, "")
	if a.epoch != 5 {
		t.Fatalf("epoch %d, want 5", a.epoch)
	}
	v.role = api.RoleActive
	wantAction(t, v, actRefuse, "")
}

func TestRuleHandoffRequestOnlyFromALiveSyncedHigherPriorityNode(t *testing.T) {
	v := standbyView(livePeer("a", 0, api.RoleStandby, 10), livePeer("c", 2, api.RoleStandby, 10))
	v.role, v.self.Role = api.RoleActive, api.RoleActive
	v.req = &request{kind: reqHandoff, peer: "a"}
	wantAction(t, v, actRefuse, "") // a has not synced
	v.followers = []string{"a", "c"}
	wantAction(t, v, actHandOff, "a")
	v.req.peer = "c"
	wantAction(t, v, actRefuse, "") // priority lower than this node's
	v.req.peer = "a"
	v.peers[0].live = false
	wantAction(t, v, actRefuse, "") // not reachable from here
	v.peers[0].live, v.moving = true, true
	wantAction(t, v, actRefuse, "") // already handing off
	v.moving, v.role = false, api.RoleStandby
	wantAction(t, v, actRefuse, "") // not the active
}

func TestRuleHandoffOnCloseGoesToTheBestSyncedStandby(t *testing.T) {
	v := standbyView(livePeer("a", 0, api.RoleStandby, 10), livePeer("c", 2, api.RoleStandby, 10), livePeer("d", 3, api.RoleStandby, 10))
	v.role, v.self.Role, v.closing = api.RoleActive, api.RoleActive, true
	v.req = &request{kind: reqHandoff}
	wantAction(t, v, actRefuse, "")
	v.followers = []string{"d", "c"}
	wantAction(t, v, actHandOff, "c")
}

// A standby that stopped answering this node's polls (SIGSTOPped, cut off
// by a firewall that drops its packets) may keep its stream for minutes:
// the kernel takes the writes until its buffers fill. On Ctrl+C it is not
// the one to hand off to: the call to it would wait out its timeout, and
// the cluster would then have no active until a failover. A live synced
// standby of lower priority takes the role instead; with none, the best
// synced one is still asked.
func TestRuleHandoffOnClosePrefersALiveStandby(t *testing.T) {
	v := standbyView(livePeer("a", 0, api.RoleStandby, 10), livePeer("c", 2, api.RoleStandby, 10), livePeer("d", 3, api.RoleStandby, 10))
	v.role, v.self.Role, v.closing = api.RoleActive, api.RoleActive, true
	v.req = &request{kind: reqHandoff}
	v.followers = []string{"a", "c", "d"}
	v.peers[0].live = false
	wantAction(t, v, actHandOff, "c")
	v.peers[1].live = false
	wantAction(t, v, actHandOff, "d")
	v.peers[2].live = false
	wantAction(t, v, actHandOff, "a") // none live: the best synced one
}

// A standby stopped (SIGSTOP, a frozen VM) less than a failover timeout
// before the Ctrl+C still counts as live, but has missed this node's last
// polls: the call to it would wait out its timeout (3 failover timeouts)
// and leave the cluster without an active, while a standby of lower
// priority answered every poll. The one that answered the last polls
// (fresh) takes the role; among those, priority decides; with none fresh,
// the live ones, as above.
func TestRuleHandoffOnClosePrefersAStandbyThatAnsweredTheLastPolls(t *testing.T) {
	v := standbyView(livePeer("a", 0, api.RoleStandby, 10), livePeer("c", 2, api.RoleStandby, 10), livePeer("d", 3, api.RoleStandby, 10))
	v.role, v.self.Role, v.closing = api.RoleActive, api.RoleActive, true
	v.req = &request{kind: reqHandoff}
	v.followers = []string{"a", "c", "d"}
	wantAction(t, v, actHandOff, "a")
	v.peers[0].fresh = false // live, silent for its last polls
	wantAction(t, v, actHandOff, "c")
	v.peers[1].fresh = false
	wantAction(t, v, actHandOff, "d")
	v.peers[2].fresh = false
	wantAction(t, v, actHandOff, "a") // none fresh: the best live one
}

// Promotion never with less: a standby that would promote first fetches
// the records the most advanced live node holds beyond its log (a later
// epoch beats a higher index), and promotes once it has them.
func TestRuleFetchTheTailBeforePromoting(t *testing.T) {
	c := livePeer("c", 2, api.RoleStandby, 10)
	c.LastIndex, c.LogEpoch = 20, 1
	v := standbyView(deadPeer("a", 0), c)
	v.self.LastIndex, v.self.LogEpoch = 10, 1
	wantAction(t, v, actFetch, "c")
	v.fetching = true
	wantAction(t, v, actStay, "")
	v.fetching, v.self.LastIndex = false, 20
	wantAction(t, v, actPromote, "")
	v.peers[1].LastIndex, v.peers[1].LogEpoch = 5, 2 // a later epoch, fewer records
	wantAction(t, v, actFetch, "c")
	v.unfetchable = map[string]bool{"c": true} // its log diverged from this one
	wantAction(t, v, actPromote, "")
	v.unfetchable = nil
	v.peers[1].live = false // dead nodes' logs do not count
	wantAction(t, v, actPromote, "")
}

// A cold start (nobody followed or was active since this node started)
// elects the most advanced log, ties by priority, not the priority alone.
func TestRuleColdStartElectsTheMostAdvancedLog(t *testing.T) {
	a, c := livePeer("a", 0, api.RoleStandby, 0), livePeer("c", 2, api.RoleStandby, 0)
	a.LastIndex, a.LogEpoch, c.LastIndex, c.LogEpoch = 5, 3, 5, 3
	v := standbyView(a, c)
	v.wasSynced = false
	v.self.LastIndex, v.self.LogEpoch = 9, 3
	p := wantAction(t, v, actPromote, "")
	if p.epoch != 1 { // the peers' Epoch fields are 0 here
		t.Fatalf("epoch %d", p.epoch)
	}
	v.peers[0].LastIndex = 9 // as advanced, of higher priority
	wantAction(t, v, actStay, "")
	v.peers[0].LastIndex, v.peers[1].LastIndex = 5, 12 // c is ahead
	wantAction(t, v, actStay, "")
	v.peers[1].live = false // c is not heard: it does not count
	wantAction(t, v, actPromote, "")
}

// A node without state listens three failover timeouts, since a slow peer
// holding the state must not be taken for dead; once every peer has
// answered, their logs are known and one failover timeout is enough.
func TestRuleColdStartWithEveryPeerHeardListensOneTimeout(t *testing.T) {
	a := livePeer("a", 1, api.RoleStandby, 0)
	a.HasState = false
	v := standbyView(a)
	v.wasSynced, v.self.Priority, v.self.HasState = false, 0, false
	v.uptime = ft
	wantAction(t, v, actPromote, "")
	v.peers[0].live = false
	wantAction(t, v, actStay, "")
	// The same with a log of its own: on a cold start another node's log
	// may be ahead of it, so it listens three timeouts too.
	v.self.HasState, v.self.LastIndex = true, 40
	wantAction(t, v, actStay, "")
	v.uptime = 3 * ft
	wantAction(t, v, actPromote, "")
	// After a failover (it followed an active since its start), one.
	v.uptime, v.wasSynced = ft, true
	wantAction(t, v, actPromote, "")
}

// A node that every peer refuses (its cluster_secret differs from theirs)
// promotes itself neither on a cold start nor in a failover: its peers
// are alive, with a state it cannot know, and may serve without it. The
// node of the highest priority, restarted with a wrong secret and the most
// advanced log, was elected beside the serving active (two actives).
func TestRuleEveryPeerRefusesThisNode(t *testing.T) {
	refused := func(u string, prio int) peerView {
		return peerView{Status: Status{URL: u}, live: true, recent: true, refused: true}
	}
	for _, synced := range []bool{false, true} {
		v := standbyView(refused("a", 1), refused("b", 2))
		v.self.Priority, v.self.LastIndex, v.wasSynced = 0, 40, synced
		wantAction(t, v, actStay, "")
	}
	// One peer that talks to it: the rules as before (here, an election).
	v := standbyView(refused("a", 1), livePeer("b", 2, api.RoleStandby, 0))
	v.self.Priority, v.self.LastIndex, v.wasSynced = 0, 40, false
	wantAction(t, v, actPromote, "")
}

// The other side of it: nodes that agree on the secret do not wait for a
// node of higher priority that refuses them. A fresh cluster whose first
// node had another secret elected nobody (its two standbys waited for it,
// and it waited for them).
func TestRuleARefusingPeerIsNotWaitedFor(t *testing.T) {
	refused := peerView{Status: Status{URL: "a"}, live: true, recent: true, refused: true}
	for _, synced := range []bool{false, true} {
		v := standbyView(refused, livePeer("b", 2, api.RoleStandby, 0))
		v.self.HasState, v.self.LastIndex, v.wasSynced = false, 0, synced
		v.peers[1].HasState = false
		wantAction(t, v, actPromote, "")
	}
}

// Between two nodes with different secrets nobody can tell which is wrong:
// the priorities decide, as without the refusal (the node of higher
// priority is elected, the other waits for it).
func TestRuleTwoNodesThatRefuseEachOther(t *testing.T) {
	refused := func(prio int) peerView {
		return peerView{Status: Status{URL: "a", Priority: prio}, live: true, recent: true, refused: true}
	}
	for _, synced := range []bool{false, true} {
		v := standbyView(refused(1))
		v.self.Priority, v.self.HasState, v.wasSynced = 0, false, synced
		wantAction(t, v, actPromote, "")
		v = standbyView(refused(0))
		v.self.HasState, v.wasSynced = false, synced
		wantAction(t, v, actStay, "")
	}
}

// An active whose cluster_secret is the odd one steps down, following
// nobody, as a standby in its place would not have promoted: every live
// peer refuses it and two or more do, or the one that does (between two
// nodes) is of higher priority. It became the active alone (a cold start
// before its peers were up) and stayed active beside the active they
// elected: two actives without a partition (breaker U, 2026-12-06).
func TestRuleAnActiveThatItsPeersRefuseStepsDown(t *testing.T) {
	refused := func(u string, prio int) peerView {
		return peerView{Status: Status{URL: u, Priority: prio}, live: true, recent: true, refused: true}
	}
	active := func(peers ...peerView) view {
		v := standbyView(peers...)
		v.role, v.self.Role = api.RoleActive, api.RoleActive
		return v
	}
	// Three nodes, this one of the highest priority: both others refuse it.
	v := active(refused("a", 1), refused("b", 2))
	v.self.Priority = 0
	wantAction(t, v, actStepDown, "")
	// One of them dead: the live one, of lower priority, does not outvote
	// it (it waits for this node, of higher priority, as a standby).
	v = active(refused("a", 1), deadPeer("b", 2))
	v.self.Priority = 0
	wantAction(t, v, actStay, "")
	// Two nodes: the refusing one of higher priority is elected.
	v = active(refused("a", 0))
	wantAction(t, v, actStepDown, "")
	// One that agrees with it: the refusing node is the odd one.
	v = active(refused("a", 0), livePeer("b", 2, api.RoleStandby, 0))
	wantAction(t, v, actStay, "")
}

// A standby that two live peers refuse is the odd one out, also while a
// third peer is silent: it does not promote beside them, whatever its
// priority.
func TestRuleTwoRefusingPeersAndASilentOne(t *testing.T) {
	refused := func(u string, prio int) peerView {
		return peerView{Status: Status{URL: u, Priority: prio}, live: true, recent: true, refused: true}
	}
	v := standbyView(refused("a", 1), refused("b", 2), deadPeer("c", 3))
	v.self.Priority = 0
	wantAction(t, v, actStay, "")
}

// restartedView is node s back from a cold start (it has neither followed
// nor been an active since it started) with state token 200, every peer
// heard: the active a (priority 0) holds an older state (100), under the
// same epoch 4 as the end of this node's log (elected alone from an older
// log, it knew no later epoch); c (priority 2) is a standby without
// grants.
func restartedView() view {
	a := livePeer("a", 0, api.RoleActive, 100)
	a.Epoch, a.LogEpoch = 4, 4
	v := standbyView(a, livePeer("c", 2, api.RoleStandby, 0))
	v.wasSynced, v.self.StateToken, v.self.Epoch, v.self.LogEpoch = false, 200, 4, 4
	return v
}

// ruleRestartNewer: a node that comes back with grants the live active
// lacks takes the active role (above every epoch known) rather than
// follow it and install its older state.
func TestRuleRestartNewerPromotesInsteadOfFollowingAStaleActive(t *testing.T) {
	v := restartedView()
	if p := wantAction(t, v, actPromote, ""); p.epoch != 5 {
		t.Fatalf("epoch %d, want 5: above every epoch known", p.epoch)
	}
	v.self.Priority = 2 // whatever its priority
	v.peers[1].Priority = 1
	wantAction(t, v, actPromote, "")
}

// ruleRestartNewer: a restarted node whose state is older than the
// active's, or the same, follows it, as before.
func TestRuleRestartNewerNotWithAnOlderOrEqualState(t *testing.T) {
	v := restartedView()
	v.self.StateToken = 50
	wantAction(t, v, actFollow, "a")
	v.self.StateToken, v.self.Epoch = 100, 9 // equal state: a later epoch does not count
	wantAction(t, v, actFollow, "a")
}

// ruleRestartNewer: a standby that followed an active since it started
// (or was one), was paused while its active died (the failover went on
// without it) and whose stream ended does not follow a live active whose
// state is older either: it takes the role. Not unpaused (its state token
// may count a paused old active's grants on waking, which reached no
// client); not on a state token that another node's word set (a moved
// frame, a handoff's answer: guessed), which lacks the active's latest
// grants; nor once it follows an active (its state is that active's, or
// becomes it).
func TestRuleRestartNewerAlsoForAStandbyBackFromAPause(t *testing.T) {
	v := restartedView()
	v.wasSynced, v.followed = true, true
	wantAction(t, v, actFollow, "a") // not paused
	v.backFromPause = true
	wantAction(t, v, actPromote, "")
	v.peers[0].guessed = true
	wantAction(t, v, actFollow, "a")
	v.peers[0].guessed = false
	v.following = "a"
	wantAction(t, v, actStay, "")
	v = restartedView()
	v.followed, v.following = true, "a"
	wantAction(t, v, actStay, "")
}

// ruleRestartNewer: of two nodes restarted with newer states, only the
// one that keeps its state against the other (the newer, then the later
// epoch, then the higher priority) promotes; the other waits and then
// follows it. A node that refuses this one does not count.
func TestRuleRestartNewerOnlyTheBestRestartedNodePromotes(t *testing.T) {
	v := restartedView()
	v.peers[1].StateToken = 300 // c holds still newer grants
	wantAction(t, v, actStay, "")
	v.peers[1].refused = true
	wantAction(t, v, actPromote, "")
	v.peers[1].refused = false
	v.peers[1].StateToken, v.peers[1].Epoch = 200, 4 // the same state and epoch, of lower priority
	wantAction(t, v, actPromote, "")
	v.self.Priority, v.peers[1].Priority = 2, 1 // of higher priority
	wantAction(t, v, actStay, "")
	v.peers[1].Epoch = 3 // this node's epoch is the later one
	wantAction(t, v, actPromote, "")
	v.peers[1].Epoch = 4
	v.peers[1].live = false // not heard (any more): it does not count
	wantAction(t, v, actPromote, "")
	// Once it is active with its newer state, it is the one followed.
	v.peers[1].live, v.peers[1].Role = true, api.RoleActive
	wantAction(t, v, actFollow, "c")
}

// ruleRestartNewer: until every peer has answered, the node listens for
// three failover timeouts after start (a peer restarted with the same
// grants may be slow), as a cold start's election does; it follows the
// stale active meanwhile neither.
func TestRuleRestartNewerListensUntilEveryPeerIsHeard(t *testing.T) {
	v := restartedView()
	v.peers[1].live, v.uptime = false, 2*ft
	wantAction(t, v, actStay, "")
	v.uptime = 3 * ft
	wantAction(t, v, actPromote, "")
	v.peers[1].live, v.uptime = true, 0
	wantAction(t, v, actPromote, "")
}

// ruleRestartNewer: not when this node began its log's last epoch (it
// was that epoch's active) and the active's log is of a later epoch: the
// active replaced this node (its promotion knew this node's epoch), and
// what this node's log holds beyond it are grants it made as a replaced
// active (a pause), which reached no client.
func TestRuleRestartNewerNotWhenTheActiveReplacedThisNode(t *testing.T) {
	v := restartedView()
	v.self.LogEpochBy = v.self.URL
	v.peers[0].LogEpoch, v.peers[0].Epoch = 5, 5
	wantAction(t, v, actFollow, "a")
	v.self.LogEpoch = 6 // this node's log is of a later epoch
	wantAction(t, v, actPromote, "")
}

// ruleRestartNewer: an active whose term began by a cold start's
// election that heard not every peer (BlindTerm: a standby that lagged,
// restarted first after every node was down, elected alone) did not
// replace this node, although its log's epoch is later: it knew nothing
// of this node's last records, which with sync_standbys were answered
// grants. This node takes the role, its grants are kept.
func TestRuleRestartNewerAgainstAnActiveElectedBlind(t *testing.T) {
	v := restartedView()
	v.self.LogEpochBy = v.self.URL
	v.peers[0].LogEpoch, v.peers[0].Epoch, v.peers[0].LogEpochBy = 5, 5, "a"
	wantAction(t, v, actFollow, "a")
	v.peers[0].BlindTerm = true
	wantAction(t, v, actPromote, "")
	v.self.StateToken = 50 // the blind active granted since: its state is newer
	wantAction(t, v, actFollow, "a")
}

// A cold start's election, and a restarted node's promotion over an
// older active, are blind when a peer was not heard (after three failover
// timeouts of listening), and only then; a failover is never blind.
func TestRulePromotionOnAColdStartIsBlindWithoutEveryPeerHeard(t *testing.T) {
	v := standbyView(deadPeer("a", 0), deadPeer("c", 2))
	v.wasSynced, v.uptime = false, 3*ft
	if a := wantAction(t, v, actPromote, ""); !a.blind {
		t.Fatalf("an election with no peer heard: not blind (%s)", a.why)
	}
	v.peers[0] = livePeer("a", 0, api.RoleStandby, 0)
	v.peers[1] = livePeer("c", 2, api.RoleStandby, 0)
	v.self.Priority = 0
	v.peers[0].Priority = 1
	if a := wantAction(t, v, actPromote, ""); a.blind {
		t.Fatalf("an election with every peer heard: blind (%s)", a.why)
	}
	r := restartedView()
	r.peers[1].live, r.uptime = false, 3*ft
	if a := wantAction(t, r, actPromote, ""); !a.blind {
		t.Fatalf("a restarted node's promotion without every peer heard: not blind (%s)", a.why)
	}
	f := standbyView(deadPeer("a", 0))
	f.self.Priority = 0
	if a := wantAction(t, f, actPromote, ""); a.blind {
		t.Fatalf("a failover: blind (%s)", a.why)
	}
}

// ruleRestartNewer: a node whose log ends in another node's epoch was a
// standby there, and its records beyond the active's are that epoch's
// active's, which it acknowledged: the active's later epoch is no sign
// that it replaced this node. A standby that lagged in the same epoch,
// elected alone on a cold start, is at a later epoch by its own election
// (TestColdStartLaggingStandbyElectedAloneYieldsToAcknowledgedGrants).
func TestRuleRestartNewerAStandbysLogAgainstALaterEpoch(t *testing.T) {
	v := restartedView()
	v.self.LogEpochBy = "z" // the epoch's active, down
	v.peers[0].LogEpoch, v.peers[0].Epoch, v.peers[0].LogEpochBy = 5, 5, "a"
	wantAction(t, v, actPromote, "")
	// A live restarted node with a newer state that the active replaced
	// follows the active: it is not waited for.
	v.peers[1].StateToken, v.peers[1].LogEpoch, v.peers[1].LogEpochBy = 300, 4, "c"
	wantAction(t, v, actPromote, "")
	// One that the active did not replace promotes: this one waits.
	v.peers[1].LogEpochBy = "z"
	wantAction(t, v, actStay, "")
}

// ruleLogFailing: an active whose log cannot write (a full disk) refuses
// every change for as long as that lasts; it hands its role to a synced
// standby whose log writes, at most once a failover timeout. It stayed
// the active, and the cluster refused every change while two standbys
// could serve.
func TestRuleActiveWhoseLogFailsHandsOff(t *testing.T) {
	v := standbyView(livePeer("a", 0, api.RoleStandby, 10), livePeer("c", 2, api.RoleStandby, 10))
	v.role, v.self.Role, v.sinceLogHandoff = api.RoleActive, api.RoleActive, 10*ft
	v.followers = []string{"a", "c"}
	wantAction(t, v, actStay, "") // the log writes
	v.logFailing = true
	wantAction(t, v, actHandOff, "a")
	v.peers[0].LogFailing = true
	wantAction(t, v, actHandOff, "c") // a's log fails too
	v.sinceLogHandoff = ft / 2
	wantAction(t, v, actStay, "") // handed off less than a failover timeout ago
	v.sinceLogHandoff, v.followers = 10*ft, []string{"a"}
	wantAction(t, v, actStay, "") // no synced standby whose log writes
}

// A standby whose log cannot write neither asks for the active role nor
// takes it in a handoff: it would refuse every change (and hand the role
// back a failover timeout later).
func TestRuleStandbyWhoseLogFailsTakesNoRole(t *testing.T) {
	v := standbyView(livePeer("b", 2, api.RoleActive, 10))
	v.following, v.synced, v.logFailing = "b", true, true
	wantAction(t, v, actStay, "")
	v.req = &request{kind: reqPromote, peer: "b"}
	wantAction(t, v, actRefuse, "")
	v.logFailing = false
	wantAction(t, v, actPromote, "")
	v.req = nil
	wantAction(t, v, actAskHandoff, "b")
}

// logDown: a standby whose log refused a write a moment ago (restarted on
// a full disk, it resumed from the active's log and the first record it
// wrote failed) is not yet logFailing, which takes a failover timeout.
// Its log is down all the same: it neither asks for the role, nor takes
// it in a handoff, nor promotes itself at a failover beside a live node
// whose log writes (the active handing off to it answers as a standby).
// It asked, took the role by failover from the handing-off active, and
// the cluster refused every change until its disk was freed
// (TestMemRestartOnAFullDiskTakesNoRole).
func TestRuleStandbyWhoseLogIsDownTakesNoRole(t *testing.T) {
	v := standbyView(livePeer("b", 2, api.RoleActive, 10))
	v.following, v.synced, v.logDown = "b", true, true
	wantAction(t, v, actStay, "")
	v.req = &request{kind: reqPromote, peer: "b"}
	wantAction(t, v, actRefuse, "")
	v.logDown = false
	wantAction(t, v, actPromote, "")

	// b hands off (it answers as a standby) and this node's stream broke
	// on its own log: no active, and b live.
	w := standbyView(livePeer("b", 2, api.RoleStandby, 10))
	w.logDown = true
	wantAction(t, w, actStay, "")
	w.peers[0].LogFailing = true
	wantAction(t, w, actPromote, "") // b's log fails too: by priority
}

// ruleFailoverLogWrites: with the active gone, a standby whose log cannot
// write (a full disk) gives way to a live standby whose log writes, of any
// priority; it promoted by priority, then refused every change. Alone, or
// beside nodes whose logs fail too, it still promotes (the service runs
// while one node lives).
func TestRuleFailoverPrefersAStandbyWhoseLogWrites(t *testing.T) {
	v := standbyView(deadPeer("a", 0), livePeer("c", 2, api.RoleStandby, 10))
	v.logFailing, v.self.LogFailing = true, true
	wantAction(t, v, actStay, "") // c's log writes: c promotes
	v.peers[1].LogFailing = true
	wantAction(t, v, actPromote, "") // c's log fails too: by priority
	v.peers[1].live, v.peers[1].recent, v.peers[1].LogFailing = false, false, false
	wantAction(t, v, actPromote, "") // alone

	// As c: the live node of higher priority (this one, b) fails to write.
	w := standbyView(deadPeer("a", 0), livePeer("b", 0, api.RoleStandby, 10))
	w.self.Priority = 2
	wantAction(t, w, actStay, "") // b promotes
	w.peers[1].LogFailing = true
	wantAction(t, w, actPromote, "")
	w.logFailing, w.self.LogFailing = true, true
	wantAction(t, w, actStay, "") // both fail: b promotes, by priority
}

// ruleFailover beside ruleColdStart: the active of highest priority was
// killed and started again a failover timeout later (before its peers
// counted it dead) on an older copy of its data_dir (a restored backup, a
// volume rolled back: TestDiskHistoryChaos CHAOS_SEED=2 CHAOS_FAULTS=8,
// old-copy). It is on a cold start, and its cold-start election waits for
// the live node with the more advanced log; the standbys, which had
// followed it, are in a failover, where each waited for the live node of
// higher priority to promote itself: nobody promoted, and the cluster had
// no active for as long as the three lived (15 s in that run, every node a
// standby). A node on a cold start (not Settled) whose log is behind a
// live node's does not promote: it is not waited for.
func TestRuleFailoverNotHeldByAColdStartNodeBehindIt(t *testing.T) {
	a := livePeer("a", 0, api.RoleStandby, 0)
	a.LastIndex, a.LogEpoch = 1347, 7 // restarted on an old copy: behind
	c := livePeer("c", 2, api.RoleStandby, 0)
	c.LastIndex, c.LogEpoch, c.Settled = 1400, 7, true
	v := standbyView(a, c)
	v.self.LastIndex, v.self.LogEpoch, v.self.Settled = 1400, 7, true
	wantAction(t, v, actPromote, "")
	// Behind c only: this node fetches c's tail, then promotes.
	v.self.LastIndex = 1380
	wantAction(t, v, actFetch, "c")
	v.self.LastIndex = 1400
	// c, of lower priority, waits for this node as before.
	cv := standbyView(livePeer("a", 0, api.RoleStandby, 0), livePeer("s", 1, api.RoleStandby, 0))
	cv.self.URL, cv.self.Priority, cv.self.LastIndex, cv.self.LogEpoch, cv.self.Settled = "c", 2, 1400, 7, true
	cv.peers[0].LastIndex, cv.peers[0].LogEpoch = 1347, 7
	cv.peers[1].LastIndex, cv.peers[1].LogEpoch, cv.peers[1].Settled = 1400, 7, true
	wantAction(t, cv, actStay, "")
	// The restarted node waits for the more advanced logs (ruleColdStart).
	av := standbyView(livePeer("s", 1, api.RoleStandby, 0), livePeer("c", 2, api.RoleStandby, 0))
	av.self.URL, av.self.Priority, av.self.LastIndex, av.self.LogEpoch, av.wasSynced = "a", 0, 1347, 7, false
	av.peers[0].LastIndex, av.peers[0].LogEpoch, av.peers[0].Settled = 1400, 7, true
	av.peers[1].LastIndex, av.peers[1].LogEpoch, av.peers[1].Settled = 1400, 7, true
	wantAction(t, av, actStay, "")
	// Restarted with a log as advanced as every live node's, it is
	// elected (its priority), and the standbys wait for it, as before.
	v.peers[0].LastIndex = 1400
	wantAction(t, v, actStay, "")
	av.self.LastIndex = 1400
	wantAction(t, av, actPromote, "")
	// Behind a live node other than this one (c), it is not waited for
	// either: this node fetches c's tail and promotes.
	v.peers[0].LastIndex, v.self.LastIndex, v.peers[1].LastIndex = 1347, 1340, 1400
	wantAction(t, v, actFetch, "c")
	// A Settled node of higher priority (it followed or was an active
	// since it started: its failover waits for nobody behind it) is
	// waited for, behind or not: it fetches the tail itself.
	v.peers[0].Settled = true
	wantAction(t, v, actStay, "")
}

// A peer whose log is down now (its status says LogDown: no room left on
// its disk, or a write refused a moment ago) takes no role beside a node
// whose log writes (TestRuleStandbyWhoseLogIsDownTakesNoRole), so the
// others pass over it as over one whose log failed for a failover
// timeout: a failover does not wait for it (before, the cluster had no
// active while its disk stayed full), and a handoff does not go to it.
func TestRulePeerWhoseLogIsDownIsPassedOver(t *testing.T) {
	w := standbyView(deadPeer("a", 0), livePeer("b", 0, api.RoleStandby, 10))
	w.self.Priority = 2
	wantAction(t, w, actStay, "") // b promotes
	w.peers[1].LogDown = true
	wantAction(t, w, actPromote, "")
	w.logDown = true
	wantAction(t, w, actStay, "") // both down: b promotes, by priority

	v := standbyView(livePeer("a", 0, api.RoleStandby, 10), livePeer("c", 2, api.RoleStandby, 10))
	v.role, v.self.Role, v.closing = api.RoleActive, api.RoleActive, true
	v.req = &request{kind: reqHandoff}
	v.followers = []string{"a", "c"}
	wantAction(t, v, actHandOff, "a")
	v.peers[0].LogDown = true
	wantAction(t, v, actHandOff, "c")
}

// ruleReplaced: node a, the active of epoch 1, was paused; b was promoted
// (epoch 2), granted (c acknowledged it) and died; a runs again. c's log
// holds b's term and the newer state: a steps down following nobody
// (before, it served again and c followed it, and the answered grant was
// gone), c does not follow a, and at the failover c promotes while a,
// of higher priority, waits for it. When a's state is the newer one (it
// granted after the split, cut off), a keeps the role, as two actives
// would decide.
func TestRuleReplacedActiveStepsDownToTheNodeThatHoldsTheLaterTerm(t *testing.T) {
	// As a, active, after every peer was polled.
	v := standbyView(deadPeer("b", 1), livePeer("c", 2, api.RoleStandby, 20))
	v.self.URL, v.self.Priority = "a", 0
	v.role, v.self.Role = api.RoleActive, api.RoleActive
	v.self.StateToken, v.self.Epoch, v.self.LogEpoch, v.self.LogEpochBy = 10, 1, 1, "a"
	v.peers[0].Epoch, v.peers[0].LogEpoch, v.peers[0].LogEpochBy = 2, 2, "b"
	v.peers[0].live, v.peers[0].recent = false, false
	v.peers[1].Epoch, v.peers[1].LogEpoch, v.peers[1].LogEpochBy = 2, 2, "b"
	wantAction(t, v, actStepDown, "")
	// As a standby then: c promotes, a waits.
	v.role, v.self.Role = api.RoleStandby, api.RoleStandby
	wantAction(t, v, actStay, "")
	// c's disk has no room: c would not promote (its log is down), so a
	// does not wait for it (it fetches c's later records first, promotion
	// never with less), nor steps down for it: the cluster keeps an
	// active.
	v.peers[1].LogDown = true
	wantAction(t, v, actFetch, "c")
	v.role, v.self.Role = api.RoleActive, api.RoleActive
	wantAction(t, v, actStay, "")
	v.peers[1].LogDown = false
	// a granted after it was cut off: its state is the newer one.
	v.self.StateToken = 30
	wantAction(t, v, actStay, "")

	// As c: its active b is dead, a is a live active of an earlier term
	// with an older state.
	w := standbyView(livePeer("a", 0, api.RoleActive, 10), deadPeer("b", 1))
	w.self.URL, w.self.Priority = "c", 2
	w.self.StateToken, w.self.Epoch, w.self.LogEpoch, w.self.LogEpochBy = 20, 2, 2, "b"
	w.peers[0].Epoch, w.peers[0].LogEpoch, w.peers[0].LogEpochBy, w.peers[0].Settled = 1, 1, "a", true
	w.peers[1].Epoch = 2
	wantAction(t, w, actStay, "") // does not follow a
	w.peers[0].Role = api.RoleStandby
	wantAction(t, w, actPromote, "") // a stepped down: c promotes, not waiting for a
	w.peers[0].StateToken = 30
	wantAction(t, w, actStay, "") // a's state is newer: a promotes, by priority
}
