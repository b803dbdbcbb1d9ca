package history

import (
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// TestCheckerCatchesViolations feeds the checker made-up histories, one per
// rule of SPEC section 1's admission rule, token order and holds, and
// checks it reports each broken one outside a fault window, counts it
// inside one, and passes the histories the rules allow.
func TestCheckerCatchesViolations(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	// g is a grant asked for at from-5 ms, received at from, released at to.
	g := func(key string, limit int, mode string, token uint64, from, to int) Grant {
		return Grant{Key: key, Limit: limit, Mode: mode, Token: token, Asked: ms(from - 5), Granted: ms(from), Ending: ms(to)}
	}
	// early is gr asked for at the given ms instead.
	early := func(gr Grant, asked int) Grant { gr.Asked = ms(asked); return gr }
	// lost is gr whose release was told at the given ms that it was not held.
	lost := func(gr Grant, at int) Grant { gr.Lost, gr.LostAt = api.ErrNotHeld.Error(), ms(at); return gr }
	const sh, ex = api.ModeShared, api.ModeExclusive
	for _, tc := range []struct {
		name   string
		grants []Grant
		bad    bool
		most   int
	}{
		{"three holders of a semaphore of 3", []Grant{g("s", 3, ex, 1, 10, 50), g("s", 3, ex, 2, 11, 50), g("s", 3, ex, 3, 12, 50)}, false, 3},
		{"four holders of a semaphore of 3", []Grant{g("s", 3, ex, 1, 10, 50), g("s", 3, ex, 2, 11, 50), g("s", 3, ex, 3, 12, 50), g("s", 3, ex, 4, 13, 50)}, true, 4},
		{"four readers of a semaphore of 3", []Grant{g("s", 3, sh, 1, 10, 50), g("s", 3, sh, 2, 11, 50), g("s", 3, sh, 3, 12, 50), g("s", 3, sh, 4, 13, 50)}, true, 4},
		{"a reader beside a writer on a semaphore", []Grant{g("s", 3, ex, 1, 10, 50), g("s", 3, sh, 2, 20, 60)}, true, 2},
		{"many readers of a read/write lock", []Grant{g("r", 1, sh, 1, 10, 50), g("r", 1, sh, 2, 11, 50), g("r", 1, sh, 3, 12, 50), g("r", 1, sh, 4, 13, 50), g("r", 1, sh, 5, 14, 50)}, false, 5},
		{"a writer after the readers", []Grant{g("r", 1, sh, 1, 10, 50), g("r", 1, sh, 2, 11, 49), g("r", 1, ex, 3, 51, 60)}, false, 2},
		{"a writer beside a reader", []Grant{g("r", 1, sh, 1, 10, 50), g("r", 1, ex, 2, 40, 60)}, true, 2},
		{"a reader beside a writer", []Grant{g("r", 1, ex, 1, 10, 50), g("r", 1, sh, 2, 40, 60)}, true, 2},
		{"two writers", []Grant{g("m", 1, ex, 1, 10, 50), g("m", 1, ex, 2, 40, 60)}, true, 2},
		{"token falls after a release", []Grant{g("m", 1, ex, 5, 10, 20), g("m", 1, ex, 4, 30, 40)}, true, 1},
		{"token falls for a grant asked after another was received", []Grant{g("s", 3, ex, 5, 10, 50), g("s", 3, ex, 4, 30, 40)}, true, 2},
		{"readers received out of token order, asked together", []Grant{g("r", 1, sh, 2, 10, 50), g("r", 1, sh, 1, 12, 50)}, false, 2},
		{"a writer's token below an earlier reader's", []Grant{g("r", 1, sh, 7, 10, 20), g("r", 1, sh, 3, 12, 20), g("r", 1, ex, 6, 24, 40)}, true, 2},
		{"a writer's token below an earlier writer's, asked before it", []Grant{g("m", 1, ex, 5, 10, 20), early(g("m", 1, ex, 4, 30, 40), 0)}, true, 1},
		{"a hold the server lost", []Grant{lost(g("m", 1, ex, 1, 10, 20), 25), g("m", 1, ex, 2, 30, 40)}, true, 1},
		{"token falls across keys", []Grant{g("a", 1, ex, 5, 10, 20), g("b", 1, ex, 4, 30, 40)}, true, 1},
		{"a lower token of another key asked before the higher was received", []Grant{g("a", 1, ex, 5, 10, 20), early(g("b", 1, ex, 4, 30, 40), 0)}, false, 1},
		{"a token granted twice", []Grant{g("a", 1, ex, 1, 10, 20), g("b", 1, ex, 1, 30, 40)}, true, 1},
		{"a token of 2^53", []Grant{g("a", 1, ex, 1<<53, 10, 20)}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, fenced, figs := Check(tc.grants, nil)
			if (len(bad) > 0) != tc.bad || fenced != 0 {
				t.Errorf("outside any window: violations %q, fenced %d; want a violation: %v", bad, fenced, tc.bad)
			}
			if f := figs[tc.grants[0].Key]; f.Most != tc.most || f.Grants == 0 {
				t.Errorf("figures %+v; want most %d", f, tc.most)
			}
			if tc.name == "a token granted twice" || tc.name == "a token of 2^53" {
				return // not a matter of windows
			}
			ws := []Window{{Name: "fault", Start: ms(0), End: ms(100)}}
			bad, fenced, _ = Check(tc.grants, ws)
			if len(bad) > 0 || (fenced > 0) != tc.bad {
				t.Errorf("inside a window: violations %q, fenced %d; want every violation counted, none reported", bad, fenced)
			}
			// A window that ends before the first grant covers nothing.
			ws = []Window{{Name: "earlier", Start: ms(-50), End: ms(-20)}}
			if bad, _, _ = Check(tc.grants, ws); (len(bad) > 0) != tc.bad {
				t.Errorf("beside an earlier window: violations %q; want a violation: %v", bad, tc.bad)
			}
		})
	}
}

