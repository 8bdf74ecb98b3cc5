package tier

// The admission operations beyond one limit (concurrency slots,
// reservations, the penalty box) run strict whatever a key's mode: each
// is one script on the upstream (package upstream, scripts/slots.lua,
// reserve.lua, ban.lua), its records beside the user key on its hash
// slot, so every server shares one set of slots, reservations and bans.
// Each call copies the caller's value, queues it on its lane's worker and
// returns limits.ErrPending; the worker completes the copy and hands it
// to the value's Done. The failure policy is the other operations': an
// upstream that does not answer gives limits.ErrUnavailable, or with
// Config.FailOpen the answer of the local records (Config.Local), whose
// tokens and ids the upstream does not know afterwards.

import (
	"context"

	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/upstream"
)

// pend queues job on lane's worker and returns limits.ErrPending; with
// every queue full it answers as an unavailable upstream does: local()
// when failing open, else limits.ErrUnavailable.
func (b *Backend) pend(lane uint64, job func(), local func() error) error {
	if !b.submit(lane, job) {
		b.st.queueFull.Add(1)
		if b.cfg.FailOpen {
			b.st.failOpen.Add(1)
			return local()
		}
		return limits.ErrUnavailable
	}
	return limits.ErrPending
}

// strict runs f on the upstream from a worker and returns the error the
// operation completes with: f's, mapped for the fronts, or when the
// upstream did not answer and the policy is open, local()'s.
func (b *Backend) strict(now int64, f func(ctx context.Context, c *upstream.Client) error, local func() error) error {
	b.st.pending.Add(-1)
	c := b.client(now)
	e, unavailable := mapErr(b.call(func(ctx context.Context) error { return f(ctx, c) }))
	if unavailable && b.cfg.FailOpen {
		b.st.failOpen.Add(1)
		return local()
	}
	return e
}

// Acquire runs q on the upstream (THROTTLE.ACQUIRE): it returns
// limits.ErrPending and calls q.Done with the completed copy.
func (b *Backend) Acquire(q *limits.Acquire, now int64, _ *limits.Section) error {
	res := *q
	r := &res
	local := func(q *limits.Acquire) func() error {
		return func() error { return b.cfg.Local.Acquire(q, now, nil) }
	}
	return b.pend(q.Lane, func() {
		r.Err = b.strict(now, func(ctx context.Context, c *upstream.Client) error {
			g, err := c.Acquire(ctx, string(r.Key), r.Limit, r.TTL)
			r.Acquired, r.InFlight, r.RetryAfter = g.Acquired, g.InFlight, g.RetryAfter
			r.Token = limits.SlotToken{}
			if g.Acquired {
				r.Token = limits.SlotToken{Slot: g.Slot, Gen: g.Gen}
				b.st.allowed.Add(1)
			}
			return err
		}, local(r))
		if r.Done != nil {
			r.Done(r)
		}
	}, local(q))
}

// Slot runs s on the upstream (THROTTLE.RELEASE, or REFRESH when s.TTL >
// 0): it returns limits.ErrPending and calls s.Done with the completed
// copy.
func (b *Backend) Slot(s *limits.SlotCall, now int64, _ *limits.Section) error {
	res := *s
	r := &res
	local := func(s *limits.SlotCall) func() error {
		return func() error { return b.cfg.Local.Slot(s, now, nil) }
	}
	return b.pend(s.Lane, func() {
		r.Err = b.strict(now, func(ctx context.Context, c *upstream.Client) (err error) {
			if r.TTL > 0 {
				r.Held, err = c.Refresh(ctx, string(r.Key), r.Token.Slot, r.Token.Gen, r.TTL)
			} else {
				r.Held, err = c.Release(ctx, string(r.Key), r.Token.Slot, r.Token.Gen)
			}
			return err
		}, local(r))
		if r.Done != nil {
			r.Done(r)
		}
	}, local(s))
}

