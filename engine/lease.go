package engine

// Window-coupled leases: see "Leases" in the package doc.

// Lease grants min(batch, remaining) credits of the current fixed window. The
// credits are valid until Decision.ResetAt (the window's end, epoch ms), the
// value a later Return must name. Decision.Allowed holds the credits granted.
func (l *Limit) Lease(s State, now, batch int64) (State, Decision, int64, error) {
	if l.Algo != KindFixed || l.Limit <= 0 || l.Period <= 0 {
		return s, Decision{}, 0, ErrLeaseAlgo
	}
	if s.Kind != KindNone && s.Kind != KindFixed {
		return s, Decision{}, 0, ErrWrongType
	}
	if batch < 0 {
		return s, Decision{}, 0, ErrNegativeCost
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
		return s, 0, 0, ErrNegativeCost
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
