package cluster

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/api"
)

// view is what a node knows when it decides its role: a value, gathered
// under Node.mu by the role loop (Node.gather), so that decide is a pure
// function of it.
type view struct {
	// self is this node's Status (Role is its role as peers see it: a
	// handing-off active answers as a standby).
	self Status
	// role is this node's role as the loop last set it.
	role string
	// following is the URL whose replication stream this node reads; ""
	// none. synced: that stream's snapshot is applied.
	following string
	synced    bool
	// uptime is the time since Start; sinceAsked the time since this node
	// last asked its active for a handoff (large if never).
	uptime, sinceAsked time.Duration
	// failoverTimeout is Config.FailoverTimeout.
	failoverTimeout time.Duration
	// moving: a handoff of this node's active role is under way; closing:
	// Close was called.
	moving, closing bool
	// stale: the node ran again after a pause longer than the failover
	// timeout and has not yet polled every peer since (see Node.Resuming).
	stale bool
	// peers are the other nodes, in any order.
	peers []peerView
	// followers are the URLs of the standbys whose replication stream this
	// node serves and which have applied its snapshot (synced).
	followers []string
	// req is the request the loop is answering, nil on a heartbeat.
	req *request
	// wasSynced: this node has followed an active (synced) or been one
	// since it started; false on a cold start (see decide).
	wasSynced bool
	// followed: this node has started to read an active's stream since it
	// started (synced or not): its state may no longer be the one its own
	// log replayed.
	followed bool
	// fetching: this node is fetching the log records it lacks from a
	// more advanced peer (actFetch), to promote itself afterwards.
	fetching bool
	// unfetchable are the peers that refused to serve this node's tail
	// (their logs diverged from this one): not waited for.
	unfetchable map[string]bool
	// logFailing (self.LogFailing): this node's log, or its token
	// high-water mark, has refused writes for a failover timeout or more
	// (a full disk), so as the active it refuses every change (every
	// grant, for the mark). sinceLogHandoff is the time
	// since it last handed its role off for that (large if never).
	logFailing      bool
	sinceLogHandoff time.Duration
	// backFromPause: this node did not run for longer than the failover
	// timeout (stopped, frozen) and has neither followed an active nor
	// been one since: a failover may have gone on without it
	// (ruleRestartNewer).
	backFromPause bool
	// logDown: this node's log, or its mark, refuses writes right now
	// (Node.logWrites), however briefly, or its data_dir's file system
	// has less than MinDiskFree left (Node.diskLow). A standby whose log is down
	// neither asks for the role nor takes it in a handoff, and at a
	// failover gives way to a live node whose log writes: it could
	// serve no change as the active (a node restarted on a full disk,
	// whose first write failed a moment ago, is not yet logFailing).
	logDown bool
}

// peerView is one other node as this one sees it.
type peerView struct {
	// Status is its last answer to a poll; Priority is its place in this
	// node's peers list.
	Status
	// live: heard from within the failover timeout, and no call to it
	// failed since. recent: heard from within the failover timeout.
	// fresh: live, and it answered one of this node's last polls
	// (Node.fresh).
	live, recent, fresh bool
	// refused: its last poll was refused (401: its cluster_secret
	// differs); its Status is then unknown but for URL and Priority.
	refused bool
	// hadGrants: a poll of it since this node started said it holds
	// state with grants in it (a StateToken above 0): an empty node does
	// not promote in its place, even once it is silent (ruleEmptyWaits).
	// (A node elected a moment ago, which granted nothing, holds nothing
	// to lose: its silence is a failover like any.)
	hadGrants bool
	// guessed: its Status was last set from another node's word (a
	// moved frame naming it the active, its answer to a handoff), not
	// from a poll of it: its state token may lack its latest grants.
	guessed bool
}

// actionKind is what the role loop does after a decision.
type actionKind int

const (
	actStay       actionKind = iota // nothing changes
	actFollow                       // (standby) follow the active to
	actPromote                      // become the active, with epoch
	actStepDown                     // (active) demote, follow the active to ("": nobody, ruleReplaced)
	actAskHandoff                   // (synced standby) ask the active to for a handoff
	actHandOff                      // (active) hand the active role to the synced standby to
	actRefuse                       // refuse the request (why says why)
	actFetch                        // (standby) fetch the log records it lacks from to, before promoting
)

var actionNames = [...]string{"stay", "follow", "promote", "step down", "ask for a handoff", "hand off", "refuse", "fetch the log's tail"}

func (k actionKind) String() string { return actionNames[k] }

// action is the one thing decide tells the role loop to do.
type action struct {
	kind actionKind
	// to is the node concerned: the active to follow or step down to, the
	// active to ask, the standby to hand off to.
	to string
	// epoch is the promoted node's new epoch (actPromote): 1 + the highest
	// epoch this node has seen. It counts promotions for operators and
	// decides nothing.
	epoch uint64
	// why is a short reason, for logs and refusals.
	why string
	// blind: a promotion on a cold start (an election, or ruleRestartNewer)
	// made without having heard every peer (Status.BlindTerm).
	blind bool
}

