package server

import (
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
)

// THROTTLE.RESERVE key limit period COST estimate [ALGO a] [TTL t]
//
// Charges estimate as THROTTLE.CHECK would and, when admitted, records a
// reservation that THROTTLE.SETTLE settles at the actual cost. The id is
// opaque: "seq.algo.limit.period_ns", naming the limit SETTLE adjusts. An
// unsettled reservation settles at its estimate after TTL (default: the
// period).
func (l *loop) throttleReserve(cl *client, args [][]byte, now int64) result {
	if !l.admKeyArg(args[1]) {
		return failed
	}
	limit, period, ok := l.keyLimitPeriod(args)
	if !ok {
		return failed
	}
	if !equalFold(args[4], "cost") {
		l.errSyntax()
		return failed
	}
	estimate, ok := l.intArg(args[5], "cost")
	if !ok {
		return failed
	}
	algo, ttl := engine.KindGCRA, period
	for i := 6; i < len(args); i += 2 {
		if i+1 >= len(args) {
			l.errorReply("ERR", "syntax error: option without a value")
			return failed
		}
		switch v := args[i+1]; {
		case equalFold(args[i], "algo"):
			if algo, ok = parseAlgo(v); !ok {
				l.errorReply("ERR", "unknown algorithm: want gcra, token, fixed or sliding")
				return failed
			}
		case equalFold(args[i], "ttl"):
			if ttl, ok = l.durationArg(v, "ttl"); !ok {
				return failed
			}
		default:
			l.errQuoted("unknown option ", args[i], 64, "")
			return failed
		}
	}
	lim, err := engine.NewLimit(algo, limit, period, 0)
	if err != nil {
		l.engineError(err)
		return failed
	}
	r := &l.adm.reserve
	r.Key, r.Limit, r.Estimate, r.TTL = args[1], lim, estimate, ttl
	if l.srv.upstream { // park_admission.go
		res := l.upstreamReserve(cl, r, now)
		r.Key = nil
		return res
	}
	err = l.srv.core.Reserve(r, now, l.sec())
	r.Key = nil
	if err != nil {
		l.limitsError(err)
		return failed
	}
	l.reserveReply(cl, r)
	return replied
}

// reserveReply appends THROTTLE.RESERVE's reply from r.
func (l *loop) reserveReply(cl *client, r *limits.Reserve) {
	d := r.Decision
	if d.Allowed == 0 {
		l.ctr.denied++
		l.decisionWith(cl, &d, "id", nil)
		return
	}
	l.ctr.allowed++
	l.adm.idb = r.ID.AppendText(l.adm.idb[:0])
	l.decisionWith(cl, &d, "id", l.adm.idb)
}

// THROTTLE.SETTLE key id actual
//
// Replies 1 when the reservation was settled by this call, 0 when it is
// unknown, expired or already settled. Below the estimate the difference
// is refunded, above it the difference is charged even past the limit.
func (l *loop) throttleSettle(cl *client, args [][]byte, now int64) result {
	key := args[1]
	if !l.admKeyArg(key) {
		return failed
	}
	id, ok := limits.ParseReservationID(args[2])
	if !ok {
		l.errorReply("ERR", "invalid reservation id")
		return failed
	}
	actual, ok := l.intArg(args[3], "actual")
	if !ok {
		return failed
	}
	if actual < 0 {
		l.engineError(engine.ErrNegativeCost)
		return failed
	}
	s := &l.adm.settle
	s.Key, s.ID, s.Actual = key, id, actual
	if l.srv.upstream { // park_admission.go
		r := l.upstreamSettle(cl, s, now)
		s.Key = nil
		return r
	}
	err := l.srv.core.Settle(s, now, l.sec())
	s.Key = nil
	if err != nil {
		l.limitsError(err)
		return failed
	}
	l.settleReply(cl, s)
	return replied
}

// settleReply appends THROTTLE.SETTLE's reply from s.
func (l *loop) settleReply(_ *client, s *limits.Settle) { l.out = appendInt(l.out, boolInt(s.Settled)) }
