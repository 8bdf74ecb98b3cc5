package tier

import (
	"context"
	"math"
	"sync"
	"time"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
)

// lease is the credits one server holds of one key upstream (leased
// mode). For a fixed or sliding window the credits count in the key's
// current upstream window and are valid until end (server clock, ns), the
// window's end the upstream reported, so they never outlive their window
// (coupled). For GCRA and token bucket they were charged when leased and
// do not expire (end is MaxInt64). One lease call is in flight per key at
// most: checks that find no credits while one is under way wait in
// waiters, in order, and are answered from its grant. A window-coupled
// lease renews early: the check that brings its credits down to low starts
// the next lease (a prefetch) while later checks spend what is left.
type lease struct {
	mu       sync.Mutex
	key      string
	lim      engine.Limit
	coupled  bool // fixed or sliding window: credits expire at end
	credits  int64
	end      int64 // ns; credits are spent only while now < end
	resetAt  int64 // ms, the last grant's ResetAt as the upstream reported it, for the return
	limit    int64 // the Limit a decision reports (the burst of GCRA and token)
	grant    int64 // GCRA, token: what the last grant gave, the most a return may name
	left     int64 // the key's remaining upstream after the last grant
	dry      bool  // the last grant was short: checks that find no credits are denied until until
	until    int64 // ns; for a fixed window, end
	inflight bool
	waiters  []waiter
	used     int64  // now of the last spend, for the idle return
	low      int64  // fixed, sliding: the low-water mark, a quarter of the last batch, at least 1
	granted  int64  // ns; the now of the last grant
	preAt    int64  // ns; the now of the check that started the prefetch in flight
	refill   func() // runs a prefetch (built once: starting one does not allocate)

	st       throttlekit.SizerState // the batch learner's state (Config.Sizer)
	win      throttlekit.Window     // what this window did so far, for the learner
	winStart int64                  // GCRA, token: when win's period began (ns)
}

// finish reports the window that ended to the sizer and starts a new one;
// credits still held are stranded. l.mu is held.
func (b *Backend) finish(l *lease) {
	if l.win.Leases > 0 {
		l.win.Limit = l.lim.Limit
		l.win.Stranded = l.credits
		b.cfg.Sizer.Observe(&l.st, l.win)
	}
	b.st.stranded.Add(l.credits)
	l.credits, l.dry, l.win = 0, false, throttlekit.Window{}
}

// batch returns the credits to ask for: the sizer's batch in [1, capacity]
// (the limit of a window, the burst of GCRA and token), raised to need.
// l.mu is held.
func (b *Backend) batch(l *lease, need int64) int64 {
	n := min(max(b.cfg.Sizer.Batch(&l.st, l.lim.Limit), 1), capacity(&l.lim))
	return max(n, need)
}

// capacity is the most units one check of lim can ever be admitted: the
// burst of GCRA and token bucket (Limit when 0), a window's limit.
func capacity(lim *engine.Limit) int64 {
	if (lim.Algo == engine.KindGCRA || lim.Algo == engine.KindToken) && lim.Burst > 0 {
		return lim.Burst
	}
	return lim.Limit
}

// maxRounds bounds the lease calls one renewal makes before the checks
// still waiting run strict.
const maxRounds = 4

type waiter struct {
	op  *limits.Op
	now int64
}

// leasable reports whether op runs in leased mode: a check of a key whose
// mode is leased, of a cost the limit can admit at all (a larger one runs
// strict, and gets the engine's "never" retry-after).
func (b *Backend) leasable(op *limits.Op) bool {
	return op.Kind == limits.OpCheck && op.Cost > 0 && op.Limit.Algo >= engine.KindGCRA &&
		op.Limit.Algo <= engine.KindSliding && op.Limit.Limit > 0 && op.Cost <= capacity(&op.Limit) &&
		b.modeOf(op) == ModeLeased
}

// leaseOf returns key's lease, creating it.
func (b *Backend) leaseOf(key []byte, lim engine.Limit) *lease {
	b.leaseMu.Lock()
	defer b.leaseMu.Unlock()
	l := b.leases[string(key)]
	if l == nil || l.lim != lim {
		l = &lease{key: string(key), lim: lim, coupled: lim.Algo == engine.KindFixed || lim.Algo == engine.KindSliding}
		l.refill = func() { b.renew(l, true) }
		b.leases[l.key] = l
	}
	return l
}

