package engine

import "math/bits"

// maxSliding is the largest limit of a sliding window (two 32-bit counters).
const maxSliding = 1<<31 - 1

// NewLimit validates a configuration. burst 0 means limit. For GCRA and the
// token bucket the emission interval Period/Limit must be at least 1 ns and
// Period/Limit*Burst must fit in an int64.
func NewLimit(algo Kind, limit, period, burst int64) (Limit, error) {
	switch {
	case algo < KindGCRA || algo > KindSliding:
		return Limit{}, ErrAlgo
	case limit <= 0:
		return Limit{}, ErrLimit
	case period <= 0:
		return Limit{}, ErrPeriod
	case burst < 0:
		return Limit{}, ErrBurst
	}
	if burst == 0 {
		burst = limit
	}
	switch algo {
	case KindGCRA, KindToken:
		t := period / limit
		if t == 0 {
			return Limit{}, ErrOutOfRange
		}
		if hi, lo := bits.Mul64(uint64(t), uint64(burst)); hi != 0 || lo > 1<<62 {
			return Limit{}, ErrOutOfRange
		}
	case KindSliding:
		if limit > maxSliding {
			return Limit{}, ErrOutOfRange
		}
	}
	if period > 1<<62 {
		return Limit{}, ErrOutOfRange
	}
	return Limit{Algo: algo, Limit: limit, Period: period, Burst: burst, interval: period / limit}, nil
}

func (l *Limit) burst() int64 {
	if l.Burst == 0 {
		return l.Limit
	}
	return l.Burst
}

// Check runs one request of the given cost against s at time now (ns since
// the epoch) and returns the next state, the decision and the ttl of the
// next state in ns. cost 0 is a peek: the state is left unchanged, Allowed
// and RetryAfter tell whether one unit would pass, Remaining and ResetAt
// describe the current state. It does not allocate.
func (l *Limit) Check(s State, now, cost int64) (next State, d Decision, ttl int64, err error) {
	if s.Kind != KindNone && s.Kind != l.Algo {
		return s, Decision{}, 0, ErrWrongType
	}
	if cost < 0 {
		return s, Decision{}, 0, ErrNegativeCost
	}
	if l.Limit <= 0 || l.Period <= 0 {
		return s, Decision{}, 0, ErrLimit
	}
	if cost == 0 {
		return l.peek(s, now)
	}
	switch l.Algo {
	case KindGCRA:
		next, ttl = l.gcra(s, now, cost, &d)
	case KindToken:
		next, ttl = l.token(s, now, cost, &d)
	case KindFixed:
		next, ttl = l.fixed(s, now, cost, &d)
	case KindSliding:
		next, ttl = l.sliding(s, now, cost, &d)
	default:
		return s, Decision{}, 0, ErrAlgo
	}
	return next, d, ttl, nil
}

// peek evaluates a cost-1 request for Allowed and RetryAfter and reports
// Remaining, ResetAt and ttl of the unchanged state. Check has validated
// everything but the algorithm.
func (l *Limit) peek(s State, now int64) (State, Decision, int64, error) {
	if l.Algo < KindGCRA || l.Algo > KindSliding {
		return s, Decision{}, 0, ErrAlgo
	}
	var one, d Decision
	l.check(s, now, 1, &one)
	_, ttl := l.check(s, now, 0, &d)
	d.Allowed, d.RetryAfter = one.Allowed, one.RetryAfter
	if d.Remaining < 0 {
		d.Remaining = 0
	}
	return s, d, ttl, nil
}

// check runs the algorithm of l, validated by peek, writing the decision
// into d and returning the next state and its ttl.
func (l *Limit) check(s State, now, cost int64, d *Decision) (State, int64) {
	switch l.Algo {
	case KindGCRA:
		return l.gcra(s, now, cost, d)
	case KindToken:
		return l.token(s, now, cost, d)
	case KindFixed:
		return l.fixed(s, now, cost, d)
	}
	return l.sliding(s, now, cost, d)
}

// Peek is Check with cost 0: it reports whether one unit would pass and
// what is left, without consuming anything.
func (l *Limit) Peek(s State, now int64) (Decision, error) {
	_, d, _, err := l.Check(s, now, 0)
	return d, err
}

// ceilMs converts epoch ns to epoch ms, rounding up.
func ceilMs(ns int64) int64 {
	ms := ns / 1e6
	if ns%1e6 > 0 {
		ms++
	}
	return ms
}

// durMs converts a duration in ns to ms, rounding up; negatives give 0.
func durMs(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	return (ns + 999_999) / 1e6
}

// mulDiv returns a*b/c (floor) for non-negative a, b and positive c; the
// quotient is clamped to MaxInt64.
func mulDiv(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 1<<63 - 1
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	if q > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(q)
}

// mulDivCeil is mulDiv rounded up. c == 1 (see rate) skips the division.
func mulDivCeil(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return 1<<63 - 1
	}
	q := lo
	if c != 1 {
		var r uint64
		q, r = bits.Div64(hi, lo, uint64(c))
		if r != 0 {
			q++
		}
	}
	if q > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(q)
}
