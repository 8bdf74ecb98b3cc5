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
