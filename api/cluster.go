package api

import "time"

// Roles a node reports in ClusterView.Role and PeerView.Role.
const (
	RoleActive  = "active"  // serves /locks
	RoleStandby = "standby" // follows the active; answers reads from its replica, other /locks calls with 307
)

// HeaderReplicaLag is set on the answers a standby gives from its replica
// (GET /locks, GET /locks/{key}, GET /events): how old the replica may be,
// in seconds with three decimals (SPEC section 2, "Reads on standbys").
const HeaderReplicaLag = "Baton-Replica-Lag"

// ClusterView is the answer to GET /cluster: one node's view of the
// cluster (SPEC section 3). A single node reports itself as the only peer,
// active, with priority 0.
type ClusterView struct {
	// Self is this node's base URL, as it stands in the peers list.
	Self string `json:"self"`
	// Role is this node's role: RoleActive or RoleStandby.
	Role string `json:"role"`
	// Active is the base URL of the node this one takes for the active;
	// empty while no active is known.
	Active string `json:"active"`
	// Peers lists every node of the cluster, this one included, in
	// priority order.
	Peers []PeerView `json:"peers"`
	// LastToken is the highest fencing token this node has issued or seen.
	LastToken uint64 `json:"last_token"`
	// Epoch counts promotions: each new active takes 1 + the highest
	// epoch it has seen. It is for people: which of two actives keeps its
	// state is decided by the newest grant each one's state holds.
	Epoch uint64 `json:"epoch"`
	// Build names the baton build this node runs.
	Build Build `json:"build"`
	// LastIndex is the index of the last record in this node's log of
	// changes (a standby's holds the active's records at the active's
	// indexes), a single node's included.
	LastIndex uint64 `json:"last_index"`
	// ClusterID is this node's cluster ID (32 hex digits), kept in its
	// data_dir: a node never compares its log with one of another ID.
	// Empty while the node has none (it adopts its active's).
	ClusterID string `json:"cluster_id,omitempty"`
	// SyncStandbys is the sync_standbys setting: how many standbys must
	// have written a change to their logs before it is answered.
	SyncStandbys int `json:"sync_standbys"`
	// SyncDegraded is true on an active that goes on without its
	// sync_standbys (fewer acknowledged within sync_timeout, or fewer of
	// its peers were live when it was promoted), until enough of them
	// acknowledge its last index again.
	SyncDegraded bool `json:"sync_degraded"`
}

// Build names one build of baton (GET /cluster, `baton version`).
type Build struct {
	// Version is the release ("v1.2.3"), or "(devel)" for a build from a
	// source tree that is not a tagged module version.
	Version string `json:"version"`
	// Commit is the VCS revision built ("+dirty" when the tree had
	// uncommitted changes); "" when unknown.
	Commit string `json:"commit"`
	// Go is the Go release that built the node ("go1.26.8").
	Go string `json:"go"`
}

// PeerView is one node as another node sees it.
type PeerView struct {
	// URL is the node's base URL.
	URL string `json:"url"`
	// Priority is the node's place in the peers list: 0 is the highest.
	Priority int `json:"priority"`
	// Role is the node's role as its last status said, while it is Live:
	// RoleActive or RoleStandby. It is "" when the node was never heard
	// from or is not Live: a silent node's last role is not reported, so a
	// former active that died is never shown as a second active.
	Role string `json:"role"`
	// Live reports whether the node was heard from within the failover
	// timeout.
	Live bool `json:"live"`
	// LastContact is when the node was last heard from; nil if never.
	LastContact *time.Time `json:"last_contact" extensions:"x-nullable"`
	// LastIndex is the last index of the node's log, as its last status
	// said (this node's own for itself).
	LastIndex uint64 `json:"last_index"`
	// AckedIndex, in the active's view of a standby that streams from it,
	// is the last index the standby acknowledged having in its log; its
	// replication lag in records is the active's LastIndex minus it.
	// Absent otherwise.
	AckedIndex *uint64 `json:"acked_index,omitempty"`
	// LogFailing reports, as the node's last status said, that its log
	// has refused writes for a failover timeout or more (a full disk): it
	// refuses every change and is handed no active role. Absent otherwise.
	LogFailing bool `json:"log_failing,omitempty"`
	// ClusterID is the node's cluster ID as its last status said (this
	// node's own for itself); one that differs from the active's is
	// replaced once the node syncs. Absent while unknown or none.
	ClusterID string `json:"cluster_id,omitempty"`
	// Refused reports that the node refuses this node's peer requests
	// (401: its cluster_secret differs from this node's): it counts as
	// Live, with no Role and no state, and is neither followed nor
	// replaced. Absent otherwise.
	Refused bool `json:"refused,omitempty"`
}