// decide is every role rule of the package comment in one pure function:
// from what the node knows (v) to the one action the role loop applies.
// The rules, in the order they are tried:
//
//   - requests: a promotion asked by the active that hands off to this
//     node (ruleHandoffPromote) and a handoff asked of this active
//     (ruleHandoffRequest) are answered first;
//   - nothing is decided while a handoff is under way or the node closes
//     (ruleBusy), nor after a pause until every peer was polled again
//     (rulePaused);
//   - an active steps down to a live active that keeps its state against
//     it (ruleTwoActives, keepsState), and, following nobody, beside a
//     live node whose log holds a later term than the one it began and
//     the newer state (ruleReplaced, replacer: its successor died while it
//     was paused or cut off); that node neither follows it nor waits for
//     it at a failover, and it waits for that node;
//   - a node whose cluster_secret is outvoted (secretOutvoted: its live
//     peers refuse it, none agrees, and two or more refuse it or the one
//     that does is of higher priority) never promotes itself, and steps
//     down, following nobody, if it is the active: elected alone before
//     its peers were up (ruleSecretOutvoted);
//   - an active whose log has failed for a failover timeout hands off to
//     its best synced standby whose log writes, at most once a failover
//     timeout (ruleLogFailing); a node whose log fails neither asks for
//     the role nor takes it in a handoff;
//   - a node on a cold start that has not followed anyone yet and whose
//     state is newer than the best live active's (a higher state token:
//     it holds grants the active lacks) promotes itself instead of
//     following it, if no other live standby keeps its state against it
//     and the active did not replace it (its log epoch is not later than
//     that of this node's log, when this node began that epoch:
//     replacedBy) (ruleRestartNewer); the stale active then steps down
//     to it (ruleTwoActives);
//   - a standby follows the best live active (ruleFollowBest,
//     ruleNewerActive; a synced standby counts its active's state token
//     as at least its own, which that active's stream raised) and, once
//     synced, asks an active of lower priority for a handoff
//     (ruleAskHandoff);
//   - with no live active, a standby promotes itself once it has listened
//     for a failover timeout (three without state), no active was heard
//     within the failover timeout, it does not lack state another live
//     node holds, nor grants another node said it holds since this node
//     started, live or silent (ruleEmptyWaits), and no live node of higher priority may promote (one
//     on a cold start behind a live node's log does not: coldBehind)
//     (ruleFailover); it first fetches the records the most advanced live
//     node holds beyond its log (actFetch: promotion never with less).
//     A node whose log fails, or cannot take changes now (logDown), gives
//     way to a live node whose log writes, whatever their priorities, and
//     that node does not wait for it (its status says LogDown)
//     (ruleFailoverLogWrites);
//     On a cold start (this node has neither followed nor been an active
//     since it started) the node with the most advanced log is elected
//     instead, ties by priority (ruleColdStart).
//   - logs of two cluster IDs (foreign) are never compared: no
//     restart-newer, fetch or cold-start "most advanced log" against a
//     node of another ID (at a cold start a node defers to a Settled node
//     of another ID, which at its failover does not defer to it; between
//     unsettled ones the ID more live nodes hold wins, ties by priority); two actives of different IDs are
//     settled by keepsState as any two (a fresh cluster split at its
//     first start: the newer state keeps, SPEC section 3); a standby of another ID
//     than the live active's follows it and replaces its state with the
//     active's snapshot, adopting its ID once synced (ruleForeignFollow),
//     unless it has synced since it started and holds the newer state
//     (foreignNewer: a fresh cluster split at its first start, its side's
//     active dead since): then it neither follows nor waits for that
//     active, which steps down, following nobody, and waits for it; it
//     promotes (ruleForeignNewer).
func decide(v view) action {
	if v.req != nil {
		return decideRequest(v)
	}
	if v.moving || v.closing {
		return action{kind: actStay, why: "a handoff is under way or the node closes"}
	}
	if v.stale {
		return action{kind: actStay, why: "waiting to poll every peer again after a pause"}
	}
	if v.synced && v.following != "" {
		// A synced standby's state is its active's, replicated: its own
		// state token is a floor of the active's, whatever the active's
		// last answer said (its answer to a handoff's promotion, say,
		// which lacks every grant it made since).
		v.peers = slices.Clone(v.peers)
		for i := range v.peers {
			if v.peers[i].URL == v.following {
				v.peers[i].StateToken = max(v.peers[i].StateToken, v.self.StateToken)
			}
		}
	}
	// The best active among the live peers, by the split-brain rule.
	best := -1
	for i, p := range v.peers {
		if p.live && p.Role == api.RoleActive && !foreignNewer(v.self, p.Status) && (best < 0 || keepsState(p.Status, v.peers[best].Status)) {
			best = i
		}
	}
	if v.role == api.RoleActive {
		if best >= 0 && !keepsState(v.self, v.peers[best].Status) {
			return action{kind: actStepDown, to: v.peers[best].URL, why: "two actives: " + keptBecause(v.peers[best].Status, v.self)}
		}
		if p := v.replacer(); p != nil {
			// ruleReplaced: a promotion went on without this node (it
			// was paused or cut off), and its term's active is gone, but
			// p holds that term's records and the newer state: it must
			// not be overwritten by this node's, nor must this node
			// grant from a state that lacks them. Found by a tester:
			// SIGSTOP of the active, a grant on the promoted node
			// (acknowledged, sync_standbys 1), kill -9 of it, SIGCONT:
			// the old active served again, the standby followed it, and
			// the answered grant was gone (12 of 12).
			// ruleForeignNewer, the same across cluster IDs: a fresh
			// cluster split at its first start (this node, its first
			// active, paused or cut off before any standby synced with
			// it), and the other side's active died: p holds that side's
			// state, which clients were answered from, newer than this
			// node's.
			if foreign(v.self, p.Status) {
				return action{kind: actStepDown, why: "a live node of another cluster ID (" + p.URL + ", " + p.ClusterID + ") that has synced since it started holds the newer state"}
			}
			return action{kind: actStepDown, why: "replaced: " + p.URL + "'s log holds a later term than this node's, and the newer state"}
		}
		if secretOutvoted(v) {
			// ruleSecretOutvoted: elected alone (a cold start before its
			// peers were up), with a cluster_secret they refuse: they
			// elect an active of their own, which this node cannot see.
			// It steps down, following nobody, and answers 503 saying
			// why, as a standby in its place would (two actives without
			// a partition otherwise: breaker U, 2026-12-06).
			return action{kind: actStepDown, why: "its live peers refuse this node (cluster_secret differs)"}
		}
		if v.logFailing && v.sinceLogHandoff > v.failoverTimeout {
			// ruleLogFailing: an active whose log cannot write refuses
			// every change for as long as the failure lasts (SPEC section
			// 1: nothing is answered that the log does not hold), while a
			// synced standby could serve them: it hands the role over,
			// at most once a failover timeout.
			if to := v.successor(""); to != "" {
				return action{kind: actHandOff, to: to, why: "this node's log cannot write (a full disk?): a synced standby takes over"}
			}
		}
		return action{kind: actStay, why: "active"}
	}
	coldStart := !v.wasSynced && !v.followed
	if best >= 0 && (coldStart || (v.backFromPause && v.following == "" && !v.peers[best].guessed)) && !foreign(v.self, v.peers[best].Status) &&
		v.self.StateToken > v.peers[best].StateToken && !replacedBy(v.self, v.peers[best].Status) {
		// ruleRestartNewer: this node came back with grants the live
		// active lacks, from a cold start (it has neither followed nor
		// been an active since it started), or from a pause while its
		// active died (backFromPause: it follows nobody, its stream
		// ended): the failover went on without it, and with sync_standbys its
		// acknowledgements answered grants the promoted node lacks (it
		// promoted alone, its log behind: a full disk; breaker report
		// of 2026-12-05, SIGSTOP of the only other standby, 221
		// answered grants lost). Not on an active's state token that
		// another node's word set (a moved frame, a handoff's answer:
		// guessed), which lacks the grants made since. Not for a
		// standby that was not paused: its state token may count grants
		// a paused old active made on waking (its lease timers), which
		// that active's own state token leaves out (OnEvent) and which
		// reached no client, and the failover counted it. The active was
		// started while this node
		// was down, from an older log. Following it would replace this
		// node's state with the older one and lose answered grants
		// (SPEC section 1). This node takes the active role instead; the
		// two-actives rule then has the stale active step down and resync
		// from it (keepsState: the newer state), and the priorities move
		// the role on by a handoff once synced. Of several such nodes
		// (restarted together, with the same grants), only the one that
		// keeps its state against every other live standby promotes; the
		// others follow it once it is active.
		//
		// Not when this node was the active of its log's last epoch and
		// the active's log is of a later epoch (replacedBy): it was
		// promoted by a node that knew this node's last promotion (it had
		// followed this node, or one that had), so this node is the one
		// that was replaced. A node whose log ends in another node's
		// epoch was a standby there: its records beyond the active's are
		// that epoch's active's, which it acknowledged (with
		// sync_standbys they were answered), never grants of its own as a
		// replaced active; the active's later epoch may be only its own
		// election from an older log of that same epoch (a lagging
		// standby elected alone on a cold start), which must not replace
		// them.
		//
		// Never against an active of another cluster ID (foreign): this
		// node's log is then another cluster's (a data_dir copied from
		// it), whose state tokens and epochs say nothing of this one's.
		// It follows the active instead, which replaces that state with
		// a snapshot of its own (ruleForeignFollow, below).
		//
		// The replayed state token counts every
		// grant of the log, the ones this node made as a replaced active
		// while it did not know it yet (a pause; OnEvent leaves them out
		// of the state token, and they reached no client); they must not
		// make it take the role back from its replacement. (A stale node
		// elected on a cold start knew only its own epoch, so its epoch is
		// at most that of the node that replaced it before.)
		act := v.peers[best]
		if !v.allHeard() && v.uptime < 3*v.failoverTimeout {
			// As a cold start's election listens: a slow peer restarted
			// with the same grants must be heard, or both promote.
			return action{kind: actStay, why: "listening after start: restarted with a newer state than the active's"}
		}
		for _, p := range v.peers {
			if p.live && !p.refused && p.Role != api.RoleActive && !foreign(p.Status, v.self) && keepsState(p.Status, v.self) &&
				!replacedBy(p.Status, act.Status) {
				// (A node the active replaced follows it instead:
				// waited for, it would never promote.)
				return action{kind: actStay, why: "restarted with grants the active lacks, as a live node that keeps its state against this one: it promotes"}
			}
		}
		how := "restarted"
		if !coldStart {
			how = "back from a pause"
		}
		return action{kind: actPromote, epoch: v.maxEpoch() + 1, blind: coldStart && !v.allHeard(), why: fmt.Sprintf("%s with a newer state (state token %d) than the active %s (%d): its grants are kept", how, v.self.StateToken, act.URL, act.StateToken)}
	}
	f := v.peer(v.following)
	if f != nil && f.live && f.Role == api.RoleActive {
		if best >= 0 && v.peers[best].URL != f.URL && !keepsState(f.Status, v.peers[best].Status) {
			return action{kind: actFollow, to: v.peers[best].URL, why: "a newer active appeared"}
		}
		if v.synced && v.self.Priority < f.Priority && v.sinceAsked > v.failoverTimeout && !v.logFailing && !v.logDown &&
			(!peersDiffer(v.self, f.Status) || listedBefore(f.Peers, v.self.URL, f.URL)) {
			// (When the active's peers list differs from this node's, only
			// if that list too puts this node first: else the active
			// refuses, every time.)
			return action{kind: actAskHandoff, to: f.URL, why: "synced, and of higher priority than the active"}
		}
		return action{kind: actStay, why: "following the active"}
	}
	if best < 0 && f != nil && f.live && v.synced {
		// Still alive but no longer active: it is handing off or stepping
		// down; the new active shows up in the polls.
		return action{kind: actStay, why: "the followed node hands off or steps down"}
	}
	if best >= 0 {
		if v.following != v.peers[best].URL && !foreign(v.self, v.peers[best].Status) && replacedStale(v.peers[best].Status, v.self) {
			// ruleReplaced: the active was replaced by a term this node's
			// log holds, and its state is older: it steps down on seeing
			// this node; following it would replace this node's state
			// with the older one.
			return action{kind: actStay, why: "the live active was replaced by a later term, which this node holds, and its state is older: it steps down"}
		}
		if v.following != v.peers[best].URL {
			if foreign(v.self, v.peers[best].Status) {
				// ruleForeignFollow: this node's data_dir holds another
				// cluster's ID and state (copied from it, or a disk of
				// another cluster mounted here). The live active serves
				// this cluster's clients and its state is the one they
				// were answered from: this node follows it, gets its
				// snapshot (never a resume: serveStream) and adopts its
				// ID once synced, replacing the foreign state, with an
				// ERROR log naming both IDs (setClusterIDLocked).
				return action{kind: actFollow, to: v.peers[best].URL, why: fmt.Sprintf("the best live active, of cluster ID %s; this node's data_dir holds cluster ID %s: its state is replaced by the active's", v.peers[best].ClusterID, v.self.ClusterID)}
			}
			return action{kind: actFollow, to: v.peers[best].URL, why: "the best live active"}
		}
		return action{kind: actStay, why: "following the active"}
	}
	// No live active. Listen for a whole failover timeout after start before
	// deciding, so as to know who is alive. A node without state, and any
	// node on a cold start (its own log may be behind another's: the
	// cluster was stopped and nodes come back one by one), listens three
	// times as long unless every peer has answered, since a slow peer that
	// holds more must not be taken for a dead one. A node with state that
	// restarted while the cluster ran (runningPeer) listens one, as a
	// standby does before a failover.
	listen := v.failoverTimeout
	if (!v.self.HasState || !v.wasSynced && !v.runningPeer()) && !v.allHeard() {
		listen *= 3
	}
	if v.uptime < listen {
		return action{kind: actStay, why: "listening after start"}
	}
	if secretOutvoted(v) {
		// ruleSecretOutvoted: this node is the one whose cluster_secret
		// differs: the others may be serving, and it cannot know their
		// state. (Between two nodes nobody can tell which secret is
		// wrong: the priorities decide.)
		return action{kind: actStay, why: "its live peers refuse this node (cluster_secret differs)"}
	}
	// A peer that refuses this node (another cluster_secret) is not waited
	// for while another live peer agrees with this node: that one is the
	// odd one out, and does not promote itself (above).
	agreeing := false
	for _, p := range v.peers {
		agreeing = agreeing || (p.live && !p.refused)
	}
	if f != nil && f.live {
		return action{kind: actStay, why: "the followed node is alive"}
	}
	for _, p := range v.peers {
		if p.Role == api.RoleActive && p.recent && !foreignNewer(v.self, p.Status) {
			// The last active was heard from less than a failover timeout
			// ago: it may only be slow. Wait out the silence.
			return action{kind: actStay, why: "the active was heard within the failover timeout"}
		}
	}
	if v.fetching {
		return action{kind: actStay, why: "fetching the log's tail from a more advanced node"}
	}
	if !v.self.HasState {
		for _, p := range v.peers {
			if (p.hadGrants || p.live && p.HasState) && !(p.refused && agreeing) {
				// ruleEmptyWaits: a node that holds no state never
				// promotes in place of one that does, while it is live,
				// nor once it is silent (paused, cut off, dead) if its
				// state held grants: its empty state would replace
				// every grant that node holds, at once or when it comes
				// back (found by a tester: a fresh node installing a
				// snapshot promoted while the two nodes holding the
				// state were paused for 5 s, and granted 102 keys they
				// held). It waits until that node is back, or until it
				// holds state itself.
				return action{kind: actStay, why: "never promote with empty state in place of a node that holds state (" + p.URL + ")"}
			}
		}
	}
	if !v.wasSynced {
		// A cold start (the cluster started from nothing, or after every
		// node was down): the node with the most advanced log is elected,
		// ties by priority; the others follow it, and a node of higher
		// priority takes the role through a handoff once synced.
		for _, p := range v.peers {
			if !p.live || (p.refused && agreeing) {
				continue
			}
			if foreign(p.Status, v.self) {
				// Logs of two cluster IDs are not compared. A node of
				// another ID that has synced or been active since it
				// started (Settled) holds the running cluster's ID: this
				// node's data_dir is the foreign one. Else the ID more
				// live nodes hold is elected, ties by priority.
				if p.Settled {
					return action{kind: actStay, why: "a live node of another cluster ID has synced or been active since it started: this node's data_dir is the foreign one"}
				}
				hp, hs := v.holders(p.ClusterID), v.holders(v.self.ClusterID)
				if hp > hs || (hp == hs && p.Priority < v.self.Priority) {
					return action{kind: actStay, why: "a live node of another cluster ID, held by more live nodes (or as many, of higher priority), is elected"}
				}
				continue
			}
			if logAhead(p.Status, v.self) || (!logAhead(v.self, p.Status) && p.Priority < v.self.Priority) {
				return action{kind: actStay, why: "a live node with a more advanced log (or as advanced, of higher priority) is elected"}
			}
		}
		why := "election"
		if v.self.LastIndex > 0 {
			why = "election: the most advanced log"
		}
		blind := !v.allHeard()
		if blind {
			why += " (not every peer heard: one that comes back with newer grants takes the role)"
		}
		return action{kind: actPromote, epoch: v.maxEpoch() + 1, why: why, blind: blind}
	}
	someoneHasState := v.self.HasState
	for _, p := range v.peers {
		if p.live && p.HasState {
			someoneHasState = true
		}
	}
	for _, p := range v.peers {
		if p.Priority < v.self.Priority && p.live && !(p.refused && agreeing) && (p.HasState || !someoneHasState) && (!p.logDown() || v.logFailing || v.logDown) &&
			(p.Settled || !foreign(p.Status, v.self)) && !v.coldBehind(p) && (foreign(p.Status, v.self) || !replacedStale(p.Status, v.self)) &&
			!foreignNewer(v.self, p.Status) {
			// (Not a node of another cluster ID that has not synced since
			// it started: its data_dir is another cluster's, and it defers
			// to this one, which synced, in the cold-start rule above. Nor
			// one on a cold start whose log is behind a live node's: its
			// cold-start rule waits for that node, coldBehind.)
			return action{kind: actStay, why: "a live node of higher priority promotes itself"}
		}
	}
	if v.replacer() != nil {
		// ruleReplaced: that node holds the term that replaced this
		// node's, and the newer state: it promotes (it does not wait for
		// this node, above), and this node follows it.
		// (ruleForeignNewer alike, across cluster IDs.)
		return action{kind: actStay, why: "replaced by a later term, or across cluster IDs, which a live node holds with the newer state: it promotes"}
	}
	if v.logFailing || v.logDown {
		// ruleFailoverLogWrites: a node whose log cannot write would
		// refuse every change as the active (and hand the role on a
		// failover timeout later): a live node whose log writes, of any
		// priority, promotes instead (the rule above lets it pass over
		// this one). Alone, or beside nodes whose logs fail too, it
		// promotes: the service runs while one node lives.
		for _, p := range v.peers {
			if p.live && !p.refused && !p.logDown() && (p.HasState || !someoneHasState) {
				return action{kind: actStay, why: "this node's log cannot write: a live node whose log writes promotes itself"}
			}
		}
	}
	// Promotion never with less: first the records the most advanced live
	// node holds beyond this node's log. A node whose log diverged from
	// this one (a split brain with sync_standbys 0) cannot serve them and
	// is not waited for: the split-brain rule settles the two states.
	var most *peerView
	for i, p := range v.peers {
		if p.live && !v.unfetchable[p.URL] && !foreign(p.Status, v.self) && logAhead(p.Status, v.self) && (most == nil || logAhead(p.Status, most.Status)) {
			most = &v.peers[i]
		}
	}
	if most != nil {
		return action{kind: actFetch, to: most.URL, why: "a live node's log is more advanced: fetch its tail before promoting"}
	}
	why := "failover"
	if v.maxEpoch() == 0 {
		// No node has been active yet, as far as any live node knows: the
		// first election of a fresh cluster, not the failure of an active.
		why = "election"
	}
	return action{kind: actPromote, epoch: v.maxEpoch() + 1, why: why}
}

