package cluster

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/wal"
)

// DefaultSyncTimeout is how long a change waits for its sync_standbys
// acknowledgements before the active goes on without them (degraded).
const DefaultSyncTimeout = time.Second

// SyncLog is the log the engine of a cluster node writes (engine.Log): a
// change is written to this node's log (wal.Log), and, on the active with
// Config.SyncStandbys = N > 0, Wait returns only once N standbys have
// acknowledged its index (written it to their own logs), or sync_timeout
// passed (the active then goes on without them: degraded, until they are
// back). Build it before the engine with NewSyncLog and pass it to the
// Node in Config.Sync.
type SyncLog struct {
	*wal.Log
	node atomic.Pointer[Node]
}

// NewSyncLog wraps this node's log l.
func NewSyncLog(l *wal.Log) *SyncLog { return &SyncLog{Log: l} }

// Wait waits until the record at index is in this node's log (wal.Log.Wait)
// and acknowledged by the standbys sync_standbys asks for. Errors: the
// log's; a missing acknowledgement is not an error (see SyncLog).
func (l *SyncLog) Wait(index uint64) error {
	if err := l.Log.Wait(index); err != nil {
		return err
	}
	if n := l.node.Load(); n != nil && n.cfg.SyncStandbys > 0 {
		n.waitAcked(index)
	}
	return nil
}

// ackedBy counts the synced standbys that acknowledged index.
func (h *hub) ackedBy(index uint64) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := 0
	for f := range h.fs {
		if f.acked.Load() >= index {
			k++
		}
	}
	return k
}

// waitAcked waits until Config.SyncStandbys standbys acknowledged index,
// at most SyncTimeout; if they do not, the node degrades (see degrade).
// While degraded it does not wait.
func (n *Node) waitAcked(index uint64) {
	if n.degraded.Load() {
		return
	}
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		n.ackMu.Lock()
		ch := n.ackCh
		n.ackMu.Unlock()
		if n.hub.ackedBy(index) >= n.cfg.SyncStandbys || n.degraded.Load() {
			return
		}
		if timer == nil {
			timer = time.NewTimer(n.cfg.SyncTimeout)
		}
		select {
		case <-ch:
		case <-timer.C:
			n.degrade(index)
			return
		case <-n.quit:
			return
		}
	}
}

// degrade marks the active as going on without its sync_standbys: one log
// line, a counter; recovered by an acknowledgement that brings N standbys
// to the log's last index (ack).
func (n *Node) degrade(index uint64) {
	if n.degraded.CompareAndSwap(false, true) {
		n.degradations.Add(1)
		n.log.Warn("sync_standbys: fewer standbys acknowledged within sync_timeout; answering without them until they are back",
			"sync_standbys", n.cfg.SyncStandbys, "acknowledged", n.hub.ackedBy(index), "index", index, "sync_timeout", n.cfg.SyncTimeout)
	}
}

// ack records that the standby at from has index in its log (POST
// /_cluster/ack), and wakes the changes waiting for it.
func (f *follower) ack(index uint64) {
	f.mu.Lock()
	index = min(index, f.sent) // never more than this stream sent it
	f.mu.Unlock()
	for {
		old := f.acked.Load()
		if index <= old || f.acked.CompareAndSwap(old, index) {
			return
		}
	}
}

