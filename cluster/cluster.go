// Package cluster runs baton's active/standby cluster (SPEC section 3):
// failure detection by heartbeats, replication of the active's log to
// every standby (optionally synchronous: sync_standbys), promotion of the
// best live standby, graceful handoff, and step-down when two nodes are
// active.
//
// The peers list orders the nodes: the first has the highest priority. Each
// node polls every other node's status every Heartbeat; a node not heard
// from for FailoverTimeout is dead. Every node keeps its own log; a standby
// follows the active through one long-lived HTTP stream of the active's
// log records (stream.go, frames.go), which it writes to its own log at the
// same indexes and acknowledges (sync.go), with heartbeat frames while idle.
//
// Roles change in one goroutine (Node.loop). At every heartbeat, and for
// every request another goroutine posts to it (the old active's call to
// promote its successor, a standby's handoff request, Close), the loop
// gathers what the node knows under its mutex into a value (view), calls
// one pure function of it, decide, and applies the one action it returns:
// stay, follow X, promote, step down to X, ask X for a handoff, hand off
// to X, or refuse the request. The rules decide applies:
//
//   - active: if another live node is active and keeps its state against
//     this one (keepsState: the newer state, then the higher priority),
//     step down: demote the engine, follow it.
//   - standby following a live active: nothing; once synced, a standby whose
//     priority is above the active's asks it for a handoff.
//   - standby back from a cold start, following nobody yet, whose state is
//     newer than the live active's (a higher state token, replayed from
//     its log: the active was elected from an older log while this node
//     was down, and it did not replace this node, as it did if this node
//     began its log's last epoch and the active's log is of a later one):
//     it does not follow that
//     active, which would replace its answered grants; once it has heard
//     every peer (or listened three FailoverTimeouts), the one such node
//     that keeps its state against the others promotes itself, and the
//     stale active steps down to it.
//   - standby with no live active: follow the best live active if there is
//     one; otherwise, once the node has listened for FailoverTimeout, the
//     highest-priority live node that holds state (or any, when none does)
//     promotes itself (a node without state never does once a peer
//     said it holds grants since this node started, live or silent), after fetching the log records the most advanced
//     live node holds beyond its own, or its snapshot and the records
//     after it when its log no longer holds them (promotion never with
//     less); on a
//     cold start (no node followed or was an active since this one
//     started) the node with the most advanced log is elected instead,
//     ties by priority.
//   - a node that did not run for longer than FailoverTimeout decides
//     nothing until it has polled every peer again; nothing is decided
//     while a handoff is under way.
//
// A handoff's call to the successor runs off the loop, which applies its
// answer (the successor announced, or the role taken back).
//
// Every data_dir keeps a cluster ID (Config.IDFile): created by the first
// active, adopted by a node without one once it syncs with its active. No
// rule compares the logs of nodes whose IDs differ (a data_dir copied from
// another cluster): such a standby follows the live active and takes its
// snapshot and ID (see foreign and decide). An ID its node created alone
// (Status.LoneID) keeps nothing against another (keepsState).
//
// Two actives (a partition, a paused process) are resolved by keepsState,
// a pure function of the two nodes' statuses, never by the timing of a
// heartbeat: the one whose state is older (the lower state token: the
// newest grant it holds) steps down, discards what it granted on its own
// and resyncs; if its priority is higher it then takes the active role
// back through a handoff, losing nothing the newer one granted. Each
// promotion also takes epoch = 1 + the highest epoch seen, which counts
// promotions for operators and decides nothing.
package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
	"github.com/baton-io/baton/internal/rawio"
	"github.com/baton-io/baton/wal"
)

// PathPrefix is where the peer endpoints are mounted.
const PathPrefix = "/_cluster"

// Config sets up a Node.
type Config struct {
	// Self is this node's base URL exactly as it stands in Peers.
	Self string
	// Peers lists every node's base URL, Self among them, highest
	// priority first.
	Peers []string
	// Heartbeat is the interval of status polls and idle stream frames.
	Heartbeat time.Duration
	// FailoverTimeout is the silence after which a node counts as dead
	// and a standby may take over. Keep it several heartbeats long.
	FailoverTimeout time.Duration
	// Secret, when set, is sent on every peer request (HeaderSecret) and
	// required on every peer endpoint that Handler serves.
	Secret string
	// Transport, if set, carries every peer request of this node (polls,
	// calls and the replication stream); nil means a clone of
	// http.DefaultTransport. The in-process test harness sets one whose
	// links it can cut.
	Transport http.RoundTripper
	// SourceIP, when set and a loopback address, is the address this
	// node's peer connections leave from when they go to a loopback
	// address too: several nodes on one host, each on its own 127.0.0.x.
	// Left to the kernel they would all leave from 127.0.0.1, and a
	// firewall rule keyed on a node's address (a cut link, as between
	// hosts) would never match them. nil, or not loopback: the kernel's
	// choice. Unused with Transport. baton serve sets the IP of listen.
	SourceIP net.IP
	// Logger receives role changes; nil means slog.Default().
	Logger *slog.Logger
	// OnRole, if set, is called with the new role on every role change.
	OnRole func(role string)
	// OnChange, if set, is told of every promotion ("promote"), handoff
	// ("handoff"), step-down ("step_down") and replacement of this node's
	// state by the active's snapshot ("reset"): kind, the node concerned,
	// and a sentence. It must not block.
	OnChange func(kind, node, message string)
	// Native is this node's native protocol address (host:port) as clients
	// reach it, "" when it serves none. It travels in the status peers poll,
	// so that a standby can answer M with the active's (see ActiveNative).
	Native string
	// Log is this node's log, which its engine writes (engine.Config.Log)
	// and which replays into the engine before New: a standby writes the
	// active's records into it at the active's indexes, the active streams
	// its records from it. Required.
	Log *wal.Log
	// Sync, if set, is the SyncLog the engine writes (engine.Config.Log),
	// wrapping Log: it makes changes wait for SyncStandbys.
	Sync *SyncLog
	// SyncStandbys is how many standbys must have written a change to
	// their logs before it is answered (sync_standbys; 0 = none, the
	// replication is asynchronous). It needs Sync.
	SyncStandbys int
	// SyncTimeout is how long a change waits for those acknowledgements
	// before the active goes on without them (sync_timeout); 0 means
	// DefaultSyncTimeout.
	SyncTimeout time.Duration
	// IDFile is the file that keeps this node's cluster ID, in its
	// data_dir (IDFileName); "" keeps it in memory only. A data_dir
	// without one adopts the ID of the first active it syncs with, or
	// creates one when this node is the first active (see foreign).
	IDFile string
	// TailBytes bounds, in bytes, the recent records kept in memory for the
	// standbys' streams (older ones are read from the log's segments);
	// 0 means DefaultTailBytes.
	TailBytes int
	// DiskFree, if set, reports the room left on the file system of
	// this node's data_dir, in bytes (false: it cannot be told). A node
	// with less than MinDiskFree left counts as one whose log is down
	// (view.logDown) before any write of it fails: restarted on a full
	// disk whose last page still took the records it replicated, it
	// asked for the role, and its first write as the active failed.
	DiskFree func() (free uint64, ok bool)
}