// decideRequest answers a request posted to the role loop.
func decideRequest(v view) action {
	r := v.req
	switch r.kind {
	case reqPromote:
		// The active hands off to this node, which has applied its stream
		// through the last frame (servePromote waited for it).
		if v.role != api.RoleStandby || v.following != r.peer || !v.synced {
			return action{kind: actRefuse, why: "not a synced standby of " + r.peer}
		}
		if v.logFailing || v.logDown {
			return action{kind: actRefuse, why: "this node's log cannot write"}
		}
		return action{kind: actPromote, epoch: v.maxEpoch() + 1, why: "handoff from " + r.peer}
	case reqHandoff:
		if v.role != api.RoleActive || v.moving {
			return action{kind: actRefuse, why: "not the active"}
		}
		if r.peer != "" {
			// Asked by a standby: only to a node of higher priority this
			// one can reach; a node cut off from the active in one
			// direction would otherwise ask again and again, and every
			// failed attempt would bounce the active's waiters.
			p := v.peer(r.peer)
			if p == nil || p.Priority >= v.self.Priority || !p.live {
				return action{kind: actRefuse, why: r.peer + " is not a live node of higher priority"}
			}
		}
		to := v.successor(r.peer)
		if to == "" {
			return action{kind: actRefuse, why: "no synced standby to hand off to"}
		}
		return action{kind: actHandOff, to: to, why: "handoff"}
	}
	return action{kind: actRefuse, why: "unknown request"}
}

