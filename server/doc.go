// Package server is the RESP front end of throttlekit-server: a gnet event
// loop that reads Redis protocol commands, runs the THROTTLE.* and
// CL.THROTTLE commands as operations of package limits (the enforcement
// core, which owns the store), and answers the handshake and
// introspection commands that Redis clients send.
//
// # The flow of one command
//
//	bytes on a socket
//	  -> events.OnTraffic (conn.go): read gnet's inbound buffer in place,
//	     read the clock once
//	  -> loop.process (dispatch.go): the codec (package resp) yields one
//	     complete command at a time, checked against the limits
//	  -> loop.dispatch (dispatch.go): CLIENT REPLY, look the name up in
//	     commandTable, authentication and arity (and for a container, the
//	     subcommand and its arity), the ACL check (security.go), MULTI
//	     queueing (cmd_multi.go)
//	  -> loop.call (dispatch.go): the handler parses the arguments, runs
//	     one limits operation (given EXEC's section when one is locked)
//	     and appends the reply to l.out; call counts the command and feeds
//	     MONITOR
//	  -> consecutive THROTTLE.CHECK and CL.THROTTLE of one read defer their
//	     operation and run together (limits.Local.DoBatch), their replies
//	     appended in command order (batch.go)
//	  -> after the batch: one Conn.Write of every reply, counters published
//
// "Now" comes from Config.Clock, by default a monotonic clock anchored to
// the wall clock at start (internal/clock): a wall-clock step forward and
// back cannot hand out a second budget. Only with DEBUG enabled is it
// wrapped in a clock.Manual that DEBUG SET-CLOCK can freeze (cmd_debug.go).
//
// # The command table
//
// commandTable (table.go types, commands.go entries) is the single source
// of truth for commands. An entry holds the name, the arity in Redis's
// convention, flags (write, readonly, fast, no_auth, loading, stale, ...)
// and explicit ACL categories (the flags add the implicit ones, as in Redis:
// write -> @write, fast -> @fast, not fast -> @slow, ...), key positions,
// documentation, the handler, and for a container (CLIENT, COMMAND, CONFIG)
// its subcommands, each an entry of the same shape named "container|sub".
// Dispatch, COMMAND (COUNT, LIST with its FILTERBY, INFO, DOCS, GETKEYS),
// the HELP of every container, ACL categories and the per-command counters
// of Stats all read it, so they cannot disagree.
//
// Command handlers are grouped by family, each in a file named cmd_ and
// the family, which holds the family's entry points: cmd_throttle.go
// (THROTTLE.CHECK, PEEK, RESET, LEASE, RETURN), cmd_cell.go (CL.THROTTLE),
// cmd_mcheck.go (THROTTLE.MCHECK), cmd_reserve.go (RESERVE, SETTLE),
// cmd_ban.go (CHECK ... BAN, BANNED, UNBAN), cmd_slots.go (ACQUIRE,
// RELEASE, REFRESH) and cmd_admission.go (what those four share),
// cmd_keyspace.go (DEL, EXISTS, TYPE, TTL, SCAN, KEYS, FLUSHALL, ...),
// cmd_multi.go and cmd_watch.go (MULTI, EXEC, DISCARD, WATCH, UNWATCH),
// cmd_handshake.go (PING, ECHO, HELLO, AUTH, SELECT, RESET, QUIT),
// cmd_acl.go (ACL), cmd_client.go (CLIENT), cmd_monitor.go (MONITOR),
// cmd_introspect.go (COMMAND, HELP), cmd_info.go (INFO, CONFIG, DBSIZE,
// TIME), cmd_debug.go (DEBUG SET-CLOCK and ADVANCE-CLOCK, refused
// unless Config.EnableDebugCommand allows them) and cmd_policy.go
// (THROTTLE.CHECK, PEEK and LEASE with POLICY domain/name, resolved through
// Config.Policies, THROTTLE.POLICIES, and INFO's grpc section).
//
// The rest: dispatch.go is the path from bytes to handler (process,
// dispatch, call); batch.go the checks of a pipeline resolved together;
// table.go the command table's types, commands.go its
// entries; security.go the per-command permission check, auth.go
// authentication, protected mode and the failed-AUTH limit; durability.go
// holds replies until the state they report is durable when persistence
// runs in sync mode, and park.go holds, in the same buffers, the replies
// of operations a backend over an upstream (Config.Upstream) completes
// later (park_admission.go those of the admission commands); server.go has the Server's life cycle (shutdown.go
// its end), events.go gnet's callbacks (on an unexported type, so they
// are not part of Server's API), conn.go what they do with a connection,
// client.go the connection's state, loop.go an event loop's state,
// stats.go the counters, tls.go and tlsconn.go the TLS listener. A handler
// has the signature of handler: it may assume dispatch checked the arity,
// it checks its arguments with the helpers of args.go (which reply with
// the error themselves) and reports whether the connection must close.
//
// # Adding a command
//
//  1. Add a cmdID constant in table.go (top-level commands only).
//  2. Add its entry in commandSpecs (commands.go), or a subcommand entry in
//     its container's list: name, arity, flags, categories, key positions,
//     docs and the handler; for a subcommand, the HELP lines too.
//  3. Write the handler in the cmd_ file of its family: parse the
//     arguments, run the limits operation (a new operation is one function
//     in package limits and its test), append the reply.
//  4. Add its replies to a script in testdata/commands/ (see
//     datadriven_test.go); where Redis defines the reply, add the case to
//     redis_compat_test.go, which compares with a real redis-server.
//
// # Errors
//
// The engine returns semantic errors with stable codes (engine.ErrWrongType,
// engine.ErrZeroRate, ...) and no protocol text. errors.go holds the one
// table from those codes to wire text, worded once for THROTTLE.* ("ERR
// ...", "WRONGTYPE ...") and once for CL.THROTTLE ("Cell error: Store error:
// ...", as redis-cell words them); package limits' own errors
// (limits.ErrRecordsFull, limits.ErrKeyTooLong) are worded by limitsError
// (cmd_admission.go). Every error reply is counted by its first word in
// Stats.Errors.
//
// # The hot path
//
// Once a key exists a command allocates nothing: a name is compared with
// the connection's previous command first (in upper case as sent, in two
// word comparisons; any other spelling folded), then looked up as sent
// (all upper or all lower case), and only then lower-cased into a stack
// buffer; each loop owns the limits operation values (a limits.Op that
// THROTTLE.CHECK fills with the parsed engine.Limit and hands to
// limits.Local.Do, and one value per admission operation), and replies
// are appended to the loop's buffer. A loop remembers the last limit
// arguments THROTTLE.CHECK and PEEK parsed and what they gave (limitCache),
// so a client that repeats them skips the parsing; the default user, who
// may run every command on every key, costs the ACL one flag test
// (acl.User.Unrestricted).
// BenchmarkDispatch measures it and TestDispatchZeroAlloc guards it. The
// introspection commands allocate freely; they are not on the hot path.
//
// # Counters
//
// Each loop counts commands, decisions, errors, bytes and latency in plain
// integers and adds them to its atomic counters once per batch; Stats folds
// the loops together. The latency of a command is the time from the start of
// its batch to the moment the batch's replies are ready to write (a second
// clock read per batch, not per command).
//
// Per-command counters (INFO commandstats: calls, rejected and failed calls,
// subcommands as "client|list") go through loop.call: plain per-loop counters
// with a dirty bit per command, folded into the published atomics once per
// batch, visiting only the commands the batch touched. A clock read costs
// more than most commands, so commands are not timed one by one: each gets
// an equal share of its batch's time, exact for a batch of one command and
// an average for a pipeline. CONFIG RESETSTAT sets a baseline that INFO
// subtracts; Stats stays cumulative for the metrics.
//
// The slow log and the latency monitor (cmd_slowlog.go, cmd_latency.go)
// need a command's own duration, and get it without a clock read on the hot
// path: a batch of one command is timed by the clock read that ends the
// batch, taken right after the command while its arguments are at hand
// (exact); a command without the fast flag is timed on its own (two clock
// reads); fast commands inside a pipeline are timed one by one only for
// the batches that follow a pipeline slower than the threshold, so a
// single slow fast command inside a pipeline that is not repeated goes
// unlogged. Per-command latency histograms (LATENCY HISTOGRAM, INFO
// latencystats) count each call at its share of its batch's time, next to
// the commandstats counters. GCRA (cmd_gcra.go) is Redis's rate-limit
// command; MEMORY and OBJECT (cmd_memory.go) answer for this store.
//
// MONITOR costs one atomic pointer load per command while no monitor is
// attached. Monitors receive their lines through gnet's AsyncWrite, so a loop
// never blocks on one, and a monitor whose queued output passes the output
// buffer limit is closed.
//
// # Scaling with cores
//
// Config.Loops event loops (gnet, one goroutine each) serve the TCP
// connections; gnet's acceptor hands each new connection to a loop in
// turn and the connection stays there. What each command touches is split
// into what a loop owns and what the loops share:
//
//   - Owned by a loop: its connections, parser, reply buffer, operation
//     values, deferred checks (batch.go) and counters. Counters are
//     published with atomic adds once per read batch, into the loop's own
//     published block, so counting does not bounce cache lines between
//     cores; the slow log and latency monitor are shared but touched only
//     by a command past a threshold, MONITOR by one atomic load per command.
//   - Shared: the store (package shard). Its shards each have a mutex; a
//     check locks the shard of its key, a batch of checks the distinct
//     shards of its keys in ascending order for the batch's run. Two loops
//     wait for each other only when they hold the same shard at once: with
//     ShardsPerProc shards per CPU and uniform keys that is rare, and a
//     longer batch (maxCheckBatch bounds it) holds more shards for longer.
//     A key checked by every loop (a hot key) is one cache line moving
//     between cores whatever the lock (shard's BenchmarkApply, rt-ns).
//   - Shared without a lock: the memory system. At millions of keys a
//     check is two dependent cache misses (table slot, node) and little
//     else; cores add throughput as long as the memory system can keep
//     more misses in flight, which batching also draws on (shard.Batch).
//   - The kernel: each loop reads and writes its own sockets: one read(2)
//     and one write(2) per batch of a connection, whatever the number of
//     commands in it (TestSyscallsPerBatch counts them in a server
//     process), plus the loop's epoll_wait, which a busy loop shares among
//     the connections that are ready together. That is the least a
//     readiness-based server can do, and what redis-server does. The
//     loops use level-triggered epoll: in gnet's edge-triggered mode each
//     event would cost a second read, the one that finds the socket empty.
//     Loopback clients on the same machine spend CPU in the same kernel
//     paths, so a load generator on the server's cores competes with the
//     loops it measures.
//   - The Go runtime: a loop blocks in epoll_wait as a system call, and
//     when it stays there the runtime's monitor thread may hand its P to
//     another thread; at low load (a pipeline of one, the loop often
//     idle) that adds context switches per request that redis-server does
//     not pay.
//     Locking the loop to its thread adds futex calls instead, and so do
//     more Ps than busy loops (gnet yields the P after an empty poll,
//     which wakes a thread for an idle P): the server locks no thread and
//     leaves GOMAXPROCS to the runtime (one P per CPU it may run on, and
//     by default as many loops). The figures are in bench/README.md ("The
//     network path").
//
// A single connection is served by one loop, so it gets at most one
// core; spreading load needs at least as many busy connections as loops.
// The figures for 1 and 2 loops on the 2-core test machine are in
// bench/README.md.
//
// # Connections
//
// MaxClients bounds open connections (the extra ones get "-ERR max number
// of clients reached" and are closed). A client whose queued replies exceed
// OutputBufferLimit is closed. With IdleTimeout set, a ticker asks every loop
// to close its connections idle for longer. Shutdown stops accepting,
// answers the commands already read, waits (up to its context's deadline)
// until each connection's queued replies are handed to the kernel, then
// closes it, so a client reads every reply whole and then EOF.
//
// A TLS listener (tls.go) serves the same command table and store over
// crypto/tls, with a goroutine and a loop of its own per connection; the
// limits, the counters and Shutdown apply to it alike.
package server
