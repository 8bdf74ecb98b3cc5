package server_test

// DEBUG over real TCP: allowed to a loopback client with
// enable-debug-command local, it freezes and moves the server's clock for
// decisions and the idle timeout alike.

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/clock"
	"github.com/throttlekit/throttlekit-server/server"
)

func TestE2EDebugClock(t *testing.T) {
	var mono atomic.Int64 // the source never moves: only DEBUG does
	ts := startServer(t, func(c *server.Config) {
		c.Clock = clock.NewFrom(1_700_000_000_000_000_000, mono.Load).Now
		c.EnableDebugCommand = server.DebugLocal
		c.IdleTimeout = time.Hour
		c.Loops = 1 // one tick task looks at both clients
	})
	idle := dialRaw(t, ts.Addr)
	if v := idle.do(t, "PING"); v != "PONG" {
		t.Fatalf("PING = %#v", v)
	}
	c := dialRaw(t, ts.Addr) // from 127.0.0.1: local
	check := func() decision {
		t.Helper()
		d, err := toDecision(c.do(t, "THROTTLE.CHECK", "k", "1", "1m"), 2)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if v := c.do(t, "DEBUG", "SET-CLOCK", "1800000000000"); v != "OK" {
		t.Fatalf("DEBUG SET-CLOCK = %#v", v)
	}
	if d := check(); d.Allowed != 1 || d.ResetAt != 1800000060000 {
		t.Fatalf("first check at the frozen instant: %+v", d)
	}
	if d := check(); d.Allowed != 0 || d.RetryAfter != 60000 {
		t.Fatalf("second check, no time passed: %+v", d)
	}
	// Two hours later by the server's clock: the idle client has been idle
	// for longer than the timeout and is closed at the next tick; the client
	// that moved the clock has just been active and stays.
	if v := c.do(t, "DEBUG", "ADVANCE-CLOCK", "7200000"); v != "OK" {
		t.Fatalf("DEBUG ADVANCE-CLOCK = %#v", v)
	}
	idle.expectClosed(t)
	if d := check(); d.Allowed != 1 || d.ResetAt != 1800007260000 {
		t.Fatalf("check two hours later: %+v", d)
	}
}
