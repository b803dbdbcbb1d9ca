// Package history is the one history checker of baton's process tests
// (cluster and cmd/baton): lock clients record every grant as they saw it
// (when they asked, when the grant came back, when they released it, and
// whether the release was told the lock was no longer theirs), and Check
// holds the recorded history to SPEC section 1: the admission rule of each
// key's limit and mode, tokens that rise, and no answered hold dropped by
// the server, outside the fault windows in which SPEC section 3 does not
// promise them.
//
// It is test-only: nothing outside _test.go files imports it.
package history

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-io/baton/api"
)

// Grant is one lock a client held, as it saw it.
type Grant struct {
	Client int    // the number of the client that held it
	Key    string // the key held
	Owner  string // the acquire's owner label, unique per acquire (Loop)
	Limit  int    // the key's limit (0 reads as 1)
	Mode   string // api.ModeShared, or exclusive ("" reads as exclusive)
	Token  uint64 // the grant's fencing token
	// Asked: Acquire called; Granted: Acquire returned; Ending: Release
	// called. The server's hold spans [Granted, Ending] at least, its
	// grant lies in [Asked, Granted].
	Asked, Granted, Ending time.Time
	// Lost is set when the release was answered, at LostAt and before the
	// lease could have run out (Asked + lease), that the lock was not the
	// client's any more (api.ErrNotHeld or api.ErrNotHolder, which the
	// client returns only when no earlier attempt of the release may have
	// reached a server): the server dropped a hold it had answered. It
	// holds the error's text.
	Lost   string
	LostAt time.Time
	// Released is when the release was answered that it ended the hold
	// (zero when it was not: an error, or Lost). From then on no active
	// node may show the grant as a holder (CheckReleases).
	Released time.Time
	// Dropped: the client neither renewed nor released the grant, as a
	// holder that died (Loop.DropShare); its Ending is its lease's end.
	Dropped bool
}

func (g Grant) shared() bool { return g.Mode == api.ModeShared }

// together reports whether SPEC section 1's admission rule (engine's
// canGrant) lets grants a and b of one key hold at once, as a pair:
// shared and exclusive holders never hold together, and under the limit 1
// an exclusive holder holds alone.
func together(a, b Grant, limit int) bool {
	if a.shared() != b.shared() {
		return false
	}
	return limit > 1 || a.shared()
}

// Window is a time span around a fault in which mutual exclusion, token
// order and holds are not guaranteed (SPEC section 3).
type Window struct {
	Name       string    // names the fault, for messages
	Start, End time.Time // the span, both ends included
}

// InWindows reports whether [from, to] meets one of ws.
func InWindows(ws []Window, from, to time.Time) bool {
	for _, w := range ws {
		if !to.Before(w.Start) && !from.After(w.End) {
			return true
		}
	}
	return false
}

// KeyFigures is what Check saw of one key.
type KeyFigures struct {
	Grants, Shared int // grants seen, and how many of them were shared
	Most           int // most holders seen holding at once
}

// Check holds grants to SPEC section 1, outside the windows ws: the
// admission rule for every grant against the grants that held its key when
// it was received (never more than the key's limit holders above limit 1;
// under limit 1 an exclusive holder alone or shared holders only; never a
// shared beside an exclusive holder); tokens that rise (a grant's token is
// above the token of every grant received before it was asked for, of any
// key, and of every earlier grant it could not hold beside); no token
// granted twice, none of 2^53 or more;
// and no lost hold (Grant.Lost). Client-side spans lie inside the
// server's holds, so every overlap reported is a real one.
//
// It returns the violations outside the windows, one line each; the count
// of violations inside them (expected, and harmless for a resource that
// fences on tokens); and per key the grants checked and the most holders
// seen together. With ws empty every violation is reported.
func Check(grants []Grant, ws []Window) (bad []string, fenced int, figs map[string]KeyFigures) {
	return CheckOrderIn(grants, ws, ws)
}

