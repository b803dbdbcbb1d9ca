package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// Replication is the log: the active streams its log's records, by index,
// to each standby (frames.go), which writes each to its own log at the
// same index (wal.Log.AppendAt) and applies it through the engine's one
// apply path (engine.Engine.ReplayAt). A standby asks with its log's
// position (last index, and the epoch mark in force there); the active
// resumes from there when its log agrees and still holds what follows (in
// the tail, or in its log's segments), and otherwise sends a snapshot
// (a state dump) first, which the standby installs as its own log's
// snapshot (wal.Log.Install). It sends only what its own log has written
// (tail.readWritten; a snapshot once the log holds every change in it): a
// change whose write fails is answered as not made (503), and a standby
// that a failover promotes must not hold it (a ghost grant, held for its
// whole lease by nobody).

// streamBatch is about how many bytes of records the active reads from
// the tail for one write.
const streamBatch = 256 << 10

// hub is the set of standbys' streams this node serves as the active.
type hub struct {
	need int // sync_standbys: the acknowledgements ackedTo counts

	mu sync.Mutex
	fs map[*follower]struct{}
	// moved holds the last acknowledgement of each standby whose stream
	// a handoff ended (moveAll), by URL: one sent before the successor
	// promoted itself may arrive after, and the changes made before the
	// engine was demoted still wait for it (it counted nowhere, and they
	// waited sync_timeout and degraded the node for nothing). It counts
	// as a stream's until this node is promoted again (newTerm) or stops
	// (closeAll).
	moved map[string]uint64
	// ended is set when this node stopped serving streams (closeAll,
	// moveAll: it stepped down or handed off) until it is promoted again
	// (newTerm): a stream that passed serveStream's active check just
	// before is not added (add), so that it neither clears moved nor
	// stays on a node that is no longer the active.
	ended bool
	// gone holds, by URL, the last acknowledgement of each standby whose
	// every stream has ended while this node stays the active (killed,
	// restarting, its connection reset), so that its replication lag is
	// still reported (ReplicationStats: the records past it, their age)
	// instead of vanishing while it is most behind. It counts for
	// nothing else; a new stream from the standby replaces it (add), and
	// a new term starts without it (closeAll, moveAll).
	gone map[string]uint64
	// ackedTo is the highest index that need standbys (by URL: a standby
	// may have two streams for a moment) acknowledged over the streams
	// open now; 0 with need 0. Written under mu, whenever the streams or
	// their acknowledgements change; read without it.
	ackedTo atomic.Uint64
	scratch []uint64
}

func newHub(need int) *hub { return &hub{need: need, fs: map[*follower]struct{}{}} }

// resyncLocked recomputes h.ackedTo. h.mu is held.
func (h *hub) resyncLocked() {
	if h.need == 0 {
		return
	}
	// The highest acknowledgement of each standby, by URL.
	best := h.scratch[:0]
	urls := make([]string, 0, 8)
	count := func(url string, a uint64) {
		if i := slices.Index(urls, url); i >= 0 {
			best[i] = max(best[i], a)
			return
		}
		urls = append(urls, url)
		best = append(best, a)
	}
	for f := range h.fs {
		count(f.url, f.acked.Load())
	}
	for url, a := range h.moved {
		count(url, a)
	}
	h.scratch = best
	if len(best) < h.need {
		h.ackedTo.Store(0)
		return
	}
	slices.Sort(best)
	h.ackedTo.Store(best[len(best)-h.need])
}

// follower is one standby's stream as the active sees it.
type follower struct {
	url  string
	done chan struct{} // closed: end the stream

	// acked is the last index the standby acknowledged (POST /ack, serveAck).
	acked atomic.Uint64

	mu     sync.Mutex
	synced bool   // its log agrees with this one (resumed, or the snapshot sent)
	sent   uint64 // the last index written to the stream
	// covered is the last index the standby is known to hold through
	// this stream: where the stream began (the standby's position, or
	// the snapshot's index), then its acknowledgements. The records past
	// it that an acknowledgement covers are the ones it waited for
	// (Node.ack: the replication lag).
	covered uint64
	closed  bool
	// moved is the frame that ends the stream when this node handed the
	// active role on (hub.moveAll); zero: none.
	moved frame
}

