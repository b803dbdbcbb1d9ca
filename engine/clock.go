package engine

import (
	"math"
	"time"
)

// Clock is the Engine's source of time (SPEC section 1, "Time"). Now reads
// one instant twice:
//
//   - mono, in nanoseconds from an arbitrary origin fixed for the life of
//     the process, 0 <= mono < 2^61: a monotonic reading that never steps.
//     Every lease, wait, poll, grace, claim and retention deadline of a
//     running Engine is an instant on it, and its timers wait on it.
//   - wall, the wall-clock reading in Unix nanoseconds. It is used only
//     where a time leaves the process (a Grant's GrantedAt and ExpiresAt,
//     Event times, Snapshot and Apply) and for fencing tokens; a step of it
//     (NTP, a resumed VM, an operator's date) moves those readings, never a
//     deadline.
//
// A time crosses between the two at the boundary, against one reading:
// wall = wall0 + (mono - mono0), and back. The Engine keeps the offset
// between the clocks and takes it anew only when the wall clock moved more
// than a millisecond away from it (a step, or NTP's slew adding up), so the
// same deadline reads as the same expires_at from one answer to the next. Config.Clock nil means the
// system clock (time.Now, whose monotonic reading Go keeps); tests inject
// a Clock whose wall reading steps while its monotonic reading does not.
type Clock interface {
	Now() (mono, wall int64)
}

// monoBase is added to every monotonic reading, so that an instant up to
// 146 years before the clock's origin (a time replayed from the log, or
// replicated from another node, that is older than this process) still
// has a monotonic instant: the Engine's instants are all > 0 and never 0
// (which means "no deadline").
const monoBase = int64(1) << 62

// stamp is one reading of the Engine's clock: now on both scales.
type stamp struct {
	mono int64 // monotonic ns: Clock's reading + monoBase
	wall int64 // Unix ns: mono plus the Engine's offset between the clocks
}

// wallAt returns the wall-clock time (Unix ns) of the monotonic instant m,
// as seen from the reading n; 0 (no deadline) stays 0.
func (n stamp) wallAt(m int64) int64 {
	if m == 0 {
		return 0
	}
	return addSat(n.wall, m-n.mono)
}

// monoAt returns the monotonic instant of the wall-clock time w (Unix ns,
// from another process), as seen from the reading n; 0 (no deadline) stays
// 0, and a time before the monotonic origin becomes its first instant (it
// has passed).
func (n stamp) monoAt(w int64) int64 {
	if w == 0 {
		return 0
	}
	return max(1, addSat(n.mono, subSat(w, n.wall)))
}

// at returns the reading of the wall-clock time w (Unix ns, from another
// process) as seen from n: the instant another node made a change, for
// applying it here.
func (n stamp) at(w int64) stamp { return stamp{mono: n.monoAt(w), wall: w} }

// time returns the wall-clock time of the monotonic instant m.
func (n stamp) time(m int64) time.Time { return time.Unix(0, n.wallAt(m)) }

// addSat returns a+b, saturated at the bounds of int64.
func addSat(a, b int64) int64 {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}

// subSat returns a-b, saturated at the bounds of int64.
func subSat(a, b int64) int64 {
	if b == math.MinInt64 {
		return addSat(addSat(a, math.MaxInt64), 1)
	}
	return addSat(a, -b)
}

// offsetSlack is how far the wall clock may drift from the monotonic one
// (NTP slews it by up to 500 ppm) before the Engine takes the new offset
// between the two. Below it, a deadline reads as the same wall-clock time
// in every answer; a step of the wall clock is always taken at once.
const offsetSlack = int64(time.Millisecond)

// now reads the Engine's clock. Its wall reading is the monotonic one plus
// the Engine's offset between the two clocks, which follows the wall clock
// to within offsetSlack: the same deadline converts to the same wall-clock
// time from one answer to the next.
func (e *Engine) now() stamp {
	var m, w int64
	if e.clock != nil {
		m, w = e.clock.Now()
	} else {
		t := time.Now()
		m, w = int64(t.Sub(e.base)), t.UnixNano()
	}
	m += monoBase
	off := e.offset.Load()
	if d := w - m - off; d > offsetSlack || d < -offsetSlack {
		off = w - m
		e.offset.Store(off)
	}
	return stamp{mono: m, wall: m + off}
}

// monoNow reads only the monotonic clock (arming a timer needs no more).
func (e *Engine) monoNow() int64 {
	if e.clock != nil {
		m, _ := e.clock.Now()
		return m + monoBase
	}
	return int64(time.Since(e.base)) + monoBase
}