// CheckOrderIn is Check with token order judged outside orderWs rather
// than ws: tokens rise across failovers and restarts (SPEC section 1, with
// clocks that agree, as on one machine), where mutual exclusion and holds
// do not (SPEC section 3, async replication), so a run may give its kills
// windows for the one and none for the other. A partition (two actives at
// once) needs a window for both.
func CheckOrderIn(grants []Grant, ws, orderWs []Window) (bad []string, fenced int, figs map[string]KeyFigures) {
	at := func(tm time.Time) string { return tm.Format("15:04:05.000") }
	seen := map[uint64]Grant{}
	for _, g := range grants {
		if o, dup := seen[g.Token]; dup {
			bad = append(bad, fmt.Sprintf("token %d granted twice: %+v and %+v", g.Token, o, g))
		}
		if g.Token >= 1<<53 {
			// SPEC section 1: below 2^53, so that JavaScript reads it exactly.
			bad = append(bad, fmt.Sprintf("%s: token %d is 2^53 or more", g.Key, g.Token))
		}
		seen[g.Token] = g
		if g.Lost == "" {
			continue
		}
		if InWindows(ws, g.Granted, g.LostAt) {
			fenced++
			continue
		}
		bad = append(bad, fmt.Sprintf("%s: outside any fault window, lost hold: %s grant %d (asked %s, received %s) was told %q at %s, before its lease could end",
			g.Key, g.Mode, g.Token, at(g.Asked), at(g.Granted), g.Lost, at(g.LostAt)))
	}
	b, f := crossKeyOrder(grants, orderWs)
	bad, fenced = append(bad, b...), fenced+f
	byKey := map[string][]Grant{}
	for _, g := range grants {
		byKey[g.Key] = append(byKey[g.Key], g)
	}
	figs = map[string]KeyFigures{}
	for key, gs := range byKey {
		slices.SortFunc(gs, func(a, b Grant) int { return a.Granted.Compare(b.Granted) })
		// top[i] is the grant with the highest token among gs[:i+1].
		top := make([]Grant, len(gs))
		for i, g := range gs {
			top[i] = g
			if i > 0 && top[i-1].Token > g.Token {
				top[i] = top[i-1]
			}
		}
		var f KeyFigures
		var holding []Grant
		var lastShared, lastExcl *Grant // highest-token earlier grant of each mode
		for i, b := range gs {
			limit := max(1, b.Limit)
			// to ends b's span for the windows: its Ending, or its receipt
			// when that came later (a grant received after the lease it
			// was asked with could have run out: an empty hold, whose
			// span would otherwise run backwards and meet no window).
			to := b.Ending
			if to.Before(b.Granted) {
				to = b.Granted
			}
			f.Grants++
			if b.shared() {
				f.Shared++
			}
			holding = slices.DeleteFunc(holding, func(a Grant) bool { return !b.Granted.Before(a.Ending) })
			from, over := b.Granted, len(holding)+1 > limit && (limit > 1 || !b.shared())
			for _, a := range holding {
				if !together(a, b, limit) {
					over = true
				}
				if a.Granted.Before(from) {
					from = a.Granted
				}
			}
			f.Most = max(f.Most, len(holding)+1)
			if over {
				if InWindows(ws, from, to) {
					fenced++
				} else {
					var with []string
					for _, a := range holding {
						with = append(with, fmt.Sprintf("%s %d (%s..%s)", a.Mode, a.Token, at(a.Granted), at(a.Ending)))
					}
					bad = append(bad, fmt.Sprintf("%s (limit %d): outside any fault window, %s grant %d (%s..%s) held beside %s",
						key, limit, b.Mode, b.Token, at(b.Granted), at(b.Ending), strings.Join(with, ", ")))
				}
			}
			// Tokens rise: every grant received before b was asked for
			// was granted before b; so was every earlier grant b could
			// not hold beside, or b held when it was granted.
			var before []Grant
			if j, _ := slices.BinarySearchFunc(gs[:i], b.Asked, func(g Grant, tm time.Time) int { return g.Granted.Compare(tm) }); j > 0 {
				before = append(before, top[j-1])
			}
			for _, a := range []*Grant{lastShared, lastExcl} {
				if a != nil && !together(*a, b, limit) && (len(before) == 0 || before[0].Token != a.Token) {
					before = append(before, *a)
				}
			}
			for _, a := range before {
				if a.Token < b.Token {
					continue
				}
				if InWindows(orderWs, a.Granted, to) {
					fenced++
					continue
				}
				bad = append(bad, fmt.Sprintf("%s (limit %d): outside any fault window, %s grant %d (received %s) then %s grant %d (asked %s, received %s): token order broken",
					key, limit, a.Mode, a.Token, at(a.Granted), b.Mode, b.Token, at(b.Asked), at(b.Granted)))
			}
			last := &lastExcl
			if b.shared() {
				last = &lastShared
			}
			if *last == nil || (*last).Token < b.Token {
				*last = &gs[i]
			}
			holding = append(holding, b)
		}
		figs[key] = f
	}
	return bad, fenced, figs
}

