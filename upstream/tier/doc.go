// Package tier is the upstream tier of throttlekit-server: a
// limits.Backend whose budgets live in an upstream Redis, Valkey or Redis
// Cluster (package upstream runs the scripts), so that any number of
// servers behind a load balancer enforce one limit. A front holds it as it
// holds limits.Local; where an operation needs the upstream, Do and MCheck
// return limits.ErrPending and complete the operation later from a worker
// goroutine (package limits, "Where an upstream plugs in"), so an event
// loop never waits on the network.
//
// # Workers and order
//
// Config.Workers goroutines call the upstream, each with a queue of its
// own. An operation's Lane (the front gives each connection one) picks the
// worker, so the operations of one connection run on the upstream in the
// order they arrived: a pipeline's checks consume in order, as on one
// server. A full queue is treated as an unavailable upstream (the failure
// policy answers), never as a wait. The caller's value is never written
// after Do returns: a pending operation is completed on the backend's copy,
// handed to Done.
//
// A worker does not send one operation and wait: it takes everything
// queued for it, up to Config.Pipeline operations, and sends the single-key
// operations among them as one pipeline (upstream.Client.Pipe: EVALSHA
// each, in order; on a cluster go-redis splits it by node), then completes
// them and calls their Done in order. Other jobs (a lease renewal, an
// MCheck) run in their turn between pipelines, so a lane's order holds
// across kinds. While a pipeline is out, the lanes' next operations queue
// up, so the batch grows with the load and a lightly loaded server still
// sends each operation at once. Every operation of a pipeline gets its own
// reply, and the failure policy applies to each operation whose call
// failed (a pipeline that cannot reach the upstream fails, or answers from
// the local store, each of its operations, in order). Nothing is resent:
// a call whose reply was lost may have run, and running it again would
// consume twice.
//
// # Modes
//
// A key's mode is Config.Mode or that of the longest Config.Prefixes entry
// it starts with.
//
//   - ModeStrict: every operation is one script on the upstream, at the
//     upstream's clock (TIME inside the script), so decisions are exact
//     and every server agrees whatever its own clock says.
//   - ModeCachedDeny: as strict, but a denied check is remembered until
//     its retry-after and checks of at least the same cost against the same
//     limit are denied locally until then: a flood on a blocked key costs
//     the upstream nothing. Clocks: the retry-after is a duration the
//     upstream computed at the instant it ran the script; the cache adds it
//     to the server's clock read when the call was sent, which is no later
//     than that instant, less the millisecond the retry-after was rounded
//     up by, so a cached denial never outlives the upstream's, whatever
//     offset the two clocks have. Only their rates matter.
//   - ModeLeased: a check takes units from credits the server leased from
//     the upstream (Config.Batch units per call, or the check's cost if
//     larger) and is answered locally until they run out. One lease is in
//     flight per key per server; checks that find no credits meanwhile
//     wait for it, in order (a fixed or sliding window's lease is renewed
//     before its credits run out: Prefetch, below). Credits unused for Config.IdleReturn go back
//     (ReturnIdle). A check of a cost the limit can never admit, and every
//     other operation of a leased key, runs strict. How credits are bound
//     to the upstream depends on the algorithm (Leases, below).
//
// Inside a transaction (Exec: a limits.Batch, one script on the
// upstream) every operation runs strict, whatever its key's mode; the
// admission operations and GCRA run in that script too, so they take
// effect with the rest of the transaction or, the upstream unreachable,
// not at all.
//
// Concurrency slots (Acquire, Slot), reservations (Reserve, Settle) and
// the penalty box (CheckBan, Ban) run strict in every mode, one script
// each, on the upstream's clock, their records on the user key's hash
// slot (admission.go; package upstream documents the records). They are
// pending as Do's operations are, on the caller's lane. Redis's GCRA
// command runs strict in every mode (upstream's gcra.lua).
// The keyspace calls (Get, Scan, Len, ...) read the local store, which
// holds what fail-open answers wrote.
//
// # Leases
//
// Fixed window (THROTTLE.LEASE, lease.lua): credits are units of the
// key's current upstream window, spent only before the window's end the
// upstream reported, so all servers together admit at most the limit
// per window. A short grant means the window is spent: the server then
// denies locally until the window ends. Idle credits go back to their
// window (THROTTLE.RETURN); credits of a window that ended are
// stranded (counted).
//
// Sliding window (lease_algo.lua): a lease charges its units to the
// current count of the window the engine counts in, as a check of that
// cost would, and only if they fit the estimate (current count plus
// the previous window's weighted by the share of it still inside the
// sliding period, rounded up); the credits are spent only before that
// window ends. So at every admission the estimate of the units really
// admitted is within the limit, as the in-memory engine keeps it: the
// true current count is at most the upstream's (which counts every
// granted unit), the true previous count at most the upstream's, and
// the previous window's weight only shrinks after the last grant,
// which fitted (TestLeasedSlidingCoupled checks the estimate at every
// admission of three servers). Idle credits are subtracted from their
// window's count while it is the current one; after it, stranded.
//
// GCRA and token bucket (lease_algo.lua, uncoupled): a lease charges
// min(batch, remaining) units at once, as a check of that cost would, and
// the credits do not expire. After a renewal a server holds at most B-1
// credits (B = max(batch, the largest cost): the check that triggered the
// lease spends at once), all charged before they are spent, so over any
// interval N servers admit at most what the engine admits over it (the
// burst plus the interval over the emission interval for GCRA, the burst
// plus the interval times the rate for the token bucket) plus N x (B-1).
// TestLeasedRateBound checks every interval of three servers under mixed
// load; TestLeasedRateExcess reaches the excess (every server holding the
// rest of a lease while the upstream refills, then all spending beside a
// full burst).
//
// The idle return limits that excess in time: units a server holds unspent
// for IdleReturn are un-charged (return_algo.lua), so a server that goes
// quiet gives its credits back instead of spending them in a later burst
// (TestLeasedRateExcess again: with the return, the burst alone). A
// return names its lease's ResetAt (the instant the budget would be full
// after the grant) and takes back at most the units of the last grant, at
// most those the budget regains between now and that instant less a
// millisecond, and at most what the key holds charged. Whatever other
// servers charged meanwhile, the unused units still weigh on the key at
// least as much as the budget regains before that instant (the proof is
// in return_algo.lua), so the return gives back no more than they still
// weigh; after that instant, nothing. The credits leave the lease before the
// call, so no unit is returned twice (TestLeasedReturnSafe); older
// leftovers and units the upstream did not take back are stranded
// (counted).
//
// A short grant makes the server deny locally until one more unit fits
// (the lease's RetryAfter, less its rounding); without one, the waiting
// checks run strict. The batch learner (Config.Sizer) sees one period of
// the limit at a time, the credits held at its end in the place of
// stranded ones (TestLeasedRateAutoBatch).
//
// # Prefetch
//
// A fixed or sliding window's lease is renewed before its credits run out:
// the check that leaves at most the low-water mark (a quarter of the last
// batch, at least 1) starts the next lease, while later checks spend what
// is left; a check waits only when the credits cannot pay for it
// (TestLeasedPrefetchSteady: a steady load on one key waits once, for the
// first lease, and once per window after). It is still one lease in flight
// per key. No prefetch is sent once the window is known to be spent (the
// last grant was short; TestLeasedPrefetchOverload), nor when the time
// left to the window's end is no more than the time since the last grant:
// the lease would take credits from the upstream's current window, the
// ending one, and at the pace the last batch was spent strand those it
// cannot spend before the end; the check that finds none waits instead and
// leases from the next window (TestLeasedPrefetchWindowEnd). The bound is
// unchanged: window credits count in their window whatever is prefetched.
// GCRA and token bucket leases do not prefetch, so their bound above holds
// as stated (TestLeasedPrefetchUncoupled). Local declines the check that
// reaches the mark and Do answers it and starts the lease, so Local still
// never allocates. Stats.Prefetches and Stats.LeaseWaits count both.
//
// A check answered from credits reports the limit as the engine does
// (the burst of GCRA and token), Remaining as the key's remaining
// upstream after the last grant plus the credits this server holds,
// and the last grant's ResetAt, where every leased unit counts as
// charged: for GCRA, token and sliding keys those two fields describe
// the upstream, not what a strict check would answer.
//
// Every end and retry-after is read on the server's clock: a server
// whose clock is behind the upstream's by d may spend window credits
// up to d into the next window, so keep the clocks synchronized (NTP).
//
// # Failures
//
// An upstream that does not answer (refused, timed out, CLUSTERDOWN, ...)
// fails the operation with limits.ErrUnavailable, or with Config.FailOpen
// answers it from the local store (counted in Stats.FailOpen). Credits
// already leased keep serving until their window ends. go-redis redials on
// the next call, and on a cluster a call that got no answer reloads the
// slot map (package upstream), so service returns with the upstream, or
// with the replica promoted in place of a dead master, without restarting
// the server. What a failure can cost a fixed window of limit L, with N
// servers leasing batches of B:
//
//   - A server that dies strands the credits it held: up to one grant per
//     key (B, or the check's cost when larger), less what it spent. The
//     window admits fewer, never more.
//   - A master that dies: Redis replicates asynchronously, so the writes
//     it acknowledged and had not yet sent to its replica are lost when
//     the replica takes over, and the window goes on from the replica's
//     count. Strict (and cached-deny): a window admits at most L plus the
//     admissions the old master acknowledged in it and lost, which are
//     those acknowledged within the replication lag before the crash
//     (everything since the link broke, if it broke first). Leased: the
//     lost writes are grants, so the window admits at most L plus the
//     credits the old master granted in it and lost; the servers spent
//     some of them and hold the rest, at most B each per key. Only a
//     window that outlives the failover (the node timeout and an election)
//     can be hurt: a shorter one ends before the new master answers. The
//     fault test holds a replica behind on purpose and checks each window
//     against L plus what the old master acknowledged (strict) or granted
//     (leased) in it. WAIT after each write, or min-replicas-to-write on
//     the masters, narrows the loss at a price: WAIT adds a replica round
//     trip to every call and still promotes no particular replica;
//     min-replicas-to-write makes a master that lost its replicas refuse
//     writes (unavailable) instead of admitting what will be lost. The
//     tier uses neither.
//   - The whole upstream down: closed refuses; open lets each server
//     enforce L from its own local state, so a window can admit up to
//     N*L, plus L upstream if the outage ends in it.
//   - An upstream restarted without persistence (no RDB or AOF) forgets
//     the windows in progress: they start again from zero.
//
// # Costs
//
// A strict operation costs a share of one round trip (a pipeline of n
// operations is one round trip per node and n script calls) and, on the
// server, a copy of the operation value and its key, a channel send and
// its share of the pipeline's argument lists; a cached denial or a leased
// credit costs a map lookup under a mutex and no round trip, and through
// Local no allocation either (TestLocalLeased, TestLocalCachedDeny), so a
// front tries Local before it copies an operation for Do. Stats and
// InfoFields report round trips and script calls, leases, returned and
// stranded credits, the local hit ratio, a latency histogram and errors
// by kind.
package tier