func newFollower(u string) *follower {
	return &follower{url: u, done: make(chan struct{})}
}

// add adds f to the streams served, unless this node stopped serving
// them (ended): then it reports false and the stream is refused.
func (h *hub) add(f *follower) bool {
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return false
	}
	h.fs[f] = struct{}{}
	delete(h.gone, f.url)
	h.resyncLocked()
	h.mu.Unlock()
	return true
}

// newTerm forgets the acknowledgements a handoff left (moved): this node
// was promoted again, and its changes from now on count only those of
// the streams it serves in this term. A moved entry raised through its
// last term's index would otherwise count as a standby's for the first
// changes of the new term (after a snapshot installed below it, before
// any standby streams), answered without a standby and without degrading.
func (h *hub) newTerm() {
	h.mu.Lock()
	h.moved, h.ended = nil, false
	h.resyncLocked()
	h.mu.Unlock()
}

func (h *hub) remove(f *follower) {
	h.mu.Lock()
	if _, ok := h.fs[f]; ok && !h.streamsLocked(f.url, f) {
		if h.gone == nil {
			h.gone = map[string]uint64{}
		}
		f.mu.Lock()
		h.gone[f.url] = max(f.acked.Load(), f.covered)
		f.mu.Unlock()
	}
	delete(h.fs, f)
	h.resyncLocked()
	h.mu.Unlock()
	f.close()
}

// streamsLocked reports whether a stream of the standby at url other
// than but is open. h.mu is held.
func (h *hub) streamsLocked(url string, but *follower) bool {
	for f := range h.fs {
		if f != but && f.url == url {
			return true
		}
	}
	return false
}

// closeAll ends every stream (this node is no longer the active).
func (h *hub) closeAll() {
	h.mu.Lock()
	fs := h.fs
	h.fs = map[*follower]struct{}{}
	h.moved, h.ended = nil, true
	h.gone = nil
	h.resyncLocked()
	h.mu.Unlock()
	for f := range fs {
		f.close()
	}
}

// moveAll ends every stream with a moved frame naming to, which a
// handoff has just made the active with epoch: each standby follows it at
// once instead of learning of it from its next poll (its calls wait for
// an active meanwhile, and with sync_standbys the new active's changes
// wait for a standby). The successor promoted itself with every record
// through index through written to its log: that counts as its
// acknowledgement; the standbys' acknowledgements still count, and those
// that arrive later too (hub.moved).
func (h *hub) moveAll(to string, epoch, through uint64) {
	h.mu.Lock()
	fs := h.fs
	h.fs = map[*follower]struct{}{}
	h.gone = nil
	h.moved, h.ended = map[string]uint64{to: through}, true
	for f := range fs {
		h.moved[f.url] = max(h.moved[f.url], f.acked.Load())
	}
	h.resyncLocked()
	h.mu.Unlock()
	for f := range fs {
		f.mu.Lock()
		f.moved = frame{kind: frameMoved, epoch: epoch, data: []byte(to)}
		f.mu.Unlock()
		f.close()
	}
}

// end writes the frame that ends f's stream, if any (moveAll).
func (f *follower) end(sw *streamWriter) {
	f.mu.Lock()
	m := f.moved
	f.mu.Unlock()
	if m.kind != 0 && sw.frame(&m) == nil {
		_ = sw.flush()
	}
}

// syncedFollower returns the follower at url if its log agrees with this
// one's, else nil. Which follower a handoff goes to is the role rules'
// choice (view.successor, cluster/rules.go); this only finds its stream.
func (h *hub) syncedFollower(url string) *follower {
	h.mu.Lock()
	defer h.mu.Unlock()
	for f := range h.fs {
		if f.url != url {
			continue
		}
		f.mu.Lock()
		ok := f.synced
		f.mu.Unlock()
		if ok {
			return f
		}
	}
	return nil
}

// synced returns the URLs of the followers whose logs agree with this
// one's.
func (h *hub) synced() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var us []string
	for f := range h.fs {
		f.mu.Lock()
		if f.synced {
			us = append(us, f.url)
		}
		f.mu.Unlock()
	}
	return us
}

func (f *follower) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
}

// streamLinger is how long the replication stream waits after a change
// before it writes, to send the changes that follow in the same write. It
// bounds what it adds to a standby's lag; a grant never waits for it
// unless sync_standbys asks it to wait for standbys.
const streamLinger = time.Millisecond

