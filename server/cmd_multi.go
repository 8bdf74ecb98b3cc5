package server

// Transactions: MULTI, EXEC, DISCARD, WATCH and UNWATCH, with Redis 7's
// replies and wording.
//
// Between MULTI and EXEC a command is checked as dispatch checks any
// command (name, authentication, arity, subcommand) and, if it passes,
// copied into the client's queue and answered +QUEUED; if it fails, the
// error is the reply and EXEC will answer EXECABORT. MULTI, EXEC, DISCARD,
// WATCH, QUIT and RESET are never queued. The queue is one byte buffer per
// client holding every argument back to back, reused from one transaction
// to the next; it is bounded by Config.MaxArgs arguments and
// Config.QueryBufferLimit bytes, and a command that would pass either bound
// is refused and aborts the transaction.
//
// EXEC is atomic across shards. It declares to the loop's shard.Txn every
// key of every queued command (from the command table's key positions) and
// every watched key, locks their shards in one ascending pass, compares the
// watched keys with their snapshots, runs the queued handlers, and unlocks.
// While the Txn is locked the handlers pass it to package limits' calls as
// their Section (loop.sec returns it, and nil outside a transaction, when
// each call locks its own keys), so the single-command path is one branch
// longer and stays allocation-free. The cost of a
// transaction over k keys is a hash per key, a sort of the shard indexes
// and one lock per distinct shard; every key of the locked shards waits
// for it, so a transaction is short by construction (no handler waits).
//
// Only the commands whose handlers reach the store through that section
// run under the Txn (txnMode lists them: the THROTTLE commands, the
// admission commands, CL.THROTTLE and the keyspace commands), and commands
// that do not touch the store run either way. Any other command takes
// store locks of its own (INFO reads the store's statistics shard by
// shard), so inside EXEC the Txn is released before it runs and taken
// again for the next routed command: each such command is atomic on its
// own, but the routed commands before and after it form two atomic
// groups, not one.
//
// Over an upstream (Config.Upstream) there is no Txn to hold: EXEC hands
// the queued commands' operations to the backend as one limits.Batch,
// which runs them as one script on the upstream and answers with one
// parked reply (park.go, "EXEC over an upstream"), the admission
// commands and GCRA included.
//
// WATCH records, per client, each key's state and expiry as the store
// holds them (or its absence). EXEC compares them under the Txn lock and,
// if any differs (a write, a reset, an expiry, FLUSHALL), answers the null
// array and runs nothing. Comparing values rather than versions means a
// change that restores the exact state and expiry goes unnoticed; for rate
// limit state, whose values carry nanosecond times, that does not happen
// in practice. EXEC, DISCARD, UNWATCH and RESET forget the watched keys;
// their number is bounded by Config.MaxArgs.

import (
	"github.com/throttlekit/throttlekit-server/server/acl"

	"github.com/throttlekit/throttlekit-server/shard"
)

// maxKeptQueue is the capacity of a transaction buffer kept after EXEC or
// DISCARD; a larger one is dropped.
const maxKeptQueue = 64 * 1024

// multiState is one client's transaction state, allocated on its first
// MULTI or WATCH and reused afterwards.
type multiState struct {
	multi bool // between MULTI and EXEC/DISCARD
	dirty bool // a command failed to queue: EXEC answers EXECABORT

	buf  []byte  // queued arguments, back to back
	ends []int   // end of each queued argument in buf
	argc []int32 // number of arguments of each queued command

	wbuf    []byte              // watched keys, back to back
	watched []watchedKey        // one per distinct watched key
	index   map[string]struct{} // the watched keys, once there are more than watchScan
}

// txnLoop is a loop's transaction machinery: the Txn EXEC locks, whether
// it is locked (the store calls route through it then), and scratch space.
type txnLoop struct {
	txn    shard.Txn
	locked bool
	argv   [][]byte       // the arguments of the queued command being run
	page   shard.ScanPage // SCAN and KEYS pages
}

// wholeKeyspace reports whether a command reads or changes every key, so
// that EXEC must hold every shard to run it in place.
func wholeKeyspace(id cmdID) bool {
	switch id {
	case cmdScan, cmdKeys, cmdFlushAll, cmdFlushDB, cmdDBSize:
		return true
	}
	return false
}

// How a queued command runs inside EXEC.
const (
	txnReleased = iota // with the Txn unlocked: it takes store locks itself
	txnRouted          // with the Txn locked: its store calls take it as their limits.Section
	txnPure            // either way: it does not touch the store
)

