package limits

import (
	"encoding/binary"
	"strconv"

	"github.com/throttlekit/throttlekit-server/engine"
)

// ReservationID names a reservation: its sequence number and the limit
// Settle adjusts. Its text form is "seq.algo.limit.period_ns".
type ReservationID struct {
	Seq   int64
	Limit engine.Limit
}

// AppendText appends id's text form to dst.
func (id ReservationID) AppendText(dst []byte) []byte {
	dst = strconv.AppendInt(dst, id.Seq, 10)
	dst = strconv.AppendInt(append(dst, '.'), int64(id.Limit.Algo), 10)
	dst = strconv.AppendInt(append(dst, '.'), id.Limit.Limit, 10)
	return strconv.AppendInt(append(dst, '.'), id.Limit.Period, 10)
}

// ParseReservationID parses a reservation id's text form; it reports
// false for text no Reserve could have produced. It does not allocate.
func ParseReservationID(b []byte) (ReservationID, bool) {
	var f [4]int64
	if !parseDotted(b, f[:]) {
		return ReservationID{}, false
	}
	lim, err := engine.NewLimit(engine.Kind(min(f[1], 255)), f[2], f[3], 0)
	if err != nil {
		return ReservationID{}, false
	}
	return ReservationID{Seq: f[0], Limit: lim}, true
}

// reservationKey writes the record key of reservation seq of key under
// limit lim into sc.ikey.
func (sc *scratch) reservationKey(key []byte, seq int64, lim *engine.Limit) {
	suf := sc.recordKey(tagReservation, key, 25)
	binary.BigEndian.PutUint64(suf, uint64(seq))
	suf[8] = byte(lim.Algo)
	binary.BigEndian.PutUint64(suf[9:], uint64(lim.Limit))
	binary.BigEndian.PutUint64(suf[17:], uint64(lim.Period))
}

// Reserve charges Estimate units as a check would and, when admitted,
// records a reservation that Settle settles at the actual cost
// (THROTTLE.RESERVE). An unsettled reservation settles at its estimate
// after TTL (ns). The caller owns the value.
type Reserve struct {
	Key      []byte
	Limit    engine.Limit
	Estimate int64
	TTL      int64

	// Results: the check's decision and, when admitted, the id.
	Decision engine.Decision
	ID       ReservationID

	// Done, Err and Lane are MCheck's: a backend that returned ErrPending
	// completes a copy of the value later and hands it to Done, with Err
	// the error the call would have returned.
	Done func(*Reserve)
	Err  error
	Lane uint64
}

// Reserve runs r. The record goes in first, so a full record store
// refuses the reservation (ErrRecordsFull) before anything is charged;
// its id is not yet known to anyone, so no Settle can see it before the
// charge. A denied or failed charge removes the record again.
func (c *Local) Reserve(r *Reserve, now int64, sec *Section) error {
	if err := checkKey(r.Key); err != nil {
		return err
	}
	a := &c.adm
	sc := a.scratch()
	defer a.done(sc)
	in := a.internal()
	seq := a.seq.Add(1)
	sc.reservationKey(r.Key, seq, &r.Limit)
	sc.set = setState{engine.State{A: r.Estimate, B: now, Kind: kindReservation}, r.TTL}
	if !in.TryApply(sc.ikey, now, &sc.set) {
		return ErrRecordsFull
	}
	op := &sc.op
	*op = Op{Kind: OpCheck, Key: r.Key, Limit: r.Limit, Cost: r.Estimate}
	c.Do(op, now, sec)
	if op.Err != nil || op.Decision.Allowed == 0 {
		in.Delete(sc.ikey, now)
	}
	r.Decision = op.Decision
	r.ID = ReservationID{Seq: seq, Limit: r.Limit}
	err := op.Err
	*op = Op{}
	return err
}

// Settle settles a reservation at Actual units, exactly once
// (THROTTLE.SETTLE): below the estimate the difference is refunded, above
// it the difference is charged even past the limit. Settled reports
// whether this call settled it (false: unknown, expired or settled
// before). The caller owns the value.
type Settle struct {
	Key    []byte
	ID     ReservationID
	Actual int64

	Settled bool // the result

	// Done, Err and Lane are MCheck's: a backend that returned ErrPending
	// completes a copy of the value later and hands it to Done, with Err
	// the error the call would have returned.
	Done func(*Settle)
	Err  error
	Lane uint64
}

// Settle runs s. The record is read and deleted under the key's
// user-store lock (or inside sec), so of two concurrent Settles of one id
// exactly one applies.
func (c *Local) Settle(s *Settle, now int64, sec *Section) error {
	s.Settled = false
	if err := checkKey(s.Key); err != nil {
		return err
	}
	if s.Actual < 0 {
		return engine.ErrNegativeCost
	}
	key, lim := s.Key, &s.ID.Limit
	a := &c.adm
	sc := a.scratch()
	defer a.done(sc)
	in := a.internal()
	sc.reservationKey(key, s.ID.Seq, lim)
	c.lockKey(sc, key, sec)
	rec, ok := in.Get(sc.ikey, now)
	if !ok || rec.Kind != kindReservation {
		sc.tx.Unlock()
		return nil
	}
	st, _, _ := sc.t.Get(key, now)
	next, ttl := st, int64(0)
	var err error
	switch {
	case s.Actual > rec.A:
		next, ttl, err = lim.Charge(st, now, s.Actual-rec.A)
	case s.Actual < rec.A:
		next, ttl, err = lim.Refund(st, now, rec.B, rec.A-s.Actual)
	}
	if err != nil {
		sc.tx.Unlock()
		return err
	}
	if !in.Delete(sc.ikey, now) {
		sc.tx.Unlock()
		return nil
	}
	if next != st {
		sc.set = setState{next, ttl}
		_ = sc.t.Apply(key, now, &sc.set)
	}
	sc.tx.Unlock()
	s.Settled = true
	return nil
}
