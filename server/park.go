package server

import (
	"bytes"
	"context"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
)

// Parking: a backend over an upstream (Config.Upstream) answers most
// operations later, from a goroutine of its own (limits.ErrPending, see
// package limits, "Where an upstream plugs in"). The event loop never waits
// for it. A command whose operation is pending gets a parked record in
// place of its reply: the replies its connection had so far in the batch
// go to the connection's held buffer (cl.dur, the buffer durability.go
// holds replies in), followed by a mark that carries the parked record,
// and later replies queue behind it. When the backend completes the
// operation, its Done marks the record done and queues one release task
// on the connection's loop (gnet's Execute); the task writes, in order,
// every held run whose marks are released, rendering each parked reply
// from its operation value on the loop's goroutine. So replies keep
// their order per connection however the upstream's answers interleave.
//
// A TLS connection has a goroutine of its own (tlsconn.go): it waits for
// the operation there and writes the reply in place.
//
// Costs: in-memory (no upstream) the commands pay one boolean test each.
// With an upstream, an operation the backend answers from what the server
// holds (leased credits, a cached denial: localAnswerer) runs on the
// loop's own value and allocates nothing (TestUpstreamLeasedHitZeroAlloc);
// a pending operation allocates its value, a copy of its key, the parked
// record and its closures, and a completed batch of parked replies costs
// one Execute and one write per connection.

// UpstreamConfig connects the server to a backend over an upstream.
type UpstreamConfig struct {
	// New builds the backend from the server's local one (package
	// limits). The backend may answer Do and MCheck with
	// limits.ErrPending and complete them later (Op.Done, MCheck.Done);
	// it must not block in them.
	New func(local *limits.Local) (limits.Backend, error)
	// SameSlot, if set, reports whether the upstream runs keys together
	// (one hash slot of a Redis Cluster): EXEC over keys it refuses gets
	// -CROSSSLOT and runs nothing.
	SameSlot func(keys [][]byte) bool
	// Info, if set, returns the key/value lines of INFO upstream.
	Info func() [][2]string
}

// parked is one pending reply.
type parked struct {
	left   atomic.Int32 // operations still pending
	done   atomic.Bool
	ch     chan struct{} // closed when done
	h      *heldLoop     // the connection's loop's held set (nil for TLS)
	srv    *Server
	render func(l *loop, cl *client)
}

// complete marks one of the record's operations done.
func (p *parked) complete() {
	if p.left.Add(-1) != 0 {
		return
	}
	p.done.Store(true)
	close(p.ch)
	if p.h != nil {
		p.srv.wakeHeld(p.h)
	}
}

// newParked returns a record waiting for n operations of cl's.
func (l *loop) newParked(cl *client, n int) *parked {
	p := &parked{ch: make(chan struct{}), srv: l.srv}
	p.left.Store(int32(n))
	if l.el != nil {
		h := cl.dur.held
		if h == nil {
			h = l.srv.heldOf(l)
			cl.dur.held = h
		}
		p.h = h
	}
	return p
}

// wakeHeld queues a release task on h's loop unless one is queued.
func (s *Server) wakeHeld(h *heldLoop) {
	if !h.scheduled.CompareAndSwap(false, true) {
		return
	}
	if h.l == nil || h.l.el == nil {
		h.scheduled.Store(false)
		return
	}
	err := h.l.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		s.releaseHeld(h)
		return nil
	}))
	if err != nil { // shutting down: the connections are being closed anyway
		h.scheduled.Store(false)
	}
}

// park holds cl's replies so far and p's reply after them. On a TLS
// connection it waits for p and renders the reply in place instead.
func (l *loop) park(cl *client, p *parked, render func(l *loop, cl *client)) {
	p.render = render
	if l.el == nil {
		<-p.ch
		render(l, cl)
		return
	}
	h := p.h
	if !cl.dur.waiting {
		cl.dur.waiting = true
		h.clients[cl] = struct{}{}
		h.waiting.Add(1)
	}
	var ticket uint64
	if n := len(cl.dur.marks); n > 0 {
		ticket = cl.dur.marks[n-1].ticket
	}
	cl.dur.out = append(cl.dur.out, l.out...)
	cl.dur.marks = append(cl.dur.marks, heldMark{end: len(cl.dur.out), ticket: ticket, pend: p})
	l.out = l.out[:0]
	if p.done.Load() {
		l.srv.wakeHeld(h) // completed before it was parked: its wake found no mark
	}
}

// released reports whether a held mark may be written: its ticket is
// durable and its parked reply, if any, is done.
func (s *Server) released(m *heldMark) bool {
	if m.pend != nil && !m.pend.done.Load() {
		return false
	}
	d := s.cfg.Durability
	return d == nil || d.Released(m.ticket)
}

