package handlers

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/jsonw"
)

// DefaultEventLogSize is how many recent events an EventLog keeps unless
// told otherwise.
const DefaultEventLogSize = 1024

// EventLog is a bounded ring of a node's recent events, the feed behind
// GET /events and the status page. Add is cheap and never blocks (it is
// called from engine.Config.OnEvent under a shard lock); readers that fall
// behind lose the oldest events and are told how many. Safe for concurrent
// use. The zero value is not usable: call NewEventLog.
type EventLog struct {
	mu      sync.Mutex
	ring    []logEntry
	first   uint64        // Seq of the first event of this feed
	next    uint64        // Seq of the next event
	wake    chan struct{} // closed by the next Add when waiting is set
	waiting bool
	done    chan struct{}
	once    sync.Once
}

type logEntry struct {
	seq uint64
	ev  engine.Event
	ext *api.Event // a cluster event, when set
}

// NewEventLog returns an EventLog that keeps the last size events (size <=
// 0 means DefaultEventLogSize), numbered from 1.
func NewEventLog(size int) *EventLog { return NewEventLogFrom(size, 1) }

// NewEventLogFrom is NewEventLog numbering its events from first (0 is
// taken as 1). A node passes its start time in microseconds, so that every
// Seq of a run is above every Seq of the node's earlier runs (which
// numbered fewer events than microseconds went by): a client that resumes
// with a Seq of an earlier run is told this run's events from the first,
// instead of missing those numbered up to its Seq (see Resume).
func NewEventLogFrom(size int, first uint64) *EventLog {
	if size <= 0 {
		size = DefaultEventLogSize
	}
	first = max(first, 1)
	return &EventLog{ring: make([]logEntry, size), first: first, next: first, wake: make(chan struct{}), done: make(chan struct{})}
}

// Add records a lock event. Its signature fits engine.Config.OnEvent; it
// takes one mutex for a few stores and never calls back into the engine.
func (l *EventLog) Add(ev engine.Event) { l.add(&ev, nil) }

// AddEvent records an event that does not come from the lock engine, such
// as a promotion or a handoff. Its Seq is assigned here; a zero At means now.
func (l *EventLog) AddEvent(ev api.Event) {
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	l.add(nil, &ev)
}

// add stores a lock event ev, or else ext, in the ring, in place (an
// engine.Event is large: it is copied once, under the lock).
func (l *EventLog) add(ev *engine.Event, ext *api.Event) {
	l.mu.Lock()
	e := &l.ring[l.next%uint64(len(l.ring))]
	e.seq, e.ext = l.next, ext
	if ev != nil {
		e.ev = *ev
	} else {
		e.ev = engine.Event{}
	}
	l.next++
	if l.waiting {
		close(l.wake)
		l.wake = make(chan struct{})
		l.waiting = false
	}
	l.mu.Unlock()
}

// Last returns the Seq of the newest event; with none yet, the one
// before the first (0 for a feed numbered from 1).
func (l *EventLog) Last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.next - 1
}

// Resume returns where a feed resumed after the Seq n that a client names
// (?since=, Last-Event-ID) starts: n itself when this feed numbered it (or
// will next), otherwise the Seq before this feed's first, so that the
// client gets every event still kept. A Seq this feed did not number is an
// earlier run's of the node (below its first) or another node's (either
// side; a clock stepped back between two runs puts an earlier run's above
// too): none of this run's events can be known to the client.
func (l *EventLog) Resume(n uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n < l.first-1 || n > l.next-1 {
		return l.first - 1
	}
	return n
}

