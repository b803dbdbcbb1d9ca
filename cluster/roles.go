package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// poll asks p for its status every heartbeat until the node stops.
func (n *Node) poll(p *peer) {
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	refused, differ, syncDiffer := false, false, false
	// A peer whose polls fail for failover_timeout counts as dead: that is
	// said once, with the last failure (a peer that answers something
	// else than a baton status, such as a TLS port polled over plain
	// HTTP, is a wrong URL in peers, not an outage), and so is its return.
	lastOK, told := time.Now(), false
	for {
		sent := time.Now()
		st, err := n.fetchStatus(p.url)
		now := time.Now()
		n.notePoll(p, err, now, &lastOK, &told)
		n.mu.Lock()
		p.polled = sent
		if err == nil && p.contact.After(sent) {
			// Something newer about p came meanwhile (a handoff from it):
			// this answer may describe it as it was before.
			err = errStalePoll
		}
		if err == nil {
			st.Priority = p.priority
			p.status, p.contact, p.heard, p.down, p.refused, p.guessed = st, now, true, false, false, false
			p.hadGrants = p.hadGrants || (st.HasState && st.StateToken > 0)
			if st.LastToken > 0 {
				n.eng.ObserveToken(st.LastToken)
			}
		}
		n.mu.Unlock()
		var se *statusError
		if errors.As(err, &se) && se.code == http.StatusUnauthorized {
			// It is alive but will not talk to this node: it counts as live
			// with an unknown state, so this node neither takes it for
			// dead (and promotes itself beside it) nor follows it.
			n.mu.Lock()
			p.status, p.contact, p.heard, p.down, p.refused, p.guessed = Status{URL: p.url}, now, true, false, true, false
			n.mu.Unlock()
			if !refused {
				n.log.Error("peer refused this node: cluster_secret differs", "peer", p.url)
			}
			refused = true
		} else if err == nil {
			refused = false
			if d := peersDiffer(st, Status{Peers: n.cfg.Peers}); d != differ {
				differ = d
				if d {
					n.log.Warn("peer lists the peers in another order or other peers: every node must have the same peers list, whose order is the priorities (until they do, as in a rolling change of the list, the two may both take the active role, and ties between them are broken by URL)",
						"peer", p.url, "its_peers", st.Peers, "our_peers", n.cfg.Peers)
				} else {
					n.log.Info("peer lists the same peers as this node again", "peer", p.url)
				}
			}
			if d := st.SyncStandbys != n.cfg.SyncStandbys; d != syncDiffer {
				syncDiffer = d
				if d {
					n.log.Warn("peer has another sync_standbys: every node must have the same; each answers by its own while it is the active, so after a failover or handoff to a node with fewer the cluster promises less",
						"peer", p.url, "its_sync_standbys", st.SyncStandbys, "our_sync_standbys", n.cfg.SyncStandbys)
				} else {
					n.log.Info("peer has the same sync_standbys as this node again", "peer", p.url, "sync_standbys", st.SyncStandbys)
				}
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// errStalePoll: a poll's answer older than what the node already knows of
// the peer; it is dropped.
var errStalePoll = errors.New("the answer is older than what is known of the peer")

type statusError struct {
	code int
	// body is the start of the answer's body (fetchStatus only): what
	// answered in baton's place, such as Go's "Client sent an HTTP
	// request to an HTTPS server."
	body string
}

func (e *statusError) Error() string {
	if e.body != "" {
		return "peer answered " + strconv.Itoa(e.code) + ": " + e.body
	}
	return "peer answered " + strconv.Itoa(e.code)
}

// errNotStatus: a peer answered 200 with something that is not a baton
// status (another service at that address).
var errNotStatus = errors.New("the answer is not a baton node's status")

// notePoll logs a peer's poll outcome when it changes how the peer
// counts: its polls failing for failover_timeout since the last that
// succeeded (lastOK), once (told), and its first success after that. A
// refusal (401) is logged by poll itself; a stale answer and the node's
// own shutdown say nothing about the peer.
func (n *Node) notePoll(p *peer, err error, now time.Time, lastOK *time.Time, told *bool) {
	var se *statusError
	switch {
	case err == nil:
		if *told {
			n.log.Info("peer answers again", "peer", p.url, "failed_for", now.Sub(*lastOK).Round(time.Millisecond))
		}
		*lastOK, *told = now, false
	case errors.Is(err, errStalePoll) || n.ctx.Err() != nil:
	case errors.As(err, &se) && se.code == http.StatusUnauthorized:
		*lastOK, *told = now, false
	case !*told && now.Sub(*lastOK) >= n.cfg.FailoverTimeout:
		*told = true
		var rh tls.RecordHeaderError
		if se != nil || errors.Is(err, errNotStatus) || errors.As(err, &rh) {
			n.log.Warn("peer answers, but not as a baton node: is its URL in peers right? (the scheme a node serves: https:// with tls_cert; the port of its listen); it counts as dead",
				"peer", p.url, "err", err)
		} else {
			n.log.Warn("peer does not answer: it counts as dead", "peer", p.url, "for", now.Sub(*lastOK).Round(time.Millisecond), "err", err)
		}
	}
}

func (n *Node) fetchStatus(base string) (Status, error) {
	req, err := n.newRequest(n.ctx, http.MethodGet, base, "/status", nil)
	if err != nil {
		return Status{}, err
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return Status{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		se := &statusError{code: resp.StatusCode}
		if resp.StatusCode != http.StatusUnauthorized {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 120))
			se.body = strings.TrimSpace(strings.ToValidUTF8(string(b), "?"))
		}
		return Status{}, se
	}
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return Status{}, fmt.Errorf("%w: %w", errNotStatus, err)
	}
	return st, nil
}

// request is a role change asked of the role loop by another goroutine
// (an HTTP handler, Close); the loop answers it on reply.
type request struct {
	kind reqKind
	// peer: reqPromote, the active handing off to this node; reqHandoff,
	// the standby asking for the role ("" = the best synced standby, when
	// the node closes).
	peer string
	// ctx bounds a handoff's call to the successor.
	ctx   context.Context
	reply chan reply
	// undelivered (reqPromote): the grants the node handing off could not
	// take back (engine.Engine.Undelivered), for engine.Engine.Promote.
	undelivered []engine.Grant
	// leaving (reqPromote): the node handing off closes (Close) and will
	// not follow this node, so it is no standby to wait for.
	leaving bool
}

type reqKind int

const (
	reqPromote reqKind = iota + 1 // the active hands off to this node: take over
	reqHandoff                    // hand this active's role to a standby
)

// reply is the role loop's answer to a request: this node's Status after
// it, and for a handoff the successor's URL; err when refused or failed.
type reply struct {
	to  string
	st  Status
	err error
}

// handoffDone is the end of a handoff's call to its successor, which runs
// off the loop and reports back to it.
type handoffDone struct {
	to      string
	st      Status // the successor's Status once promoted
	through uint64 // the successor applied the stream through this index
	err     error
	start   time.Time
	reply   chan reply
}

// ask posts r to the role loop and waits for its answer, or for ctx (the
// caller's) or the node to end.
func (n *Node) ask(ctx context.Context, kind reqKind, peer string, undelivered ...engine.Grant) reply {
	return n.send(ctx, request{kind: kind, peer: peer, ctx: ctx, reply: make(chan reply, 1), undelivered: undelivered})
}

// send passes r to the role loop and waits for its reply (ask).
func (n *Node) send(ctx context.Context, r request) reply {
	if n.ctx == nil {
		return reply{err: errors.New("the node is not started")}
	}
	select {
	case n.requests <- r:
	case <-ctx.Done():
		return reply{err: ctx.Err()}
	case <-n.ctx.Done():
		return reply{err: errors.New("the node is stopping")}
	}
	select {
	case rep := <-r.reply:
		return rep
	case <-n.ctx.Done():
		return reply{err: errors.New("the node is stopping")}
	}
}

// loop is the only goroutine that changes this node's role: one decision
// per heartbeat, one per request, and the end of each handoff, until the
// node stops.
func (n *Node) loop() {
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	n.ticked.Store(n.since())
	for {
		select {
		case <-n.ctx.Done():
			// The answers still being written as the node closes (a
			// native connection's queue, after the handoff) are judged
			// by what the node knew here: without ticks, Resuming would
			// turn true a failover timeout later and hold back grants
			// made before the handoff, which the successor holds (a
			// verifier's report: 2,048 answered "E unavailable", their
			// locks held for nobody on the successor).
			n.endedResuming.Store(n.Resuming())
			n.ended.Store(true)
			return
		case r := <-n.requests:
			n.step(time.Now(), &r)
		case d := <-n.handed:
			n.finishHandoff(d)
		case <-n.kick:
			n.step(time.Now(), nil)
		case <-t.C:
			tick := n.since()
			gap := time.Duration(tick - n.ticked.Load())
			if gap > n.cfg.FailoverTimeout {
				// Set before ticked: Serving never sees a fresh tick without it.
				n.resumed.Store(tick)
				n.mu.Lock()
				n.pausedUnfollowed = true
				n.mu.Unlock()
				n.log.Warn("this node did not run for longer than failover_timeout: not serving until every peer has been polled again", "gap", gap.Round(time.Millisecond))
			}
			if gap > 2*n.cfg.Heartbeat {
				// A stall: no peer's silence (Node.silence).
				n.mu.Lock()
				n.stallFrom = n.base.Add(time.Duration(n.ticked.Load()) + n.cfg.Heartbeat)
				n.stallTo = n.base.Add(time.Duration(tick))
				n.mu.Unlock()
			}
			n.ticked.Store(tick)
			n.step(time.Now(), nil)
		}
	}
}

// step gathers the view, decides (decide) and applies the action: one
// role decision, on the loop's goroutine. r is the request answered, nil
// on a heartbeat.
func (n *Node) step(now time.Time, r *request) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.logWrites() {
		n.logBad = time.Time{}
	} else if n.logBad.IsZero() {
		n.logBad = now
	}
	v := n.gather(now, r)
	a := decide(v)
	n.apply(now, v, a)
	if n.role != api.RoleActive {
		n.forgetSplitLocked()
	}
	if r == nil && !v.stale && n.resumed.Load() != 0 {
		// Serving again once this decision is applied (a step-down
		// included).
		n.resumed.Store(0)
		if p := n.peerByURL(n.following); p != nil && n.live(p, now) && p.status.Role == api.RoleActive {
			// The active it follows answered since the pause, as the
			// active: no failover went on without this node.
			n.pausedUnfollowed = false
		}
		n.log.Info("every peer polled again after the pause", "role", n.role)
	}
}

// markSplitLocked keeps, while this node is active beside another live
// active (a split brain; peers as the decision about to be taken sees
// them), the state token it compares from when it first saw one
// (n.splitToken; fresh is its state token now), and forgets it once it
// sees none or is no longer active. Its Status reports that token and its
// decisions compare it, so that two actives that both go on granting
// compare the same two values, and one of them steps down (keepsState):
// each comparing its own state token, fresh, with the other's from its
// last answer, older by that poll's latency, both found their own state
// newer for as long as both granted faster than their polls came back
// (TestHistoryChaos CHAOS_SEED=2940: two actives for 4.8 s after they saw
// each other, under load).
//
// The token is taken anew when an active appears that it has not seen
// since it froze (n.splitWith, pruned to the actives it sees): that is
// another split brain, to be settled by the state this node holds now. It
// runs before the decision (gather), so that the decision that first sees
// the new active compares the state token taken then. A successor that a
// handoff promoted still sees its predecessor as active until its next
// poll of it, and froze its state token then, before any grant of its
// own; a paused node that came back as active a moment later was compared
// with that token, not with the grants the successor had answered since,
// and the successor stepped down with them
// (TestSplitTokenTakenAnewForAnotherActive,
// TestGrantLostInAStepDownIsNotAnswered). n.mu is held.
func (n *Node) markSplitLocked(peers []peerView, fresh uint64) {
	if n.role == api.RoleActive {
		seen := n.splitWith[:0:0]
		unseen := false
		for _, p := range peers {
			if p.live && p.Role == api.RoleActive {
				seen = append(seen, p.URL)
				unseen = unseen || !slices.Contains(n.splitWith, p.URL)
			}
		}
		if len(seen) > 0 {
			if !n.split || unseen {
				n.split, n.splitToken = true, fresh
			}
			n.splitWith = seen
			return
		}
	}
	n.forgetSplitLocked()
}

// forgetSplitLocked ends this node's split-brain bookkeeping: it is not
// active, or sees no other active. n.mu is held.
func (n *Node) forgetSplitLocked() {
	n.split, n.splitToken, n.splitWith = false, 0, nil
}

// gather is what this node knows, as a value for decide. n.mu is held.
func (n *Node) gather(now time.Time, r *request) view {
	var peers []peerView
	for _, p := range n.peers {
		st := p.status
		st.URL, st.Priority = p.url, p.priority
		peers = append(peers, peerView{Status: st, live: n.live(p, now), recent: n.recent(p, now), fresh: n.fresh(p, now), refused: p.refused, guessed: p.guessed, hadGrants: p.hadGrants})
	}
	// Before the node's own status, which reports the token it sets.
	n.markSplitLocked(peers, n.stateToken.Load())
	followers := n.hub.synced()
	if n.loneID && len(followers) > 0 {
		// A standby synced with this node: its cluster ID is a peer's too.
		n.loneID = false
	}
	v := view{
		self: n.statusLocked(), peers: peers, role: n.role, following: n.following, synced: n.synced,
		uptime: now.Sub(n.started), sinceAsked: now.Sub(n.asked), failoverTimeout: n.cfg.FailoverTimeout,
		moving: n.moving, closing: n.closing, followers: followers, req: r,
		wasSynced: n.everSynced, followed: n.everFollowed, fetching: n.fetching, unfetchable: maps.Clone(n.unfetchable),
		backFromPause:   n.pausedUnfollowed,
		sinceLogHandoff: now.Sub(n.logHandoff),
	}
	v.logFailing = v.self.LogFailing
	v.logDown = v.self.LogDown // (statusLocked asked the disk once)
	if res := n.resumed.Load(); res != 0 {
		v.stale = n.staleSinceLocked(n.base.Add(time.Duration(res)))
	}
	return v
}

// staleSinceLocked reports whether some peer has not been polled since
// resumedAt, when this node found it had not run for longer than the
// failover timeout: no poll sent after it has ended. A poll sent before
// the pause that ends after it (its timeout ran across the pause) does
// not count: a node that took it for a fresh one served as the active
// before it knew a standby had been promoted meanwhile, and confirmed a
// grant that its step-down a moment later lost
// (TestNativeGrantLostInAStepDownIsNotAnswered, 1 run in about 10).
// n.mu is held.
func (n *Node) staleSinceLocked(resumedAt time.Time) bool {
	for _, p := range n.peers {
		if !p.polled.After(resumedAt) {
			return true
		}
	}
	return false
}

// apply carries out a decision. n.mu is held.
func (n *Node) apply(now time.Time, v view, a action) {
	var rep reply
	switch a.kind {
	case actStay:
	case actRefuse:
		rep.err = errors.New(a.why)
	case actFollow:
		n.log.Log(n.ctx, n.followLevelLocked(a.to), "following: "+a.why, "active", a.to)
		n.followLocked(a.to)
	case actStepDown:
		if other := v.peer(a.to); other != nil {
			n.log.Warn("stepping down: "+a.why, "other", a.to,
				"other_state_token", other.StateToken, "state_token", v.self.StateToken, "other_epoch", other.Epoch, "epoch", v.self.Epoch,
				"other_priority", other.Priority, "priority", n.self)
		} else {
			n.log.Warn("stepping down: "+a.why, "state_token", v.self.StateToken, "epoch", v.self.Epoch)
		}
		n.stepDownLocked(a.to)
	case actAskHandoff:
		n.asked = now
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.askHandoff(a.to)
		}()
	case actPromote:
		how := engine.Failover
		if v.req != nil {
			how = engine.Handoff
			if p := n.peerByURL(v.req.peer); p != nil {
				// The sender has handed its role over: what a poll of it
				// sent before now may still say "active", with the state
				// token this node now holds too; it must not be taken for
				// a second active (see poll).
				p.status.Role, p.status.Active, p.contact, p.guessed = api.RoleStandby, n.cfg.Self, now, true
			}
		}
		var undelivered []engine.Grant
		if v.req != nil {
			undelivered = v.req.undelivered
		}
		n.promoteLocked(a.why, how, a.epoch, undelivered...)
		n.blindTerm = a.blind
		leaving := ""
		if v.req != nil && v.req.leaving {
			leaving = v.req.peer
		}
		n.degradeIfFewLocked(now, leaving)
	case actFetch:
		n.fetching = true
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			got, err := n.fetchTail(n.ctx, a.to)
			n.mu.Lock()
			n.fetching = false
			var se *statusError
			if errors.As(err, &se) && se.code == http.StatusConflict {
				if n.unfetchable == nil {
					n.unfetchable = map[string]bool{}
				}
				n.unfetchable[a.to] = true
			}
			if err != nil {
				n.log.Warn("fetching the log's tail before promoting failed", "from", a.to, "records", got, "err", err)
			} else {
				n.log.Info("fetched the log's tail before promoting", "from", a.to, "records", got)
			}
			n.mu.Unlock()
		}()
	case actHandOff:
		r := v.req
		if r == nil {
			// The loop's own decision (ruleLogFailing): nobody waits
			// for its answer.
			n.log.Warn("handing off: "+a.why, "to", a.to, "failing_since", n.logBad)
			n.logHandoff = now
			r = &request{kind: reqHandoff, ctx: n.ctx, reply: make(chan reply, 1)}
		}
		if n.startHandoff(now, a.to, r) {
			return // answered by finishHandoff
		}
		rep.err = errors.New("no synced standby to hand off to")
	}
	if v.req != nil {
		rep.st = n.statusLocked()
		v.req.reply <- rep
	}
}

