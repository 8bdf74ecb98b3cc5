package tier

import (
	"context"
	"sync"
	"time"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
)

// lease is the credits one server holds of one key's current fixed window
// upstream (leased mode). Credits are valid until end (server clock, ns):
// the window's end the upstream reported, so they never outlive their
// window. One lease call is in flight per key at most: checks that find no
// credits while one is under way wait in waiters, in order, and are
// answered from its grant.
type lease struct {
	mu       sync.Mutex
	lim      engine.Limit
	credits  int64
	end      int64 // ns; credits are spent only while now < end
	resetAt  int64 // ms, the window's ResetAt as the upstream reported it, for Return
	left     int64 // the window's remaining upstream after the last grant
	dry      bool  // the last grant was short: the window upstream is spent until end
	inflight bool
	waiters  []waiter
	used     int64 // now of the last spend, for the idle return

	st  throttlekit.SizerState // the batch learner's state (Config.Sizer)
	win throttlekit.Window     // what this window did so far, for the learner
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

// batch returns the credits to ask for: the sizer's batch in [1, limit],
// raised to need. l.mu is held.
func (b *Backend) batch(l *lease, need int64) int64 {
	n := min(max(b.cfg.Sizer.Batch(&l.st, l.lim.Limit), 1), l.lim.Limit)
	return max(n, need)
}

// maxRounds bounds the lease calls one renewal makes before the checks
// still waiting run strict.
const maxRounds = 4

type waiter struct {
	op  *limits.Op
	now int64
}

// leasable reports whether op runs in leased mode: a check of a fixed
// window on a key whose mode is leased. Other algorithms run strict.
func (b *Backend) leasable(op *limits.Op) bool {
	return op.Kind == limits.OpCheck && op.Limit.Algo == engine.KindFixed && op.Cost > 0 &&
		b.modeOf(op) == ModeLeased
}

// leaseOf returns key's lease, creating it.
func (b *Backend) leaseOf(key []byte, lim engine.Limit) *lease {
	b.leaseMu.Lock()
	defer b.leaseMu.Unlock()
	l := b.leases[string(key)]
	if l == nil || l.lim != lim {
		l = &lease{lim: lim}
		b.leases[string(key)] = l
	}
	return l
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
		op.Decision = engine.Decision{Allowed: 1, Limit: l.lim.Limit, Remaining: l.left + l.credits, ResetAt: l.resetAt}
		op.Err = nil
		return true
	}
	if l.dry {
		op.Decision = engine.Decision{Limit: l.lim.Limit, Remaining: l.credits, ResetAt: l.resetAt,
			RetryAfter: (l.end - now + 999_999) / 1_000_000}
		op.Err = nil
		return true
	}
	return false
}

// doLeased runs op in leased mode. It reports false when op must go to
// the upstream as in strict mode (never: leased keys always lease).
func (b *Backend) doLeased(op *limits.Op, now int64) {
	l := b.leaseOf(op.Key, op.Limit)
	l.mu.Lock()
	if len(l.waiters) == 0 && l.spend(op, now) {
		l.mu.Unlock()
		b.st.leaseHits.Add(1)
		if op.Decision.Allowed != 0 {
			b.st.allowed.Add(1)
		}
		return
	}
	res := *op // completed by renew: op is not written after Do returns
	op.Err = limits.ErrPending
	l.waiters = append(l.waiters, waiter{&res, now})
	start := !l.inflight
	l.inflight = true
	l.mu.Unlock()
	if start && !b.submit(op.Lane, func() { b.renew(res.Key, l) }) {
		b.st.queueFull.Add(1)
		b.failWaiters(l)
	}
}

// renew leases a batch for l's waiters (a worker's goroutine), answers
// them in order, and leases again while a full grant left some waiting.
func (b *Backend) renew(key []byte, l *lease) {
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
		if len(ws) == 0 {
			l.inflight = false
			l.mu.Unlock()
			return
		}
		need := int64(0)
		for _, w := range ws {
			need += w.op.Cost
		}
		now := ws[0].now
		if now >= l.end && (l.win.Leases > 0 || l.credits > 0) {
			b.finish(l) // the window ended: its credits are void
		}
		batch := b.batch(l, need)
		l.mu.Unlock()
		c := b.client(now)
		var d engine.Decision
		err := b.call(func(ctx context.Context) (e error) {
			d, e = c.Lease(ctx, string(key), l.lim.Limit, l.lim.Period, batch)
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
		if l.resetAt != d.ResetAt && (l.win.Leases > 0 || l.credits > 0) {
			b.finish(l) // a new window: the old one's credits are void
		}
		l.credits += d.Allowed
		if d.Allowed > 0 {
			l.win.Leases++
			l.win.Leased += d.Allowed
		}
		l.resetAt, l.left = d.ResetAt, d.Remaining
		l.end = (d.ResetAt - 1) * 1_000_000 // ResetAt is the end rounded up to the ms
		l.dry = d.Allowed < batch
		ws = l.waiters
		n := 0
		for n < len(ws) && l.spend(ws[n].op, ws[n].now) {
			n++
		}
		l.waiters = append(l.waiters[:0:0], ws[n:]...)
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
// one THROTTLE.RETURN each, run on the caller's goroutine. It returns how
// many credits the upstream took back. It also forgets leases whose window
// ended and cached denials that expired, so neither map outgrows the keys
// in use. The command calls it periodically (Config.IdleReturn); tests
// call it at injected instants.
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
		case l.credits > 0 && now-l.used >= idle:
			rs = append(rs, ret{k, l.credits, l.resetAt})
			l.win.Returned += l.credits
			l.credits, l.dry = 0, false
		}
		l.mu.Unlock()
	}
	b.leaseMu.Unlock()
	var back int64
	for _, r := range rs {
		c := b.client(now)
		var n int64
		err := b.call(func(ctx context.Context) (e error) {
			n, e = c.Return(ctx, r.key, r.credits, r.resetAt)
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