// streamWriter writes frames to a standby's stream.
type streamWriter struct {
	bw  *bufio.Writer
	rc  *http.ResponseController
	buf []byte
}

func (s *streamWriter) frame(f *frame) error {
	s.buf = appendFrame(s.buf[:0], f)
	_, err := s.bw.Write(s.buf)
	return err
}

func (s *streamWriter) flush() error {
	if err := s.bw.Flush(); err != nil {
		return err
	}
	return s.rc.Flush()
}

// serveStream is GET /_cluster/stream on the active: the records of its
// log after the standby's position (resumed), or a snapshot and the
// records after it, then every record as it is appended, with heartbeats
// while idle, until the standby goes away or this node stops being active.
func (n *Node) serveStream(w http.ResponseWriter, r *http.Request) {
	if !n.eng.Active() {
		writeJSON(w, http.StatusConflict, n.status())
		return
	}
	q := r.URL.Query()
	from := q.Get("from")
	if !n.isPeer(from) {
		http.Error(w, "from: not a peer of this cluster", http.StatusBadRequest)
		return
	}
	if lt, err := strconv.ParseUint(q.Get("last_token"), 10, 64); err == nil {
		n.eng.ObserveToken(lt)
	}
	index, ierr := strconv.ParseUint(q.Get("index"), 10, 64)
	epoch, eerr := strconv.ParseUint(q.Get("epoch"), 10, 64)
	n.mu.Lock()
	id := n.clusterID
	n.mu.Unlock()
	// A standby of another cluster ID gets a snapshot: its log is of
	// another cluster, whatever its position says.
	theirs := r.Header.Get(headerClusterID)
	resume := ierr == nil && eerr == nil && (theirs == "" || theirs == id) && n.agrees(index, mark{epoch: epoch, by: q.Get("by")})

	f := newFollower(from)
	if !n.hub.add(f) {
		// Demoted since the check above (a handoff, a step-down).
		writeJSON(w, http.StatusConflict, n.status())
		return
	}
	defer n.hub.remove(f)

	w.Header().Set("Content-Type", streamType)
	w.Header().Set(syncHeader, strconv.Itoa(n.cfg.SyncStandbys))
	if id != "" {
		w.Header().Set(headerClusterID, id)
	}
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{bw: bufio.NewWriterSize(w, 64<<10), rc: http.NewResponseController(w)}
	if _, err := sw.bw.WriteString(streamMagic); err != nil {
		return
	}
	n.mu.Lock()
	cur := n.epoch
	n.mu.Unlock()
	begin := frame{kind: frameBegin, epoch: cur, lastToken: n.eng.LastToken(), stateToken: n.stateToken.Load()}
	var cursor uint64
	if resume {
		cursor = index + 1
		begin.resumeFrom = cursor
		if sw.frame(&begin) != nil {
			return
		}
		n.log.Info("standby resumes from its log", "standby", from, "from_index", cursor)
	} else {
		var dump bytes.Buffer
		var top uint64 // the highest shard's index: the dump holds its changes
		base, err := n.eng.WriteDump(&dump, func() uint64 {
			i := n.wal.LastIndex()
			top = max(top, i)
			return i
		})
		if err != nil {
			n.log.Error("snapshot for a standby failed", "standby", from, "err", err)
			return
		}
		// As records do, the snapshot goes only once this log has written
		// every change it holds (see readWritten).
		if err := n.wal.Wait(top); err != nil {
			n.log.Warn("snapshot for a standby: this node's log does not write its changes", "standby", from, "err", err)
			return
		}
		if sw.frame(&begin) != nil || sw.frame(&frame{kind: frameSnapshot, index: base, data: dump.Bytes()}) != nil {
			return
		}
		cursor = base + 1
		n.log.Info("standby gets a snapshot", "standby", from, "index", base, "bytes", dump.Len(),
			"its_index", q.Get("index"), "its_epoch", q.Get("epoch"))
	}
	f.mu.Lock()
	f.synced, f.sent, f.covered = true, cursor-1, cursor-1
	f.mu.Unlock()
	if sw.flush() != nil {
		return
	}

	hb := time.NewTicker(n.cfg.Heartbeat)
	defer hb.Stop()
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	defer linger.Stop()
	var recs []tailRec
	for {
		var more <-chan struct{}
		var pending, ok bool
		recs, more, pending, ok = n.tail.readWritten(cursor, streamBatch, recs)
		if !ok {
			// Older than the tail holds: from the log's segments.
			err := n.wal.Replay(cursor, func(i uint64, rec []byte) error {
				if err := sw.frame(&frame{kind: frameRecord, index: i, data: rec}); err != nil {
					return err
				}
				cursor = i + 1
				return nil
			})
			f.mu.Lock()
			k := cursor - 1 - f.sent
			f.sent = cursor - 1
			f.mu.Unlock()
			n.sentRecords.Add(k)
			n.sentWrites.Add(1)
			if err != nil || sw.flush() != nil {
				n.log.Warn("standby's stream: cannot read the log from its index; it will get a snapshot", "standby", from, "index", cursor, "err", err)
				return
			}
			continue
		}
		for _, tr := range recs {
			if sw.frame(&frame{kind: frameRecord, index: tr.index, data: tr.rec}) != nil {
				return
			}
			cursor = tr.index + 1
		}
		if len(recs) > 0 {
			clear(recs)
			// Before the flush: the standby's acknowledgement can come back
			// as soon as it is sent, and counts only up to f.sent.
			f.mu.Lock()
			f.sent = cursor - 1
			f.mu.Unlock()
			n.sentRecords.Add(uint64(len(recs)))
			n.sentWrites.Add(1)
			if sw.flush() != nil {
				return
			}
			continue
		}
		if pending {
			// Records appended that this node's log has not written yet:
			// they go once it has (more), never before. A record whose
			// write fails is answered as not made, and a standby that a
			// failover promotes must not hold it. Those of the changes
			// that clients wait for are written by their Waits; the
			// others (a waiter's place, a lease that ran out) are written
			// by the log's goroutine, asked to once they waited
			// streamLinger (and again after each write that did not
			// cover them); an idle stream is woken for them only once
			// they waited it (tail.idle).
			wait := streamLinger
			if at, ok := n.tail.appendedAt(cursor); ok {
				wait -= time.Since(time.Unix(0, at))
			}
			if wait <= 0 {
				n.wal.WriteSoon()
				wait = streamLinger
			}
			linger.Reset(wait)
			select {
			case <-more:
				linger.Stop()
				continue
			case <-linger.C:
				n.wal.WriteSoon()
			case <-hb.C:
				linger.Stop()
				if !n.heartbeat(sw, &cur) {
					return
				}
				continue
			case <-f.done:
				linger.Stop()
				f.end(sw)
				return
			case <-r.Context().Done():
				linger.Stop()
				return
			}
			select {
			case <-more:
			case <-hb.C:
				if !n.heartbeat(sw, &cur) {
					return
				}
			case <-f.done:
				f.end(sw)
				return
			case <-r.Context().Done():
				return
			}
			continue
		}
		select {
		case <-more:
			// Changes that follow within streamLinger go out with this
			// one, in one write and one read on the standby, instead of
			// one each. An end of the stream cuts the wait short; what is
			// written is still sent first (a handoff waits for it).
			// With sync_standbys the changes wait for the standbys: no
			// linger, the acknowledgements batch them instead; the
			// goroutines about to append (requests answered by the same
			// cores) run once first, so that their records share this
			// write, as the log's own writer does (wal.Log.Wait).
			if n.cfg.SyncStandbys > 0 {
				runtime.Gosched()
				continue
			}
			linger.Reset(streamLinger)
			select {
			case <-linger.C:
			case <-f.done:
				linger.Stop()
			case <-r.Context().Done():
				linger.Stop()
			}
		case <-hb.C:
			if !n.heartbeat(sw, &cur) {
				return
			}
		case <-f.done:
			f.end(sw)
			return
		case <-r.Context().Done():
			return
		}
	}
}

