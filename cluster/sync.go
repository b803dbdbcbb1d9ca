package cluster

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/rawio"
	"github.com/baton-io/baton/wal"
)

// DefaultSyncTimeout is how long a change waits for its sync_standbys
// acknowledgements before the active goes on without them (degraded).
const DefaultSyncTimeout = time.Second

// MinSyncTimeout and MaxSyncTimeout bound Config.SyncTimeout (0 stands
// for DefaultSyncTimeout); SyncTimeoutRange says so in an error message.
const (
	MinSyncTimeout   = time.Millisecond
	MaxSyncTimeout   = time.Minute
	SyncTimeoutRange = "between 1ms and 1m"
)

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
	term := l.term()
	if err := l.Log.Wait(index); err != nil {
		return err
	}
	return l.acked(index, term)
}

// WaitGathered is Wait over wal.Log.WaitGathered (engine.GatheredWaiter):
// it waits for the standbys' acknowledgements as Wait does (the method
// wal.Log would lend SyncLog otherwise skips them). Its errors are Wait's.
func (l *SyncLog) WaitGathered(index uint64) error {
	term := l.term()
	if err := l.Log.WaitGathered(index); err != nil {
		return err
	}
	return l.acked(index, term)
}

// ErrSteppedDown: the node stepped down while a change waited for its
// record (Wait): stepping down discards this node's state for the other
// active's, which may not hold the change, and the acknowledgements at
// its index may be another term's. It wraps engine.ErrReplaced, so that
// the engine decides by its own rule for every answer that waited across
// a new generation (see engine.ErrReplaced: grants, renewals, releases,
// timeouts).
var ErrSteppedDown = fmt.Errorf("cluster: this node stepped down while the change waited for its record; the active may not have it (%w)", engine.ErrReplaced)

// term is the engine's generation as a change starts to wait (acked
// compares it): a step-down starts a new one (engine.Diverged).
func (l *SyncLog) term() uint64 {
	if n := l.node.Load(); n != nil {
		return n.eng.Generation()
	}
	return 0
}