// successor picks the synced follower to hand off to: to, if it is one;
// with to empty, the one of highest priority whose log writes, a fresh one
// (it answered this node's last polls) before a live one, and a live one
// before any other: a standby that is paused or cut off may keep its
// stream for minutes (the kernel takes the writes until its buffers
// fill), and the call to it would wait out its timeout while the cluster
// has no active; one stopped less than a failover timeout ago is still
// live. "" = none.
func (v view) successor(to string) string {
	best, bestRank, prio := "", -1, -1
	for _, u := range v.followers {
		if to != "" {
			if u == to {
				return u
			}
			continue
		}
		p := v.peer(u)
		if p == nil || p.logDown() {
			continue
		}
		rank := 0
		if p.live {
			rank = 1
			if p.fresh {
				rank = 2
			}
		}
		if rank > bestRank || (rank == bestRank && p.Priority < prio) {
			best, bestRank, prio = u, rank, p.Priority
		}
	}
	return best
}

// logDown reports whether p's log cannot take changes (its status says
// LogFailing or LogDown): as this node's own view.logDown, it takes no
// role beside a live node whose log writes.
func (p *peerView) logDown() bool { return p.LogFailing || p.LogDown }

func (v view) peer(u string) *peerView {
	if u == "" {
		return nil
	}
	for i := range v.peers {
		if v.peers[i].URL == u {
			return &v.peers[i]
		}
	}
	return nil
}

