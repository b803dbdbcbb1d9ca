package history

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-io/baton/api"
)

// KindBreak is the kind of the event a feed's collector puts where the
// feed it read broke: events it missed (api.EventList.Missed), or a
// restart of the node (a Seq that does not follow the last one read).
// What the node held across it is unknown to CheckFIFO.
const KindBreak = "history-break"

// CheckFIFO holds one node's event feed (GET /events, oldest first, with
// a KindBreak event where the collector missed some) to SPEC section 1's
// queue: every key's acquires queue in one FIFO across modes, a grant
// made from the queue goes to its head (an exclusive waiter holds back
// every later one, shared or not), and an acquire is granted at once only
// with the queue empty (no newcomer jumps it). Waiters are told apart by
// their owner, which the clients make unique per acquire; a waiter that
// leaves (timeout, cancel) and is queued again by its client's retry
// joins the tail, as the feed shows. One acquire (one owner) is queued
// once and granted once (SPEC section 2, waiter identity: a repeat takes
// over its place, or gets its grant): an enqueue of an owner queued
// already, or a grant to an owner that holds another grant, is reported.
//
// The feed is the node's log applied in order (a standby's feed holds
// what it replicated), so the rule holds through every fault: no window
// excuses it. A key's queue is known from the first event that shows it
// empty (Waiters 0) after the feed began, broke, or showed a "reset" (the
// node's state replaced by a snapshot); keys with the prefixes in skip,
// and events without an owner, are left out (the key is unknown again
// after one). An event whose Waiters is not the queue's length the feed
// implies is reported too: the feed contradicts itself.
//
// It returns one line per violation, and how many of the feed's queue
// events (enqueue, leave, timeout, grant) it judged against a known
// queue.
func CheckFIFO(node int, feed []api.Event, skip ...string) (bad []string, judged int) {
	type waiter struct{ owner, mode string }
	queues := map[string][]waiter{} // key -> its queue, for the keys known
	// The token each owner holds, as the feed showed it granted and not
	// yet ended (whatever is known of its key's queue).
	holding := map[string]uint64{}
	at := func(ev api.Event) string { return ev.At.Format("15:04:05.000") }
	for _, ev := range feed {
		switch ev.Kind {
		case KindBreak, "reset":
			clear(queues)
			clear(holding)
			continue
		}
		if ev.Key == "" || slices.ContainsFunc(skip, func(p string) bool { return strings.HasPrefix(ev.Key, p) }) {
			continue
		}
		switch {
		case ev.Owner == "":
		case ev.Kind == api.EventGrant:
			if tok, ok := holding[ev.Owner]; ok && tok != ev.Token {
				bad = append(bad, fmt.Sprintf("node %d, %s: %s granted %q token %d (seq %d) while it held token %d: one acquire granted twice",
					node, ev.Key, at(ev), ev.Owner, ev.Token, ev.Seq, tok))
			}
			holding[ev.Owner] = ev.Token
		case ev.Kind == api.EventRelease || ev.Kind == api.EventExpire:
			if holding[ev.Owner] == ev.Token {
				delete(holding, ev.Owner)
			}
		}
		q, known := queues[ev.Key]
		if !known {
			if ev.Waiters == 0 {
				queues[ev.Key] = nil
			}
			continue
		}
		queued := slices.IndexFunc(q, func(w waiter) bool { return w.owner == ev.Owner })
		switch ev.Kind {
		case api.EventEnqueue, api.EventLeave, api.EventTimeout, api.EventGrant:
			if ev.Owner == "" {
				delete(queues, ev.Key)
				continue
			}
		}
		switch ev.Kind {
		case api.EventEnqueue, api.EventLeave, api.EventTimeout, api.EventGrant:
			judged++
		}
		switch ev.Kind {
		case api.EventEnqueue:
			if queued >= 0 {
				bad = append(bad, fmt.Sprintf("node %d, %s: %s enqueue of %q (seq %d), which is queued already: one acquire queued twice",
					node, ev.Key, at(ev), ev.Owner, ev.Seq))
			}
			q = append(q, waiter{ev.Owner, ev.Mode})
		case api.EventLeave, api.EventTimeout:
			if queued < 0 {
				bad = append(bad, fmt.Sprintf("node %d, %s: %s %s of %q, which is not queued (seq %d)", node, ev.Key, at(ev), ev.Kind, ev.Owner, ev.Seq))
				delete(queues, ev.Key)
				continue
			}
			q = slices.Delete(q, queued, queued+1)
		case api.EventGrant:
			switch {
			case queued > 0:
				var ahead []string
				for _, w := range q[:queued] {
					ahead = append(ahead, fmt.Sprintf("%s %q", w.mode, w.owner))
				}
				bad = append(bad, fmt.Sprintf("node %d, %s: %s granted %s %q (token %d, seq %d) from the queue while %s, queued before it, still waited: not FIFO",
					node, ev.Key, at(ev), ev.Mode, ev.Owner, ev.Token, ev.Seq, strings.Join(ahead, ", ")))
			case queued < 0 && len(q) > 0:
				bad = append(bad, fmt.Sprintf("node %d, %s: %s granted %s %q (token %d, seq %d) at once, never queued, while %d waiters queued (first %s %q): jumped the queue",
					node, ev.Key, at(ev), ev.Mode, ev.Owner, ev.Token, ev.Seq, len(q), q[0].mode, q[0].owner))
			}
			if queued >= 0 {
				q = slices.Delete(q, queued, queued+1)
			}
		default: // release, expire, renew, claim: the queue stays
		}
		if len(q) != ev.Waiters {
			bad = append(bad, fmt.Sprintf("node %d, %s: %s %s of %q (seq %d) says %d waiters, the feed before it queued %d",
				node, ev.Key, at(ev), ev.Kind, ev.Owner, ev.Seq, ev.Waiters, len(q)))
			delete(queues, ev.Key)
			continue
		}
		queues[ev.Key] = q
	}
	return bad, judged
}