// acked waits, on the active with sync_standbys, for the standbys'
// acknowledgements of index (waitAcked). It returns ErrSteppedDown when
// the node stepped down since the wait began (in term, see term): the
// log's and the acknowledgements' indexes are then another term's, which
// may hold other records there (found by a tester: a renewal pending at
// a SIGSTOP of the active was answered 200, released by the
// acknowledgements of the term the node took back by a handoff at the
// same indexes, although the promoted node never had it). A change whose
// node stepped down before its wait for acknowledgements begins does not
// wait for them (they will not come: releaseAcks has passed).
func (l *SyncLog) acked(index, term uint64) error {
	n := l.node.Load()
	if n == nil {
		return nil
	}
	if n.cfg.SyncStandbys > 0 && !n.waitAcked(index, func() bool { return n.eng.Replaced(term) }) {
		// The node closes without the standbys' word: a handoff whose
		// successor did not confirm it (a standby paused or cut off at a
		// Ctrl+C of the active) leaves it demoted, its changes
		// unacknowledged and undegraded; the standby that promotes may
		// not hold them (found by a newcomer: a grant answered 200 at
		// the SIGTERM, lost after the stopped standby was killed and
		// restarted, its key granted to another).
		return ErrSteppedDown
	}
	if n.eng.Replaced(term) {
		return ErrSteppedDown
	}
	return nil
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
// (watchAcks). steppedDown (nil: never) reports whether the node stepped
// down since the change was made: then it does not wait either. It is
// asked with n.ackMu held, so that a step-down (Engine.Diverged, then
// releaseAcks) either releases this wait or is seen by it. It returns
// false when it ended because the node closes (Close: stopAcks, n.quit),
// with index neither acknowledged nor let go by a degradation.
func (n *Node) waitAcked(index uint64, steppedDown func() bool) bool {
	if n.ackSettled(index) {
		return true
	}
	w, _ := n.ackPool.Get().(*ackWait)
	if w == nil {
		w = &ackWait{ch: make(chan struct{}, 1)}
	}
	w.index = index
	n.ackMu.Lock()
	if n.ackSettled(index) || n.ackQuit || (steppedDown != nil && steppedDown()) {
		settled := n.ackSettled(index) || !n.ackQuit
		n.ackMu.Unlock()
		n.ackPool.Put(w)
		return settled
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
		return true
	case <-n.quit:
		// Left in ackWaits (the node closes): not reused. Acknowledged
		// or let go all the same if it raced with that.
		return n.ackSettled(index)
	}
}

// ackSettled reports whether a change at index needs no more waiting for
// acknowledgements: Config.SyncStandbys standbys acknowledged it, or the
// node is degraded (it goes on without them).
func (n *Node) ackSettled(index uint64) bool {
	return n.degraded.Load() || n.hub.ackedTo.Load() >= index
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
	n.degrade("fewer standbys acknowledged within sync_timeout", "acknowledged", n.hub.ackedBy(oldest.index), "index", oldest.index)
	for _, w := range n.ackWaits {
		w.ch <- struct{}{}
	}
	n.ackWaits = slices.Delete(n.ackWaits, 0, len(n.ackWaits))
}

// releaseAcks lets every change waiting for acknowledgements go on,
// without degrading: the node stepped down (their acknowledgements will
// not come, and acked answers them ErrSteppedDown), or has just degraded
// (degradeIfFewLocked).
func (n *Node) releaseAcks() {
	n.ackMu.Lock()
	defer n.ackMu.Unlock()
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
// line (why, and attrs), a counter; recovered by an acknowledgement that
// brings N standbys to the log's last index (ack).
func (n *Node) degrade(why string, attrs ...any) {
	if n.degraded.CompareAndSwap(false, true) {
		n.degradations.Add(1)
		n.log.Warn("sync_standbys: degraded: "+why+"; answering without them until they are back",
			append([]any{"sync_standbys", n.cfg.SyncStandbys, "sync_timeout", n.cfg.SyncTimeout}, attrs...)...)
	}
}

// degradeIfFewLocked degrades a node just promoted when fewer of its peers
// are live than sync_standbys asks for (leaving, the node that handed off
// to it and closes, does not count): their acknowledgements cannot come
// within sync_timeout, so its first changes would each wait it out for
// nothing (a two-node cluster after a failover or a graceful handoff:
// a gap of sync_timeout without a grant). A standby that comes (back)
// ends it as after any degradation (ack). n.mu is held.
func (n *Node) degradeIfFewLocked(now time.Time, leaving string) {
	if n.cfg.SyncStandbys == 0 {
		return
	}
	live := 0
	for _, p := range n.peers {
		if p.url != n.cfg.Self && p.url != leaving && n.live(p, now) {
			live++
		}
	}
	if live < n.cfg.SyncStandbys {
		n.degrade("fewer live peers than sync_standbys at promotion", "live_peers", live, "leaving", leaving)
		// A change made since the engine was promoted, a moment ago, may
		// wait already: it goes on, as those waiting when watchAcks
		// degrades do.
		n.releaseAcks()
	}
}

// ack records that the standby at from has index in its log (POST
// /_cluster/ack). It returns the first index this acknowledgement newly
// covers on this stream (see follower.covered), 0 when none.
func (f *follower) ack(index uint64) (first uint64) {
	f.mu.Lock()
	index = min(index, f.sent) // never more than this stream sent it
	if index > f.covered {
		first, f.covered = f.covered+1, index
	}
	f.mu.Unlock()
	for {
		old := f.acked.Load()
		if index <= old || f.acked.CompareAndSwap(old, index) {
			return first
		}
	}
}

// ack records that the standby at from has its log up to index, on each
// of its streams, and recomputes ackedTo. It returns the oldest index
// this acknowledgement newly covers on any of the standby's streams, 0
// when none.
func (h *hub) ack(from string, index uint64) (first uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for f := range h.fs {
		if f.url == from {
			if i := f.ack(index); i > 0 && (first == 0 || i < first) {
				first = i
			}
		}
	}
	if a, ok := h.moved[from]; ok && index > a {
		h.moved[from] = index
	}
	h.resyncLocked()
	return first
}

// ackUpgrade is the protocol a standby's acknowledgement connection
// switches to (the Upgrade header of POST /_cluster/ack); its version is
// the replication stream's.
const ackUpgrade = "baton-acks/2"

// serveAck is POST /_cluster/ack?from= on the active, with "Connection:
// Upgrade" and "Upgrade: baton-acks/2": it answers 101 Switching Protocols
// and takes the connection over, which then carries the standby from's
// acknowledgements, one after the other for as long as its stream lasts,
// each an index (8 bytes, big-endian) meaning that it has written every
// record up to there to its log. The standby writes each from the
// goroutine that wrote the records to its log, at the end of what one
// read of its stream brought (or, when this node has no sync_standbys,
// at most every ackEvery), each covering everything up to its index: no
// acknowledgement costs a request, a chunk or a goroutine switch of its
// own. The active never writes on it; the connection ends when the
// standby closes it or this node closes. Refused: 400 without a peer in
// from, 426 without the upgrade (another baton version), 409 on a node
// that is not the active.
func (n *Node) serveAck(w http.ResponseWriter, r *http.Request) {
	from := r.URL.Query().Get("from")
	if !n.isPeer(from) {
		http.Error(w, "from: required, a peer's URL", http.StatusBadRequest)
		return
	}
	if up := r.Header.Get("Upgrade"); up != ackUpgrade || !headerHas(r.Header, "Connection", "upgrade") {
		w.Header().Set("Upgrade", ackUpgrade)
		w.Header().Set("Connection", "Upgrade")
		http.Error(w, fmt.Sprintf("Upgrade: %q, want %q: run the same baton version on every node", up, ackUpgrade), http.StatusUpgradeRequired)
		return
	}
	if !n.eng.Active() {
		w.WriteHeader(http.StatusConflict)
		return
	}
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		http.Error(w, "acknowledgements: cannot take the connection over: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Time{}) // the server's, if any, were for a request
	if _, err := brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + ackUpgrade + "\r\n\r\n"); err != nil {
		return
	}
	if brw.Flush() != nil {
		return
	}
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-n.quit:
			conn.Close() // ends the blocked read
		case <-done:
		}
	}()
	br := brw.Reader
	if br.Buffered() == 0 {
		// The acknowledgements are read with raw system calls (rawio):
		// with sync_standbys, the active waits for them, idle, many
		// times a second.
		br.Reset(rawio.Wrap(socket(conn)))
	}
	lag := n.lags[from]
	var b [8]byte
	for {
		if _, err := io.ReadFull(br, b[:]); err != nil {
			return
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
		n.observeLag(lag, n.ack(from, index))
	}
}

// socket returns the connection under c when c is a plain (not TLS)
// connection wrapped by the server's listener (it has NetConn, as
// handlers.BadRequestListener's do): its bytes are the socket's. c
// otherwise.
func socket(c net.Conn) net.Conn {
	if _, ok := c.(*tls.Conn); ok {
		return c
	}
	if u, ok := c.(interface{ NetConn() net.Conn }); ok {
		return u.NetConn()
	}
	return c
}

// headerHas reports whether the comma-separated header key of h lists
// token (case-insensitive), as Connection does.
func headerHas(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for t := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// ack records that the standby at from has its log up to index, wakes the
// changes waiting for acknowledgements, and ends a degraded state once
// enough standbys have the log's last index. It returns the oldest index
// the acknowledgement newly covers (hub.ack), 0 when none. It counts on a demoted
// engine too: the streams a node serves are in its hub only while it is
// the active or hands the role off (the hub is emptied when it steps
// down or the handoff ends), and during a handoff the changes made just
// before the engine was demoted still wait for these acknowledgements.
func (n *Node) ack(from string, index uint64) (first uint64) {
	first = n.hub.ack(from, index)
	if n.cfg.SyncStandbys == 0 {
		return first
	}
	n.wakeAcked()
	if !n.degraded.Load() {
		return first
	}
	// The log's last index (its append mutex) only while degraded.
	if last := n.wal.LastIndex(); n.hub.ackedTo.Load() >= last {
		if n.degraded.CompareAndSwap(true, false) {
			n.recoveries.Add(1)
			n.log.Info("sync_standbys: recovered from degraded: enough standbys acknowledged the current index", "sync_standbys", n.cfg.SyncStandbys, "index", last)
		}
	}
	return first
}

// errAckStalled: an acknowledgement's write took longer than
// ackConn.limit.
var errAckStalled = errors.New("acknowledgement write stalled")

// ackEvery is how often at most a standby acknowledges when its active
// has no sync_standbys (the stream's syncHeader says 0): nothing waits for
// those acknowledgements, which only tell the active's replication lag
// (ReplicationStats), so one per ackEvery instead of one per read of the
// stream; an idle stream's heartbeat brings the last one.
var ackEvery = 10 * time.Millisecond

// ackConn is a standby's acknowledgement connection to its active (see
// serveAck): the goroutine that wrote the records to this node's log
// sends their index on it (send) itself; acker opens it, and opens it
// again after it broke.
type ackConn struct {
	mu    sync.Mutex
	w     io.WriteCloser // nil while none is open
	sent  uint64         // the last index sent on w
	buf   [8]byte
	count *atomic.Uint64 // acknowledgements sent
	// limit bounds one write (the failover timeout): a write the active
	// does not take by then (its connection stalled, while its polls
	// still answer) closes the connection, so that the stream's
	// goroutine, which writes, never stops reading the stream for it.
	limit time.Duration
}

// send acknowledges index, which this node's log has written, if it is
// above the last one sent and a connection is open; a write that fails
// closes the connection (acker opens another).
func (a *ackConn) send(index uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.w == nil || index <= a.sent {
		return
	}
	binary.BigEndian.PutUint64(a.buf[:], index)
	w := a.w
	var stalled *time.Timer
	if a.limit > 0 {
		stalled = time.AfterFunc(a.limit, func() { w.Close() })
	}
	_, err := w.Write(a.buf[:])
	if stalled != nil && !stalled.Stop() && err == nil {
		err = errAckStalled
	}
	if err != nil {
		a.w.Close()
		a.w = nil
		return
	}
	a.sent = index
	a.count.Add(1)
}

// pending reports whether index is above the last index sent.
func (a *ackConn) pending(index uint64) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return index > a.sent
}

func (a *ackConn) open(w io.WriteCloser) {
	a.mu.Lock()
	a.w, a.sent = w, 0
	a.mu.Unlock()
}

// drop forgets w if it is the open connection, and closes it.
func (a *ackConn) drop(w io.WriteCloser) {
	a.mu.Lock()
	if a.w == w {
		a.w = nil
	}
	a.mu.Unlock()
	w.Close()
}

// acker keeps this standby's acknowledgement connection to the active
// open until ctx ends (POST /_cluster/ack, upgraded: see serveAck): once
// it is open, it acknowledges the last index applied (written to this
// node's log first), as the last one sent on a broken connection may not
// have arrived; the records that follow are acknowledged by the stream's
// reader (ackConn.send). When the connection ends (a cut, the active went
// away), it opens another a heartbeat later.
func (n *Node) acker(ctx context.Context, active string, a *ackConn, applied *atomic.Uint64) {
	var refused string // the last refusal logged: one line per new one
	for {
		switch r := n.ackOnce(ctx, active, a, applied); {
		case r == "" || r == refused:
			refused = r
		case strings.HasPrefix(r, "409 "):
			// Not the active (any more): this standby follows the new one.
			n.log.Debug("the peer refused the acknowledgement connection", "active", active, "answer", r)
			refused = r
		default:
			n.log.Warn("the active refused the acknowledgement connection: its sync_standbys never count this standby", "active", active, "answer", r)
			refused = r
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(n.cfg.Heartbeat):
		}
	}
}

// ackOnce opens one acknowledgement connection and returns when it ends:
// "" then, or when it could not be opened (a network error: the stream
// sees it too); otherwise the active's refusal, its status and the start
// of its answer.
func (n *Node) ackOnce(ctx context.Context, active string, a *ackConn, applied *atomic.Uint64) string {
	req, err := n.newRequest(ctx, http.MethodPost, active, "/ack", url.Values{"from": {n.cfg.Self}})
	if err != nil {
		return ""
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", ackUpgrade)
	resp, err := n.stream.Do(req)
	if err != nil {
		return ""
	}
	rw, ok := resp.Body.(io.ReadWriteCloser)
	if resp.StatusCode != http.StatusSwitchingProtocols || !ok {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		return strings.TrimSpace(resp.Status + " " + string(b))
	}
	stop := context.AfterFunc(ctx, func() { rw.Close() })
	defer stop()
	a.open(rw)
	defer a.drop(rw)
	if i := applied.Load(); i > 0 && n.wal.Wait(i) == nil {
		a.send(i)
	}
	// The active writes nothing on it: this read ends with the connection.
	_, _ = io.Copy(io.Discard, rw)
	return ""
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
	// Standbys are the standbys streaming from this active, then those
	// whose streams ended while it stayed the active (Gone), at their
	// last acknowledgement.
	Standbys []StandbyStats
	// Lags are the replication lag histograms of every other peer, in
	// the order of Config.Peers, as this node measured them while it was
	// the active (see StandbyLag).
	Lags []StandbyLag
}

// StandbyStats is one standby's replication as its active sees it.
type StandbyStats struct {
	URL string // the standby's URL, as it names itself
	// Gone: its stream has ended (killed, restarting, a reset
	// connection); the figures are as of its last acknowledgement, the
	// lag still growing.
	Gone bool
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
		AppliedRecords: n.appliedRecords.Load(), AcksSent: n.acksSent.Load(), Lags: n.lagStats()}
	if !st.Active {
		st.Degraded = false
		return st
	}
	now := time.Now().UnixNano()
	n.hub.mu.Lock()
	defer n.hub.mu.Unlock()
	lag := func(s StandbyStats) StandbyStats {
		if s.Acked < last {
			s.LagRecords = last - s.Acked
			if at, ok := n.tail.appendedAt(s.Acked + 1); ok {
				s.LagSeconds = float64(now-at) / 1e9
			}
		}
		return s
	}
	for f := range n.hub.fs {
		st.Standbys = append(st.Standbys, lag(StandbyStats{URL: f.url, Acked: f.acked.Load()}))
	}
	for _, u := range slices.Sorted(maps.Keys(n.hub.gone)) {
		st.Standbys = append(st.Standbys, lag(StandbyStats{URL: u, Gone: true, Acked: n.hub.gone[u]}))
	}
	return st
}
