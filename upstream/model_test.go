package upstream

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/throttlekit/throttlekit-server/engine"
)

// model is the in-memory reference the scripts are compared with: a map
// from key to state and expiry that follows shard.Store's Apply and Delete
// exactly (a state read at now counts while its expiry is after now; an
// unchanged state leaves the entry untouched; a ttl <= 0 or the zero state
// removes it; anything else is kept until now+ttl, saturating), and the
// server's command logic on top (server/throttle.go, server/mcheck.go).
type model struct {
	m map[string]entry
}

type entry struct {
	st  engine.State
	exp int64
}

func newModel() *model { return &model{m: map[string]entry{}} }

func (m *model) get(key string, now int64) engine.State {
	if e, ok := m.m[key]; ok && e.exp > now {
		return e.st
	}
	return engine.State{}
}

// apply is shard's apply: f gets the live state and returns next and ttl.
func (m *model) apply(key string, now int64, f func(engine.State) (engine.State, int64)) {
	cur := m.get(key, now)
	next, ttl := f(cur)
	if next == cur {
		return
	}
	if ttl <= 0 || next == (engine.State{}) {
		delete(m.m, key)
		return
	}
	exp := now + ttl
	if exp < now {
		exp = math.MaxInt64
	}
	m.m[key] = entry{next, exp}
}

// raw returns the string the scripts store for key, "" when absent.
func (m *model) raw(key string) string {
	e, ok := m.m[key]
	if !ok {
		return ""
	}
	return fmt.Sprintf("%d %d %d %d", e.st.Kind, e.st.A, e.st.B, e.exp)
}

func (m *model) check(key string, l engine.Limit, now, cost int64) (d engine.Decision, err error) {
	if l, err = engine.NewLimit(l.Algo, l.Limit, l.Period, l.Burst); err != nil {
		return d, err
	}
	m.apply(key, now, func(s engine.State) (engine.State, int64) {
		next, dd, ttl, e := l.Check(s, now, cost)
		d, err = dd, e
		if e != nil {
			return s, 0
		}
		return next, ttl
	})
	return d, err
}

func (m *model) peek(key string, l engine.Limit, now, cost int64) (engine.Decision, error) {
	l, err := engine.NewLimit(l.Algo, l.Limit, l.Period, l.Burst)
	if err != nil {
		return engine.Decision{}, err
	}
	st := m.get(key, now)
	d, err := l.Peek(st, now)
	if err == nil && cost > 1 {
		var dc engine.Decision
		_, dc, _, err = l.Check(st, now, cost)
		d.Allowed, d.RetryAfter = dc.Allowed, dc.RetryAfter
	} else if err == nil && cost < 0 {
		_, _, _, err = l.Check(st, now, cost)
	}
	if err != nil {
		return engine.Decision{}, err
	}
	return d, nil
}

// mcheck is server/mcheck.go's THROTTLE.MCHECK on the model.
func (m *model) mcheck(rules []Rule, now, cost int64) (MDecision, error) {
	lims := make([]engine.Limit, len(rules))
	for i, r := range rules {
		l, err := engine.NewLimit(r.Limit.Algo, r.Limit.Limit, r.Limit.Period, r.Limit.Burst)
		if err != nil {
			return MDecision{}, err
		}
		lims[i] = l
	}
	if cost < 0 {
		return MDecision{}, engine.ErrNegativeCost
	}
	prev := make([]engine.State, 0, len(rules))
	ds := make([]engine.Decision, 0, len(rules))
	undo := func(n int) {
		for i := 0; i < n; i++ {
			_, d, ttl, _ := lims[i].Check(prev[i], now, 0)
			p := prev[i]
			m.apply(rules[i].Key, now, func(engine.State) (engine.State, int64) { return p, ttl })
			d.Allowed, d.RetryAfter = 1, 0
			ds[i] = d
		}
	}
	denied := -1
	retry := int64(0)
	for i, r := range rules {
		var d engine.Decision
		if denied < 0 {
			var err error
			m.apply(r.Key, now, func(s engine.State) (engine.State, int64) {
				prev = append(prev, s)
				next, dd, ttl, e := lims[i].Check(s, now, cost)
				d, err = dd, e
				if e != nil || dd.Allowed == 0 {
					return s, 0
				}
				return next, ttl
			})
			if err != nil {
				undo(i)
				return MDecision{}, err
			}
			if d.Allowed == 0 {
				denied = i
			}
		} else {
			st := m.get(r.Key, now)
			var err error
			if _, d, _, err = lims[i].Check(st, now, cost); err != nil {
				undo(denied)
				return MDecision{}, err
			}
			if d.Allowed != 0 {
				_, d, _, _ = lims[i].Check(st, now, 0)
				d.Allowed, d.RetryAfter = 1, 0
			}
		}
		if d.Allowed == 0 && retry >= 0 && (d.RetryAfter < 0 || d.RetryAfter > retry) {
			retry = d.RetryAfter
		}
		ds = append(ds, d)
	}
	if denied >= 0 {
		undo(denied)
	}
	return MDecision{Allowed: denied < 0, RetryAfter: retry, Decisions: ds}, nil
}