// holders counts the nodes, this one and its live peers that do not
// refuse it, whose cluster ID is id.
func (v view) holders(id string) int {
	k := 0
	if v.self.ClusterID == id {
		k++
	}
	for _, p := range v.peers {
		if p.live && !p.refused && p.ClusterID == id {
			k++
		}
	}
	return k
}

// coldBehind reports whether peer p is on a cold start (it has neither
// followed nor been an active since it started: not Settled) and its log
// is behind this node's or another live peer's of its cluster ID. Such a
// node does not promote (its cold-start election waits for the more
// advanced log), so a failover does not wait for it, whatever its
// priority: the active of highest priority, killed and started again on
// an older copy of its data_dir before its standbys counted it dead,
// waited for them while they waited for it (TestDiskHistoryChaos
// CHAOS_SEED=2, old-copy: every node a standby until the test gave up).
func (v view) coldBehind(p peerView) bool {
	if p.Settled {
		return false
	}
	if !foreign(v.self, p.Status) && logAhead(v.self, p.Status) {
		return true
	}
	for _, q := range v.peers {
		if q.URL != p.URL && q.live && !q.refused && !foreign(q.Status, p.Status) && logAhead(q.Status, p.Status) {
			return true
		}
	}
	return false
}

// runningPeer reports whether a live peer of this node's cluster (same
// cluster ID, not refusing this node) has synced with an active or been
// one since it started (Settled): the cluster did not stop, only this
// node restarted, and a peer it has not heard for a failover timeout
// went silent while that one was up, as an active before a failover
// (found by a tester: the active killed, its successor killed 50 ms
// after the old active restarted; the restarted node, as advanced as the
// standby that stayed up and of higher priority, listened three failover
// timeouts while that standby deferred to it). On a cold start of the
// whole cluster no live peer is Settled.
func (v view) runningPeer() bool {
	for _, p := range v.peers {
		if p.live && p.Settled && !p.refused && !foreign(p.Status, v.self) {
			return true
		}
	}
	return false
}

