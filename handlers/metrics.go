package handlers

import (
	"hash/maphash"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/buildinfo"
)

// Node roles reported by the baton_role gauge.
const (
	RoleActive  = "active"
	RoleStandby = "standby"
)

// Metrics are the Prometheus metrics of one node, in a private registry:
// the engine's state changes (fed through OnEvent), error answers by code,
// gauges over the engine, this node's role, build info and the Go runtime
// and process collectors. Create one with NewMetrics, pass its OnEvent as
// engine.Config.OnEvent and the Metrics itself as Config.Metrics.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler

	grants, releases, renewals, expiries, timeouts prometheus.Counter
	enqueues, leaves                               prometheus.Counter
	errors                                         *prometheus.CounterVec
	waitSeconds, handoffSeconds                    prometheus.Histogram
	requestSeconds                                 *prometheus.HistogramVec
	requestObservers                               sync.Map // requestLabels -> prometheus.Observer
	nativeSeconds                                  *prometheus.HistogramVec
	nativeObservers                                sync.Map // nativeLabels -> prometheus.Observer
	promotions, roleHandoffs, stepDowns            prometheus.Counter
	gate                                           atomic.Pointer[Gate]
	role                                           *prometheus.GaugeVec
	roleMu                                         sync.Mutex

	// nativeOK holds the observers of outcome OK by op (A, R, N, AUTH, P, C),
	// once nativeObservers has them: most answers are, and an array
	// index costs less than the map's hash of two strings.
	nativeOK [6]atomic.Pointer[prometheus.Observer]

	eng atomic.Pointer[engine.Engine]

	// handoffs tracks, per key, a release or expiry that had waiters and
	// the grants it led to, each until it is written to its new holder's
	// connection.
	seed     maphash.Seed
	handoffs [64]handoffShard
	now      func() time.Time
}

type handoffShard struct {
	mu sync.Mutex
	m  map[string]handoff
	// n is len(m), set under mu and read without it: a shard without
	// handoffs (most grants and releases: no waiter) is not locked. An
	// entry for a key is made by a release event of that key, which
	// happens before that key's grant event (the engine's shard lock) and
	// before its delivery (the grant reaches its connection after its
	// event), so a reader that finds n 0 has no entry to look at.
	n atomic.Int32
}

// handoff is a key's hand-on state. from is when the last grant to end
// with waiters queued ended (Unix ns; 0: no hand-on step is open), batch
// the At of the grants made so far in that step (0: none yet): the engine
// makes every grant of one step (a release, then as many waiters as now
// fit: several shared ones at once) with the step's one clock reading,
// and a grant with another At is not part of it. pending holds the grants
// made in hand-on steps until their delivery (or their end: then never).
type handoff struct {
	from, batch int64
	pending     []handedOn
}

// handedOn is one grant made in a hand-on step: its token, and when the
// grant it followed ended (Unix ns).
type handedOn struct {
	token uint64
	from  int64
}

// without returns p without the grant of token, in place.
func without(p []handedOn, token uint64) []handedOn {
	if i := slices.IndexFunc(p, func(g handedOn) bool { return g.token == token }); i >= 0 {
		return slices.Delete(p, i, i+1)
	}
	return p
}

// put stores h for key, or deletes key's entry when it holds nothing, and
// sets n. sh.mu is held.
func (sh *handoffShard) put(key string, h handoff) {
	if h.from == 0 && len(h.pending) == 0 {
		delete(sh.m, key)
	} else {
		sh.m[key] = h
	}
	sh.n.Store(int32(len(sh.m)))
}

