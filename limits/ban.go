package limits

import "github.com/throttlekit/throttlekit-server/engine"

// CheckBan is a check with a penalty box (THROTTLE.CHECK ... BAN): after
// Ban.Threshold denials within the limit's period (counted from the
// first), the key is banned for Ban.Duration: its checks are denied
// without running the algorithm, with remaining 0 and retry_after the
// ban's time left; the denial that starts a ban reports the ban's
// duration. A peek (Cost 0) is never counted. The caller owns the value.
type CheckBan struct {
	Key   []byte
	Limit engine.Limit
	Cost  int64
	Ban   engine.Ban

	Decision engine.Decision // the result

	// Done, Err and Lane are MCheck's: a backend that returned ErrPending
	// completes a copy of the value later and hands it to Done, with Err
	// the error the call would have returned.
	Done func(*CheckBan)
	Err  error
	Lane uint64
}

// CheckBan runs c. A banned key never consumes: the ban record is read
// under the key's user-store lock (or inside sec), and the check writes
// only when the key is not banned. A full record store leaves a denial
// uncounted toward the ban: the request is denied either way.
func (c *Local) CheckBan(cb *CheckBan, now int64, sec *Section) error {
	if err := checkKey(cb.Key); err != nil {
		return err
	}
	a := &c.adm
	sc := a.scratch()
	defer a.done(sc)
	key := cb.Key
	in := a.internal()
	c.lockKey(sc, key, sec)
	sc.recordKey(tagBan, key, 0)
	rec, _ := in.Get(sc.ikey, now)
	st, _, _ := sc.t.Get(key, now)
	if left := engine.BannedFor(rec, now); left > 0 {
		_, d, _, err := cb.Limit.Check(st, now, 0)
		sc.tx.Unlock()
		if err != nil {
			return err
		}
		d.Allowed, d.Remaining, d.RetryAfter = 0, 0, msCeil(left)
		cb.Decision = d
		return nil
	}
	next, d, ttl, err := cb.Limit.Check(st, now, cb.Cost)
	if err != nil {
		sc.tx.Unlock()
		return err
	}
	if d.Allowed != 0 {
		sc.set = setState{next, ttl}
		_ = sc.t.Apply(key, now, &sc.set)
	} else if cb.Cost > 0 {
		nrec, rttl, banned := cb.Ban.Deny(rec, now)
		sc.set = setState{nrec, rttl}
		// A full record store leaves the denial uncounted (package doc,
		// Bounds): the request is denied either way.
		if in.TryApply(sc.ikey, now, &sc.set) && banned && d.RetryAfter >= 0 {
			d.RetryAfter = max(d.RetryAfter, msCeil(cb.Ban.Duration))
		}
	}
	sc.tx.Unlock()
	cb.Decision = d
	return nil
}

// Banned returns the milliseconds left of key's ban, 0 if none
// (THROTTLE.BANNED).
func (c *Local) Banned(key []byte, now int64) (int64, error) {
	if err := checkKey(key); err != nil {
		return 0, err
	}
	a := &c.adm
	sc := a.scratch()
	defer a.done(sc)
	sc.recordKey(tagBan, key, 0)
	rec, _, _ := a.internal().Lookup(sc.ikey, now)
	return msCeil(engine.BannedFor(rec, now)), nil
}

// Unban lifts key's ban and forgets its denial count; it reports whether
// a ban was lifted (THROTTLE.UNBAN).
func (c *Local) Unban(key []byte, now int64, sec *Section) (bool, error) {
	if err := checkKey(key); err != nil {
		return false, err
	}
	a := &c.adm
	sc := a.scratch()
	defer a.done(sc)
	in := a.internal()
	sc.recordKey(tagBan, key, 0)
	c.lockKey(sc, key, sec)
	rec, _, _ := in.Lookup(sc.ikey, now)
	in.Delete(sc.ikey, now)
	sc.tx.Unlock()
	return engine.BannedFor(rec, now) > 0, nil
}

// BanCall is THROTTLE.BANNED or, with Lift, THROTTLE.UNBAN, as a value a
// backend may complete later (Backend.Ban). The caller owns it.
type BanCall struct {
	Key  []byte
	Lift bool // UNBAN: lift the ban and forget the denial count

	// Results.
	Left   int64 // BANNED: ms left of the ban, 0 if none
	Lifted bool  // UNBAN: a ban was lifted

	// Done, Err and Lane are MCheck's (see CheckBan).
	Done func(*BanCall)
	Err  error
	Lane uint64
}

// Ban runs b: Unban when b.Lift, else Banned (which reads no user key and
// ignores sec).
func (c *Local) Ban(b *BanCall, now int64, sec *Section) error {
	var err error
	if b.Lift {
		b.Left = 0
		b.Lifted, err = c.Unban(b.Key, now, sec)
	} else {
		b.Lifted = false
		b.Left, err = c.Banned(b.Key, now)
	}
	return err
}