// heartbeat writes a heartbeat frame to a standby's stream: the epoch
// (cur, updated), the last token and the index this node's log has
// written. It reports whether the write succeeded.
func (n *Node) heartbeat(sw *streamWriter, cur *uint64) bool {
	n.mu.Lock()
	*cur = n.epoch
	n.mu.Unlock()
	return sw.frame(&frame{kind: frameHeartbeat, epoch: *cur, lastToken: n.eng.LastToken(), index: n.wal.Written()}) == nil && sw.flush() == nil
}

// follow reads the active's stream into this node's log and engine until
// it ends.
func (n *Node) follow(ctx context.Context, active string, lastToken uint64) error {
	last, m := n.tail.position()
	q := url.Values{"from": {n.cfg.Self}, "last_token": {strconv.FormatUint(lastToken, 10)},
		"index": {strconv.FormatUint(last, 10)}, "epoch": {strconv.FormatUint(m.epoch, 10)}, "by": {m.by}}
	if n.wal.InstallFailed() {
		// The last snapshot install failed (a full disk): this node's log
		// takes no record until one succeeds, and its position, which
		// may agree with the active's, would only resume a stream whose
		// every record it refuses. A stream without a position gets a
		// snapshot (serveStream). Asked at most once per installBackoff,
		// which doubles with each failure, so that a disk still full
		// does not take the active's snapshot every few hundred ms.
		if wait := time.Duration(n.installRetry.Load() - n.since()); wait > 0 {
			return ownLogError{fmt.Errorf("stream: this node's last snapshot install failed; it asks for another in %v", wait.Round(time.Millisecond))}
		}
		q.Del("index")
		q.Del("epoch")
		q.Del("by")
	}
	// The stream's own context: ended when it goes silent (watchSilence).
	ctx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	req, err := n.newRequest(ctx, http.MethodGet, active, "/stream", q)
	if err != nil {
		return err
	}
	n.mu.Lock()
	if n.clusterID != "" {
		req.Header.Set(headerClusterID, n.clusterID)
	}
	n.mu.Unlock()
	// The answer's header comes once the active has its snapshot dump
	// ready, if it sends one: waited for fetchFirstSilence failover
	// timeouts, as fetchTail waits for its peer's. A request sent just
	// before a cut that drops packets would otherwise wait, once the link
	// healed, for the active's backed-off TCP retransmission, as a silent
	// body would (watchSilence).
	var late atomic.Bool
	first := fetchFirstSilence * n.cfg.FailoverTimeout
	hdr := time.AfterFunc(first, func() { late.Store(true); stopStream() })
	resp, err := n.stream.Do(req)
	hdr.Stop()
	if late.Load() {
		if err == nil {
			resp.Body.Close()
		}
		return fmt.Errorf("stream: no answer from the active within %v (a link that went silent): %w", first, context.Cause(ctx))
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stream: %w", &statusError{code: resp.StatusCode})
	}
	if ct := resp.Header.Get("Content-Type"); ct != streamType {
		return fmt.Errorf("stream: the active sends %q, this node reads %q: run the same baton version on every node", ct, streamType)
	}
	body := &countingReader{r: resp.Body}
	var silent atomic.Bool
	var watcher sync.WaitGroup
	watcher.Go(func() { n.watchSilence(ctx, body, func() { silent.Store(true); stopStream() }) })
	err = n.readStream(ctx, active, resp, body, last)
	stopStream()
	watcher.Wait() // the watcher is this call's: it ends before follow returns
	if silent.Load() {
		return fmt.Errorf("stream: nothing came from the active for %v (a link that went silent): %w", n.silenceLimit(), err)
	}
	return err
}