// Sighting is one holder an active node showed: the grant Token of Key,
// in a listing asked for at Asked and answered at Seen.
type Sighting struct {
	Node        int    // the number of the node that showed it
	Key         string // the key held
	Limit       int    // the key's limit, as the node reported it
	Mode        string // the holder's mode
	Owner       string // the holder's owner label
	Token       uint64 // the grant's fencing token
	Asked, Seen time.Time
}

// CheckReleases holds the sightings to the rule that a release answered
// as done is not forgotten (SPEC section 1: nothing a client was told is
// lost): a node asked, as active, for its holders after the release of a
// grant was answered must not show that grant holding its key. A sighting
// that meets a window ws from the release to when it was seen is counted
// (a failover with async replication may lose a release, a cut-off node
// still calls itself active) and not reported. It returns one line per
// grant whose release was forgotten outside the windows, and the count
// inside them.
func CheckReleases(grants []Grant, seen []Sighting, ws []Window) (bad []string, fenced int) {
	at := func(tm time.Time) string { return tm.Format("15:04:05.000") }
	released := map[uint64]Grant{}
	for _, g := range grants {
		if !g.Released.IsZero() {
			released[g.Token] = g
		}
	}
	// The first sighting of each grant after its release, per window
	// verdict: one line per forgotten release is enough.
	first := map[uint64]Sighting{}
	counted := map[uint64]bool{}
	for _, s := range seen {
		g, ok := released[s.Token]
		if !ok || g.Key != s.Key || !s.Asked.After(g.Released) {
			continue
		}
		if InWindows(ws, g.Released, s.Seen) {
			if !counted[s.Token] {
				counted[s.Token] = true
				fenced++
			}
			continue
		}
		if f, ok := first[s.Token]; !ok || s.Asked.Before(f.Asked) {
			first[s.Token] = s
		}
	}
	toks := slices.Sorted(maps.Keys(first))
	for _, tok := range toks {
		s, g := first[tok], released[tok]
		bad = append(bad, fmt.Sprintf("%s: outside any fault window, lost release: %s grant %d (received %s) was answered released at %s, and node %d, active, showed it holding in a listing asked for at %s",
			g.Key, g.Mode, g.Token, at(g.Granted), at(g.Released), s.Node, at(s.Asked)))
	}
	return bad, fenced
}

// CheckListings holds each key's holders in one listing of an active node
// (the sightings of one node asked for at one time), together with every
// grant a client received before the listing was asked for and did not
// release before it was answered, to SPEC section 1's admission rule: the
// server held all of them at once while it answered. It catches a double
// hold whose other holder no client saw (a grant nobody received, a
// holder the server kept after its client stopped holding) and one the
// client spans alone place apart. A listing that meets a window ws from
// the earliest grant in it to its answer is counted, not reported. It
// returns one line per listing outside the windows that breaks the rule,
// and the count inside them.
func CheckListings(grants []Grant, seen []Sighting, ws []Window) (bad []string, fenced int) {
	at := func(tm time.Time) string { return tm.Format("15:04:05.000") }
	byKey := map[string][]Grant{}
	for _, g := range grants {
		byKey[g.Key] = append(byKey[g.Key], g)
	}
	for _, gs := range byKey {
		slices.SortFunc(gs, func(a, b Grant) int { return a.Granted.Compare(b.Granted) })
	}
	type listing struct {
		node  int
		key   string
		asked time.Time
	}
	lists := map[listing][]Sighting{}
	var order []listing
	for _, s := range seen {
		l := listing{s.Node, s.Key, s.Asked}
		if _, ok := lists[l]; !ok {
			order = append(order, l)
		}
		lists[l] = append(lists[l], s)
	}
	for _, l := range order {
		ss := lists[l]
		limit, seenAt := max(1, ss[0].Limit), ss[0].Seen
		held := map[uint64]Grant{}
		for _, s := range ss {
			held[s.Token] = Grant{Key: s.Key, Limit: limit, Mode: s.Mode, Token: s.Token, Granted: s.Asked}
		}
		gs := byKey[l.key]
		n, _ := slices.BinarySearchFunc(gs, l.asked, func(g Grant, tm time.Time) int { return g.Granted.Compare(tm) })
		for _, g := range gs[:n] {
			if g.Ending.After(seenAt) {
				held[g.Token] = g
			}
		}
		hs := slices.SortedFunc(maps.Values(held), func(a, b Grant) int { return cmp.Compare(a.Token, b.Token) })
		over := len(hs) > limit && (limit > 1 || !hs[0].shared())
		from := l.asked
		for i, a := range hs {
			if a.Granted.Before(from) {
				from = a.Granted
			}
			for _, b := range hs[i+1:] {
				if !together(a, b, limit) {
					over = true
				}
			}
		}
		if !over {
			continue
		}
		if InWindows(ws, from, seenAt) {
			fenced++
			continue
		}
		var with []string
		for _, h := range hs {
			who := "shown by the node"
			if _, ok := held[h.Token]; ok && !h.Asked.IsZero() {
				who = fmt.Sprintf("received %s, ending %s", at(h.Granted), at(h.Ending))
			}
			with = append(with, fmt.Sprintf("%s %d (%s)", h.Mode, h.Token, who))
		}
		bad = append(bad, fmt.Sprintf("%s (limit %d): outside any fault window, double hold: node %d, active, answered a listing asked for at %s (answered %s) while holding together %s",
			l.key, limit, l.node, at(l.asked), at(seenAt), strings.Join(with, ", ")))
	}
	return bad, fenced
}

