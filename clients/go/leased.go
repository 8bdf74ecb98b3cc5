package throttlekit

// ModeLeased: credits of the server's fixed window leased with
// THROTTLE.LEASE and spent locally, their deadline on the local clock
// bounded by the measured offset to the server's, and unspent credits
// given back with THROTTLE.RETURN (see "Leases and clocks" and "Lease
// sizing" in the package documentation).

import (
	"context"
	"errors"
	"hash/maphash"
	"time"
)

// Timing constants of the leased tier.
const (
	baseMargin    = time.Millisecond // added to every deadline besides tick and offset
	driftPPM      = 100              // assumed clock drift between offset probes
	offsetRefresh = 10 * time.Second // probe the server clock this often
)

// giveBack is a THROTTLE.RETURN waiting to be sent.
type giveBack struct {
	key     string
	credits int64
	resetAt time.Time
}

// giveBack queues a THROTTLE.RETURN; a full queue drops it (the credits
// then lapse with their window, which is safe).
func (l *Limiter) giveBack(key string, credits int64, resetAt time.Time) {
	if l.giveCh == nil || credits <= 0 {
		return
	}
	select {
	case l.giveCh <- giveBack{key, credits, resetAt}:
	default:
	}
}

func (l *Limiter) giver() {
	defer l.wg.Done()
	for {
		select {
		case g := <-l.giveCh:
			l.sendReturn(g)
		case <-l.ctx.Done():
			for { // Close: send what is queued, then stop
				select {
				case g := <-l.giveCh:
					l.sendReturn(g)
				default:
					return
				}
			}
		}
	}
}

func (l *Limiter) sendReturn(g giveBack) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.returns.Add(1)
	_, _ = l.c.Return(ctx, g.key, g.credits, g.resetAt)
}

func (l *Limiter) allowLeased(ctx context.Context, key string, cost int64) (Decision, error) {
	lim := l.opts.Rate.Limit
	h := maphash.String(l.seed, key)
	if cost > lim {
		return l.tooBig(h, key)
	}
	need := max(cost, 1) // cost 0 asks whether one unit would pass
	if e := l.lookup(h, key); e != nil {
		if w := e.win.Load(); w != nil {
			if now := l.clk.fast(); now < w.deadline {
				if left, ok := e.spend(w, need, cost); ok {
					e.touch(now)
					if left <= l.opts.LowWater && l.opts.LowWater > 0 && !e.leasing.Load() {
						l.lowWater(h, e, now)
					}
					return Decision{Allowed: true, Limit: lim, Remaining: left + w.serverRem, ResetAt: w.resetAt}, nil
				}
			}
		}
	}
	return l.allowLeasedSlow(ctx, h, key, cost)
}

// tooBig answers a cost above the limit: never at this limit.
func (l *Limiter) tooBig(h uint64, key string) (Decision, error) {
	lim := l.opts.Rate.Limit
	d := Decision{Limit: lim, Remaining: lim, RetryAfter: -1}
	if e := l.lookup(h, key); e != nil {
		if w := e.win.Load(); w != nil {
			d.Remaining, d.ResetAt = creditsOf(e.word.Load())+w.serverRem, w.resetAt
		}
	}
	return d, nil
}

// lowWater starts a background lease for e unless one is under way.
func (l *Limiter) lowWater(h uint64, e *entry, now int64) {
	s := l.shardAt(h)
	s.mu.Lock()
	if !e.gone && !e.leasing.Load() && now >= e.exhausted && e.win.Load() != nil {
		l.prefetch(s, e)
	}
	s.mu.Unlock()
}

// prefetch starts a background lease for e (shard lock held).
func (l *Limiter) prefetch(s *shard, e *entry) {
	l.bgMu.Lock()
	defer l.bgMu.Unlock()
	if l.closed.Load() {
		return
	}
	batch := l.batchFor(e, 1)
	e.leasing.Store(true)
	e.wait = make(chan struct{})
	l.leaseWG.Add(1)
	go func() {
		defer l.leaseWG.Done()
		ctx, cancel := context.WithTimeout(l.ctx, 5*time.Second)
		defer cancel()
		_ = l.lease(ctx, s, e, batch)
	}()
}