// renderHeld returns the bytes of cl's first n held marks, parked replies
// rendered in place, in l's output buffer (the caller resets it).
func (l *loop) renderHeld(cl *client, n int) []byte {
	l.out = l.out[:0]
	prev := 0
	for i := 0; i < n; i++ {
		m := &cl.dur.marks[i]
		l.out = append(l.out, cl.dur.out[prev:m.end]...)
		prev = m.end
		if m.pend != nil {
			m.pend.render(l, cl)
			m.pend = nil
		}
	}
	return l.out
}

// localAnswerer is a backend that answers some operations at once from
// what the server holds, without the upstream and without allocating
// (tier.Backend.Local: leased credits, cached denials). It is false, with
// op unchanged, when op needs the upstream.
type localAnswerer interface {
	Local(op *limits.Op, now int64) bool
}

// upstreamOp is runOp's path with an upstream: an operation the backend
// answers locally (localAnswerer) runs on l.op, anything else on a value
// of its own; ok is false when its reply was parked.
func (l *loop) upstreamOp(cl *client, now int64, render func(l *loop, cl *client, op *limits.Op)) (*limits.Op, bool) {
	if c := l.collect; c != nil {
		i := c.add(limits.BatchItem{Op: l.op})
		c.batch.Items[i].Op.Key = bytes.Clone(l.op.Key)
		c.render = func(l *loop, cl *client, b *limits.Batch) { render(l, cl, &b.Items[i].Op) }
		return &l.op, false
	}
	if q := l.srv.quick; q != nil && q.Local(&l.op, now) {
		return &l.op, true
	}
	op := new(limits.Op)
	*op = l.op
	op.Key = bytes.Clone(l.op.Key)
	op.Lane = uint64(cl.id)
	p := l.newParked(cl, 1)
	var res *limits.Op // the completed value, written before p is done
	op.Done = func(r *limits.Op) { res = r; p.complete() }
	l.srv.core.Do(op, now, l.sec())
	if op.Err != limits.ErrPending {
		return op, true
	}
	if l.el == nil {
		<-p.ch
		return res, true
	}
	l.park(cl, p, func(l *loop, cl *client) { render(l, cl, res) })
	return op, false
}

// runOp runs l.op on the backend. It returns the completed operation and
// true, or false when the reply is parked: render writes it later.
func (l *loop) runOp(cl *client, now int64, render func(l *loop, cl *client, op *limits.Op)) (*limits.Op, bool) {
	if !l.srv.upstream {
		l.srv.core.Do(&l.op, now, l.sec())
		return &l.op, true
	}
	return l.upstreamOp(cl, now, render)
}

// upstreamReset is THROTTLE.RESET with an upstream: one operation per key,
// one parked reply for all.
func (l *loop) upstreamReset(cl *client, args [][]byte, now int64) result {
	keys := args[1:]
	if c := l.collect; c != nil {
		start := len(c.batch.Items)
		for _, k := range keys {
			c.add(limits.BatchItem{Op: limits.Op{Kind: limits.OpReset, Key: bytes.Clone(k)}})
		}
		c.render = func(l *loop, _ *client, b *limits.Batch) {
			n := int64(0)
			for _, it := range b.Items[start : start+len(keys)] {
				if it.Op.Err != nil {
					l.limitsError(it.Op.Err)
					return
				}
				n += it.Op.Accepted
			}
			l.out = appendInt(l.out, n)
		}
		return replied
	}
	ops := make([]*limits.Op, len(keys))
	p := l.newParked(cl, len(keys))
	for i, k := range keys {
		op := &limits.Op{Kind: limits.OpReset, Key: bytes.Clone(k), Lane: uint64(cl.id)}
		op.Done = func(r *limits.Op) { ops[i] = r; p.complete() }
		ops[i] = op
		l.srv.core.Do(op, now, l.sec())
		if op.Err != limits.ErrPending {
			p.complete()
		}
	}
	l.park(cl, p, func(l *loop, _ *client) {
		n := int64(0)
		for _, op := range ops {
			if op.Err != nil {
				l.limitsError(op.Err)
				return
			}
			n += op.Accepted
		}
		l.out = appendInt(l.out, n)
	})
	return replied
}

// upstreamMCheck runs m on a value of its own; ok is false when its reply
// was parked (or an error reply appended: then err is set).
func (l *loop) upstreamMCheck(cl *client, m *limits.MCheck, now int64) (*limits.MCheck, bool, error) {
	v := &limits.MCheck{Cost: m.Cost, Limits: append([]engine.Limit(nil), m.Limits...), Lane: uint64(cl.id)}
	v.Keys = make([][]byte, len(m.Keys))
	for i, k := range m.Keys {
		v.Keys[i] = bytes.Clone(k)
	}
	if c := l.collect; c != nil {
		i := c.add(limits.BatchItem{MCheck: v})
		c.render = func(l *loop, cl *client, b *limits.Batch) {
			if res := b.Items[i].MCheck; res.Err != nil {
				l.limitsError(res.Err)
			} else {
				l.mcheckReply(cl, res)
			}
		}
		return v, false, nil
	}
	p := l.newParked(cl, 1)
	var res *limits.MCheck // the completed value, written before p is done
	v.Done = func(r *limits.MCheck) { res = r; p.complete() }
	err := l.srv.core.MCheck(v, now, l.sec())
	if err != limits.ErrPending {
		return v, true, err
	}
	if l.el == nil {
		<-p.ch
		return res, true, res.Err
	}
	l.park(cl, p, func(l *loop, cl *client) {
		if res.Err != nil {
			l.limitsError(res.Err)
			return
		}
		l.mcheckReply(cl, res)
	})
	return v, false, nil
}

