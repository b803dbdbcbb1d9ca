package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"
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
	l.acked(index)
	return nil
}

// WaitGathered is Wait over wal.Log.WaitGathered (engine.GatheredWaiter):
// it waits for the standbys' acknowledgements as Wait does (the method
// wal.Log would lend SyncLog otherwise skips them).
func (l *SyncLog) WaitGathered(index uint64) error {
	if err := l.Log.WaitGathered(index); err != nil {
		return err
	}
	l.acked(index)
	return nil
}

// acked waits, on the active with sync_standbys, for the standbys'
// acknowledgements of index (waitAcked).
func (l *SyncLog) acked(index uint64) {
	if n := l.node.Load(); n != nil && n.cfg.SyncStandbys > 0 {
		n.waitAcked(index)
	}
}

// ackedBy counts the standbys (by URL) that acknowledged index.
func (h *hub) ackedBy(index uint64) int {
	k := 0
	for _, a := range h.acked() {
		if a >= index {
			k++
		}
	}
	return k
}

// ackWait is a change waiting in waitAcked for the acknowledgements of
// its index.
type ackWait struct {
	index uint64
	since time.Time
	ch    chan struct{} // cap 1; a value: acknowledged, or the node degraded
}

// waitAcked waits until Config.SyncStandbys standbys acknowledged index,
// at most SyncTimeout; if they do not, the node degrades (see degrade).
// While degraded it does not wait. An acknowledgement wakes only the
// changes it covers (wakeAcked), and one timer watches them all
// (watchAcks).
func (n *Node) waitAcked(index uint64) {
	if n.degraded.Load() || n.hub.ackedTo.Load() >= index {
		return
	}
	w, _ := n.ackPool.Get().(*ackWait)
	if w == nil {
		w = &ackWait{ch: make(chan struct{}, 1)}
	}
	w.index = index
	n.ackMu.Lock()
	if n.degraded.Load() || n.hub.ackedTo.Load() >= index || n.ackQuit {
		n.ackMu.Unlock()
		n.ackPool.Put(w)
		return
	}
	w.since = time.Now()
	// In index order; changes come mostly in order, so from the end.
	i := len(n.ackWaits)
	for i > 0 && n.ackWaits[i-1].index > index {
		i--
	}
	n.ackWaits = slices.Insert(n.ackWaits, i, w)
	if !n.watching {
		n.watching = true
		n.watch.Reset(n.cfg.SyncTimeout)
	}
	n.ackMu.Unlock()
	select {
	case <-w.ch:
		n.ackPool.Put(w)
	case <-n.quit:
		// Left in ackWaits (the node closes): not reused.
	}
}

// wakeAcked wakes the changes whose index is acknowledged by
// Config.SyncStandbys standbys (hub.ackedTo).
func (n *Node) wakeAcked() {
	n.ackMu.Lock()
	defer n.ackMu.Unlock()
	synced := n.hub.ackedTo.Load()
	k := 0
	for k < len(n.ackWaits) && n.ackWaits[k].index <= synced {
		n.ackWaits[k].ch <- struct{}{}
		k++
	}
	if k > 0 {
		n.ackWaits = slices.Delete(n.ackWaits, 0, k)
	}
}

// watchAcks is the timer of the changes waiting for acknowledgements: it
// fires when the one waiting longest may have waited SyncTimeout; if it
// has, the node degrades and every change waiting goes on; if not, the
// timer is set for when it will have.
func (n *Node) watchAcks() {
	n.ackMu.Lock()
	defer n.ackMu.Unlock()
	n.watching = false
	if len(n.ackWaits) == 0 || n.ackQuit {
		return
	}
	oldest := n.ackWaits[0]
	for _, w := range n.ackWaits[1:] {
		if w.since.Before(oldest.since) {
			oldest = w
		}
	}
	if d := n.cfg.SyncTimeout - time.Since(oldest.since); d > 0 {
		n.watching = true
		n.watch.Reset(d)
		return
	}
	n.degrade(oldest.index)
	for _, w := range n.ackWaits {
		w.ch <- struct{}{}
	}
	n.ackWaits = slices.Delete(n.ackWaits, 0, len(n.ackWaits))
}