// Reserve runs r on the upstream (THROTTLE.RESERVE): it returns
// limits.ErrPending and calls r.Done with the completed copy, whose ID
// holds the sequence number the upstream client drew.
func (b *Backend) Reserve(r *limits.Reserve, now int64, _ *limits.Section) error {
	res := *r
	p := &res
	local := func(r *limits.Reserve) func() error {
		return func() error { return b.cfg.Local.Reserve(r, now, nil) }
	}
	return b.pend(r.Lane, func() {
		p.Err = b.strict(now, func(ctx context.Context, c *upstream.Client) error {
			d, id, err := c.Reserve(ctx, string(p.Key), p.Limit, p.Estimate, p.TTL)
			p.Decision, p.ID = d, limits.ReservationID{Seq: id.Seq, Limit: p.Limit}
			if err == nil && d.Allowed != 0 {
				b.st.allowed.Add(1)
			}
			return err
		}, local(p))
		if p.Done != nil {
			p.Done(p)
		}
	}, local(r))
}

// Settle runs s on the upstream (THROTTLE.SETTLE): it returns
// limits.ErrPending and calls s.Done with the completed copy.
func (b *Backend) Settle(s *limits.Settle, now int64, _ *limits.Section) error {
	res := *s
	p := &res
	local := func(s *limits.Settle) func() error {
		return func() error { return b.cfg.Local.Settle(s, now, nil) }
	}
	return b.pend(s.Lane, func() {
		p.Err = b.strict(now, func(ctx context.Context, c *upstream.Client) (err error) {
			p.Settled, err = c.Settle(ctx, string(p.Key), upstream.Reservation{Seq: p.ID.Seq, Limit: p.ID.Limit}, p.Actual)
			return err
		}, local(p))
		if p.Done != nil {
			p.Done(p)
		}
	}, local(s))
}

// CheckBan runs cb on the upstream (THROTTLE.CHECK ... BAN): it returns
// limits.ErrPending and calls cb.Done with the completed copy.
func (b *Backend) CheckBan(cb *limits.CheckBan, now int64, _ *limits.Section) error {
	res := *cb
	p := &res
	local := func(cb *limits.CheckBan) func() error {
		return func() error { return b.cfg.Local.CheckBan(cb, now, nil) }
	}
	return b.pend(cb.Lane, func() {
		p.Err = b.strict(now, func(ctx context.Context, c *upstream.Client) (err error) {
			p.Decision, err = c.CheckBan(ctx, string(p.Key), p.Limit, p.Cost, p.Ban)
			if err == nil && p.Decision.Allowed != 0 {
				b.st.allowed.Add(1)
			}
			return err
		}, local(p))
		if p.Done != nil {
			p.Done(p)
		}
	}, local(cb))
}

// Ban runs bc on the upstream (THROTTLE.BANNED, or UNBAN when bc.Lift):
// it returns limits.ErrPending and calls bc.Done with the completed copy.
func (b *Backend) Ban(bc *limits.BanCall, now int64, _ *limits.Section) error {
	res := *bc
	p := &res
	local := func(bc *limits.BanCall) func() error {
		return func() error { return b.cfg.Local.Ban(bc, now, nil) }
	}
	return b.pend(bc.Lane, func() {
		p.Err = b.strict(now, func(ctx context.Context, c *upstream.Client) (err error) {
			if p.Lift {
				p.Left = 0
				p.Lifted, err = c.Unban(ctx, string(p.Key))
			} else {
				p.Lifted = false
				p.Left, err = c.Banned(ctx, string(p.Key))
			}
			return err
		}, local(p))
		if p.Done != nil {
			p.Done(p)
		}
	}, local(bc))
}

