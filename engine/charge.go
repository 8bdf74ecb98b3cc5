package engine

import "math/bits"

// Forced charges and refunds (THROTTLE.RESERVE and THROTTLE.SETTLE).
//
// Charge takes units without asking: a reservation settled above its
// estimate owes the difference even when the budget is spent, so the state
// goes into debt and later checks are denied until the algorithm's refill
// has paid it back. Refund gives back units a reservation took but did not
// use. Both are pure, allocation-free and return the next state with its
// ttl, as Check does.
//
// How each algorithm carries a debt:
//
//	GCRA     the TAT moves past now+tolerance; checks wait for it to pass.
//	token    the bucket is empty and its time sits in the future by the
//	         time the missing tokens take to refill.
//	fixed    units used may exceed Limit; the debt ends with the window
//	         (a fixed window forgives what is left of it at its end).
//	sliding  the current count may exceed Limit (up to 2^31-1); the next
//	         window weighs it as its previous count, so it fades over
//	         one more period.
//
// A refund never makes more room than an idle key has: GCRA's TAT never
// goes before now, a token bucket never holds more than Burst, and the
// windows give units back only to the window that took them (at, the time
// of the original charge, names it); a refund for a window that has passed
// changes nothing.

// maxCharge bounds one charge or refund, so that unit-to-time products fit
// in an int64 whatever the limit.
const maxCharge = 1 << 31

// Charge takes n units (n >= 0) from s at now whether or not they fit,
// leaving a debt when they do not. n is capped at 2^31 per call.
func (l *Limit) Charge(s State, now, n int64) (next State, ttl int64, err error) {
	if err := l.adjustable(s, n); err != nil {
		return s, 0, err
	}
	if n == 0 {
		return s, l.ttlOf(s, now), nil
	}
	n = min(n, maxCharge)
	switch l.Algo {
	case KindGCRA:
		t := l.gcraInterval()
		tat := s.A
		if s.Kind == KindNone || tat < now {
			tat = now
		}
		tat = satAdd(tat, satMul(t, n))
		return State{A: tat, Kind: KindGCRA}, tat - now, nil
	case KindToken:
		level, last := l.tokenAt(s, now)
		level -= n
		if level < 0 {
			np, pp := l.rate()
			last = satAdd(max(last, now), mulDivCeil(-level, pp, np))
			level = 0
		}
		next = State{A: level, B: last, Kind: KindToken}
		return next, l.ttlOf(next, now), nil
	case KindFixed:
		end := (floorDiv(now, l.Period) + 1) * l.Period
		used := int64(0)
		if s.Kind == KindFixed && s.A >= end {
			end, used = s.A, max(s.B, 0)
		}
		return State{A: end, B: satAdd(used, n), Kind: KindFixed}, end - now, nil
	}
	win, prev, cur := l.slidingAt(s, now)
	cur = min(cur+n, maxSliding)
	next = State{A: win, B: prev<<32 | cur, Kind: KindSliding}
	return next, (win+2)*l.Period - now, nil
}

// Refund gives back n units (n >= 0) that a charge at time at took from s.
// at matters to the windows only: units go back to the window (fixed) or
// one of the two windows (sliding) that took them, and not at all once
// that window has passed. A refund never gives more room than an idle key.
func (l *Limit) Refund(s State, now, at, n int64) (next State, ttl int64, err error) {
	if err := l.adjustable(s, n); err != nil {
		return s, 0, err
	}
	if n == 0 || s.Kind == KindNone {
		return s, l.ttlOf(s, now), nil
	}
	n = min(n, maxCharge)
	switch l.Algo {
	case KindGCRA:
		tat := max(s.A-satMul(l.gcraInterval(), n), now)
		if tat <= now {
			return State{}, 0, nil
		}
		return State{A: tat, Kind: KindGCRA}, tat - now, nil
	case KindToken:
		level, last := l.tokenAt(s, now)
		np, pp := l.rate()
		if last > now { // in debt: pay it back first
			back := mulDiv(n, pp, np)
			if last-back >= now {
				last -= back
				n = 0
			} else {
				n -= mulDiv(last-now, np, pp)
				last = now
			}
		}
		level = min(level+max(n, 0), l.burst())
		next = State{A: level, B: last, Kind: KindToken}
		return next, l.ttlOf(next, now), nil
	case KindFixed:
		if now >= s.A || at >= s.A || at < s.A-l.Period {
			return s, l.ttlOf(s, now), nil
		}
		return State{A: s.A, B: max(s.B-n, 0), Kind: KindFixed}, s.A - now, nil
	}
	win, prev, cur := l.slidingAt(s, now)
	switch floorDiv(at, l.Period) {
	case win:
		cur = max(cur-n, 0)
	case win - 1:
		prev = max(prev-n, 0)
	default:
		return s, l.ttlOf(s, now), nil
	}
	next = State{A: win, B: prev<<32 | cur, Kind: KindSliding}
	return next, l.ttlOf(next, now), nil
}

// adjustable checks the limit, the state's kind and n for Charge and Refund.
func (l *Limit) adjustable(s State, n int64) error {
	switch {
	case l.Algo < KindGCRA || l.Algo > KindSliding:
		return ErrAlgo
	case l.Limit <= 0 || l.Period <= 0:
		return ErrLimit
	case s.Kind != KindNone && s.Kind != l.Algo:
		return ErrWrongType
	case n < 0:
		return ErrNegativeCost
	}
	return nil
}

// ttlOf returns the ttl of s at now: ns until it is equivalent to the zero
// State. It reads the ttl the algorithm's own check reports for a peek.
func (l *Limit) ttlOf(s State, now int64) int64 {
	if s.Kind == KindNone {
		return 0
	}
	var d Decision
	_, ttl := l.check(s, now, 0, &d)
	return ttl
}

func (l *Limit) gcraInterval() int64 {
	if l.interval != 0 {
		return l.interval
	}
	return l.Period / l.Limit
}

// tokenAt returns the bucket's level and time at now, refilled as token
// refills it. A bucket in debt keeps its future time and level 0.
func (l *Limit) tokenAt(s State, now int64) (level, last int64) {
	c := l.burst()
	if s.Kind != KindToken {
		return c, now
	}
	n, p := l.rate()
	level, last = min(max(s.A, 0), c), s.B
	if now > last {
		add := mulDiv(now-last, n, p)
		if add >= c-level {
			return c, now
		}
		if add > 0 {
			level += add
			last += mulDivCeil(add, p, n)
		}
	}
	return level, last
}

// slidingAt returns the sliding window's index at now and its previous and
// current counts, moved forward as sliding moves them.
func (l *Limit) slidingAt(s State, now int64) (win, prev, cur int64) {
	if s.Kind != KindSliding {
		return floorDiv(now, l.Period), 0, 0
	}
	win = windowIndex(now, l.Period, s.A)
	sp, sc := int64(uint64(s.B)>>32), s.B&0xffffffff
	switch {
	case s.A == win:
		return win, sp, sc
	case s.A == win-1:
		return win, sc, 0
	case s.A > win:
		return s.A, sp, sc
	}
	return win, 0, 0
}

// satMul returns a*b for non-negative a and b, saturating at MaxInt64.
func satMul(a, b int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(lo)
}

// satAdd returns a+b for b >= 0, saturating at MaxInt64.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}
