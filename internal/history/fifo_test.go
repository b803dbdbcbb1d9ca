package history

import (
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// TestCheckFIFOCatchesQueueOrderBroken feeds CheckFIFO made-up feeds: a
// grant past the head of the queue, a newcomer granted at once before the
// waiters, a later reader granted past a queued writer, and a count of
// waiters the feed does not add up to are violations; grants in queue
// order, readers at the head granted together, a waiter that left and
// queued again behind the others, and what comes before a key's queue is
// known or across a break are not.
func TestCheckFIFOCatchesQueueOrderBroken(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var seq uint64
	// Each event of a kind that carries a token has a token of its own,
	// but a release names the token of the owner's last grant.
	tokens := map[string]uint64{}
	ev := func(kind, owner, mode string, waiters int) api.Event {
		seq++
		e := api.Event{Seq: seq, Kind: kind, At: t0.Add(time.Duration(seq) * time.Millisecond), Key: "k", Owner: owner, Mode: mode, Waiters: waiters}
		switch kind {
		case api.EventGrant:
			e.Token = seq
			tokens[owner] = seq
		case api.EventRelease, api.EventExpire:
			e.Token = tokens[owner]
		}
		return e
	}
	const sh, ex = api.ModeShared, api.ModeExclusive
	grant := func(owner, mode string, waiters int) api.Event { return ev(api.EventGrant, owner, mode, waiters) }
	enq := func(owner, mode string, waiters int) api.Event { return ev(api.EventEnqueue, owner, mode, waiters) }
	rel := func(owner, mode string, waiters int) api.Event { return ev(api.EventRelease, owner, mode, waiters) }
	for _, tc := range []struct {
		name string
		feed []api.Event
		bad  bool
	}{
		{"grants in queue order", []api.Event{grant("a", ex, 0), enq("b", ex, 1), enq("c", ex, 2), rel("a", ex, 2), grant("b", ex, 1), rel("b", ex, 1), grant("c", ex, 0)}, false},
		{"the second waiter granted first", []api.Event{grant("a", ex, 0), enq("b", ex, 1), enq("c", ex, 2), rel("a", ex, 2), grant("c", ex, 1)}, true},
		{"a newcomer granted at once past the queue", []api.Event{grant("a", ex, 0), enq("b", ex, 1), rel("a", ex, 1), grant("x", ex, 1)}, true},
		{"readers at the head granted together", []api.Event{grant("w", ex, 0), enq("r1", sh, 1), enq("r2", sh, 2), enq("w2", ex, 3), rel("w", ex, 3), grant("r1", sh, 2), grant("r2", sh, 1)}, false},
		{"a later reader past a queued writer", []api.Event{grant("r", sh, 0), enq("w", ex, 1), enq("r2", sh, 2), grant("r2", sh, 1)}, true},
		{"a reader granted at once beside a reader, past a queued writer", []api.Event{grant("r", sh, 0), enq("w", ex, 1), grant("r2", sh, 1)}, true},
		{"a waiter that left and queued again", []api.Event{grant("a", ex, 0), enq("b", ex, 1), enq("c", ex, 2), ev(api.EventLeave, "b", ex, 1), enq("b", ex, 2), rel("a", ex, 2), grant("c", ex, 1), rel("c", ex, 1), grant("b", ex, 0)}, false},
		{"a waiter that timed out", []api.Event{grant("a", ex, 0), enq("b", ex, 1), enq("c", ex, 2), ev(api.EventTimeout, "b", ex, 1), rel("a", ex, 1), grant("c", ex, 0)}, false},
		{"waiters counted wrong", []api.Event{grant("a", ex, 0), enq("b", ex, 1), enq("c", ex, 1)}, true},
		{"before the queue is known", []api.Event{enq("b", ex, 2), grant("c", ex, 1), rel("c", ex, 1), grant("b", ex, 0)}, false},
		{"across a break", []api.Event{grant("a", ex, 0), enq("b", ex, 1), {Kind: KindBreak}, enq("c", ex, 2), grant("c", ex, 1)}, false},
		{"one acquire queued twice", []api.Event{grant("a", ex, 0), enq("b", ex, 1), enq("b", ex, 2)}, true},
		{"one acquire granted twice", []api.Event{grant("a", ex, 0), ev(api.EventGrant, "a", ex, 0)}, true},
		{"one acquire granted again after its grant ended", []api.Event{grant("a", ex, 0), rel("a", ex, 0), grant("a", ex, 0)}, false},
		{"across a reset", []api.Event{grant("a", ex, 0), enq("b", ex, 1), {Kind: "reset"}, enq("c", ex, 2), grant("c", ex, 1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, _ := CheckFIFO(1, tc.feed)
			if (len(bad) > 0) != tc.bad {
				t.Errorf("violations %q; want some: %v", bad, tc.bad)
			}
		})
	}
	// Keys left out are not judged, nor their owners' grants (one owner
	// for all, as the full-disk faults' spill takes them).
	feed := []api.Event{grant("a", ex, 0), enq("b", ex, 1), enq("c", ex, 2), rel("a", ex, 2), grant("c", ex, 1), ev(api.EventGrant, "c", ex, 1)}
	if bad, judged := CheckFIFO(1, feed, "k"); len(bad) > 0 || judged > 0 {
		t.Errorf("a key left out: violations %q, %d events judged", bad, judged)
	}
}

// TestCheckExpiriesCatchesALeaseCutShort: an expire event of a grant a
// client received, before the expires_at its grant or its last renewal
// announced, on any node's feed, is a violation outside a window and
// counted inside one; one at or after it is not, nor one of a grant no
// client received.
func TestCheckExpiriesCatchesALeaseCutShort(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) *time.Time { tm := t0.Add(time.Duration(n) * time.Millisecond); return &tm }
	ev := func(kind string, at int, expires *time.Time) api.Event {
		return api.Event{Kind: kind, Key: "k", Token: 7, Mode: api.ModeExclusive, At: *ms(at), ExpiresAt: expires}
	}
	for _, tc := range []struct {
		name  string
		feeds [][]api.Event
		bad   bool
	}{
		{"expired at its lease's end", [][]api.Event{{ev(api.EventGrant, 0, ms(2000)), ev(api.EventExpire, 2001, nil)}}, false},
		{"expired before its grant's lease ended", [][]api.Event{{ev(api.EventGrant, 0, ms(2000)), ev(api.EventExpire, 1500, nil)}}, true},
		{"expired at the grant's end, past a renewal", [][]api.Event{{ev(api.EventGrant, 0, ms(2000)), ev(api.EventRenew, 1000, ms(3000)), ev(api.EventExpire, 2001, nil)}}, true},
		{"a renewal on one node, expired early on another", [][]api.Event{{ev(api.EventGrant, 0, ms(2000)), ev(api.EventRenew, 1000, ms(3000))}, {ev(api.EventExpire, 2001, nil)}}, true},
		{"expired past the renewal's end", [][]api.Event{{ev(api.EventGrant, 0, ms(2000)), ev(api.EventRenew, 1000, ms(3000)), ev(api.EventExpire, 3002, nil)}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			received := []Grant{{Key: "k", Token: 7}}
			// A grant no client received (one awaiting its claim ends at
			// the claim deadline, before its lease) is not judged.
			if bad, fenced := CheckExpiries(tc.feeds, nil, nil, nil, 50*time.Millisecond); len(bad) > 0 || fenced > 0 {
				t.Errorf("no grant received: violations %q, fenced %d; want none", bad, fenced)
			}
			bad, fenced := CheckExpiries(tc.feeds, received, nil, nil, 50*time.Millisecond)
			if (len(bad) == 1) != tc.bad || len(bad) > 1 || fenced != 0 {
				t.Errorf("outside any window: violations %q, fenced %d; want one: %v", bad, fenced, tc.bad)
			}
			// A renewal announced while its node's log refused writes
			// (answered 503, lost at a handoff) sets no deadline.
			unwritten := [][]Window{{{Name: "log failing", Start: *ms(900), End: *ms(1100)}}}
			bad, _ = CheckExpiries(tc.feeds, received, nil, unwritten, 50*time.Millisecond)
			if renewed := tc.name == "expired at the grant's end, past a renewal" || tc.name == "a renewal on one node, expired early on another"; renewed && len(bad) > 0 {
				t.Errorf("a renewal announced while the log refused writes: violations %q; want none", bad)
			} else if !renewed && (len(bad) == 1) != tc.bad {
				t.Errorf("with a log-failing span around no renewal: violations %q; want one: %v", bad, tc.bad)
			}
			ws := []Window{{Name: "cut", Start: *ms(0), End: *ms(4000)}}
			bad, fenced = CheckExpiries(tc.feeds, received, ws, nil, 50*time.Millisecond)
			if len(bad) > 0 || (fenced == 1) != tc.bad {
				t.Errorf("inside a window: violations %q, fenced %d; want one counted: %v", bad, fenced, tc.bad)
			}
		})
	}
}

// TestCheckDroppedCatchesALeaseThatNeverEnds: a grant its client dropped
// whose lease the feeds show ended late, or not at all, is a violation
// outside a window and counted inside one; one ended by its lease (an
// expire, or a release) is not, nor one no feed showed granted, nor one
// its client did not drop.
func TestCheckDroppedCatchesALeaseThatNeverEnds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) *time.Time { tm := t0.Add(time.Duration(n) * time.Millisecond); return &tm }
	ev := func(kind string, at int, expires *time.Time) api.Event {
		return api.Event{Kind: kind, Key: "k", Token: 7, Mode: api.ModeExclusive, At: *ms(at), ExpiresAt: expires}
	}
	dropped := []Grant{{Key: "k", Token: 7, Mode: api.ModeExclusive, Granted: *ms(5), Ending: *ms(2000), Dropped: true}}
	for _, tc := range []struct {
		name   string
		grants []Grant
		feeds  [][]api.Event
		bad    bool
	}{
		{"expired by its lease", dropped, [][]api.Event{{ev(api.EventGrant, 0, ms(2000)), ev(api.EventExpire, 2010, nil)}}, false},
		{"released (taken back) before its lease", dropped, [][]api.Event{{ev(api.EventGrant, 0, ms(2000))}, {ev(api.EventRelease, 900, nil)}}, false},
		{"expired long past its lease", dropped, [][]api.Event{{ev(api.EventGrant, 0, ms(2000)), ev(api.EventExpire, 5000, nil)}}, true},
		{"expired past a renewal's lease", dropped, [][]api.Event{{ev(api.EventGrant, 0, ms(2000)), ev(api.EventRenew, 10, ms(2010)), ev(api.EventExpire, 5000, nil)}}, true},
		{"never ended", dropped, [][]api.Event{{ev(api.EventGrant, 0, ms(2000))}}, true},
		{"no feed showed the grant", dropped, [][]api.Event{{ev(api.EventExpire, 5000, nil)}}, false},
		{"not dropped", []Grant{{Key: "k", Token: 7, Granted: *ms(5), Ending: *ms(100)}}, [][]api.Event{{ev(api.EventGrant, 0, ms(2000))}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, fenced, _ := CheckDropped(tc.grants, tc.feeds, nil, time.Second)
			if (len(bad) == 1) != tc.bad || len(bad) > 1 || fenced != 0 {
				t.Errorf("outside any window: violations %q, fenced %d; want one: %v", bad, fenced, tc.bad)
			}
			ws := []Window{{Name: "pause", Start: *ms(1000), End: *ms(1500)}}
			bad, fenced, _ = CheckDropped(tc.grants, tc.feeds, ws, time.Second)
			if len(bad) > 0 || (fenced == 1) != tc.bad {
				t.Errorf("inside a window: violations %q, fenced %d; want one counted: %v", bad, fenced, tc.bad)
			}
		})
	}
}

