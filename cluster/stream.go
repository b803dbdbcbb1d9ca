package cluster

import (
	"bufio"
	"context"
	"encoding/gob"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/engine"
)

// The replication stream is a gob stream (encoding/gob: self-describing,
// Go to Go) of frames, shown here as JSON:
//
//	{"seq":1,"t":"b","epoch":3,"last_token":N,"state_token":S}   snapshot begins: reset
//	{"seq":2,"t":"e","ev":{...}}                  one engine.Event
//	{"seq":K,"t":"s"}                             snapshot ends: synced
//	{"t":"h","epoch":3,"last_token":N}            heartbeat while idle
//
// It was newline-delimited JSON; decoding it was most of a standby's CPU
// under load (gob sends a type once and leaves zero fields out).
//
// seq numbers the frames of one stream; a handoff waits until the
// successor has applied the last one.
type wireFrame struct {
	Seq       uint64        `json:"seq,omitempty"`
	T         string        `json:"t"`
	Ev        *engine.Event `json:"ev,omitempty"`
	Epoch     uint64        `json:"epoch,omitempty"`
	LastToken uint64        `json:"last_token,omitempty"`
	// StateToken is the active's Status.StateToken ("b" frames): the
	// standby's state is the active's, so is its state token.
	StateToken uint64 `json:"state_token,omitempty"`
}

// streamType is the stream's Content-Type.
const streamType = "application/x-gob"

type frame struct {
	seq uint64
	t   byte
	ev  engine.Event
}

// maxBacklog bounds a standby's unsent frames; a standby that falls this
// far behind is cut off and resyncs from a fresh snapshot.
const maxBacklog = 4 << 20

// hub fans the engine's changes out to the standbys' streams.
type hub struct {
	n  atomic.Int32 // followers, so that publish costs nothing without any
	mu sync.RWMutex
	fs map[*follower]struct{}
}

func newHub() *hub { return &hub{fs: map[*follower]struct{}{}} }

// follower is one standby's stream as the active sees it.
type follower struct {
	url  string
	wake chan struct{} // one slot: frames are waiting
	done chan struct{} // closed: end the stream

	mu     sync.Mutex
	sub    [1024]uint64 // bitset of subscribed shards
	buf    []frame
	seq    uint64
	synced bool
	dead   bool
	closed bool
}

func (h *hub) publish(ev engine.Event) {
	if h.n.Load() == 0 {
		return
	}
	h.mu.RLock()
	for f := range h.fs {
		f.mu.Lock()
		if f.sub[ev.Shard/64]&(1<<(ev.Shard%64)) != 0 {
			f.pushLocked('e', ev)
		}
		f.mu.Unlock()
	}
	h.mu.RUnlock()
}

func (h *hub) add(f *follower) {
	h.mu.Lock()
	h.fs[f] = struct{}{}
	h.n.Store(int32(len(h.fs)))
	h.mu.Unlock()
}

func (h *hub) remove(f *follower) {
	h.mu.Lock()
	delete(h.fs, f)
	h.n.Store(int32(len(h.fs)))
	h.mu.Unlock()
	f.close()
}

// closeAll ends every stream (this node is no longer the active).
func (h *hub) closeAll() {
	h.mu.Lock()
	fs := h.fs
	h.fs = map[*follower]struct{}{}
	h.n.Store(0)
	h.mu.Unlock()
	for f := range fs {
		f.close()
	}
}

// successor picks the follower to hand off to: the one at url to if given,
// else the synced one with the highest priority in peers.
func (h *hub) successor(to string, peers []string) *follower {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var best *follower
	bestPrio := len(peers)
	for f := range h.fs {
		f.mu.Lock()
		ok := f.synced && !f.dead
		f.mu.Unlock()
		if !ok {
			continue
		}
		if to != "" {
			if f.url == to {
				return f
			}
			continue
		}
		for i, p := range peers {
			if p == f.url && i < bestPrio {
				best, bestPrio = f, i
			}
		}
	}
	return best
}

// synced returns the URLs of the followers that applied their snapshot and
// are not cut off.
func (h *hub) synced() []string {
	h.mu.RLock()
	defer h.mu.RUnlock()
	var us []string
	for f := range h.fs {
		f.mu.Lock()
		if f.synced && !f.dead {
			us = append(us, f.url)
		}
		f.mu.Unlock()
	}
	return us
}

