package server

import (
	"bytes"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
)

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
func (l *loop) throttleMCheck(cl *client, args [][]byte, now int64) result {
	n, ok := parseInt64(args[1])
	if !ok || n < 1 || n > limits.MaxMCheck {
		l.errorReply("ERR", "numlimits must be an integer from 1 to 64")
		return failed
	}
	rest := len(args) - 2 - 4*int(n)
	if rest != 0 && rest != 2 {
		l.errSyntax()
		return failed
	}
	cost := int64(1)
	if rest == 2 {
		if !equalFold(args[len(args)-2], "cost") {
			l.errSyntax()
			return failed
		}
		if cost, ok = l.intArg(args[len(args)-1], "cost"); !ok {
			return failed
		}
	}
	m := &l.adm.mcheck
	defer func() { // drop references to argument bytes
		clear(m.Keys)
		m.Keys = m.Keys[:0]
	}()
	m.Keys, m.Limits = m.Keys[:0], m.Limits[:0]
	for i := 0; i < int(n); i++ {
		f := args[2+4*i : 6+4*i]
		key := f[0]
		if !l.keyArg(key) {
			return failed
		}
		for _, k := range m.Keys {
			if bytes.Equal(k, key) {
				l.errQuoted("key ", key, 64, " is named twice")
				return failed
			}
		}
		limit, ok := l.intArg(f[1], "limit")
		if !ok {
			return failed
		}
		period, ok := parsePeriod(f[2])
		if !ok {
			l.errorReply("ERR", "period is not an integer number of milliseconds or a duration such as 1s, or out of range")
			return failed
		}
		algo, ok := parseAlgo(f[3])
		if !ok {
			l.errorReply("ERR", "unknown algorithm: want gcra, token, fixed or sliding")
			return failed
		}
		lim, err := engine.NewLimit(algo, limit, period, 0)
		if err != nil {
			l.engineError(err)
			return failed
		}
		m.Limits = append(m.Limits, lim)
		m.Keys = append(m.Keys, key)
	}
	if cost < 0 {
		l.engineError(engine.ErrNegativeCost)
		return failed
	}
	m.Cost = cost
	if l.srv.upstream { // park.go
		v, ok, err := l.upstreamMCheck(cl, m, now)
		switch {
		case err != nil:
			l.limitsError(err)
			return failed
		case !ok:
			return replied
		}
		return l.mcheckReply(cl, v)
	} else if err := l.srv.core.MCheck(m, now, l.sec()); err != nil {
		l.limitsError(err)
		return failed
	}
	return l.mcheckReply(cl, m)
}

// mcheckReply appends THROTTLE.MCHECK's reply from m.
func (l *loop) mcheckReply(cl *client, m *limits.MCheck) result {
	allowed, retry := int64(0), m.RetryAfter
	if m.Allowed {
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
		l.out = appendArray(l.out, len(m.Decisions))
	} else {
		l.out = appendArray(l.out, 1+len(m.Decisions))
		l.out = appendInt(l.out, allowed)
	}
	for i := range m.Decisions {
		l.decision(cl, &m.Decisions[i], "allowed")
	}
	return replied
}
