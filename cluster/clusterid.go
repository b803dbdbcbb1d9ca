package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/baton-io/baton/internal/durable"
)

// IDFileName is the file in data_dir that holds the cluster ID
// (Config.IDFile): 32 hex digits and a newline.
const IDFileName = "cluster_id"

// headerClusterID carries the active's cluster ID on its replication
// stream, and a standby's on its request for it.
const headerClusterID = "Baton-Cluster-Id"

// newClusterID returns a random 128-bit cluster ID in hex.
func newClusterID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// readClusterID reads the cluster ID kept in path: "" when the file does
// not exist (a fresh data_dir, or one an older baton wrote).
func readClusterID(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cluster ID %s: %w", path, err)
	}
	id := strings.TrimSpace(string(b))
	if _, err := hex.DecodeString(id); err != nil || len(id) != 32 {
		return "", fmt.Errorf("cluster ID %s: %q is not 32 hex digits (remove the file to have the node adopt its active's ID)", path, id)
	}
	return id, nil
}

// writeClusterID keeps id in path durably: a temporary file written and
// fsynced, renamed over path, and the directory fsynced. path "" keeps
// nothing.
func writeClusterID(path, id string) error {
	if path == "" {
		return nil
	}
	return durable.WriteFile(path, []byte(id+"\n"))
}

// foreign reports whether a and b hold different cluster IDs: both have
// one, and they differ. Their logs are then of two clusters, which are
// never compared (see decide). A node without an ID (fresh, or its
// data_dir written by an older baton) is foreign to none.
func foreign(a, b Status) bool {
	return a.ClusterID != "" && b.ClusterID != "" && a.ClusterID != b.ClusterID
}

// setClusterIDLocked makes id this node's cluster ID and keeps it in
// Config.IDFile; a failure to write it is logged (the node keeps the ID
// in memory, and writes it again at its next change). n.mu is held.
func (n *Node) setClusterIDLocked(id, why string) {
	if id == "" || id == n.clusterID {
		return
	}
	old := n.clusterID
	n.clusterID = id
	n.loneID = false // (a promotion that creates the ID sets it after)
	if err := writeClusterID(n.cfg.IDFile, id); err != nil {
		n.log.Error("the cluster ID could not be written to data_dir", "file", n.cfg.IDFile, "cluster_id", id, "err", err)
	}
	if old != "" {
		n.log.Error("this node's cluster ID differed from its active's: its state was replaced by the active's, and it takes the active's ID (its data_dir held another cluster's state, or the cluster split at its first start)",
			"data_dir_cluster_id", old, "cluster_id", id, "file", n.cfg.IDFile, "why", why)
		return
	}
	n.log.Info("cluster ID set", "cluster_id", id, "file", n.cfg.IDFile, "why", why)
}