// TestCheckReleasesCatchesForgottenReleases feeds CheckReleases made-up
// sightings: an active that shows a grant after its release was answered
// is a lost release outside a window and counted inside one; a listing
// asked for before the answer, a grant whose release was not answered,
// and another key's grant are no violation.
func TestCheckReleasesCatchesForgottenReleases(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	grants := []Grant{
		{Key: "m", Token: 1, Asked: ms(0), Granted: ms(5), Ending: ms(20), Released: ms(25)},
		{Key: "m", Token: 2, Asked: ms(30), Granted: ms(35), Ending: ms(40)}, // release not answered
	}
	for _, tc := range []struct {
		name string
		seen []Sighting
		bad  bool
	}{
		{"shown after the release was answered", []Sighting{{Key: "m", Token: 1, Asked: ms(30), Seen: ms(32)}, {Key: "m", Token: 1, Asked: ms(80), Seen: ms(82)}}, true},
		{"shown in a listing asked for before the answer", []Sighting{{Key: "m", Token: 1, Asked: ms(24), Seen: ms(27)}}, false},
		{"shown while the release was not answered", []Sighting{{Key: "m", Token: 2, Asked: ms(60), Seen: ms(62)}}, false},
		{"another key's grant of that token", []Sighting{{Key: "x", Token: 1, Asked: ms(60), Seen: ms(62)}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, fenced := CheckReleases(grants, tc.seen, nil)
			if (len(bad) > 0) != tc.bad || fenced != 0 || len(bad) > 1 {
				t.Errorf("outside any window: violations %q, fenced %d; want one violation: %v", bad, fenced, tc.bad)
			}
			ws := []Window{{Name: "fault", Start: ms(0), End: ms(100)}}
			bad, fenced = CheckReleases(grants, tc.seen, ws)
			if len(bad) > 0 || (fenced == 1) != tc.bad || fenced > 1 {
				t.Errorf("inside a window: violations %q, fenced %d; want one counted: %v", bad, fenced, tc.bad)
			}
		})
	}
}

// TestCheckListingsCatchesDoubleHolds feeds CheckListings made-up
// listings: an active that shows a holder beside a grant a client
// received before the listing and still held after it, where the two may
// not hold together, is a double hold outside a window and counted inside
// one; holders that may hold together, and grants received after the
// listing was asked for or released before it was answered, are not.
func TestCheckListingsCatchesDoubleHolds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	const sh, ex = api.ModeShared, api.ModeExclusive
	g := func(key string, limit int, mode string, token uint64, from, to int) Grant {
		return Grant{Key: key, Limit: limit, Mode: mode, Token: token, Asked: ms(from - 5), Granted: ms(from), Ending: ms(to)}
	}
	// sight is a listing asked for at 30 ms and answered at 32 ms.
	sight := func(key string, limit int, mode string, token uint64) Sighting {
		return Sighting{Node: 1, Key: key, Limit: limit, Mode: mode, Token: token, Asked: ms(30), Seen: ms(32)}
	}
	for _, tc := range []struct {
		name   string
		grants []Grant
		seen   []Sighting
		bad    bool
	}{
		{"a ghost beside a received writer", []Grant{g("m", 1, ex, 2, 10, 50)}, []Sighting{sight("m", 1, ex, 1)}, true},
		{"a ghost reader beside a received writer", []Grant{g("r", 1, ex, 2, 10, 50)}, []Sighting{sight("r", 1, sh, 1)}, true},
		{"a fourth holder of a semaphore of 3", []Grant{g("s", 3, ex, 2, 10, 50), g("s", 3, ex, 3, 11, 50)},
			[]Sighting{sight("s", 3, ex, 1), sight("s", 3, ex, 2), sight("s", 3, ex, 4)}, true},
		{"the writer itself", []Grant{g("m", 1, ex, 2, 10, 50)}, []Sighting{sight("m", 1, ex, 2)}, false},
		{"readers together", []Grant{g("r", 1, sh, 2, 10, 50)}, []Sighting{sight("r", 1, sh, 1), sight("r", 1, sh, 2)}, false},
		{"three holders of a semaphore of 3", []Grant{g("s", 3, ex, 2, 10, 50)}, []Sighting{sight("s", 3, ex, 1), sight("s", 3, ex, 3)}, false},
		{"a writer received after the listing was asked for", []Grant{g("m", 1, ex, 2, 31, 50)}, []Sighting{sight("m", 1, ex, 1)}, false},
		{"a writer released before the listing was answered", []Grant{g("m", 1, ex, 2, 10, 31)}, []Sighting{sight("m", 1, ex, 1)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, fenced := CheckListings(tc.grants, tc.seen, nil)
			if (len(bad) > 0) != tc.bad || fenced != 0 || len(bad) > 1 {
				t.Errorf("outside any window: violations %q, fenced %d; want one violation: %v", bad, fenced, tc.bad)
			}
			ws := []Window{{Name: "fault", Start: ms(0), End: ms(100)}}
			bad, fenced = CheckListings(tc.grants, tc.seen, ws)
			if len(bad) > 0 || (fenced == 1) != tc.bad || fenced > 1 {
				t.Errorf("inside a window: violations %q, fenced %d; want one counted: %v", bad, fenced, tc.bad)
			}
		})
	}
}

