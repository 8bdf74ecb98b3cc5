package engine

import "math"

// Cell is a validated CL.THROTTLE configuration (redis-cell 0.5.0 semantics):
// max_burst+1 requests at once, then count_per_period every PeriodSec seconds.
type Cell struct{ MaxBurst, CountPerPeriod, PeriodSec int64 }

// CellReply is CL.THROTTLE's five-integer reply.
type CellReply struct{ Limited, Limit, Remaining, RetryAfter, ResetAfter int64 }

// Cell errors: the code is "Cell" so that the reply reads "Cell error: ...".
var (
	ErrCellZero  = &Error{"Cell", "error: Store error: Zero rates are not supported"}
	ErrCellRate  = &Error{"Cell", "error: Store error: count and period must not be negative"}
	ErrCellBurst = &Error{"Cell", "error: Store error: max_burst must not be negative"}
	ErrCellRange = &Error{"Cell", "error: Store error: arguments out of range"}
	errCellOflow = &Error{"Cell", "error: Store error: quantity out of range"}
)

// NewCell validates CL.THROTTLE arguments. A zero count or period, or a rate
// whose emission interval truncates to 0 ns, is redis-cell's "Zero rates are
// not supported"; a negative count, period or max_burst is an error too.
func NewCell(maxBurst, countPerPeriod, periodSec int64) (Cell, error) {
	if countPerPeriod < 0 || periodSec < 0 {
		return Cell{}, ErrCellRate
	}
	if countPerPeriod == 0 || periodSec == 0 {
		return Cell{}, ErrCellZero
	}
	if maxBurst < 0 {
		return Cell{}, ErrCellBurst
	}
	if periodSec > math.MaxInt64/1_000_000_000 || maxBurst == math.MaxInt64 {
		return Cell{}, ErrCellRange
	}
	c := Cell{maxBurst, countPerPeriod, periodSec}
	t := c.emission()
	if t == 0 {
		return Cell{}, ErrCellZero
	}
	if maxBurst+1 > math.MaxInt64/t {
		return Cell{}, ErrCellRange
	}
	return c, nil
}

// emission is redis-cell's emission interval in ns: period / count computed
// in float64 and truncated, as Rate::per_period does.
func (c *Cell) emission() int64 {
	return int64(float64(c.PeriodSec*1e9) / float64(c.CountPerPeriod))
}

// Throttle runs CL.THROTTLE. It shares KindGCRA state (A = theoretical
// arrival time, ns since the epoch) with THROTTLE.CHECK gcra. quantity 0
// peeks; quantity > max_burst+1 is limited with retry_after -1; a negative
// quantity is a refund (the arrival time moves back, never before now).
func (c *Cell) Throttle(s State, now, quantity int64) (State, CellReply, int64, error) {
	if s.Kind != KindNone && s.Kind != KindGCRA {
		return s, CellReply{}, 0, ErrWrongType
	}
	t := c.emission()
	dvt := t * (c.MaxBurst + 1)
	r := CellReply{Limit: c.MaxBurst + 1, RetryAfter: -1e9}
	inc := t * quantity
	if quantity != 0 && inc/quantity != t {
		return s, CellReply{}, 0, errCellOflow
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
	var ttl int64
	next := s
	if diff < 0 {
		if inc <= dvt {
			r.RetryAfter = -diff
		}
		r.Limited = 1
		ttl = tat - now
	} else {
		if nt < now {
			nt = now
		}
		ttl = nt - now
		next = State{A: nt, Kind: KindGCRA}
	}
	if n := dvt - ttl; n > -t {
		r.Remaining = f64toi64(float64(n/1000) / float64(t/1000))
	}
	r.ResetAfter = ttl
	r.RetryAfter = cellSecs(r.RetryAfter)
	r.ResetAfter = cellSecs(r.ResetAfter)
	return next, r, ttl, nil
}

// cellSecs converts ns to whole seconds, rounding up when a millisecond
// remainder is left (redis-cell 0.5.0's reply rule); -1 s stays -1.
func cellSecs(ns int64) int64 {
	s := ns / 1e9
	if (ns%1e9)/1e6 > 0 {
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
