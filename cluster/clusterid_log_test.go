package cluster

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-io/baton/internal/testproc"
)

// A node started alone on a data_dir that already holds a cluster ID
// (copied from another cluster's node, say) is promoted without setting
// an ID, so "cluster ID set" is never logged: its "cluster node started"
// and "promoted to active" lines name the ID, so that an operator sees
// which cluster's state the node serves.
func TestMemLoneNodeLogsItsClusterID(t *testing.T) {
	var buf testproc.Buffer
	c := newMemCluster(t, 1, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&buf, nil))
	})
	id := newClusterID()
	c.closeNode(0)
	if err := writeClusterID(filepath.Join(c.nodes[0].dir, IDFileName), id); err != nil {
		t.Fatal(err)
	}
	c.open(0)
	c.start(0)
	c.waitActive(0)
	log := buf.String()
	for _, msg := range []string{`msg="cluster node started"`, `msg="promoted to active"`} {
		line := ""
		for l := range strings.Lines(log) {
			if strings.Contains(l, msg) {
				line = l
				break
			}
		}
		if line == "" {
			t.Errorf("no %s line in the log:\n%s", msg, log)
		} else if !strings.Contains(line, "cluster_id="+id) {
			t.Errorf("%s line without cluster_id=%s: %s", msg, id, line)
		}
	}
}