// TestCheckOrderInJudgesTokenOrderInItsOwnWindows checks that
// CheckOrderIn counts an overlap inside ws but reports a token that falls
// inside ws when orderWs has no window there (a failover with async
// replication may let two holders overlap, never a token fall).
func TestCheckOrderInJudgesTokenOrderInItsOwnWindows(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	g := func(key string, token uint64, from, to int) Grant {
		return Grant{Key: key, Mode: api.ModeExclusive, Token: token, Asked: ms(from - 5), Granted: ms(from), Ending: ms(to)}
	}
	ws := []Window{{Name: "kill", Start: ms(0), End: ms(100)}}
	overlap := []Grant{g("m", 1, 10, 50), g("m", 2, 40, 60)}
	if bad, fenced, _ := CheckOrderIn(overlap, ws, nil); len(bad) > 0 || fenced != 1 {
		t.Errorf("an overlap inside ws: violations %q, fenced %d; want it counted", bad, fenced)
	}
	for _, fall := range [][]Grant{{g("m", 5, 10, 20), g("m", 4, 30, 40)}, {g("a", 5, 10, 20), g("b", 4, 30, 40)}} {
		if bad, _, _ := CheckOrderIn(fall, ws, nil); len(bad) != 1 {
			t.Errorf("token %d of %s then %d of %s inside ws only: violations %q; want one", fall[0].Token, fall[0].Key, fall[1].Token, fall[1].Key, bad)
		}
		if bad, fenced, _ := CheckOrderIn(fall, ws, ws); len(bad) > 0 || fenced != 1 {
			t.Errorf("token %d then %d inside both: violations %q, fenced %d; want it counted", fall[0].Token, fall[1].Token, bad, fenced)
		}
	}
}

// TestGapsAreTheLongestStretchesWithoutAGrant: the stretches between
// grants received one after the other, whatever order they were recorded
// in, longest first.
func TestGapsAreTheLongestStretchesWithoutAGrant(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) Grant { return Grant{Granted: t0.Add(time.Duration(ms) * time.Millisecond)} }
	got := Gaps([]Grant{at(100), at(0), at(1100), at(1150), at(400)}, 2)
	want := []Gap{{at(400).Granted, at(1100).Granted}, {at(100).Granted, at(400).Granted}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("Gaps = %v, want %v", got, want)
	}
	if g := Gaps([]Grant{at(5)}, 3); len(g) != 0 {
		t.Fatalf("Gaps of one grant = %v, want none", g)
	}
}

// TestLateGrantInAWindowIsCounted replays TestHistoryChaos CHAOS_NODES=5
// CHAOS_SEED=2964 (every kind, 15 faults, load average 40): a writer asked
// for rw at 46.807 with a 2 s lease and received its grant, made by node 1
// in a split brain, at 53.167, after its lease could have run out (its
// Ending, Asked + lease, 48.807, before its receipt), beside a writer node 2
// granted in a failover window of its own (50.968 to 55.719). The overlap
// and the broken token order lie in that window, but their spans, ending
// at the late grant's Ending, ran backwards and met no window: reported
// outside any. A span is judged from its start to the later of its
// receipt and its end.
func TestLateGrantInAWindowIsCounted(t *testing.T) {
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, "2026-12-02T17:41:"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	const ex = api.ModeExclusive
	grants := []Grant{
		{Key: "rw", Limit: 1, Mode: ex, Token: 1796233313319467, Asked: at("52.300"), Granted: at("52.616"), Ending: at("55.126"), Released: at("55.200")},
		{Key: "rw", Limit: 1, Mode: ex, Token: 1796233312150901, Asked: at("46.807"), Granted: at("53.167"), Ending: at("48.807")},
	}
	ws := []Window{{Name: "node 2 promoted by failover", Start: at("50.968"), End: at("55.719")}}
	if bad, fenced, _ := Check(grants, ws); len(bad) > 0 || fenced == 0 {
		t.Errorf("in node 2's window: violations %q, %d counted; want none reported, some counted", bad, fenced)
	}
	if bad, _, _ := Check(grants, nil); len(bad) == 0 {
		t.Errorf("without a window: no violation reported")
	}
}