// countingReader counts the reads that brought bytes, and says whether
// a read is waiting for some.
type countingReader struct {
	r       io.Reader
	reads   atomic.Uint64
	waiting atomic.Bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.waiting.Store(true)
	k, err := c.r.Read(p)
	c.waiting.Store(false)
	if k > 0 {
		c.reads.Add(1)
	}
	return k, err
}

// watchSilence calls end once body has brought nothing for silenceLimit
// while a read waited for it (counted in ticks of this node's own clock,
// so that a pause of this node is not taken for the active's silence, nor
// the time it spends applying what it read, such as a large snapshot,
// for the link's), until ctx ends. The
// active writes a frame at least every heartbeat, so a stream that brings
// nothing for that long is a link that went silent: a cut (a DROP) leaves
// the connection open, and once the link heals the active's TCP resends
// only when its backed-off retransmission timer fires, up to the cut's
// length later (two minutes at most), while the polls, on new
// connections, answer at once; meanwhile this node would look live and
// synced and acknowledge nothing. The stream ends instead, and the next
// one opens on a new connection as soon as a poll of the active answers
// again.
func (n *Node) watchSilence(ctx context.Context, body *countingReader, end func()) {
	t := time.NewTicker(n.cfg.Heartbeat)
	defer t.Stop()
	seen, idle := body.reads.Load(), time.Duration(0)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if r := body.reads.Load(); r != seen || !body.waiting.Load() {
			seen, idle = r, 0
			continue
		}
		if idle += n.cfg.Heartbeat; idle >= n.silenceLimit() {
			end()
			return
		}
	}
}