// stopAcks ends the waits for acknowledgements (Close): the changes
// waiting go on (n.quit), none waits any more, the timer stops.
func (n *Node) stopAcks() {
	n.ackMu.Lock()
	defer n.ackMu.Unlock()
	n.ackQuit = true
	n.watch.Stop()
	n.watching = false
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
// /_cluster/ack).
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

// ack records that the standby at from has its log up to index, on each
// of its streams, and recomputes ackedTo.
func (h *hub) ack(from string, index uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for f := range h.fs {
		if f.url == from {
			f.ack(index)
		}
	}
	h.resyncLocked()
}

// ackType is the Content-Type of an acknowledgement stream's body.
const ackType = "application/x-baton-acks"

// serveAck is POST /_cluster/ack?from= on the active: the body is the
// standby from's acknowledgements, one after the other for as long as its
// stream lasts, each an index (8 bytes, big-endian) meaning that it has
// written every record up to there to its log. The standby sends the next
// only once the transport took the last, each covering everything up to
// its index, so a standby under load acknowledges a batch per write, and
// no acknowledgement costs a request of its own. The answer (204) comes
// when the body ends; the read ends too when the request's context does
// or this node closes.
func (n *Node) serveAck(w http.ResponseWriter, r *http.Request) {
	from := r.URL.Query().Get("from")
	if !n.isPeer(from) {
		http.Error(w, "from: required, a peer's URL", http.StatusBadRequest)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != ackType {
		http.Error(w, fmt.Sprintf("Content-Type: %q, want %q: run the same baton version on every node", ct, ackType), http.StatusUnsupportedMediaType)
		return
	}
	if !n.eng.Active() {
		w.WriteHeader(http.StatusConflict)
		return
	}
	rc := http.NewResponseController(w)
	stop := make(chan struct{})
	ended := make(chan struct{})
	defer func() {
		close(stop)
		<-ended
	}()
	go func() {
		defer close(ended)
		select {
		case <-stop:
			return
		case <-n.quit:
		case <-r.Context().Done():
		}
		_ = rc.SetReadDeadline(time.Unix(1, 0)) // ends the blocked read
	}()
	br := bufio.NewReaderSize(r.Body, 512)
	var b [8]byte
	for {
		if _, err := io.ReadFull(br, b[:]); err != nil {
			break
		}
		n.acksRead.Add(1)
		index := binary.BigEndian.Uint64(b[:])
		// Each covers the ones before it: of those already read, the
		// last is recorded alone.
		for br.Buffered() >= len(b) {
			_, _ = io.ReadFull(br, b[:])
			n.acksRead.Add(1)
			index = max(index, binary.BigEndian.Uint64(b[:]))
		}
		n.ack(from, index)
	}
	w.WriteHeader(http.StatusNoContent)
}

// ack records that the standby at from has its log up to index, wakes the
// changes waiting for acknowledgements, and ends a degraded state once
// enough standbys have the log's last index.
func (n *Node) ack(from string, index uint64) {
	if !n.eng.Active() {
		return
	}
	n.hub.ack(from, index)
	if n.cfg.SyncStandbys == 0 {
		return
	}
	n.wakeAcked()
	if !n.degraded.Load() {
		return
	}
	// The log's last index (its append mutex) only while degraded.
	if last := n.wal.LastIndex(); n.hub.ackedTo.Load() >= last {
		if n.degraded.CompareAndSwap(true, false) {
			n.recoveries.Add(1)
			n.log.Info("sync_standbys: recovered, enough standbys acknowledged the current index", "sync_standbys", n.cfg.SyncStandbys, "index", last)
		}
	}
}

// acker sends this standby's acknowledgements to the active until ctx
// ends, on one POST /_cluster/ack at a time whose body is an ackBody: the
// request's own writer (the transport's) reads each index as it comes, so
// an acknowledgement costs one goroutine wake and one write, and no
// request of its own. When that request ends (a cut, the active went
// away), it opens another a heartbeat later. appended holds the last
// index appended; kick has a value when it rose.
func (n *Node) acker(ctx context.Context, active string, appended *atomic.Uint64, kick <-chan struct{}) {
	for {
		req, err := n.newRequest(ctx, http.MethodPost, active, "/ack", url.Values{"from": {n.cfg.Self}})
		if err == nil {
			body := &ackBody{ctx: ctx, wal: n.wal, retry: n.cfg.Heartbeat, appended: appended, kick: kick,
				count: &n.acksSent, closed: make(chan struct{})}
			req.Body, req.ContentLength = body, -1
			req.Header.Set("Content-Type", ackType)
			var resp *http.Response
			if resp, err = n.stream.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
				resp.Body.Close()
			}
			body.Close() // an answer before the body's end (409): its writer stops too
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.cfg.Heartbeat):
		}
	}
}

// ackBody is the body of a standby's acknowledgement stream (serveAck):
// each Read returns the last index appended (8 bytes, big-endian) once it
// is higher than the one returned before and written to this node's log
// (wal.Log.Wait), and blocks until then; it ends (io.EOF) with ctx or
// Close. The first Read returns the last index appended, as every new
// stream does (the last of the one before may not have arrived). The
// transport sends what one Read returns before it reads again, so one
// acknowledgement is in flight at a time and the next covers every record
// appended meanwhile.
type ackBody struct {
	ctx      context.Context
	wal      interface{ Wait(uint64) error }
	retry    time.Duration // after a failed wal.Wait
	appended *atomic.Uint64
	kick     <-chan struct{}
	sent     uint64
	count    *atomic.Uint64 // acknowledgements returned; nil: not counted

	once   sync.Once
	closed chan struct{}
}

func (b *ackBody) Read(p []byte) (int, error) {
	if len(p) < 8 {
		return 0, io.ErrShortBuffer
	}
	for {
		select {
		case <-b.ctx.Done():
			return 0, io.EOF
		case <-b.closed:
			return 0, io.EOF
		default:
		}
		i := b.appended.Load()
		if i <= b.sent {
			select {
			case <-b.ctx.Done():
			case <-b.closed:
			case <-b.kick:
			}
			continue
		}
		if err := b.wal.Wait(i); err != nil {
			// Not written (the log failed): try again later.
			select {
			case <-b.ctx.Done():
			case <-b.closed:
			case <-time.After(b.retry):
			}
			continue
		}
		b.sent = i
		if b.count != nil {
			b.count.Add(1)
		}
		binary.BigEndian.PutUint64(p, i)
		return 8, nil
	}
}

// Close ends the body: a Read blocked in it returns io.EOF.
func (b *ackBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
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
	// The batches of replication since the node started. As the active:
	// SentRecords, the records written to its standbys' streams;
	// SentWrites, the writes (flushes) that carried them; AcksRead, the
	// acknowledgements read. As a standby: AppliedRecords, the records
	// applied from the stream; AcksSent, the acknowledgements sent.
	// Records per write or per acknowledgement is the mean batch.
	SentRecords, SentWrites, AcksRead uint64
	AppliedRecords, AcksSent          uint64
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
		Installs: n.installs.Load(), Resumes: n.resumes.Load(),
		SentRecords: n.sentRecords.Load(), SentWrites: n.sentWrites.Load(), AcksRead: n.acksRead.Load(),
		AppliedRecords: n.appliedRecords.Load(), AcksSent: n.acksSent.Load()}
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