// crossKeyOrder is Check's token order across keys (SPEC section 1: a
// token is above every token issued before it anywhere in the cluster,
// across keys): a grant's token is above that of every grant of another key
// received before it was asked for. (Check's per-key rules judge grants of
// one key.) It returns the violations outside ws and the count inside.
func crossKeyOrder(grants []Grant, ws []Window) (bad []string, fenced int) {
	at := func(tm time.Time) string { return tm.Format("15:04:05.000") }
	gs := slices.Clone(grants)
	slices.SortFunc(gs, func(a, b Grant) int { return a.Granted.Compare(b.Granted) })
	// first[i] is the grant of the highest token among gs[:i+1], second[i]
	// the highest among those of another key than first[i]'s (nil: none).
	first, second := make([]*Grant, len(gs)), make([]*Grant, len(gs))
	for i := range gs {
		g := &gs[i]
		var f, sec *Grant
		if i > 0 {
			f, sec = first[i-1], second[i-1]
		}
		switch {
		case f == nil || g.Token > f.Token:
			if f != nil && f.Key != g.Key {
				sec = f
			}
			f = g
		case g.Key != f.Key && (sec == nil || g.Token > sec.Token):
			sec = g
		}
		first[i], second[i] = f, sec
	}
	for _, b := range gs {
		j, _ := slices.BinarySearchFunc(gs, b.Asked, func(g Grant, tm time.Time) int { return g.Granted.Compare(tm) })
		if j == 0 {
			continue
		}
		a := first[j-1]
		if a.Key == b.Key {
			a = second[j-1]
		}
		if a == nil || a.Token < b.Token {
			continue
		}
		if InWindows(ws, a.Granted, b.Granted) {
			fenced++
			continue
		}
		bad = append(bad, fmt.Sprintf("%s: outside any fault window, %s grant %d of %s (received %s) then %s grant %d of %s (asked %s, received %s): token order across keys broken",
			b.Key, a.Mode, a.Token, a.Key, at(a.Granted), b.Mode, b.Token, b.Key, at(b.Asked), at(b.Granted)))
	}
	return bad, fenced
}

// Recorder collects the grants and the errors of concurrent clients.
type Recorder struct {
	mu       sync.Mutex
	grants   []Grant
	errs     []string
	timeouts []Outcome
	hangs    []Outcome
}

// Outcome is an acquire that ended without a grant: told that its wait
// ran out (api.ErrTimeout), or given up by its client's deadline with no
// answer (a hang).
type Outcome struct {
	Client          int
	Key, Mode       string
	Owner           string // the acquire's owner label, unique (Loop)
	Asked, Answered time.Time
	Err             string
}

// AddTimeout records an acquire answered api.ErrTimeout.
func (r *Recorder) AddTimeout(o Outcome) {
	r.mu.Lock()
	r.timeouts = append(r.timeouts, o)
	r.mu.Unlock()
}

// AddHang records an acquire its client's deadline ended unanswered.
func (r *Recorder) AddHang(o Outcome) {
	r.mu.Lock()
	r.hangs = append(r.hangs, o)
	r.mu.Unlock()
}

