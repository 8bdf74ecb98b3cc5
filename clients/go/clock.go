package throttlekit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Clock is a Limiter's time source: Now reads it, and Sleep waits until d
// has passed on it or ctx is done (returning ctx.Err() then). A nil
// LimiterOptions.Clock is the process clock, read on the local paths
// through a copy a goroutine refreshes every millisecond; a Clock of your
// own is read on every call, and is what tests use to move a Limiter's
// time (and Wait's sleeps) without waiting for it.
type Clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// clock is the Limiter's view of time: epoch nanoseconds anchored once to
// the wall clock and advanced by the monotonic clock, so a step of the wall
// clock cannot move it. fast reads a copy refreshed every clockTick by a
// goroutine (an atomic load, where reading the clock costs 70-350 ns on
// some virtual machines); it lags by up to a tick plus scheduling delay,
// which the deadline margin covers. With an injected Clock every read goes
// to it.
type clock struct {
	ext    Clock // nil: the process clock
	wall0  int64
	mono0  time.Time
	coarse atomic.Int64
}

// clockTick is the resolution of the coarse copy.
const clockTick = time.Millisecond

func (c *clock) init(ext Clock) {
	c.ext = ext
	c.mono0 = time.Now()
	c.wall0 = c.mono0.UnixNano()
	c.coarse.Store(c.wall0)
}

// precise reads the clock.
func (c *clock) precise() int64 {
	if c.ext != nil {
		return c.ext.Now().UnixNano()
	}
	return c.wall0 + int64(time.Since(c.mono0))
}

// fast reads the coarse copy (or the injected clock).
func (c *clock) fast() int64 {
	if c.ext != nil {
		return c.ext.Now().UnixNano()
	}
	return c.coarse.Load()
}

// until is the time left before deadline.
func (c *clock) until(deadline time.Time) time.Duration {
	if c.ext != nil {
		return deadline.Sub(c.ext.Now())
	}
	return time.Until(deadline)
}

// sleep waits d, or until ctx is done (returning its error) or stop is
// closed (returning nil: the caller's next step sees why).
func (c *clock) sleep(ctx context.Context, stop <-chan struct{}, d time.Duration) error {
	if c.ext != nil {
		return c.ext.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-stop:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run refreshes the coarse copy every clockTick until ctx is done.
func (c *clock) run(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	t := time.NewTicker(clockTick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.coarse.Store(c.precise())
		case <-ctx.Done():
			return
		}
	}
}