// serveAck is POST /_cluster/ack?from=&index= on the active: the standby
// from has written every record up to index to its log. At most one is in
// flight per standby, each covering everything up to its index, so a
// standby under load acknowledges a batch per round trip.
func (n *Node) serveAck(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from := q.Get("from")
	index, err := strconv.ParseUint(q.Get("index"), 10, 64)
	if err != nil || !n.isPeer(from) {
		http.Error(w, "from, index: required (a peer's URL, a log index)", http.StatusBadRequest)
		return
	}
	if !n.eng.Active() {
		w.WriteHeader(http.StatusConflict)
		return
	}
	last := n.wal.LastIndex()
	n.hub.mu.Lock()
	for f := range n.hub.fs {
		if f.url == from {
			f.ack(index)
		}
	}
	n.hub.mu.Unlock()
	n.ackMu.Lock()
	close(n.ackCh)
	n.ackCh = make(chan struct{})
	n.ackMu.Unlock()
	if n.degraded.Load() && n.hub.ackedBy(last) >= n.cfg.SyncStandbys {
		if n.degraded.CompareAndSwap(true, false) {
			n.recoveries.Add(1)
			n.log.Info("sync_standbys: recovered, enough standbys acknowledged the current index", "sync_standbys", n.cfg.SyncStandbys, "index", last)
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// acker sends this standby's acknowledgements to the active until ctx
// ends: each time the stream appended records, the highest index once it
// is written (wal.Log.Wait), one request at a time. appended holds the
// last index appended; kick has a value when it rose.
func (n *Node) acker(ctx context.Context, active string, appended *atomic.Uint64, kick <-chan struct{}) {
	var sent uint64
	cl := &http.Client{Transport: n.client.Transport, Timeout: n.cfg.FailoverTimeout}
	for {
		i := appended.Load()
		if i <= sent {
			select {
			case <-ctx.Done():
				return
			case <-kick:
			}
			continue
		}
		if n.wal.Wait(i) == nil && n.sendAck(ctx, cl, active, i) {
			sent = i
			continue
		}
		// Not written, or not delivered: try again a heartbeat later.
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.cfg.Heartbeat):
		}
	}
}

// sendAck posts one acknowledgement; it reports whether the active took it.
func (n *Node) sendAck(ctx context.Context, cl *http.Client, active string, index uint64) bool {
	q := url.Values{"from": {n.cfg.Self}, "index": {strconv.FormatUint(index, 10)}}
	req, err := n.newRequest(ctx, http.MethodPost, active, "/ack", q)
	if err != nil {
		return false
	}
	resp, err := cl.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusNoContent
}

// acked returns the acknowledged index of each standby streaming from this
// node, by URL (the highest of its streams).
func (h *hub) acked() map[string]uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := make(map[string]uint64, len(h.fs))
	for f := range h.fs {
		m[f.url] = max(m[f.url], f.acked.Load())
	}
	return m
}

// ReplicationStats are a node's replication figures, for metrics.
type ReplicationStats struct {
	// LastIndex is the last index of this node's log.
	LastIndex uint64
	// Active: the node is the active; the fields below are about its
	// standbys' streams then.
	Active bool
	// SyncStandbys is Config.SyncStandbys; Degraded reports whether the
	// active goes on without them; Degradations and Recoveries count the
	// changes of that state.
	SyncStandbys             int
	Degraded                 bool
	Degradations, Recoveries uint64
	// Installs and Resumes count this node's syncs with an active as a
	// standby: a snapshot installed, or resumed from its log's position.
	Installs, Resumes uint64
	// Standbys are the standbys streaming from this active.
	Standbys []StandbyStats
}

// StandbyStats is one standby's replication as its active sees it.
type StandbyStats struct {
	URL string
	// Acked is the last index it acknowledged; LagRecords the active's
	// last index minus it; LagSeconds the age of the oldest record it has
	// not acknowledged (0 while it has everything).
	Acked      uint64
	LagRecords uint64
	LagSeconds float64
}

// ReplicationStats returns the node's replication figures now.
func (n *Node) ReplicationStats() ReplicationStats {
	last, _ := n.tail.position()
	st := ReplicationStats{LastIndex: last, Active: n.eng.Active(), SyncStandbys: n.cfg.SyncStandbys,
		Degraded: n.degraded.Load(), Degradations: n.degradations.Load(), Recoveries: n.recoveries.Load(),
		Installs: n.installs.Load(), Resumes: n.resumes.Load()}
	if !st.Active {
		st.Degraded = false
		return st
	}
	now := time.Now().UnixNano()
	n.hub.mu.Lock()
	defer n.hub.mu.Unlock()
	for f := range n.hub.fs {
		s := StandbyStats{URL: f.url, Acked: f.acked.Load()}
		if s.Acked < last {
			s.LagRecords = last - s.Acked
			if at, ok := n.tail.appendedAt(s.Acked + 1); ok {
				s.LagSeconds = float64(now-at) / 1e9
			}
		}
		st.Standbys = append(st.Standbys, s)
	}
	return st
}
