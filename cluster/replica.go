package cluster

import (
	"time"

	"github.com/baton-io/baton/api"
)

// ReplicaLag reports whether this node is a standby whose engine holds a
// whole replica of the active's state, which it may answer reads from (SPEC
// section 2, "Reads on standbys"), and how old that replica may be: the
// time since it was last known current, that is since the last batch of
// changes it applied and wrote to its log, the last idle heartbeat of the
// stream (the active sends one once this node has every change it wrote,
// and this node had written them too), or the snapshot it installed.
// While the stream runs, the lag stays below about one heartbeat plus the
// network's delay. After the stream broke (the active died, a failover is
// under way, a cut, this node's log refusing the records: a full disk)
// the replica is kept and its lag grows, also while a stream of the same
// active is reopened and resumed from this node's log, until that stream
// brings it current; a stream of another active resets the replica (ok is
// false until its snapshot is applied or it is current). ok is false on
// the active, and on a standby that has not synced.
func (n *Node) ReplicaLag() (lag time.Duration, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.role != api.RoleStandby || n.replicaAt.IsZero() {
		return 0, false
	}
	return time.Since(n.replicaAt), true
}