// allHeard reports whether every peer is live.
func (v view) allHeard() bool {
	for _, p := range v.peers {
		if !p.live {
			return false
		}
	}
	return true
}

// replacedBy reports whether the active act replaced the node s (see
// ruleRestartNewer): s was the active of its log's last epoch (it began
// it) and act's log is of a later epoch, which act did not begin by a
// cold start's election that heard not every peer (Status.BlindTerm):
// such an active knew nothing of s's last records, which with
// sync_standbys were answered grants (all nodes killed, a standby that
// lagged restarted first and elected alone; breaker report of
// 2026-12-05: the old active followed it and dropped 93 answered
// grants). The epoch's node is read from the log, written under the
// spelling of advertise in force then; s.URL is NodeURL's form, so the
// two compare in that form.
func replacedBy(s, act Status) bool {
	return NodeURL(s.LogEpochBy) == s.URL && s.LogEpoch < act.LogEpoch && !act.BlindTerm
}

// replacedStale reports whether old, the active of its log's last epoch,
// was replaced by a promotion that newer's log holds (replacedBy) and
// newer's state is the one to keep (keepsState, as between two actives):
// old did not run, or was cut off, while the cluster went on without it,
// and newer holds what the term that replaced it made (with
// sync_standbys, answered grants), although that term's active may have
// died since. Old then serves nothing: an active steps down, following
// nobody, and does not promote at a failover while newer is live; newer
// neither follows it nor waits for it (ruleReplaced).
func replacedStale(old, newer Status) bool {
	return replacedBy(old, newer) && !keepsState(old, newer)
}