// txnMode says how a queued command runs inside EXEC. A command not listed
// runs with the Txn released, which is always safe: a handler that takes
// store locks itself (INFO reads the store's statistics shard by shard)
// would otherwise wait for the lock its own loop holds. The admission
// commands and THROTTLE.CHECK with BAN run inside EXEC's Txn as their
// section; for the whole-keyspace calls (Scan, FlushAll, Len) EXEC locks
// every shard. All of those are routed.
func txnMode(id cmdID) int {
	switch id {
	case cmdThrottleCheck, cmdThrottlePeek, cmdThrottleReset, cmdThrottleLease, cmdThrottleReturn, cmdCLThrottle,
		cmdThrottleMCheck, cmdThrottleReserve, cmdThrottleSettle, cmdThrottleBanned, cmdThrottleUnban,
		cmdThrottleAcquire, cmdThrottleRelease, cmdThrottleRefresh,
		cmdScan, cmdKeys, cmdFlushAll, cmdFlushDB, cmdDBSize,
		cmdDel, cmdUnlink, cmdExists, cmdType, cmdTTL, cmdPTTL:
		return txnRouted
	case cmdPing, cmdEcho, cmdHello, cmdAuth, cmdSelect, cmdClient, cmdCommand, cmdTime, cmdConfig,
		cmdUnwatch, cmdReset, cmdQuit:
		return txnPure
	}
	return txnReleased
}

// runsInMulti reports whether a command runs at once between MULTI and
// EXEC instead of being queued, as in Redis.
func runsInMulti(id cmdID) bool {
	switch id {
	case cmdMulti, cmdExec, cmdDiscard, cmdWatch, cmdQuit, cmdReset:
		return true
	}
	return false
}

// inMulti reports whether cl is between MULTI and EXEC.
func (cl *client) inMulti() bool { return cl.multi != nil && cl.multi.multi }

// txState returns cl's transaction state, allocating it on first use.
func (cl *client) txState() *multiState {
	if cl.multi == nil {
		cl.multi = &multiState{}
	}
	return cl.multi
}

// flagMulti marks cl's transaction, if one is open, to abort at EXEC:
// dispatch calls it when a command fails its checks while queuing.
func flagMulti(cl *client) {
	if cl.inMulti() {
		cl.multi.dirty = true
	}
}

// refuse answers command id, which dispatch refused before queuing or
// running it (not authenticated, wrong arity), with the error code and
// msg, and aborts cl's open transaction at EXEC. A refused EXEC itself
// discards the transaction and the watches at once, its error worded as
// Redis words it: "EXECABORT Transaction discarded because of: <error>"
// (without the ERR code; other codes, such as NOAUTH, are kept). The error
// is counted by its own code either way.
func (l *loop) refuse(cl *client, id cmdID, code, msg string) {
	flagMulti(cl)
	if id != cmdExec {
		l.errorReply(code, msg)
		return
	}
	l.ctr.errs[errKindOf(code)]++
	if code != "ERR" {
		msg = code + " " + msg
	}
	l.out = appendErrorLine(l.out, "EXECABORT", "Transaction discarded because of: "+msg)
	endMulti(cl)
}

// endMulti forgets cl's queued commands and watched keys.
func endMulti(cl *client) {
	m := cl.multi
	if m == nil {
		return
	}
	m.multi, m.dirty = false, false
	if cap(m.buf) > maxKeptQueue || cap(m.ends) > maxKeptQueue/8 {
		m.buf, m.ends, m.argc = nil, nil, nil
	}
	m.buf, m.ends, m.argc = m.buf[:0], m.ends[:0], m.argc[:0]
	unwatchAll(cl)
}

// queue copies a checked command into cl's transaction and answers QUEUED,
// or refuses it (and aborts the transaction) if the queue is full.
func (l *loop) queue(cl *client, args [][]byte) {
	m := cl.multi
	size := 0
	for _, a := range args {
		size += len(a)
	}
	if len(m.ends)+len(args) > l.srv.cfg.MaxArgs || int64(len(m.buf)+size) > l.srv.cfg.QueryBufferLimit {
		m.dirty = true
		l.errorReply("ERR", "transaction queue is full (max-args or query buffer limit reached)")
		return
	}
	for _, a := range args {
		m.buf = append(m.buf, a...)
		m.ends = append(m.ends, len(m.buf))
	}
	m.argc = append(m.argc, int32(len(args)))
	l.out = append(l.out, "+QUEUED\r\n"...)
}

// MULTI
func (l *loop) multiCmd(cl *client, _ [][]byte, _ int64) result {
	if cl.inMulti() {
		l.errorReply("ERR", "MULTI calls can not be nested")
		return failed
	}
	cl.txState().multi = true
	l.out = appendOK(l.out)
	return replied
}

