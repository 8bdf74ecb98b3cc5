package server

import (
	"strconv"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
)

// GCRA is Redis's rate-limit command (redis/redis#14826, renamed in
// #14950): "GCRA key max-burst tokens-per-period period [TOKENS count]".
// The arithmetic is engine.RateGCRA, on a state kind of its own, so
// THROTTLE.* and CL.THROTTLE answer WRONGTYPE on its keys and GCRA on
// theirs. Arguments are checked in Redis's order with Redis's error texts;
// the key-length limit of this server comes last, before the store. Over an
// upstream it runs strict in every mode (upstream's gcra.lua, the engine's
// arithmetic on exact 64-bit integers) and its reply is parked like
// CL.THROTTLE's.

// gcraOverflow starts both overflow errors (errors.go words them).
const gcraOverflow = "GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and "

// redisLongArg parses an integer in [lo, hi] as Redis's
// getRangeLongFromObjectOrReply does with no custom message.
func (l *loop) redisLongArg(b []byte, lo, hi int64) (int64, bool) {
	n, ok := parseInt64(b)
	if !ok {
		l.errNotInt()
		return 0, false
	}
	if n < lo || n > hi {
		l.errorReply("ERR", "value is out of range, value must between "+strconv.FormatInt(lo, 10)+" and "+strconv.FormatInt(hi, 10))
		return 0, false
	}
	return n, true
}

// parseRedisFloat parses a double as Redis's getDoubleFromObject accepts
// it: the whole argument, no leading space, no NaN, not out of range.
func parseRedisFloat(b []byte) (float64, bool) {
	if len(b) == 0 || b[0] == ' ' || b[0] == '\t' || b[0] == '\n' || b[0] == '\r' || b[0] == '\v' || b[0] == '\f' {
		return 0, false
	}
	for _, c := range b {
		if c == '_' { // Go's digit separators; strtod has none
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || f != f {
		return 0, false
	}
	if f == 0 && underflows(b) { // strtod's ERANGE with a zero result
		return 0, false
	}
	return f, true
}

// underflows reports whether a decimal spelling of zero has a non-zero
// digit before its exponent: a number too small for a double, which strtod
// refuses with ERANGE where Go's parser returns 0.
func underflows(b []byte) bool {
	for _, c := range b {
		switch {
		case c == 'e' || c == 'E' || c == 'x' || c == 'X' || c == 'p' || c == 'P':
			return false
		case c >= '1' && c <= '9':
			return true
		}
	}
	return false
}

// GCRA key max-burst tokens-per-period period [TOKENS count]
func (l *loop) gcraCmd(cl *client, args [][]byte, now int64) result {
	if len(args) > 7 {
		l.errArity("gcra")
		return failed
	}
	maxBurst, ok := parseInt64(args[2])
	if !ok || maxBurst < 0 {
		l.errorReply("ERR", "value is out of range, must be positive")
		return failed
	}
	rate, ok := l.redisLongArg(args[3], 1, 1<<63-1)
	if !ok {
		return failed
	}
	period, ok := parseRedisFloat(args[4])
	if !ok {
		l.errorReply("ERR", "value is not a valid float")
		return failed
	}
	if !engine.ValidRateGCRAPeriod(period) {
		l.engineError(engine.ErrGCRAPeriod)
		return failed
	}
	tokens := int64(1)
	if len(args) >= 6 {
		if !equalFold(args[5], "tokens") {
			l.errorReply("ERR", "syntax error")
			return failed
		}
		if len(args) == 6 {
			l.errorReply("ERR", "Missing TOKENS value")
			return failed
		}
		if tokens, ok = l.redisLongArg(args[6], 1, 1<<63-1); !ok {
			return failed
		}
	}
	if !l.keyArg(args[1]) {
		return failed
	}
	g, err := engine.NewRateGCRA(maxBurst, rate, period, tokens)
	if err != nil {
		l.engineError(err)
		return failed
	}
	l.op.Kind, l.op.Key, l.op.GCRA = limits.OpRateGCRA, args[1], g
	op, ok := l.runOp(cl, now, gcraReply)
	if !ok {
		return replied // parked: park.go
	}
	return l.gcraReply(op)
}

func gcraReply(l *loop, _ *client, op *limits.Op) { l.gcraReply(op) }

// gcraReply appends GCRA's reply from op: an engine error (an overflow,
// WRONGTYPE) or a limits error (an unavailable upstream), or the five
// integers.
func (l *loop) gcraReply(op *limits.Op) result {
	if op.Err != nil {
		l.limitsError(op.Err)
		return failed
	}
	r := &op.GCRAReply
	l.cellShaped(r.Limited, r.Burst, r.Remaining, r.RetryAfter, r.ResetAfter) // cmd_cell.go
	return replied
}
