package engine

import (
	"math"
	"math/bits"
)

// Cell is a validated CL.THROTTLE configuration (redis-cell 0.5.0 semantics):
// max_burst+1 requests at once, then count_per_period every PeriodSec seconds.
//
// NewCell also caches the emission interval, which costs a float64 division
// to derive; a Cell literal, or one whose CountPerPeriod or PeriodSec changed
// after NewCell, derives it on every call instead, with the same results.
type Cell struct {
	MaxBurst, CountPerPeriod, PeriodSec int64

	t          int64 // emission interval in ns, cached by NewCell (0: derive on use)
	count, per int64 // the CountPerPeriod and PeriodSec t was derived from
}

// CellReply is CL.THROTTLE's five-integer reply.
type CellReply struct{ Limited, Limit, Remaining, RetryAfter, ResetAfter int64 }

// NewCell validates CL.THROTTLE arguments. A zero count or period, or a rate
// whose emission interval truncates to 0 ns, is ErrZeroRate (redis-cell's
// "Zero rates are not supported"); a negative count or period is
// ErrNegativeRate, a negative max_burst ErrBurst, and a period or burst whose
// products overflow ErrOutOfRange.
func NewCell(maxBurst, countPerPeriod, periodSec int64) (Cell, error) {
	if countPerPeriod < 0 || periodSec < 0 {
		return Cell{}, ErrNegativeRate
	}
	if countPerPeriod == 0 || periodSec == 0 {
		return Cell{}, ErrZeroRate
	}
	if maxBurst < 0 {
		return Cell{}, ErrBurst
	}
	if periodSec > math.MaxInt64/1_000_000_000 || maxBurst == math.MaxInt64 {
		return Cell{}, ErrOutOfRange
	}
	c := Cell{MaxBurst: maxBurst, CountPerPeriod: countPerPeriod, PeriodSec: periodSec}
	t := c.emission()
	if t == 0 {
		return Cell{}, ErrZeroRate
	}
	if maxBurst+1 > math.MaxInt64/t {
		return Cell{}, ErrOutOfRange
	}
	c.t, c.count, c.per = t, countPerPeriod, periodSec
	return c, nil
}

// emission is redis-cell's emission interval in ns: period / count computed
// in float64 and truncated, as Rate::per_period does.
func (c *Cell) emission() int64 {
	return int64(float64(c.PeriodSec*1e9) / float64(c.CountPerPeriod))
}

// interval is emission, from the cache NewCell filled when it still applies.
func (c *Cell) interval() int64 {
	if c.t != 0 && c.count == c.CountPerPeriod && c.per == c.PeriodSec {
		return c.t
	}
	return c.emission()
}

// Throttle runs CL.THROTTLE. It shares KindGCRA state (A = theoretical
// arrival time, ns since the epoch) with THROTTLE.CHECK gcra. quantity 0
// peeks; quantity > max_burst+1 is limited with retry_after -1; a negative
// quantity is a refund (the arrival time moves back, never before now).
func (c *Cell) Throttle(s State, now, quantity int64) (State, CellReply, int64, error) {
	if s.Kind != KindNone && s.Kind != KindGCRA {
		return s, CellReply{}, 0, ErrWrongType
	}
	t := c.interval()
	limit := c.MaxBurst + 1
	dvt := t * limit
	inc := t * quantity
	if quantity != 0 && mulOverflows(t, quantity, inc) {
		return s, CellReply{}, 0, ErrQuantityRange
	}
	tat := now
	if s.Kind == KindGCRA {
		tat = s.A
	}
	nt := tat + inc
	if now > tat {
		nt = now + inc
	}
	diff := now - (nt - dvt)
	var limited, ttl int64
	retry := int64(-1) // cellSecs(-1e9): limited with quantity*T above the tolerance, or not limited
	next := s
	if diff < 0 {
		if inc <= dvt {
			retry = cellSecs(-diff)
		}
		limited = 1
		ttl = tat - now
	} else {
		if nt < now {
			nt = now
		}
		ttl = nt - now
		next = State{A: nt, Kind: KindGCRA}
	}
	var remaining int64
	if n := dvt - ttl; n > -t {
		remaining = cellRemaining(n/1000, t/1000)
	}
	return next, CellReply{limited, limit, remaining, retry, cellSecs(ttl)}, ttl, nil
}

// mulOverflows reports whether inc/q != t for inc = t*q (wrapped) and q != 0,
// redis-cell's overflow test. For t >= 1 that is exactly "t*q overflows an
// int64", which a 128-bit product answers without a division.
func mulOverflows(t, q, inc int64) bool {
	if t < 1 {
		return inc/q != t
	}
	hi, lo := bits.Mul64(uint64(t), uint64(q))
	if q < 0 { // the signed high word of t*q
		hi -= uint64(t)
	}
	return int64(hi) != int64(lo)>>63
}

// cellRemaining is f64toi64(float64(n) / float64(t)), redis-cell's remaining
// count, with an integer division where that gives the same result: when
// |n| < 2^53 and t >= 1. Then n converts exactly, and so does t unless
// t > 2^53 > |n|, where both quotients truncate to 0. With both exact, the
// float quotient is n/t correctly rounded, so it could only round up to the
// next integer k+1 if k+1 - n/t, at least 1/t, were within the rounding
// error, at most 2^-53 * |n|/t; that needs |n| >= 2^53.
func cellRemaining(n, t int64) int64 {
	if t >= 1 && n > -1<<53 && n < 1<<53 {
		return n / t
	}
	return f64toi64(float64(n) / float64(t))
}

// cellSecs converts ns to whole seconds, rounding up when a millisecond
// remainder is left (redis-cell 0.5.0's reply rule); -1 s stays -1.
func cellSecs(ns int64) int64 {
	s, r := ns/1e9, ns%1e9
	if r >= 1e6 { // (ns%1e9)/1e6 > 0, without a second division
		s++
	}
	return s
}

// f64toi64 converts like Rust's `as i64`: truncating and saturating, NaN 0.
func f64toi64(f float64) int64 {
	switch {
	case f != f:
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int64(f)
}
