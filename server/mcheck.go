package server

import (
	"bytes"

	"github.com/throttlekit/throttlekit-server/engine"
)

// mcheckOp is the shard.Transform of one MCHECK limit: a check that
// records the state it found, so that it can be put back.
type mcheckOp struct {
	lim  *engine.Limit
	cost int64
	prev engine.State
	d    engine.Decision
	err  error
}

// Apply runs the check, keeping cur in prev; a denial or an error leaves
// the state as it was.
func (o *mcheckOp) Apply(cur engine.State, now int64) (engine.State, int64) {
	o.prev = cur
	next, d, ttl, err := o.lim.Check(cur, now, o.cost)
	o.d, o.err = d, err
	if err != nil || d.Allowed == 0 {
		return cur, 0
	}
	return next, ttl
}

// mcheckUndo puts back the states of the first n limits, which were
// consumed, and replaces their decisions with their state as it stands:
// allowed (they would have admitted) with nothing consumed.
func (l *loop) mcheckUndo(sc *admScratch, n int, now int64) {
	for i := 0; i < n; i++ {
		_, d, ttl, _ := sc.lims[i].Check(sc.prev[i], now, 0)
		sc.set = setState{sc.prev[i], ttl}
		_ = sc.t.Apply(sc.keys[i], now, &sc.set)
		d.Allowed, d.RetryAfter = 1, 0
		sc.ds[i] = d
	}
}

// THROTTLE.MCHECK numlimits key limit period algo [key limit period algo ...] [COST c]
//
// Reply: RESP2 [allowed, decision 1, decision 2, ...], each decision the
// five integers of THROTTLE.CHECK; RESP3 a map {allowed, retry_after_ms,
// decisions: [map, ...]}. When the command is denied nothing is consumed;
// each decision shows its limit's state as it stands (allowed 1 with
// retry_after 0 for a limit that would have admitted COST, its own
// retry_after for a denying one). The overall retry_after is the largest of
// the denying limits' (-1 if one of them can never admit COST): RESP3 has
// it at the top level as retry_after_ms; in RESP2 it is the largest
// retry_after of the entries (read -1 first).
func (l *loop) throttleMCheck(cl *client, args [][]byte, now int64) bool {
	n, ok := parseInt64(args[1])
	if !ok || n < 1 || n > maxMCheck {
		l.errorReply("ERR", "numlimits must be an integer from 1 to 64")
		return false
	}
	rest := len(args) - 2 - 4*int(n)
	if rest != 0 && rest != 2 {
		l.errSyntax()
		return false
	}
	cost := int64(1)
	if rest == 2 {
		if !equalFold(args[len(args)-2], "cost") {
			l.errSyntax()
			return false
		}
		if cost, ok = l.intArg(args[len(args)-1], "cost"); !ok {
			return false
		}
	}
	a := &l.srv.adm
	sc := a.scratch()
	defer a.done(sc)
	sc.lims, sc.prev, sc.ds = sc.lims[:0], sc.prev[:0], sc.ds[:0]
	for i := 0; i < int(n); i++ {
		f := args[2+4*i : 6+4*i]
		key := f[0]
		if !l.keyArg(key) {
			return false
		}
		for _, k := range sc.keys {
			if bytes.Equal(k, key) {
				l.errQuoted("key ", key, 64, " is named twice")
				return false
			}
		}
		limit, ok := l.intArg(f[1], "limit")
		if !ok {
			return false
		}
		period, ok := parsePeriod(f[2])
		if !ok {
			l.errorReply("ERR", "period is not an integer number of milliseconds or a duration such as 1s, or out of range")
			return false
		}
		algo, ok := parseAlgo(f[3])
		if !ok {
			l.errorReply("ERR", "unknown algorithm: want gcra, token, fixed or sliding")
			return false
		}
		lim, err := engine.NewLimit(algo, limit, period, 0)
		if err != nil {
			l.engineError(err)
			return false
		}
		sc.lims = append(sc.lims, lim)
		sc.keys = append(sc.keys, key)
	}
	if cost < 0 {
		l.engineError(engine.ErrNegativeCost)
		return false
	}
	l.lockKeys(sc, sc.keys)
	// Check and consume limit by limit, one lookup each; at the first
	// denial stop consuming, evaluate the rest without writing, and put
	// back the states already consumed. No other call sees the section.
	denied := -1
	retry := int64(0)
	for i, k := range sc.keys {
		var d engine.Decision
		if denied < 0 {
			sc.mop = mcheckOp{lim: &sc.lims[i], cost: cost}
			_ = sc.t.Apply(k, now, &sc.mop)
			d = sc.mop.d
			sc.prev = append(sc.prev, sc.mop.prev)
			if sc.mop.err == nil && d.Allowed == 0 {
				denied = i
			}
			if sc.mop.err != nil {
				l.mcheckUndo(sc, i, now)
				sc.tx.Unlock()
				l.engineError(sc.mop.err)
				return false
			}
		} else {
			st, _, _ := sc.t.Get(k, now)
			var err error
			if _, d, _, err = sc.lims[i].Check(st, now, cost); err != nil {
				l.mcheckUndo(sc, denied, now)
				sc.tx.Unlock()
				l.engineError(err)
				return false
			}
			if d.Allowed != 0 { // as it stands: nothing consumed
				_, d, _, _ = sc.lims[i].Check(st, now, 0)
				d.Allowed, d.RetryAfter = 1, 0
			}
		}
		if d.Allowed == 0 && retry >= 0 && (d.RetryAfter < 0 || d.RetryAfter > retry) {
			retry = d.RetryAfter
		}
		sc.ds = append(sc.ds, d)
	}
	all := denied < 0
	if !all {
		l.mcheckUndo(sc, denied, now)
	}
	sc.tx.Unlock()
	allowed := int64(0)
	if all {
		allowed = 1
		l.ctr.allowed++
	} else {
		l.ctr.denied++
	}
	if cl.resp3 {
		l.out = appendMap(l.out, 3, true)
		l.out = appendBulkString(l.out, "allowed")
		l.out = appendInt(l.out, allowed)
		l.out = appendBulkString(l.out, "retry_after_ms")
		l.out = appendInt(l.out, retry)
		l.out = appendBulkString(l.out, "decisions")
		l.out = appendArray(l.out, len(sc.ds))
	} else {
		l.out = appendArray(l.out, 1+len(sc.ds))
		l.out = appendInt(l.out, allowed)
	}
	for i := range sc.ds {
		l.decision(cl, &sc.ds[i], "allowed")
	}
	return false
}
