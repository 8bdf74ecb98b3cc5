package server

// Parking of the admission commands over an upstream (THROTTLE.ACQUIRE,
// RELEASE, REFRESH, RESERVE, SETTLE, CHECK ... BAN, BANNED, UNBAN): each
// runs its operation on a value of its own, with a copy of its key, and
// parks its reply as park.go parks Op and MCheck replies, rendered from
// the completed value by the same function the in-memory path uses. In
// memory the commands run on the loop's reused values and never come here.
// Inside EXEC (l.collect set) the value is added to the transaction's
// batch instead, and its reply rendered from the completed batch.

import (
	"bytes"

	"github.com/throttlekit/throttlekit-server/limits"
)

// parkCall runs call, which hands v to the backend, with v's Done set by
// setDone. It returns the completed value and true, or false when the
// reply was parked: render writes it (or the error reply) once the backend
// completes v. err is the error of a call that did not go pending.
func parkCall[T any](l *loop, cl *client, v *T, setDone func(func(*T)), call func() error, errOf func(*T) error,
	render func(l *loop, cl *client, v *T)) (*T, bool, error) {
	p := l.newParked(cl, 1)
	var res *T // the completed value, written before p is done
	setDone(func(r *T) { res = r; p.complete() })
	if err := call(); err != limits.ErrPending {
		return v, true, err
	}
	if l.el == nil { // TLS: this goroutine waits and writes in place
		<-p.ch
		return res, true, errOf(res)
	}
	l.park(cl, p, func(l *loop, cl *client) {
		if err := errOf(res); err != nil {
			l.limitsError(err)
			return
		}
		render(l, cl, res)
	})
	return v, false, nil
}

// collectItem adds it to EXEC's batch when one is being gathered
// (park.go, "EXEC over an upstream") and reports whether it did: the
// reply, or the item's error reply, is rendered from the completed batch,
// where get finds the item's value.
func collectItem[T any](l *loop, it limits.BatchItem, get func(*limits.BatchItem) *T, errOf func(*T) error,
	render func(l *loop, cl *client, v *T)) bool {
	c := l.collect
	if c == nil {
		return false
	}
	i := c.add(it)
	c.render = func(l *loop, cl *client, b *limits.Batch) {
		v := get(&b.Items[i])
		if err := errOf(v); err != nil {
			l.limitsError(err)
			return
		}
		render(l, cl, v)
	}
	return true
}

// finish writes the reply of a parkCall that completed at once: the error
// reply, or render's; a parked reply is written later.
func finish[T any](l *loop, cl *client, v *T, done bool, err error, render func(l *loop, cl *client, v *T)) result {
	switch {
	case err != nil:
		l.limitsError(err)
		return failed
	case done:
		render(l, cl, v)
	}
	return replied
}

func (l *loop) upstreamAcquire(cl *client, q *limits.Acquire, now int64) result {
	v := &limits.Acquire{Key: bytes.Clone(q.Key), Limit: q.Limit, TTL: q.TTL, Lane: uint64(cl.id)}
	if collectItem(l, limits.BatchItem{Acquire: v}, func(it *limits.BatchItem) *limits.Acquire { return it.Acquire },
		func(v *limits.Acquire) error { return v.Err }, (*loop).acquireReply) {
		return replied
	}
	r, done, err := parkCall(l, cl, v, func(f func(*limits.Acquire)) { v.Done = f },
		func() error { return l.srv.core.Acquire(v, now, l.sec()) },
		func(v *limits.Acquire) error { return v.Err }, (*loop).acquireReply)
	return finish(l, cl, r, done, err, (*loop).acquireReply)
}