// promoteLocked makes this node the active with epoch; how tells the engine
// whether the old active is gone or hands off (see engine.Promotion). n.mu
// is held.
func (n *Node) promoteLocked(why string, how engine.Promotion, epoch uint64, undelivered ...engine.Grant) {
	n.stopFollowingLocked()
	// The stream reader applies nothing more (applyFrame checks its
	// context under applyMu): the engine is promoted with exactly its log.
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	n.epoch = epoch
	n.everSynced, n.unfetchable, n.blindTerm = true, nil, false
	n.degraded.Store(false)
	n.hub.newTerm()
	n.snapshotBeforeOwnRecords()
	if err := n.eng.StartEpoch(epoch, n.cfg.Self); err != nil {
		n.log.Error("the epoch's record could not be logged; standbys will resync by snapshot", "epoch", epoch, "err", err)
	}
	first := n.eng.Promote(how, undelivered...)
	if len(undelivered) > 0 {
		n.log.Warn("took back the grants the node handing off could not", "grants", len(undelivered))
	}
	n.hasState = true
	if n.clusterID == "" {
		// The first active of a cluster (or the first of a data_dir an
		// older baton wrote) creates its ID; its standbys adopt it.
		n.setClusterIDLocked(newClusterID(), "the first active of this cluster")
		n.loneID = true // until a standby syncs with it (gather)
	}
	n.setRole(api.RoleActive)
	n.setActive(n.cfg.Self)
	n.log.Info("promoted to active", "why", why, "epoch", n.epoch, "first_token", first, "cluster_id", n.clusterID)
	n.notify("promote", n.cfg.Self, fmt.Sprintf("promoted to active (%s), epoch %d", why, n.epoch))
}

