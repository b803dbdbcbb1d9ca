package main

import (
	"strings"
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// baton events shows the owner wherever it shows a holder or a waiter
// (SPEC section 1: the owner is "shown wherever the holder or the waiter
// is shown"), says which holders shared, and marks an operator's release,
// as GET /events and the status page do. It printed none of the three: an
// operator following `baton events` could not tell a forced release from
// the holder's own, nor whose grant it ended (Hazelcast #16810, Consul
// #1290: who held the dangling lock is the first question).
func TestEventTextShowsOwnerModeAndForce(t *testing.T) {
	at := time.Date(2026, 12, 3, 16, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		ev   api.Event
		want []string
		not  []string
	}{
		{
			ev:   api.Event{Kind: api.EventGrant, At: at, Key: "quota", Token: 7, Lease: 30, Waiters: 1, Owner: "crawler 7", Mode: api.ModeExclusive, Limit: 3},
			want: []string{`grant`, `"quota"`, `token 7`, `owner "crawler 7"`, `limit 3`},
			not:  []string{`shared`, `forced`},
		},
		{
			ev:   api.Event{Kind: api.EventRelease, At: at, Key: "quota", Token: 7, Waiters: 1, Owner: "crawler 7", Mode: api.ModeExclusive, Forced: true},
			want: []string{`release`, `token 7`, `owner "crawler 7"`, `forced`},
		},
		{
			ev:   api.Event{Kind: api.EventEnqueue, At: at, Key: "config", Lease: 30, Waiters: 2, Owner: "reader-2", Mode: api.ModeShared, Limit: 1},
			want: []string{`enqueue`, `owner "reader-2"`, `shared`},
			not:  []string{`limit`, `forced`},
		},
		{
			ev:  api.Event{Kind: api.EventRelease, At: at, Key: "plain", Token: 9, Waiters: 0, Mode: api.ModeExclusive},
			not: []string{`owner`, `shared`, `forced`, `limit`},
		},
	} {
		got := eventText(c.ev)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("eventText(%+v) = %q: no %q", c.ev, got, w)
			}
		}
		for _, w := range c.not {
			if strings.Contains(got, w) {
				t.Errorf("eventText(%+v) = %q: has %q", c.ev, got, w)
			}
		}
	}
}