// CheckExpiries holds the nodes' event feeds (feeds[i] is node i's, as
// CheckFIFO takes them) to SPEC section 1's lease: the server takes a lock
// back (an "expire" event) only once the holder neither released nor
// renewed within its lease, so never before the expires_at a grant or a
// renewal of that token announced (their ExpiresAt, which the holder was
// told). An expire event slack or more before the latest such deadline
// any feed showed is a lease cut short, outside the windows ws
// (a cut-off active may renew a grant that the other side expires as it
// knew it). Only the tokens of grants, which clients received, are
// judged: a grant made to a waiter whose request had gone away awaits
// its claim and ends at the claim deadline, before its lease, also as an
// "expire" (TestHistoryChaos CHAOS_SEED=4812). Nor is a deadline that
// node i announced inside one of unwritten[i] (nil: none), the spans in
// which its log refused writes: a renewal made then was answered 503
// (engine.ErrNotWritten: "until a renewal is answered, count on the
// lease as it was"), and is lost if the node hands off before its log
// writes it (TestDiskHistoryChaos seed 1: a renewal announced in a full
// disk's second, the node handing off, the successor expiring the lease
// the holder was told to count on). It returns one line per token
// expired early outside the windows, and the count inside them.
func CheckExpiries(feeds [][]api.Event, grants []Grant, ws []Window, unwritten [][]Window, slack time.Duration) (bad []string, fenced int) {
	at := func(tm time.Time) string { return tm.Format("15:04:05.000") }
	type deadline struct {
		until time.Time
		node  int
		kind  string
	}
	// The latest deadline a grant or a renewal announced, by token; a
	// token's renewals all come before its expiry on the node that
	// expires it.
	type expiry struct {
		ev   api.Event
		node int
	}
	latest := map[uint64]deadline{}
	var expires []expiry
	for i, feed := range feeds {
		for _, ev := range feed {
			switch ev.Kind {
			case api.EventGrant, api.EventRenew:
				if i < len(unwritten) && InWindows(unwritten[i], ev.At, ev.At) {
					continue
				}
				if ev.ExpiresAt != nil && ev.At.Before(*ev.ExpiresAt) {
					if d, ok := latest[ev.Token]; !ok || ev.ExpiresAt.After(d.until) {
						latest[ev.Token] = deadline{*ev.ExpiresAt, i, ev.Kind}
					}
				}
			case api.EventExpire:
				expires = append(expires, expiry{ev, i})
			}
		}
	}
	received := map[uint64]bool{}
	for _, g := range grants {
		received[g.Token] = true
	}
	done := map[uint64]bool{}
	for _, x := range expires {
		d, ok := latest[x.ev.Token]
		if !ok || !received[x.ev.Token] || done[x.ev.Token] || !x.ev.At.Add(slack).Before(d.until) {
			continue
		}
		done[x.ev.Token] = true
		if InWindows(ws, x.ev.At, d.until) {
			fenced++
			continue
		}
		bad = append(bad, fmt.Sprintf("%s: outside any fault window, node %d expired %s token %d at %s, %v before the lease a %s on node %d announced (expires_at %s)",
			x.ev.Key, x.node, x.ev.Mode, x.ev.Token, at(x.ev.At), d.until.Sub(x.ev.At).Round(time.Millisecond), d.kind, d.node, at(d.until)))
	}
	return bad, fenced
}