// Defaults: a crashed active is replaced within about FailoverTimeout +
// Heartbeat, under the 2 s that SPEC section 5 asks for.
const (
	DefaultHeartbeat       = 200 * time.Millisecond
	DefaultFailoverTimeout = time.Second
)

// MinDiskFree is the room, in bytes, that a node needs left on its
// data_dir's file system (Config.DiskFree) to ask for the active role,
// take it in a handoff, or promote itself beside a node whose log
// writes: below it, its next writes (a segment's next pages, the token
// high-water mark's file) may fail at once.
const MinDiskFree = 1 << 20

// maxInstallBackoff bounds the wait of a standby whose snapshot installs
// keep failing (a disk still full) before it asks its active for another
// snapshot: each costs the active a dump of its whole state.
const maxInstallBackoff = 30 * time.Second

// MinHeartbeat is the shortest heartbeat accepted: each one polls every
// peer over HTTP, so a shorter one floods the peers for no faster failover.
const MinHeartbeat = 10 * time.Millisecond

// MaxPeers is the most nodes a peers list may name. It is also the stride
// of the nodes' token classes (engine.Engine.SetTokenClass): a node issues
// only tokens equal to its position in its own list modulo MaxPeers, a
// stride no list's length changes, so that two actives of a split brain
// never issue the same token while their lists differ only by nodes added
// at the end or removed from it (a rolling change of the list, README
// "Cluster"); with the number of nodes as the stride, a node listing three
// and one still listing two shared every token 3 modulo 6. Two nodes at the
// same position of their own lists (a reordered list) share a class.
const MaxPeers = 16

// Validate reports the first invalid field by its config key (an error
// naming it and the value); nil when every field is valid.
func (c *Config) Validate() error {
	if len(c.Peers) == 0 {
		return errors.New("peers: empty (a single node needs no cluster)")
	}
	if len(c.Peers) > MaxPeers {
		return fmt.Errorf("peers: at most %d nodes, got %d", MaxPeers, len(c.Peers))
	}
	seen := map[string]bool{}
	for _, p := range c.Peers {
		if err := checkPeerURL(p); err != nil {
			return fmt.Errorf("peers: %q is not a node base URL (http://host:port): %v", p, err)
		}
		if seen[p] {
			return fmt.Errorf("peers: %q is listed twice", p)
		}
		seen[p] = true
	}
	if !seen[c.Self] {
		return fmt.Errorf("advertise: %q is not in peers %v", c.Self, c.Peers)
	}
	if err := c.ValidateTimings(); err != nil {
		return err
	}
	if c.SyncStandbys < 0 || c.SyncStandbys > len(c.Peers)-1 {
		return fmt.Errorf("sync_standbys: must be between 0 and the number of other peers (%d), got %d", len(c.Peers)-1, c.SyncStandbys)
	}
	if c.TailBytes < 0 {
		return fmt.Errorf("tail_bytes: must not be negative, got %d", c.TailBytes)
	}
	return nil
}

// ValidateTimings reports the first invalid timing (heartbeat,
// failover_timeout, sync_timeout) by its config key. Validate calls it; a
// single node (no peers) calls it alone, so that a setting no cluster
// would take is refused at start there too instead of when peers are
// added.
func (c *Config) ValidateTimings() error {
	if c.Heartbeat < MinHeartbeat {
		return fmt.Errorf("heartbeat: must be at least %v (each heartbeat polls every peer), got %v", MinHeartbeat, c.Heartbeat)
	}
	if c.SyncTimeout != 0 && (c.SyncTimeout < MinSyncTimeout || c.SyncTimeout > MaxSyncTimeout) {
		return fmt.Errorf("sync_timeout: must be %s (0: the default, %v), got %v", SyncTimeoutRange, DefaultSyncTimeout, c.SyncTimeout)
	}
	if c.FailoverTimeout < 2*c.Heartbeat {
		return fmt.Errorf("failover_timeout: must be at least two heartbeats (%v), got %v", 2*c.Heartbeat, c.FailoverTimeout)
	}
	return nil
}

// CheckNodeURL reports why u is not a node's base URL (http(s)://host[:port],
// no user, path, query or fragment), as an entry of peers and advertise
// must be; nil when it is one.
func CheckNodeURL(u string) error { return checkPeerURL(u) }

