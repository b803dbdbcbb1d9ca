package cluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/wal"
)

// serveRecords is GET /_cluster/records?from=&index=&epoch=&by= on any
// node: the records of its log after index, up to its last index when
// asked, in the stream's frames (a begin frame with resume_from = index+1,
// then record frames; the body ends after the last). When its log no
// longer holds the records after index (a snapshot of it removed them, or
// it installed one) and the asker's log is a prefix of it (behindLog), it
// sends a snapshot of its state instead (a begin frame with resume_from 0
// and a snapshot frame), then the records after the snapshot. It answers
// 409 when its log does not agree with the asker's at index (the asker's
// position: epoch and by of the mark in force there), or cannot tell. A
// standby about to be promoted fetches the tail it lacks from the most
// advanced live node with it ("promotion never with less").
func (n *Node) serveRecords(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	index, ierr := strconv.ParseUint(q.Get("index"), 10, 64)
	epoch, eerr := strconv.ParseUint(q.Get("epoch"), 10, 64)
	if ierr != nil || eerr != nil || !n.isPeer(q.Get("from")) {
		http.Error(w, "from, index, epoch: required (a peer's URL, its log's last index and epoch)", http.StatusBadRequest)
		return
	}
	m := mark{epoch: epoch, by: q.Get("by")}
	snap := false
	if !n.agrees(index, m) && !(index == 0 && n.wal.FirstIndex() == 1) {
		if !n.behindLog(index, m) {
			http.Error(w, "this log does not agree with yours at your index, or no longer holds what follows and cannot tell that yours is a prefix of it", http.StatusConflict)
			return
		}
		snap = true
	}
	begin := frame{kind: frameBegin, lastToken: n.eng.LastToken(), stateToken: n.stateToken.Load(), resumeFrom: index + 1}
	var dump bytes.Buffer
	var base uint64
	if snap {
		var err error
		if base, err = n.eng.WriteDump(&dump, n.wal.LastIndex); err != nil {
			n.log.Error("snapshot for a peer's fetch failed", "peer", q.Get("from"), "err", err)
			http.Error(w, "snapshot: "+err.Error(), http.StatusInternalServerError)
			return
		}
		begin.resumeFrom = 0 // the asker's log is replaced
	}
	// Read after the dump: every shard's dump index is at most until.
	until, _ := n.tail.position()
	w.Header().Set("Content-Type", streamType)
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{bw: bufio.NewWriterSize(w, 64<<10), rc: http.NewResponseController(w)}
	if _, err := sw.bw.WriteString(streamMagic); err != nil {
		return
	}
	if sw.frame(&begin) != nil {
		return
	}
	if snap {
		if sw.frame(&frame{kind: frameSnapshot, index: base, data: dump.Bytes()}) != nil {
			return
		}
		index = base
		n.log.Info("a peer's fetch gets a snapshot: this log no longer holds the records after its index",
			"peer", q.Get("from"), "its_index", q.Get("index"), "index", base, "bytes", dump.Len())
	}
	cursor := index + 1
	var recs []tailRec
	for cursor <= until {
		var ok bool
		recs, _, ok = n.tail.read(cursor, streamBatch, recs)
		if !ok {
			errDone := errors.New("done")
			err := n.wal.Replay(cursor, func(i uint64, rec []byte) error {
				if i > until {
					return errDone
				}
				cursor = i + 1
				return sw.frame(&frame{kind: frameRecord, index: i, data: rec})
			})
			if err != nil && !errors.Is(err, errDone) {
				return
			}
			continue
		}
		if len(recs) == 0 {
			break
		}
		for _, tr := range recs {
			if tr.index > until {
				break
			}
			if sw.frame(&frame{kind: frameRecord, index: tr.index, data: tr.rec}) != nil {
				return
			}
			cursor = tr.index + 1
		}
	}
	_ = sw.flush()
}

