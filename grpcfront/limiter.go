package grpcfront

import (
	"sync"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
)

// Limiter runs the checks of the Envoy services as operations of the core:
// it implements rls.Limiter (Check) and rlqs.Leaser (Lease, Return) over a
// limits.Backend. It is safe for
// concurrent use; each call locks only its key's shard, as a RESP command
// does.
type Limiter struct {
	b   limits.Backend
	ops sync.Pool // *limits.Op, so a check allocates nothing
}

// NewLimiter returns a Limiter over b.
func NewLimiter(b limits.Backend) *Limiter {
	return &Limiter{b: b, ops: sync.Pool{New: func() any { return new(limits.Op) }}}
}

// Check consumes cost units of lim on key at now (ns since the epoch), as
// THROTTLE.CHECK does, and returns the engine's decision; cost 0 is a peek
// (THROTTLE.PEEK: whether one more unit would pass, consuming nothing).
// Engine errors (a bad cost) are returned unchanged.
func (l *Limiter) Check(key []byte, lim engine.Limit, cost, now int64) (engine.Decision, error) {
	if cost == 0 {
		// A copy of its own: taking lim's address would move the
		// parameter to the heap on every call, peek or not.
		pl := lim
		return l.b.Peek(key, &pl, 0, now, nil)
	}
	op := l.ops.Get().(*limits.Op)
	*op = limits.Op{Kind: limits.OpCheck, Key: key, Limit: lim, Cost: cost}
	l.b.Do(op, now, nil)
	d, err := op.Decision, op.Err
	op.Key = nil
	l.ops.Put(op)
	return d, err
}

// Lease grants up to batch credits of lim's fixed window on key at now, as
// THROTTLE.LEASE does (the RLQS service's quota assignments): the decision's
// Allowed is the credits granted and ResetAt the window's end, after which
// they are void.
func (l *Limiter) Lease(key []byte, lim engine.Limit, now, batch int64) (engine.Decision, error) {
	op := l.ops.Get().(*limits.Op)
	*op = limits.Op{Kind: limits.OpLease, Key: key, Limit: lim, Cost: batch}
	l.b.Do(op, now, nil)
	d, err := op.Decision, op.Err
	op.Key = nil
	l.ops.Put(op)
	return d, err
}

// Return gives credits back to key's window ending at resetAtMs, as
// THROTTLE.RETURN does, and returns how many were taken back (none once
// that window is over).
func (l *Limiter) Return(key []byte, now, credits, resetAtMs int64) (int64, error) {
	op := l.ops.Get().(*limits.Op)
	*op = limits.Op{Kind: limits.OpReturn, Key: key, Credits: credits, ResetAt: resetAtMs}
	l.b.Do(op, now, nil)
	n, err := op.Accepted, op.Err
	op.Key = nil
	l.ops.Put(op)
	return n, err
}