func newFollower(u string) *follower {
	return &follower{url: u, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// pushLocked queues one frame. f.mu is held.
func (f *follower) pushLocked(t byte, ev engine.Event) {
	if f.dead {
		return
	}
	if len(f.buf) >= maxBacklog {
		f.dead = true
		f.buf = nil
		f.signal()
		return
	}
	f.seq++
	f.buf = append(f.buf, frame{seq: f.seq, t: t, ev: ev})
	f.signal()
}

func (f *follower) push(t byte, ev engine.Event) {
	f.mu.Lock()
	f.pushLocked(t, ev)
	f.mu.Unlock()
}

func (f *follower) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

func (f *follower) subscribe(shard int) {
	f.mu.Lock()
	f.sub[shard/64] |= 1 << (shard % 64)
	f.mu.Unlock()
}

func (f *follower) lastSeq() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seq
}

// take returns the queued frames, or dead.
func (f *follower) take(into []frame) ([]frame, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	into = append(into[:0], f.buf...)
	clear(f.buf)
	f.buf = f.buf[:0]
	if cap(f.buf) > 1<<16 {
		f.buf = nil
	}
	return into, f.dead
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
// bounds what it adds to a standby's lag; a grant never waits for it.
const streamLinger = time.Millisecond

// serveStream is GET /_cluster/stream on the active: a snapshot, then every
// change, until the standby goes away or this node stops being active.
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
	n.mu.Lock()
	epoch := n.epoch
	n.mu.Unlock()

	f := newFollower(from)
	n.hub.add(f)
	defer n.hub.remove(f)
	f.push('b', engine.Event{})
	n.eng.Snapshot(func(ev engine.Event) { f.push('e', ev) }, f.subscribe)
	f.mu.Lock()
	f.pushLocked('s', engine.Event{})
	f.synced = true
	f.mu.Unlock()
	n.log.Info("standby subscribed", "standby", from)

	w.Header().Set("Content-Type", streamType)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	bw := bufio.NewWriterSize(w, 64<<10)
	enc := gob.NewEncoder(bw)
	hb := time.NewTicker(n.cfg.Heartbeat)
	defer hb.Stop()
	linger := time.NewTimer(time.Hour)
	linger.Stop()
	defer linger.Stop()
	var frames []frame
	for {
		var dead bool
		frames, dead = f.take(frames)
		if dead {
			n.log.Warn("standby fell too far behind: cut off, it will resync", "standby", from)
			return
		}
		for i := range frames {
			fr := &frames[i]
			wf := wireFrame{Seq: fr.seq, T: string(fr.t)}
			switch fr.t {
			case 'b':
				wf.Epoch, wf.LastToken, wf.StateToken = epoch, n.eng.LastToken(), n.stateToken.Load()
			case 'e':
				wf.Ev = &fr.ev
			}
			if err := enc.Encode(&wf); err != nil {
				return
			}
		}
		if len(frames) > 0 {
			if bw.Flush() != nil || rc.Flush() != nil {
				return
			}
			continue
		}
		select {
		case <-f.wake:
			// Changes that follow within streamLinger go out with this
			// one, in one write and one read on the standby, instead of
			// one each: under load that was most of replication's cost.
			// An end of the stream cuts the wait short; what is queued is
			// still written first (a handoff waits for it).
			linger.Reset(streamLinger)
			select {
			case <-linger.C:
			case <-f.done:
				linger.Stop()
			case <-r.Context().Done():
				linger.Stop()
			}
		case <-hb.C:
			n.mu.Lock()
			epoch = n.epoch
			n.mu.Unlock()
			if enc.Encode(&wireFrame{T: "h", Epoch: epoch, LastToken: n.eng.LastToken()}) != nil || bw.Flush() != nil || rc.Flush() != nil {
				return
			}
		case <-f.done:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// follow reads the active's stream into the engine until it ends.
func (n *Node) follow(ctx context.Context, active string, lastToken uint64) error {
	q := url.Values{"from": {n.cfg.Self}, "last_token": {strconv.FormatUint(lastToken, 10)}}
	req, err := n.newRequest(ctx, http.MethodGet, active, "/stream", q)
	if err != nil {
		return err
	}
	resp, err := n.stream.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("stream: %w", &statusError{resp.StatusCode})
	}
	if ct := resp.Header.Get("Content-Type"); ct != streamType {
		return fmt.Errorf("stream: the active sends %q, this node reads %q: run the same baton version on every node", ct, streamType)
	}
	dec := gob.NewDecoder(bufio.NewReaderSize(resp.Body, 64<<10))
	var p *peer
	n.mu.Lock()
	p = n.peerByURL(active)
	n.mu.Unlock()
	for {
		var wf wireFrame
		if err := dec.Decode(&wf); err != nil {
			return err
		}
		switch wf.T {
		case "b":
			n.eng.Reset()
		case "e":
			if wf.Ev == nil {
				return errors.New("stream: event frame without an event")
			}
			if err := n.eng.Apply(*wf.Ev); err != nil {
				return err
			}
		}
		if wf.LastToken > 0 {
			n.eng.ObserveToken(wf.LastToken)
		}
		now := time.Now()
		n.mu.Lock()
		if ctx.Err() != nil {
			n.mu.Unlock()
			return ctx.Err()
		}
		if p != nil {
			p.contact, p.heard = now, true
			if wf.Epoch > 0 {
				p.status.Epoch = wf.Epoch
			}
		}
		if wf.Epoch > n.epoch {
			n.epoch = wf.Epoch
		}
		switch {
		case wf.T == "b":
			n.stateToken.Store(wf.StateToken)
		case wf.T == "e" && wf.Ev.Kind == engine.EventGrant:
			raise(&n.stateToken, wf.Ev.Token)
		}
		if wf.T == "s" {
			n.synced, n.hasState = true, true
			n.log.Info("synced with the active", "active", active)
		}
		if n.synced {
			n.replicaAt = now
		}
		if wf.Seq > 0 {
			n.applied = wf.Seq
			close(n.appliedCh)
			n.appliedCh = make(chan struct{})
		}
		n.mu.Unlock()
	}
}
