package history

import (
	"fmt"
	"time"
)

// CheckTimeouts holds the acquires answered that their wait ran out
// (api.ErrTimeout) to SPEC section 1: grant and timeout are decided
// atomically, so a caller told "timeout" never holds the lock (README:
// "a caller told 408 never holds the lock"). seen are the holders nodes
// showed (the listings of actives, and the grants of their event feeds,
// with Asked and Seen the grant's time): a holder whose owner label is
// that of such an acquire, shown in a listing asked for (or granted)
// after the timeout was answered, held the lock of a caller told 408.
// One that meets a window ws from the answer to when it was seen is
// counted (a node cut off or paused may grant an attempt its client gave
// up on, which the client settles), not reported. Owner labels must be
// unique per acquire (Loop makes them so). It returns one line per
// timeout whose lock was held outside the windows, and the count inside.
func CheckTimeouts(timeouts []Outcome, seen []Sighting, ws []Window) (bad []string, fenced int) {
	at := func(tm time.Time) string { return tm.Format("15:04:05.000") }
	byOwner := map[string]Outcome{}
	for _, o := range timeouts {
		if o.Owner != "" {
			byOwner[o.Owner] = o
		}
	}
	reported, counted := map[string]bool{}, map[string]bool{}
	for _, s := range seen {
		o, ok := byOwner[s.Owner]
		if !ok || s.Owner == "" || o.Key != s.Key || !s.Asked.After(o.Answered) {
			continue
		}
		if InWindows(ws, o.Answered, s.Seen) {
			if !counted[o.Owner] {
				counted[o.Owner] = true
				fenced++
			}
			continue
		}
		if reported[o.Owner] {
			continue
		}
		reported[o.Owner] = true
		bad = append(bad, fmt.Sprintf("%s: outside any fault window, held after 408: client %d's %s acquire %q (asked %s) was answered %q at %s, and node %d showed %q holding %s with token %d at %s",
			o.Key, o.Client, o.Mode, o.Owner, at(o.Asked), o.Err, at(o.Answered), s.Node, s.Owner, s.Key, s.Token, at(s.Asked)))
	}
	return bad, fenced
}

// CheckHangs holds the acquires that their clients gave up unanswered
// (Outcome from Recorder.Hangs: no answer by the client's deadline, its
// wait plus the grace Loop gives) to SPEC section 1 and 4: an acquire is
// answered when its wait runs out, a grant or a 408, and a client asks
// another node once one is silent past its wait and grace. One whose span
// meets a window ws is counted (a node paused or cut off is silent), not
// reported. It returns one line per hang outside the windows, and the
// count inside.
func CheckHangs(hangs []Outcome, ws []Window) (bad []string, fenced int) {
	at := func(tm time.Time) string { return tm.Format("15:04:05.000") }
	for _, o := range hangs {
		if InWindows(ws, o.Asked, o.Answered) {
			fenced++
			continue
		}
		bad = append(bad, fmt.Sprintf("%s: outside any fault window, client %d's %s acquire %q asked at %s had no answer when its client gave up at %s (%s): %s",
			o.Key, o.Client, o.Mode, o.Owner, at(o.Asked), at(o.Answered), o.Answered.Sub(o.Asked).Round(time.Millisecond), o.Err))
	}
	return bad, fenced
}

// CheckOwners holds the grants the clients received to the holders the
// nodes showed (listings, and the grants of the event feeds): every
// holder has its own grant and its own token (SPEC section 1), so a token
// a client received is shown, on any node and at any time, as the
// holder of the key that client asked for, with the owner label of its
// acquire; shown with another key or owner, the grant went to another
// acquire than the one the node recorded (no fault excuses it: tokens
// are never issued twice, even by two actives). It returns one line per
// token shown so.
func CheckOwners(grants []Grant, seen []Sighting) (bad []string) {
	at := func(tm time.Time) string { return tm.Format("15:04:05.000") }
	byToken := map[uint64]Grant{}
	for _, g := range grants {
		if g.Owner != "" {
			byToken[g.Token] = g
		}
	}
	reported := map[uint64]bool{}
	for _, s := range seen {
		g, ok := byToken[s.Token]
		if !ok || reported[s.Token] || (s.Key == g.Key && s.Owner == g.Owner) {
			continue
		}
		reported[s.Token] = true
		bad = append(bad, fmt.Sprintf("token %d: client %d received it for %s acquire %q of %s (at %s), and node %d showed it as %s %q's holder of %s (at %s)",
			s.Token, g.Client, g.Mode, g.Owner, g.Key, at(g.Granted), s.Node, s.Mode, s.Owner, s.Key, at(s.Asked)))
	}
	return bad
}
