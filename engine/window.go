package engine

import "math/bits"

// The fixed and sliding windows: see "Fixed window" and "Sliding window"
// in the package doc.

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
