package server

import (
	"github.com/throttlekit/throttlekit-server/engine"
)

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
func (l *loop) throttleCheckAdmit(cl *client, args [][]byte, now int64) bool {
	if i := banOption(args); i > 0 {
		return l.throttleCheckBan(cl, args, now, i)
	}
	return l.throttleCheck(cl, args, now)
}

// THROTTLE.CHECK key limit period [ALGO a] [BURST n] [COST n] BAN threshold duration
//
// After threshold denials within the limit's period (counted from the
// first), the key is banned for duration: its checks are denied without
// running the algorithm, with remaining 0 and retry_after the ban's time
// left; the denial that starts a ban reports the ban's duration. A peek
// (COST 0) is never counted. args[i] is the BAN option.
func (l *loop) throttleCheckBan(cl *client, args [][]byte, now int64, i int) bool {
	if i+2 >= len(args) {
		l.errorReply("ERR", "syntax error: BAN needs a threshold and a duration")
		return false
	}
	threshold, ok := l.intArg(args[i+1], "ban threshold")
	if !ok {
		return false
	}
	duration, ok := l.durationArg(args[i+2], "ban duration")
	if !ok {
		return false
	}
	if !l.admKeyArg(args[1]) {
		return false
	}
	a := &l.srv.adm
	sc := a.scratch()
	defer a.done(sc)
	sc.args = append(append(sc.args[:0], args[:i]...), args[i+3:]...)
	if banOption(sc.args[:i]) > 0 || (i+3 < len(args) && banAfter(args[i+3:])) {
		clear(sc.args)
		l.errSyntax()
		return false
	}
	ok = l.limitArgs(sc.args)
	clear(sc.args)
	if !ok {
		return false
	}
	ban, ok := engine.NewBan(threshold, l.op.lim.Period, duration)
	if !ok {
		l.errorReply("ERR", "ban threshold must be positive")
		return false
	}
	key := args[1]
	in := a.internal()
	l.lockKey(sc, key)
	sc.recordKey('b', key, 0)
	rec, _ := in.Get(sc.ikey, now)
	st, _, _ := sc.t.Get(key, now)
	if left := engine.BannedFor(rec, now); left > 0 {
		_, d, _, err := l.op.lim.Check(st, now, 0)
		sc.tx.Unlock()
		if err != nil {
			l.engineError(err)
			return false
		}
		d.Allowed, d.Remaining, d.RetryAfter = 0, 0, msCeil(left)
		l.ctr.denied++
		l.decision(cl, &d, "allowed")
		return false
	}
	next, d, ttl, err := l.op.lim.Check(st, now, l.op.cost)
	if err != nil {
		sc.tx.Unlock()
		l.engineError(err)
		return false
	}
	if d.Allowed != 0 {
		sc.set = setState{next, ttl}
		_ = sc.t.Apply(key, now, &sc.set)
		l.ctr.allowed++
	} else {
		if l.op.cost > 0 {
			nrec, rttl, banned := ban.Deny(rec, now)
			sc.set = setState{nrec, rttl}
			// A full record store leaves the denial uncounted (see
			// admission.go, Bounds): the request is denied either way.
			if in.TryApply(sc.ikey, now, &sc.set) && banned && d.RetryAfter >= 0 {
				d.RetryAfter = max(d.RetryAfter, msCeil(ban.Duration))
			}
		}
		l.ctr.denied++
	}
	sc.tx.Unlock()
	l.decision(cl, &d, "allowed")
	return false
}

// banAfter reports a BAN among options that follow a BAN's values.
func banAfter(opts [][]byte) bool {
	for j := 0; j < len(opts); j += 2 {
		if equalFold(opts[j], "ban") {
			return true
		}
	}
	return false
}

// THROTTLE.BANNED key: the milliseconds left of key's ban, 0 if none.
func (l *loop) throttleBanned(_ *client, args [][]byte, now int64) bool {
	if !l.admKeyArg(args[1]) {
		return false
	}
	a := &l.srv.adm
	sc := a.scratch()
	defer a.done(sc)
	sc.recordKey('b', args[1], 0)
	rec, _, _ := a.internal().Lookup(sc.ikey, now)
	l.out = appendInt(l.out, msCeil(engine.BannedFor(rec, now)))
	return false
}

// THROTTLE.UNBAN key: lifts key's ban and forgets its denial count; 1 if a
// ban was lifted, else 0.
func (l *loop) throttleUnban(_ *client, args [][]byte, now int64) bool {
	key := args[1]
	if !l.admKeyArg(key) {
		return false
	}
	a := &l.srv.adm
	sc := a.scratch()
	defer a.done(sc)
	in := a.internal()
	sc.recordKey('b', key, 0)
	l.lockKey(sc, key)
	rec, _, _ := in.Lookup(sc.ikey, now)
	in.Delete(sc.ikey, now)
	sc.tx.Unlock()
	n := int64(0)
	if engine.BannedFor(rec, now) > 0 {
		n = 1
	}
	l.out = appendInt(l.out, n)
	return false
}