// silenceLimit is how long a standby's stream may bring nothing before it
// ends (watchSilence): FailoverTimeout, and three heartbeats at least.
func (n *Node) silenceLimit() time.Duration {
	return max(n.cfg.FailoverTimeout, 3*n.cfg.Heartbeat)
}

// readStream reads the active's stream (resp, its body read through
// body) into this node's log and engine until it ends; last is this
// node's log's last index when it asked for the stream.
func (n *Node) readStream(ctx context.Context, active string, resp *http.Response, body io.Reader, last uint64) error {
	br := bufio.NewReaderSize(body, 64<<10)
	magic := make([]byte, len(streamMagic))
	if _, err := io.ReadFull(br, magic); err != nil {
		return err
	}
	if string(magic) != streamMagic {
		return fmt.Errorf("stream: begins with %q, want %q: run the same baton version on every node", magic, streamMagic)
	}
	// The active's cluster ID, which this node adopts once synced.
	activeID := resp.Header.Get(headerClusterID)
	n.mu.Lock()
	p := n.peerByURL(active)
	n.mu.Unlock()
	// The acknowledgements go back on their own connection (acker), each
	// sent by this goroutine once it has written the records to this
	// node's log: at the end of each batch, or, when the active has no
	// sync_standbys and waits for none, at most every ackEvery.
	paced := resp.Header.Get(syncHeader) == "0"
	acks := &ackConn{count: &n.acksSent, limit: n.cfg.FailoverTimeout}
	var applied atomic.Uint64 // the last index applied, for a new ack connection
	var ackedAt time.Time     // of the last acknowledgement sent, when paced
	ack := func(now time.Time) error {
		applied.Store(last)
		if paced && now.Sub(ackedAt) < ackEvery {
			return nil
		}
		if !acks.pending(last) {
			return nil
		}
		// WaitGathered: this goroutine appended the whole batch itself,
		// so the log writes it at once instead of first yielding to
		// appenders that do not exist here (a yield with an idle
		// processor wakes a thread, which finds nothing to do and sleeps
		// again: two context switches per batch).
		if err := n.wal.WaitGathered(last); err != nil {
			return ownLogError{fmt.Errorf("stream: writing its records to this node's log: %w", err)}
		}
		acks.send(last)
		ackedAt = now
		return nil
	}
	actx, stopAcks := context.WithCancel(ctx)
	var ackers sync.WaitGroup
	defer func() {
		stopAcks()
		ackers.Wait()
	}()
	var f frame
	var dumps engine.Dumps // of the snapshot installed, until its records are past
	var dumpMax uint64
	begun := false
	// beginState is the active's state token when the stream began: this
	// node's state token takes it only once this node's state is the
	// active's (see below), never at the begin frame, after which the
	// records that make that state may never be written here (a full
	// disk) nor applied.
	var beginState uint64
	// The records are published once per batch (what one read of the
	// stream brought, about one write of the active's): one
	// acknowledgement, one wake of the changes waiting for this node to
	// apply them, for all of them.
	var batch uint64 // records applied since the last publish
	publish := func() error {
		now := time.Now()
		if err := ack(now); err != nil {
			return err
		}
		n.appliedRecords.Add(batch)
		batch = 0
		n.mu.Lock()
		defer n.mu.Unlock()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if p != nil {
			p.contact, p.heard = now, true
		}
		n.applied = last
		n.streamWorksLocked(active)
		close(n.appliedCh)
		n.appliedCh = make(chan struct{})
		if n.synced {
			n.replicaAt, n.replicaFrom = now, active
		}
		return nil
	}
	for {
		if batch > 0 && br.Buffered() == 0 {
			// The batch is read: publish it before waiting for the next.
			if err := publish(); err != nil {
				return err
			}
		}
		if err := readFrame(br, &f); err != nil {
			if batch > 0 {
				_ = publish() // what was applied counts (a handoff waits for it)
			}
			return err
		}
		if f.kind == frameRecord {
			if err := n.applyFrame(ctx, &f, &begun, &dumps, &dumpMax, &last); err != nil {
				return err
			}
			batch++
			continue
		}
		if batch > 0 {
			if err := publish(); err != nil {
				return err
			}
		}
		if f.kind == frameMoved {
			return &movedError{to: string(f.data), epoch: f.epoch}
		}
		if f.kind == frameSnapshot {
			// This node's state is replaced: what its feed said before
			// (after a step-down, the grants and expiries of a state it
			// discarded) is not the cluster's history. Said before the
			// snapshot loads, whose holders and waiters the engine
			// reports as grants and enqueues of the new state. A
			// standby's first sync replaces nothing its feed showed: no
			// reset.
			n.mu.Lock()
			if n.everSynced { // it followed an active or was one: its feed showed a state
				n.notify(api.EventReset, n.cfg.Self, fmt.Sprintf("state replaced by a snapshot of %s's (index %d): the events before this one are of the state this node held before, which the cluster may never have had", active, f.index))
			}
			n.mu.Unlock()
		}
		if err := n.applyFrame(ctx, &f, &begun, &dumps, &dumpMax, &last); err != nil {
			return err
		}
		switch f.kind {
		case frameBegin:
			if f.resumeFrom > 0 { // else the log is replaced: nothing to acknowledge yet
				applied.Store(last)
			}
			ackers.Go(func() { n.acker(actx, active, acks, &applied) })
		case frameSnapshot:
			ackedAt = time.Time{}
			if err := ack(time.Now()); err != nil {
				return err
			}
		case frameHeartbeat:
			// Idle: what a paced acknowledgement left out goes now.
			ackedAt = time.Time{}
			if err := ack(time.Now()); err != nil {
				return err
			}
		}
		if f.lastToken > 0 {
			n.eng.ObserveToken(f.lastToken)
		}
		now := time.Now()
		n.mu.Lock()
		if ctx.Err() != nil {
			n.mu.Unlock()
			return ctx.Err()
		}
		if p != nil {
			p.contact, p.heard = now, true
			if f.epoch > 0 {
				p.status.Epoch = f.epoch
			}
		}
		if f.epoch > n.epoch {
			n.epoch = f.epoch
		}
		switch f.kind {
		case frameBegin:
			beginState = f.stateToken
			if f.resumeFrom > 0 {
				// This node's state token stands for its log's grants
				// (replayed, then raised by each grant it applies):
				// the active's comes with the first heartbeat.
				n.resumes.Add(1)
				n.markSyncedLocked(active, activeID, "resumed from its log", last)
			}
		case frameSnapshot:
			// Installed (written, applied): this node's state is the
			// active's as the stream began, or later. It replaces
			// whatever this node held (a stepped-down active's own
			// grants are gone with its state).
			n.stateToken.Store(beginState)
			n.installs.Add(1)
			n.markSyncedLocked(active, activeID, "installed the active's snapshot", last)
		case frameHeartbeat:
			if batch == 0 && n.synced {
				// Every record the active wrote before this heartbeat is
				// applied and written here (acknowledged above): this
				// node's state is the active's as of now, whose state
				// token is at least beginState. (A standby whose log
				// refuses the records never gets here: its state token
				// says what it holds, so that, promoted alone, it does
				// not pass for the newest state; breaker report of
				// 2026-12-05, 221 answered grants lost.)
				raise(&n.stateToken, beginState)
				n.streamWorksLocked(active)
			}
		}
		if n.synced && f.kind != frameBegin {
			// A heartbeat comes once the active has sent every record it
			// wrote, and this node has applied and written those it read
			// (published, acknowledged above); a snapshot is the active's
			// state. A resume (frameBegin) is not: the records after this
			// node's log follow it, and may never be written here (a full
			// disk), nor applied.
			n.replicaAt, n.replicaFrom = now, active
		}
		n.mu.Unlock()
	}
}

