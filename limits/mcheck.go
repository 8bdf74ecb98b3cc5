package limits

import "github.com/throttlekit/throttlekit-server/engine"

// MCheck is an all-or-nothing check of Cost units against several limits
// (THROTTLE.MCHECK). The caller owns the value and its slices; MCheck
// reuses Decisions' capacity, so a reused MCheck allocates nothing.
type MCheck struct {
	Keys   [][]byte       // distinct keys, at most MaxMCheck
	Limits []engine.Limit // Limits[i] applies to Keys[i]
	Cost   int64

	// Results. When denied nothing is consumed; each decision shows its
	// limit's state as it stands (allowed 1 with retry_after 0 for a
	// limit that would have admitted Cost, its own retry_after for a
	// denying one). RetryAfter is the largest of the denying limits' (-1
	// if one of them can never admit Cost).
	Allowed    bool
	RetryAfter int64
	Decisions  []engine.Decision

	// Done, if set, is called by a backend whose MCheck returned
	// ErrPending once the results (or Err) are in, from the backend's
	// goroutine, with the completed value (a copy: the caller's value is
	// not written after MCheck returns); Err is then the error the call
	// would have returned.
	Done func(*MCheck)
	Err  error
	Lane uint64 // as Op.Lane
}

// mcheckOp is the shard.Transform of one MCheck limit: a check that
// records the state it found, so that it can be put back.
type mcheckOp struct {
	lim  *engine.Limit
	cost int64
	prev engine.State
	d    engine.Decision
	err  error
}

// Apply runs the check, keeping cur in prev; a denial or an error leaves
// the state as it was.
func (o *mcheckOp) Apply(cur engine.State, now int64) (engine.State, int64) {
	o.prev = cur
	next, d, ttl, err := o.lim.Check(cur, now, o.cost)
	o.d, o.err = d, err
	if err != nil || d.Allowed == 0 {
		return cur, 0
	}
	return next, ttl
}

// undo puts back the states of the first n limits, which were consumed,
// and replaces their decisions with their state as it stands: allowed
// (they would have admitted) with nothing consumed.
func (m *MCheck) undo(sc *scratch, n int, now int64) {
	for i := 0; i < n; i++ {
		_, d, ttl, _ := m.Limits[i].Check(sc.prev[i], now, 0)
		sc.set = setState{sc.prev[i], ttl}
		_ = sc.t.Apply(m.Keys[i], now, &sc.set)
		d.Allowed, d.RetryAfter = 1, 0
		m.Decisions[i] = d
	}
}

// MCheck runs m. All keys' shards are locked in one ascending pass (or m
// runs inside sec); then each limit is checked and consumed in turn, one
// lookup each. At the first denial nothing more is consumed: the
// remaining limits are only evaluated, and the states already consumed
// are put back. On an engine error nothing is consumed and the error is
// returned.
func (c *Local) MCheck(m *MCheck, now int64, sec *Section) error {
	if m.Cost < 0 {
		return engine.ErrNegativeCost
	}
	a := &c.adm
	sc := a.scratch()
	defer a.done(sc)
	sc.prev = sc.prev[:0]
	m.Decisions = m.Decisions[:0]
	m.Allowed, m.RetryAfter = false, 0
	c.lockKeys(sc, m.Keys, sec)
	denied := -1
	retry := int64(0)
	for i, k := range m.Keys {
		var d engine.Decision
		if denied < 0 {
			sc.mop = mcheckOp{lim: &m.Limits[i], cost: m.Cost}
			_ = sc.t.Apply(k, now, &sc.mop)
			d = sc.mop.d
			sc.prev = append(sc.prev, sc.mop.prev)
			if sc.mop.err == nil && d.Allowed == 0 {
				denied = i
			}
			if sc.mop.err != nil {
				m.undo(sc, i, now)
				sc.tx.Unlock()
				return sc.mop.err
			}
		} else {
			st, _, _ := sc.t.Get(k, now)
			var err error
			if _, d, _, err = m.Limits[i].Check(st, now, m.Cost); err != nil {
				m.undo(sc, denied, now)
				sc.tx.Unlock()
				return err
			}
			if d.Allowed != 0 { // as it stands: nothing consumed
				_, d, _, _ = m.Limits[i].Check(st, now, 0)
				d.Allowed, d.RetryAfter = 1, 0
			}
		}
		if d.Allowed == 0 && retry >= 0 && (d.RetryAfter < 0 || d.RetryAfter > retry) {
			retry = d.RetryAfter
		}
		m.Decisions = append(m.Decisions, d)
	}
	if denied >= 0 {
		m.undo(sc, denied, now)
	}
	sc.tx.Unlock()
	m.Allowed, m.RetryAfter = denied < 0, retry
	return nil
}