func (l *loop) upstreamSlot(cl *client, s *limits.SlotCall, now int64) result {
	v := &limits.SlotCall{Key: bytes.Clone(s.Key), Token: s.Token, TTL: s.TTL, Lane: uint64(cl.id)}
	if collectItem(l, limits.BatchItem{Slot: v}, func(it *limits.BatchItem) *limits.SlotCall { return it.Slot },
		func(v *limits.SlotCall) error { return v.Err }, (*loop).slotReply) {
		return replied
	}
	r, done, err := parkCall(l, cl, v, func(f func(*limits.SlotCall)) { v.Done = f },
		func() error { return l.srv.core.Slot(v, now, l.sec()) },
		func(v *limits.SlotCall) error { return v.Err }, (*loop).slotReply)
	return finish(l, cl, r, done, err, (*loop).slotReply)
}

func (l *loop) upstreamReserve(cl *client, q *limits.Reserve, now int64) result {
	v := &limits.Reserve{Key: bytes.Clone(q.Key), Limit: q.Limit, Estimate: q.Estimate, TTL: q.TTL, Lane: uint64(cl.id)}
	if collectItem(l, limits.BatchItem{Reserve: v}, func(it *limits.BatchItem) *limits.Reserve { return it.Reserve },
		func(v *limits.Reserve) error { return v.Err }, (*loop).reserveReply) {
		return replied
	}
	r, done, err := parkCall(l, cl, v, func(f func(*limits.Reserve)) { v.Done = f },
		func() error { return l.srv.core.Reserve(v, now, l.sec()) },
		func(v *limits.Reserve) error { return v.Err }, (*loop).reserveReply)
	return finish(l, cl, r, done, err, (*loop).reserveReply)
}

func (l *loop) upstreamSettle(cl *client, s *limits.Settle, now int64) result {
	v := &limits.Settle{Key: bytes.Clone(s.Key), ID: s.ID, Actual: s.Actual, Lane: uint64(cl.id)}
	if collectItem(l, limits.BatchItem{Settle: v}, func(it *limits.BatchItem) *limits.Settle { return it.Settle },
		func(v *limits.Settle) error { return v.Err }, (*loop).settleReply) {
		return replied
	}
	r, done, err := parkCall(l, cl, v, func(f func(*limits.Settle)) { v.Done = f },
		func() error { return l.srv.core.Settle(v, now, l.sec()) },
		func(v *limits.Settle) error { return v.Err }, (*loop).settleReply)
	return finish(l, cl, r, done, err, (*loop).settleReply)
}

func (l *loop) upstreamCheckBan(cl *client, b *limits.CheckBan, now int64) result {
	v := &limits.CheckBan{Key: bytes.Clone(b.Key), Limit: b.Limit, Cost: b.Cost, Ban: b.Ban, Lane: uint64(cl.id)}
	if collectItem(l, limits.BatchItem{CheckBan: v}, func(it *limits.BatchItem) *limits.CheckBan { return it.CheckBan },
		func(v *limits.CheckBan) error { return v.Err }, (*loop).checkBanReply) {
		return replied
	}
	r, done, err := parkCall(l, cl, v, func(f func(*limits.CheckBan)) { v.Done = f },
		func() error { return l.srv.core.CheckBan(v, now, l.sec()) },
		func(v *limits.CheckBan) error { return v.Err }, (*loop).checkBanReply)
	return finish(l, cl, r, done, err, (*loop).checkBanReply)
}

func (l *loop) upstreamBan(cl *client, b *limits.BanCall, now int64) result {
	v := &limits.BanCall{Key: bytes.Clone(b.Key), Lift: b.Lift, Lane: uint64(cl.id)}
	if collectItem(l, limits.BatchItem{Ban: v}, func(it *limits.BatchItem) *limits.BanCall { return it.Ban },
		func(v *limits.BanCall) error { return v.Err }, (*loop).banReply) {
		return replied
	}
	r, done, err := parkCall(l, cl, v, func(f func(*limits.BanCall)) { v.Done = f },
		func() error { return l.srv.core.Ban(v, now, l.sec()) },
		func(v *limits.BanCall) error { return v.Err }, (*loop).banReply)
	return finish(l, cl, r, done, err, (*loop).banReply)
}