// TestCheckFeedTokensCatchesATokenThatFalls: a node's feed that grants a
// key a token at or below the one before is a violation; another key's
// lower token after it (the feed's order across keys is not the tokens'),
// or one across a break or a reset (whose snapshot's holders come with
// their own, older times), is not.
func TestCheckFeedTokensCatchesATokenThatFalls(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := func(token uint64, at int) api.Event {
		return api.Event{Kind: api.EventGrant, Key: "k", Token: token, At: t0.Add(time.Duration(at) * time.Millisecond)}
	}
	other := func(token uint64, at int) api.Event { e := g(token, at); e.Key = "other"; return e }
	mark := func(kind string, at int) api.Event {
		return api.Event{Kind: kind, At: t0.Add(time.Duration(at) * time.Millisecond)}
	}
	for _, tc := range []struct {
		name string
		feed []api.Event
		bad  bool
	}{
		{"rising", []api.Event{g(1, 0), g(2, 1), g(9, 2)}, false},
		{"a token that falls", []api.Event{g(1, 0), g(5, 1), g(4, 2)}, true},
		{"another key's lower token after", []api.Event{g(1, 0), g(5, 1), other(4, 0)}, false},
		{"a token granted again", []api.Event{g(5, 0), g(5, 1)}, true},
		{"across a break", []api.Event{g(5, 0), mark(KindBreak, 10), g(4, 11)}, false},
		{"a snapshot's holders after a reset", []api.Event{g(5, 0), mark("reset", 10), g(3, 2), g(2, 1), g(6, 12), g(7, 13)}, false},
		{"falling after a reset", []api.Event{g(5, 0), mark("reset", 10), g(7, 12), g(6, 13)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if bad := CheckFeedTokens(0, tc.feed); (len(bad) > 0) != tc.bad {
				t.Errorf("violations %q; want some: %v", bad, tc.bad)
			}
		})
	}
}