// snapshotBeforeOwnRecords saves a snapshot of the engine at the log's
// last index when the snapshot installed from the last active holds its
// records beyond that index for some shards (the active dumps shard by
// shard, each at its log's last index then, and the stream ended before
// the records up to the last one arrived): the records this node writes
// from now on at those indexes would otherwise be taken, at its next
// restart, as held by that snapshot and skipped. n.applyMu is held: the
// engine changes nothing meanwhile, every shard is dumped at the same
// index. A failure is logged; the promotion goes on.
func (n *Node) snapshotBeforeOwnRecords() {
	last := n.wal.LastIndex()
	if n.installedTo <= last {
		return
	}
	err := n.wal.SaveSnapshot(last, func(w io.Writer) error {
		_, err := n.eng.WriteDump(w, n.wal.LastIndex)
		return err
	})
	if err != nil {
		n.log.Error("the snapshot installed from the last active holds records beyond this log, and a snapshot of this node's state could not replace it: a restart may skip records this node writes up to that index",
			"log_end", last, "installed_to", n.installedTo, "err", err)
		return
	}
	n.installedTo = 0
	n.log.Info("snapshot saved before promotion: the one installed from the last active held records beyond this log", "index", last)
}

// stepDownLocked demotes this active and follows other ("": nobody yet,
// ruleReplaced). n.mu is held.
func (n *Node) stepDownLocked(other string) {
	if other == "" {
		n.notify("step_down", n.cfg.Self, "stepped down to standby: replaced by a later term while it did not run or was cut off")
	} else {
		n.notify("step_down", n.cfg.Self, "stepped down to standby: "+other+" is active")
	}
	n.eng.Demote()
	// What this node made on its own is discarded: the answers still
	// waiting for the log or for acknowledgements are not given as made.
	// After Demote, which takes every shard's lock: a grant made before
	// it took the grant's shard has the generation before this one.
	n.eng.Diverged()
	n.releaseAcks() // they are answered ErrSteppedDown (SyncLog.acked)
	n.hub.closeAll()
	n.setRole(api.RoleStandby)
	if other == "" {
		// Replaced (ruleReplaced): no active to follow yet; the node
		// that holds the newer state promotes, and this one follows it.
		n.setActive("")
		return
	}
	n.followLocked(other)
}

