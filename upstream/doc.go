// Package upstream runs throttlekit's limit operations atomically on a Redis
// or Valkey server or a Redis Cluster (the upstream), so that many
// throttlekit-servers share one budget. It holds the Lua scripts (embedded
// from scripts/*.lua) and a small client on go-redis that calls them and
// returns engine.Decision, engine.CellReply and errors with stable codes.
// Its decisions are the engine's, bit for bit, at the same instant.
//
// # The scripts
//
// Each script is the part of scripts/lib.lua its operation uses followed by
// one operation file:
//
//	check.lua   THROTTLE.CHECK (cost 0 peeks) and THROTTLE.PEEK, every algorithm
//	mcheck.lua  THROTTLE.MCHECK: all or nothing over several limits
//	reset.lua   THROTTLE.RESET: delete keys, count those that held live state
//	lease.lua   THROTTLE.LEASE: window-coupled credits of a fixed window
//	return.lua  THROTTLE.RETURN: give leased credits back to their window
//	lease_algo.lua   leased mode's lease of a GCRA, token or sliding limit
//	return_algo.lua  the un-charge of its unused units (Client.ReturnLimit)
//	cell.lua    CL.THROTTLE (redis-cell 0.5.0)
//	slots.lua   THROTTLE.ACQUIRE, RELEASE, REFRESH: concurrency slots
//	ban.lua     THROTTLE.CHECK ... BAN, THROTTLE.BANNED, THROTTLE.UNBAN
//	banned.lua  THROTTLE.BANNED and UNBAN without the check (what Client sends)
//	reserve.lua THROTTLE.RESERVE and SETTLE (engine.Limit.Charge and Refund)
//	gcra.lua    GCRA (Redis 8's command: engine.RateGCRA, microseconds)
//	exec.lua    a transaction: a list of the operations above but the leased
//	            mode's two, run in order at one instant, each with its own
//	            reply or error; the admission operations and GCRA are in
//	            exec_admission.lua, which a second exec script includes,
//	            sent only for a transaction that holds one of them
//
// The bodies of mcheck.lua, slots.lua, ban.lua, banned.lua, reserve.lua
// and gcra.lua are lib.lua functions (mcheckKeys, slots, banCheck and
// banQuery, reservation, rateGCRA) that their file calls with its KEYS and
// ARGV and exec.lua calls with an item's, so an operation answers the same
// alone and inside a transaction; each single script still carries only the
// functions it calls (TestAssembleKeepsWhatIsUsed).
//
// The scripts are assembled when a Client is made: lib.lua is cut into its
// top-level statements (each function or local in column 0, with the
// comment lines above it), and a script takes the definitions whose names
// its operation file mentions outside comment lines, then those their
// bodies mention, and so on, in lib.lua's order, plus every statement that
// defines nothing. A name that appears only as a table key or a local
// counts too, so a block is at worst kept without need, never left out
// when needed. check.lua and mcheck.lua choose the algorithm at run time
// and so keep all four and most of the library; cell.lua, gcra.lua,
// lease.lua and return.lua keep under two thirds of its definitions,
// reset.lua under a
// fifth (TestAssembleKeepsWhatIsUsed).
//
// lib.lua is a line-by-line translation of engine/ (NewLimit, Check and its
// peek, gcra, token, fixed, sliding, Lease, Return, NewCell, Throttle) and
// of shard.Store's Apply and Delete, and mcheck.lua translates
// server/mcheck.go, so a script leaves a key exactly as the in-memory server
// leaves it: a state that does not change is not written, a ttl <= 0 or the
// zero state deletes the key, anything else is stored until now+ttl, and a
// failed MCHECK puts back the states it consumed the way the server does.
//
// A key holds one string, "kind A B exp": the engine.State in decimal and
// the instant (ns since the epoch) it expires at. A read counts the state
// only while exp > now, whatever Redis's own expiry did, and Redis expires
// the key at exp rounded up to the millisecond (SET ... PXAT), so an idle
// key costs nothing. A key whose state is of another algorithm, or which
// holds anything else (a list, a foreign string), answers WRONGTYPE, as the
// engine's ErrWrongType. Arguments are checked by the scripts as the engine
// checks them (engine errors come back as "TKERR <code> <text>" and become
// the engine's error values), and an argument that is no decimal int64 gets
// "ERR <name> is not an integer or out of range": a bad call gets an error
// reply, never a partial write.
//
// # Exactness
//
// Lua 5.1 (Redis 7, Valkey) has only doubles, exact below 2^53, while the
// engine works on int64 nanoseconds: now is about 2^60.6 and a limit's
// products reach 2^62. The scripts therefore never compute on a time as a
// double. Every int64 is a pair of doubles, a signed high and an unsigned
// low 32-bit word; additions and subtractions wrap at 64 bits exactly as
// Go's do, products are 128-bit on 16-bit limbs (Go's bits.Mul64), and
// divisions (bits.Div64, Go's truncating / and %) take a double estimate that
// never overshoots and correct it with exact products. The few float64
// steps of CL.THROTTLE (the emission interval, the remaining count) are the
// same IEEE operations in both languages. So there is no bound of the
// scripts' own: every input the engine accepts is computed exactly,
// including instants near MaxInt64 (where window ends wrap, as in Go) and
// before the epoch; inputs the engine rejects are rejected with its error.
// TestDifferential proves it: random sequences of every operation, starting
// at instants from before the epoch to MaxInt64 and with limits, costs and
// quantities at the edges NewLimit and NewCell accept, agree with the engine
// reply for reply, error for error and stored value for stored value.
//
// # Admission records
//
// Concurrency slots, bans and reservations run strict, each command one
// script, and decide as limits.Local does at the same instant
// (TestAdmissionDifferential compares them field for field). Their
// records live in keys of their own on the user key's hash slot (see
// records.go: "{T}s:<key>" a hash of held slots, "{T}b:<key>" the ban
// record, "{T}r:<id>:<key>" one reservation, T a three-character tag that
// hashes to the user key's slot), so each script's keys share one slot
// and a cluster runs it on one master. Each record's expiry is its
// meaning, as in Local: Redis expires it (PXAT) when it lapses. The
// upstream never refuses a record for room: limits.ErrRecordsFull does
// not occur there (a full Redis answers OOM, which is CodeScript: Redis's
// maxmemory and eviction policy are the bound, and a policy that evicts
// keys can drop a held slot or a ban, so a shared upstream should not
// evict). Tokens and ids differ from Local's numbers: a slot's generation
// is max(now, previous+1) on its key, kept in the slot hash, which lives
// past it, so no token is reused; a reservation's sequence number is drawn
// at random by the client, so servers need no shared counter. Costs:
// ACQUIRE reads its key's slot hash whole (HGETALL: the held slots, at
// most MaxSlots, plus two fields) and writes one slot; RELEASE and
// REFRESH read and write one field; a ban check, RESERVE and SETTLE a GET
// of the key and of one record and at most a SET or DEL of each; each is
// one round trip (BenchmarkAdmission measures them beside a check).
//
// # Clock
//
// A script reads now from the upstream's TIME (microseconds, times 1000), so
// every throttlekit-server sharing a key agrees on one clock whatever its
// own says, and a request's decision does not depend on which server took
// it. Redis 7 replicates a script's effects (the SET or DEL), not the
// script, so replicas hold what the master decided. After a failover the
// new master's clock takes over; a clock that differs goes forward or back
// as the engine's "clock jumps" section describes. Tests give each call its
// instant instead (Client.At): at an injected instant the scripts set no
// Redis expiry, since Redis would apply it by its own clock, and the stored
// exp alone decides.
//
// # Cluster routing and hash tags
//
// Every key a script touches is passed in KEYS, so a Redis Cluster routes the
// call to the master that owns the key's slot, and go-redis's cluster
// client follows MOVED and ASK redirections to it. A call over several keys (MCheck, Reset) runs as one
// script, which Redis Cluster allows only when all keys hash to one slot.
// The client checks this itself (Slot computes the slot: CRC16 of the key,
// or of its hash tag, modulo 16384) and refuses other calls with
// CodeCrossSlot before sending anything, so there is never a partial
// effect. Keys meant to be checked together share a hash tag: the part
// between the first '{' and the next '}', as in "{tenant42}:api" and
// "{tenant42}:upload", which land on one slot, while different tenants
// spread over the cluster. A single server (redis:// URL) has no slots and
// takes any keys together.
//
// A master that dies sends no MOVED: until go-redis reloads its slot map
// (on its own, when the map is ten seconds old) calls keep going to the
// dead address. A call that gets no answer from a cluster (CodeUnavailable)
// therefore asks for a reload at once (failover.go), so calls reach the
// promoted replica as soon as the cluster names it
// (TestUnavailableReloadsSlots).
//
// # Costs
//
// Client.Pipe sends many single-key calls as one go-redis pipeline: one
// round trip per node for all of them, in order per node, so calls of one
// key keep their order; the calls that get NOSCRIPT are sent again with
// EVAL, in their order, in a second pipeline. The one way that order can
// break is a node whose script cache is emptied and filled again (by
// another client's EVAL) between two calls of one pipeline on one key:
// the first gets NOSCRIPT and is resent after the second ran. Client.Exec
// sends a transaction as one exec.lua call, admission calls (CallAcquire
// ... CallSettle) and GCRA included: their records share the user key's
// hash slot, so on a cluster a transaction over one hash tag stays on one
// slot. A reservation drawn inside a transaction whose id is in use on the
// key (about one chance in 2^63) fails that item, where Reserve draws again.
//
// A call is one round trip: EVALSHA of the script, or on a NOSCRIPT reply
// (a restarted server, a new node, SCRIPT FLUSH) EVALSHA then EVAL, which
// also caches the script on that node; Client.Load sends every script ahead
// with SCRIPT LOAD. On the upstream a call costs one GET and at most one SET
// or DEL per key (a state that does not change, as on most denials, writes
// nothing and replicates nothing), plus the script's interpretation:
// creating the functions the script holds (every EVALSHA runs the whole
// script, and Lua creates each function anew, which is why a script holds
// only the library blocks its operation uses) and some tens of 64-bit
// operations, each a handful of double operations, a division a few rounds
// of a 128-bit product. The interpretation dominates the upstream's share
// of a call, and a cluster adds cores slot by slot. BenchmarkStrict
// measures a call through Client beside redis-benchmark sending the same
// EVALSHA straight to the server, in the same run; BenchmarkScriptCost
// measures the server's time per call of the assembled scripts against the
// whole library followed by the operation; bench/README.md has the figures.
package upstream