// agrees reports whether a log whose last index is index, under mark m,
// is a prefix of this node's log, which still holds the records after
// index: the tail's answer (tail.agrees) for the indexes it holds; for an
// older index, the mark in force there as the tail knows it
// (tail.markKnown: since this node started or installed a snapshot), else
// as read from this log's records. The
// tail holds only what was appended since this node started or last
// installed a snapshot, and a peer about to be promoted may be further
// behind than that: refused, it would promote itself without the records
// this node holds (it takes a node that refuses for one whose log
// diverged, see decide).
//
// A scan that a snapshot cut short (it removed segments meanwhile:
// wal.ErrCompacted) is made again; it answered false, so the fetch was
// answered 409 and the asker passed this node over until it synced.
func (n *Node) agrees(index uint64, m mark) bool {
	for range 3 {
		ok, err := n.agreesOnce(index, m)
		if !errors.Is(err, wal.ErrCompacted) {
			return ok
		}
	}
	return false
}

// agreesOnce is agrees, with the error of its scan of this log's marks.
func (n *Node) agreesOnce(index uint64, m mark) (bool, error) {
	if n.tail.agrees(index, m) {
		return true, nil
	}
	first, before := n.tail.held()
	if index+1 >= first || index+1 < n.wal.FirstIndex() {
		return false, nil // the tail's answer stands, or the records are gone
	}
	if k, ok := n.tail.markKnown(index); ok {
		return k.same(m), nil
	}
	// The mark in force at index is the one in force at first-1 (before)
	// unless an epoch began between them; then it is the last mark at or
	// below index, if this log still holds it.
	found, at := false, mark{}
	if err := n.scanMarks(index+1, first-1, func(mark) { found = true }); err != nil {
		return false, err
	}
	if !found {
		return before.same(m), nil
	}
	found = false
	if err := n.scanMarks(n.wal.FirstIndex(), index, func(k mark) { found, at = true, k }); err != nil {
		return false, err
	}
	return found && at.same(m), nil
}

// scanHook, if set (tests only), is called by scanMarks with its from
// before it reads the log.
var scanHook func(from uint64)

// scanMarks calls fn with each epoch mark of this node's log records from
// index from to index to, in order. Errors: the log's (wal.ErrCompacted
// when from is below its first index), or a mark record that does not
// decode.
func (n *Node) scanMarks(from, to uint64, fn func(mark)) error {
	if scanHook != nil {
		scanHook(from)
	}
	errDone := errors.New("done")
	err := n.wal.Replay(from, func(i uint64, rec []byte) error {
		if i > to {
			return errDone
		}
		if len(rec) > 1 && engine.RecordKind(rec[1]) == engine.RecEpoch {
			r, err := engine.DecodeRecord(rec)
			if err != nil {
				return err
			}
			fn(mark{index: i, epoch: r.Epoch, by: r.Owner})
		}
		return nil
	})
	if errors.Is(err, errDone) {
		return nil
	}
	return err
}

// behindLog reports whether a log whose last index is index, under mark
// m, is a prefix of this node's log that ends before the records this
// node still holds begin (in its log or its tail), so that only a
// snapshot of this node's state brings it up to date: an empty log is;
// another is when the mark in force at index in this log is m, as the
// tail knows it (tail.markKnown), or else when the mark in force where
// this log's records begin is m (a node writes one mark per epoch, at one
// index: m's record is then at or below index in both logs, and no epoch
// began since). When neither is known (index is before this node's start
// or last install, and an epoch began between the start of this log's
// records and that of its tail): false, as for a log that diverged.
func (n *Node) behindLog(index uint64, m mark) bool {
	for range 3 { // again if a snapshot removed records meanwhile
		start := n.wal.FirstIndex()
		first, before := n.tail.held()
		if index+1 >= start || index+1 >= first {
			return false // the records after index are held: agrees answers
		}
		if index == 0 {
			return true
		}
		if k, ok := n.tail.markKnown(index); ok {
			return k.same(m)
		}
		if k, ok := n.tail.markKnown(start - 1); ok {
			return k.same(m)
		}
		found := false
		err := n.scanMarks(start, first-1, func(mark) { found = true })
		if errors.Is(err, wal.ErrCompacted) {
			continue
		}
		return err == nil && !found && before.same(m)
	}
	return false
}