// streamWorksLocked notes that the stream from active works: a batch of
// its records was written to this node's log, or a heartbeat came with
// nothing left to write. Breaks before it are logged as ended. n.mu is
// held.
func (n *Node) streamWorksLocked(active string) {
	if n.streamBreaks == 0 {
		return
	}
	n.log.Info("replication stream works again", "active", active,
		"broken_since", n.streamBrokeSince, "breaks", n.streamBreaks)
	n.streamBreaks, n.streamBrokeSince, n.streamBrokeFrom = 0, time.Time{}, ""
}

// followLevelLocked is the level of the lines that say this node follows
// to: debug when to is the active whose stream keeps breaking (it is
// followed again a few hundred ms after each break, logged once as the
// breaks are), info otherwise. n.mu is held.
func (n *Node) followLevelLocked(to string) slog.Level {
	if n.streamBreaks > 0 && to == n.streamBrokeFrom {
		return slog.LevelDebug
	}
	return slog.LevelInfo
}

// stopFollowingLocked ends the stream reader, if any. n.mu is held.
func (n *Node) stopFollowingLocked() {
	if n.stopSync != nil {
		n.stopSync()
		n.stopSync = nil
	}
	n.following = ""
	n.synced = false
	n.replicaAt, n.replicaFrom = time.Time{}, ""
}