// DISCARD
func (l *loop) discard(cl *client, _ [][]byte, _ int64) result {
	if !cl.inMulti() {
		l.errorReply("ERR", "DISCARD without MULTI")
		return failed
	}
	endMulti(cl)
	l.out = appendOK(l.out)
	return replied
}

// EXEC
func (l *loop) exec(cl *client, _ [][]byte, now int64) result {
	if !cl.inMulti() {
		l.errorReply("ERR", "EXEC without MULTI")
		return failed
	}
	m := cl.multi
	if m.dirty {
		endMulti(cl)
		l.errorReply("EXECABORT", "Transaction discarded because of previous errors.")
		return failed
	}
	if l.srv.upstream && l.crossSlot(m) { // park.go
		endMulti(cl)
		l.errorReply("CROSSSLOT", "Keys in request don't hash to the same slot")
		return failed
	}
	if l.srv.upstream {
		return l.upstreamExec(cl, m, now) // park.go
	}
	t := &l.tx.txn
	l.srv.core.Begin(t)
	start := 0
	for _, w := range m.watched {
		_ = t.Add(m.wbuf[start:w.end])
		start = w.end
	}
	for i, c := 0, 0; c < len(m.argc); c++ {
		argv := m.command(&l.tx.argv, i, int(m.argc[c]))
		i += int(m.argc[c])
		id, _ := lookup(argv[0])
		if txnMode(id) != txnRouted {
			continue
		}
		if wholeKeyspace(id) {
			_ = t.AddAll()
			continue
		}
		if sp := resolve(argv); sp != nil {
			forKeys(sp, argv, func(k []byte) { _ = t.Add(k) })
		}
	}
	_ = t.Lock()
	l.tx.locked = true
	if !m.watchesHold(l, now) {
		l.tx.locked = false
		t.Unlock()
		endMulti(cl)
		l.out = appendNullArray(l.out, cl.resp3)
		return replied
	}
	l.out = appendArray(l.out, len(m.argc))
	closeAfter := false
	for i, c := 0, 0; c < len(m.argc); c++ {
		argv := m.command(&l.tx.argv, i, int(m.argc[c]))
		i += int(m.argc[c])
		id, _ := lookup(argv[0])
		switch txnMode(id) {
		case txnRouted:
			if !l.tx.locked {
				_ = t.Lock()
				l.tx.locked = true
			}
		case txnReleased:
			if l.tx.locked {
				l.tx.locked = false
				t.Unlock()
			}
		}
		if l.runQueued(cl, argv, now) {
			closeAfter = true
		}
	}
	if l.tx.locked {
		l.tx.locked = false
		t.Unlock()
	}
	endMulti(cl)
	return closeIf(closeAfter)
}

// command returns the queued command whose first argument is the i-th
// queued argument, as n slices of m.buf, in *argv (reused).
func (m *multiState) command(argv *[][]byte, i, n int) [][]byte {
	a := (*argv)[:0]
	for j := i; j < i+n; j++ {
		start := 0
		if j > 0 {
			start = m.ends[j-1]
		}
		a = append(a, m.buf[start:m.ends[j]:m.ends[j]])
	}
	*argv = a
	return a
}

// resolve returns the table entry (the subcommand's for a container) of a
// command dispatch has already checked, or nil.
func resolve(args [][]byte) *cmdSpec {
	id, ok := lookup(args[0])
	if !ok {
		return nil
	}
	sp := &commandTable[id]
	if sp.subs != nil && len(args) > 1 {
		if sub := sp.sub(args[1]); sub != nil {
			return sub
		}
	}
	return sp
}

// forKeys calls fn with each key argument of args, by sp's key positions.
func forKeys(sp *cmdSpec, args [][]byte, fn func([]byte)) {
	if sp.firstKey <= 0 {
		return
	}
	last := sp.lastKey
	if last < 0 {
		last += len(args)
	}
	step := max(sp.step, 1)
	for i := sp.firstKey; i <= last && i < len(args); i += step {
		fn(args[i])
	}
}

// runQueued runs one queued command inside EXEC: its checks passed when it
// was queued, so it goes straight to its handler (through l.call, which
// counts it as Redis counts the commands of a transaction: when they run).
func (l *loop) runQueued(cl *client, args [][]byte, now int64) bool {
	sp := resolve(args)
	if sp == nil || sp.run == nil {
		l.errUnknownCommand(args)
		return false
	}
	// Permissions are checked again at EXEC, as Redis does: the user may
	// have changed since the command was queued. A denial is that command's
	// entry in the EXEC reply.
	if !l.permitted(cl, sp, args, acl.ContextMulti, now) {
		return false
	}
	return l.call(sp, cl, args, now)
}