// NodeURL is u in the one form by which nodes name each other (peers,
// advertise, a status's url, an active named in a redirect): the blanks
// around it and a trailing "/" dropped, and its scheme and host in lower
// case, which RFC 3986 sections 3.1 and 3.2.2 make case-insensitive
// (an IPv6 zone, case-sensitive, is kept as written), and its port
// without leading zeros. Nodes compare these names as strings, so
// "HTTP://Node-1:07070/" in one node's peers and "http://node-1:7070" in
// another's advertise are one node. A u that does not parse is returned
// trimmed, for CheckNodeURL to refuse.
func NodeURL(u string) string {
	u = strings.TrimRight(strings.TrimSpace(u), "/")
	pu, err := url.Parse(u)
	if err != nil || pu.Opaque != "" || pu.Host == "" {
		return u
	}
	pu.Scheme = strings.ToLower(pu.Scheme)
	if !strings.Contains(pu.Host, "%") {
		pu.Host = strings.ToLower(pu.Host)
	}
	if port := pu.Port(); port != "" {
		// A port's leading zeros are no part of its number (":07070").
		if n, err := strconv.ParseUint(port, 10, 16); err == nil {
			pu.Host = strings.TrimSuffix(pu.Host, port) + strconv.FormatUint(n, 10)
		}
	}
	return pu.String()
}

// checkPeerURL reports why p cannot be a node's base URL: nodes dial it,
// so it needs an http or https scheme, a host, and a port (when one is
// written) from 1 to 65535; a path, a query, a fragment or a user would be
// dropped or misused by the calls built on it.
func checkPeerURL(p string) error {
	u, err := url.Parse(p)
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("the scheme must be http or https, got %q", u.Scheme)
	case u.Hostname() == "":
		return errors.New("it has no host")
	case u.User != nil:
		return errors.New("it must not hold a user")
	case u.Path != "" && u.Path != "/", u.RawQuery != "" || u.ForceQuery, u.Fragment != "":
		return errors.New("it must hold no path, query or fragment")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("the port must be from 1 to 65535, got %q", port)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return errors.New("the port is empty")
	}
	return nil
}

// Status is a node's answer to a peer's poll (GET /_cluster/status).
type Status struct {
	URL    string `json:"url"`    // the node's own URL (Config.Self)
	Role   string `json:"role"`   // api.RoleActive or api.RoleStandby
	Active string `json:"active"` // the URL of the active the node knows; "" = none
	// Priority is the node's place in the peers list, 0 = highest (the
	// poller sets it from its own list).
	Priority int `json:"priority"`
	// Epoch is the epoch the node knows (its own as the active).
	Epoch uint64 `json:"epoch"`
	// HasState: the node's log holds records, or it synced from an active
	// or was one; a node without state never wins an election alone.
	HasState bool `json:"has_state"`
	// LastToken is the node's fencing-token high-water mark: every token
	// it issued, replicated or heard of from a peer.
	LastToken uint64 `json:"last_token"`
	// StateToken is the token of the newest grant in the node's state:
	// made there while it knew itself active, replicated from the active
	// it follows, or replayed from its own log at start; 0 = none. It
	// orders two actives' states (see keepsState).
	StateToken uint64 `json:"state_token"`
	// Native is the node's native protocol address; absent when it serves
	// none.
	Native string `json:"native,omitempty"`
	// LastIndex is the index of the last record in the node's log, and
	// LogEpoch the epoch in force there (of the last RecEpoch record):
	// the node's log position.
	LastIndex uint64 `json:"last_index"`
	LogEpoch  uint64 `json:"log_epoch"`
	// LogEpochBy is the node that began that epoch (its URL): the active
	// whose records end the log. A node whose log ends in an epoch it
	// began itself was that epoch's active (see replacedBy).
	LogEpochBy string `json:"log_epoch_by,omitempty"`
	// BlindTerm: the node is the active of a term it began on a cold
	// start (after every node was down) without having heard every peer
	// (it listened three failover timeouts, then was elected alone): a
	// peer that comes back with grants its log lacks may hold answered
	// grants, also one whose log's last epoch it began itself (see
	// replacedBy). Absent on every other node.
	BlindTerm bool `json:"blind_term,omitempty"`
	// LogFailing: the node's log has refused writes for a failover
	// timeout or more (and the log's FailTimeout; see logFailAfter): a
	// full disk; it refuses every change, so it is handed no active role.
	LogFailing bool `json:"log_failing,omitempty"`
	// LogDown: the node's log cannot take changes now (Node.logDown: a
	// write refused, or less than MinDiskFree left on data_dir), so it
	// takes no role beside a live node whose log writes (view.logDown):
	// such a node neither waits for it at a failover nor hands off to it.
	LogDown bool `json:"log_down,omitempty"`
	// Peers is the node's peers list (Config.Peers), in its order: every
	// node must have the same one, since its order is the priorities
	// (see peersDiffer). Absent from a node of an older version.
	Peers []string `json:"peers,omitempty"`
	// ClusterID is the node's cluster ID (its data_dir's): nodes with
	// different ones never compare their logs (see foreign). Absent while
	// it has none.
	ClusterID string `json:"cluster_id,omitempty"`
	// Settled: the node has synced with an active, or been one, since it
	// started, so that its ClusterID is the one of the cluster running
	// now (a node started on another cluster's data_dir is not settled
	// until it has synced and adopted its active's ID).
	Settled bool `json:"settled,omitempty"`
	// LoneID: the node created its ClusterID itself, at a promotion (a
	// fresh data_dir), and no standby has synced with it since: nothing but
	// its own word says that cluster is the one its peers run (a node
	// started empty, alone or cut off from the nodes that hold the state).
	// Against a node of another ID that is not lone, it keeps nothing
	// (keepsState, foreignNewer); two lone IDs (a fresh cluster split at
	// its first start, before any standby synced) settle as any two.
	LoneID bool `json:"lone_id,omitempty"`
	// SyncStandbys is the node's sync_standbys (Config.SyncStandbys): a
	// peer whose setting differs from this node's is logged (a promoted
	// node answers by its own setting).
	SyncStandbys int `json:"sync_standbys"`
}