// crossSlot reports whether EXEC's queued commands name keys the upstream
// cannot run together.
func (l *loop) crossSlot(m *multiState) bool {
	same := l.srv.cfg.Upstream.SameSlot
	if same == nil {
		return false
	}
	var keys [][]byte
	for i, c := 0, 0; c < len(m.argc); c++ {
		argv := m.command(&l.tx.argv, i, int(m.argc[c]))
		i += int(m.argc[c])
		if sp := resolve(argv); sp != nil {
			forKeys(sp, argv, func(k []byte) { keys = append(keys, bytes.Clone(k)) })
		}
	}
	return len(keys) > 1 && !same(keys)
}

// EXEC over an upstream: the queued commands run as one script. EXEC runs
// their handlers as usual but with l.collect set, so that each operation
// the upstream would run (upstreamOp, upstreamReset, upstreamMCheck and
// the admission commands of park_admission.go, GCRA among the ops) is
// added to one limits.Batch with the function that renders its reply,
// instead of being sent and parked on its own. Replies a handler writes at
// once (an argument error, PING, a keyspace command answered from the
// local store) are kept in their place. The batch goes to the backend in
// one call (Backend.Exec: one script on the upstream, in the connection's
// lane), and EXEC's whole reply is one parked record rendered, in queue
// order, when it completes. If the upstream fails the batch, EXEC's reply
// is that error and no operation of the transaction took effect. Every
// command that runs over an upstream can be queued: the admission
// commands (slots, reservations, bans, CHECK ... BAN) and GCRA run in the
// same script as the checks.

// execCollect is the batch being gathered and the render of the command
// being run, if it added operations.
type execCollect struct {
	batch  limits.Batch
	render func(l *loop, cl *client, b *limits.Batch)
}

// add appends it to the batch and returns its index.
func (c *execCollect) add(it limits.BatchItem) int {
	c.batch.Items = append(c.batch.Items, it)
	return len(c.batch.Items) - 1
}

// execSeg is one queued command's part of EXEC's reply: the bytes its
// handler wrote at once, then what render writes from the completed batch.
type execSeg struct {
	now    []byte
	render func(l *loop, cl *client, b *limits.Batch)
}

// upstreamExec is EXEC over an upstream (m is checked: not dirty, one
// slot).
func (l *loop) upstreamExec(cl *client, m *multiState, now int64) result {
	if len(m.watched) > 0 {
		t := &l.tx.txn
		l.srv.core.Begin(t)
		start := 0
		for _, w := range m.watched {
			_ = t.Add(m.wbuf[start:w.end])
			start = w.end
		}
		_ = t.Lock()
		hold := m.watchesHold(l, now)
		t.Unlock()
		if !hold {
			endMulti(cl)
			l.out = appendNullArray(l.out, cl.resp3)
			return replied
		}
	}
	c := &execCollect{batch: limits.Batch{Lane: uint64(cl.id)}}
	segs := make([]execSeg, 0, len(m.argc))
	closeAfter := false
	l.collect = c
	for i, n := 0, 0; n < len(m.argc); n++ {
		argv := m.command(&l.tx.argv, i, int(m.argc[n]))
		i += int(m.argc[n])
		mark := len(l.out)
		c.render = nil
		if l.runQueued(cl, argv, now) {
			closeAfter = true
		}
		segs = append(segs, execSeg{now: bytes.Clone(l.out[mark:]), render: c.render})
		l.out = l.out[:mark]
	}
	l.collect = nil
	endMulti(cl)
	var res *limits.Batch // the completed batch, written before p is done
	reply := func(l *loop, cl *client) {
		if res != nil && res.Err != nil {
			l.limitsError(res.Err)
			return
		}
		l.out = appendArray(l.out, len(segs))
		for _, s := range segs {
			l.out = append(l.out, s.now...)
			if s.render != nil {
				s.render(l, cl, res)
			}
		}
	}
	if len(c.batch.Items) == 0 {
		reply(l, cl)
		return closeIf(closeAfter)
	}
	p := l.newParked(cl, 1)
	c.batch.Done = func(r *limits.Batch) { res = r; p.complete() }
	switch err := l.srv.core.Exec(&c.batch, now, nil); err {
	case nil: // completed at once (the local store, failing open)
		res = &c.batch
		reply(l, cl)
	case limits.ErrPending:
		l.park(cl, p, reply)
	default: // refused before anything was sent
		l.limitsError(err)
	}
	return closeIf(closeAfter)
}