// CheckDropped holds the grants their clients dropped (Grant.Dropped: a
// holder that died, neither renewing nor releasing) to SPEC section 1's
// lease: the server takes the lock back once the lease runs out, and
// hands it on as a release would. The nodes' feeds (as CheckExpiries
// takes them) must show each such token ended (an "expire", or a
// "release": an operator's, or a grant taken back) by slack after the
// latest expires_at its grant or renewals announced. A token whose grant
// no feed showed is not judged. One whose lease meets a window ws (from
// its grant to that deadline plus slack) is counted, not reported: a
// failover with async replication may lose the grant with its lease, a
// paused active runs no timer. It returns one line per grant held past
// its lease outside the windows, the count inside them, and how many
// dropped grants it judged.
func CheckDropped(grants []Grant, feeds [][]api.Event, ws []Window, slack time.Duration) (bad []string, fenced, judged int) {
	at := func(tm time.Time) string { return tm.Format("15:04:05.000") }
	deadline := map[uint64]time.Time{} // the latest expires_at announced
	ended := map[uint64]api.Event{}    // the earliest end any feed showed
	for _, feed := range feeds {
		for _, ev := range feed {
			switch ev.Kind {
			case api.EventGrant, api.EventRenew:
				if ev.ExpiresAt != nil && ev.ExpiresAt.After(deadline[ev.Token]) {
					deadline[ev.Token] = *ev.ExpiresAt
				}
			case api.EventExpire, api.EventRelease:
				if e, ok := ended[ev.Token]; !ok || ev.At.Before(e.At) {
					ended[ev.Token] = ev
				}
			}
		}
	}
	for _, g := range grants {
		d, ok := deadline[g.Token]
		if !g.Dropped || !ok {
			continue
		}
		judged++
		e, over := ended[g.Token]
		if over && !e.At.After(d.Add(slack)) {
			continue
		}
		if InWindows(ws, g.Granted, d.Add(slack)) {
			fenced++
			continue
		}
		end := "no feed showed it ended"
		if over {
			end = fmt.Sprintf("%s at %s, %v past it", e.Kind, at(e.At), e.At.Sub(d).Round(time.Millisecond))
		}
		bad = append(bad, fmt.Sprintf("%s: outside any fault window, %s grant %d (received %s) dropped by its client, lease to %s: %s",
			g.Key, g.Mode, g.Token, at(g.Granted), at(d), end))
	}
	return bad, fenced, judged
}

// CheckFeedTokens holds one node's event feed (as CheckFIFO takes it) to
// SPEC section 1's fencing token: each grant's token is above every token
// issued before it anywhere, so the grants of one key a node's feed shows
// (its own, and those it replicated, in its log's order) carry rising
// tokens, whatever the faults, through promotions and handoffs. (Across
// keys a feed's order is not the order the tokens were issued in: the
// engine reports changes in order per key, and grants of two keys made
// at once may come in either order.) The order starts again where the
// feed broke or showed a "reset" (the snapshot's holders that follow it
// are of other times: a grant made before the break or reset is left
// out).
func CheckFeedTokens(node int, feed []api.Event) (bad []string) {
	last := map[string]api.Event{} // by key
	var since time.Time            // grants made before it are left out
	for _, ev := range feed {
		switch ev.Kind {
		case KindBreak, "reset":
			clear(last)
			since = ev.At
			continue
		case api.EventGrant:
		default:
			continue
		}
		if ev.At.Before(since) {
			continue
		}
		if l, ok := last[ev.Key]; ok && ev.Token <= l.Token {
			bad = append(bad, fmt.Sprintf("node %d, %s: %s granted token %d (seq %d) after token %d (seq %d, %s): tokens fell",
				node, ev.Key, ev.At.Format("15:04:05.000"), ev.Token, ev.Seq, l.Token, l.Seq, l.At.Format("15:04:05.000")))
		}
		last[ev.Key] = ev
	}
	return bad
}
