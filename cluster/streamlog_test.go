package cluster

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-io/baton/engine"
)

// logLines is a slog handler's output, read while the nodes write it.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count returns the lines holding every one of parts.
func (l *logLines) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := 0
	for _, line := range strings.Split(l.buf.String(), "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			k++
		}
	}
	return k
}

// A standby whose disk is full breaks its replication stream at every
// record it cannot write and opens it again a few hundred ms later: the
// break is logged once when it starts, and once more when the stream
// works again (every break was logged as a warning, and every reopening,
// which resumed from its log, at INFO).
func TestMemStandbyFullDiskStreamLoggedOnce(t *testing.T) {
	var lines logLines
	c := newMemCluster(t, 2, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&lines, &slog.HandlerOptions{Level: slog.LevelInfo})).With("self", cfg.Self)
	})
	c.start(0, 1)
	c.waitActive(0)
	g := c.grant(0, "a")
	c.waitFor("the grant replicated", func() bool { return c.holds(1, "a") == g.Token })
	standby := c.nodes[1]
	self := "self=" + standby.url
	breaks := func() int {
		standby.node.mu.Lock()
		defer standby.node.mu.Unlock()
		return standby.node.streamBreaks
	}
	resumed := func() int { return lines.count(self, "synced with the active: resumed from its log") }
	before := resumed()
	standby.diskFull.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Its answer does not matter: the record reaches the standby.
	_, _ = c.nodes[0].eng.Acquire(ctx, engine.AcquireRequest{Key: "b", Lease: time.Minute})
	c.waitFor("three breaks of the standby's stream", func() bool { return breaks() >= 3 })
	if n := lines.count(self, "replication stream ended"); n != 1 {
		t.Errorf("%d warnings of the standby's stream ending over %d breaks, want 1", n, breaks())
	}
	// Each reopening resumed from the standby's log, then broke: that was
	// an INFO line every few hundred ms too.
	if n := resumed() - before; n != 0 {
		t.Errorf("%d INFO lines of resuming from the log over %d breaks, want 0 (logged at debug while the stream keeps breaking)", n, breaks())
	}
	standby.diskFull.Store(false)
	c.waitFor("the stream working again", func() bool { return breaks() == 0 })
	if n := lines.count(self, "replication stream works again"); n != 1 {
		t.Errorf("%d logs of the stream working again, want 1", n)
	}
}

// The same standby follows its active again after each break: that too is
// logged once, not at every reopening (two INFO lines every few hundred ms
// while the stream kept breaking, as for a node that the other nodes do
// not list as a peer, whose streams they refuse).
func TestMemStandbyRefollowLoggedOnce(t *testing.T) {
	var lines logLines
	c := newMemCluster(t, 2, func(cfg *Config) {
		cfg.Logger = slog.New(slog.NewTextHandler(&lines, &slog.HandlerOptions{Level: slog.LevelInfo})).With("self", cfg.Self)
	})
	c.start(0, 1)
	c.waitActive(0)
	g := c.grant(0, "a")
	c.waitFor("the grant replicated", func() bool { return c.holds(1, "a") == g.Token })
	standby := c.nodes[1]
	breaks := func() int {
		standby.node.mu.Lock()
		defer standby.node.mu.Unlock()
		return standby.node.streamBreaks
	}
	self := "self=" + standby.url
	before := lines.count(self, "following")
	standby.diskFull.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = c.nodes[0].eng.Acquire(ctx, engine.AcquireRequest{Key: "b", Lease: time.Minute})
	c.waitFor("four breaks of the standby's stream", func() bool { return breaks() >= 4 })
	if n := lines.count(self, "following") - before; n > 2 {
		t.Errorf("%d INFO lines of following the same active again over %d breaks, want at most 2 (the first reopening)", n, breaks())
	}
	standby.diskFull.Store(false)
	c.waitFor("the stream working again", func() bool { return breaks() == 0 })
}
