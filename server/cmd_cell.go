package server

import (
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
)

// CL.THROTTLE speaks redis-cell's dialect: its five-integer reply, its
// integer syntax and its error lines ("Cell error: Store error: ..."). The
// arithmetic is engine.Cell, on the same KindGCRA state as THROTTLE.CHECK
// gcra; the wording of its errors is in errors.go.

// parseCellInt parses an integer as redis-cell does (Rust's i64 parser: an
// optional sign, '+' included, then digits).
func parseCellInt(b []byte) (int64, bool) {
	if len(b) > 1 && b[0] == '+' && b[1] != '-' {
		b = b[1:]
	}
	return parseInt64(b)
}

// CL.THROTTLE key max_burst count_per_period period [quantity]
func (l *loop) clThrottle(cl *client, args [][]byte, now int64) result {
	if len(args) != 5 && len(args) != 6 {
		l.cellError("Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]")
		return failed
	}
	if !l.keyArg(args[1]) {
		return failed
	}
	cell, cost, ok := l.cellArgs(args)
	if !ok {
		return failed
	}
	l.op.Kind, l.op.Key, l.op.Cell, l.op.Cost = limits.OpCell, args[1], cell, cost
	if l.deferOp(cl, now) {
		return replied // answered with the checks around it: batch.go
	}
	op, ok := l.runOp(cl, now, cellReply)
	if !ok {
		return replied // parked: park.go
	}
	return l.cellReply(op)
}

// cellArgs parses CL.THROTTLE's integers (args[2:]) into its cell and
// quantity, replying with redis-cell's error when they do not parse. The
// loop's cellCache answers for the integers of the previous successful
// call when they come again byte for byte.
func (l *loop) cellArgs(args [][]byte) (engine.Cell, int64, bool) {
	if c := &l.cellCache; c.match(args[2:]) {
		return c.val, c.cost, true
	}
	var v [4]int64
	v[3] = 1
	for i := 2; i < len(args); i++ {
		n, ok := parseCellInt(args[i])
		if !ok {
			l.out = append(l.out, "-Cell "+cellPrefix+"Couldn't parse as integer: "...)
			l.out = appendSanitizedBytes(l.out, args[i], 128)
			l.out = append(l.out, '\r', '\n')
			l.ctr.errs[errKindCell]++
			return engine.Cell{}, 0, false
		}
		v[i-2] = n
	}
	cell, err := engine.NewCell(v[0], v[1], v[2])
	if err != nil {
		l.cellEngineError(err)
		return engine.Cell{}, 0, false
	}
	l.cellCache.keep(args[2:], cell, v[3])
	return cell, v[3], true
}

func cellReply(l *loop, _ *client, op *limits.Op) { l.cellReply(op) }

// cellReply appends CL.THROTTLE's reply from op.
func (l *loop) cellReply(op *limits.Op) result {
	if op.Err != nil {
		if _, ok := op.Err.(*limits.Error); ok {
			l.limitsError(op.Err)
		} else {
			l.cellEngineError(op.Err)
		}
		return failed
	}
	r := &op.CellReply
	l.cellShaped(r.Limited, r.Limit, r.Remaining, r.RetryAfter, r.ResetAfter)
	return replied
}

// cellShaped counts a decision of CL.THROTTLE or GCRA and appends its
// reply, redis-cell's five integers: limited (1 denied), limit, remaining,
// retry_after_s and reset_after_s.
func (l *loop) cellShaped(limited, limit, remaining, retryAfter, resetAfter int64) {
	if limited != 0 {
		l.ctr.denied++
	} else {
		l.ctr.allowed++
	}
	l.out = appendArray(l.out, 5)
	l.out = appendInt(l.out, limited)
	l.out = appendInt(l.out, limit)
	l.out = appendInt(l.out, remaining)
	l.out = appendInt(l.out, retryAfter)
	l.out = appendInt(l.out, resetAfter)
}