// peer is another node as this one sees it.
type peer struct {
	url      string
	priority int
	contact  time.Time // last successful poll or stream frame
	status   Status    // last answer
	heard    bool
	down     bool // its stream or a call just failed; cleared by the next good poll
	// polled is when the last poll that ended (answered or not) was
	// sent: one sent before a pause and ended after it (its timeout ran
	// across the pause) says nothing of the peer since.
	polled  time.Time
	refused bool // the last answered poll was refused (cluster_secret differs)
	guessed bool // status was set from another node's word, not a poll (peerView.guessed)
	// hadGrants: a poll of it since this node started said it holds state
	// with grants in it (Status.HasState, a StateToken above 0)
	// (peerView.hadGrants).
	hadGrants bool
}

// Node is one member of the cluster. Its exported methods are safe for
// concurrent use.
type Node struct {
	cfg    Config
	eng    *engine.Engine
	log    *slog.Logger
	client *http.Client // peer polls and calls
	stream *http.Client // the replication stream (no overall timeout)
	self   int          // priority of this node
	hub    *hub
	wal    *wal.Log
	tail   *tail
	// installs and resumes count this node's syncs with an active: by a
	// snapshot installed in its log, or resumed from its log's position.
	installs, resumes atomic.Uint64
	// Replication's batches (ReplicationStats): as the active, the records
	// written to standbys' streams, the writes that carried them and the
	// acknowledgements read; as a standby, the records applied from the
	// stream and the acknowledgements sent.
	sentRecords, sentWrites, acksRead atomic.Uint64
	appliedRecords, acksSent          atomic.Uint64
	// lags are the replication lag histograms of the other peers, by
	// URL (lag.go); the map is made by New and never changes.
	lags map[string]*lagHist
	// sync_standbys: degraded while the active goes on without them;
	// degradations and recoveries count the changes of state. Under
	// ackMu: the changes waiting for acknowledgements (waitAcked), in
	// index order; watch, their timer (watchAcks), set while watching;
	// ackQuit once the node closes. ackPool keeps the *ackWait of waits
	// that ended, for the next.
	degraded                 atomic.Bool
	degradations, recoveries atomic.Uint64
	ackMu                    sync.Mutex
	ackWaits                 []*ackWait
	watch                    *time.Timer
	watching, ackQuit        bool
	ackPool                  sync.Pool
	quit                     chan struct{} // closed by Close: changes stop waiting for acknowledgements
	quitOnce                 sync.Once
	// installRetry is when (Node.since) this node, whose last snapshot
	// install failed, may ask for another (follow); installBackoff the
	// wait after the last failure: a failover timeout, doubled with each
	// failure that follows, up to maxInstallBackoff; 0 once one succeeds.
	// Atomics: set under applyMu, which is taken under mu (a promotion),
	// never the other way round.
	installRetry, installBackoff atomic.Int64
	// applyMu is held while a stream frame is applied to the log and the
	// engine: a promotion takes it after stopping the stream reader, so
	// that nothing is applied to a promoted engine.
	applyMu sync.Mutex
	// installedTo is the highest shard dump index of the last snapshot
	// installed from an active (under applyMu): the state holds the
	// active's records up to there for some shards, which this node's
	// log may not have yet (see snapshotBeforeOwnRecords).
	installedTo uint64

	mu        sync.Mutex
	role      string // api.RoleActive, api.RoleStandby
	active    string // URL of the active as this node sees it; "" unknown
	epoch     uint64
	hasState  bool // synced from an active, or was active
	peers     []*peer
	started   time.Time
	following string             // URL whose stream this node reads
	stopSync  context.CancelFunc // ends the stream reader
	synced    bool               // the stream's snapshot is applied
	replicaAt time.Time          // when the replica was last known current; zero = no replica to read (see ReplicaLag)
	// replicaFrom is the active whose stream set replicaAt: following it
	// again (after a break) keeps the replica, and its lag grows on.
	replicaFrom string
	applied     uint64        // the last index of this node's log applied from the stream
	appliedCh   chan struct{} // closed and replaced whenever applied rises
	asked       time.Time     // last handoff request to the active
	everSynced  bool          // followed an active (synced) or was one since Start
	// loneID: this node created its cluster ID at its promotion, and no
	// standby has synced with it since (Status.LoneID).
	loneID bool
	// blindTerm: this node's current term began by a cold start's
	// promotion without every peer heard (action.blind; Status.BlindTerm).
	blindTerm bool
	clusterID string // this node's cluster ID (Config.IDFile); "" none yet
	fetching  bool   // fetching the log's tail before a promotion (actFetch)
	// everFollowed: this node has started to read an active's replication
	// stream since Start (its state may have been replaced, in part, since
	// the replay of its own log).
	everFollowed bool
	// streamBreaks counts the replication streams that broke in a row
	// since streamBrokeSince (logged once, at the first; see
	// streamWorksLocked); 0 while the stream works. streamBrokeFrom is
	// the active whose stream broke: following it again while the breaks
	// last is logged at debug too (refollowLocked).
	streamBreaks     int
	streamBrokeSince time.Time
	streamBrokeFrom  string
	// unfetchable: peers whose records endpoint refused this node's log
	// position (diverged); cleared once synced or promoted.
	unfetchable map[string]bool
	// pausedUnfollowed: this node found it had not run for longer than
	// the failover timeout (a pause) and has not followed an active or
	// been one since (see view.backFromPause).
	pausedUnfollowed bool
	// logBad is when this node first saw its log fail,
	// zero while it writes; logHandoff is the last handoff it started
	// because of that (see view.logFailing).
	logBad, logHandoff time.Time
	moving             bool          // a handoff or step-down is under way
	changed            chan struct{} // closed and replaced when active changes
	arrivals           arrivals      // the calls that wait for an active (ActiveURL)
	closing            bool

	requests chan request     // role changes asked of the loop
	handed   chan handoffDone // handoffs' answers, back to the loop
	kick     chan struct{}    // a decision wanted before the next heartbeat (cap 1)

	// stateToken is Status.StateToken: raised by OnEvent (grants made
	// here) and by the replication stream (grants applied here).
	stateToken atomic.Uint64
	// splitToken: while this node is active and sees another live active,
	// its state token when it first saw one, which its Status reports and
	// its decisions compare instead of stateToken (see markSplitLocked);
	// split says whether it is set. Guarded by mu.
	splitToken uint64
	split      bool
	// splitWith: the URLs of the other live actives this node saw at its
	// last decision while split (markSplitLocked). Guarded by mu.
	splitWith []string
	// resumeMark is the highest token this node granted while Resuming
	// (OnEvent): such a grant reaches its client only once the node knows
	// it is still the active (HoldsBack).
	resumeMark atomic.Uint64

	// Pause guard: base is the node's monotonic clock origin; ticked (ns
	// since base) is the role loop's last tick, and resumed (ns since
	// base, 0 = none) when the loop found it had not run for longer than
	// FailoverTimeout (the process was stopped or starved), so that a
	// standby may have been promoted meanwhile. See Serving.
	base    time.Time
	ticked  atomic.Int64
	resumed atomic.Int64
	// ended is set when the role loop has returned (the node closes, after
	// its handoff): endedResuming, then, whether it was Resuming as it
	// returned, which Resuming answers from then on (no tick comes any
	// more, and a node that closes has not been paused for that).
	ended, endedResuming atomic.Bool
	// stallFrom and stallTo are the last span, longer than a heartbeat,
	// in which the role loop's tick came late (the process was stopped or
	// starved, even for less than FailoverTimeout): no peer could be heard
	// then, and that span is no peer's silence (silence). Guarded by mu.
	stallFrom, stallTo time.Time

	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// New returns a Node for eng, which must have been created as a standby
// (engine.Config.Standby). It starts nothing: Start does. Errors: an
// invalid cfg (Validate's error, or Config.Log missing, or Config.Sync
// missing with SyncStandbys), or a cluster ID file that cannot be read
// or holds no ID (the error names the file).
func New(cfg Config, eng *engine.Engine) (*Node, error) {
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = DefaultHeartbeat
	}
	if cfg.FailoverTimeout == 0 {
		cfg.FailoverTimeout = DefaultFailoverTimeout
	}
	if cfg.SyncTimeout == 0 {
		cfg.SyncTimeout = DefaultSyncTimeout
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Log == nil {
		return nil, errors.New("cluster: Config.Log is required (each node keeps its own log)")
	}
	if cfg.SyncStandbys > 0 && (cfg.Sync == nil || cfg.Sync.Log != cfg.Log) {
		return nil, errors.New("cluster: sync_standbys needs Config.Sync, the SyncLog over Config.Log that the engine writes")
	}
	n := &Node{
		cfg:       cfg,
		eng:       eng,
		log:       cfg.Logger,
		role:      api.RoleStandby,
		appliedCh: make(chan struct{}),
		changed:   make(chan struct{}),
		requests:  make(chan request),
		handed:    make(chan handoffDone),
		kick:      make(chan struct{}, 1),
		base:      time.Now(),
	}
	if n.log == nil {
		n.log = slog.Default()
	}
	if cfg.Transport != nil {
		n.client = &http.Client{Transport: cfg.Transport, Timeout: cfg.FailoverTimeout}
		n.stream = &http.Client{Transport: http1Only(cfg.Transport)}
	} else {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		bindLoopback(tr, cfg.SourceIP)
		tr.MaxIdleConnsPerHost = 8
		tr.ResponseHeaderTimeout = 0
		n.client = &http.Client{Transport: tr, Timeout: cfg.FailoverTimeout}
		n.stream = &http.Client{Transport: rawDial(http1Only(tr).(*http.Transport))}
	}
	n.lags = make(map[string]*lagHist, len(cfg.Peers)-1)
	for i, p := range cfg.Peers {
		if p == cfg.Self {
			n.self = i
			continue
		}
		n.peers = append(n.peers, &peer{url: p, priority: i})
		n.lags[p] = new(lagHist)
	}
	// Each node issues tokens of its own class (its priority modulo
	// MaxPeers): two actives of a partition never issue one token twice.
	eng.SetTokenClass(MaxPeers, n.self)
	n.hub = newHub(cfg.SyncStandbys)
	n.wal = cfg.Log
	max := cfg.TailBytes
	if max == 0 {
		max = DefaultTailBytes
	}
	n.tail = newTail(max)
	em := eng.Epoch()
	n.tail.reset(n.wal.LastIndex(), mark{epoch: em.Epoch, by: em.By})
	n.wal.SetTap(n.tail.add)
	n.wal.SetWriteTap(n.tail.wrote)
	n.watch = time.AfterFunc(time.Hour, n.watchAcks)
	n.watch.Stop()
	n.quit = make(chan struct{})
	if cfg.Sync != nil {
		cfg.Sync.node.Store(n)
	}
	n.hasState = n.wal.LastIndex() > 0
	id, err := readClusterID(cfg.IDFile)
	if err != nil {
		return nil, err
	}
	n.clusterID = id
	n.epoch = em.Epoch
	// The state token of the replayed state: grants replayed before New
	// reached no Node's OnEvent. A node that comes back with grants the
	// active lacks must show them (see ruleRestartNewer in decide).
	n.stateToken.Store(eng.NewestGrant())
	return n, nil
}

// OnEvent keeps the state token from the engine's grants (made here or
// replicated). Wire it into engine.Config.OnEvent; it never blocks. (The
// standbys replicate the log, not the events.)
//
// A grant made while the node is Resuming (its own lease timers, the
// moment it ran again after a pause) does not count toward the state
// token: the node did not know it was still the active, the grant is not
// delivered, and it must not make the state of a node that may have been
// replaced meanwhile look newer than its replacement's.
func (n *Node) OnEvent(ev engine.Event) {
	if ev.Kind != engine.EventGrant {
		return
	}
	if n.Resuming() {
		raise(&n.resumeMark, ev.Token)
		return
	}
	raise(&n.stateToken, ev.Token)
}

// Start begins polling peers and taking roles. The node starts as a
// standby: it takes over only as the rules in the package comment say.
func (n *Node) Start() {
	n.mu.Lock()
	n.started = time.Now()
	n.ctx, n.stop = context.WithCancel(context.Background())
	// The ID read from data_dir, named so that an operator who copied a
	// data_dir from another cluster sees it ("" for a fresh one: the
	// first active sets one, and logs it).
	id := n.clusterID
	n.mu.Unlock()
	for _, p := range n.peers {
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.poll(p)
		}()
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.loop()
	}()
	n.log.Info("cluster node started", "self", n.cfg.Self, "priority", n.self, "peers", len(n.cfg.Peers), "cluster_id", id)
}

