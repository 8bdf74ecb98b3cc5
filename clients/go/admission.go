package throttlekit

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxMCheckLimits is the most limits one MCheck may name (the server's
// bound).
const MaxMCheckLimits = 64

// MaxSlots is the largest concurrency limit Acquire accepts (the server's
// bound on slots per key).
const MaxSlots = 1024

// KeyLimit is one limit of an MCheck: the budget of Key under Rate.
//
// Rate.Algo defaults to GCRA when empty; Rate.Burst must be 0, since
// THROTTLE.MCHECK takes no burst (every limit's capacity is its Limit).
type KeyLimit struct {
	Key  string
	Rate Rate
}

// MultiDecision is the outcome of an MCheck.
//
// Allowed is true when every limit admitted the cost, which was then
// consumed from all of them; when false nothing was consumed anywhere.
// Decisions holds one entry per limit, in the order given: when denied,
// each shows its limit as it stands, and the limits that would have
// admitted the cost have Allowed true. RetryAfter is 0 when Allowed, the
// largest retry-after of the denying limits otherwise, and negative when
// one of them can never admit the cost.
type MultiDecision struct {
	Allowed    bool
	RetryAfter time.Duration
	Decisions  []Decision
}

// Reservation is the reply to THROTTLE.RESERVE: the decision on the
// estimate and, when it was admitted, the ID that Settle names. ID is
// empty when the reservation was denied (nothing was charged).
type Reservation struct {
	Decision
	ID string
}

// BanPolicy turns repeated denials into a penalty: after Threshold
// denials of a key within its limit's period, the key is denied for
// Duration without anything being consumed. Duration is sent in whole
// milliseconds.
type BanPolicy struct {
	Threshold int64
	Duration  time.Duration
}

// Slot is the reply to THROTTLE.ACQUIRE.
//
// When Acquired, Token names the slot for Release and Refresh, and
// InFlight counts the slots held including this one. When not, Token is
// empty and RetryAfter is the time until the first held slot expires
// (sooner if one is released).
type Slot struct {
	Acquired   bool
	Limit      int64
	InFlight   int64
	Token      string
	RetryAfter time.Duration
}

// wholeMs checks that d is a positive whole number of milliseconds and
// returns it in milliseconds.
func wholeMs(name string, d time.Duration) (int64, error) {
	switch {
	case d < time.Millisecond:
		return 0, &ArgError{name, "must be at least 1ms"}
	case d%time.Millisecond != 0:
		return 0, &ArgError{name, "must be a whole number of milliseconds"}
	}
	return int64(d / time.Millisecond), nil
}

func algoOrDefault(a Algo) string {
	if a == "" {
		return string(GCRA)
	}
	return string(a)
}

func mcheckArgs(limits []KeyLimit, cost int64) ([]any, error) {
	switch {
	case len(limits) == 0:
		return nil, &ArgError{"limits", "must name at least one limit"}
	case len(limits) > MaxMCheckLimits:
		return nil, &ArgError{"limits", fmt.Sprintf("must name at most %d limits", MaxMCheckLimits)}
	case cost < 0:
		return nil, &ArgError{"cost", "must not be negative"}
	}
	args := make([]any, 0, 4+4*len(limits))
	args = append(args, "THROTTLE.MCHECK", len(limits))
	seen := make(map[string]struct{}, len(limits))
	for _, kl := range limits {
		if err := kl.Rate.validate(); err != nil {
			return nil, err
		}
		if kl.Rate.Burst != 0 {
			return nil, &ArgError{"burst", "is not supported by MCheck (must be 0)"}
		}
		if _, dup := seen[kl.Key]; dup {
			return nil, &ArgError{"limits", fmt.Sprintf("name key %q twice", kl.Key)}
		}
		seen[kl.Key] = struct{}{}
		args = append(args, kl.Key, kl.Rate.Limit, kl.Rate.periodMs(), algoOrDefault(kl.Rate.Algo))
	}
	if cost != 1 {
		args = append(args, "COST", cost)
	}
	return args, nil
}

func reserveArgs(key string, rate Rate, estimate int64, ttl time.Duration) ([]any, error) {
	if err := rate.validate(); err != nil {
		return nil, err
	}
	if rate.Burst != 0 {
		return nil, &ArgError{"burst", "is not supported by Reserve (must be 0)"}
	}
	if estimate < 0 {
		return nil, &ArgError{"estimate", "must not be negative"}
	}
	args := make([]any, 0, 10)
	args = append(args, "THROTTLE.RESERVE", key, rate.Limit, rate.periodMs(), "COST", estimate)
	if rate.Algo != "" {
		args = append(args, "ALGO", string(rate.Algo))
	}
	if ttl != 0 {
		ms, err := wholeMs("ttl", ttl)
		if err != nil {
			return nil, err
		}
		args = append(args, "TTL", ms)
	}
	return args, nil
}

func settleArgs(key, id string, actual int64) ([]any, error) {
	switch {
	case id == "":
		return nil, &ArgError{"id", "must not be empty (a denied reservation has nothing to settle)"}
	case actual < 0:
		return nil, &ArgError{"actual", "must not be negative"}
	}
	return []any{"THROTTLE.SETTLE", key, id, actual}, nil
}

func checkBanArgs(key string, rate Rate, cost int64, ban BanPolicy) ([]any, error) {
	args, err := checkArgs("THROTTLE.CHECK", key, rate, cost, true)
	if err != nil {
		return nil, err
	}
	if ban.Threshold <= 0 {
		return nil, &ArgError{"ban threshold", "must be positive"}
	}
	ms, err := wholeMs("ban duration", ban.Duration)
	if err != nil {
		return nil, err
	}
	return append(args, "BAN", ban.Threshold, ms), nil
}

func acquireArgs(key string, limit int64, ttl time.Duration) ([]any, error) {
	if limit < 1 || limit > MaxSlots {
		return nil, &ArgError{"limit", fmt.Sprintf("must be from 1 to %d", MaxSlots)}
	}
	ms, err := wholeMs("ttl", ttl)
	if err != nil {
		return nil, err
	}
	return []any{"THROTTLE.ACQUIRE", key, limit, ms}, nil
}

func tokenArgs(name, key, token string) ([]any, error) {
	if token == "" {
		return nil, &ArgError{"token", "must not be empty"}
	}
	return []any{name, key, token}, nil
}

func refreshArgs(key, token string, ttl time.Duration) ([]any, error) {
	args, err := tokenArgs("THROTTLE.REFRESH", key, token)
	if err != nil {
		return nil, err
	}
	ms, err := wholeMs("ttl", ttl)
	if err != nil {
		return nil, err
	}
	return append(args, ms), nil
}

// MCheck runs THROTTLE.MCHECK: it checks every limit at one instant and
// consumes cost from all of them or from none. A request that must pass a
// per-user, a per-tenant and a global limit thus never burns the user's
// budget when the global limit says no. Up to MaxMCheckLimits limits, each
// on a distinct key; cost 0 only asks.
func (c *Client) MCheck(ctx context.Context, limits []KeyLimit, cost int64) (MultiDecision, error) {
	args, err := mcheckArgs(limits, cost)
	if err != nil {
		return MultiDecision{}, err
	}
	v, err := c.run(ctx, args)
	if err != nil {
		return MultiDecision{}, err
	}
	return multiDecisionOf(v)
}

// Reserve runs THROTTLE.RESERVE: it charges estimate units of key's budget
// up front, when they are available, and returns a reservation whose ID
// Settle names once the real cost is known. rate.Burst must be 0. ttl is
// how long the reservation waits for Settle (0: the server's default, the
// period); a reservation never settled keeps its estimate charged.
func (c *Client) Reserve(ctx context.Context, key string, rate Rate, estimate int64, ttl time.Duration) (Reservation, error) {
	args, err := reserveArgs(key, rate, estimate, ttl)
	if err != nil {
		return Reservation{}, err
	}
	v, err := c.run(ctx, args)
	if err != nil {
		return Reservation{}, err
	}
	return reservationOf(v)
}

// Settle runs THROTTLE.SETTLE: it replaces the estimate of reservation id
// on key by actual, refunding the difference when less and charging it
// when more (even past the limit: a debt later checks pay back). It
// returns false when the reservation is unknown, expired or already
// settled, and then changes nothing.
func (c *Client) Settle(ctx context.Context, key, id string, actual int64) (bool, error) {
	args, err := settleArgs(key, id, actual)
	if err != nil {
		return false, err
	}
	return c.runBool(ctx, args)
}

// CheckBan runs THROTTLE.CHECK with a BAN option: a Check of cost units
// under rate that also counts denials, and after ban.Threshold of them
// within rate.Period denies key for ban.Duration without consuming
// anything (RetryAfter is then the ban time left). The ban is a separate
// argument, not a field of Rate, so that a Rate stays a plain rate and a
// Limiter built on one never bans by accident. Only denials of a positive
// cost count.
func (c *Client) CheckBan(ctx context.Context, key string, rate Rate, cost int64, ban BanPolicy) (Decision, error) {
	args, err := checkBanArgs(key, rate, cost, ban)
	if err != nil {
		return Decision{}, err
	}
	v, err := c.run(ctx, args)
	if err != nil {
		return Decision{}, err
	}
	return decisionOf(v, "allowed")
}

// Banned runs THROTTLE.BANNED: how long key stays banned, 0 when it is not.
func (c *Client) Banned(ctx context.Context, key string) (time.Duration, error) {
	v, err := c.run(ctx, []any{"THROTTLE.BANNED", key})
	if err != nil {
		return 0, err
	}
	return durationOf(v)
}

// Unban runs THROTTLE.UNBAN: it lifts key's ban and forgets its counted
// denials, and reports whether a ban was lifted.
func (c *Client) Unban(ctx context.Context, key string) (bool, error) {
	return c.runBool(ctx, []any{"THROTTLE.UNBAN", key})
}

// Acquire runs THROTTLE.ACQUIRE: it takes one of limit concurrency slots
// of key (1 to MaxSlots) for at most ttl. Release the slot when done, or
// Refresh it before ttl passes to keep it; a holder that vanishes frees
// its slot when ttl passes. In-flight never exceeds limit.
func (c *Client) Acquire(ctx context.Context, key string, limit int64, ttl time.Duration) (Slot, error) {
	args, err := acquireArgs(key, limit, ttl)
	if err != nil {
		return Slot{}, err
	}
	v, err := c.run(ctx, args)
	if err != nil {
		return Slot{}, err
	}
	return slotOf(v)
}

// Release runs THROTTLE.RELEASE: it frees the slot token names. It returns
// false when the slot was already released or has expired.
func (c *Client) Release(ctx context.Context, key, token string) (bool, error) {
	args, err := tokenArgs("THROTTLE.RELEASE", key, token)
	if err != nil {
		return false, err
	}
	return c.runBool(ctx, args)
}

// Refresh runs THROTTLE.REFRESH: the slot token names now expires ttl from
// now. It returns false when the slot was already released or has expired
// (it is not taken again: Acquire a new one).
func (c *Client) Refresh(ctx context.Context, key, token string, ttl time.Duration) (bool, error) {
	args, err := refreshArgs(key, token, ttl)
	if err != nil {
		return false, err
	}
	return c.runBool(ctx, args)
}

func (c *Client) runBool(ctx context.Context, args []any) (bool, error) {
	v, err := c.run(ctx, args)
	if err != nil {
		return false, err
	}
	return boolOf(v)
}

// MultiDecisionCmd is a queued THROTTLE.MCHECK.
type MultiDecisionCmd struct{ q queued }

// Result returns the decision once the pipeline has run.
func (m *MultiDecisionCmd) Result() (MultiDecision, error) { return resultOf(m.q, multiDecisionOf) }

// ReservationCmd is a queued THROTTLE.RESERVE.
type ReservationCmd struct{ q queued }

// Result returns the reservation once the pipeline has run.
func (r *ReservationCmd) Result() (Reservation, error) { return resultOf(r.q, reservationOf) }

// SlotCmd is a queued THROTTLE.ACQUIRE.
type SlotCmd struct{ q queued }

// Result returns the slot once the pipeline has run.
func (s *SlotCmd) Result() (Slot, error) { return resultOf(s.q, slotOf) }

// BoolCmd is a queued THROTTLE.SETTLE, UNBAN, RELEASE or REFRESH, whose
// reply is 1 or 0.
type BoolCmd struct{ q queued }

// Result returns the reply as a bool once the pipeline has run.
func (b *BoolCmd) Result() (bool, error) { return resultOf(b.q, boolOf) }

// DurationCmd is a queued THROTTLE.BANNED.
type DurationCmd struct{ q queued }

// Result returns the ban time left once the pipeline has run.
func (d *DurationCmd) Result() (time.Duration, error) { return resultOf(d.q, durationOf) }

// MCheckCmd queues an MCheck on p.
func (c *Client) MCheckCmd(ctx context.Context, p redis.Pipeliner, limits []KeyLimit, cost int64) *MultiDecisionCmd {
	args, err := mcheckArgs(limits, cost)
	return &MultiDecisionCmd{queueArgs(ctx, p, args, err)}
}

// ReserveCmd queues a Reserve on p.
func (c *Client) ReserveCmd(ctx context.Context, p redis.Pipeliner, key string, rate Rate, estimate int64, ttl time.Duration) *ReservationCmd {
	args, err := reserveArgs(key, rate, estimate, ttl)
	return &ReservationCmd{queueArgs(ctx, p, args, err)}
}

// SettleCmd queues a Settle on p.
func (c *Client) SettleCmd(ctx context.Context, p redis.Pipeliner, key, id string, actual int64) *BoolCmd {
	args, err := settleArgs(key, id, actual)
	return &BoolCmd{queueArgs(ctx, p, args, err)}
}

// CheckBanCmd queues a CheckBan on p.
func (c *Client) CheckBanCmd(ctx context.Context, p redis.Pipeliner, key string, rate Rate, cost int64, ban BanPolicy) *DecisionCmd {
	args, err := checkBanArgs(key, rate, cost, ban)
	return &DecisionCmd{queueArgs(ctx, p, args, err)}
}

// BannedCmd queues a Banned on p.
func (c *Client) BannedCmd(ctx context.Context, p redis.Pipeliner, key string) *DurationCmd {
	return &DurationCmd{queueArgs(ctx, p, []any{"THROTTLE.BANNED", key}, nil)}
}

// UnbanCmd queues an Unban on p.
func (c *Client) UnbanCmd(ctx context.Context, p redis.Pipeliner, key string) *BoolCmd {
	return &BoolCmd{queueArgs(ctx, p, []any{"THROTTLE.UNBAN", key}, nil)}
}

// AcquireCmd queues an Acquire on p.
func (c *Client) AcquireCmd(ctx context.Context, p redis.Pipeliner, key string, limit int64, ttl time.Duration) *SlotCmd {
	args, err := acquireArgs(key, limit, ttl)
	return &SlotCmd{queueArgs(ctx, p, args, err)}
}

// ReleaseCmd queues a Release on p.
func (c *Client) ReleaseCmd(ctx context.Context, p redis.Pipeliner, key, token string) *BoolCmd {
	args, err := tokenArgs("THROTTLE.RELEASE", key, token)
	return &BoolCmd{queueArgs(ctx, p, args, err)}
}

// RefreshCmd queues a Refresh on p.
func (c *Client) RefreshCmd(ctx context.Context, p redis.Pipeliner, key, token string, ttl time.Duration) *BoolCmd {
	args, err := refreshArgs(key, token, ttl)
	return &BoolCmd{queueArgs(ctx, p, args, err)}
}

// Reply decoding of the admission commands. RESP2 gives arrays, RESP3
// maps with named fields in the same order.

func multiDecisionOf(v any) (MultiDecision, error) {
	var (
		allowed int64
		retry   int64
		items   []any
		ok      bool
		resp2   bool
	)
	switch r := v.(type) {
	case []any:
		if len(r) < 2 {
			return MultiDecision{}, fmt.Errorf("%w: MCHECK array of %d elements, want at least 2", ErrUnexpectedReply, len(r))
		}
		if allowed, ok = r[0].(int64); !ok {
			return MultiDecision{}, fmt.Errorf("%w: MCHECK allowed is %T, want an integer", ErrUnexpectedReply, r[0])
		}
		items, resp2 = r[1:], true
	case map[any]any:
		if allowed, ok = r["allowed"].(int64); !ok {
			return MultiDecision{}, fmt.Errorf("%w: MCHECK field \"allowed\" is %T, want an integer", ErrUnexpectedReply, r["allowed"])
		}
		if retry, ok = r["retry_after_ms"].(int64); !ok {
			return MultiDecision{}, fmt.Errorf("%w: MCHECK field \"retry_after_ms\" is %T, want an integer", ErrUnexpectedReply, r["retry_after_ms"])
		}
		if items, ok = r["decisions"].([]any); !ok {
			return MultiDecision{}, fmt.Errorf("%w: MCHECK field \"decisions\" is %T, want an array", ErrUnexpectedReply, r["decisions"])
		}
	default:
		return MultiDecision{}, fmt.Errorf("%w: MCHECK reply %T, want an array or a map", ErrUnexpectedReply, v)
	}
	md := MultiDecision{Allowed: allowed == 1, Decisions: make([]Decision, len(items))}
	for i, it := range items {
		d, err := decisionOf(it, "allowed")
		if err != nil {
			return MultiDecision{}, fmt.Errorf("decision %d: %w", i, err)
		}
		md.Decisions[i] = d
	}
	if resp2 {
		// The overall retry-after the RESP3 reply carries: the largest of
		// the denying limits', negative once one of them can never pass.
		for _, d := range md.Decisions {
			if d.Allowed || retry < 0 {
				continue
			}
			if d.RetryAfter < 0 {
				retry = -1
			} else {
				retry = max(retry, int64(d.RetryAfter/time.Millisecond))
			}
		}
	}
	if !md.Allowed {
		md.RetryAfter = msDuration(retry)
	}
	return md, nil
}

// optString decodes a bulk string or a nil reply ("" for nil).
func optString(v any, name string) (string, error) {
	switch s := v.(type) {
	case nil:
		return "", nil
	case string:
		return s, nil
	}
	return "", fmt.Errorf("%w: %s is %T, want a string or nil", ErrUnexpectedReply, name, v)
}

func reservationOf(v any) (Reservation, error) {
	var idv, five any
	switch r := v.(type) {
	case []any:
		if len(r) != 6 {
			return Reservation{}, fmt.Errorf("%w: RESERVE array of %d elements, want 6", ErrUnexpectedReply, len(r))
		}
		five, idv = r[:5], r[5]
	case map[any]any:
		five, idv = r, r["id"]
	default:
		return Reservation{}, fmt.Errorf("%w: RESERVE reply %T, want an array or a map", ErrUnexpectedReply, v)
	}
	d, err := decisionOf(five, "allowed")
	if err != nil {
		return Reservation{}, err
	}
	id, err := optString(idv, "id")
	if err != nil {
		return Reservation{}, err
	}
	return Reservation{Decision: d, ID: id}, nil
}

var slotFields = [5]string{"acquired", "limit", "in_flight", "token", "retry_after_ms"}

func slotOf(v any) (Slot, error) {
	var f [5]any
	switch r := v.(type) {
	case []any:
		if len(r) != 5 {
			return Slot{}, fmt.Errorf("%w: ACQUIRE array of %d elements, want 5", ErrUnexpectedReply, len(r))
		}
		copy(f[:], r)
	case map[any]any:
		for i, name := range slotFields {
			f[i] = r[name]
		}
	default:
		return Slot{}, fmt.Errorf("%w: ACQUIRE reply %T, want an array or a map", ErrUnexpectedReply, v)
	}
	var n [5]int64
	for _, i := range []int{0, 1, 2, 4} {
		x, ok := f[i].(int64)
		if !ok {
			return Slot{}, fmt.Errorf("%w: ACQUIRE %s is %T, want an integer", ErrUnexpectedReply, slotFields[i], f[i])
		}
		n[i] = x
	}
	tok, err := optString(f[3], "token")
	if err != nil {
		return Slot{}, err
	}
	return Slot{Acquired: n[0] == 1, Limit: n[1], InFlight: n[2], Token: tok, RetryAfter: msDuration(n[4])}, nil
}

func boolOf(v any) (bool, error) {
	n, err := intOf(v)
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

func durationOf(v any) (time.Duration, error) {
	n, err := intOf(v)
	if err != nil {
		return 0, err
	}
	return time.Duration(n) * time.Millisecond, nil
}