// Timeouts returns a copy of the acquires answered api.ErrTimeout.
func (r *Recorder) Timeouts() []Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.timeouts)
}

// Hangs returns a copy of the acquires left unanswered past their
// client's deadline.
func (r *Recorder) Hangs() []Outcome {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hangs)
}

// Add records one grant.
func (r *Recorder) Add(g Grant) {
	r.mu.Lock()
	r.grants = append(r.grants, g)
	r.mu.Unlock()
}

// Fail records a client error (an acquire or release that failed), after
// the time it is recorded (15:04:05.000).
func (r *Recorder) Fail(format string, args ...any) {
	msg := time.Now().Format("15:04:05.000 ") + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.errs = append(r.errs, msg)
	r.mu.Unlock()
}

// Count returns how many grants were recorded so far.
func (r *Recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.grants)
}

// Grants returns a copy of the grants recorded so far.
func (r *Recorder) Grants() []Grant {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.grants)
}

// Errs returns a copy of the errors recorded so far.
func (r *Recorder) Errs() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.errs)
}

// KeySpec is one key the clients use: its limit (0 or 1: the default) and
// the share of acquires made in shared mode (0: all exclusive, a mutex or
// counting semaphore; between 0 and 1: a read/write lock's mix of readers
// and writers).
type KeySpec struct {
	Name   string
	Limit  int
	Shared float64
}

// PlainKeys are mutex keys: limit 1, exclusive holders only.
func PlainKeys(names ...string) []KeySpec {
	var ks []KeySpec
	for _, n := range names {
		ks = append(ks, KeySpec{Name: n})
	}
	return ks
}

// Loop is what one client does: acquire a key drawn from Keys (with its
// limit and a mode drawn by its shared share) with Lease, waiting up to
// Wait, hold it for Hold (or, in a LongShare of the holds, for LongHold),
// release it, and again.
type Loop struct {
	Keys       []KeySpec
	Lease      time.Duration
	Wait       time.Duration
	Hold       time.Duration
	LongHold   time.Duration
	LongShare  float64 // 0..1
	Seed       uint64  // with the client's number, seeds its draws
	ErrorPause time.Duration
	// RenewEvery, when above 0, renews the grant with Lease every
	// RenewEvery while it is held (a hold longer than Lease lives on
	// renewals). A renewal answered that the lock is not the client's,
	// before the lease its last answered renewal (or the grant) gave
	// could end, is a lost hold (Grant.Lost).
	RenewEvery time.Duration
	// DropShare (0..1) of the grants the client drops as a holder that
	// died does: it neither renews nor releases them (Grant.Dropped),
	// and the server must take them back by their lease (CheckDropped).
	DropShare float64
}

