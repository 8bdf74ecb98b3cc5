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
//   - ModeLeased: a check of a fixed window takes units from credits the
//     server leased from the key's current upstream window (THROTTLE.LEASE,
//     Config.Batch units per call, or the check's cost if larger) and
//     answers locally until they run out. Credits are window-coupled: they
//     are spent only before the window's end the upstream reported, so all
//     servers together admit at most the limit per window. The end is read
//     on the server's clock: a server whose clock is behind the upstream's
//     by d may spend its remaining credits up to d into the next window,
//     so keep the clocks synchronized (NTP). One lease is in flight per key
//     per server; checks that find no credits meanwhile wait for it, in
//     order. A short grant means the window is spent: the server then
//     denies locally until the window ends. Credits unused for
//     Config.IdleReturn go back to their window (ReturnIdle, THROTTLE.RETURN);
//     credits of a window that ended are stranded (counted). Other
//     algorithms (sliding, GCRA, token) and other operations of a leased
//     key run strict.
//
// Concurrency slots, reservations, bans and Redis's GCRA command have no
// upstream scripts yet: those operations return limits.ErrUnsupported. The keyspace calls (Get,
// Scan, Len, ...) read the local store, which holds what fail-open answers
// wrote.
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
//   - A server that dies strands the credits it held: up to B per key (a
//     grant, less what it spent). The window admits fewer, never more.
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
// A strict operation costs one round trip and, on the server, a copy of
// the operation value and its key, a closure and a channel send; a cached
// denial or a leased credit costs a map lookup under a mutex and no
// round trip. Stats and InfoFields report round trips, leases, returned
// and stranded credits, the local hit ratio, a latency histogram and
// errors by kind.
package tier
