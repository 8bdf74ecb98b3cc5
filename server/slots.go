package server

import (
	"encoding/binary"
	"strconv"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// slotKey writes the record key of slot i of key into sc.ikey.
func (sc *admScratch) slotKey(key []byte, i int64) {
	binary.BigEndian.PutUint16(sc.recordKey('s', key, 2), uint16(i))
}

// slotToken parses a slot token "index.generation".
func slotToken(b []byte) (slot, gen int64, ok bool) {
	var f [2]int64
	if !parseDotted(b, f[:]) || f[0] >= maxSlots || f[1] == 0 {
		return 0, 0, false
	}
	return f[0], f[1], true
}

// extendHead makes key's slot header span at least span slots and live
// until at least exp (ns since the epoch). The caller holds key's lock. It
// reports false when the header did not exist and the internal store had
// no room for it.
func (sc *admScratch) extendHead(in *shard.Store, key []byte, span, exp, now int64) bool {
	sc.recordKey('h', key, 0)
	head, hexp, ok := in.Lookup(sc.ikey, now)
	if ok && head.Kind == kindSlotHead {
		span, exp = max(span, head.A), max(exp, hexp)
	}
	sc.set = setState{engine.State{A: span, B: exp, Kind: kindSlotHead}, exp - now}
	return in.TryApply(sc.ikey, now, &sc.set)
}

// THROTTLE.ACQUIRE key limit ttl
//
// Takes a free slot of key for ttl if fewer than limit are held. Reply:
// [acquired, limit, in_flight, token, retry_after_ms] (a map in RESP3);
// token is nil and retry_after_ms the time until the first held slot
// expires when nothing was acquired.
func (l *loop) throttleAcquire(cl *client, args [][]byte, now int64) bool {
	key := args[1]
	if !l.admKeyArg(key) {
		return false
	}
	limit, ok := parseInt64(args[2])
	if !ok || limit < 1 || limit > maxSlots {
		l.errorReply("ERR", "limit must be an integer from 1 to 1024")
		return false
	}
	ttl, ok := l.durationArg(args[3], "ttl")
	if !ok {
		return false
	}
	a := &l.srv.adm
	sc := a.scratch()
	defer a.done(sc)
	in := a.internal()
	l.lockKey(sc, key)
	span := limit
	sc.recordKey('h', key, 0)
	if head, _, ok := in.Lookup(sc.ikey, now); ok && head.Kind == kindSlotHead {
		span = max(span, min(head.A, maxSlots))
	}
	held, free, first := int64(0), int64(-1), int64(1<<63-1)
	for i := int64(0); i < span; i++ {
		sc.slotKey(key, i)
		if _, exp, ok := in.Lookup(sc.ikey, now); ok {
			held++
			first = min(first, exp)
		} else if free < 0 {
			free = i
		}
	}
	var tok []byte
	retry := int64(0)
	if held < limit {
		// The header first: a slot outside the span it records would be
		// missed by a later call with a smaller limit.
		if !sc.extendHead(in, key, free+1, addSat(now, ttl), now) {
			sc.tx.Unlock()
			l.errAdmissionFull()
			return false
		}
		gen := a.seq.Add(1)
		sc.slotKey(key, free)
		sc.set = setState{engine.State{A: gen, Kind: kindSlot}, ttl}
		if !in.TryApply(sc.ikey, now, &sc.set) {
			sc.tx.Unlock()
			l.errAdmissionFull()
			return false
		}
		held++
		sc.idb = strconv.AppendInt(sc.idb[:0], free, 10)
		sc.idb = strconv.AppendInt(append(sc.idb, '.'), gen, 10)
		tok = sc.idb
		l.ctr.allowed++
	} else {
		retry = msCeil(first - now)
		l.ctr.denied++
	}
	sc.tx.Unlock()
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
	l.out = appendInt(l.out, limit)
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
	return false
}

// heldSlot looks up the slot a token names, with key locked in sc.tx; it
// replies 0 itself when the token does not hold it.
func (l *loop) heldSlot(sc *admScratch, in *shard.Store, key []byte, slot, gen, now int64) (engine.State, bool) {
	sc.slotKey(key, slot)
	st, _, ok := in.Lookup(sc.ikey, now)
	if !ok || st.Kind != kindSlot || st.A != gen {
		return st, false
	}
	return st, true
}

// THROTTLE.RELEASE key token: frees the slot token holds; 1 if it did,
// 0 if the token was already released or its slot expired.
func (l *loop) throttleRelease(_ *client, args [][]byte, now int64) bool {
	key := args[1]
	if !l.admKeyArg(key) {
		return false
	}
	slot, gen, ok := slotToken(args[2])
	if !ok {
		l.errorReply("ERR", "invalid slot token")
		return false
	}
	a := &l.srv.adm
	sc := a.scratch()
	defer a.done(sc)
	in := a.internal()
	l.lockKey(sc, key)
	n := int64(0)
	if _, ok := l.heldSlot(sc, in, key, slot, gen, now); ok && in.Delete(sc.ikey, now) {
		n = 1
	}
	sc.tx.Unlock()
	l.out = appendInt(l.out, n)
	return false
}

// THROTTLE.REFRESH key token ttl: the slot token holds now expires ttl
// from now; 1 if the token holds it, else 0.
func (l *loop) throttleRefresh(_ *client, args [][]byte, now int64) bool {
	key := args[1]
	if !l.admKeyArg(key) {
		return false
	}
	slot, gen, ok := slotToken(args[2])
	if !ok {
		l.errorReply("ERR", "invalid slot token")
		return false
	}
	ttl, ok := l.durationArg(args[3], "ttl")
	if !ok {
		return false
	}
	a := &l.srv.adm
	sc := a.scratch()
	defer a.done(sc)
	in := a.internal()
	l.lockKey(sc, key)
	n := int64(0)
	if st, ok := l.heldSlot(sc, in, key, slot, gen, now); ok {
		// Both records exist (the header lives as long as its latest
		// slot), so neither write needs room.
		sc.set = setState{engine.State{A: gen, B: st.B + 1, Kind: kindSlot}, ttl}
		in.Apply(sc.ikey, now, &sc.set)
		sc.extendHead(in, key, slot+1, addSat(now, ttl), now)
		n = 1
	}
	sc.tx.Unlock()
	l.out = appendInt(l.out, n)
	return false
}
