package engine

import (
	"math"
)

// Redis's GCRA command (redis/redis#14826, renamed in #14950: "GCRA key
// max_burst tokens_per_period period [TOKENS count]"), as its
// implementation computes it. It differs from THROTTLE.CHECK gcra and from
// CL.THROTTLE in its units and roundings, so it has a state of its own
// (KindRateGCRA) and the other commands answer WRONGTYPE on its keys:
//
//   - time is in microseconds, and "now" is the millisecond of the call
//     (Redis reads its cached command time, a millisecond clock, and
//     multiplies it by 1000);
//   - the emission interval is period_us / tokens_per_period rounded to the
//     nearest microsecond, at least 1 µs; the tolerance is interval x
//     (max_burst + 1);
//   - retry_after and reset_after are whole seconds rounded up;
//     retry_after is -1 when the call is allowed, or when the cost can never
//     fit (cost x interval beyond the tolerance);
//   - a denied call changes nothing; an allowed one moves the theoretical
//     arrival time (TAT) and the key lives until the millisecond of the new
//     TAT, inclusive (Redis's PXAT tat/1000).

// KindRateGCRA is the state of Redis's GCRA command: A = theoretical
// arrival time in microseconds since the epoch.
const KindRateGCRA Kind = KindSliding + 1

// RateGCRA is a validated GCRA configuration: the burst as Redis counts it
// (max_burst + 1, except that math.MaxInt64 stays as is), the emission
// interval in microseconds and the cost of the call.
type RateGCRA struct {
	Burst    int64 // max_burst + 1: the reply's second element
	Interval int64 // emission interval, µs, at least 1
	Tokens   int64 // cost of this call, at least 1
}

// RateGCRAReply is the GCRA command's five-integer reply.
type RateGCRAReply struct {
	Limited    int64 // 1 denied, 0 allowed
	Burst      int64 // max_burst + 1
	Remaining  int64 // tokens available right after the call
	RetryAfter int64 // seconds (rounded up) until a retry can pass; -1 when allowed or never
	ResetAfter int64 // seconds (rounded up) until the full burst is back
}

// NewRateGCRA checks GCRA's numbers as Redis does after parsing them:
// maxBurst >= 0, tokensPerPeriod >= 1 and tokens >= 1 (ErrOutOfRange; the
// caller's parser words those range errors as Redis does), and period in
// (0, 1e12) seconds (ErrGCRAPeriod). The products that could overflow are
// checked by Apply, after the key's type, in Redis's order.
func NewRateGCRA(maxBurst, tokensPerPeriod int64, period float64, tokens int64) (RateGCRA, error) {
	if maxBurst < 0 || tokensPerPeriod < 1 || tokens < 1 {
		return RateGCRA{}, ErrOutOfRange
	}
	if !ValidRateGCRAPeriod(period) {
		return RateGCRA{}, ErrGCRAPeriod
	}
	burst := maxBurst
	if burst < math.MaxInt64 {
		burst++
	}
	// Round half up, as C's (long long)(x + 0.5) does for positive x.
	iv := int64(period*1e6/float64(tokensPerPeriod) + 0.5)
	if iv == 0 {
		iv = 1
	}
	return RateGCRA{Burst: burst, Interval: iv, Tokens: tokens}, nil
}

// ValidRateGCRAPeriod reports whether period (seconds) is within GCRA's
// bounds, (0, 1e12). NaN is not.
func ValidRateGCRAPeriod(period float64) bool { return period > 0 && period < 1e12 }

// Apply runs one GCRA call at now (ns since the epoch) on state s and
// returns the next state, the reply and the ttl in ns after which the key
// may be dropped (see the comment at the top of this file). In Redis's
// order: a state of another Kind is ErrWrongType; interval x tokens beyond
// 64 bits is ErrGCRATokensOverflow, interval x burst ErrGCRABurstOverflow,
// and a TAT so far ahead that adding the cost overflows
// ErrGCRATokensOverflow again. Errors leave s as it was. It allocates
// nothing.
func (g *RateGCRA) Apply(s State, now int64) (State, RateGCRAReply, int64, error) {
	if s.Kind != KindNone && s.Kind != KindRateGCRA {
		return s, RateGCRAReply{}, 0, ErrWrongType
	}
	if g.Interval > math.MaxInt64/g.Tokens {
		return s, RateGCRAReply{}, 0, ErrGCRATokensOverflow
	}
	if g.Interval > math.MaxInt64/g.Burst {
		return s, RateGCRAReply{}, 0, ErrGCRABurstOverflow
	}
	nowUs := floorDiv(now, 1e6) * 1000
	tat := nowUs
	if s.Kind == KindRateGCRA {
		tat = s.A
	}
	t := g.Interval
	variance := t * g.Burst
	inc := t * g.Tokens
	base := max(nowUs, tat)
	if math.MaxInt64-base < inc {
		return s, RateGCRAReply{}, 0, ErrGCRATokensOverflow
	}
	newTat := base + inc
	r := RateGCRAReply{Burst: g.Burst, RetryAfter: -1}
	next := s
	var live int64 // µs from now the key's state lasts
	var ttl int64
	if diff := nowUs - (newTat - variance); diff < 0 {
		r.Limited = 1
		if inc <= variance {
			r.RetryAfter = ceilSeconds(-diff)
		}
		live = tat - nowUs
		if s.Kind == KindRateGCRA {
			ttl = keyTTL(s.A, now)
		}
	} else {
		live = newTat - nowUs
		next = State{A: newTat, Kind: KindRateGCRA}
		ttl = keyTTL(newTat, now)
	}
	if left := variance - live; left > -t {
		r.Remaining = left / t
	}
	r.ResetAfter = ceilSeconds(live)
	return next, r, ttl, nil
}

// keyTTL is the ns from now until a key whose TAT is tatUs expires: Redis
// sets its expiry to the millisecond tatUs/1000 and drops it once the clock
// is past that millisecond.
func keyTTL(tatUs, now int64) int64 {
	ms := tatUs / 1000
	if ms >= math.MaxInt64/1_000_000-1 {
		return math.MaxInt64
	}
	return (ms+1)*1e6 - now
}

// ceilSeconds is C's ceil(us / 1e6) on a double, as an integer: rounds up
// for positive us, toward zero for negative us.
func ceilSeconds(us int64) int64 {
	return int64(math.Ceil(float64(us) / 1e6))
}
