// Package engine holds every rate-limit algorithm of throttlekit-server as
// pure, allocation-free functions: (State, now, cost) -> (State, Decision,
// ttl). It reads no clock and knows nothing of keys, stores or RESP; the
// store runs these functions atomically per key.
//
// The files follow the sections below: types.go (Kind, State, Decision,
// Limit), limit.go (NewLimit, Check, Peek and the shared integer
// arithmetic), gcra.go, token.go, window.go (fixed and sliding), lease.go,
// cell.go (CL.THROTTLE), charge.go (forced charges and refunds for
// reservations settled after the fact), ban.go (the penalty box) and
// errors.go (error values and their codes).
//
// # Time
//
// now is nanoseconds since the Unix epoch and Period is nanoseconds; the
// internal time unit is the nanosecond too. The GCRA emission interval is
// Period/Limit ns (truncated), so any rate whose interval divides into whole
// nanoseconds is exact: 1,000,000 per second is an interval of exactly
// 1000 ns. A rate above 1e9 per second (interval < 1 ns) is rejected.
// Decisions report times in milliseconds: ResetAt is epoch ms (rounded up),
// RetryAfter is ms (rounded up), 0 when allowed, -1 when cost can never fit.
//
// # State
//
// State is two int64 words plus a Kind; it holds no pointers.
//
//	KindGCRA     A = theoretical arrival time (TAT), ns since the epoch
//	KindToken    A = tokens held, B = time (ns) they were counted at
//	KindFixed    A = end of the window, ns since the epoch, B = units used
//	KindSliding  A = window index, B = previous count << 32 | current count
//
// A call on a state of another Kind returns ErrWrongType and the state
// unchanged. A cost of 0 never changes the state (a peek).
//
// # Results and errors
//
// Every call returns the next state, its decision and a ttl: the number of
// nanoseconds from now after which the next state is equivalent to the zero
// State (the budget is full again), so a store may drop the key then; ttl <= 0
// means it may be dropped now. Errors are the values in errors.go, each with
// a stable Code and no protocol text: the caller decides how to word them
// (server/ keeps one table from Code to RESP error line). A call that fails
// returns the state it was given, unchanged.
//
// # GCRA
//
// Interval T = Period/Limit, tolerance = T*Burst. A request of cost c at
// now is admitted if max(TAT, now) + c*T - now <= tolerance, and then TAT
// moves to max(TAT, now) + c*T. Example: 10 per second, burst 2: T = 100 ms,
// tolerance 200 ms; at t=0 two requests move TAT to 200 ms, a third at t=0
// would need 300 ms and is denied with RetryAfter 100 ms.
//
// # Token bucket
//
// A bucket of Burst tokens refills Limit tokens per Period; whole tokens are
// added as time passes (the refill time is advanced by exactly the time the
// added tokens cost, rounded up, so rounding never creates tokens). Example:
// capacity 5, 1 per second: 5 requests at t=0 empty it; at t=2.5 s two
// tokens are back and the bucket time sits at t=2 s.
//
// # Fixed window
//
// Windows are [k*Period, (k+1)*Period) on the epoch; at most Limit units are
// admitted per window. Example: 3 per minute: 3 requests at 12:00:10 pass,
// a fourth at 12:00:50 is denied with RetryAfter 10 s, 12:01:00 starts anew.
//
// # Sliding window
//
// The two-window weighted approximation: used = ceil(prev*(Period-e)/Period)
// + cur, where e is the time elapsed in the current window; admit if used +
// cost <= Limit. Example: limit 10 per minute, 8 in the previous minute, 2
// so far, 15 s into this minute: used = ceil(8*45/60) + 2 = 8, so 2 more
// pass. Limit must fit in 31 bits.
//
// # Leases
//
// Lease draws min(batch, remaining) credits from the current fixed window
// (KindFixed state, shared with fixed-window checks). Credits are valid until
// the window's end, Decision.ResetAt, so with any number of nodes leasing the
// units admitted per window never exceed Limit. Return gives credits back; it
// counts only if it names the same window (its ResetAt) and never takes back
// more than the window used.
//
// # Backward and forward clock jumps
//
// GCRA keeps max(TAT, now): a clock that goes back only makes the wait
// longer. The token bucket refills only when now is after its stored time.
// The fixed and sliding windows keep counting in the stored window while the
// clock sits in an earlier one. A forward jump refills as the algorithm says.
//
// # Cost
//
// A call is a few dozen integer operations, among them one to four divisions
// by a variable (most calls need one); it does not allocate. NewLimit caches
// Period/Limit and NewCell the emission interval (a float64 division);
// literals derive them per call. The token bucket converts between tokens
// and time with 64-bit arithmetic when Period is a whole multiple of Limit (1
// token per Period/Limit ns), and with a 128-bit product and division
// otherwise. The sliding window finds the window index without dividing by
// Period while requests stay in the stored window or the next.
//
// # CL.THROTTLE (redis-cell 0.5.0)
//
// Cell reproduces redis-cell's reply: interval T = trunc(period_ns/count) in
// float64 as redis-cell computes it, tolerance = T*(max_burst+1), limit =
// max_burst+1. A request is limited when now < new_tat - tolerance;
// retry_after is -1 if quantity*T exceeds the tolerance; reset_after is the
// TAT distance from now (unchanged TAT when limited); remaining is
// trunc((tolerance - reset_after)/T) computed on microseconds, 0 when that is
// at or below -T. Both durations are whole seconds, rounded up when a
// millisecond remainder is left. quantity 0 peeks. Cell and THROTTLE.CHECK
// gcra share KindGCRA state (the TAT in ns), so one key can be used by both;
// each call applies its own parameters to the shared TAT. Divergence from
// redis-cell: a negative quantity is a refund, as in redis-cell, but the TAT
// is never moved before now (redis-cell would write an expired key).
package engine