// batchFor asks the sizer and clamps its answer to [need, limit].
func (l *Limiter) batchFor(e *entry, need int64) int64 {
	lim := l.opts.Rate.Limit
	b := l.sizer.Batch(&e.sz, lim)
	return max(need, min(max(b, 1), lim))
}

func (l *Limiter) allowLeasedSlow(ctx context.Context, h uint64, key string, cost int64) (Decision, error) {
	lim := l.opts.Rate.Limit
	need := max(cost, 1)
	s := l.shardAt(h)
	for {
		if l.closed.Load() {
			return l.failed(ErrClosed)
		}
		now := l.clk.precise()
		s.mu.Lock()
		e := l.get(s, h, key)
		w := e.win.Load()
		if w != nil && now >= w.deadline {
			l.endWindow(e)
			w = nil
		}
		have := int64(0)
		if w != nil {
			if left, ok := e.spend(w, need, cost); ok {
				e.touch(now)
				s.mu.Unlock()
				return Decision{Allowed: true, Limit: lim, Remaining: left + w.serverRem, ResetAt: w.resetAt}, nil
			}
			have = creditsOf(e.word.Load())
		}
		if now < e.exhausted {
			d := Decision{Limit: lim, Remaining: have, ResetAt: e.emptyEnd, RetryAfter: ceilMs(e.exhausted - now)}
			s.mu.Unlock()
			return d, nil
		}
		if e.leasing.Load() {
			ch := e.wait
			s.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return l.failed(ctx.Err())
			}
		}
		batch := l.batchFor(e, need-have)
		e.leasing.Store(true)
		e.wait = make(chan struct{})
		s.mu.Unlock()
		if err := l.lease(ctx, s, e, batch); err != nil {
			return l.failed(err)
		}
	}
}

// endWindow closes e's window (shard lock held): its credits are void.
func (l *Limiter) endWindow(e *entry) {
	w := e.stats
	w.Stranded = e.retire()
	w.Limit = l.opts.Rate.Limit
	w.Used = max(0, w.Leased-w.Stranded-w.Returned)
	l.sizer.Observe(&e.sz, w)
	e.stats = Window{}
}

// lease runs one THROTTLE.LEASE for e (e.leasing set by the caller) and
// folds the grant into e. It measures the server clock offset with a TIME
// in the same pipeline when the last measurement is stale.
func (l *Limiter) lease(ctx context.Context, s *shard, e *entry, batch int64) error {
	probe := l.offsetStale()
	t0 := l.clk.precise()
	var (
		g       Grant
		err     error
		srvTime time.Time
		timeErr error = errors.New("not probed")
	)
	l.leases.Add(1)
	if probe {
		l.probes.Add(1)
		p := l.c.rdb.Pipeline()
		tc := p.Time(ctx)
		gc := l.c.LeaseCmd(ctx, p, e.key, l.opts.Rate, batch)
		_, _ = p.Exec(ctx)
		srvTime, timeErr = tc.Result()
		g, err = gc.Result()
	} else {
		g, err = l.c.Lease(ctx, e.key, l.opts.Rate, batch)
	}
	t1 := l.clk.precise()
	if probe {
		l.setOffset(srvTime, timeErr, t0, t1)
	}
	offHi, offLo, margin := l.offset(t1)

	s.mu.Lock()
	defer s.mu.Unlock()
	e.leasing.Store(false)
	close(e.wait)
	e.wait = nil
	if err != nil {
		return err
	}
	if e.gone {
		l.giveBack(e.key, g.Credits, g.ResetAt)
		return nil
	}
	end := g.ResetAt.UnixNano()
	// Spend only while the server surely has not reached the end: local +
	// offHi is the latest the server's clock can read.
	nw := &window{resetAt: g.ResetAt, deadline: end - offHi - margin, serverRem: g.Remaining}
	if w := e.win.Load(); w != nil && w.resetAt.Equal(g.ResetAt) {
		nw.gen = w.gen
		for {
			x := e.word.Load()
			if e.word.CompareAndSwap(x, x+uint64(g.Credits)) {
				break
			}
		}
	} else {
		if w != nil {
			l.endWindow(e)
		}
		nw.gen = genOf(e.word.Load()) + 1
		e.word.Store(nw.gen<<creditBits | uint64(g.Credits))
	}
	e.win.Store(nw)
	if g.Credits > 0 {
		e.stats.Leases++
		e.stats.Leased += g.Credits
	}
	e.touch(t1)
	switch {
	case g.Credits == 0 && g.RetryAfter > 0:
		e.exhausted = t1 + int64(g.RetryAfter)
		e.emptyEnd = nw.resetAt
	case g.Remaining == 0 || t1 >= nw.deadline:
		// Empty (or void on arrival): nothing more until the server has
		// surely moved on, local + offLo being the earliest it can read.
		e.exhausted = end - offLo + margin
		e.emptyEnd = nw.resetAt
	}
	return nil
}