// fetchTail brings the records this node lacks from peer's log into its
// own, through the stream's apply path, and reports how many came: after
// a snapshot of the peer's state, which replaces this node's log and
// state, when the peer's log no longer holds the records after this
// node's (see serveRecords).
//
// The promotion waits for it, so it is given up when nothing comes from
// the peer: no answer's header within fetchFirstSilence failover timeouts
// (the peer may dump its whole state first: about 0.75 s for a million
// holders here), or no byte of its body for fetchSilence. A connection
// that went silent (a link that drops packets, a stale connection) would
// otherwise hold the promotion for as long as TCP keeps it, while the
// peer's polls, on other connections, still answer. The role loop then
// fetches again, on a new connection.
func (n *Node) fetchTail(ctx context.Context, peer string) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	first, silence := fetchFirstSilence*n.cfg.FailoverTimeout, fetchSilence*n.cfg.FailoverTimeout
	var silent atomic.Bool
	var limit atomic.Int64
	limit.Store(int64(first))
	wd := time.AfterFunc(first, func() { silent.Store(true); cancel() })
	defer wd.Stop()
	got, err := n.fetchTailFrom(ctx, peer, func() { limit.Store(int64(silence)); wd.Reset(silence) })
	if err != nil && silent.Load() {
		err = fmt.Errorf("records: nothing came from %s for %v: %w", peer, time.Duration(limit.Load()), err)
	}
	return got, err
}

// How many failover timeouts fetchTail waits for the peer's answer
// (fetchFirstSilence), then for each next bytes of it (fetchSilence).
const (
	fetchFirstSilence = 10
	fetchSilence      = 3
)

func (n *Node) fetchTailFrom(ctx context.Context, peer string, progress func()) (int, error) {
	last, m := n.tail.position()
	q := url.Values{"from": {n.cfg.Self}, "index": {strconv.FormatUint(last, 10)},
		"epoch": {strconv.FormatUint(m.epoch, 10)}, "by": {m.by}}
	req, err := n.newRequest(ctx, http.MethodGet, peer, "/records", q)
	if err != nil {
		return 0, err
	}
	resp, err := n.stream.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	progress()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("records: %w", &statusError{code: resp.StatusCode})
	}
	br := bufio.NewReaderSize(progressReader{resp.Body, progress}, 64<<10)
	magic := make([]byte, len(streamMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != streamMagic {
		return 0, fmt.Errorf("records: not a replication stream (%q, %v)", magic, err)
	}
	var f frame
	begun, got := false, 0
	var dumps engine.Dumps // of the snapshot installed, until its records are past
	var dumpMax uint64
	for {
		err := readFrame(br, &f)
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		if f.kind != frameBegin && f.kind != frameRecord && f.kind != frameSnapshot {
			return got, fmt.Errorf("%w: %c frame in a records answer", errFrame, f.kind)
		}
		if err := n.applyFrame(ctx, &f, &begun, &dumps, &dumpMax, &last); err != nil {
			return got, err
		}
		if f.kind == frameSnapshot {
			n.log.Info("installed a peer's snapshot before promoting: its log no longer holds the records after this one's", "from", peer, "index", f.index)
		}
		if f.kind == frameRecord {
			got++
		}
		if f.lastToken > 0 {
			n.eng.ObserveToken(f.lastToken)
		}
	}
}

// progressReader calls progress after each read that brought bytes.
type progressReader struct {
	r        io.Reader
	progress func()
}

func (p progressReader) Read(b []byte) (int, error) {
	k, err := p.r.Read(b)
	if k > 0 {
		p.progress()
	}
	return k, err
}