// followLocked starts reading other's replication stream. n.mu is held.
// A standby that follows again the active whose stream made its replica
// (the stream broke: a cut, this node's full disk) keeps the replica,
// whose lag grows until the new stream brings it current (ReplicaLag).
func (n *Node) followLocked(other string) {
	at, from := n.replicaAt, n.replicaFrom
	n.stopFollowingLocked()
	if n.role == api.RoleStandby && from == other {
		n.replicaAt, n.replicaFrom = at, from
	}
	n.following, n.everFollowed = other, true
	n.pausedUnfollowed = false
	n.setActive(other)
	ctx, cancel := context.WithCancel(n.ctx)
	n.stopSync = cancel
	lastToken := n.eng.LastToken()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		err := n.follow(ctx, other, lastToken)
		n.mu.Lock()
		kick := false
		if n.following == other && n.stopSync != nil && ctx.Err() == nil {
			// The stream broke: the next step decides anew.
			var mv *movedError
			if errors.As(err, &mv) {
				n.log.Info("the active handed its role on", "active", other, "to", mv.to, "epoch", mv.epoch)
			} else {
				// A stream that keeps breaking (this node's disk full) is
				// reopened every few hundred ms: logged when it starts
				// and when it works again (streamWorksLocked).
				if n.streamBreaks == 0 {
					n.streamBrokeSince, n.streamBrokeFrom = time.Now(), other
					n.log.Warn("replication stream ended", "active", other, "err", err,
						"note", "until it works again, further breaks are logged at debug")
				} else {
					n.log.Debug("replication stream ended again", "active", other, "err", err, "breaks", n.streamBreaks+1)
				}
				n.streamBreaks++
			}
			var own ownLogError
			if p := n.peerByURL(other); p != nil && !errors.As(err, &own) {
				// Not to be followed or redirected to until it answers a
				// poll again. (Not when this node's own log refused the
				// records: the active is as live as before, and counting
				// it dead would let this node, whose log cannot serve a
				// change, take its role by failover while it hands off.)
				p.down = true
			}
			if mv != nil {
				// The successor is the active from the old one's word, until
				// a poll of it says otherwise (a poll sent before now is
				// dropped as stale); the loop decides at once rather than at
				// its next heartbeat.
				if p := n.peerByURL(mv.to); p != nil {
					p.status.Role, p.status.Active, p.status.Epoch = api.RoleActive, mv.to, max(p.status.Epoch, mv.epoch)
					p.guessed = true
					p.contact, p.heard, p.down = time.Now(), true, false
					kick = true
				}
			}
			n.stopSync()
			n.stopSync = nil
			n.following = ""
			n.synced = false
			if !errors.As(err, &own) {
				// (The active is as live as before when this node's own
				// log ended the stream: it stays the one this node's
				// GET /cluster names and redirects to.)
				n.setActive("")
			}
		}
		n.mu.Unlock()
		if kick {
			select {
			case n.kick <- struct{}{}:
			default:
			}
		}
	}()
	n.log.Log(n.ctx, n.followLevelLocked(other), "following the active", "active", other)
}

