package grpcfront

import (
	"context"
	"errors"
	"sync"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/policy"
)

// Limiter runs the checks of the Envoy services as operations of the core:
// it implements rls.Limiter (Check) and rlqs.Leaser (Lease, Return) over a
// limits.Backend. It is safe for concurrent use; each call locks only its
// key's shard, as a RESP command does. A gRPC call has a goroutine of its
// own, so when the backend leaves an operation pending (an upstream round
// trip, limits.ErrPending) the call waits for it there; no event loop is
// involved.
//
// With a Durability (NewDurableLimiter), a call that would change a
// counter while persistence refuses changes fails with ErrPersistRefused
// and changes nothing, and Sync waits until the changes made so far are
// durable: the services call it once per request or report, before they
// answer, as the RESP front holds a reply in sync persistence mode.
type Limiter struct {
	b   limits.Backend
	ws  sync.Pool // *waiter, so a call allocates nothing
	dur durable
}

// waiter is one call's operation and the channel its completion arrives on
// when the backend leaves it pending.
type waiter struct {
	op   limits.Op
	ch   chan *limits.Op
	done func(*limits.Op) // w.complete, bound once
}

func (w *waiter) complete(res *limits.Op) { w.ch <- res }

// NewLimiter returns a Limiter over b that waits for no persistence.
func NewLimiter(b limits.Backend) *Limiter { return NewDurableLimiter(b, nil) }

// NewDurableLimiter returns a Limiter over b whose changes are persisted
// by d (nil: none). The persistence layer must call NotifyDurable after
// each write completes or fails, as it calls the RESP server's.
func NewDurableLimiter(b limits.Backend, d Durability) *Limiter {
	return &Limiter{b: b, dur: durable{d: d}, ws: sync.Pool{New: func() any {
		w := &waiter{ch: make(chan *limits.Op, 1)}
		w.done = w.complete
		return w
	}}}
}

// NotifyDurable wakes the calls waiting in Sync so they check their
// ticket again. It never blocks.
func (l *Limiter) NotifyDurable() { l.dur.notify() }

// Sync returns once every change this Limiter's calls made before it is
// durable: at once without a Durability, in async mode, or with the open
// policy while persistence fails. It returns ErrNotDurable when
// persistence starts refusing changes (the closed policy) before then,
// and ctx's error when ctx ends first. A request's answer is sent after
// its Sync, so an Envoy never acts on a decision a crash could forget.
// Costs: one Commit (an atomic add and a channel send) and, in sync mode,
// a wait for the group commit of the next write.
func (l *Limiter) Sync(ctx context.Context) error { return l.dur.wait(ctx) }

// do runs op on the backend and returns it completed: at once, or after
// waiting for a pending one. The returned value is valid until put.
func (l *Limiter) do(op limits.Op, now int64) (*waiter, *limits.Op) {
	w := l.ws.Get().(*waiter)
	w.op = op
	w.op.Done = w.done
	l.b.Do(&w.op, now, nil)
	if errors.Is(w.op.Err, limits.ErrPending) {
		return w, <-w.ch
	}
	return w, &w.op
}

// put returns w to the pool.
func (l *Limiter) put(w *waiter) {
	w.op = limits.Op{}
	l.ws.Put(w)
}

// Check consumes cost units of lim on key at now (ns since the epoch), as
// THROTTLE.CHECK does, and returns the engine's decision; cost 0 is a peek
// (THROTTLE.PEEK: whether one more unit would pass, consuming nothing).
// mode is the rule's per-descriptor mode, passed to the backend as the
// operation's hint (limits.Op.Mode): an upstream backend serves the
// counter in it, the local one ignores it. Engine errors (a bad cost) are
// returned unchanged.
func (l *Limiter) Check(key []byte, lim engine.Limit, mode policy.Mode, cost, now int64) (engine.Decision, error) {
	if cost == 0 {
		// A copy of its own: taking lim's address would move the
		// parameter to the heap on every call, peek or not.
		pl := lim
		return l.b.Peek(key, &pl, 0, now, nil)
	}
	if l.dur.refusing() {
		return engine.Decision{}, ErrPersistRefused
	}
	w, r := l.do(limits.Op{Kind: limits.OpCheck, Key: key, Limit: lim, Cost: cost, Mode: mode.OpMode()}, now)
	d, err := r.Decision, r.Err
	l.put(w)
	return d, err
}

// Lease grants up to batch credits of lim's fixed window on key at now, as
// THROTTLE.LEASE does (the RLQS service's quota assignments): the decision's
// Allowed is the credits granted and ResetAt the window's end, after which
// they are void.
func (l *Limiter) Lease(key []byte, lim engine.Limit, now, batch int64) (engine.Decision, error) {
	if batch > 0 && l.dur.refusing() {
		return engine.Decision{}, ErrPersistRefused
	}
	w, r := l.do(limits.Op{Kind: limits.OpLease, Key: key, Limit: lim, Cost: batch}, now)
	d, err := r.Decision, r.Err
	l.put(w)
	return d, err
}

// Return gives credits back to key's window ending at resetAtMs, as
// THROTTLE.RETURN does, and returns how many were taken back (none once
// that window is over).
func (l *Limiter) Return(key []byte, now, credits, resetAtMs int64) (int64, error) {
	if l.dur.refusing() {
		return 0, ErrPersistRefused
	}
	w, r := l.do(limits.Op{Kind: limits.OpReturn, Key: key, Credits: credits, ResetAt: resetAtMs}, now)
	n, err := r.Accepted, r.Err
	l.put(w)
	return n, err
}
