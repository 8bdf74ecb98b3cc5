package server

// The dispatch path, from the bytes of a read batch to a command's
// handler: process splits the batch into commands (package resp),
// dispatch checks each against the command table, authentication, arity,
// the ACL, MULTI and durability, and call runs the handler and counts it.
// The handlers live in the cmd_ files of their families (see the package
// doc).

import (
	"errors"

	"github.com/throttlekit/throttlekit-server/server/resp"
)

// process answers every complete command at the start of in, appending the
// replies to l.out. It returns how many bytes it consumed and whether the
// connection must be closed once the replies are written (QUIT or a
// protocol error). now is the batch's clock reading, in Unix nanoseconds.
//
// A command left incomplete at the end of in is remembered in cl.pend: the
// next call must pass it again from its first byte (in[consumed:] of this
// call) followed by the bytes that arrived since, and parsing resumes where
// it stopped.
func (l *loop) process(cl *client, in []byte, now int64) (consumed int, closeAfter bool) {
	for consumed < len(in) {
		l.cb.stable = in[consumed] == '*' // a multibulk's arguments alias in: batch.go
		n, args, err := l.parser.Next(in[consumed:], &cl.pend, l.srv.protoLimits(cl))
		if err != nil {
			l.runChecks()
			var perr *resp.Error
			if errors.As(err, &perr) && perr.Code == resp.ErrQueryBuffer {
				l.srv.log.Warn("closing client over the query buffer limit", "id", cl.id, "addr", cl.addr,
					"limit", l.srv.cfg.QueryBufferLimit)
			}
			l.out = appendErrorLine(l.out, "ERR", err.Error())
			l.ctr.errs[errKindProtocol]++
			return len(in), true
		}
		if n == 0 {
			break
		}
		consumed += n
		if len(args) == 0 {
			continue
		}
		l.batchCmds++
		l.cb.more = consumed < len(in)
		closing := l.dispatch(cl, args, now)
		l.flushBehind() // a reply appended while checks wait goes after theirs: batch.go
		if closing {
			l.runChecks()
			return len(in), true
		}
		if consumed == len(in) && l.batchCmds == 1 { // the batch's only command: cmd_slowlog.go
			l.slowSolo(cl, args, now)
		}
		if l.clockMoved { // DEBUG SET-CLOCK or ADVANCE-CLOCK: the next command sees it (cmd_debug.go)
			l.clockMoved = false
			now = l.srv.now()
		}
	}
	l.runChecks()
	return consumed, false
}

// endBatch counts a batch that consumed n bytes and started at now (the
// reading of Server.now the batch used) and publishes the loop's counters.
// Call it before writing l.out: counters are published before the write,
// so a client that has read a reply sees it counted in Stats.
func (l *loop) endBatch(n int, now int64) {
	l.ctr.bytesIn += int64(n)
	l.ctr.bytesOut += int64(len(l.out)) + l.bigBytes
	l.ctr.observe(l.slowBatchEnd(now)-now, l.batchCmds)
	l.batchCmds = 0
	l.ctr.flush(&l.pub)
}

// dispatch runs one command and appends its reply. It reports whether the
// connection must be closed after the batch's replies are written.
//
// The order of the checks is Redis's: unknown command, authentication,
// arity, then for a container the subcommand and its arity (DEBUG is
// refused before its subcommand when enable-debug-command does not allow
// it: cmd_debug.go).
func (l *loop) dispatch(cl *client, args [][]byte, now int64) bool {
	if cl.intro.reply != replyOn && !cl.intro.quiet { // CLIENT REPLY OFF|SKIP: dispatchQuiet
		return l.dispatchQuiet(cl, args, now)
	}
	id, ok := lookupAgain(args[0], cl.lastCmd)
	if len(l.cb.ops) > 0 && (!ok || !batchable(id)) {
		l.runChecks() // the command may read what they change: batch.go
	}
	if !ok {
		l.errUnknownCommand(args)
		flagMulti(cl) // EXEC will abort: cmd_multi.go
		return false
	}
	spec := &commandTable[id]
	l.ctr.countCmd(id)
	cl.lastCmd = id
	if !cl.authed && spec.flags&flagNoAuth == 0 {
		l.rejected(spec) // INFO commandstats: rejected, below
		l.refuse(cl, id, "NOAUTH", "Authentication required.")
		return false
	}
	if !arityOK(spec.arity, len(args)) {
		l.rejected(spec) // INFO commandstats: rejected, below
		l.refuse(cl, id, "ERR", arityMsg(spec.name))
		return false
	}
	if spec.subs != nil && (len(args) > 1 || spec.run == nil) {
		if id == cmdDebug && !l.debugAllowed(cl) { // enable-debug-command: cmd_debug.go
			l.refuseDebug(cl, spec)
			return false
		}
		sub := spec.sub(args[1])
		if sub == nil {
			l.errUnknownSub(spec.name, args[1])
			flagMulti(cl)
			return false
		}
		if !arityOK(sub.arity, len(args)) {
			l.rejected(sub) // INFO commandstats: rejected, below
			l.errArity(sub.name)
			flagMulti(cl)
			return false
		}
		spec = sub
	}
	if u := cl.user; u.Stale() || !u.Unrestricted() { // the default user skips the rest: security.go
		if ok, closeConn := l.checkACL(cl, spec, args, now); !ok { // ACL: command and keys (security.go)
			flagMulti(cl)
			return closeConn
		}
	}
	if cl.intro.monitor && spec.flags&(flagWrite|flagReadonly) != 0 {
		// As Redis: a MONITOR connection is a replica, which may not touch
		// the keyspace (the flag is written only on this loop: cmd_monitor.go).
		l.rejected(spec)
		l.errorReply("ERR", "Replica can't interact with the keyspace")
		flagMulti(cl)
		return false
	}
	if l.srv.durabilityActive() && l.checkDurability(cl, id, spec) { // LOADING, TRYAGAIN; marks changing batches: durability.go
		flagMulti(cl)
		return false
	}
	if cl.multi != nil { // between MULTI and EXEC, or watching: cmd_multi.go
		if cl.multi.multi && !runsInMulti(id) {
			l.queue(cl, args)
			return false
		}
		if id == cmdReset {
			endMulti(cl)
		}
	}
	return l.call(spec, cl, args, now) // runs spec.run; counters and MONITOR: call, below
}