// prefetchDue reports whether a check of cost at now, spending from l's
// credits, should start the next lease: the lease is window-coupled (a
// GCRA or token lease never prefetches, so its bound stays limit + N x
// (B-1)), no lease is in flight or awaited, the window is not known to be
// spent (the last grant was full), the check leaves at most the low-water
// mark, and the window is expected to outlast a batch: its end is more
// than the time since the last grant away (the time the last batch took
// to run down to the mark, which a new one takes about as long to spend).
// A lease sent nearer the end takes credits from the ending window that
// would be stranded; the check that finds none waits instead, and its
// lease comes from the next window. l.mu is held.
func (l *lease) prefetchDue(cost, now int64) bool {
	return l.coupled && !l.inflight && len(l.waiters) == 0 && !l.dry && l.low > 0 &&
		l.credits >= cost && l.credits-cost <= l.low && now < l.end && now-l.granted < l.end-now
}

// spend answers op from l's credits if it can. l.mu is held.
func (l *lease) spend(op *limits.Op, now int64) bool {
	if now >= l.end {
		return false
	}
	if l.credits >= op.Cost {
		l.credits -= op.Cost
		l.win.Used += op.Cost
		l.used = now
		op.Decision = engine.Decision{Allowed: 1, Limit: l.limit, Remaining: l.left + l.credits, ResetAt: l.resetAt}
		op.Err = nil
		return true
	}
	if l.dry && now < l.until {
		op.Decision = engine.Decision{Limit: l.limit, Remaining: l.credits, ResetAt: l.resetAt,
			RetryAfter: (l.until - now + 999_999) / 1_000_000}
		op.Err = nil
		return true
	}
	return false
}

// Local answers op at once if this server can without the upstream: a
// check of a leased key from the credits the server holds (or the local
// denial of a lease that came back short), or a check of a cached-deny
// key from a remembered denial. It reports false, leaving op as it was,
// when op needs the upstream; the caller then hands Do a value of its
// own. Local does not keep op or its key and does not allocate, so a
// front calls it first with its own reusable value and pays Do's copies
// (the operation, its key, a parked reply) only for operations that go
// to the upstream. A leased key's first check, a check behind others
// waiting for a lease, and one of another limit than the key's lease all
// need Do (which leases); Do answers what Local answers the same way.
// So does the check that would bring a window-coupled lease down to its
// low-water mark: Do answers it and starts the next lease.
func (b *Backend) Local(op *limits.Op, now int64) bool {
	if op.Kind != limits.OpCheck {
		return false
	}
	if b.modeOf(op) == ModeCachedDeny {
		if b.cachedDeny(op, now) {
			b.st.denyHits.Add(1)
			return true
		}
		return false
	}
	if !b.leasable(op) {
		return false
	}
	b.leaseMu.Lock()
	l := b.leases[string(op.Key)]
	b.leaseMu.Unlock()
	if l == nil || l.lim != op.Limit {
		return false
	}
	l.mu.Lock()
	ok := len(l.waiters) == 0 && !l.prefetchDue(op.Cost, now) && l.spend(op, now)
	l.mu.Unlock()
	if ok {
		b.st.leaseHits.Add(1)
		if op.Decision.Allowed != 0 {
			b.st.allowed.Add(1)
		}
	}
	return ok
}

// doLeased runs op in leased mode, answering it from credits when it can
// (and then starting a prefetch when one is due), else queueing it for a
// lease.
func (b *Backend) doLeased(op *limits.Op, now int64) {
	l := b.leaseOf(op.Key, op.Limit)
	l.mu.Lock()
	if len(l.waiters) == 0 {
		pre := l.prefetchDue(op.Cost, now)
		if l.spend(op, now) {
			if pre {
				l.inflight, l.preAt = true, now
			}
			l.mu.Unlock()
			b.st.leaseHits.Add(1)
			if op.Decision.Allowed != 0 {
				b.st.allowed.Add(1)
			}
			if pre {
				b.st.prefetches.Add(1)
				if !b.submit(op.Lane, l.refill) {
					b.st.queueFull.Add(1)
					b.failWaiters(l) // those that came meanwhile
				}
			}
			return
		}
	}
	res := *op // completed by renew: op is not written after Do returns
	op.Err = limits.ErrPending
	l.waiters = append(l.waiters, waiter{&res, now})
	b.st.waits.Add(1)
	start := !l.inflight
	l.inflight = true
	l.mu.Unlock()
	if start && !b.submit(op.Lane, func() { b.renew(l, false) }) {
		b.st.queueFull.Add(1)
		b.failWaiters(l)
	}
}

