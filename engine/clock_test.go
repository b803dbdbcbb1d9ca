package engine

import (
	"sync/atomic"
	"time"
)

// stepClock is an injected Clock whose wall reading can be stepped (as NTP,
// a resumed VM or an operator's date steps it) while its monotonic reading
// runs on untouched: mono is the time since the clock was made (the
// bubble's fake time inside testing/synctest), wall is wall() plus the
// steps so far.
type stepClock struct {
	base time.Time
	wall func() time.Time
	step atomic.Int64 // ns added to the wall reading
}

// newStepClock returns a clock whose wall reading is wall() (nil:
// time.Now) plus the steps Step makes.
func newStepClock(wall func() time.Time) *stepClock {
	if wall == nil {
		wall = time.Now
	}
	return &stepClock{base: time.Now(), wall: wall}
}

func (c *stepClock) Now() (mono, wall int64) {
	return int64(time.Since(c.base)) + 1, c.wall().UnixNano() + c.step.Load()
}

// Step moves the wall reading by d (either way); the monotonic reading
// does not move.
func (c *stepClock) Step(d time.Duration) { c.step.Add(int64(d)) }
