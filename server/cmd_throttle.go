package server

import (
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/server/resp"
)

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

// limitArgs parses "limit period [ALGO a] [BURST n] [COST n]" (args[2:])
// into l.op.lim and l.op.cost. It appends the error reply and returns false
// on bad input. Options may come in any order; the last of a repeated one
// counts. An option that cannot apply is an error, never ignored: BURST is
// the bucket size of gcra and token, so with fixed or sliding (whose window
// admits exactly limit) it is refused, and BURST 0 is refused rather than
// read as "the default".
//
// What BURST and the reply's limit field mean, by algorithm:
//
//   - gcra, token: BURST is the most units admitted at once (the bucket's
//     size); the rate stays limit per period. Without BURST the bucket holds
//     limit units. The reply's limit is that bucket size.
//   - fixed, sliding: no BURST; a window of period admits limit units (for
//     sliding, weighted over the previous window). The reply's limit is
//     limit.
//
// The loop's limitCache answers for the arguments of the previous
// successful call when they come again byte for byte; the key is checked
// every time.
func (l *loop) limitArgs(args [][]byte) bool {
	if !l.keyArg(args[1]) {
		return false
	}
	if c := &l.limCache; c.match(args[2:]) {
		l.op.Limit, l.op.Cost = c.val, c.cost
		return true
	}
	limit, period, ok := l.limitPeriod(args)
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
		case equalFold(opt, "cost"):
			which = 3
		default:
			l.errQuoted("unknown option ", opt, 64, "")
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
			if burst, ok = l.intArg(v, "burst"); !ok {
				return false
			}
			if burst <= 0 {
				l.errorReply("ERR", "burst must be positive")
				return false
			}
		case 3:
			if cost, ok = l.intArg(v, "cost"); !ok {
				return false
			}
		}
	}
	if burst != 0 && (algo == engine.KindFixed || algo == engine.KindSliding) {
		l.errorReply("ERR", "BURST applies only to ALGO gcra and token")
		return false
	}
	lim, err := engine.NewLimit(algo, limit, period, burst)
	if err != nil {
		l.engineError(err)
		return false
	}
	l.op.Limit = lim
	l.op.Cost = cost
	l.limCache.keep(args[2:], lim, cost)
	return true
}

// keyLimitPeriod checks the key (args[1]) and parses limit (args[2]) and
// period (args[3], in ns), the arguments every limit-taking command starts
// with. It appends the error reply and returns ok == false on bad input.
func (l *loop) keyLimitPeriod(args [][]byte) (limit, period int64, ok bool) {
	if !l.keyArg(args[1]) {
		return 0, 0, false
	}
	return l.limitPeriod(args)
}

// limitPeriod is keyLimitPeriod for a caller that has checked the key.
func (l *loop) limitPeriod(args [][]byte) (limit, period int64, ok bool) {
	if limit, ok = l.intArg(args[2], "limit"); !ok {
		return 0, 0, false
	}
	if period, ok = parsePeriod(args[3]); !ok {
		l.errorReply("ERR", "period is not a number of milliseconds or a duration such as 500ms, 1.5s, 1h30m or 1d, or out of range")
		return 0, 0, false
	}
	return limit, period, true
}

// decision appends d as the five-field reply; first names field 0.
func (l *loop) decision(cl *client, d *engine.Decision, first string) {
	l.decisionFields(cl, d, first, 5)
}

// decisionFields appends the header of an n-field decision reply (n >= 5:
// a map in RESP3, an array in RESP2) and its five decision fields, first
// naming field 0; the caller appends fields 6 to n. The five go to the
// codec in one call, which checks the buffer's room once for all of them.
func (l *loop) decisionFields(cl *client, d *engine.Decision, first string, n int) {
	vals := [5]int64{d.Allowed, d.Limit, d.Remaining, d.ResetAt, d.RetryAfter}
	if cl.resp3 {
		names := [5]string{first, "limit", "remaining", "reset_at_ms", "retry_after_ms"}
		l.out = resp.AppendIntFields(l.out, n, true, names[:], vals[:])
		return
	}
	l.out = resp.AppendIntFields(l.out, n, false, nil, vals[:])
}

// THROTTLE.CHECK key limit period [ALGO a] [BURST n] [COST n]
func (l *loop) throttleCheck(cl *client, args [][]byte, now int64) result {
	if !l.limitArgs(args) {
		return failed
	}
	l.op.Kind, l.op.Key = limits.OpCheck, args[1]
	if l.deferOp(cl, now) {
		return replied // answered with the checks around it: batch.go
	}
	op, ok := l.runOp(cl, now, checkReply)
	if !ok {
		return replied // parked: park.go
	}
	return l.checkReply(cl, op)
}

func checkReply(l *loop, cl *client, op *limits.Op) { l.checkReply(cl, op) }

// checkReply appends THROTTLE.CHECK's reply from op.
func (l *loop) checkReply(cl *client, op *limits.Op) result {
	if op.Err != nil {
		l.limitsError(op.Err)
		return failed
	}
	if op.Decision.Allowed != 0 {
		l.ctr.allowed++
	} else {
		l.ctr.denied++
	}
	l.decision(cl, &op.Decision, "allowed")
	return replied
}

