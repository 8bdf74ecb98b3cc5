package server_test

// The server reads "now" from Config.Clock, a monotonic clock anchored to
// the wall clock. These tests drive it by hand over TCP: a step of the wall
// clock must not change a decision, a step of the monotonic source is time
// passing.

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/clock"
	"github.com/throttlekit/throttlekit-server/server"
)

func TestClockWallStepGrantsNoSecondBudget(t *testing.T) {
	const (
		wall0  = int64(1_700_000_000_000_000_000) // Unix ns
		limit  = 3
		period = time.Minute
	)
	// mono is the monotonic source (it only goes forward); step is how far
	// an operator or NTP has stepped the wall clock. A server reading the
	// wall clock directly would see wall0 + mono + step.
	type source struct {
		mono, step atomic.Int64
	}
	tests := []struct {
		name string
		// clock builds the server's clock over src.
		clock func(src *source) func() int64
		// wantStepAllowed is whether the check after the wall clock was
		// stepped forward by a period is allowed: with the wall clock read
		// directly it is, a second budget with no time passed.
		wantStepAllowed bool
	}{
		{"anchored monotonic clock", func(src *source) func() int64 {
			return clock.NewFrom(wall0, src.mono.Load).Now
		}, false},
		{"wall clock read directly", func(src *source) func() int64 {
			return func() int64 { return wall0 + src.mono.Load() + src.step.Load() }
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := &source{}
			ts := startServer(t, func(c *server.Config) { c.Clock = tc.clock(src) })
			c := dialRaw(t, ts.Addr)
			check := func() bool {
				t.Helper()
				d, err := toDecision(c.do(t, "THROTTLE.CHECK", "k", "3", "1m"), 2)
				if err != nil {
					t.Fatal(err)
				}
				return d.Allowed == 1
			}
			for i := range limit {
				if !check() {
					t.Fatalf("check %d of the first budget denied", i+1)
				}
			}
			if check() {
				t.Fatalf("check past the budget allowed")
			}
			src.step.Add(int64(period)) // the wall clock jumps forward...
			if got := check(); got != tc.wantStepAllowed {
				t.Fatalf("after a wall step forward: allowed = %v, want %v", got, tc.wantStepAllowed)
			}
			src.step.Add(-int64(period)) // ...and back
			if check() {
				t.Fatalf("after the wall step back: allowed")
			}
			if tc.wantStepAllowed {
				return
			}
			src.mono.Add(int64(period)) // a period really passes
			for i := range limit {
				if !check() {
					t.Fatalf("check %d after a period passed denied", i+1)
				}
			}
			if check() {
				t.Fatalf("check past the second budget allowed")
			}
		})
	}
}

// TestClockDrivesIdleTimeout: the idle timeout follows Config.Clock, so a
// connection is closed when the injected clock says it has been idle, not
// when the wall clock does.
func TestClockDrivesIdleTimeout(t *testing.T) {
	var mono atomic.Int64
	ts := startServer(t, func(c *server.Config) {
		c.Clock = clock.NewFrom(0, mono.Load).Now
		c.IdleTimeout = time.Hour
	})
	c := dialRaw(t, ts.Addr)
	if v := c.do(t, "PING"); v != "PONG" {
		t.Fatalf("PING = %#v", v)
	}
	mono.Add(int64(2 * time.Hour))
	c.expectClosed(t) // the next tick (at most 1s away) sees two idle hours
}
