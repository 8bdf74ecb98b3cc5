// Package limits is the enforcement core of throttlekit-server: every
// operation the server offers, as typed Go calls with typed results and
// semantic errors, below any transport. The RESP front (package server)
// parses a command, runs one of these operations and writes the reply;
// a gRPC front would map a descriptor to the same operation and its
// result to a response. Nothing here knows RESP, gnet or gRPC; the package
// imports only engine (the arithmetic) and shard (the store).
//
// # Operations
//
//   - Single-key operations are an Op run by Local.Do: OpCheck
//     (THROTTLE.CHECK), OpLease and OpReturn (THROTTLE.LEASE, RETURN),
//     OpCell (CL.THROTTLE). Local.Peek (THROTTLE.PEEK) and Local.Reset
//     (THROTTLE.RESET, DEL) read or drop a key. Local.DoBatch runs a
//     slice of Ops as Do would one after the other, resolving all their
//     keys first (shard.Batch), for a front that has read a pipeline.
//   - Admission beyond one limit: MCheck (all-or-nothing over several
//     limits, THROTTLE.MCHECK), Reserve and Settle (charge an estimate now,
//     settle the actual cost later), CheckBan, Banned and Unban (the
//     penalty box), Acquire, Release and Refresh (concurrency slots).
//   - Several operations as one unit: a Batch (a transaction's single-key
//     operations and MChecks) run by Exec, each item with its own results
//     and error.
//   - The keyspace calls a front needs besides: Get, Lookup, Scan,
//     FlushAll, Len, and the statistics of both stores.
//
// Each operation is described by a value the caller owns (Op, MCheck,
// Reserve, Settle, Acquire, SlotCall, CheckBan, BanCall): its inputs, and once the call
// returns, its results. A front keeps one of each per event loop and
// reuses it, so once a key exists an operation allocates nothing
// (TestZeroAlloc). Errors are values with stable codes: engine errors
// (*engine.Error) pass through unchanged, and this package adds
// ErrRecordsFull and ErrKeyTooLong (*Error); a front words each code for
// its wire. The caller passes "now" (ns since the epoch) to every call:
// the core never reads a clock, so a front reads it once per batch and
// tests inject any instant.
//
// # Sections
//
// A call runs either on its own, locking the keys it needs and unlocking
// them before it returns, or inside a Section the caller already holds: a
// shard.Txn over the user store (Local.Begin binds it) whose shards are
// locked, as EXEC holds one for every key its queued commands declare.
// Given a Section, a call locks no user key itself, so it neither takes a
// lock out of order nor waits for one its own caller holds, and the
// commands of a transaction run isolated together. A call inside a
// Section on a key the section does not hold is a front's bug: it is
// reported to Config.Misroute and acts on an absent key.
//
// # Where an upstream plugs in
//
// Local is the local backend: it completes every operation before it
// returns, under the key's shard lock. The scale-out servers (issue 19)
// serve the same operations from a budget held in an upstream Redis
// Cluster, where a call may need a network round trip that an event loop
// must never wait for. The seam is Backend and the operation values:
//
//   - The fronts hold a Backend, the interface of every call, and build
//     every reply from an operation value's result fields and the error
//     the call returned; they never read the store or the engine
//     themselves. Local is the one implementation today, chosen in
//     server.New. An upstream backend implements the same interface with
//     the same value types (Do(*Op), MCheck(*MCheck), Reserve(*Reserve),
//     ...), so the fronts' parsing, their calls and their reply writing
//     stay as they are.
//   - An upstream backend completes a value at once when it can (leased
//     mode answering from credits held locally: the same code as Local,
//     on a Local of its own that holds the leases; cached-deny answering a
//     denial it remembers). When it cannot, it reports the value
//     pending with ErrPending (in Op.Err for Do, the returned error for
//     MCheck, Reserve, Settle, CheckBan, Acquire, Slot and Ban) and
//     completes it later from its own goroutine, calling the value's Done
//     with the completed value: a copy of its own, since it never writes
//     the caller's value after the call returned (the caller reads Err
//     right then). A front hands it a value of its own, not the loop's
//     reused one, with key bytes that outlive the call. Every pending
//     value carries Done, Err and Lane (the order of one connection's
//     operations); the admission calls that Local answers with plain
//     results (Release, Refresh, Banned, Unban) are SlotCall and BanCall
//     values in Backend (Local.Slot and Local.Ban wrap them). Package
//     upstream/tier is that backend: it runs every operation strict,
//     including the admission records (slots, bans, reservations), one
//     script each.
//   - What a front adds for that is parking, once, not per command: the
//     RESP front already holds replies that must wait for durability in
//     sync persistence mode (server/durability.go) and writes them in
//     order per connection when the loop is woken; a pending operation
//     takes the same path, its reply written from its value when the
//     backend completes it.
//   - An Op may carry a mode hint (Op.Mode: strict, cached-deny or
//     leased; ModeDefault leaves the choice to the backend). The fronts
//     set it from a policy's per-descriptor mode (RLS, THROTTLE.CHECK with
//     POLICY); an upstream backend serves the counter in that mode before
//     consulting its own prefix table, and Local, having no upstream,
//     ignores it.
//   - A Section is a local notion: an upstream backend runs the keys of a
//     transaction or an MCheck as one script (the keys share a hash slot)
//     instead of a lock set, and ignores the Section's locks. A
//     transaction reaches the backend as one Batch (Exec): Local runs the
//     items one by one inside the caller's Section; an upstream backend
//     sends them as one script and leaves the Batch pending as it leaves
//     an MCheck, so the transaction takes effect on the upstream as a
//     whole or, if the upstream cannot be reached, not at all. Only the
//     operations such a script runs are items (single-key operations and
//     MChecks); a front refuses a transaction holding another kind before
//     running any of it (package server: EXECABORT).
//
// # Internal records
//
// Reservations, bans and slots are records the user never names: they live
// in a second shard.Store owned by the Local, created on first use, so
// Scan, Len, Reset and FlushAll of the user keyspace neither show nor
// touch them, and no user key can collide with one. A record's key is a
// one-byte tag, the user key and a fixed-length binary suffix, so two
// records of different user keys never share a key:
//
//	'r' key seq(8) algo(1) limit(8) period(8)   reservation: A = estimate, B = time charged
//	'b' key                                     penalty box: engine.KindBanCount / KindBanned
//	'h' key                                     slot header: A = slots spanned, B = latest expiry
//	's' key index(2)                            slot: A = holder's generation, B = refresh count
//
// Each record's expiry is its meaning: an unsettled reservation is settled
// at its estimate when its TTL passes (the estimate was charged at
// Reserve, so expiry just drops the record), a ban ends, a slot whose
// holder vanished is free.
//
// # Bounds
//
// The internal store is bounded by Config.MaxRecords records and
// Config.MaxMemory bytes (the server's settings admission-maxrecords and
// admission-maxmemory), and it never evicts (shard.Config.NoEvict):
// dropping a record early would free a held slot (in_flight above the
// limit), lift a ban, or lose a reservation's refund, each a broken
// promise, so a full store refuses new records instead. Acquire and
// Reserve then return ErrRecordsFull and acquire or charge nothing; a
// denial that would start or raise a ban count is still denied, but is
// not counted toward the ban. Records already held live to their expiry,
// so room comes back as slots are released, reservations settled and
// bans end. One record costs a 47-byte node, about 6 bytes of index and,
// for keys longer than the node's inline 16 bytes, the key in the arena;
// the byte bound counts all of it.
//
// # Locking
//
// Every call that reads and then writes records of a user key holds that
// key's shard lock of the user store (a shard.Txn, or the caller's
// Section) for the whole section, and takes internal-store locks only
// inside it, one at a time: the order is always user store first,
// internal store second, so nothing deadlocks, and two sections on one
// key never interleave. That is what makes a banned key never consume,
// Settle apply exactly once, and in_flight never exceed the limit
// (TestBanNeverConsumes, TestSettleExactlyOnce, TestAcquireConcurrent).
//
// # MCheck
//
// All keys' shards are locked in one ascending pass (shard.Txn); then each
// limit is checked and consumed in turn, one lookup each. At the first
// denial nothing more is consumed: the remaining limits are only
// evaluated, and the states already consumed are put back (with the ttl
// the engine gives the old state, the same instant it expired at). No
// other call sees the section, so to every observer it consumed from all
// limits or from none. The admitted path, the common one, thus costs one
// lookup per limit instead of a peek and a write. One side effect of a
// denial: a limit whose key did not exist is created and removed again,
// and in a full shard that creation may evict another key.
//
// # Costs
//
// Do costs one hash, one lock and one engine call. DoBatch costs the
// same per operation, but one lock per distinct shard of the batch, and
// the cache misses of its keys overlap. MCheck of n limits
// costs 2n hashes, a sort of n shard indexes, at most n shard locks, n
// engine checks and n stores (2n when denied). Acquire reads O(span) slot
// records, span being the limit (or the larger span an earlier call with
// a larger limit left, until its slots expire); limits are bounded by
// MaxSlots = 1024, so one key holds at most 1025 records of 56 bytes plus
// its key bytes each (about 60 KB for a 1024-slot key with a short name).
// Reserve costs one check and one record; Settle one lookup, one delete
// and one store. Each admission call borrows its scratch (a Txn, the
// record key buffer) from a pool, so nothing allocates per call once
// keys and records exist; a reservation's record key (26 bytes past the
// user key) is longer than the store keeps inline, so Reserve and Settle
// use the internal store's key arena, whose growth costs tens of bytes
// per pair amortized.
//
// Expired records are reclaimed as the internal store's timing wheel
// advances on writes to their shard, or by eviction at the bound.
package limits