// askHandoff asks the active to hand the role to this node (a higher
// priority node that has synced).
func (n *Node) askHandoff(active string) {
	q := url.Values{"to": {n.cfg.Self}}
	req, err := n.newRequest(n.ctx, http.MethodPost, active, "/handoff", q)
	if err != nil {
		return
	}
	cl := &http.Client{Transport: n.client.Transport, Timeout: 3 * n.cfg.FailoverTimeout}
	resp, err := cl.Do(req)
	if err != nil {
		n.log.Warn("handoff request failed", "active", active, "err", err)
		return
	}
	resp.Body.Close()
	n.log.Info("asked the active for a handoff", "active", active, "status", resp.StatusCode)
}

// handoff passes the active role to the best live synced standby, or to
// the node named by to, through the role loop. It returns the successor's
// URL.
//
// The steps (startHandoff, finishHandoff): demote the engine (new calls
// and parked acquires are refused, to be redirected), let the successor
// apply the stream through its last frame, and have it promote itself;
// only then is the successor announced as the active, so the redirects
// land on a node that serves. If the successor refuses, this node takes
// the role back (unless it closes); if its answer is lost, this node
// stays a standby (finishHandoff).
func (n *Node) handoff(ctx context.Context, to string) (string, error) {
	rep := n.ask(ctx, reqHandoff, to)
	return rep.to, rep.err
}

