package cluster

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/jsonw"
)

// Handler returns the peer endpoints, to be mounted at PathPrefix. With
// Config.Secret set, each requires it in HeaderSecret and answers 401
// {"error":"unauthorized"} without it:
//
//	GET  /_cluster/status               this node's Status (the heartbeat poll)
//	GET  /_cluster/stream?from=&last_token=   the replication stream (active only)
//	POST /_cluster/handoff?to=          ask the active to hand off to a peer
//	POST /_cluster/promote?from=&through=     the old active asks its successor to take over
//	POST /_cluster/ack?from=            a standby's acknowledgements: upgraded (101), then indexes
//	GET  /_cluster/records?from=&index=&epoch=&by=   this log's records after the asker's position
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+PathPrefix+"/status", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, n.status())
	})
	mux.HandleFunc("GET "+PathPrefix+"/stream", n.serveStream)
	mux.HandleFunc("POST "+PathPrefix+"/handoff", n.serveHandoff)
	mux.HandleFunc("POST "+PathPrefix+"/promote", n.servePromote)
	mux.HandleFunc("POST "+PathPrefix+"/ack", n.serveAck)
	mux.HandleFunc("GET "+PathPrefix+"/records", n.serveRecords)
	return requireSecret(n.cfg.Secret, n.log)(mux)
}

func (n *Node) isPeer(u string) bool {
	return u != n.cfg.Self && slices.Contains(n.cfg.Peers, u)
}

// serveHandoff: a synced standby of higher priority asks for the role. The
// role loop decides (decide) and hands off.
func (n *Node) serveHandoff(w http.ResponseWriter, r *http.Request) {
	to := r.URL.Query().Get("to")
	if !n.isPeer(to) {
		http.Error(w, "to: not a peer of this cluster", http.StatusBadRequest)
		return
	}
	rep := n.ask(r.Context(), reqHandoff, to)
	if rep.err != nil {
		n.log.Warn("handoff refused", "to", to, "err", rep.err)
		writeJSON(w, http.StatusConflict, n.status())
		return
	}
	writeJSON(w, http.StatusOK, rep.st)
}

// servePromote: the active, handing off, asks this standby to take over
// once it has applied its stream through frame `through`. The role loop
// promotes it.
func (n *Node) servePromote(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from := q.Get("from")
	through, err := strconv.ParseUint(q.Get("through"), 10, 64)
	if err != nil || !n.isPeer(from) {
		http.Error(w, "from, through: required", http.StatusBadRequest)
		return
	}
	deadline := time.NewTimer(2 * n.cfg.FailoverTimeout)
	defer deadline.Stop()
	// A log that refuses writes, or a disk without room (logDown), may
	// never catch up and could serve no change as the active: refused at
	// once, and as soon as it fails while waiting, so that the active
	// takes its role back rather than leave the cluster without one
	// (decideRequest refuses it too).
	recheck := time.NewTicker(n.cfg.Heartbeat)
	defer recheck.Stop()
	n.mu.Lock()
	for n.following == from && n.applied < through && !n.logDown() {
		ch := n.appliedCh
		n.mu.Unlock()
		select {
		case <-ch:
		case <-recheck.C:
		case <-deadline.C:
			http.Error(w, "the stream did not catch up in time", http.StatusServiceUnavailable)
			return
		case <-r.Context().Done():
			return
		}
		n.mu.Lock()
	}
	n.mu.Unlock()
	var undelivered []engine.Grant
	for _, u := range q["undelivered"] {
		tok, key, ok := strings.Cut(u, " ")
		t, err := strconv.ParseUint(tok, 10, 64)
		if !ok || err != nil || engine.CheckKey(key) != nil {
			http.Error(w, "undelivered: want <token> <key>", http.StatusBadRequest)
			return
		}
		undelivered = append(undelivered, engine.Grant{Key: key, Token: t})
	}
	leaving, err := strconv.ParseBool(cmp.Or(q.Get("leaving"), "false"))
	if err != nil {
		http.Error(w, "leaving: want true or false", http.StatusBadRequest)
		return
	}
	rep := n.send(r.Context(), request{kind: reqPromote, peer: from, ctx: r.Context(), reply: make(chan reply, 1), undelivered: undelivered, leaving: leaving})
	if rep.err != nil {
		n.log.Warn("promotion by handoff refused", "from", from, "err", rep.err)
		writeJSON(w, http.StatusConflict, n.status())
		return
	}
	writeJSON(w, http.StatusOK, rep.st)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = jsonw.NewEncoder(w).Encode(v)
}
