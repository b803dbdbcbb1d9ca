package cluster

import (
	"time"

	"github.com/baton-io/baton/api"
)

// ReplicaLag reports whether this node is a standby whose engine holds a
// whole replica of the active's state, which it may answer reads from (SPEC
// section 2, "Reads on standbys"), and how old that replica may be: the
// time since the last frame of the replication stream, a change or an idle
// heartbeat, each of which says the replica was current when the active
// sent it. While the stream runs, the lag stays below about one heartbeat
// plus the network's delay; after the stream broke (the active died, a
// failover is under way) the replica is kept and its lag grows until a new
// stream starts, which resets the replica (ok is false until that stream's
// snapshot is applied). ok is false on the active, and on a standby that has
// not synced.
func (n *Node) ReplicaLag() (lag time.Duration, ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.role != api.RoleStandby || n.replicaAt.IsZero() {
		return 0, false
	}
	return time.Since(n.replicaAt), true
}