// admissionCall describes it's admission operation, if it holds one, as
// cl for upstream.Client.Exec and reports whether it did.
func admissionCall(it *limits.BatchItem, cl *upstream.Call) bool {
	switch {
	case it.Acquire != nil:
		q := it.Acquire
		cl.Kind, cl.Key, cl.N, cl.TTL = upstream.CallAcquire, string(q.Key), q.Limit, q.TTL
	case it.Slot != nil:
		s := it.Slot
		cl.Kind, cl.Key, cl.Slot = upstream.CallRelease, string(s.Key), upstream.SlotGrant{Slot: s.Token.Slot, Gen: s.Token.Gen}
		if s.TTL > 0 {
			cl.Kind, cl.TTL = upstream.CallRefresh, s.TTL
		}
	case it.Reserve != nil:
		r := it.Reserve
		cl.Kind, cl.Key, cl.Limit, cl.N, cl.TTL = upstream.CallReserve, string(r.Key), r.Limit, r.Estimate, r.TTL
	case it.Settle != nil:
		s := it.Settle
		cl.Kind, cl.Key, cl.N = upstream.CallSettle, string(s.Key), s.Actual
		cl.Reservation = upstream.Reservation{Seq: s.ID.Seq, Limit: s.ID.Limit}
	case it.CheckBan != nil:
		c := it.CheckBan
		cl.Kind, cl.Key, cl.Limit, cl.N, cl.Ban = upstream.CallCheckBan, string(c.Key), c.Limit, c.Cost, c.Ban
	case it.Ban != nil:
		cl.Kind, cl.Key = upstream.CallBanned, string(it.Ban.Key)
		if it.Ban.Lift {
			cl.Kind = upstream.CallUnban
		}
	default:
		return false
	}
	return true
}

// copyAdmission points it's admission value, if it holds one, at a copy
// of its own, which Exec's worker completes.
func copyAdmission(it *limits.BatchItem) {
	switch {
	case it.Acquire != nil:
		v := *it.Acquire
		it.Acquire = &v
	case it.Slot != nil:
		v := *it.Slot
		it.Slot = &v
	case it.Reserve != nil:
		v := *it.Reserve
		it.Reserve = &v
	case it.Settle != nil:
		v := *it.Settle
		it.Settle = &v
	case it.CheckBan != nil:
		v := *it.CheckBan
		it.CheckBan = &v
	case it.Ban != nil:
		v := *it.Ban
		it.Ban = &v
	}
}

// admissionResult copies cl's result into it's admission value, as the
// backend's method of its kind does, and reports whether it held one.
func (b *Backend) admissionResult(it *limits.BatchItem, cl *upstream.Call) bool {
	err, _ := mapErr(cl.Err)
	switch {
	case it.Acquire != nil:
		q, g := it.Acquire, cl.Slot
		q.Err, q.Acquired, q.InFlight, q.RetryAfter, q.Token = err, g.Acquired, g.InFlight, g.RetryAfter, limits.SlotToken{}
		if err == nil && g.Acquired {
			q.Token = limits.SlotToken{Slot: g.Slot, Gen: g.Gen}
			b.st.allowed.Add(1)
		}
	case it.Slot != nil:
		it.Slot.Err, it.Slot.Held = err, err == nil && cl.Count == 1
	case it.Reserve != nil:
		r := it.Reserve
		r.Err, r.Decision, r.ID = err, cl.Decision, limits.ReservationID{Seq: cl.Reservation.Seq, Limit: r.Limit}
		if err == nil && r.Decision.Allowed != 0 {
			b.st.allowed.Add(1)
		}
	case it.Settle != nil:
		it.Settle.Err, it.Settle.Settled = err, err == nil && cl.Count == 1
	case it.CheckBan != nil:
		c := it.CheckBan
		c.Err, c.Decision = err, cl.Decision
		if err == nil && c.Decision.Allowed != 0 {
			b.st.allowed.Add(1)
		}
	case it.Ban != nil:
		p := it.Ban
		p.Err, p.Left, p.Lifted = err, 0, false
		if err == nil {
			if p.Lift {
				p.Lifted = cl.Count == 1
			} else {
				p.Left = cl.Count
			}
		}
	default:
		return false
	}
	return true
}
