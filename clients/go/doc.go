// Package throttlekit is the Go client of throttlekit-server, a rate-limit
// server that speaks the Redis protocol, and a two-tier limiter that puts a
// local tier in front of it.
//
// A Rate is a limit per period, as in go-redis/redis_rate: PerSecond(n),
// PerMinute(n), PerHour(n) and PerDay(n) build the common ones, and Burst
// and Algo (GCRA, the default, TokenBucket, FixedWindow, SlidingWindow)
// refine them. Times are time.Time and time.Duration throughout; the
// server's milliseconds stay on the wire.
//
// # The typed client
//
// Client wraps any go-redis v9 client and turns the THROTTLE commands into
// typed calls: Check, Peek, Reset, Lease, Return and CellThrottle
// (CL.THROTTLE), and the admission calls below. Replies are decoded from RESP2 arrays and RESP3 maps
// alike; error replies become *ServerError values whose Code is the
// reply's first word (errors.Is(err, ErrWrongType), errors.Is(err,
// ErrInvalidArgument)); arguments the client can judge alone are rejected
// before anything is sent, with an *ArgError. The *Cmd methods queue the
// same commands on a go-redis pipeline so that many decisions share one
// round trip. Context deadlines reach the socket only when the go-redis
// client has ContextTimeoutEnabled set; a context already done stops a call
// before it is sent.
//
// # Admission beyond one limit
//
// The admission commands have typed calls too, with *Cmd variants for
// pipelines:
//
//   - MCheck (THROTTLE.MCHECK) checks up to MaxMCheckLimits KeyLimits at
//     one instant and consumes the cost from all or from none; a
//     MultiDecision carries each limit's Decision and the overall
//     retry-after. Each limit names its algorithm on the wire, so an empty
//     Algo is sent as GCRA; MCheck takes no burst.
//   - Reserve (THROTTLE.RESERVE) charges an estimate up front and returns
//     a Reservation whose ID Settle (THROTTLE.SETTLE) names to replace the
//     estimate by the real cost: less is refunded, more is charged even
//     past the limit. A denied reservation charges nothing and has an
//     empty ID.
//   - CheckBan is Check with a BanPolicy: after Threshold denials within
//     the limit's period the key is denied for Duration without anything
//     consumed. The policy is an argument rather than a field of Rate so
//     that a Rate stays a plain rate, shared with the Limiter, which never
//     bans. Banned and Unban read and lift a ban.
//   - Acquire, Release and Refresh (THROTTLE.ACQUIRE, RELEASE, REFRESH)
//     bound concurrency: a Slot's Token names a held slot until it is
//     released or its ttl passes, so a holder that vanishes frees it.
//     Release and Refresh report false for a slot already gone; they never
//     take a slot again.
//
// Durations (periods, ttls, ban durations) go to the server as whole
// milliseconds; a duration under 1ms or with a fraction of a millisecond
// is an *ArgError (but Reserve's ttl 0 asks for the server's default, the
// period), as is an empty ID or token. Retry-afters decode like
// Decision's: negative when the request can never pass.
//
// # The two-tier limiter
//
// NewLimiter checks a Limiter's options once and returns an *ArgError for
// invalid ones. Like golang.org/x/time/rate's, a Limiter decides now with
// Allow(ctx, key) (one unit) and AllowN(ctx, key, n), or blocks until the
// units pass with Wait and WaitN, which sleep for each denial's
// retry-after (no polling) and give up at once when the context's
// deadline would come first (ErrWouldExceedDeadline) or the units can
// never pass (ErrNeverAllowed). It answers in one of three modes, which
// differ in how often they ask the server and in what they guarantee:
//
//   - ModeStrict asks the server every time: exactly the server's decision,
//     any algorithm, one round trip per call.
//   - ModeCachedDeny asks the server for every call it cannot answer from a
//     remembered denial. A denial is kept until its retry-after, counted
//     from the arrival of the reply (so it lasts slightly longer than the
//     server's, never shorter), and applies to that cost or more. A flood
//     on a denied key costs no round trip; admissions are as exact as in
//     ModeStrict. It suits limits that are mostly under their budget for
//     most keys and abused by a few.
//   - ModeLeased leases credits of the server's fixed window with
//     THROTTLE.LEASE and spends them locally: most calls are a hash, a few
//     loads and one compare-and-swap (no lock, no allocation). Credits are void when
//     their window ends, so the units admitted per window never exceed the
//     limit for any number of nodes (window-coupled leasing). The price is
//     utilisation: credits a node holds at the end of a window are lost to
//     every other node (stranded), and a node can deny while another holds
//     unspent credits. It needs a fixed window (Rate.Algo FixedWindow or
//     empty).
//
// # Leases and clocks
//
// The server decides when a window ends; a node only has to stop spending
// before then. Each lease carries the window's end on the server's clock
// (reset_at_ms). With the first lease, and every 10 s after, the Limiter
// sends TIME in the same pipeline, so without an extra round trip: if the
// request left at local time t0 and the reply came back at t1, the server
// read its clock at some local instant in [t0, t1], which bounds the
// offset (server minus local) between S-t1 and S-t0 (S the server's TIME,
// plus its 1 µs resolution). Credits are spent only while
//
//	local now < reset_at - offset_high - margin
//
// where offset_high is the upper bound (the latest the server's clock can
// read at a given local time) and margin is 1 ms, plus 2 ms for the coarse
// clock below, plus 100 ppm of the time since the offset was measured for
// drift. A node whose clock is seconds off the server's therefore spends
// no credit of window W after the server has ended W; the cost is that it
// stops spending up to about a round trip plus the margin early. A lease
// that finds its window empty, or arrives too late to spend, marks the key
// exhausted until the server has surely moved on (reset_at - offset_low +
// margin); the AllowN calls meanwhile are denied locally with that
// retry-after.
//
// Reading the clock costs 70-350 ns on some virtual machines whose clock
// source has no vDSO fast path (BenchmarkClockRead), more than everything
// else on the local path. The Limiter therefore reads time on that path
// from an atomic copy refreshed every millisecond by a goroutine; the copy lags the clock by up to a tick plus
// scheduling delay, which the margin covers. A goroutine stalled longer
// than the margin (a starved process, a long stop-the-world pause) can let
// a node spend credits up to that stall after the window's end; the units
// the server granted per window stay within the limit regardless. All
// time is the wall clock read once at start and advanced by the monotonic
// clock, so a step of the wall clock does not move it. A Clock in
// LimiterOptions replaces all of this (tests move time with it, Wait's
// sleeps included).
//
// # Lease sizing
//
// A larger batch means fewer round trips and more credits stranded when a
// window ends: the economic-order-quantity trade, whose optimum is near
// sqrt(2*c*D) for demand D per window and a round trip worth c credits.
// Demand is unknown and drifts, so AdaptiveSizer (the default) learns each
// key's batch online with AdaGrad on the logarithm of the batch from what
// every finished window reports (leases, stranded credits), within
// [1, limit]. FixedSizer(n) leases n every time. The batch is a matter of
// cost only: safety never depends on the learner, since the server grants
// at most what the window has left.
//
// Concurrent misses on one key coalesce into a single lease (a node never
// has more than one batch in flight per key); the others wait for it,
// bounded by their context. With LowWater set, a key whose credits fall to
// it starts the next lease in the background. With ReturnIdleAfter set,
// credits of keys unused that long are given back with THROTTLE.RETURN
// (they count only while their window is open). Local keys are bounded by
// MaxKeys, evicted by CLOCK (second chance), and an evicted key's credits
// are given back too. Close gives back every key's credits.
//
// # The local tier's layout
//
// Keys live in shards of a map under a mutex each, with a CLOCK ring per
// shard for eviction; that is where leases, evictions and returns happen.
// The local paths (a leased key with credits, a remembered denial) do not
// take the lock: a lock-free index of two slots per key of MaxKeys points
// at the entries, a key's credits and its window's generation share one
// atomic word spent with a compare-and-swap, and the window itself (its
// end, deadline and the server's remaining count) is an immutable value
// replaced whole by each lease. A key the index has lost to a neighbour
// takes the locked path, which puts it back. One key hammered from every
// core contends on its word; distinct keys share nothing but the index.
//
// The files follow these concerns: rate.go (Rate, Algo), client.go and
// admission.go (the typed commands, their pipelined forms and reply
// decoding), limiter.go (the Limiter's options and API, ModeStrict),
// keys.go (the local key table), cacheddeny.go and leased.go (the two
// local modes), clock.go (time), sizer.go (lease sizing) and errors.go.
//
// # Failures
//
// When the server cannot be asked (a network error, a timeout, an error
// reply), AllowN returns the error together with a decision that follows
// LimiterOptions.FailOpen: Allowed when true, denied otherwise. Callers
// log the error; the httplimit middleware answers 503 when it fails
// closed.
//
// # Costs in numbers
//
// BenchmarkAllowLocalHit (ModeLeased, a key holding credits),
// BenchmarkAllowCachedDeny (a remembered denial) and
// BenchmarkStrictVsRawDo (ModeStrict against a raw go-redis Do of the same
// command, alternating on one pool, with their ratio) measure the ends;
// run them with go test -run '^$' -bench . -benchmem in this module, which
// builds and starts its own server. The local paths allocate nothing, which
// TestLocalPathsAllocateNothing holds with testing.AllocsPerRun; ModeStrict
// costs what go-redis costs for one command plus decoding the reply. On the
// project's 2-core virtual machine, shared and loaded, the local paths took
// 33-35 ns and ModeStrict 1.03-1.09 times a raw Do.
//
// What leasing costs and loses under load depends on the machine's speed,
// so the tests only log it and BenchmarkLeasedWindowCoupling reports it:
// utilisation of full windows (util) and round trips per admitted unit
// (rt/admit) for 1, 2, 4 and 8 nodes hammering one key, or pacing their
// calls to 80% of the limit (-benchtime=5x: one iteration is one window).
// TestLeasedWindowCoupling asserts only what holds at any speed: no window
// admits more than the limit, and no node whose clock the test controls
// admits after the window's end on its clock.
package throttlekit
