package upstream

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/engine"
)

// MaxSlots bounds Acquire's limit, as limits.MaxSlots does the server's.
const MaxSlots = 1024

// SlotGrant is Acquire's outcome.
type SlotGrant struct {
	Acquired   bool  // a slot was taken; Slot and Gen name it (the token)
	InFlight   int64 // slots held after the call
	Slot, Gen  int64
	RetryAfter int64 // when nothing was taken: ms until the first held slot expires
}

// Acquire runs THROTTLE.ACQUIRE on key: it takes the lowest free
// concurrency slot for ttl ns if fewer than limit (1 to MaxSlots) are
// held, atomically on the upstream (scripts/slots.lua). A slot's
// generation is unique on its key, so a token of a slot that expired and
// was taken again frees nothing.
func (c *Client) Acquire(ctx context.Context, key string, limit, ttl int64) (SlotGrant, error) {
	if limit < 1 || limit > MaxSlots {
		return SlotGrant{}, &Error{CodeArgs, errors.New("limit must be an integer from 1 to 1024")}
	}
	if ttl <= 0 {
		return SlotGrant{}, &Error{CodeArgs, errors.New("ttl must be positive")}
	}
	v, err := c.run(ctx, c.s.slots, []string{recordKey('s', key, "")}, c.now, "acquire", limit, ttl).StringSlice()
	if err != nil {
		return SlotGrant{}, classify(err)
	}
	n, err := ints(v, 5)
	if err != nil {
		return SlotGrant{}, err
	}
	return SlotGrant{Acquired: n[0] == 1, InFlight: n[1], Slot: n[2], Gen: n[3], RetryAfter: n[4]}, nil
}

// Release runs THROTTLE.RELEASE: it frees the slot the token (slot, gen)
// holds and reports whether it did (false: released before, or expired).
func (c *Client) Release(ctx context.Context, key string, slot, gen int64) (bool, error) {
	if slot < 0 || slot >= MaxSlots {
		return false, nil
	}
	return boolOf(c.run(ctx, c.s.slots, []string{recordKey('s', key, "")}, c.now, "release", slot, gen))
}

// Refresh runs THROTTLE.REFRESH: the slot the token holds now expires ttl
// ns from now; it reports whether the token holds it.
func (c *Client) Refresh(ctx context.Context, key string, slot, gen, ttl int64) (bool, error) {
	if ttl <= 0 {
		return false, &Error{CodeArgs, errors.New("ttl must be positive")}
	}
	if slot < 0 || slot >= MaxSlots {
		return false, nil
	}
	return boolOf(c.run(ctx, c.s.slots, []string{recordKey('s', key, "")}, c.now, "refresh", slot, gen, ttl))
}

// CheckBan runs THROTTLE.CHECK ... BAN on key (scripts/ban.lua): a check
// of cost units against l with b's penalty box, as limits.Local.CheckBan
// decides it. While banned the check consumes nothing and reports the
// ban's time left; a denial (cost > 0) is counted, and the threshold'th
// within b.Window starts a ban of b.Duration.
func (c *Client) CheckBan(ctx context.Context, key string, l engine.Limit, cost int64, b engine.Ban) (engine.Decision, error) {
	l, err := limitArgs(l)
	if err != nil {
		return engine.Decision{}, err
	}
	if b.Threshold <= 0 || b.Duration <= 0 || b.Window != l.Period {
		return engine.Decision{}, &Error{CodeArgs, errors.New("ban threshold and duration must be positive, its window the limit's period")}
	}
	keys := []string{key, recordKey('b', key, "")}
	return decisionOf(c.run(ctx, c.s.ban, keys, c.now, "check", l.Algo.String(), l.Limit, l.Period, l.Burst, cost,
		b.Threshold, b.Duration))
}

// Banned runs THROTTLE.BANNED (scripts/banned.lua): the milliseconds
// left of key's ban, 0 if none.
func (c *Client) Banned(ctx context.Context, key string) (int64, error) {
	return intOf(c.run(ctx, c.s.banned, []string{recordKey('b', key, "")}, c.now, "banned"))
}

// Unban runs THROTTLE.UNBAN: it lifts key's ban and forgets its denial
// count, and reports whether a ban was lifted.
func (c *Client) Unban(ctx context.Context, key string) (bool, error) {
	return boolOf(c.run(ctx, c.s.banned, []string{recordKey('b', key, "")}, c.now, "unban"))
}

// Reservation names an open reservation: the sequence number the client
// drew for it and the limit Settle adjusts (burst 0, as THROTTLE.RESERVE
// makes it).
type Reservation struct {
	Seq   int64
	Limit engine.Limit
}

// Reserve runs THROTTLE.RESERVE on key (scripts/reserve.lua): a check of
// estimate units against l (its burst is ignored: a reservation's limit
// has none) and, when admitted, a record that Settle settles at the actual
// cost; unsettled, it lapses after ttl ns, settled at its estimate. The
// sequence number is drawn at random (63 bits), so servers need no shared
// counter; a number in use on the key (about one chance in 2^63 per open
// reservation) is refused by the script before anything is charged and
// drawn again.
func (c *Client) Reserve(ctx context.Context, key string, l engine.Limit, estimate, ttl int64) (engine.Decision, Reservation, error) {
	l.Burst = 0
	l, err := limitArgs(l)
	if err != nil {
		return engine.Decision{}, Reservation{}, err
	}
	if ttl <= 0 {
		return engine.Decision{}, Reservation{}, &Error{CodeArgs, errors.New("ttl must be positive")}
	}
	for try := 0; ; try++ {
		r := Reservation{Seq: c.draw(), Limit: l}
		d, err := decisionOf(c.run(ctx, c.s.reserve, []string{key, r.recordKey(key)}, c.now, "reserve",
			l.Algo.String(), l.Limit, l.Period, estimate, ttl))
		var re redis.Error
		if try < 3 && errors.As(err, &re) && redis.HasErrorPrefix(re, "TKDUP") {
			continue
		}
		return d, r, err
	}
}

// Settle runs THROTTLE.SETTLE: it settles the reservation r of key at
// actual units, exactly once: below the estimate the difference is
// refunded, above it charged even past the limit (engine.Limit.Charge and
// Refund). It reports whether this call settled it.
func (c *Client) Settle(ctx context.Context, key string, r Reservation, actual int64) (bool, error) {
	l, err := limitArgs(engine.Limit{Algo: r.Limit.Algo, Limit: r.Limit.Limit, Period: r.Limit.Period})
	if err != nil {
		return false, err
	}
	if actual < 0 {
		return false, &Error{CodeEngine, engine.ErrNegativeCost}
	}
	return boolOf(c.run(ctx, c.s.reserve, []string{key, r.recordKey(key)}, c.now, "settle",
		l.Algo.String(), l.Limit, l.Period, actual))
}

// recordKey is r's record on the upstream.
func (r Reservation) recordKey(key string) string {
	return recordKey('r', key, reservationText(r.Seq, int64(r.Limit.Algo), r.Limit.Limit, r.Limit.Period))
}

func boolOf(r *redis.Cmd) (bool, error) {
	n, err := intOf(r)
	return n == 1, err
}

// ints parses a script's reply of n decimal integers.
func ints(v []string, n int) ([]int64, error) {
	if len(v) != n {
		return nil, &Error{CodeScript, errors.New("unexpected reply length " + strconv.Itoa(len(v)))}
	}
	out := make([]int64, n)
	for i, s := range v {
		x, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return nil, &Error{CodeScript, err}
		}
		out[i] = x
	}
	return out, nil
}