// Run loops on cl as client number id until stop closes, recording every
// grant and error in r. It returns once stop is closed and its current
// cycle has ended (an acquire waits at most Wait, a release the client's
// ReleaseTimeout).
func (l Loop) Run(cl Client, id int, stop <-chan struct{}, r *Recorder) {
	rng := rand.New(rand.NewPCG(uint64(id), l.Seed))
	pause := l.ErrorPause
	if pause <= 0 {
		pause = 50 * time.Millisecond
	}
	for n := 1; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		k := l.Keys[rng.IntN(len(l.Keys))]
		// An owner label of its own per acquire, so that a holder or a
		// waiter a node shows (GET /locks, /events) names the acquire.
		owner := fmt.Sprintf("c%d-%d", id, n)
		req := Request{Lease: l.Lease, Wait: l.Wait, Limit: k.Limit, Owner: owner}
		g := Grant{Client: id, Key: k.Name, Owner: owner, Limit: max(1, k.Limit), Mode: api.ModeExclusive}
		if rng.Float64() < k.Shared {
			g.Mode = api.ModeShared
			req.Mode = api.ModeShared
		}
		hold := l.Hold
		if rng.Float64() < l.LongShare {
			hold = l.LongHold
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.Wait+5*time.Second)
		g.Asked = time.Now()
		lk, err := cl.Acquire(ctx, k.Name, req)
		if err != nil {
			o := Outcome{Client: id, Key: k.Name, Mode: g.Mode, Owner: owner, Asked: g.Asked, Answered: time.Now(), Err: err.Error()}
			switch {
			case errors.Is(err, api.ErrTimeout):
				r.AddTimeout(o)
			case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
				r.AddHang(o)
			}
			cancel()
			r.Fail("client %d acquire %s (%s): %v", id, k.Name, g.Mode, err)
			time.Sleep(pause)
			continue
		}
		g.Token, g.Granted = lk.Token(), time.Now()
		// leaseEnd is the earliest the server may end the hold by itself:
		// a lease from when the grant or the last answered renewal was
		// asked for, or the expires_at the node announced (held, less
		// expirySlack: CheckExpiries), when later.
		leaseEnd := announcedEnd(lk, g.Asked.Add(l.Lease))
		cancel()
		if l.DropShare > 0 && rng.Float64() < l.DropShare {
			// A holder that died: it holds until its lease runs out.
			g.Dropped, g.Ending = true, leaseEnd
			r.Add(g)
			continue
		}
		ctx, cancel = context.WithTimeout(context.Background(), hold+l.Wait+5*time.Second)
		if l.RenewEvery > 0 {
			for end := g.Granted.Add(hold); time.Until(end) > 0 && time.Until(leaseEnd) > 0 && g.Lost == ""; {
				time.Sleep(min(l.RenewEvery, time.Until(end)))
				if time.Until(end) <= 0 {
					break
				}
				sent := time.Now()
				err := lk.Renew(ctx, l.Lease)
				answered := time.Now()
				switch {
				case err == nil:
					leaseEnd = announcedEnd(lk, sent.Add(l.Lease))
				case errors.Is(err, api.ErrNotHeld) || errors.Is(err, api.ErrNotHolder):
					if answered.Before(leaseEnd) {
						g.Lost, g.LostAt = "renew: "+err.Error(), answered
					}
				default:
					r.Fail("client %d renew %s/%d: %v", id, k.Name, lk.Token(), err)
				}
			}
		} else {
			time.Sleep(hold)
		}
		// The client holds until now, or until its lease ran out with
		// no renewal answered.
		g.Ending = time.Now()
		if leaseEnd.Before(g.Ending) {
			g.Ending = leaseEnd
		}
		err = lk.Release(ctx)
		answered := time.Now()
		cancel()
		switch {
		case g.Lost != "":
		case err == nil:
			g.Released = answered
		case errors.Is(err, api.ErrNotHeld) || errors.Is(err, api.ErrNotHolder):
			if answered.Before(leaseEnd) {
				g.Lost, g.LostAt = err.Error(), answered
			}
		case err != nil:
			r.Fail("client %d release %s/%d: %v", id, k.Name, lk.Token(), err)
		}
		r.Add(g)
	}
}

// Gap is a stretch in which no client received a grant: from the receipt
// of one (From) to the next (To).
type Gap struct{ From, To time.Time }

// Len is the gap's length.
func (g Gap) Len() time.Duration { return g.To.Sub(g.From) }

// Gaps returns the n longest stretches between two grants received one
// after the other (by Granted), longest first: the liveness a history
// showed, which a run reports beside the faults that overlap each.
func Gaps(grants []Grant, n int) []Gap {
	at := make([]time.Time, 0, len(grants))
	for _, g := range grants {
		at = append(at, g.Granted)
	}
	slices.SortFunc(at, time.Time.Compare)
	var gaps []Gap
	for i := 1; i < len(at); i++ {
		gaps = append(gaps, Gap{at[i-1], at[i]})
	}
	slices.SortStableFunc(gaps, func(a, b Gap) int { return cmp.Compare(b.Len(), a.Len()) })
	return gaps[:min(n, len(gaps))]
}

// expirySlack is how much earlier than the expires_at it announced a node
// may end a lease, for timers and clock readings (the 100 ms
// CheckExpiries allows, twice).
const expirySlack = 200 * time.Millisecond

// announcedEnd is the later of end and the expires_at the node announced
// for h (less expirySlack), when h's client tells it (the official
// client's Expiry, after the grant or the latest renewal, including the
// one it sends at once for a grant answered late: api's grantSince). The
// node does not end the lease before it (CheckExpiries holds it to that),
// so the hold spans up to there at least. Counted from the ask alone, a
// grant that waited in the queue longer than its lease (a waiter resumed
// across a failover) spanned nothing, and no overlap of it was judged.
func announcedEnd(h Held, end time.Time) time.Time {
	e, ok := h.(interface{ Expiry() time.Time })
	if !ok {
		return end
	}
	if x := e.Expiry(); !x.IsZero() && x.Add(-expirySlack).After(end) {
		return x.Add(-expirySlack)
	}
	return end
}