// Since returns up to max events (max <= 0: every one the ring holds)
// with a Seq above since, the oldest first, so that a reader further
// behind than max reads them all in turns; missed counts the events after
// since that the ring no longer holds. A since below the feed's first Seq
// is taken as the Seq before it. upto is the Seq of the last event
// returned (since, so taken, when none is), last the Seq of the newest
// event.
func (l *EventLog) Since(since uint64, max int) (evs []api.Event, missed, upto, last uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	last = l.next - 1
	// Before: with no event yet (last = first-1) and since below it, the
	// ring's span last-first+1 wrapped round below 0, and the ring's
	// empty slots came out as events with a missed count near 2^64.
	if since < l.first-1 {
		since = l.first - 1
	}
	if since >= last {
		return nil, 0, since, last
	}
	from := since + 1 // this feed's first Seq after since
	first := from
	if n := uint64(len(l.ring)); last-first >= n {
		first = last - n + 1
	}
	missed = first - from
	upto = last
	if max > 0 {
		upto = min(last, first+uint64(max)-1)
	}
	evs = make([]api.Event, 0, upto-first+1)
	for seq := first; seq <= upto; seq++ {
		evs = append(evs, l.ring[seq%uint64(len(l.ring))].wire())
	}
	return evs, missed, upto, last
}

// Backlog returns the Seq after which the last n events of key ("":
// of every key) that the ring holds begin: where a feed that names no
// since starts (GET /events?key= gets that key's own last n, not those
// among every key's last n).
func (l *EventLog) Backlog(key string, n int) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	oldest := l.first
	if held := uint64(len(l.ring)); l.next-l.first > held {
		oldest = l.next - held
	}
	for seq := l.next - 1; seq >= oldest && seq > 0; seq-- {
		if key == "" || l.ring[seq%uint64(len(l.ring))].key() == key {
			if n--; n == 0 {
				return seq - 1
			}
		}
	}
	return oldest - 1
}

// key is the key of the event e holds.
func (e *logEntry) key() string {
	if e.ext != nil {
		return e.ext.Key
	}
	return e.ev.Key
}

// wait returns a channel that is closed once an event with a Seq above
// after exists (at once if it already does), or by Close.
func (l *EventLog) wait(after uint64) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.next-1 > after {
		return closedChan
	}
	l.waiting = true
	return l.wake
}

// closedChan is a channel that is always closed.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Close ends every stream of GET /events, so that an HTTP server's
// graceful shutdown is not held up by them. Adding stays possible. It is
// idempotent.
func (l *EventLog) Close() { l.once.Do(func() { close(l.done) }) }

func (e *logEntry) wire() api.Event {
	if e.ext != nil {
		ev := *e.ext
		ev.Seq = e.seq
		ev.At = ev.At.UTC()
		return ev
	}
	ev := e.ev
	out := api.Event{
		Seq:     e.seq,
		Kind:    ev.Kind.String(),
		At:      time.Unix(0, ev.At).UTC(),
		Key:     ev.Key,
		Token:   ev.Token,
		Lease:   ev.Lease.Seconds(),
		Waited:  ev.Waited.Seconds(),
		Waiters: ev.Waiters,
		Owner:   ev.Owner,
		Forced:  ev.Forced,
		Limit:   ev.Limit,
	}
	switch ev.Kind {
	case engine.EventGrant, engine.EventRenew, engine.EventRelease, engine.EventExpire, engine.EventEnqueue,
		engine.EventLeave, engine.EventTimeout:
		out.Mode = ev.Mode.String()
	}
	if ev.ExpiresAt != 0 {
		t := time.Unix(0, ev.ExpiresAt).UTC()
		out.ExpiresAt = &t
	}
	return out
}

// Limits of GET /events.
const (
	// eventsBacklog is how many past events a new stream starts with when
	// it names no Last-Event-ID or since.
	eventsBacklog = 100
	// eventsBatch caps the events one write holds; a stream that is
	// further behind writes the events the ring still holds in turns (it
	// skipped to the newest 256 and reported the rest as missed, so a
	// ?key= stream lost its key's events among them), and is told only of
	// those the ring no longer holds.
	eventsBatch = 256
	// eventsInterval is the least time between two batches of a stream:
	// under load a page gets a few batches a second, not every event apart.
	eventsInterval = 200 * time.Millisecond
	// eventsPing is how often an idle stream sends a comment, so proxies
	// and the page see that it is alive.
	eventsPing = 15 * time.Second
	// eventsWriteTimeout bounds one write to a stream, so that a client
	// that stopped reading does not hold its goroutine for ever.
	eventsWriteTimeout = 30 * time.Second
)

