package server

import (
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
)

// THROTTLE.CHECK key limit period [ALGO a] [BURST n] [COST n] BAN threshold duration
//
// After threshold denials within the limit's period (counted from the
// first), the key is banned for duration: its checks are denied without
// running the algorithm, with remaining 0 and retry_after the ban's time
// left; the denial that starts a ban reports the ban's duration. A peek
// (COST 0) is never counted. args[i] is the BAN option.
func (l *loop) throttleCheckBan(cl *client, args [][]byte, now int64, i int) result {
	if i+2 >= len(args) {
		l.errorReply("ERR", "syntax error: BAN needs a threshold and a duration")
		return failed
	}
	threshold, ok := l.intArg(args[i+1], "ban threshold")
	if !ok {
		return failed
	}
	duration, ok := l.durationArg(args[i+2], "ban duration")
	if !ok {
		return failed
	}
	if !l.admKeyArg(args[1]) {
		return failed
	}
	o := &l.adm
	o.args = append(append(o.args[:0], args[:i]...), args[i+3:]...)
	if banOption(o.args[:i]) > 0 || (i+3 < len(args) && banAfter(args[i+3:])) {
		clear(o.args)
		l.errSyntax()
		return failed
	}
	ok = l.limitArgs(o.args)
	clear(o.args)
	if !ok {
		return failed
	}
	ban, ok := engine.NewBan(threshold, l.op.Limit.Period, duration)
	if !ok {
		l.errorReply("ERR", "ban threshold must be positive")
		return failed
	}
	b := &l.adm.ban
	b.Key, b.Limit, b.Cost, b.Ban = args[1], l.op.Limit, l.op.Cost, ban
	if l.srv.upstream { // park_admission.go
		r := l.upstreamCheckBan(cl, b, now)
		b.Key = nil
		return r
	}
	err := l.srv.core.CheckBan(b, now, l.sec())
	b.Key = nil
	if err != nil {
		l.limitsError(err)
		return failed
	}
	l.checkBanReply(cl, b)
	return replied
}

// checkBanReply appends THROTTLE.CHECK ... BAN's reply from b.
func (l *loop) checkBanReply(cl *client, b *limits.CheckBan) {
	if b.Decision.Allowed != 0 {
		l.ctr.allowed++
	} else {
		l.ctr.denied++
	}
	l.decision(cl, &b.Decision, "allowed")
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
func (l *loop) throttleBanned(cl *client, args [][]byte, now int64) result {
	return l.banCall(cl, args, false, now)
}

// THROTTLE.UNBAN key: lifts key's ban and forgets its denial count; 1 if a
// ban was lifted, else 0.
func (l *loop) throttleUnban(cl *client, args [][]byte, now int64) result {
	return l.banCall(cl, args, true, now)
}

// banCall runs THROTTLE.BANNED, or UNBAN when lift.
func (l *loop) banCall(cl *client, args [][]byte, lift bool, now int64) result {
	if !l.admKeyArg(args[1]) {
		return failed
	}
	b := &l.adm.banq
	b.Key, b.Lift = args[1], lift
	if l.srv.upstream { // park_admission.go
		r := l.upstreamBan(cl, b, now)
		b.Key = nil
		return r
	}
	err := l.srv.core.Ban(b, now, l.sec())
	b.Key = nil
	if err != nil {
		l.limitsError(err)
		return failed
	}
	l.banReply(cl, b)
	return replied
}

// banReply appends THROTTLE.BANNED's reply (ms left) or UNBAN's (1 if a
// ban was lifted) from b.
func (l *loop) banReply(_ *client, b *limits.BanCall) {
	if b.Lift {
		l.out = appendInt(l.out, boolInt(b.Lifted))
		return
	}
	l.out = appendInt(l.out, b.Left)
}
