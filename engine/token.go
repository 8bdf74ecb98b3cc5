package engine

import "math/bits"

// The token bucket: see "Token bucket" in the package doc.

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