// NewMetrics returns metrics in a fresh registry. The role starts as
// RoleActive (a single node); a cluster sets it with SetRole.
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), seed: maphash.MakeSeed(), now: time.Now}
	for i := range m.handoffs {
		m.handoffs[i].m = map[string]handoff{}
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "baton", Name: name, Help: help})
		m.reg.MustRegister(c)
		return c
	}
	m.grants = counter("grants_total", "Locks granted, each with a new fencing token.")
	m.releases = counter("releases_total", "Locks released by their holder (or because the grant could not be delivered).")
	m.renewals = counter("renewals_total", "Leases renewed by their holder.")
	m.expiries = counter("lease_expiries_total", "Locks taken back because their lease ran out.")
	m.timeouts = counter("wait_timeouts_total", "Acquires whose wait ran out before a grant (answered 408 timeout).")
	m.enqueues = counter("enqueues_total", "Acquires that joined a queue.")
	m.leaves = counter("waiter_leaves_total", "Waiters that went away (request cancelled) before a grant.")
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "baton", Name: "error_answers_total",
		Help: "Error answers sent, by the code of their body (the error field).",
	}, []string{"code"})
	for _, c := range []string{api.CodeTimeout, api.CodePollTimeout, api.CodeNotHolder, api.CodeNotHeld,
		api.CodeInvalidArgument, api.CodeBodyTooLarge, api.CodeTooManyKeys, api.CodeTooManyWaiters,
		api.CodeUnauthorized, api.CodeUnavailable, api.CodeInternal} {
		m.errors.WithLabelValues(c)
	}
	m.waitSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "baton", Name: "wait_seconds",
		Help:    "Time granted acquires spent in the queue, in seconds (0 for a lock that was free).",
		Buckets: []float64{0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900},
	})
	m.handoffSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "baton", Name: "handoff_seconds",
		Help:    "Time from the release or lease expiry of a lock to the moment the grant of a waiter it let in was written to that holder's connection (over HTTP/2: its HEADERS frame, with Lock-Token; the body's DATA frame follows), in seconds; each waiter let in counts (several shared ones at once).",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	})
	m.role = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: "baton", Name: "role",
		Help: "1 for this node's current role (active, standby, ...), else absent.",
	}, []string{"role"})
	m.requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "baton", Name: "http_request_duration_seconds",
		Help:    "Time from the arrival of an HTTP request to the end of its answer, in seconds, by method, route (the route pattern, such as /locks/*; \"\" when none matched) and status code. An acquire counts its wait in the queue; a stream of GET /events its whole life.",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"method", "route", "code"})
	m.nativeSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "baton", Name: "native_request_duration_seconds",
		Help:    "Time from the arrival of a native protocol request line to the queueing of its answer, in seconds, by op (A, R, N, AUTH; - for a line whose op could not be read) and outcome (OK, T, M, or the error code of an E answer). An acquire counts its wait in the queue.",
		Buckets: []float64{0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
	}, []string{"op", "outcome"})
	m.promotions = counter("promotions_total", "Times this node was promoted to active (failover, handoff to it, or the first election of a fresh cluster).")
	m.roleHandoffs = counter("role_handoffs_total", "Times this node, active, handed the active role to a synced standby (graceful shutdown, or a standby of higher priority asked).")
	m.stepDowns = counter("step_downs_total", "Times this node, active, stepped down to standby because another active kept its state against it (two actives after a partition or a pause).")
	m.reg.MustRegister(m.errors, m.waitSeconds, m.handoffSeconds, m.role, m.requestSeconds, m.nativeSeconds, replicaLag{m})
	m.SetRole(RoleActive)

	counts := func(pick func(keys, waiters int) int) func() float64 {
		return func() float64 {
			if e := m.eng.Load(); e != nil {
				return float64(pick(e.Counts()))
			}
			return 0
		}
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "baton", Name: "locks_held", Help: "Keys held now, by one holder or more (a semaphore or read lock with several holders counts once)."},
			func() float64 {
				if e := m.eng.Load(); e != nil {
					return float64(e.Held())
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "baton", Name: "waiters", Help: "Acquires queued now, over all keys."},
			counts(func(_, w int) int { return w })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "baton", Name: "keys", Help: "Keys that exist now (held or with waiters)."},
			counts(func(k, _ int) int { return k })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "baton", Name: "last_token", Help: "The highest fencing token issued or observed."},
			func() float64 {
				if e := m.eng.Load(); e != nil {
					return float64(e.LastToken())
				}
				return 0
			}),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
		buildInfo(),
	)
	m.handler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
	return m
}

// buildInfo is baton_build_info{version,revision,go_version} 1, from the
// same source as `baton version` and GET /cluster.
func buildInfo() prometheus.Collector {
	b := buildinfo.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "baton", Name: "build_info", Help: "Always 1; the labels name the build.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Commit, "go_version": b.Go},
	})
	g.Set(1)
	return g
}

// replicaLag exports baton_replica_lag_seconds while this node is a
// standby that holds a replica (Gate.ReplicaLag), and nothing otherwise.
type replicaLag struct{ m *Metrics }

var replicaLagDesc = prometheus.NewDesc("baton_replica_lag_seconds",
	"On a standby that holds a replica: seconds since the replica was last known current (the last frame of the replication stream). Absent on the active.", nil, nil)

func (c replicaLag) Describe(ch chan<- *prometheus.Desc) { ch <- replicaLagDesc }

func (c replicaLag) Collect(ch chan<- prometheus.Metric) {
	g := c.m.gate.Load()
	if g == nil || *g == nil || (*g).Serving() {
		return
	}
	if lag, ok := (*g).ReplicaLag(); ok {
		ch <- prometheus.MustNewConstMetric(replicaLagDesc, prometheus.GaugeValue, lag.Seconds())
	}
}

