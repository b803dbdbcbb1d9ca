package cluster

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/baton-io/baton/api"
	"github.com/baton-io/baton/engine"
)

// TestMemResetComesBeforeTheSnapshotsEvents: a node that steps down and
// installs the active's snapshot reports it in its feed as "reset", which
// says that the events before it are of a state the node no longer has
// (api.EventReset). The snapshot's own holders and waiters, which its
// load reports as grants and enqueues, are of the new state: they come
// after the reset, so that a reader of the feed who starts over at the
// reset (TestHistoryChaos's FIFO check, CHAOS_SEED=4600) finds the new
// state there. They came before it, and the reader took them for the
// discarded state.
func TestMemResetComesBeforeTheSnapshotsEvents(t *testing.T) {
	var mu sync.Mutex
	feeds := map[string][]string{} // node URL -> "kind key token"
	c := newMemCluster(t, 2, func(cfg *Config) {
		self, prev := cfg.Self, cfg.OnChange
		cfg.OnChange = func(kind, node, msg string) {
			mu.Lock()
			feeds[self] = append(feeds[self], kind)
			mu.Unlock()
			prev(kind, node, msg)
		}
	})
	c.onEvent = func(i int, ev engine.Event) {
		mu.Lock()
		feeds[c.urls[i]] = append(feeds[c.urls[i]], ev.Kind.String()+" "+ev.Key)
		mu.Unlock()
	}
	c.start(0, 1)
	c.waitActive(0)
	c.isolate(0, true)
	c.waitFor("two actives", func() bool { return len(c.actives()) == 2 })
	c.grant(0, "lost")
	c.grant(1, "kept") // node 1's tokens start a margin above: the newer state
	c.isolate(0, false)
	c.waitFor("node 0 stepped down and installed node 1's snapshot", func() bool {
		return c.nodes[0].changed(api.EventStepDown) == 1 && c.nodes[0].node.installs.Load() > 0 && c.holds(0, "kept") != 0
	})
	c.waitActive(0)

	mu.Lock()
	feed := slices.Clone(feeds[c.urls[0]])
	mu.Unlock()
	down := slices.Index(feed, api.EventStepDown)
	reset := slices.Index(feed, api.EventReset)
	if down < 0 || reset < down {
		t.Fatalf("node 0's feed %q: no %s after its %s", feed, api.EventReset, api.EventStepDown)
	}
	for _, ev := range feed[down:reset] {
		if strings.HasSuffix(ev, " kept") {
			t.Fatalf("node 0's feed %q: the snapshot's %q before the %s", feed, ev, api.EventReset)
		}
	}
	if !slices.Contains(feed[reset:], "grant kept") {
		t.Errorf("node 0's feed %q: the snapshot's holder of kept not reported after the %s", feed, api.EventReset)
	}
}
