package server

import (
	"github.com/panjf2000/gnet/v2"

	"github.com/throttlekit/throttlekit-server/shard"
)

const (
	initialOut = 16 * 1024
	maxKeptOut = 1 << 20 // a reply buffer grown past this is dropped after the batch
	maxCmdName = 32      // longer names cannot be commands: no lookup
)

// loop is the state of one event loop: its reply buffer, argument slices,
// scratch space, the transform it hands to the store, and its counters.
// Only the loop's goroutine touches it (pub is read by Stats).
type loop struct {
	srv   *Server
	store *shard.Store
	el    gnet.EventLoop
	conns map[*client]struct{}

	out     []byte   // replies of the current batch
	args    [][]byte // arguments of the current command
	scratch []byte   // unescaped inline arguments
	op      op       // the store transform, reused for every command

	batchCmds int64
	ctr       counters
	pub       published
}

func newLoop(s *Server) *loop {
	return &loop{
		srv:   s,
		store: s.store,
		conns: make(map[*client]struct{}),
		out:   make([]byte, 0, initialOut),
		args:  make([][]byte, 0, 16),
	}
}

// process answers every complete command at the start of in, appending the
// replies to l.out. It returns how many bytes it consumed and whether the
// connection must be closed once the replies are written (QUIT or a
// protocol error). now is the batch's clock reading, in Unix nanoseconds.
func (l *loop) process(cl *client, in []byte, now int64) (consumed int, closeAfter bool) {
	lim := limits{
		maxArgs:    l.srv.cfg.MaxArgs,
		maxBulkLen: l.srv.cfg.ProtoMaxBulkLen,
	}
	for consumed < len(in) {
		lim.unauth = !cl.authed
		n, args, perr := readCommand(in[consumed:], l.args[:0], &l.scratch, lim)
		if cap(args) > cap(l.args) {
			l.args = args[:0]
		}
		if perr != "" {
			l.out = appendErrorLine(l.out, "ERR", "Protocol error: "+string(perr))
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
	}
	return consumed, false
}