// Close leaves the cluster. An active node first hands off to the best
// live synced standby (SPEC section 3, graceful handoff), so that its
// in-flight calls can be redirected there; ctx bounds the handoff. If the
// handoff fails, the node still leaves demoted (it grants nothing more)
// and its standbys fail over; if the successor's answer was lost, the
// node presumes it the active (finishHandoff). Then every goroutine of
// the node ends.
func (n *Node) Close(ctx context.Context) error {
	n.mu.Lock()
	n.closing = true
	active := n.role == api.RoleActive
	n.mu.Unlock()
	var err error
	if active {
		// handoff logs "handoff done" with no_active_ms, the one name of the
		// handoff's gap.
		if _, err = n.handoff(ctx, ""); err != nil {
			n.log.Warn("no confirmed handoff: leaving demoted", "err", err)
		}
	}
	n.quitOnce.Do(func() { close(n.quit) })
	n.stopAcks()
	if n.stop != nil {
		n.stop()
	}
	n.hub.closeAll()
	n.mu.Lock()
	if n.stopSync != nil {
		n.stopSync()
	}
	n.mu.Unlock()
	n.wg.Wait()
	n.wal.SetTap(nil)
	n.wal.SetWriteTap(nil)
	n.tail.stop()
	return err
}

// Serving reports whether this node is the active and may answer as one.
// An active that has not run for longer than FailoverTimeout (stopped,
// frozen or starved) may have been replaced by a promoted standby, so it
// does not serve until its role loop has run again and every peer has
// been polled since: the calls that waited in its sockets meanwhile get 503
// with Retry-After, not grants under a role it may no longer hold.
func (n *Node) Serving() bool { return n.eng.Active() && !n.Resuming() }

