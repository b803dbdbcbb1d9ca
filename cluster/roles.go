package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// poll asks p for its status every heartbeat until the node stops.
func (n *Node) poll(p *peer) {
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	refused := false
	for {
		st, err := n.fetchStatus(p.url)
		now := time.Now()
		n.mu.Lock()
		p.polled = now
		if err == nil {
			st.Priority = p.priority
			p.status, p.contact, p.heard, p.down = st, now, true, false
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
			p.status, p.contact, p.heard, p.down = Status{URL: p.url}, now, true, false
			n.mu.Unlock()
			if !refused {
				n.log.Error("peer refused this node: cluster_secret differs", "peer", p.url)
			}
			refused = true
		} else if err == nil {
			refused = false
		}
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
	}
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "peer answered " + strconv.Itoa(e.code) }

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
		return Status{}, &statusError{resp.StatusCode}
	}
	var st Status
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}

// loop takes one role decision per heartbeat until the node stops.
func (n *Node) loop() {
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	n.ticked.Store(n.since())
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		tick := n.since()
		if gap := time.Duration(tick - n.ticked.Load()); gap > n.cfg.FailoverTimeout {
			// Set before ticked: Serving never sees a fresh tick without it.
			n.resumed.Store(tick)
			n.log.Warn("this node did not run for longer than failover_timeout: not serving until every peer has been polled again", "gap", gap.Round(time.Millisecond))
		}
		n.ticked.Store(tick)
		n.step(now)
	}
}

// step is one role decision (see the package comment).
func (n *Node) step(now time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if r := n.resumed.Load(); r != 0 {
		// After a pause, peer state is stale: decide nothing until every
		// peer has been polled (answered or failed) since.
		resumedAt := n.base.Add(time.Duration(r))
		for _, p := range n.peers {
			if !p.polled.After(resumedAt) {
				return
			}
		}
		// Serving again once this decision is taken (a step-down included):
		// deferred calls run before the deferred unlock.
		defer n.resumed.Store(0)
		n.log.Info("every peer polled again after the pause", "role", n.role)
	}
	if n.moving || n.closing {
		return
	}
	// The best active among the live peers, by the split-brain rule.
	var best *peer
	for _, p := range n.peers {
		if !n.live(p, now) || p.status.Role != api.RoleActive {
			continue
		}
		if best == nil || keepsState(p.status, best.status) {
			best = p
		}
	}
	switch n.role {
	case api.RoleActive:
		if self := n.statusLocked(); best != nil && !keepsState(self, best.status) {
			n.log.Warn("two actives: stepping down, the other's state is newer (or as new, and its priority higher)", "other", best.url,
				"other_state_token", best.status.StateToken, "state_token", self.StateToken, "other_priority", best.priority, "priority", n.self)
			n.stepDownLocked(best.url)
		}
		return
	}
	// Standby.
	if n.following != "" {
		f := n.peerByURL(n.following)
		if f != nil && n.live(f, now) && f.status.Role == api.RoleActive {
			if best != nil && best != f && !keepsState(f.status, best.status) {
				n.log.Info("a newer active appeared: following it", "active", best.url)
				n.followLocked(best.url)
				return
			}
			if n.synced && n.self < f.priority && now.Sub(n.asked) > n.cfg.FailoverTimeout {
				n.asked = now
				go n.askHandoff(f.url)
			}
			return
		}
		if f != nil && n.live(f, now) && n.synced {
			// Still alive but no longer active: it is handing off or
			// stepping down; the new active shows up in the polls.
			if best == nil {
				return
			}
		}
	}
	if best != nil {
		if n.following != best.url {
			n.followLocked(best.url)
		}
		return
	}
	// No live active. Listen for a whole failover timeout after start before
	// deciding, so as to know who is alive; a node without state listens
	// three times as long, since a slow peer that holds the state must not
	// be taken for a dead one.
	listen := n.cfg.FailoverTimeout
	if !n.hasState {
		listen *= 3
	}
	if now.Sub(n.started) < listen {
		return
	}
	if n.following != "" {
		if f := n.peerByURL(n.following); f != nil && n.live(f, now) {
			return
		}
	}
	for _, p := range n.peers {
		if p.status.Role == api.RoleActive && n.recent(p, now) {
			// The last active was heard from less than a failover timeout
			// ago: it may only be slow. Wait out the silence.
			return
		}
	}
	someoneHasState := n.hasState
	for _, p := range n.peers {
		if n.live(p, now) && p.status.HasState {
			someoneHasState = true
		}
	}
	if someoneHasState && !n.hasState {
		return // never take over with empty state while another node holds it
	}
	for _, p := range n.peers {
		if p.priority < n.self && n.live(p, now) && (p.status.HasState || !someoneHasState) {
			return // a better candidate is alive: it promotes itself
		}
	}
	n.promoteLocked("failover", engine.Failover)
}