func (m *model) reset(keys []string, now int64) int64 {
	n := int64(0)
	for _, k := range keys {
		if e, ok := m.m[k]; ok {
			if e.exp > now {
				n++
			}
			delete(m.m, k)
		}
	}
	return n
}

func (m *model) lease(key string, limit, period, now, batch int64) (d engine.Decision, err error) {
	l, err := engine.NewLimit(engine.KindFixed, limit, period, 0)
	if err != nil {
		return d, err
	}
	m.apply(key, now, func(s engine.State) (engine.State, int64) {
		next, dd, ttl, e := l.Lease(s, now, batch)
		d, err = dd, e
		if e != nil {
			return s, 0
		}
		return next, ttl
	})
	return d, err
}

func (m *model) giveBack(key string, now, credits, resetAt int64) (n int64, err error) {
	m.apply(key, now, func(s engine.State) (engine.State, int64) {
		next, acc, ttl, e := engine.Return(s, now, credits, resetAt)
		n, err = acc, e
		if e != nil {
			return s, 0
		}
		return next, ttl
	})
	return n, err
}

func (m *model) throttle(key string, c engine.Cell, now, q int64) (r engine.CellReply, err error) {
	c, err = engine.NewCell(c.MaxBurst, c.CountPerPeriod, c.PeriodSec)
	if err != nil {
		return r, err
	}
	m.apply(key, now, func(s engine.State) (engine.State, int64) {
		next, rr, ttl, e := c.Throttle(s, now, q)
		r, err = rr, e
		if e != nil {
			return s, 0
		}
		return next, ttl
	})
	return r, err
}

// rateGCRA is Redis's GCRA command as limits.Local runs it (OpRateGCRA:
// engine.RateGCRA.Apply through the store), after the check the client
// and the script make of numbers NewRateGCRA would not have produced.
func (m *model) rateGCRA(key string, g engine.RateGCRA, now int64) (r engine.RateGCRAReply, err error) {
	if g.Burst < 1 || g.Interval < 1 || g.Tokens < 1 {
		return r, engine.ErrOutOfRange
	}
	m.apply(key, now, func(s engine.State) (engine.State, int64) {
		next, rr, ttl, e := g.Apply(s, now)
		r, err = rr, e
		if e != nil {
			return s, 0
		}
		return next, ttl
	})
	return r, err
}

// sameErr reports whether got, an upstream error, stands for want, an
// engine error (or both are nil).
func sameErr(got, want error) bool {
	if want == nil || got == nil {
		return got == nil && want == nil
	}
	c := CodeOf(got)
	if errors.Is(want, engine.ErrWrongType) {
		return c == CodeWrongType && errors.Is(got, engine.ErrWrongType)
	}
	return c == CodeEngine && errors.Is(got, want)
}

