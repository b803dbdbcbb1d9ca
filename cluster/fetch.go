package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/baton-io/baton/engine"
)

// serveRecords is GET /_cluster/records?from=&index=&epoch=&by= on any
// node: the records of its log after index, up to its last index when
// asked, in the stream's frames (a begin frame with resume_from = index+1,
// then record frames; the body ends after the last). It answers 409 when
// its log does not agree with the asker's at index (the asker's position:
// epoch and by of the mark in force there), or no longer holds what
// follows. A standby about to be promoted fetches the tail it lacks from
// the most advanced live node with it ("promotion never with less").
func (n *Node) serveRecords(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	index, ierr := strconv.ParseUint(q.Get("index"), 10, 64)
	epoch, eerr := strconv.ParseUint(q.Get("epoch"), 10, 64)
	if ierr != nil || eerr != nil || !n.isPeer(q.Get("from")) {
		http.Error(w, "from, index, epoch: required (a peer's URL, its log's last index and epoch)", http.StatusBadRequest)
		return
	}
	if !n.agrees(index, mark{epoch: epoch, by: q.Get("by")}) && !(index == 0 && n.wal.FirstIndex() == 1) {
		http.Error(w, "this log does not agree with yours at your index, or no longer holds what follows", http.StatusConflict)
		return
	}
	until, _ := n.tail.position()
	w.Header().Set("Content-Type", streamType)
	w.WriteHeader(http.StatusOK)
	sw := &streamWriter{bw: bufio.NewWriterSize(w, 64<<10), rc: http.NewResponseController(w)}
	if _, err := sw.bw.WriteString(streamMagic); err != nil {
		return
	}
	if sw.frame(&frame{kind: frameBegin, lastToken: n.eng.LastToken(), stateToken: n.stateToken.Load(), resumeFrom: index + 1}) != nil {
		return
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
// older index, the mark in force there read from this log's records. The
// tail holds only what was appended since this node started or last
// installed a snapshot, and a peer about to be promoted may be further
// behind than that: refused, it would promote itself without the records
// this node holds (it takes a node that refuses for one whose log
// diverged, see decide).
func (n *Node) agrees(index uint64, m mark) bool {
	if n.tail.agrees(index, m) {
		return true
	}
	first, before := n.tail.held()
	if index+1 >= first || index+1 < n.wal.FirstIndex() {
		return false // the tail's answer stands, or the records are gone
	}
	// The mark in force at index is the one in force at first-1 (before)
	// unless an epoch began between them; then it is the last mark at or
	// below index, if this log still holds it.
	found, at := false, mark{}
	scan := func(from, to uint64, fn func(mark)) bool {
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
		return err == nil || errors.Is(err, errDone)
	}
	if !scan(index+1, first-1, func(mark) { found = true }) {
		return false
	}
	if !found {
		return before.same(m)
	}
	found = false
	if !scan(n.wal.FirstIndex(), index, func(k mark) { found, at = true, k }) {
		return false
	}
	return found && at.same(m)
}

// fetchTail brings the records this node lacks from peer's log into its
// own, through the stream's apply path, and reports how many came.
func (n *Node) fetchTail(ctx context.Context, peer string) (int, error) {
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
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("records: %w", &statusError{resp.StatusCode})
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	magic := make([]byte, len(streamMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != streamMagic {
		return 0, fmt.Errorf("records: not a replication stream (%q, %v)", magic, err)
	}
	var f frame
	begun, got := false, 0
	var dumps engine.Dumps // none: the records are all applied
	var dumpMax uint64
	for {
		err := readFrame(br, &f)
		if errors.Is(err, io.EOF) {
			return got, nil
		}
		if err != nil {
			return got, err
		}
		if f.kind != frameBegin && f.kind != frameRecord {
			return got, fmt.Errorf("%w: %c frame in a records answer", errFrame, f.kind)
		}
		if err := n.applyFrame(ctx, &f, &begun, &dumps, &dumpMax, &last); err != nil {
			return got, err
		}
		if f.kind == frameRecord {
			got++
		}
		if f.lastToken > 0 {
			n.eng.ObserveToken(f.lastToken)
		}
	}
}
