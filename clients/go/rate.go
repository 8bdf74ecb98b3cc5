package throttlekit

import (
	"fmt"
	"time"
)

// Algo names the algorithm a rate is enforced with: the server's ALGO
// argument. The empty Algo leaves the choice to the server, which uses
// GCRA; a leased Limiter, which can only lease a fixed window, reads it as
// FixedWindow.
type Algo string

// The algorithms the server offers, under the names its ALGO argument
// takes.
const (
	// GCRA is the generic cell rate algorithm ("gcra"), the server's
	// default: one unit every Period/Limit, with a tolerance of Burst units.
	GCRA Algo = "gcra"
	// TokenBucket ("token") is a bucket of Burst tokens refilled at Limit
	// per Period.
	TokenBucket Algo = "token"
	// FixedWindow ("fixed") admits Limit units per window of Period
	// aligned to the Unix epoch. It is the only algorithm a lease, and so
	// a leased Limiter, works with.
	FixedWindow Algo = "fixed"
	// SlidingWindow ("sliding") weighs the previous window's count by how
	// much of it still overlaps the last Period.
	SlidingWindow Algo = "sliding"
)

// Rate is a rate limit: Limit units per Period, enforced with Algo.
//
// Period must be a whole number of milliseconds, at least one (the
// server's resolution). Burst is the capacity of GCRA and the token
// bucket; 0 means Limit. The constructors PerSecond, PerMinute, PerHour and
// PerDay build the common rates; set Burst and Algo on the result:
//
//	r := throttlekit.PerMinute(100)
//	r.Algo = throttlekit.SlidingWindow
type Rate struct {
	Limit  int64
	Period time.Duration
	Burst  int64
	Algo   Algo
}

// PerSecond returns the rate of n units a second, enforced with the
// server's default algorithm (GCRA).
func PerSecond(n int64) Rate { return Rate{Limit: n, Period: time.Second} }

// PerMinute returns the rate of n units a minute.
func PerMinute(n int64) Rate { return Rate{Limit: n, Period: time.Minute} }

// PerHour returns the rate of n units an hour.
func PerHour(n int64) Rate { return Rate{Limit: n, Period: time.Hour} }

// PerDay returns the rate of n units a day (24 hours).
func PerDay(n int64) Rate { return Rate{Limit: n, Period: 24 * time.Hour} }

// validate checks what the client can check without the server.
func (r Rate) validate() error {
	switch {
	case r.Limit <= 0:
		return &ArgError{"limit", "must be positive"}
	case r.Period < time.Millisecond:
		return &ArgError{"period", "must be at least 1ms"}
	case r.Period%time.Millisecond != 0:
		return &ArgError{"period", "must be a whole number of milliseconds"}
	case r.Burst < 0:
		return &ArgError{"burst", "must not be negative"}
	}
	switch r.Algo {
	case "", GCRA, TokenBucket, FixedWindow, SlidingWindow:
		return nil
	}
	return &ArgError{"algo", fmt.Sprintf("%q is not one of gcra, token, fixed, sliding", string(r.Algo))}
}

// periodMs is the period in the whole milliseconds the server takes.
func (r Rate) periodMs() int64 { return int64(r.Period / time.Millisecond) }

// fixedOrEmpty reports whether r can be leased: a fixed window, named or
// left to the lease.
func (r Rate) fixedOrEmpty() bool { return r.Algo == "" || r.Algo == FixedWindow }
