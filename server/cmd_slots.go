package server

import "github.com/throttlekit/throttlekit-server/limits"

// THROTTLE.ACQUIRE key limit ttl
//
// Takes a free slot of key for ttl if fewer than limit are held. Reply:
// [acquired, limit, in_flight, token, retry_after_ms] (a map in RESP3);
// token is nil and retry_after_ms the time until the first held slot
// expires when nothing was acquired.
func (l *loop) throttleAcquire(cl *client, args [][]byte, now int64) result {
	key := args[1]
	if !l.admKeyArg(key) {
		return failed
	}
	limit, ok := parseInt64(args[2])
	if !ok || limit < 1 || limit > limits.MaxSlots {
		l.errorReply("ERR", "limit must be an integer from 1 to 1024")
		return failed
	}
	ttl, ok := l.durationArg(args[3], "ttl")
	if !ok {
		return failed
	}
	q := &l.adm.acquire
	q.Key, q.Limit, q.TTL = key, limit, ttl
	if l.srv.upstream { // park_admission.go
		r := l.upstreamAcquire(cl, q, now)
		q.Key = nil
		return r
	}
	err := l.srv.core.Acquire(q, now, l.sec())
	q.Key = nil
	if err != nil {
		l.limitsError(err)
		return failed
	}
	l.acquireReply(cl, q)
	return replied
}

// acquireReply appends THROTTLE.ACQUIRE's reply from q.
func (l *loop) acquireReply(cl *client, q *limits.Acquire) {
	var tok []byte
	if q.Acquired {
		l.adm.idb = q.Token.AppendText(l.adm.idb[:0])
		tok = l.adm.idb
		l.ctr.allowed++
	} else {
		l.ctr.denied++
	}
	held, retry := q.InFlight, q.RetryAfter
	acquired := int64(0)
	if tok != nil {
		acquired = 1
	}
	if cl.resp3 {
		l.out = appendMap(l.out, 5, true)
		l.out = appendBulkString(l.out, "acquired")
	} else {
		l.out = appendArray(l.out, 5)
	}
	l.out = appendInt(l.out, acquired)
	if cl.resp3 {
		l.out = appendBulkString(l.out, "limit")
	}
	l.out = appendInt(l.out, q.Limit)
	if cl.resp3 {
		l.out = appendBulkString(l.out, "in_flight")
	}
	l.out = appendInt(l.out, held)
	if cl.resp3 {
		l.out = appendBulkString(l.out, "token")
	}
	if tok == nil {
		l.out = appendNull(l.out, cl.resp3)
	} else {
		l.out = appendBulk(l.out, tok)
	}
	if cl.resp3 {
		l.out = appendBulkString(l.out, "retry_after_ms")
	}
	l.out = appendInt(l.out, retry)
}

// THROTTLE.RELEASE key token: frees the slot token holds; 1 if it did,
// 0 if the token was already released or its slot expired.
func (l *loop) throttleRelease(cl *client, args [][]byte, now int64) result {
	key := args[1]
	if !l.admKeyArg(key) {
		return failed
	}
	tok, ok := limits.ParseSlotToken(args[2])
	if !ok {
		l.errorReply("ERR", "invalid slot token")
		return failed
	}
	return l.slotCall(cl, key, tok, 0, now)
}

// THROTTLE.REFRESH key token ttl: the slot token holds now expires ttl
// from now; 1 if the token holds it, else 0.
func (l *loop) throttleRefresh(cl *client, args [][]byte, now int64) result {
	key := args[1]
	if !l.admKeyArg(key) {
		return failed
	}
	tok, ok := limits.ParseSlotToken(args[2])
	if !ok {
		l.errorReply("ERR", "invalid slot token")
		return failed
	}
	ttl, ok := l.durationArg(args[3], "ttl")
	if !ok {
		return failed
	}
	return l.slotCall(cl, key, tok, ttl, now)
}

// slotCall runs THROTTLE.RELEASE (ttl 0) or REFRESH of the slot tok holds.
func (l *loop) slotCall(cl *client, key []byte, tok limits.SlotToken, ttl, now int64) result {
	s := &l.adm.slot
	s.Key, s.Token, s.TTL = key, tok, ttl
	if l.srv.upstream { // park_admission.go
		r := l.upstreamSlot(cl, s, now)
		s.Key = nil
		return r
	}
	err := l.srv.core.Slot(s, now, l.sec())
	s.Key = nil
	if err != nil {
		l.limitsError(err)
		return failed
	}
	l.slotReply(cl, s)
	return replied
}

// slotReply appends THROTTLE.RELEASE's or REFRESH's reply from s.
func (l *loop) slotReply(_ *client, s *limits.SlotCall) { l.out = appendInt(l.out, boolInt(s.Held)) }

// boolInt is 1 for true, 0 for false: the integer reply of a yes/no.
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