func (l *Limiter) offsetStale() bool {
	l.offMu.Lock()
	defer l.offMu.Unlock()
	return !l.offsetMeasured || l.clk.precise()-l.offAt > int64(offsetRefresh)
}

// setOffset records the bounds of (server clock - local clock) from a TIME
// reply read by the server at some local instant in [t0, t1]. TIME has
// microsecond resolution, so the server's clock read in [S, S+1µs).
func (l *Limiter) setOffset(srv time.Time, err error, t0, t1 int64) {
	l.offMu.Lock()
	defer l.offMu.Unlock()
	l.offsetMeasured = true
	l.offAt = t1
	if err != nil {
		// No TIME: assume the clocks agree and rely on the margin.
		l.offLo, l.offHi = 0, 0
		return
	}
	s := srv.UnixNano()
	l.offLo, l.offHi = s-t1, s+1000-t0
}

// offset returns the offset bounds and the margin at local time now: a base
// margin, the coarse clock's tick, and drift since the last measurement.
func (l *Limiter) offset(now int64) (hi, lo, margin int64) {
	l.offMu.Lock()
	defer l.offMu.Unlock()
	margin = int64(baseMargin) + (now-l.offAt)*driftPPM/1e6
	if l.opts.Clock == nil {
		margin += 2 * int64(clockTick)
	}
	return l.offHi, l.offLo, margin
}

// ReturnIdle gives back the credits of every key unused for
// ReturnIdleAfter (all keys if it is 0) and returns how many the server
// took back. A Limiter with ReturnIdleAfter set calls it in the background;
// call it yourself to return credits at a moment of your choosing.
func (l *Limiter) ReturnIdle(ctx context.Context) (int64, error) {
	return l.returnIdle(ctx, int64(l.opts.ReturnIdleAfter))
}

func (l *Limiter) returnIdle(ctx context.Context, idle int64) (int64, error) {
	if l.opts.Mode != ModeLeased {
		return 0, nil
	}
	now := l.clk.precise()
	var todo []giveBack
	for i := range l.shs {
		s := &l.shs[i]
		s.mu.Lock()
		for _, e := range s.m {
			w := e.win.Load()
			if w == nil || e.leasing.Load() || now-e.lastUse.Load() < idle || now >= w.deadline {
				continue
			}
			if c := e.take(); c > 0 {
				todo = append(todo, giveBack{e.key, c, w.resetAt})
				e.stats.Returned += c
			}
		}
		s.mu.Unlock()
	}
	var total int64
	var first error
	for _, g := range todo {
		l.returns.Add(1)
		n, err := l.c.Return(ctx, g.key, g.credits, g.resetAt)
		if err != nil && first == nil {
			first = err
		}
		total += n
	}
	return total, first
}

func (l *Limiter) janitor() {
	defer l.wg.Done()
	t := time.NewTicker(max(l.opts.ReturnIdleAfter/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			_, _ = l.ReturnIdle(l.ctx)
		case <-l.ctx.Done():
			return
		}
	}
}

// Close stops the background goroutines and gives back every key's unspent
// credits (ModeLeased). Allow after Close returns ErrClosed. Close does not
// close the Client.