// ceilMs and floorDiv are the engine's (unexported there).
func ceilMs(ns int64) int64 {
	ms := ns / 1e6
	if ns%1e6 > 0 {
		ms++
	}
	return ms
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// leaseLimit is lease_algo.lua in Go: min(batch, remaining) units charged
// by a check of that cost; ResetAt is the end of the counting window for a
// sliding window, the check's ResetAt otherwise.
func (m *model) leaseLimit(key string, l engine.Limit, now, batch int64) (engine.Decision, error) {
	l, err := engine.NewLimit(l.Algo, l.Limit, l.Period, l.Burst)
	if err != nil {
		return engine.Decision{}, err
	}
	if batch < 0 {
		return engine.Decision{}, engine.ErrNegativeCost
	}
	st := m.get(key, now)
	_, d, _, err := l.Check(st, now, 0)
	if err != nil {
		return engine.Decision{}, err
	}
	g := min(batch, d.Remaining)
	if g > 0 {
		next, dc, ttl, _ := l.Check(st, now, g)
		if dc.Allowed == 0 {
			g = 0
		} else {
			m.apply(key, now, func(engine.State) (engine.State, int64) { return next, ttl })
			_, d, _, _ = l.Check(next, now, 0)
		}
	}
	out := engine.Decision{Allowed: g, Limit: d.Limit, Remaining: d.Remaining, ResetAt: d.ResetAt}
	if g != batch {
		out.RetryAfter = d.RetryAfter
	}
	if l.Algo == engine.KindSliding {
		w := floorDiv(now, l.Period)
		if st.Kind == engine.KindSliding && st.A > w {
			w = st.A
		}
		out.ResetAt = ceilMs((w + 1) * l.Period)
	}
	return out, nil
}

// tokenRefill is the engine's token-bucket refill at now, and the ns until
// the bucket is full; n tokens per p ns.
func tokenRefill(l engine.Limit, s engine.State, now int64) (level, last, full, n, p int64) {
	c := l.Burst
	if c == 0 {
		c = l.Limit
	}
	n, p = l.Limit, l.Period
	if t := l.Period / l.Limit; t*l.Limit == l.Period {
		n, p = 1, t
	}
	level, last = min(max(s.A, 0), c), s.B
	if now > last {
		add := mulDivRef(now-last, n, p)
		if add >= c-level {
			level, last = c, now
		} else if add > 0 {
			level += add
			last += mulDivCeilRef(add, p, n)
		}
	}
	if level < c {
		full = last + mulDivCeilRef(c-level, p, n) - now
	}
	return
}

func mulDivRef(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(c))
	return int64(min(q, math.MaxInt64))
}

func mulDivCeilRef(a, b, c int64) int64 {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	return int64(min(q, math.MaxInt64))
}

// returnLimit is return_algo.lua in Go (Client.ReturnLimit's rules).
func (m *model) returnLimit(key string, l engine.Limit, now, credits, resetAt int64) (int64, error) {
	l, err := engine.NewLimit(l.Algo, l.Limit, l.Period, l.Burst)
	if err != nil {
		return 0, err
	}
	if credits < 0 {
		return 0, engine.ErrNegativeCost
	}
	st := m.get(key, now)
	if st.Kind != engine.KindNone && st.Kind != l.Algo {
		return 0, engine.ErrWrongType
	}
	if st.Kind == engine.KindNone || credits == 0 {
		return 0, nil
	}
	upto := func(lim int64) (int64, bool) {
		if resetAt < ceilMs(now) {
			return 0, false
		}
		if ceilMs(lim) < resetAt {
			return lim, true
		}
		return (resetAt - 1) * 1e6, true
	}
	var a, ttl int64
	next := st
	switch l.Algo {
	case engine.KindSliding:
		if floorDiv(now, l.Period) <= st.A && ceilMs((st.A+1)*l.Period) == resetAt {
			a = min(credits, st.B&0xffffffff)
			next.B -= a
			_, _, ttl, _ = l.Check(next, now, 0)
		}
	case engine.KindGCRA:
		t := l.Period / l.Limit
		if f, ok := upto(st.A); ok && now < f && now < st.A {
			a = min(credits, (f-now)/t, (st.A-now)/t)
			next.A -= a * t
			ttl = next.A - now
		}
	case engine.KindToken:
		level, last, full, n, p := tokenRefill(l, st, now)
		if f, ok := upto(now + full); ok && now < f {
			c := l.Burst
			if c == 0 {
				c = l.Limit
			}
			a = min(credits, mulDivRef(f-now, n, p), c-level)
			level += a
			level, last, ttl, _, _ = tokenRefill(l, engine.State{A: level, B: last, Kind: engine.KindToken}, now)
			next = engine.State{A: level, B: last, Kind: engine.KindToken}
		}
	}
	if a == 0 {
		return 0, nil
	}
	m.apply(key, now, func(engine.State) (engine.State, int64) { return next, ttl })
	return a, nil
}