// Resuming reports whether this node has not run for longer than
// FailoverTimeout, or has run again since without yet polling every peer:
// its view of the roles is stale.
func (n *Node) Resuming() bool {
	if n.ended.Load() {
		return n.endedResuming.Load()
	}
	return n.since()-n.ticked.Load() > int64(n.cfg.FailoverTimeout) || n.resumed.Load() != 0
}

// HoldsBack reports whether the grant of token must not reach its client:
// this node is Resuming, or token is at or below the highest token it
// granted while Resuming and it has since left the active role (a standby
// promoted in its place meanwhile, whose state may not have the grant; a
// repeat with the same Idempotency-Key finds out there). A grant's answer is written by
// the waiter's goroutine, which may run only after the role loop has
// settled the pause, so the check at answer time alone (Resuming) would
// let such a grant through once the node had stepped down. A grant made
// while Resuming by a node that then stayed the active is delivered; so
// is a grant made by the active before a handoff (it is replicated).
//
// A grant of a term this node stepped down from is not held back here:
// the engine refuses its answer (ErrReplaced) unless the node is the
// active again and its state, taken from the other active, holds the
// grant too (engine.Generation). Holding back every token up to the
// step-down kept such a replicated grant from its waiter's repeats and
// its holder's renewals for good on a node that took the role back.
//
// Token 0 asks about an acquire whose wait ran out (a 408: nothing held,
// and never from this request): it is held back while Resuming and once
// this node is no longer the active, since a standby promoted while it was
// paused has the waiter's place and may grant it (the waiter's repeat with
// its Idempotency-Key then gets that grant). Found by a tester: with a
// holder's release on the promoted node, the resumed node's timer told
// the waiter 408 and its repeat got the lock.
func (n *Node) HoldsBack(token uint64) bool {
	if n.Resuming() {
		return true
	}
	return token <= n.resumeMark.Load() && !n.eng.Active()
}