// replacer returns the live peer that replaced this node (replacedStale:
// its log holds a later term than the one this node began, and the newer
// state) and can take the role (its log is not down), or nil. Beside it
// this node serves nothing and does not promote (ruleReplaced). One whose
// log is down is passed over: it would not promote either
// (ruleFailoverLogWrites), and the two would wait for each other with no
// active; this node keeps or takes the role, and that peer's state wins
// once its disk has room again.
//
// Across cluster IDs, where logs are not compared, it is a peer that
// holds the state to keep against this node (foreignNewer:
// ruleForeignNewer), with the same consequences.
func (v view) replacer() *peerView {
	for i, p := range v.peers {
		if !p.live || p.refused || p.logDown() {
			continue
		}
		if foreign(v.self, p.Status) && foreignNewer(p.Status, v.self) || !foreign(v.self, p.Status) && replacedStale(v.self, p.Status) {
			return &v.peers[i]
		}
	}
	return nil
}

// foreignNewer reports whether a, a node of another cluster ID than b,
// holds the state to keep against b although b may be the active
// (ruleForeignNewer): a has synced or been active since it started
// (Settled: its state is a running cluster's, whose clients were
// answered from it, not a data_dir copied from elsewhere), its state is
// newer (a higher state token: equal ones hold nothing to keep), and its
// log writes (it can take the role). It is how a fresh cluster split at
// its first start ends when one side's active died: as two live actives
// would have (keepsState), the newer state keeps.
func foreignNewer(a, b Status) bool {
	if !foreign(a, b) || !a.Settled || a.LogFailing || a.LogDown {
		return false
	}
	if a.LoneID != b.LoneID {
		return b.LoneID
	}
	return a.StateToken > b.StateToken
}

func (v view) maxEpoch() uint64 {
	e := v.self.Epoch
	for _, p := range v.peers {
		e = max(e, p.Epoch)
	}
	return e
}

