// Package clock gives the server one notion of "now" for every decision: Unix
// nanoseconds that advance with the monotonic clock from a wall-clock anchor
// read once at start.
//
// Rate-limit state stores absolute times (a GCRA key's theoretical arrival
// time, a window's end). If "now" came from the wall clock, a step forward by
// a period followed by a step back (an NTP correction, an operator fixing the
// date) would first expire every window and then start new ones inside the
// old ones, admitting a second full budget. A Clock reads the wall clock once,
// in New, and from then on adds the monotonic time elapsed, which the kernel
// never steps backwards. The epoch values in replies stay correct as long as
// the wall clock is not stepped after start; slewing (the usual NTP
// adjustment) affects both clocks alike.
//
// Cost: Now is one monotonic clock read (time.Since), which is cheaper than
// time.Now because it skips the wall-clock read (BenchmarkNow against
// BenchmarkTimeNow); still, read it once per batch of commands, not per command.
//
// Manual wraps a source such as Clock.Now in a clock that can be frozen,
// advanced and resumed (never backwards), for tests and the server's DEBUG
// SET-CLOCK; a server that does not enable DEBUG reads its Clock directly.
package clock

import "time"

// Clock is a monotonic clock anchored to the wall clock. The zero Clock is
// not usable; create one with New or NewFrom. A Clock is safe for concurrent
// use: it is never written after construction.
type Clock struct {
	wall0 int64     // Unix ns at the anchor
	mono0 time.Time // the same instant, with its monotonic reading
	mono  func() int64
}

// New returns a Clock anchored at the current wall-clock time.
func New() *Clock {
	t := time.Now()
	return &Clock{wall0: t.UnixNano(), mono0: t}
}

// NewFrom returns a Clock anchored at wall (Unix ns) whose elapsed time comes
// from mono, a source of nanoseconds that never goes backwards (its origin
// does not matter). It exists for tests that need to drive time by hand.
func NewFrom(wall int64, mono func() int64) *Clock {
	base := mono()
	return &Clock{wall0: wall, mono: func() int64 { return mono() - base }}
}

// Now returns the current time in Unix nanoseconds: the anchor plus the
// monotonic time elapsed since it. Successive calls never decrease.
func (c *Clock) Now() int64 {
	if c.mono != nil {
		return c.wall0 + c.mono()
	}
	return c.wall0 + int64(time.Since(c.mono0))
}

// Anchor returns the wall-clock reading (Unix ns) the Clock started from.
func (c *Clock) Anchor() int64 { return c.wall0 }