// promoteLocked makes this node the active; how tells the engine whether
// the old active is gone or hands off (see engine.Promotion). n.mu is held.
func (n *Node) promoteLocked(why string, how engine.Promotion) {
	n.stopFollowingLocked()
	maxEpoch := n.epoch
	for _, p := range n.peers {
		maxEpoch = max(maxEpoch, p.status.Epoch)
	}
	if why == "failover" && maxEpoch == 0 {
		// No node has been active yet, as far as any live node knows: the
		// first election of a fresh cluster, not the failure of an active.
		why = "election"
	}
	n.epoch = maxEpoch + 1
	first := n.eng.Promote(how)
	n.hasState = true
	n.setRole(api.RoleActive)
	n.setActive(n.cfg.Self)
	n.log.Info("promoted to active", "why", why, "epoch", n.epoch, "first_token", first)
	n.notify("promote", n.cfg.Self, fmt.Sprintf("promoted to active (%s), epoch %d", why, n.epoch))
}

// stepDownLocked demotes this active and follows other. n.mu is held.
func (n *Node) stepDownLocked(other string) {
	n.notify("step_down", n.cfg.Self, "stepped down to standby: "+other+" is active")
	n.eng.Demote()
	n.hub.closeAll()
	n.setRole(api.RoleStandby)
	n.followLocked(other)
}

// stopFollowingLocked ends the stream reader, if any. n.mu is held.
func (n *Node) stopFollowingLocked() {
	if n.stopSync != nil {
		n.stopSync()
		n.stopSync = nil
	}
	n.following = ""
	n.synced = false
	n.replicaAt = time.Time{}
}

// followLocked starts reading other's replication stream. n.mu is held.
func (n *Node) followLocked(other string) {
	n.stopFollowingLocked()
	n.following = other
	n.setActive(other)
	ctx, cancel := context.WithCancel(n.ctx)
	n.stopSync = cancel
	lastToken := n.eng.LastToken()
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		err := n.follow(ctx, other, lastToken)
		n.mu.Lock()
		if n.following == other && n.stopSync != nil && ctx.Err() == nil {
			// The stream broke: the next step decides anew.
			n.log.Warn("replication stream ended", "active", other, "err", err)
			if p := n.peerByURL(other); p != nil {
				// Not to be followed or redirected to until it answers a
				// poll again.
				p.down = true
			}
			n.stopSync()
			n.stopSync = nil
			n.following = ""
			n.synced = false
			n.setActive("")
		}
		n.mu.Unlock()
	}()
	n.log.Info("following the active", "active", other)
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
// the node named by to. It returns the successor's URL.
//
// The steps: demote the engine (new calls and parked acquires are refused,
// to be redirected), let the successor apply the stream through its last
// frame, and have it promote itself; only then is the successor announced
// as the active, so the redirects land on a node that serves. If the
// successor fails, this node takes the role back.
func (n *Node) handoff(ctx context.Context, to string) (string, error) {
	n.mu.Lock()
	if n.role != api.RoleActive || n.moving {
		n.mu.Unlock()
		return "", errors.New("not the active")
	}
	f := n.hub.successor(to, n.cfg.Peers)
	if f == nil {
		n.mu.Unlock()
		return "", errors.New("no synced standby to hand off to")
	}
	n.moving = true
	n.mu.Unlock()
	start := time.Now()

	n.eng.Demote()
	through := f.lastSeq()
	q := url.Values{"from": {n.cfg.Self}, "through": {strconv.FormatUint(through, 10)}}
	st, err := n.callPromote(ctx, f.url, q)

	n.mu.Lock()
	defer n.mu.Unlock()
	n.moving = false
	if err != nil {
		// Take the role back: nothing was lost, waiters resume here (the
		// calls parked in ActiveURL are woken to be sent back to this node).
		n.eng.Promote(engine.Handoff)
		n.setActive(n.cfg.Self)
		n.broadcast()
		return "", fmt.Errorf("handoff to %s: %w", f.url, err)
	}
	n.hub.closeAll()
	n.setRole(api.RoleStandby)
	if p := n.peerByURL(f.url); p != nil {
		st.Priority = p.priority
		p.status, p.contact, p.heard = st, time.Now(), true
	}
	if n.closing {
		n.setActive(f.url)
	} else {
		n.followLocked(f.url)
	}
	gap := time.Since(start)
	n.log.Info("handoff done", "to", f.url, "no_active_ms", float64(gap.Microseconds())/1000)
	n.notify("handoff", f.url, fmt.Sprintf("%s handed the active role to %s (%.1f ms without an active)", n.cfg.Self, f.url, float64(gap.Microseconds())/1000))
	return f.url, nil
}

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
		return st, &statusError{resp.StatusCode}
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st, err
}
