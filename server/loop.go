package server

import (
	"errors"

	"github.com/panjf2000/gnet/v2"

	"github.com/throttlekit/throttlekit-server/server/resp"
	"github.com/throttlekit/throttlekit-server/shard"
)

const (
	initialOut = 16 * 1024
	maxKeptOut = 1 << 20 // a reply buffer grown past this is dropped after the batch
	maxCmdName = 32      // longer names cannot be commands: no lookup
)

// loop is the state of one event loop: its reply buffer, its parser (which
// owns the argument slices and scratch space), the transform it hands to
// the store, and its counters.
// Only the loop's goroutine touches it (pub is read by Stats).
type loop struct {
	srv   *Server
	store *shard.Store
	el    gnet.EventLoop
	conns map[*client]struct{}

	out    []byte      // replies of the current batch
	parser resp.Parser // arguments of the current command, unescaped inline arguments
	op     op          // the store transform, reused for every command
	gcra   gcraOp      // GCRA's store transform: cmd_gcra.go
	slow   slowLoop    // what the batch ran, for the slow log: cmd_slowlog.go
	tx     txnLoop     // EXEC's shard.Txn and the SCAN page: multi.go

	// ownedInput is set while process reads the client's query buffer,
	// whose arguments can outlive the batch; bigs are the payloads of the
	// batch's large replies, left in that buffer, and bigBytes their total
	// (bigreply.go).
	ownedInput bool
	bigs       []bigRef
	bigBytes   int64

	batchCmds int64
	ctr       counters
	pub       published

	// draining is set once Shutdown has begun: input is dropped, not
	// answered, while the queued replies are written (server.go).
	draining bool

	// clockMoved is set by DEBUG SET-CLOCK and ADVANCE-CLOCK: process reads
	// the clock again before the next command of the batch (debug.go).
	clockMoved bool
}

func newLoop(s *Server) *loop {
	return &loop{
		srv:   s,
		store: s.store,
		conns: make(map[*client]struct{}),
		out:   make([]byte, 0, initialOut),
		slow:  slowLoop{all: s.ops.each},
	}
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
		n, args, err := l.parser.Next(in[consumed:], &cl.pend, l.srv.protoLimits(cl))
		if err != nil {
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
		if l.dispatch(cl, args, now) {
			return len(in), true
		}
		if consumed == len(in) && l.batchCmds == 1 { // the batch's only command: cmd_slowlog.go
			l.slowSolo(cl, args, now)
		}
		if l.clockMoved { // DEBUG SET-CLOCK or ADVANCE-CLOCK: the next command sees it (debug.go)
			l.clockMoved = false
			now = l.srv.now()
		}
	}
	return consumed, false
}
