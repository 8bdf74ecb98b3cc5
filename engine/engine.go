package engine

import "math/bits"

// Error is an engine error with a stable code (the first word of a RESP error
// reply) and a human message.
type Error struct{ Code, Msg string }

// Error returns Code + " " + Msg.
func (e *Error) Error() string { return e.Code + " " + e.Msg }

// ErrWrongType is returned when a key holds the state of another algorithm.
var ErrWrongType = &Error{"WRONGTYPE", "Operation against a key holding the wrong kind of value"}

// Validation errors returned by NewLimit and by the checks.
var (
	ErrLimit    = &Error{"ERR", "limit must be positive"}
	ErrPeriod   = &Error{"ERR", "period must be positive"}
	ErrBurst    = &Error{"ERR", "burst must not be negative"}
	ErrAlgo     = &Error{"ERR", "unknown algorithm"}
	ErrOverflow = &Error{"ERR", "limit, period or burst out of range"}
	ErrCost     = &Error{"ERR", "cost must not be negative"}
	ErrLease    = &Error{"ERR", "lease needs a fixed-window limit"}
)

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
			return Limit{}, ErrOverflow
		}
		if hi, lo := bits.Mul64(uint64(t), uint64(burst)); hi != 0 || lo > 1<<62 {
			return Limit{}, ErrOverflow
		}
	case KindSliding:
		if limit > maxSliding {
			return Limit{}, ErrOverflow
		}
	}
	if period > 1<<62 {
		return Limit{}, ErrOverflow
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
		return s, Decision{}, 0, ErrCost
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

// gcra: A = theoretical arrival time (ns since the epoch).
func (l *Limit) gcra(s State, now, cost int64, d *Decision) (State, int64) {
	t := l.interval
	if t == 0 {
		t = l.Period / l.Limit
	}
	b := l.burst()
	dvt := t * b
	tat := s.A
	if s.Kind == KindNone || tat < now {
		tat = now
	}
	*d = Decision{Limit: b}
	if cost > b {
		d.RetryAfter = -1
		d.Remaining = rem(dvt-(tat-now), t)
		d.ResetAt = ceilMs(tat)
		return s, tat - now
	}
	nt := tat + t*cost
	if nt-now > dvt {
		d.Remaining = rem(dvt-(tat-now), t)
		d.ResetAt = ceilMs(tat)
		d.RetryAfter = durMs(nt - dvt - now)
		return s, tat - now
	}
	d.Allowed = 1
	d.Remaining = rem(dvt-(nt-now), t)
	d.ResetAt = ceilMs(nt)
	if cost == 0 {
		if s.Kind == KindNone {
			return s, 0
		}
		return s, s.A - now
	}
	return State{A: nt, Kind: KindGCRA}, nt - now
}

func rem(slack, t int64) int64 {
	if slack <= 0 {
		return 0
	}
	return slack / t
}

// rate returns the token bucket's refill rate as n tokens per p ns:
// Limit per Period, or 1 per t ns when Period is a whole multiple t of Limit
// (10/s, 1e6/s, 3/min: most rates). Both give the same results in mulDiv and
// mulDivCeil, since dt*Limit/(t*Limit) = dt/t, but with n == 1 mulDivCeil
// needs no division. l.Limit and l.Period must be positive. The interval
// NewLimit cached is used only when it still divides Period exactly; a Limit
// literal derives it here.
func (l *Limit) rate() (n, p int64) {
	t := l.interval
	if t == 0 {
		t = l.Period / l.Limit
	}
	if hi, lo := bits.Mul64(uint64(t), uint64(l.Limit)); hi == 0 && lo == uint64(l.Period) {
		return 1, t
	}
	return l.Limit, l.Period
}

// token: A = tokens held at time B (ns since the epoch).
func (l *Limit) token(s State, now, cost int64, d *Decision) (State, int64) {
	c := l.burst()
	n, p := l.rate()
	level, last := c, now
	if s.Kind == KindToken {
		level, last = min(max(s.A, 0), c), s.B
		if now > last {
			add := mulDiv(now-last, n, p)
			if add >= c-level {
				level, last = c, now
			} else if add > 0 {
				level += add
				last += mulDivCeil(add, p, n)
			}
		}
	}
	// full returns ns from now until the bucket is full again.
	full := func(level, last int64) int64 {
		if level >= c {
			return 0
		}
		return last + mulDivCeil(c-level, p, n) - now
	}
	*d = Decision{Limit: c}
	if cost > c {
		d.RetryAfter = -1
	}
	if cost > level || cost > c {
		d.Remaining = level
		f := full(level, last)
		d.ResetAt = ceilMs(now + f)
		if cost <= c {
			d.RetryAfter = durMs(last + mulDivCeil(cost-level, p, n) - now)
		}
		if s.Kind == KindNone {
			return s, f
		}
		return State{A: level, B: last, Kind: KindToken}, f
	}
	d.Allowed = 1
	level -= cost
	d.Remaining = level
	f := full(level, last)
	d.ResetAt = ceilMs(now + f)
	if cost == 0 && s.Kind == KindNone {
		return s, 0
	}
	return State{A: level, B: last, Kind: KindToken}, f
}

// fixed: A = end of the window (ns since the epoch), B = units used in it.
func (l *Limit) fixed(s State, now, cost int64, d *Decision) (State, int64) {
	end, used := l.window(s, now)
	*d = Decision{Limit: l.Limit, ResetAt: ceilMs(end)}
	ttl := end - now
	if cost > l.Limit {
		d.RetryAfter = -1
	}
	if cost > l.Limit-used {
		d.Remaining = l.Limit - used
		if cost <= l.Limit {
			d.RetryAfter = durMs(end - now)
		}
		return s, ttl
	}
	d.Allowed = 1
	d.Remaining = l.Limit - used - cost
	if cost == 0 {
		return s, ttl
	}
	return State{A: end, B: used + cost, Kind: KindFixed}, ttl
}

// window returns the end of the window a request at now counts in and the
// units used in it. A clock that went back into an earlier window keeps
// counting in the stored (later) window.
func (l *Limit) window(s State, now int64) (end, used int64) {
	end = (floorDiv(now, l.Period) + 1) * l.Period
	if s.Kind == KindFixed && s.A >= end {
		return s.A, min(max(s.B, 0), l.Limit)
	}
	return end, 0
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// Lease grants min(batch, remaining) credits of the current fixed window. The
// credits are valid until Decision.ResetAt (the window's end, epoch ms), the
// value a later Return must name. Decision.Allowed holds the credits granted.
func (l *Limit) Lease(s State, now, batch int64) (State, Decision, int64, error) {
	if l.Algo != KindFixed || l.Limit <= 0 || l.Period <= 0 {
		return s, Decision{}, 0, ErrLease
	}
	if s.Kind != KindNone && s.Kind != KindFixed {
		return s, Decision{}, 0, ErrWrongType
	}
	if batch < 0 {
		return s, Decision{}, 0, ErrCost
	}
	end, used := l.window(s, now)
	g := min(batch, l.Limit-used)
	d := Decision{Allowed: g, Limit: l.Limit, Remaining: l.Limit - used - g, ResetAt: ceilMs(end)}
	if g == 0 && batch > 0 {
		d.RetryAfter = durMs(end - now)
	}
	if g == 0 {
		return s, d, end - now, nil
	}
	return State{A: end, B: used + g, Kind: KindFixed}, d, end - now, nil
}

// Return gives back unused leased credits. They count only while the window
// the state is in is still open and resetAtMs names it (the ResetAt of the
// lease); accepted is the number taken back, never more than the window has
// used. It needs no Limit: a fixed-window state records its window's end, so
// THROTTLE.RETURN takes only the key, the credits and the lease's reset time.
func Return(s State, now, credits, resetAtMs int64) (next State, accepted, ttl int64, err error) {
	if s.Kind != KindNone && s.Kind != KindFixed {
		return s, 0, 0, ErrWrongType
	}
	if credits < 0 {
		return s, 0, 0, ErrCost
	}
	if s.Kind == KindNone || now >= s.A {
		return s, 0, 0, nil
	}
	if ceilMs(s.A) != resetAtMs {
		return s, 0, s.A - now, nil
	}
	a := min(credits, max(s.B, 0))
	return State{A: s.A, B: s.B - a, Kind: KindFixed}, a, s.A - now, nil
}

// sliding: A = current window index, B = previous count<<32 | current count.
func (l *Limit) sliding(s State, now, cost int64, d *Decision) (State, int64) {
	p := l.Period
	var win, prev, cur int64
	if s.Kind == KindSliding {
		win = windowIndex(now, p, s.A)
		sp, sc := int64(uint64(s.B)>>32), s.B&0xffffffff
		switch {
		case s.A == win:
			prev, cur = sp, sc
		case s.A == win-1:
			prev = sc
		case s.A > win: // clock went back: keep counting in the stored window
			win, prev, cur = s.A, sp, sc
		}
	} else {
		win = floorDiv(now, p)
	}
	e := now - win*p
	if e < 0 {
		e = 0
	}
	w := mulDivCeil(prev, p-e, p)
	used := w + cur
	*d = Decision{Limit: l.Limit}
	var end int64
	if cur > 0 {
		end = (win + 2) * p
	} else if prev > 0 {
		end = (win + 1) * p
	} else {
		end = now
	}
	if cost > l.Limit {
		d.RetryAfter = -1
	}
	if cost > l.Limit-used {
		d.Remaining = max(0, l.Limit-used)
		d.ResetAt = ceilMs(end)
		if cost <= l.Limit {
			d.RetryAfter = durMs(l.slidingRetry(win, now, prev, cur, cost))
		}
		return s, end - now
	}
	d.Allowed = 1
	d.Remaining = l.Limit - used - cost
	if cost == 0 {
		d.ResetAt = ceilMs(end)
		return s, end - now
	}
	end = (win + 2) * p
	d.ResetAt = ceilMs(end)
	return State{A: win, B: prev<<32 | (cur + cost), Kind: KindSliding}, end - now
}

// windowIndex is floorDiv(now, p) for a sliding window whose state is in
// window a. When now is in window a or the next one, as it is unless the key
// sat idle for a whole window or the clock went back, one exact product
// shows it and the division is skipped.
func windowIndex(now, p, a int64) int64 {
	if hi, lo := bits.Mul64(uint64(a), uint64(p)); hi == 0 && int64(lo) >= 0 && now >= int64(lo) {
		// 0 <= a*p <= now, so off cannot overflow.
		switch off := now - int64(lo); {
		case off < p:
			return a
		case off-p < p:
			return a + 1
		}
	}
	return floorDiv(now, p)
}

// slidingRetry returns ns from now until cost units fit.
func (l *Limit) slidingRetry(win, now, prev, cur, cost int64) int64 {
	p := l.Period
	if room := l.Limit - cur - cost; room >= 0 && prev > 0 {
		// need ceil(prev*(p-e)/p) <= room  <=  prev*(p-e) <= room*p
		e := p - mulDiv(room, p, prev)
		return win*p + e - now
	}
	// next window: cur becomes prev.
	room := l.Limit - cost
	e := p - mulDiv(room, p, cur)
	if e < 0 {
		e = 0
	}
	return (win+1)*p + e - now
}