// events is GET /events: the recent-events feed. With Accept:
// text/event-stream it is a server-sent event stream (one "message" per
// event, id = Seq; a "gap" event with {"missed":N} when events were
// skipped; it resumes after Last-Event-ID, else ?since=); otherwise the events
// after ?since= (default: the last 100, of ?key= when given) as an api.EventList. ?key= keeps
// only one lock's events; a ?key= stream also sends "id:" lines without
// data past the events it leaves out, so that a reconnect resumes where it
// was, and its missed counts the skipped events of every key (the ring
// cannot tell whose they were: an upper bound for the key's). A standby
// serves its own feed, which holds the changes it replicated (see
// Config.Gate), with Baton-Replica-Lag.
//
//	@Summary		Recent events (server-sent events or JSON)
//	@Description	With `Accept: text/event-stream`, a stream of server-sent events: one message per event (id = seq, data = the event as JSON), an event `gap` with `{"missed":N}` when events were skipped; it resumes after `Last-Event-ID` or `since`. Otherwise the events after `since` as JSON.
//	@Tags			cluster
//	@Produce		json
//	@Produce		text/event-stream
//	@Param			since			query		integer	false	"only events with a seq above this (default: the last 100, of key when given)"
//	@Param			key				query		string	false	"only the events of this lock key (cluster events are left out)"
//	@Param			Last-Event-ID	header		integer	false	"as since, for a stream that resumes (at most once); wins over since"
//	@Success		200				{object}	api.EventList
//	@Header			200				{number}	Baton-Replica-Lag	"on a standby: seconds since its replica was last known current"
//	@Failure		400				{object}	api.Error	"bad parameter; field names it"
//	@Failure		401				{object}	api.Error	"auth_tokens is set and no valid bearer token was sent"
//	@Header		401				{string}	WWW-Authenticate	"a Bearer challenge (realm baton)"
//	@Failure		404				{object}	api.Error	"this node keeps no event log"
//	@Security		BearerAuth
//	@Router			/events [get]
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	lg := s.cfg.Events
	if lg == nil {
		s.writeError(w, r, &httpError{status: http.StatusNotFound, body: api.Error{Code: api.CodeNotFound, Message: "this node keeps no event log"}})
		return
	}
	q, err := strictQuery(w, r, "GET /events", "since", "key")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	key := q.Get("key")
	if q.Has("key") {
		if err := engine.CheckKey(key); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	// Two Last-Event-ID lines name two resume points: neither is taken.
	if len(r.Header.Values("Last-Event-ID")) > 1 {
		s.writeError(w, r, badRequest("Last-Event-ID", "is given more than once; send one (the id of the last event received)"))
		return
	}
	s.setReplicaLag(w)
	since := lg.Backlog(key, eventsBacklog)
	// named: the request names where it starts (since, Last-Event-ID).
	// Without, nothing can be missed: events that newer ones pushed out
	// of the ring between Backlog and the first read are not counted.
	named := false
	// ?since= is where a feed starts; Last-Event-ID, which an EventSource
	// sends when it reconnects to the same URL (its ?since= included), is
	// where it resumes: the header, when given, wins. (since won: every
	// reconnect of a stream opened with ?since= began at that Seq again.)
	// Each is checked, and a 400 names the bad one.
	for _, p := range [...]struct{ raw, field, want string }{
		{q.Get("since"), "since", "the seq of an event (an unsigned integer, no leading zero)"},
		{r.Header.Get("Last-Event-ID"), "Last-Event-ID", "the id of the last event received (its seq, an unsigned integer, no leading zero)"},
	} {
		if p.raw == "" {
			continue
		}
		n, err := strconv.ParseUint(p.raw, 10, 64)
		if err != nil || !seqSyntax(p.raw) {
			s.writeError(w, r, badRequest(p.field, "must be "+p.want+", got "+quoteShort(p.raw)))
			return
		}
		// A Seq this run did not number (an earlier run's, another
		// node's) resumes at this run's first event: all are new.
		since, named = lg.Resume(n), true
	}
	if !wantsEventStream(r.Header.Get("Accept")) {
		evs, missed, _, last := lg.Since(since, 0)
		if !named {
			missed = 0
		}
		evs = onlyKey(evs, key)
		writeJSON(w, http.StatusOK, api.EventList{Events: evs, Missed: missed, Last: last})
		return
	}
	s.streamEvents(w, r, lg, since, key, named)
}