// renew leases a batch for l's waiters (a worker's goroutine), answers
// them in order, and leases again while a full grant left some waiting.
// A prefetch leases a batch in its first round even if no check waits.
func (b *Backend) renew(l *lease, prefetch bool) {
	b.st.pending.Add(-1)
	for round := 0; ; round++ {
		l.mu.Lock()
		ws := l.waiters
		if round == maxRounds && len(ws) > 0 {
			// Grants that serve no one (a server clock past the upstream's
			// window end): the rest run strict.
			l.waiters, l.inflight = nil, false
			l.mu.Unlock()
			for _, w := range ws {
				b.st.pending.Add(1)
				b.run(w.op, w.now)
				done(w.op)
			}
			return
		}
		if len(ws) == 0 && (!prefetch || round > 0) {
			l.inflight = false
			l.mu.Unlock()
			return
		}
		need := int64(0)
		for _, w := range ws {
			need += w.op.Cost
		}
		now := l.preAt
		if len(ws) > 0 {
			now = ws[0].now
		}
		if now >= l.end && (l.win.Leases > 0 || l.credits > 0) {
			b.finish(l) // the window ended: its credits are void
		}
		if !l.coupled && l.win.Leases > 0 && now-l.winStart >= l.lim.Period {
			// GCRA and token leases have no windows: the learner sees one
			// period at a time, the credits still held at its end standing
			// for stranded ones (what a larger batch costs here is units
			// charged and not spent: the bound's excess).
			l.win.Limit, l.win.Stranded = l.lim.Limit, l.credits
			b.cfg.Sizer.Observe(&l.st, l.win)
			l.win = throttlekit.Window{}
		}
		batch := b.batch(l, need)
		l.mu.Unlock()
		c := b.client(now)
		var d engine.Decision
		err := b.call(func(ctx context.Context) (e error) {
			if l.lim.Algo == engine.KindFixed {
				d, e = c.Lease(ctx, l.key, l.lim.Limit, l.lim.Period, batch)
			} else {
				d, e = c.LeaseLimit(ctx, l.key, l.lim, batch)
			}
			return e
		})
		e, unavailable := mapErr(err)
		if e != nil {
			if unavailable {
				b.failWaiters(l)
			} else {
				l.mu.Lock()
				ws := l.waiters
				l.waiters, l.inflight = nil, false
				l.mu.Unlock()
				for _, w := range ws {
					w.op.Err = e
					done(w.op)
				}
			}
			return
		}
		b.st.leases.Add(1)
		b.st.leased.Add(d.Allowed)
		l.mu.Lock()
		if l.coupled && l.resetAt != d.ResetAt && (l.win.Leases > 0 || l.credits > 0) {
			b.finish(l) // a new window: the old one's credits are void
		}
		l.credits += d.Allowed
		if d.Allowed > 0 {
			if l.win.Leases == 0 {
				l.winStart = now
			}
			l.win.Leases++
			l.win.Leased += d.Allowed
		}
		l.resetAt, l.left, l.limit, l.grant = d.ResetAt, d.Remaining, d.Limit, d.Allowed
		l.granted, l.low = now, max(batch/4, 1)
		l.end, l.until = math.MaxInt64, 0
		if l.coupled {
			l.end = (d.ResetAt - 1) * 1_000_000 // ResetAt is the end rounded up to the ms
		}
		l.dry = d.Allowed < batch
		switch {
		case !l.dry:
		case l.lim.Algo == engine.KindFixed:
			l.until = l.end // the window is spent until it ends
		case d.RetryAfter > 1:
			// The upstream admits one more unit after RetryAfter (rounded
			// up to the ms) from an instant no earlier than now.
			l.until = min(now+(d.RetryAfter-1)*1_000_000, l.end)
		}
		ws = l.waiters
		n := 0
		for n < len(ws) && l.spend(ws[n].op, ws[n].now) {
			n++
		}
		l.waiters = append(l.waiters[:0:0], ws[n:]...)
		if l.dry && l.lim.Algo != engine.KindFixed && len(l.waiters) > 0 && !(ws[n].now < l.until) {
			// A short grant and no local denial to give: the checks still
			// waiting run strict, each answered by the upstream.
			rest := l.waiters
			l.waiters, l.inflight = nil, false
			l.mu.Unlock()
			for _, w := range ws[:n] {
				if w.op.Decision.Allowed != 0 {
					b.st.allowed.Add(1)
				}
				done(w.op)
			}
			for _, w := range rest {
				b.st.pending.Add(1)
				b.run(w.op, w.now)
				done(w.op)
			}
			return
		}
		l.mu.Unlock()
		for _, w := range ws[:n] {
			if w.op.Decision.Allowed != 0 {
				b.st.allowed.Add(1)
			}
			done(w.op)
		}
	}
}

