package server

import (
	"errors"
	"math"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// opKind selects what op.Apply does.
type opKind uint8

const (
	opCheck opKind = iota
	opLease
	opReturn
	opCell
)

// op is the shard.Transform of the THROTTLE commands. Each loop owns one and
// reuses it for every command, so handing it to Store.Apply allocates
// nothing; Apply records the engine's outputs in it.
type op struct {
	kind opKind
	lim  engine.Limit
	cell engine.Cell

	cost             int64 // check: units; lease: batch; cell: quantity
	credits, resetAt int64 // return

	d        engine.Decision
	cr       engine.CellReply
	accepted int64
	err      error
}

var _ shard.Transform = (*op)(nil)

// Apply runs the engine on the key's state. On error the state is returned
// unchanged, which the store treats as "touch nothing".
func (o *op) Apply(cur engine.State, now int64) (engine.State, int64) {
	var (
		next engine.State
		ttl  int64
		err  error
	)
	switch o.kind {
	case opCheck:
		next, o.d, ttl, err = o.lim.Check(cur, now, o.cost)
	case opLease:
		next, o.d, ttl, err = o.lim.Lease(cur, now, o.cost)
	case opReturn:
		next, o.accepted, ttl, err = engine.Return(cur, now, o.credits, o.resetAt)
	case opCell:
		next, o.cr, ttl, err = o.cell.Throttle(cur, now, o.cost)
	}
	o.err = err
	if err != nil {
		return cur, 0
	}
	return next, ttl
}

// engineError appends err as an error reply: an *engine.Error keeps its code.
func (l *loop) engineError(err error) {
	var ee *engine.Error
	if errors.As(err, &ee) {
		l.errorReply(ee.Code, ee.Msg)
		return
	}
	l.errorReply("ERR", err.Error())
}

// Period units accepted by THROTTLE commands, in nanoseconds.
var periodUnits = [...]struct {
	suffix string
	ns     int64
}{
	{"ms", 1_000_000},
	{"s", 1_000_000_000},
	{"m", 60 * 1_000_000_000},
	{"h", 3600 * 1_000_000_000},
	{"d", 86400 * 1_000_000_000},
}

// parsePeriod parses "<n>" (milliseconds) or "<n><unit>" with unit ms, s, m,
// h or d, into nanoseconds. ok is false for anything else or an overflow.
func parsePeriod(b []byte) (int64, bool) {
	mult := int64(1_000_000)
	digits := b
	for _, u := range periodUnits {
		if len(b) > len(u.suffix) && equalFold(b[len(b)-len(u.suffix):], u.suffix) {
			c := b[len(b)-len(u.suffix)-1]
			if c >= '0' && c <= '9' {
				mult = u.ns
				digits = b[:len(b)-len(u.suffix)]
				break
			}
		}
	}
	n, ok := parseInt64(digits)
	if !ok {
		return 0, false
	}
	if n > math.MaxInt64/mult || n < math.MinInt64/mult {
		return 0, false
	}
	return n * mult, true
}

// parseAlgo maps an ALGO argument to its engine kind.
func parseAlgo(b []byte) (engine.Kind, bool) {
	switch {
	case equalFold(b, "gcra"):
		return engine.KindGCRA, true
	case equalFold(b, "token"):
		return engine.KindToken, true
	case equalFold(b, "fixed"):
		return engine.KindFixed, true
	case equalFold(b, "sliding"):
		return engine.KindSliding, true
	}
	return 0, false
}

// limitArgs parses "limit period [ALGO a] [BURST n] [COST n]" (args[2:]) into
// l.op.lim and l.op.cost. withCost allows COST. It appends the error reply
// and returns false on bad input.
func (l *loop) limitArgs(args [][]byte, withCost bool) bool {
	limit, period, ok := l.keyLimitPeriod(args)
	if !ok {
		return false
	}
	algo, burst, cost := engine.KindGCRA, int64(0), int64(1)
	for i := 4; i < len(args); i += 2 {
		opt := args[i]
		var which int
		switch {
		case equalFold(opt, "algo"):
			which = 1
		case equalFold(opt, "burst"):
			which = 2
		case withCost && equalFold(opt, "cost"):
			which = 3
		default:
			l.out = append(l.out, "-ERR unknown option '"...)
			l.out = appendSanitizedBytes(l.out, opt, 64)
			l.out = append(l.out, "'\r\n"...)
			l.ctr.errs[errKindERR]++
			return false
		}
		if i+1 >= len(args) {
			l.errorReply("ERR", "syntax error: option without a value")
			return false
		}
		v := args[i+1]
		switch which {
		case 1:
			if algo, ok = parseAlgo(v); !ok {
				l.errorReply("ERR", "unknown algorithm: want gcra, token, fixed or sliding")
				return false
			}
		case 2:
			if burst, ok = parseInt64(v); !ok {
				l.errorReply("ERR", "burst is not an integer or out of range")
				return false
			}
		case 3:
			if cost, ok = parseInt64(v); !ok {
				l.errorReply("ERR", "cost is not an integer or out of range")
				return false
			}
		}
	}
	lim, err := engine.NewLimit(algo, limit, period, burst)
	if err != nil {
		l.engineError(err)
		return false
	}
	l.op.lim = lim
	l.op.cost = cost
	return true
}

// keyLimitPeriod checks the key (args[1]) and parses limit (args[2]) and
// period (args[3], in ns), the arguments every limit-taking command starts
// with. It appends the error reply and returns ok == false on bad input.
func (l *loop) keyLimitPeriod(args [][]byte) (limit, period int64, ok bool) {
	if len(args[1]) > shard.MaxKeyLen {
		l.errorReply("ERR", "key is too long")
		return 0, 0, false
	}
	if limit, ok = parseInt64(args[2]); !ok {
		l.errorReply("ERR", "limit is not an integer or out of range")
		return 0, 0, false
	}
	if period, ok = parsePeriod(args[3]); !ok {
		l.errorReply("ERR", "period is not an integer number of milliseconds or a number with unit ms, s, m, h or d, or out of range")
		return 0, 0, false
	}
	return limit, period, true
}

// decision appends d as the five-field reply; first names field 0.
func (l *loop) decision(cl *client, d *engine.Decision, first string) {
	if cl.resp3 {
		l.out = appendMap(l.out, 5, true)
		l.out = appendBulkString(l.out, first)
		l.out = appendInt(l.out, d.Allowed)
		l.out = appendBulkString(l.out, "limit")
		l.out = appendInt(l.out, d.Limit)
		l.out = appendBulkString(l.out, "remaining")
		l.out = appendInt(l.out, d.Remaining)
		l.out = appendBulkString(l.out, "reset_at_ms")
		l.out = appendInt(l.out, d.ResetAt)
		l.out = appendBulkString(l.out, "retry_after_ms")
		l.out = appendInt(l.out, d.RetryAfter)
		return
	}
	l.out = appendArray(l.out, 5)
	l.out = appendInt(l.out, d.Allowed)
	l.out = appendInt(l.out, d.Limit)
	l.out = appendInt(l.out, d.Remaining)
	l.out = appendInt(l.out, d.ResetAt)
	l.out = appendInt(l.out, d.RetryAfter)
}

// THROTTLE.CHECK key limit period [ALGO a] [BURST n] [COST n]
func (l *loop) throttleCheck(cl *client, args [][]byte, now int64) {
	if !l.limitArgs(args, true) {
		return
	}
	l.op.kind = opCheck
	l.store.Apply(args[1], now, &l.op)
	if l.op.err != nil {
		l.engineError(l.op.err)
		return
	}
	if l.op.d.Allowed != 0 {
		l.ctr.allowed++
	} else {
		l.ctr.denied++
	}
	l.decision(cl, &l.op.d, "allowed")
}

// THROTTLE.PEEK key limit period [ALGO a] [BURST n]
func (l *loop) throttlePeek(cl *client, args [][]byte, now int64) {
	if !l.limitArgs(args, false) {
		return
	}
	st, _ := l.store.Get(args[1], now)
	d, err := l.op.lim.Peek(st, now)
	if err != nil {
		l.engineError(err)
		return
	}
	l.decision(cl, &d, "allowed")
}

// THROTTLE.RESET key [key ...]
func (l *loop) throttleReset(args [][]byte, now int64) {
	n := int64(0)
	for _, k := range args[1:] {
		if l.store.Delete(k, now) {
			n++
		}
	}
	l.out = appendInt(l.out, n)
}

// THROTTLE.LEASE key limit period BATCH n
func (l *loop) throttleLease(cl *client, args [][]byte, now int64) {
	limit, period, ok := l.keyLimitPeriod(args)
	if !ok {
		return
	}
	if !equalFold(args[4], "batch") {
		l.errSyntax()
		return
	}
	batch, ok := parseInt64(args[5])
	if !ok {
		l.errorReply("ERR", "batch is not an integer or out of range")
		return
	}
	lim, err := engine.NewLimit(engine.KindFixed, limit, period, 0)
	if err != nil {
		l.engineError(err)
		return
	}
	l.op.lim = lim
	l.op.kind = opLease
	l.op.cost = batch
	l.store.Apply(args[1], now, &l.op)
	if l.op.err != nil {
		l.engineError(l.op.err)
		return
	}
	l.ctr.leaseGranted += l.op.d.Allowed
	l.decision(cl, &l.op.d, "granted")
}

// THROTTLE.RETURN key credits reset_at_ms
func (l *loop) throttleReturn(args [][]byte, now int64) {
	if len(args[1]) > shard.MaxKeyLen {
		l.errorReply("ERR", "key is too long")
		return
	}
	credits, ok := parseInt64(args[2])
	if !ok {
		l.errorReply("ERR", "credits is not an integer or out of range")
		return
	}
	if credits < 0 {
		l.errorReply("ERR", "credits must not be negative")
		return
	}
	resetAt, ok := parseInt64(args[3])
	if !ok {
		l.errorReply("ERR", "reset_at_ms is not an integer or out of range")
		return
	}
	l.op.kind = opReturn
	l.op.credits, l.op.resetAt = credits, resetAt
	l.store.Apply(args[1], now, &l.op)
	if l.op.err != nil {
		l.engineError(l.op.err)
		return
	}
	l.ctr.leaseReturned += l.op.accepted
	l.out = appendInt(l.out, l.op.accepted)
}

// cellError appends an error worded as redis-cell words it.
func (l *loop) cellError(msg string) {
	l.errorReply("Cell", "error: Store error: "+msg)
}

// parseCellInt parses an integer as redis-cell does (Rust's i64 parser: an
// optional sign, '+' included, then digits).
func parseCellInt(b []byte) (int64, bool) {
	if len(b) > 1 && b[0] == '+' && b[1] != '-' {
		b = b[1:]
	}
	return parseInt64(b)
}

// CL.THROTTLE key max_burst count_per_period period [quantity]
func (l *loop) clThrottle(args [][]byte, now int64) {
	if len(args) != 5 && len(args) != 6 {
		l.cellError("Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]")
		return
	}
	if len(args[1]) > shard.MaxKeyLen {
		l.errorReply("ERR", "key is too long")
		return
	}
	var v [4]int64
	v[3] = 1
	for i := 2; i < len(args); i++ {
		n, ok := parseCellInt(args[i])
		if !ok {
			b := make([]byte, 0, 64)
			b = append(b, "Couldn't parse as integer: "...)
			b = appendSanitizedBytes(b, args[i], 128)
			l.cellError(string(b))
			return
		}
		v[i-2] = n
	}
	cell, err := engine.NewCell(v[0], v[1], v[2])
	if err != nil {
		l.engineError(err)
		return
	}
	l.op.cell = cell
	l.op.kind = opCell
	l.op.cost = v[3]
	l.store.Apply(args[1], now, &l.op)
	if l.op.err != nil {
		l.engineError(l.op.err)
		return
	}
	r := &l.op.cr
	if r.Limited != 0 {
		l.ctr.denied++
	} else {
		l.ctr.allowed++
	}
	l.out = appendArray(l.out, 5)
	l.out = appendInt(l.out, r.Limited)
	l.out = appendInt(l.out, r.Limit)
	l.out = appendInt(l.out, r.Remaining)
	l.out = appendInt(l.out, r.RetryAfter)
	l.out = appendInt(l.out, r.ResetAfter)
}
