package main

import (
	"testing"

	"github.com/baton-io/baton/api"
)

// TestEventsResumeAcrossARestart: a client that follows GET /events and
// resumes after a restart of the node with the Seq it last received (an
// EventSource's Last-Event-ID, the status page's ?since=) gets every event
// of the new run. Each run numbered its events from 1, so once the new
// run had made as many events as the Seq named, the resume skipped them
// all: the "watch missed after a restart" class (NVIDIA/OpenShell#3209's
// review: a cursor of the run before silently skips the new run's events
// up to it; grafana/grafana#130332). A run now numbers from its start
// time in microseconds, above every Seq of an earlier run.
func TestEventsResumeAcrossARestart(t *testing.T) {
	leakCheck(t)
	cfg, err := loadConfig([]string{"--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// cycles takes and releases a lock n times on a new run of the node,
	// and returns the grants' tokens and the newest Seq.
	cycles := func(n int) (map[uint64]bool, uint64, *Node) {
		node, err := OpenNode(cfg, quietLog())
		if err != nil {
			t.Fatal(err)
		}
		c, err := api.NewClient(api.Config{Addresses: []string{node.URL()}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		tokens := map[uint64]bool{}
		for range n {
			g, err := c.Acquire(t.Context(), "k")
			if err != nil {
				t.Fatal(err)
			}
			tokens[g.Token] = true
			if err := g.Release(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		l, err := c.Events(t.Context(), api.EventsOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tokens, l.Last, node
	}
	_, seen, first := cycles(5)
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	tokens, _, node := cycles(8)
	defer node.Close()
	c := apiClient(t, node.URL())
	l, err := c.Events(t.Context(), api.EventsOptions{Since: seen})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range l.Events {
		if ev.Kind == api.EventGrant {
			delete(tokens, ev.Token)
		}
	}
	if len(tokens) > 0 || l.Missed != 0 {
		t.Errorf("GET /events?since=%d (the last Seq of the run before the restart): %d events, missed %d; %d of the 8 grants of the new run are not among them",
			seen, len(l.Events), l.Missed, len(tokens))
	}
}