// observeRequest records one HTTP answer in baton_http_request_duration_seconds.
func (m *Metrics) observeRequest(method, route string, status int, d time.Duration) {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodDelete, http.MethodPatch, http.MethodOptions, http.MethodPut:
	default:
		method = "other" // a client's made-up method must not make a series
	}
	k := requestLabels{method, route, status}
	o, ok := m.requestObservers.Load(k)
	if !ok {
		o, _ = m.requestObservers.LoadOrStore(k, m.requestSeconds.WithLabelValues(method, route, strconv.Itoa(status)))
	}
	o.(prometheus.Observer).Observe(d.Seconds())
}

// requestLabels are the labels of one series of
// baton_http_request_duration_seconds; Metrics.requestObservers keeps its
// observer, so that an answer costs no label lookup (few series: routes
// and methods are the router's, codes the API's).
type requestLabels struct {
	method, route string
	code          int
}

// ObserveNative records one answer of the native protocol in
// baton_native_request_duration_seconds (op, outcome) and, for an E or T answer,
// in baton_error_answers_total by its code (T is "timeout"), as an HTTP error answer is
// counted. It implements native.Metrics.
func (m *Metrics) ObserveNative(op, outcome string, d time.Duration) {
	i := -1
	switch op {
	case "A":
		i = 0
	case "R":
		i = 1
	case "N":
		i = 2
	case "AUTH":
		i = 3
	case "P":
		i = 4
	case "C":
		i = 5
	default:
		op = "-"
	}
	if i >= 0 && outcome == "OK" {
		p := m.nativeOK[i].Load()
		if p == nil {
			o := m.nativeObserver(op, outcome)
			p = &o
			m.nativeOK[i].Store(p)
		}
		(*p).Observe(d.Seconds())
		return // (OK is not an error)
	}
	m.nativeObserver(op, outcome).Observe(d.Seconds())
	switch outcome {
	case "OK", "M":
	case "T":
		m.countError(api.CodeTimeout) // HTTP's 408 timeout
	default:
		m.countError(outcome)
	}
}

// nativeObserver is the series of baton_native_request_duration_seconds
// of op and outcome, made by its first answer.
func (m *Metrics) nativeObserver(op, outcome string) prometheus.Observer {
	k := nativeLabels{op, outcome}
	o, ok := m.nativeObservers.Load(k)
	if !ok {
		o, _ = m.nativeObservers.LoadOrStore(k, m.nativeSeconds.WithLabelValues(op, outcome))
	}
	return o.(prometheus.Observer)
}

// nativeLabels are the labels of one series of
// baton_native_request_duration_seconds (few: four ops, the API's codes).
type nativeLabels struct{ op, outcome string }

// Delivered records that the grant of token on key reached its holder's
// connection (a handoff's latency is observed). It implements
// native.Metrics; the HTTP layer calls it for its own grants.
func (m *Metrics) Delivered(key string, token uint64) { m.delivered(key, token) }

// OnClusterChange counts a cluster change as cluster.Config.OnChange tells
// it: kind "promote" counts in baton_promotions_total, "handoff" (this
// node handed the active role on) in baton_role_handoffs_total and
// "step_down" in baton_step_downs_total. Other kinds count nowhere. A
// "handoff" or "step_down" (this node is no longer the active) drops the
// lock handoffs still waiting for their delivery (see dropHandoffs).
func (m *Metrics) OnClusterChange(kind string) {
	switch kind {
	case "promote":
		m.promotions.Inc()
	case "handoff":
		m.roleHandoffs.Inc()
		m.dropHandoffs()
	case "step_down":
		m.stepDowns.Inc()
		m.dropHandoffs()
	}
}

// dropHandoffs forgets every lock handoff in progress: once this node is
// no longer the active, its events are not counted (OnEvent) and its
// state may be replaced (a resync), so the release or expiry that would
// end a pending grant's entry may never be seen; kept, the entries would
// stay for good and keep their shards off the n == 0 fast path.
func (m *Metrics) dropHandoffs() {
	for i := range m.handoffs {
		sh := &m.handoffs[i]
		sh.mu.Lock()
		clear(sh.m)
		sh.n.Store(0)
		sh.mu.Unlock()
	}
}

// Registry returns the registry, for callers that add collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SetRole reports this node's role (RoleActive, RoleStandby or another
// name): baton_role{role=<role>} is 1 and no other role is exported.
func (m *Metrics) SetRole(role string) {
	m.roleMu.Lock()
	defer m.roleMu.Unlock()
	m.role.Reset()
	m.role.WithLabelValues(role).Set(1)
}