// movedError ends a standby's stream when its active handed the role to
// the node at to, now the active with epoch (a moved frame).
type movedError struct {
	to    string
	epoch uint64
}

func (e *movedError) Error() string {
	return fmt.Sprintf("the active handed its role to %s (epoch %d)", e.to, e.epoch)
}

// markSyncedLocked records that this standby's log agrees with the
// active's through index last, and adopts the active's cluster ID (id;
// "" from an active of an older baton): only now, once its state is the
// active's, so that a data_dir never holds this cluster's ID with
// another cluster's log. n.mu is held.
func (n *Node) markSyncedLocked(active, id, how string, last uint64) {
	n.setClusterIDLocked(id, "synced with the active "+active+": "+how)
	n.synced, n.hasState, n.everSynced = true, true, true
	n.unfetchable = nil
	n.applied = last
	close(n.appliedCh)
	n.appliedCh = make(chan struct{})
	// Debug while the stream from active keeps breaking (a full disk:
	// it resumes every few hundred ms and breaks at its first record),
	// as the breaks are; the line that it works again follows.
	n.log.Log(n.ctx, n.followLevelLocked(active), "synced with the active: "+how, "active", active, "index", last)
}

// applyFrame applies one frame of the stream to this node's log and
// engine, under n.applyMu (a promotion waits for it: nothing is applied
// once the engine is promoted). last is this node's log's last index.
func (n *Node) applyFrame(ctx context.Context, f *frame, begun *bool, dumps *engine.Dumps, dumpMax, last *uint64) error {
	n.applyMu.Lock()
	defer n.applyMu.Unlock()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	switch f.kind {
	case frameBegin:
		if *begun {
			return fmt.Errorf("%w: a second begin frame", errFrame)
		}
		*begun = true
		if f.resumeFrom > 0 && f.resumeFrom != *last+1 {
			return fmt.Errorf("%w: resume from %d offered, this log ends at %d", errFrame, f.resumeFrom, *last)
		}
	case frameSnapshot:
		if !*begun {
			return fmt.Errorf("%w: snapshot before begin", errFrame)
		}
		n.eng.Reset()
		d, err := n.eng.LoadDump(bytes.NewReader(f.data))
		if err != nil {
			n.eng.Reset()
			return fmt.Errorf("stream: the active's snapshot: %w", err)
		}
		var write func(io.Writer) error
		if f.index > 0 {
			data := f.data
			write = func(w io.Writer) error { _, err := w.Write(data); return err }
		}
		if err := n.wal.Install(f.index, write); err != nil {
			n.eng.Reset()
			b := min(max(2*time.Duration(n.installBackoff.Load()), n.cfg.FailoverTimeout), maxInstallBackoff)
			n.installBackoff.Store(int64(b))
			n.installRetry.Store(n.since() + int64(b))
			return ownLogError{fmt.Errorf("stream: installing the active's snapshot in this node's log: %w", err)}
		}
		n.installBackoff.Store(0)
		em := n.eng.Epoch()
		n.tail.reset(f.index, mark{epoch: em.Epoch, by: em.By})
		*dumps, *dumpMax, *last = d, 0, f.index
		for _, i := range d {
			*dumpMax = max(*dumpMax, i)
		}
		n.installedTo = *dumpMax
	case frameRecord:
		if !*begun {
			return fmt.Errorf("%w: record before begin", errFrame)
		}
		i := f.index
		if i != *last+1 {
			return fmt.Errorf("%w: record %d after %d", errFrame, i, *last)
		}
		if *dumps != nil && i > *dumpMax {
			*dumps = nil // past every shard's dump: nothing more to skip
		}
		data := f.data
		appendAt := func() error {
			if err := n.wal.AppendAt(i, data); err != nil {
				return ownLogError{err}
			}
			return nil
		}
		if err := n.eng.ReplayAt(i, data, *dumps, appendAt); err != nil {
			return fmt.Errorf("stream: record %d: %w", i, err)
		}
		*last = i
	}
	return nil
}

// ownLogError is a replication stream's end caused by this node's own log,
// which refused the active's records or snapshot (a full disk), not by the
// active or the link: the active is not counted dead for it (Node.follow's
// caller).
type ownLogError struct{ err error }

func (e ownLogError) Error() string { return e.err.Error() }
func (e ownLogError) Unwrap() error { return e.err }