// startHandoff demotes the engine and asks the successor to to take over,
// off the loop; the answer comes back to the loop (finishHandoff). It
// reports false if to has no synced stream from this node. n.mu is held.
func (n *Node) startHandoff(now time.Time, to string, r *request) bool {
	f := n.hub.syncedFollower(to)
	if f == nil {
		return false
	}
	n.moving = true
	n.eng.Demote()
	through := n.wal.LastIndex() // every record of the demoted engine
	if !n.logWrites() {
		// The stream passes on only what this log wrote (see
		// tail.readWritten): the successor gets the changes up to there,
		// and those after it, not written, are this node's alone. Their
		// answers, once the log writes them, must not say they were
		// made: a new generation has them answered as replaced (the
		// client asks the successor again), as after a step-down.
		if w := n.wal.Written(); w < through {
			through = w
			n.eng.Diverged()
		}
	}
	q := url.Values{"from": {n.cfg.Self}, "through": {strconv.FormatUint(through, 10)}}
	if n.closing {
		// This node leaves once the successor has the role: no standby
		// of the successor's (degradeIfFewLocked).
		q.Set("leaving", "true")
	}
	if !n.logWrites() {
		// Grants this node could not take back, its log refusing the
		// releases, which its standbys may hold (see Undelivered): the
		// successor takes them back.
		for _, g := range n.eng.Undelivered() {
			q.Add("undelivered", strconv.FormatUint(g.Token, 10)+" "+g.Key)
		}
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		ctx, cancel := context.WithCancelCause(r.ctx)
		defer cancel(nil)
		stop := n.watchSuccessor(to, cancel)
		st, err := n.callPromote(ctx, to, q)
		stop()
		if c := context.Cause(ctx); errors.Is(c, errSuccessorSilent) {
			err = fmt.Errorf("%w (%w)", c, err)
		}
		select {
		case n.handed <- handoffDone{to: to, st: st, through: through, err: err, start: now, reply: r.reply}:
		case <-n.ctx.Done():
		}
	}()
	return true
}

// errSuccessorSilent ends a handoff's call to its successor once the
// successor is no longer live (silent for the failover timeout: paused,
// cut off or dead after it was chosen), instead of waiting out the call
// (3 failover timeouts): the outcome is unknown still (a paused successor
// may read the call when it runs again), but the cluster's other standbys
// can fail over at once.
var errSuccessorSilent = errors.New("the successor fell silent during the handoff")