// bind makes the gauges read eng, and the replica lag gate (nil: none).
func (m *Metrics) bind(eng *engine.Engine, gate Gate) {
	m.eng.Store(eng)
	m.gate.Store(&gate)
}

// countError counts one error answer; it is the Server's onError hook.
func (m *Metrics) countError(code string) { m.errors.WithLabelValues(code).Inc() }

// OnEvent counts one engine state change. It is meant for
// engine.Config.OnEvent (compose it with other observers): it never blocks
// for longer than a map update under a per-key-shard mutex. The counters
// count the changes this node made as the active node: changes a standby
// replays are not counted again.
func (m *Metrics) OnEvent(ev engine.Event) {
	if e := m.eng.Load(); e != nil && !e.Active() {
		return
	}
	switch ev.Kind {
	case engine.EventGrant:
		m.grants.Inc()
		m.waitSeconds.Observe(ev.Waited.Seconds())
		sh := m.shard(ev.Key)
		if sh.n.Load() == 0 {
			return
		}
		sh.mu.Lock()
		if h, ok := sh.m[ev.Key]; ok {
			// Every waiter granted in the step counts its own handoff
			// (several shared ones at once); the first grant after the
			// step began is part of it (also when the log refused it at
			// first and it was made later), later ones only with its At.
			if h.from != 0 && (h.batch == 0 || h.batch == ev.At) {
				h.batch = ev.At
				h.pending = append(h.pending, handedOn{token: ev.Token, from: h.from})
			} else {
				h.from, h.batch = 0, 0
			}
			sh.put(ev.Key, h)
		}
		sh.mu.Unlock()
	case engine.EventRelease, engine.EventExpire:
		if ev.Kind == engine.EventRelease {
			m.releases.Inc()
		} else {
			m.expiries.Inc()
		}
		sh := m.shard(ev.Key)
		if ev.Waiters == 0 && sh.n.Load() == 0 {
			return
		}
		sh.mu.Lock()
		h := sh.m[ev.Key]
		h.pending = without(h.pending, ev.Token) // a handoff that was never delivered
		h.from, h.batch = 0, 0
		if ev.Waiters > 0 {
			h.from = ev.At
		}
		sh.put(ev.Key, h)
		sh.mu.Unlock()
	case engine.EventRenew:
		m.renewals.Inc()
	case engine.EventTimeout:
		m.timeouts.Inc()
	case engine.EventEnqueue:
		m.enqueues.Inc()
	case engine.EventLeave:
		m.leaves.Inc()
	}
}

// delivered records that the grant of token on key reached its holder's
// connection: if it was a handoff, its latency is observed.
func (m *Metrics) delivered(key string, token uint64) {
	sh := m.shard(key)
	if sh.n.Load() == 0 {
		return
	}
	sh.mu.Lock()
	var from int64
	found := false
	if h, ok := sh.m[key]; ok {
		for i, g := range h.pending {
			if g.token == token {
				from, found = g.from, true
				h.pending = slices.Delete(h.pending, i, i+1)
				sh.put(key, h)
				break
			}
		}
	}
	sh.mu.Unlock()
	if found {
		m.handoffSeconds.Observe(max(0, float64(m.now().UnixNano()-from)/1e9))
	}
}

func (m *Metrics) shard(key string) *handoffShard {
	return &m.handoffs[maphash.String(m.seed, key)%uint64(len(m.handoffs))]
}

// serveMetrics is GET /metrics. It takes no parameters: a query
// parameter is a 400 naming it, as on every other call. Prometheus sends
// none unless its scrape config says so (`params:`, chosen by the
// operator), and then a parameter baton would ignore is better refused:
// the scrape fails, and the target's error names the parameter.
//
//	@Summary		Prometheus metrics
//	@Description	Prometheus text exposition format: baton_* counters, gauges and histograms, go_* and process_* runtime metrics.
//	@Tags			operations
//	@Produce		plain
//	@Success		200	{string}	string		"metrics in the Prometheus text format"
//	@Failure		400	{object}	api.Error	"a parameter or a body was given"
//	@Failure		401	{object}	api.Error	"auth_tokens is set and no valid bearer token was sent"
//	@Header		401	{string}	WWW-Authenticate	"a Bearer challenge (realm baton)"
//	@Security		BearerAuth
//	@Router			/metrics [get]
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request) {
	if err := noParams(w, r, "GET /metrics"); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.metrics.handler.ServeHTTP(w, r)
}