// arityOK checks the number of words (command name included) against a.
func arityOK(a, n int) bool {
	if a >= 0 {
		return n == a
	}
	return n >= -a
}

// dispatchQuiet runs a command for a connection whose CLIENT REPLY mode is
// OFF or SKIP and drops its reply. SKIP lasts one command; OFF lasts until
// CLIENT REPLY ON, whose +OK is sent.
func (l *loop) dispatchQuiet(cl *client, args [][]byte, now int64) bool {
	l.runChecks() // their replies are not this command's to drop
	mark := len(l.out)
	ci := &cl.intro
	ci.quiet, ci.replySet = true, false
	closeConn := l.dispatch(cl, args, now)
	ci.quiet = false
	if !ci.replySet && ci.reply == replySkip {
		ci.reply = replyOn
	}
	if !ci.replySet || ci.reply != replyOn {
		l.out = l.out[:mark]
	}
	return closeConn
}

// call runs a command's handler once dispatch has accepted it, and counts
// it: a call, and a failure when the handler says its reply is an error. It then feeds the
// command to MONITOR clients, if any (one atomic load when there are none).
// It reads no clock and does not allocate.
//
// The time INFO commandstats reports (usec) is not measured per command:
// a clock read can cost more than a fast command itself (on a virtual
// machine whose clock cannot be read in user space it is a system call).
// Instead each command gets an equal share of its batch's time, which the
// loop measures anyway (observe): for a batch of one command, the whole
// batch, parsing and reply included; for a pipeline, an average.
func (l *loop) call(sp *cmdSpec, cl *client, args [][]byte, now int64) bool {
	var t0 int64
	timed := l.slowTimed(sp) // the slow log: cmd_slowlog.go
	if timed {
		t0 = l.srv.now()
	}
	l.cb.timed = timed // a timed check runs at once: batch.go
	res := sp.run(l, cl, args, now)
	if timed {
		l.slow.ran = nil // not the commands EXEC ran inside it
		l.slowEnd(sp, cl, args, t0)
	} else {
		l.slow.ran = sp
	}
	c := &l.ctr.cmd[sp.stat]
	c.calls++
	c.batch++
	if res&failed != 0 {
		c.failed++
	}
	l.ctr.mark(sp.stat)
	l.ctr.batchDirty[sp.stat>>6] |= 1 << (sp.stat & 63)
	if sp == &commandTable[cmdReset] {
		l.resetIntro(cl) // RESET also ends CLIENT REPLY OFF|SKIP and MONITOR
	}
	cl.intro.noteCommand(sp, cl.resp3)
	sh := l.ctr.sh
	if sh == nil {
		sh = l.shared()
	}
	if sh.monitors.Load() != nil && sp.flags&(flagAdmin|flagSkipMonitor) == 0 {
		l.feedMonitors(sh, cl, args, now)
	}
	return res&closeConn != 0
}

// rejected counts a command refused before its handler ran.
func (l *loop) rejected(sp *cmdSpec) {
	l.ctr.cmd[sp.stat].rejected++
	l.ctr.mark(sp.stat)
}