// THROTTLE.PEEK key limit period [ALGO a] [BURST n] [COST n]: what
// THROTTLE.CHECK with the same arguments would answer, consuming nothing.
// allowed and retry_after_ms are those of a request of COST units (default
// 1); limit, remaining and reset_at_ms describe the key as it is.
func (l *loop) throttlePeek(cl *client, args [][]byte, now int64) result {
	if !l.limitArgs(args) {
		return failed
	}
	if l.srv.upstream { // park.go
		l.op.Kind, l.op.Key = limits.OpPeek, args[1]
		op, ok := l.upstreamOp(cl, now, peekReply)
		if ok {
			peekReply(l, cl, op)
		}
		return replied
	}
	d, err := l.srv.core.Peek(args[1], &l.op.Limit, l.op.Cost, now, l.sec())
	if err != nil {
		l.engineError(err)
		return failed
	}
	l.decision(cl, &d, "allowed")
	return replied
}

// peekReply appends THROTTLE.PEEK's reply from op (upstream mode).
func peekReply(l *loop, cl *client, op *limits.Op) {
	if op.Err != nil {
		l.limitsError(op.Err)
		return
	}
	l.decision(cl, &op.Decision, "allowed")
}

// THROTTLE.RESET key [key ...], and DEL and UNLINK: the number of keys that
// held state.
func (l *loop) throttleReset(cl *client, args [][]byte, now int64) result {
	if l.srv.upstream {
		return l.upstreamReset(cl, args, now) // park.go
	}
	n := int64(0)
	for _, k := range args[1:] {
		if l.srv.core.Reset(k, now, l.sec()) {
			n++
		}
	}
	l.out = appendInt(l.out, n)
	return replied
}

// THROTTLE.LEASE key limit period BATCH n: a lease always draws on a
// fixed window, so ALGO, BURST and COST are refused as unknown options.
func (l *loop) throttleLease(cl *client, args [][]byte, now int64) result {
	limit, period, ok := l.keyLimitPeriod(args)
	if !ok {
		return failed
	}
	batch := int64(-1)
	for i := 4; i < len(args); i += 2 {
		if !equalFold(args[i], "batch") {
			l.errQuoted("unknown option ", args[i], 64, " for THROTTLE.LEASE: it takes only BATCH, on a fixed window")
			return failed
		}
		if i+1 >= len(args) {
			l.errorReply("ERR", "syntax error: option without a value")
			return failed
		}
		if batch, ok = l.intArg(args[i+1], "batch"); !ok {
			return failed
		}
		if batch <= 0 {
			l.errorReply("ERR", "batch must be positive")
			return failed
		}
	}
	if batch < 0 {
		l.errorReply("ERR", "BATCH is required")
		return failed
	}
	lim, err := engine.NewLimit(engine.KindFixed, limit, period, 0)
	if err != nil {
		l.engineError(err)
		return failed
	}
	l.op.Kind, l.op.Key, l.op.Limit, l.op.Cost = limits.OpLease, args[1], lim, batch
	op, ok := l.runOp(cl, now, leaseReply)
	if !ok {
		return replied // parked: park.go
	}
	return l.leaseReply(cl, op)
}

func leaseReply(l *loop, cl *client, op *limits.Op) { l.leaseReply(cl, op) }

// leaseReply appends THROTTLE.LEASE's reply from op.
func (l *loop) leaseReply(cl *client, op *limits.Op) result {
	if op.Err != nil {
		l.limitsError(op.Err)
		return failed
	}
	l.ctr.leaseGranted += op.Decision.Allowed
	l.decision(cl, &op.Decision, "granted")
	return replied
}

// THROTTLE.RETURN key credits reset_at_ms
func (l *loop) throttleReturn(cl *client, args [][]byte, now int64) result {
	if !l.keyArg(args[1]) {
		return failed
	}
	credits, ok := l.intArg(args[2], "credits")
	if !ok {
		return failed
	}
	if credits < 0 {
		l.errorReply("ERR", "credits must not be negative")
		return failed
	}
	resetAt, ok := l.intArg(args[3], "reset_at_ms")
	if !ok {
		return failed
	}
	l.op.Kind, l.op.Key = limits.OpReturn, args[1]
	l.op.Credits, l.op.ResetAt = credits, resetAt
	op, ok := l.runOp(cl, now, returnReply)
	if !ok {
		return replied // parked: park.go
	}
	return l.returnReply(op)
}

func returnReply(l *loop, _ *client, op *limits.Op) { l.returnReply(op) }

// returnReply appends THROTTLE.RETURN's reply from op.
func (l *loop) returnReply(op *limits.Op) result {
	if op.Err != nil {
		l.limitsError(op.Err)
		return failed
	}
	l.ctr.leaseReturned += op.Accepted
	l.out = appendInt(l.out, op.Accepted)
	return replied
}

// banOption returns the index of a BAN option among THROTTLE.CHECK's
// options (pairs from args[4]), or 0 if there is none.
func banOption(args [][]byte) int {
	for i := 4; i < len(args); i += 2 {
		if equalFold(args[i], "ban") {
			return i
		}
	}
	return 0
}

// throttleCheckAdmit is THROTTLE.CHECK's entry point: with a BAN option it
// runs the penalty box, otherwise THROTTLE.CHECK as it is. Scanning the
// options for BAN costs a few comparisons per check.
func (l *loop) throttleCheckAdmit(cl *client, args [][]byte, now int64) result {
	if i := banOption(args); i > 0 {
		l.runChecks() // batch.go
		return l.throttleCheckBan(cl, args, now, i)
	}
	return l.throttleCheck(cl, args, now)
}
