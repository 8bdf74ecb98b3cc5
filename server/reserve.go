package server

import (
	"encoding/binary"
	"strconv"

	"github.com/throttlekit/throttlekit-server/engine"
)

// reservationKey writes the record key of reservation seq of key under
// limit lim into sc.ikey.
func (sc *admScratch) reservationKey(key []byte, seq int64, lim *engine.Limit) {
	suf := sc.recordKey('r', key, 25)
	binary.BigEndian.PutUint64(suf, uint64(seq))
	suf[8] = byte(lim.Algo)
	binary.BigEndian.PutUint64(suf[9:], uint64(lim.Limit))
	binary.BigEndian.PutUint64(suf[17:], uint64(lim.Period))
}

// THROTTLE.RESERVE key limit period COST estimate [ALGO a] [TTL t]
//
// Charges estimate as THROTTLE.CHECK would and, when admitted, records a
// reservation that THROTTLE.SETTLE settles at the actual cost. The id is
// opaque: "seq.algo.limit.period_ns", naming the limit SETTLE adjusts. An
// unsettled reservation settles at its estimate after TTL (default: the
// period).
func (l *loop) throttleReserve(cl *client, args [][]byte, now int64) bool {
	if !l.admKeyArg(args[1]) {
		return false
	}
	limit, period, ok := l.keyLimitPeriod(args)
	if !ok {
		return false
	}
	if !equalFold(args[4], "cost") {
		l.errSyntax()
		return false
	}
	estimate, ok := l.intArg(args[5], "cost")
	if !ok {
		return false
	}
	algo, ttl := engine.KindGCRA, period
	for i := 6; i < len(args); i += 2 {
		if i+1 >= len(args) {
			l.errorReply("ERR", "syntax error: option without a value")
			return false
		}
		switch v := args[i+1]; {
		case equalFold(args[i], "algo"):
			if algo, ok = parseAlgo(v); !ok {
				l.errorReply("ERR", "unknown algorithm: want gcra, token, fixed or sliding")
				return false
			}
		case equalFold(args[i], "ttl"):
			if ttl, ok = l.durationArg(v, "ttl"); !ok {
				return false
			}
		default:
			l.errQuoted("unknown option ", args[i], 64, "")
			return false
		}
	}
	lim, err := engine.NewLimit(algo, limit, period, 0)
	if err != nil {
		l.engineError(err)
		return false
	}
	// The record goes in first, so a full record store refuses the
	// reservation before anything is charged. Its id is not yet known to
	// anyone: no SETTLE can see it before the charge below.
	a := &l.srv.adm
	sc := a.scratch()
	defer a.done(sc)
	in := a.internal()
	seq := a.seq.Add(1)
	sc.reservationKey(args[1], seq, &lim)
	sc.set = setState{engine.State{A: estimate, B: now, Kind: kindReservation}, ttl}
	if !in.TryApply(sc.ikey, now, &sc.set) {
		l.errAdmissionFull()
		return false
	}
	l.op.kind, l.op.lim, l.op.cost = opCheck, lim, estimate
	l.apply(args[1], now, &l.op)
	if l.op.err != nil || l.op.d.Allowed == 0 {
		in.Delete(sc.ikey, now)
	}
	if l.op.err != nil {
		l.engineError(l.op.err)
		return false
	}
	d := l.op.d
	if d.Allowed == 0 {
		l.ctr.denied++
		l.decisionWith(cl, &d, "id", nil)
		return false
	}
	l.ctr.allowed++
	sc.idb = strconv.AppendInt(sc.idb[:0], seq, 10)
	sc.idb = strconv.AppendInt(append(sc.idb, '.'), int64(lim.Algo), 10)
	sc.idb = strconv.AppendInt(append(sc.idb, '.'), lim.Limit, 10)
	sc.idb = strconv.AppendInt(append(sc.idb, '.'), lim.Period, 10)
	l.decisionWith(cl, &d, "id", sc.idb)
	return false
}

// THROTTLE.SETTLE key id actual
//
// Replies 1 when the reservation was settled by this call, 0 when it is
// unknown, expired or already settled. Below the estimate the difference
// is refunded, above it the difference is charged even past the limit.
func (l *loop) throttleSettle(_ *client, args [][]byte, now int64) bool {
	key := args[1]
	if !l.admKeyArg(key) {
		return false
	}
	var f [4]int64
	if !parseDotted(args[2], f[:]) {
		l.errorReply("ERR", "invalid reservation id")
		return false
	}
	lim, err := engine.NewLimit(engine.Kind(min(f[1], 255)), f[2], f[3], 0)
	if err != nil {
		l.errorReply("ERR", "invalid reservation id")
		return false
	}
	actual, ok := l.intArg(args[3], "actual")
	if !ok {
		return false
	}
	if actual < 0 {
		l.engineError(engine.ErrNegativeCost)
		return false
	}
	a := &l.srv.adm
	sc := a.scratch()
	defer a.done(sc)
	in := a.internal()
	sc.reservationKey(key, f[0], &lim)
	l.lockKey(sc, key)
	rec, ok := in.Get(sc.ikey, now)
	if !ok || rec.Kind != kindReservation {
		sc.tx.Unlock()
		l.out = appendInt(l.out, 0)
		return false
	}
	st, _, _ := sc.t.Get(key, now)
	next, ttl := st, int64(0)
	switch {
	case actual > rec.A:
		next, ttl, err = lim.Charge(st, now, actual-rec.A)
	case actual < rec.A:
		next, ttl, err = lim.Refund(st, now, rec.B, rec.A-actual)
	}
	if err != nil {
		sc.tx.Unlock()
		l.engineError(err)
		return false
	}
	if !in.Delete(sc.ikey, now) {
		sc.tx.Unlock()
		l.out = appendInt(l.out, 0)
		return false
	}
	if next != st {
		sc.set = setState{next, ttl}
		_ = sc.t.Apply(key, now, &sc.set)
	}
	sc.tx.Unlock()
	l.out = appendInt(l.out, 1)
	return false
}