// watchSuccessor cancels a handoff's call to the successor at to, with
// errSuccessorSilent, once this node's polls find it no longer live
// (Node.live, the failover rule's test). It checks every heartbeat until
// the returned stop is called.
func (n *Node) watchSuccessor(to string, cancel context.CancelCauseFunc) (stop func()) {
	done := make(chan struct{})
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		tick := time.NewTicker(n.cfg.Heartbeat)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-n.ctx.Done():
				return
			case now := <-tick.C:
				n.mu.Lock()
				p := n.peerByURL(to)
				silent := p != nil && !n.live(p, now)
				n.mu.Unlock()
				if silent {
					cancel(errSuccessorSilent)
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// finishHandoff applies the successor's answer to a handoff, on the loop.
//
// Only a refusal the successor answered (a status other than 200: it did
// not catch up in time, or its loop refused) proves that it did not
// promote itself. Any other failure (the call timed out, the connection
// broke, the answer was unreadable) leaves the outcome unknown: the
// successor may be the active already, so this node does not take the
// role back beside it (two actives, two holders of one lock); it presumes
// the handoff done and follows the successor, and the role rules promote
// a node by failover if the successor turns out not to be the active. A
// node that closes never takes the role back either: it leaves demoted,
// and its standbys, whose streams carry everything it granted, fail over.
func (n *Node) finishHandoff(d handoffDone) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.moving = false
	var se *statusError
	refused := d.err != nil && errors.As(d.err, &se)
	if refused && !n.closing {
		// Take the role back: nothing was lost, waiters resume here (the
		// calls parked in ActiveURL are woken to be sent back to this node).
		n.eng.Promote(engine.Handoff)
		n.setActive(n.cfg.Self)
		n.broadcast()
		d.reply <- reply{st: n.statusLocked(), err: fmt.Errorf("handoff to %s: %w", d.to, d.err)}
		return
	}
	if d.err == nil {
		n.hub.moveAll(d.to, d.st.Epoch, d.through)
		if n.cfg.SyncStandbys > 0 {
			n.wakeAcked() // the successor's word counts as its acknowledgement
		}
	} else {
		n.hub.closeAll()
	}
	n.setRole(api.RoleStandby)
	if refused {
		// Closing: leave demoted, with no active known.
		n.setActive("")
		n.log.Warn("handoff refused; leaving demoted, the standbys fail over", "to", d.to, "err", d.err)
		d.reply <- reply{st: n.statusLocked(), err: fmt.Errorf("handoff to %s: %w", d.to, d.err)}
		return
	}
	if p := n.peerByURL(d.to); p != nil {
		if d.err != nil {
			// Presumed the active until a poll says otherwise; the failover
			// rule waits a failover timeout after it was last "heard".
			d.st = p.status
			d.st.Role, d.st.Active = api.RoleActive, d.to
		}
		d.st.Priority = p.priority
		p.status, p.contact, p.heard, p.down, p.guessed = d.st, time.Now(), true, false, true
	}
	if n.closing {
		if errors.Is(d.err, errSuccessorSilent) {
			// Redirected there, calls would wait on a node that does not
			// answer: they are refused as with no active known, and
			// retried on whichever node the standbys promote.
			n.setActive("")
		} else {
			n.setActive(d.to)
		}
	} else {
		n.followLocked(d.to)
	}
	if d.err != nil {
		n.log.Warn("handoff outcome unknown: the successor may have promoted itself, so this node stays a standby and presumes it the active", "to", d.to, "err", d.err)
		d.reply <- reply{to: d.to, st: n.statusLocked(), err: fmt.Errorf("handoff to %s: %w: %w", d.to, errHandoffUnknown, d.err)}
		return
	}
	gap := time.Since(d.start)
	n.log.Info("handoff done", "to", d.to, "no_active_ms", float64(gap.Microseconds())/1000)
	n.notify("handoff", d.to, fmt.Sprintf("%s handed the active role to %s (%.1f ms without an active)", n.cfg.Self, d.to, float64(gap.Microseconds())/1000))
	d.reply <- reply{to: d.to, st: n.statusLocked()}
}

// errHandoffUnknown: the successor's answer to a handoff was lost (a
// timeout, a broken connection), so whether it promoted itself is not
// known; the old active stays a standby (see finishHandoff).
var errHandoffUnknown = errors.New("the successor's answer was lost; it may be the active")

// callPromote asks the successor to take over; it answers with its new
// Status once it is the active.
func (n *Node) callPromote(ctx context.Context, to string, q url.Values) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*n.cfg.FailoverTimeout)
	defer cancel()
	var st Status
	req, err := n.newRequest(ctx, http.MethodPost, to, "/promote", q)
	if err != nil {
		return st, err
	}
	resp, err := n.stream.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, &statusError{code: resp.StatusCode}
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}
