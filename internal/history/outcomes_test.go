package history

import (
	"testing"
	"time"

	"github.com/baton-io/baton/api"
)

// TestCheckTimeoutsCatchesAHolderToldTimeout feeds CheckTimeouts made-up
// sightings: the owner of an acquire answered 408, shown holding its key
// after the answer, is a violation outside a window and counted inside
// one; shown before the answer, another acquire's owner, or the owner on
// another key, is not.
func TestCheckTimeoutsCatchesAHolderToldTimeout(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	timeouts := []Outcome{{Client: 3, Key: "m", Mode: api.ModeExclusive, Owner: "c3-7", Asked: ms(0), Answered: ms(100), Err: "baton: 408 timeout"}}
	sight := func(key, owner string, asked int) Sighting {
		return Sighting{Node: 0, Key: key, Limit: 1, Mode: api.ModeExclusive, Owner: owner, Token: 9, Asked: ms(asked), Seen: ms(asked + 2)}
	}
	for _, tc := range []struct {
		name string
		seen []Sighting
		bad  bool
	}{
		{"held after its 408", []Sighting{sight("m", "c3-7", 150), sight("m", "c3-7", 200)}, true},
		{"held before its 408 was answered", []Sighting{sight("m", "c3-7", 50)}, false},
		{"another acquire's holder", []Sighting{sight("m", "c3-8", 150)}, false},
		{"the owner on another key", []Sighting{sight("x", "c3-7", 150)}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad, fenced := CheckTimeouts(timeouts, tc.seen, nil)
			if (len(bad) == 1) != tc.bad || len(bad) > 1 || fenced != 0 {
				t.Errorf("outside any window: violations %q, fenced %d; want one: %v", bad, fenced, tc.bad)
			}
			ws := []Window{{Name: "fault", Start: ms(0), End: ms(300)}}
			bad, fenced = CheckTimeouts(timeouts, tc.seen, ws)
			if len(bad) > 0 || (fenced == 1) != tc.bad || fenced > 1 {
				t.Errorf("inside a window: violations %q, fenced %d; want one counted: %v", bad, fenced, tc.bad)
			}
		})
	}
}

// TestCheckHangsCatchesAnAcquireLeftUnanswered: an acquire its client
// gave up unanswered is a violation outside a window, counted inside one.
func TestCheckHangsCatchesAnAcquireLeftUnanswered(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	hangs := []Outcome{{Client: 1, Key: "m", Mode: api.ModeExclusive, Owner: "c1-3", Asked: t0, Answered: t0.Add(20 * time.Second), Err: "context deadline exceeded"}}
	if bad, fenced := CheckHangs(hangs, nil); len(bad) != 1 || fenced != 0 {
		t.Errorf("outside any window: violations %q, fenced %d; want one", bad, fenced)
	}
	ws := []Window{{Name: "pause", Start: t0.Add(5 * time.Second), End: t0.Add(8 * time.Second)}}
	if bad, fenced := CheckHangs(hangs, ws); len(bad) != 0 || fenced != 1 {
		t.Errorf("inside a window: violations %q, fenced %d; want one counted", bad, fenced)
	}
}

// TestCheckOwnersCatchesATokenOfAnotherAcquire: a token a client received
// and a node showed for another owner or another key is a violation; the
// same token for the same acquire, or a token no client received, is not.
func TestCheckOwnersCatchesATokenOfAnotherAcquire(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	grants := []Grant{{Client: 2, Key: "m", Owner: "c2-5", Mode: api.ModeExclusive, Token: 11, Granted: t0}}
	for _, tc := range []struct {
		name string
		seen Sighting
		bad  bool
	}{
		{"the same acquire", Sighting{Key: "m", Owner: "c2-5", Token: 11}, false},
		{"another acquire's owner", Sighting{Key: "m", Owner: "c4-1", Token: 11}, true},
		{"another key", Sighting{Key: "x", Owner: "c2-5", Token: 11}, true},
		{"a token nobody received", Sighting{Key: "m", Owner: "c4-1", Token: 12}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if bad := CheckOwners(grants, []Sighting{tc.seen, tc.seen}); (len(bad) == 1) != tc.bad || len(bad) > 1 {
				t.Errorf("violations %q; want one: %v", bad, tc.bad)
			}
		})
	}
}