// RefusedByPeers reports whether every other peer refuses this node's
// peer requests: the last answered poll of each was refused (a 401: its
// cluster_secret differs from this node's). Such a node learns of no
// active from them; its clients are told why (handlers.Gate).
func (n *Node) RefusedByPeers() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.peers {
		if !p.refused {
			return false
		}
	}
	return len(n.peers) > 0
}

// since returns the time since n.base on the monotonic clock, in ns.
func (n *Node) since() int64 { return int64(time.Since(n.base)) }

// http1Only returns rt for the replication stream, its records and its
// acknowledgement connection: when rt is an *http.Transport, a copy that
// speaks HTTP/1.1 only, also to peers serving TLS (which would otherwise
// agree on HTTP/2 by ALPN). The acknowledgement connection is an HTTP/1.1
// protocol upgrade (RFC 9110 section 7.8), which HTTP/2 does not have
// (RFC 9113 section 8.6); and one long-lived stream per connection is
// what HTTP/1.1 gives anyway.
func http1Only(rt http.RoundTripper) http.RoundTripper {
	tr, ok := rt.(*http.Transport)
	if !ok {
		return rt
	}
	tr = tr.Clone()
	tr.Protocols = new(http.Protocols)
	tr.Protocols.SetHTTP1(true)
	// A transport that was used before may carry "h2" in its TLS
	// configuration's ALPN list already: offer HTTP/1.1 alone.
	tc := &tls.Config{}
	if tr.TLSClientConfig != nil {
		tc = tr.TLSClientConfig.Clone()
	}
	tc.NextProtos = []string{"http/1.1"}
	tr.TLSClientConfig = tc
	return tr
}

// bindLoopback makes tr's connections to a loopback address of ip's
// family leave from ip (Config.SourceIP) when ip is a loopback address;
// others, and every connection when it is not, leave from the kernel's
// choice. The dialers are http.DefaultTransport's (30 s to connect,
// keep-alive probes every 30 s).
func bindLoopback(tr *http.Transport, ip net.IP) {
	if ip == nil || !ip.IsLoopback() {
		return
	}
	plain := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	bound := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, LocalAddr: &net.TCPAddr{IP: ip}}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			if to := net.ParseIP(host); to != nil && to.IsLoopback() && (to.To4() == nil) == (ip.To4() == nil) {
				return bound.DialContext(ctx, network, addr)
			}
		}
		return plain.DialContext(ctx, network, addr)
	}
}

// rawDial makes tr's connections read and write with raw system calls
// (rawio): a standby's stream and acknowledgement connections, which wake
// it for every batch of its active's changes. It returns tr.
func rawDial(tr *http.Transport) *http.Transport {
	dial := tr.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return rawio.Wrap(c), nil
	}
	return tr
}

// ActiveNative returns the native protocol address of the active as the
// last status poll of it said, this node's own while it is the active and
// Serving, or "" while no active is known, the active serves no native
// protocol, or this node is the active but Resuming (it does not serve
// until it knows it still is: its own address would send the client back
// to it, again and again, where HTTP answers 503). It does not wait.
func (n *Node) ActiveNative() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.active == n.cfg.Self {
		if !n.Serving() {
			return ""
		}
		return n.cfg.Native
	}
	if p := n.peerByURL(n.active); p != nil && p.heard {
		return p.status.Native
	}
	return ""
}

// View returns this node's view of the cluster for GET /cluster.
func (n *Node) View() api.ClusterView {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	last, _ := n.tail.position()
	v := api.ClusterView{Self: n.cfg.Self, Role: n.role, Active: n.active, LastToken: n.eng.LastToken(), Epoch: n.epoch,
		LastIndex: last, ClusterID: n.clusterID, SyncStandbys: n.cfg.SyncStandbys, SyncDegraded: n.role == api.RoleActive && n.degraded.Load()}
	self := api.PeerView{URL: n.cfg.Self, Priority: n.self, Role: n.role, Live: true, LastContact: &now, LastIndex: last, LogFailing: n.statusLocked().LogFailing, ClusterID: n.clusterID}
	v.Peers = append(v.Peers, self)
	acked := n.hub.acked()
	for _, p := range n.peers {
		pv := api.PeerView{URL: p.url, Priority: p.priority, Live: n.live(p, now), Refused: p.refused}
		if p.heard {
			if pv.Live {
				pv.Role = p.status.Role
			}
			c := p.contact
			pv.LastContact = &c
			pv.LastIndex, pv.LogFailing, pv.ClusterID = p.status.LastIndex, p.status.LogFailing, p.status.ClusterID
		}
		if a, ok := acked[p.url]; ok {
			pv.AckedIndex = &a
		}
		v.Peers = append(v.Peers, pv)
	}
	slices.SortFunc(v.Peers, func(a, b api.PeerView) int { return a.Priority - b.Priority })
	return v
}

func (n *Node) status() Status {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.statusLocked()
}

// statusLocked is this node's Status. n.mu is held.
func (n *Node) statusLocked() Status {
	role := n.role
	if role == api.RoleActive && !n.eng.Active() {
		// Handing off: the engine is demoted and the successor is being
		// promoted with the same state. Reported as active, this node
		// would be one of two actives with equal state tokens to the
		// successor, which would step down if its priority were lower.
		role = api.RoleStandby
	}
	last, m := n.tail.position()
	state := n.stateToken.Load()
	if role == api.RoleActive && n.split {
		state = n.splitToken
	}
	return Status{URL: n.cfg.Self, Role: role, Active: n.active, Priority: n.self, Epoch: n.epoch,
		HasState: n.hasState, LastToken: n.eng.LastToken(), StateToken: state, Native: n.cfg.Native,
		LastIndex: last, LogEpoch: m.epoch, LogEpochBy: m.by, LogFailing: !n.logBad.IsZero() && time.Since(n.logBad) >= n.logFailAfter(),
		LogDown: n.logDown(), Peers: n.cfg.Peers, ClusterID: n.clusterID, Settled: n.everSynced, LoneID: n.loneID,
		BlindTerm: n.blindTerm && role == api.RoleActive, SyncStandbys: n.cfg.SyncStandbys}
}

