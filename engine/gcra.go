package engine

// The generic cell rate algorithm: see "GCRA" in the package doc.

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
