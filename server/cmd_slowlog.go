package server

import (
	"time"

	"github.com/throttlekit/throttlekit-server/internal/latency"
	"github.com/throttlekit/throttlekit-server/internal/slowlog"
)

// SLOWLOG and the timing of commands.
//
// The server does not read the clock per command: a batch is timed once
// (see "Counters" in doc.go). The slow log and the latency monitor get a
// command's own duration in three ways, so that the hot path pays no clock
// read and one or two comparisons:
//
//   - A batch of one command (a client that waits for each reply, the usual
//     case): the clock read that ends the batch is taken right after the
//     command, while its arguments are still at hand, and the batch's time
//     (parse, run and reply) is the command's. Exact.
//   - A command without the fast flag (KEYS, SCAN, FLUSHALL, CLIENT LIST,
//     INFO, COMMAND, ...: anything that is not O(1)) is timed on its own,
//     two clock reads around its handler, wherever it is in a batch. Exact
//     for the handler; parsing is not counted.
//   - A fast command inside a pipeline is not timed on its own. When a
//     pipelined batch as a whole takes at least the threshold, the loop
//     times every command of its next slowPipelineBatches batches one by
//     one (a clock read per command), so a pipeline that keeps being slow
//     gets its slow commands logged; the batch that tripped it is not
//     attributed to any of its commands. With slowlog-log-slower-than 0
//     every command is timed on its own.
//
// Commands flagged skip_slowlog are not logged. The arguments of AUTH,
// HELLO and ACL SETUSER are logged as "(redacted)", as Redis 7 does.

// DefaultSlowlogLogSlowerThan and DefaultSlowlogMaxLen are Redis's defaults.
const (
	DefaultSlowlogLogSlowerThan = slowlog.DefaultSlowerThanUs * time.Microsecond
	DefaultSlowlogMaxLen        = slowlog.DefaultMaxLen
)

// slowPipelineBatches is how many batches a loop times command by command
// after a pipelined batch crossed the slow log threshold.
const slowPipelineBatches = 16

// opsState is the server's slow log and latency monitor, with the settings
// fixed at New.
type opsState struct {
	slow   *slowlog.Log
	lat    *latency.Monitor
	slowNs int64 // log from this duration; < 0: off
	latNs  int64 // sample from this duration; 0: off
	on     bool  // either of them is on
	each   bool  // time every command (slowlog-log-slower-than 0)
}

func newOpsState(cfg *Config) opsState {
	o := opsState{slow: slowlog.New(DefaultSlowlogMaxLen), lat: &latency.Monitor{}}
	switch {
	case cfg.SlowlogMaxLen < 0:
		o.slow.SetMaxLen(0)
	case cfg.SlowlogMaxLen > 0:
		o.slow.SetMaxLen(cfg.SlowlogMaxLen)
	}
	switch {
	case cfg.SlowlogLogAll:
		o.slowNs, o.each = 0, true
	case cfg.SlowlogLogSlowerThan < 0:
		o.slowNs = -1
	case cfg.SlowlogLogSlowerThan == 0:
		o.slowNs = int64(DefaultSlowlogLogSlowerThan)
	default:
		o.slowNs = int64(cfg.SlowlogLogSlowerThan)
	}
	if ms := cfg.LatencyMonitorThreshold.Milliseconds(); ms > 0 {
		o.latNs = ms * 1e6
		o.lat.SetThreshold(ms)
	}
	o.on = o.slowNs >= 0 || o.latNs > 0
	return o
}

// slowLoop is one loop's part: what the current batch ran and timed.
type slowLoop struct {
	all    bool     // time every command of this batch on its own
	left   int      // batches still timed command by command after a slow pipeline
	ran    *cmdSpec // the last command run and not timed on its own
	end    int64    // the batch's end, when slowSolo read it
	hasEnd bool
}

// slowTimed reports whether call must time sp on its own (two clock reads
// around its handler). It inlines: the hot path pays its two comparisons.
func (l *loop) slowTimed(sp *cmdSpec) bool {
	return l.slow.all || sp.flags&flagFast == 0 && l.srv.ops.on
}

// slowEnd ends the timing call began at t0.
func (l *loop) slowEnd(sp *cmdSpec, cl *client, args [][]byte, t0 int64) {
	l.slowObserve(sp, cl, args, l.srv.now()-t0)
}

// slowSolo runs after the only command of a batch: it reads the clock that
// ends the batch and hands the batch's time to the command.
func (l *loop) slowSolo(cl *client, args [][]byte, now int64) {
	sp := l.slow.ran
	l.slow.ran = nil
	if sp == nil || !l.srv.ops.on {
		return
	}
	t := l.srv.now()
	l.slow.end, l.slow.hasEnd = t, true
	if o := &l.srv.ops; o.slowNs >= 0 && t-now >= o.slowNs || o.latNs > 0 && t-now >= o.latNs {
		l.slowObserve(sp, cl, args, t-now)
	}
}