// logFailAfter is how long the log must have failed before the node counts
// as failing (Status.LogFailing): a failover timeout, and long enough for
// every change caught by the failure to have been answered (the log's
// FailTimeout, and a heartbeat): a grant among them is then marked for a
// take-back (engine.Engine.Undelivered) that a handoff passes on.
func (n *Node) logFailAfter() time.Duration {
	if n.wal == nil {
		return n.cfg.FailoverTimeout
	}
	return max(n.cfg.FailoverTimeout, n.wal.FailTimeout()+n.cfg.Heartbeat)
}

// logDown reports whether this node's log cannot take changes now: it,
// or its token mark, refuses writes (logWrites), or data_dir has less
// than MinDiskFree left (diskLow). See view.logDown.
func (n *Node) logDown() bool { return !n.logWrites() || n.diskLow() }

// diskLow reports whether data_dir's file system has less than
// MinDiskFree left (Config.DiskFree; false when it cannot be told).
func (n *Node) diskLow() bool {
	if n.cfg.DiskFree == nil {
		return false
	}
	free, ok := n.cfg.DiskFree()
	return ok && free < MinDiskFree
}

// logWrites reports whether this node's log writes (a node without a log
// always does) and so does its token high-water mark, beside it on the
// same disk: an active that cannot write the mark refuses every grant
// (engine.ErrUnavailable) though its log may write on, as a full disk does
// to the mark's new file before it fills the log's last page. The engine
// writes a failed mark again every second whatever the node's role, so a
// standby counts as failing only while its disk refuses the mark.
func (n *Node) logWrites() bool {
	return (n.wal == nil || n.wal.Healthy()) && n.eng.TokenMarkWritable()
}

// live reports whether p was heard from within the failover timeout (of
// its silence). n.mu is held.
func (n *Node) live(p *peer, now time.Time) bool {
	return p.heard && !p.down && n.silence(p, now) < n.cfg.FailoverTimeout
}

// freshPolls is how many heartbeats (poll intervals) a peer may have been
// silent and still count as fresh: it answered one of the last polls, a
// round trip included.
const freshPolls = 2

// fresh reports whether p is live and answered one of this node's last
// polls (within freshPolls heartbeats of its silence): the standby a
// handoff goes to first (view.successor). n.mu is held.
func (n *Node) fresh(p *peer, now time.Time) bool {
	return n.live(p, now) && n.silence(p, now) < freshPolls*n.cfg.Heartbeat
}

// recent reports whether p answered within the failover timeout (of its
// silence), even if a call to it failed since: the silence a promotion
// waits for.
func (n *Node) recent(p *peer, now time.Time) bool {
	return p.heard && n.silence(p, now) < n.cfg.FailoverTimeout
}

// silence is how long p has not been heard from at now, less the spans
// since in which this node did not run (its role loop's tick came more
// than a heartbeat late: stopped or starved, the last such span and the
// one under way): its polls and streams could not hear anyone then. A
// stall shorter than FailoverTimeout is not caught by the pause guard
// (resumed), but with the age its last contact had before it, it could
// pass FailoverTimeout: this node then took a peer it could not poll
// meanwhile for a dead one, and promoted itself beside a running active
// on resume, before any poll answered (TestOwnStallIsNoPeersSilence). A
// peer that is gone is still found silent after FailoverTimeout of this
// node's running time. n.mu is held.
func (n *Node) silence(p *peer, now time.Time) time.Duration {
	s := now.Sub(p.contact)
	stalls := [2][2]time.Time{{n.stallFrom, n.stallTo}}
	if due := n.base.Add(time.Duration(n.ticked.Load()) + n.cfg.Heartbeat); now.Sub(due) > n.cfg.Heartbeat {
		stalls[1] = [2]time.Time{due, now}
	}
	for _, st := range stalls {
		from, to := st[0], st[1]
		if from.Before(p.contact) {
			from = p.contact
		}
		if to.After(now) {
			to = now
		}
		if to.After(from) {
			s -= to.Sub(from)
		}
	}
	return s
}

func (n *Node) peerByURL(u string) *peer {
	for _, p := range n.peers {
		if p.url == u {
			return p
		}
	}
	return nil
}

// setActive records who the active is and wakes ActiveURL waiters. n.mu
// is held.
func (n *Node) setActive(u string) {
	if n.active == u {
		return
	}
	n.active = u
	n.broadcast()
}

// broadcast wakes every ActiveURL waiter to look again. n.mu is held.
func (n *Node) broadcast() {
	close(n.changed)
	n.changed = make(chan struct{})
}

// setRole records a role change. n.mu is held.
func (n *Node) setRole(role string) {
	if n.role == role {
		return
	}
	n.role = role
	if role == api.RoleActive {
		n.pausedUnfollowed = false
	}
	if f := n.cfg.OnRole; f != nil {
		f(role)
	}
}

func (n *Node) notify(kind, node, msg string) {
	if f := n.cfg.OnChange; f != nil {
		f(kind, node, msg)
	}
}

func (n *Node) newRequest(ctx context.Context, method, base, path string, q url.Values) (*http.Request, error) {
	u := strings.TrimRight(base, "/") + PathPrefix + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	if n.cfg.Secret != "" {
		req.Header.Set(HeaderSecret, n.cfg.Secret)
	}
	return req, nil
}
