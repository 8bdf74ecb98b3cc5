package limits

import (
	"encoding/binary"
	"strconv"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// SlotToken names a held concurrency slot: its index and the generation
// of its holder. Its text form is "index.generation".
type SlotToken struct {
	Slot, Gen int64
}

// AppendText appends t's text form to dst.
func (t SlotToken) AppendText(dst []byte) []byte {
	dst = strconv.AppendInt(dst, t.Slot, 10)
	return strconv.AppendInt(append(dst, '.'), t.Gen, 10)
}

// ParseSlotToken parses a slot token's text form; it reports false for
// text no Acquire could have produced. It does not allocate.
func ParseSlotToken(b []byte) (SlotToken, bool) {
	var f [2]int64
	if !parseDotted(b, f[:]) || f[0] >= MaxSlots || f[1] == 0 {
		return SlotToken{}, false
	}
	return SlotToken{Slot: f[0], Gen: f[1]}, true
}

// slotKey writes the record key of slot i of key into sc.ikey.
func (sc *scratch) slotKey(key []byte, i int64) {
	binary.BigEndian.PutUint16(sc.recordKey(tagSlot, key, 2), uint16(i))
}

// extendHead makes key's slot header span at least span slots and live
// until at least exp (ns since the epoch). The caller holds key's lock. It
// reports false when the header did not exist and the internal store had
// no room for it.
func (sc *scratch) extendHead(in *shard.Store, key []byte, span, exp, now int64) bool {
	sc.recordKey(tagSlotHead, key, 0)
	head, hexp, ok := in.Lookup(sc.ikey, now)
	if ok && head.Kind == kindSlotHead {
		span, exp = max(span, head.A), max(exp, hexp)
	}
	sc.set = setState{engine.State{A: span, B: exp, Kind: kindSlotHead}, exp - now}
	return in.TryApply(sc.ikey, now, &sc.set)
}

// Acquire takes a free concurrency slot of Key for TTL (ns) if fewer than
// Limit (1 to MaxSlots) are held (THROTTLE.ACQUIRE). The caller owns the
// value.
type Acquire struct {
	Key   []byte
	Limit int64
	TTL   int64

	// Results: whether a slot was taken (then Token holds it), the slots
	// held after the call, and when nothing was taken the ms until the
	// first held slot expires.
	Acquired   bool
	InFlight   int64
	Token      SlotToken
	RetryAfter int64

	// Done, Err and Lane are MCheck's: a backend that returned ErrPending
	// completes a copy of the value later and hands it to Done, with Err
	// the error the call would have returned.
	Done func(*Acquire)
	Err  error
	Lane uint64
}

// Acquire runs q. Slots are read and taken under the key's user-store
// lock (or inside sec), so in_flight never exceeds the limit. A full
// record store takes nothing and returns ErrRecordsFull.
func (c *Local) Acquire(q *Acquire, now int64, sec *Section) error {
	q.Acquired, q.InFlight, q.Token, q.RetryAfter = false, 0, SlotToken{}, 0
	key := q.Key
	if err := checkKey(key); err != nil {
		return err
	}
	a := &c.adm
	sc := a.scratch()
	defer a.done(sc)
	in := a.internal()
	c.lockKey(sc, key, sec)
	span := q.Limit
	sc.recordKey(tagSlotHead, key, 0)
	if head, _, ok := in.Lookup(sc.ikey, now); ok && head.Kind == kindSlotHead {
		span = max(span, min(head.A, MaxSlots))
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
	if held < q.Limit {
		// The header first: a slot outside the span it records would be
		// missed by a later call with a smaller limit.
		if !sc.extendHead(in, key, free+1, addSat(now, q.TTL), now) {
			sc.tx.Unlock()
			return ErrRecordsFull
		}
		gen := a.seq.Add(1)
		sc.slotKey(key, free)
		sc.set = setState{engine.State{A: gen, Kind: kindSlot}, q.TTL}
		if !in.TryApply(sc.ikey, now, &sc.set) {
			sc.tx.Unlock()
			return ErrRecordsFull
		}
		held++
		q.Acquired, q.Token = true, SlotToken{Slot: free, Gen: gen}
	} else {
		q.RetryAfter = msCeil(first - now)
	}
	sc.tx.Unlock()
	q.InFlight = held
	return nil
}

// heldSlot looks up the slot tok names, with key locked; it reports
// whether tok holds it.
func (sc *scratch) heldSlot(in *shard.Store, key []byte, tok SlotToken, now int64) (engine.State, bool) {
	sc.slotKey(key, tok.Slot)
	st, _, ok := in.Lookup(sc.ikey, now)
	if !ok || st.Kind != kindSlot || st.A != tok.Gen {
		return st, false
	}
	return st, true
}

// Release frees the slot tok holds, exactly once: it reports false if the
// token was already released or its slot expired (THROTTLE.RELEASE).
func (c *Local) Release(key []byte, tok SlotToken, now int64, sec *Section) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	a := &c.adm
	sc := a.scratch()
	defer a.done(sc)
	in := a.internal()
	c.lockKey(sc, key, sec)
	_, ok := sc.heldSlot(in, key, tok, now)
	ok = ok && in.Delete(sc.ikey, now)
	sc.tx.Unlock()
	return ok, nil
}

// Refresh makes the slot tok holds expire ttl (ns) from now; it reports
// whether tok holds it (THROTTLE.REFRESH).
func (c *Local) Refresh(key []byte, tok SlotToken, ttl, now int64, sec *Section) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	a := &c.adm
	sc := a.scratch()
	defer a.done(sc)
	in := a.internal()
	c.lockKey(sc, key, sec)
	st, ok := sc.heldSlot(in, key, tok, now)
	if ok {
		// Both records exist (the header lives as long as its latest
		// slot), so neither write needs room.
		sc.set = setState{engine.State{A: tok.Gen, B: st.B + 1, Kind: kindSlot}, ttl}
		in.Apply(sc.ikey, now, &sc.set)
		sc.extendHead(in, key, tok.Slot+1, addSat(now, ttl), now)
	}
	sc.tx.Unlock()
	return ok, nil
}

// SlotCall is THROTTLE.RELEASE (TTL 0) or THROTTLE.REFRESH (TTL > 0: the
// slot then expires TTL ns from now) of the slot Token holds, as a value a
// backend may complete later (Backend.Slot). The caller owns it.
type SlotCall struct {
	Key   []byte
	Token SlotToken
	TTL   int64

	Held bool // the result: Token held its slot, now freed or refreshed

	// Done, Err and Lane are MCheck's (see Acquire).
	Done func(*SlotCall)
	Err  error
	Lane uint64
}

// Slot runs s: Release, or Refresh when s.TTL > 0.
func (c *Local) Slot(s *SlotCall, now int64, sec *Section) error {
	var err error
	if s.TTL > 0 {
		s.Held, err = c.Refresh(s.Key, s.Token, s.TTL, now, sec)
	} else {
		s.Held, err = c.Release(s.Key, s.Token, now, sec)
	}
	return err
}
