package clock

import (
	"math"
	"sync"
	"sync/atomic"
)

// Manual is a clock that can be stopped and moved by hand, for tests and
// the server's DEBUG SET-CLOCK and ADVANCE-CLOCK: it follows a source clock
// (normally a Clock's Now) until Freeze, then reports the frozen instant
// until Advance moves it forward or Resume lets it run again.
//
// While running, Now is the source's reading plus an offset, which starts at
// 0 and only grows: Advance adds to it, and Resume raises it when the source
// is behind the frozen instant, so that the clock runs on from that instant
// instead of going back (when the source is ahead, the clock jumps forward
// to it). Only Freeze, given an earlier instant, moves the clock back, which
// is what a caller asking for a fixed instant means. Because the offset
// never shrinks, a reader that loads it after a writer's change sees a time
// the clock has reached anyway; and Now checks that the clock was still
// running after reading the source, so it never returns a running reading
// taken while the clock stood frozen behind the source. Together they keep
// Now from stepping back without a lock.
//
// Cost: Now is one atomic load while frozen, and three atomic loads and the
// source's read while running; it never allocates or locks. The writers (Freeze, Advance, Resume) take a mutex among
// themselves. A Manual is safe for concurrent use.
type Manual struct {
	src    func() int64
	mu     sync.Mutex   // serialises the writers; Now takes no lock
	frozen atomic.Int64 // the frozen instant, or running
	offset atomic.Int64 // added to src while running; starts at 0 and only grows
}

// running marks a Manual that follows its source. No instant a caller can
// freeze at is this one: Freeze takes instants from 0 on.
const running = math.MinInt64

// NewManual returns a Manual that follows src (Unix ns that never
// decrease) until it is frozen.
func NewManual(src func() int64) *Manual {
	m := &Manual{src: src}
	m.frozen.Store(running)
	return m
}

// Now returns the current time in Unix nanoseconds: the frozen instant, or
// the source's reading plus the offset kept by Resume and Advance.
func (m *Manual) Now() int64 {
	for {
		if f := m.frozen.Load(); f != running {
			return f
		}
		n := m.src() + m.offset.Load()
		// Frozen in the meantime: n may read a source that has moved past
		// the frozen instant, a time the clock will not show until it runs.
		if m.frozen.Load() == running {
			return n
		}
	}
}

// Freeze stops the clock at at (Unix ns, not negative): Now returns at until
// Advance or Resume. It may move the clock back.
func (m *Manual) Freeze(at int64) {
	if at < 0 {
		panic("clock: Freeze at a negative instant")
	}
	m.mu.Lock()
	m.frozen.Store(at)
	m.mu.Unlock()
}

// Advance moves the clock forward by d ns, frozen or running, and returns
// the new reading. It reports false, changing nothing, if d is negative or
// the reading would pass limit.
func (m *Manual) Advance(d, limit int64) (int64, bool) {
	if d < 0 {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.Now()
	if cur > limit || d > limit-cur {
		return 0, false
	}
	if f := m.frozen.Load(); f != running {
		m.frozen.Store(f + d)
		return f + d, true
	}
	m.offset.Add(d)
	return cur + d, true
}

// Resume lets a frozen clock run again from where it stands, or from the
// source's reading plus the offset if that is later: Now is then
// max(frozen instant, source + offset) and follows the source. On a running
// clock it does nothing.
func (m *Manual) Resume() {
	m.mu.Lock()
	defer m.mu.Unlock()
	f := m.frozen.Load()
	if f == running {
		return
	}
	// The offset is in place before the clock leaves the frozen state, so
	// a reader that sees it running also sees the offset.
	m.offset.Store(max(f-m.src(), m.offset.Load()))
	m.frozen.Store(running)
}

// Frozen reports whether the clock is frozen, and at which instant.
func (m *Manual) Frozen() (int64, bool) {
	f := m.frozen.Load()
	return f, f != running
}