// slowBatchEnd returns the clock reading that ends the batch (slowSolo's,
// or a new one) and arms command-by-command timing after a slow pipeline.
func (l *loop) slowBatchEnd(now int64) int64 {
	end := l.slow.end
	if !l.slow.hasEnd {
		end = l.srv.now()
	}
	l.slow.hasEnd, l.slow.ran = false, nil
	o := &l.srv.ops
	switch {
	case o.on && l.batchCmds > 1 && !l.slow.all && (o.slowNs >= 0 && end-now >= o.slowNs || o.latNs > 0 && end-now >= o.latNs):
		l.slow.left = slowPipelineBatches
	case l.slow.left > 0:
		l.slow.left--
	}
	l.slow.all = o.each || l.slow.left > 0
	return end
}

// slowObserve logs a command that took d ns, if it crossed a threshold.
func (l *loop) slowObserve(sp *cmdSpec, cl *client, args [][]byte, d int64) {
	o := &l.srv.ops
	if o.slowNs >= 0 && d >= o.slowNs && sp.flags&flagSkipSlowlog == 0 {
		if sp == &commandTable[cmdAuth] || sp == &commandTable[cmdHello] || sp.name == "acl|setuser" {
			args = redacted(args)
		}
		o.slow.Add(l.srv.now()/1e9, d/1000, args, cl.addr, cl.name)
	}
	if o.latNs > 0 && d >= o.latNs {
		event := "command"
		if sp.flags&flagFast != 0 {
			event = "fast-command"
		}
		o.lat.Record(event, l.srv.now()/1e9, d/1e6)
	}
}

// redacted returns args with every argument after the command's name (and
// its subcommand's, for ACL SETUSER the user name) replaced.
func redacted(args [][]byte) [][]byte {
	out := make([][]byte, len(args))
	keep := 1
	if len(args) > 2 && equalFold(args[0], "acl") {
		keep = 3
	} else if len(args) > 1 && equalFold(args[0], "hello") {
		keep = 2
	}
	for i := range args {
		if i < keep {
			out[i] = args[i]
		} else {
			out[i] = []byte("(redacted)")
		}
	}
	return out
}

// RecordLatency gives the latency monitor a sample of an event that is not
// a command (an expiry sweep, a persistence flush): it is kept when the
// monitor is on and d reaches its threshold.
func (s *Server) RecordLatency(event string, d time.Duration) {
	if s.ops.latNs > 0 && int64(d) >= s.ops.latNs {
		s.ops.lat.Record(event, s.now()/1e9, d.Milliseconds())
	}
}

func slowlogSubcommands() []cmdSpec {
	const g = "server"
	return []cmdSpec{
		{name: "slowlog|get", arity: -2, flags: flagAdmin | flagLoading | flagStale, run: (*loop).slowlogGet,
			group: g, since: "2.2.12", complexity: "O(N) where N is the number of entries returned",
			summary: "Returns the slow log's entries.",
			args:    []argDoc{{name: "count", typ: "integer", optional: true}},
			help: []string{"GET [<count>]",
				"    Return the <count> newest entries (default 10, -1 for all): id, unix time,",
				"    duration in microseconds, arguments, client address and port, client name."}},
		{name: "slowlog|len", arity: 2, flags: flagAdmin | flagLoading | flagStale, run: (*loop).slowlogLen,
			group: g, since: "2.2.12", summary: "Returns the number of entries in the slow log.",
			help: []string{"LEN", "    Return the number of entries held."}},
		{name: "slowlog|reset", arity: 2, flags: flagAdmin | flagLoading | flagStale, run: (*loop).slowlogReset,
			group: g, since: "2.2.12", complexity: "O(N) where N is the number of entries in the slowlog",
			summary: "Clears all entries from the slow log.",
			help:    []string{"RESET", "    Drop every entry."}},
		helpSub("slowlog", "6.2.0", g, 0),
	}
}

// SLOWLOG GET [count]
func (l *loop) slowlogGet(_ *client, args [][]byte, _ int64) result {
	if len(args) > 3 {
		l.errQuoted("unknown subcommand or wrong number of arguments for ", args[1], 128, ". Try SLOWLOG HELP.")
		return failed
	}
	count := int64(10)
	if len(args) == 3 {
		n, ok := parseInt64(args[2])
		if !ok || n < -1 {
			l.errorReply("ERR", "count should be greater than or equal to -1")
			return failed
		}
		count = n
	}
	entries := l.srv.ops.slow.Get(int(min(count, 1<<30)))
	l.out = appendArray(l.out, len(entries))
	for _, e := range entries {
		l.out = appendArray(l.out, 6)
		l.out = appendInt(l.out, e.ID)
		l.out = appendInt(l.out, e.Time)
		l.out = appendInt(l.out, e.DurationUs)
		l.out = appendArray(l.out, len(e.Args))
		for _, a := range e.Args {
			l.out = appendBulk(l.out, a)
		}
		l.out = appendBulkString(l.out, e.Addr)
		l.out = appendBulkString(l.out, e.Name)
	}
	return replied
}

// SLOWLOG LEN
func (l *loop) slowlogLen(_ *client, _ [][]byte, _ int64) result {
	l.out = appendInt(l.out, int64(l.srv.ops.slow.Len()))
	return replied
}

// SLOWLOG RESET
func (l *loop) slowlogReset(_ *client, _ [][]byte, _ int64) result {
	l.srv.ops.slow.Reset()
	l.out = appendOK(l.out)
	return replied
}