// failWaiters applies the failure policy to l's waiters; credits already
// held keep serving until their window ends.
func (b *Backend) failWaiters(l *lease) {
	l.mu.Lock()
	ws := l.waiters
	l.waiters, l.inflight = nil, false
	l.mu.Unlock()
	for _, w := range ws {
		b.fail(w.op, w.now)
		done(w.op)
	}
}

// ReturnIdle gives back the credits of leases unused since now - idle (ns):
// one return each, run on the caller's goroutine. It returns how many
// credits the upstream took back. A fixed or sliding window's credits go
// back to their window while it is open; a GCRA or token lease's are
// un-charged, at most the last grant's units (older ones are stranded) and
// no more than upstream.Client.ReturnLimit allows. The credits leave the
// lease before the call, so no unit is returned twice, and one that the
// upstream did not take back is counted stranded. It also forgets leases
// whose window ended, GCRA and token leases idle and empty, and cached
// denials that expired, so no map outgrows the keys in use. The command
// calls it periodically (Config.IdleReturn); tests call it at injected
// instants.
func (b *Backend) ReturnIdle(now, idle int64) int64 {
	b.denyMu.Lock()
	for k, d := range b.deny {
		if now >= d.until {
			delete(b.deny, k)
		}
	}
	b.denyMu.Unlock()
	type ret struct {
		key     string
		lim     engine.Limit
		credits int64
		resetAt int64
	}
	var rs []ret
	b.leaseMu.Lock()
	for k, l := range b.leases {
		l.mu.Lock()
		switch {
		case l.inflight || len(l.waiters) > 0:
		case now >= l.end:
			b.finish(l)
			delete(b.leases, k)
		case now-l.used < idle:
		case l.credits > 0:
			n := l.credits
			if !l.coupled {
				n = min(n, l.grant)
				b.st.stranded.Add(l.credits - n)
			}
			if n > 0 {
				rs = append(rs, ret{k, l.lim, n, l.resetAt})
			}
			l.win.Returned += n
			l.credits, l.grant, l.dry = 0, 0, false
		case !l.coupled:
			delete(b.leases, k) // idle and empty: nothing to keep
		}
		l.mu.Unlock()
	}
	b.leaseMu.Unlock()
	var back int64
	for _, r := range rs {
		c := b.client(now)
		var n int64
		err := b.call(func(ctx context.Context) (e error) {
			if r.lim.Algo == engine.KindFixed {
				n, e = c.Return(ctx, r.key, r.credits, r.resetAt)
			} else {
				n, e = c.ReturnLimit(ctx, r.key, r.lim, r.credits, r.resetAt)
			}
			return e
		})
		if err == nil {
			back += n
			b.st.returned.Add(n)
			b.st.stranded.Add(r.credits - n)
		} else {
			b.st.stranded.Add(r.credits)
		}
	}
	return back
}

// idleLoop calls ReturnIdle every Config.IdleReturn until Close.
func (b *Backend) idleLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.IdleReturn)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			now := time.Now().UnixNano()
			if b.cfg.Clock != nil {
				now = b.cfg.Clock()
			}
			b.ReturnIdle(now, int64(b.cfg.IdleReturn))
		}
	}
}
