package server

// Batched checks: the consecutive THROTTLE.CHECK and CL.THROTTLE commands
// of one read batch of one connection are resolved together, through
// limits.Local.DoBatch, and their replies written in order afterwards.
//
// A check that may wait is deferred rather than run: its handler parses
// and validates its arguments as always (an error is replied at once),
// then copies the loop's Op into checkBatch.ops instead of calling Do.
// Nothing else about the command changes: dispatch has already done the
// authentication, arity, ACL and durability checks, and call counts it
// and feeds MONITOR. The deferred Ops run when something must see their
// effect or come after their replies:
//
//   - before dispatch runs any other command (which may read the keys, or
//     change what a reply looks like: HELLO, CLIENT REPLY), and before a
//     check that is not deferred (BAN, inside EXEC, timed by the slow log);
//   - when a command appended a reply of its own while checks waited (an
//     error, a refusal): its bytes are moved behind the checks' replies
//     (flushBehind), so replies keep the order of the commands;
//   - at the end of process, and when the batch is full (maxCheckBatch).
//
// Only checks whose key aliases the input may wait (multibulk frames;
// an inline argument with quotes lives in the parser's scratch, reused by
// the next command), only on a connection whose replies are on, only outside EXEC,
// and only with the local backend (an upstream parks its operations:
// park.go). A lone command (nothing after it in the read, nothing
// waiting) runs at once, so the slow log times it whole (slowSolo).
//
// What a deferred check costs beyond Do is the copy of its Op; what the
// batch saves is the overlap of the keys' cache misses (shard.Batch) and
// one lock per distinct shard instead of one per key.

import "github.com/throttlekit/throttlekit-server/limits"

// maxCheckBatch bounds the checks resolved together: past a few dozen
// keys the misses already overlap, and a batch holds its shards' locks
// for its whole run.
const maxCheckBatch = 64

// checkBatch is a loop's deferred checks and the state process keeps for
// them.
type checkBatch struct {
	ops   []limits.Op // deferred operations, in command order
	b     limits.Batcher
	cl    *client // the connection of the deferred checks
	now   int64   // the clock reading they run at
	end   int     // len(l.out) when the last one was deferred
	stash []byte  // replies moved behind the checks' replies (flushBehind)

	batched int64 // checks resolved by runChecks, for the tests

	// Set by process and call for the command being dispatched.
	stable bool // its arguments alias the input: a multibulk frame
	more   bool // more input follows it in this read
	timed  bool // the slow log times it on its own
}

// batchable reports whether command id may be deferred (the handler
// decides whether it is).
func batchable(id cmdID) bool { return id == cmdThrottleCheck || id == cmdCLThrottle }

// deferOp queues l.op, filled by a THROTTLE.CHECK or CL.THROTTLE handler,
// to run with the checks around it, and reports whether it did. When it
// did not, the checks already waiting have run, and the caller runs l.op
// itself.
func (l *loop) deferOp(cl *client, now int64) bool {
	b := &l.cb
	if l.local == nil || !b.stable || b.timed || l.tx.locked || cl.intro.reply != replyOn || cl.intro.quiet ||
		(len(b.ops) == 0 && !b.more) || (len(b.ops) > 0 && (b.cl != cl || b.now != now)) {
		l.runChecks()
		return false
	}
	if len(b.ops) == maxCheckBatch {
		l.runChecks()
	}
	if len(b.ops) == 0 { // later ones share the first one's (checked above)
		b.cl, b.now = cl, now
	}
	if len(b.ops) == cap(b.ops) {
		b.ops = append(b.ops, limits.Op{})
	} else {
		b.ops = b.ops[:len(b.ops)+1]
	}
	// The inputs only: the run writes every result field the reply reads.
	d, o := &b.ops[len(b.ops)-1], &l.op
	d.Kind, d.Key, d.Cost = o.Kind, o.Key, o.Cost
	if o.Kind == limits.OpCell {
		d.Cell = o.Cell
	} else {
		d.Limit = o.Limit
	}
	b.end = len(l.out)
	return true
}

// runChecks runs the deferred checks, if any, and appends their replies.
func (l *loop) runChecks() {
	b := &l.cb
	if len(b.ops) == 0 {
		return
	}
	l.local.DoBatch(&b.b, b.ops, b.now)
	b.batched += int64(len(b.ops))
	cl := b.cl
	for i := range b.ops {
		op := &b.ops[i]
		var r result
		var id cmdID
		if op.Kind == limits.OpCell {
			r, id = l.cellReply(op), cmdCLThrottle
		} else {
			r, id = l.checkReply(cl, op), cmdThrottleCheck
		}
		if r&failed != 0 {
			l.ctr.cmd[commandTable[id].stat].failed++ // call counted the rest
		}
		op.Key = nil // the input it aliases is not the loop's to keep
	}
	b.ops = b.ops[:0]
	b.cl = nil
}

// flushBehind runs the deferred checks when a command appended a reply
// after them (l.out past b.end): that reply is moved behind theirs.
//
// It is small enough to inline into dispatch's loop, so a command after
// which nothing is to move costs no call; the move is moveBehind.
func (l *loop) flushBehind() {
	if b := &l.cb; len(b.ops) > 0 && len(l.out) != b.end {
		l.moveBehind()
	}
}

// moveBehind is flushBehind's move: the replies past b.end are set aside,
// the waiting checks run and append theirs, and the set-aside replies follow.
func (l *loop) moveBehind() {
	b := &l.cb
	b.stash = append(b.stash[:0], l.out[b.end:]...)
	l.out = l.out[:b.end]
	l.runChecks()
	l.out = append(l.out, b.stash...)
	if cap(b.stash) > maxKeptOut {
		b.stash = nil
	}
}