// wantsEventStream reports whether acc names text/event-stream with a
// weight above 0: q=0 is "not acceptable" (RFC 9110 section 12.4.2), and
// such a client gets the JSON list, not a stream that never ends.
func wantsEventStream(acc string) bool {
	for part := range strings.SplitSeq(acc, ",") {
		mr, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(mr), "text/event-stream") {
			continue
		}
		q := 1.0
		for p := range strings.SplitSeq(params, ";") {
			k, v, ok := strings.Cut(strings.TrimSpace(p), "=")
			if ok && strings.EqualFold(strings.TrimSpace(k), "q") {
				if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f >= 0 && f <= 1 {
					q = f
				}
			}
		}
		if q > 0 {
			return true
		}
	}
	return false
}

// onlyKey keeps the events of key ("" keeps all), in place; never nil.
func onlyKey(evs []api.Event, key string) []api.Event {
	if key == "" {
		if evs == nil {
			return []api.Event{}
		}
		return evs
	}
	out := make([]api.Event, 0, len(evs)) // [] in JSON when none is key's
	for _, ev := range evs {
		if ev.Key == key {
			out = append(out, ev)
		}
	}
	return out
}

// streamEvents streams the events after since (of key, "" for every
// key); named: the request named since (or Last-Event-ID), else the
// first read's missed events, pushed out after since was found, are
// none of the client's.
func (s *Server) streamEvents(w http.ResponseWriter, r *http.Request, lg *EventLog, since uint64, key string, named bool) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return // the stream's headers, and no body: a HEAD ends here
	}

	ctx := r.Context()
	ping := time.NewTicker(eventsPing)
	defer ping.Stop()
	pause := time.NewTimer(0)
	defer pause.Stop()
	var buf []byte
	write := func() bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventsWriteTimeout))
		_, err := w.Write(buf)
		if err == nil {
			err = rc.Flush()
		}
		buf = buf[:0]
		return err == nil
	}
	buf = append(buf, "retry: 1000\n\n"...)
	for {
		evs, missed, upto, last := lg.Since(since, eventsBatch)
		if !named {
			missed, named = 0, true // later reads: missed by the client
		}
		if missed > 0 {
			buf = append(buf, "event: gap\ndata: {\"missed\":"...)
			buf = strconv.AppendUint(buf, missed, 10)
			buf = append(buf, "}\n\n"...)
		}
		for _, ev := range evs {
			if key != "" && ev.Key != key {
				continue
			}
			b, _ := jsonw.Marshal(ev)
			buf = append(buf, "id: "...)
			buf = strconv.AppendUint(buf, ev.Seq, 10)
			buf = append(buf, "\ndata: "...)
			buf = append(buf, b...)
			buf = append(buf, "\n\n"...)
		}
		// A ?key= stream moves the client's Last-Event-ID past the events
		// it leaves out too (an "id:" line without data dispatches no
		// event), so that a reconnect resumes here: resumed from its key's
		// last event, it reported the other keys' events it had passed, no
		// longer in the ring, as missed.
		if key != "" && len(evs) > 0 && evs[len(evs)-1].Key != key {
			buf = append(buf, "id: "...)
			buf = strconv.AppendUint(buf, upto, 10)
			buf = append(buf, "\n\n"...)
		}
		since = upto
		if len(buf) > 0 && !write() {
			return
		}
		if upto < last {
			// Behind by more than a batch: the next one at once.
			select {
			case <-ctx.Done():
				return
			case <-lg.done:
				return
			default:
			}
			continue
		}
		// Let events gather for a while, then wait for the next one.
		pause.Reset(eventsInterval)
		select {
		case <-ctx.Done():
			return
		case <-lg.done:
			return
		case <-pause.C:
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-lg.done:
				return
			case <-lg.wait(since):
				waiting = false
			case <-ping.C:
				buf = append(buf, ": ping\n\n"...)
				if !write() {
					return
				}
			}
		}
	}
}