// keepsState is the split-brain rule of SPEC section 3, a pure function of
// two active nodes' statuses: it reports whether a keeps its state (and
// the active role) against b, which then steps down, discards what it
// granted on its own and resyncs from a.
//
//   - The newer state wins: the higher StateToken, the newest grant a
//     node's state holds (made there, or replicated from an active it
//     followed).
//   - Equal state tokens (neither has granted anything since they last
//     shared a state): the later promotion, the higher Epoch, keeps its
//     state. It is the node that served last: the renewals and releases
//     it answered (which move no state token) are kept, and a successor
//     that a handoff just promoted is never taken for the stale one.
//   - Equal epochs too: the higher priority, the lower Priority, keeps;
//     but when the two nodes' peers lists differ (a configuration
//     mistake: each ranks itself by its own list, and both would keep),
//     the lower URL keeps, which both see alike.
//
// Two actives of different cluster IDs (foreign) are settled by the same
// rule: they arise from a fresh cluster split at its first start (each
// side created an ID), where the side that granted must keep its grants
// (SPEC section 3) as in any split brain; the one that steps down gets
// the other's snapshot and adopts its ID. But first, of two such actives
// the one whose ID is lone (LoneID: it created it, a fresh data_dir,
// and no standby has synced with it since) keeps nothing against the
// other: it is a node that started empty, alone or cut off from the
// nodes that hold the state, and one grant of its own, its token ahead
// of the clock after a promotion, would otherwise replace all of their
// state (found by a tester: 0 of 50 answered locks left, and 2 million
// in a larger run). (A node started on another
// cluster's data_dir does not become an active beside a live one: no
// rule lets it claim a newer state against a node of another ID.) State
// tokens rise with the clock on every cluster, so the comparison stays
// deterministic and exactly one of the two keeps.
//
// For two different nodes exactly one of keepsState(a, b) and
// keepsState(b, a) is true. Nothing in it depends on when a heartbeat
// arrived: each node compares its own current state token and epoch with
// the other's last answer, and both only grow while a node is active,
// so two actives never both step down, and the one whose state is older
// steps down whichever polled first (a node that stepped down answers
// as a standby at once). An active that sees another one compares and
// reports its state token as it was when it first saw it (Node.split),
// which no answer it sent before exceeds: never both still hold, and
// once both have seen each other they compare the same two values, so
// one steps down even while both go on granting.
func keepsState(a, b Status) bool {
	if foreign(a, b) && a.LoneID != b.LoneID {
		return !a.LoneID
	}
	if a.StateToken != b.StateToken {
		return a.StateToken > b.StateToken
	}
	if a.Epoch != b.Epoch {
		return a.Epoch > b.Epoch
	}
	if peersDiffer(a, b) {
		return a.URL < b.URL
	}
	return a.Priority < b.Priority
}

// listedBefore reports whether a stands before b in peers (a node of
// higher priority by that list); false when a is not in it.
func listedBefore(peers []string, a, b string) bool {
	i, j := slices.Index(peers, a), slices.Index(peers, b)
	return i >= 0 && (j < 0 || i < j)
}

// peersDiffer reports whether a and b are nodes whose peers lists differ
// (in their members or their order), as far as both say: their
// priorities then contradict each other, so that each may rank itself
// above the other.
func peersDiffer(a, b Status) bool {
	return a.Peers != nil && b.Peers != nil && !slices.Equal(a.Peers, b.Peers)
}

// keptBecause names the rule of keepsState by which a keeps its state
// against b, for the log line of b's step-down.
func keptBecause(a, b Status) string {
	switch {
	case a.StateToken != b.StateToken:
		return "the other's state token is higher (its state is newer)"
	case a.Epoch != b.Epoch:
		return "equal state tokens, and the other's epoch is higher (it was promoted later)"
	case peersDiffer(a, b):
		return "equal state tokens and epochs, the peers lists differ, and the other's URL is lower"
	default:
		return "equal state tokens and epochs, and the other's priority is higher"
	}
}

// logAhead reports whether the log position of a is ahead of b's: a later
// epoch in force at its end, or the same epoch and a higher last index
// (Raft's "more up-to-date").
func logAhead(a, b Status) bool {
	if a.LogEpoch != b.LogEpoch {
		return a.LogEpoch > b.LogEpoch
	}
	return a.LastIndex > b.LastIndex
}

// raise lifts v to at least x (it never lowers it).
func raise(v *atomic.Uint64, x uint64) {
	for {
		old := v.Load()
		if x <= old || v.CompareAndSwap(old, x) {
			return
		}
	}
}

// secretOutvoted reports whether this node's cluster_secret is the odd
// one: some live peer refused its last poll and no live peer agrees with
// it, and either two or more live peers refuse it (they outnumber it), or
// the one that does is of higher priority (between two nodes nobody can
// tell which secret is wrong: the priorities decide). Such a node does not
// promote itself (ruleSecretOutvoted), and steps down if it is the active
// (it was elected alone, before its peers were up).
func secretOutvoted(v view) bool {
	refusing, higher := 0, false
	for _, p := range v.peers {
		if !p.live {
			continue
		}
		if !p.refused {
			return false
		}
		refusing++
		higher = higher || p.Priority < v.self.Priority
	}
	return refusing >= 2 || refusing == 1 && higher
}
