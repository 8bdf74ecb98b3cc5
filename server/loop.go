package server

import (
	"github.com/panjf2000/gnet/v2"

	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/server/resp"
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
	el    gnet.EventLoop
	conns map[*client]struct{}

	out    []byte        // replies of the current batch
	parser resp.Parser   // arguments of the current command, unescaped inline arguments
	op     limits.Op     // the single-key operation, reused for every command
	cb     checkBatch    // checks deferred to run together: batch.go
	local  *limits.Local // the core when it is the local backend, for batches; nil over an upstream
	adm    admOps        // the admission commands' operations (cmd_admission.go)
	tx     txnLoop       // EXEC's shard.Txn and the SCAN page: cmd_multi.go
	// collect, while EXEC runs over an upstream, gathers the queued
	// commands' operations into one batch instead of parking each (park.go).
	collect *execCollect
	slow    slowLoop // what the batch ran, for the slow log: cmd_slowlog.go

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
	// answered, while the queued replies are written (shutdown.go).
	draining bool

	// clockMoved is set by DEBUG SET-CLOCK and ADVANCE-CLOCK: process reads
	// the clock again before the next command of the batch (cmd_debug.go).
	clockMoved bool

	// limCache is the last "limit period [options]" limitArgs parsed, and
	// what it parsed to; cellCache likewise for CL.THROTTLE (args.go).
	limCache  limitCache
	cellCache cellCache
}

func newLoop(s *Server) *loop {
	local, _ := s.core.(*limits.Local)
	return &loop{
		srv:   s,
		local: local,
		conns: make(map[*client]struct{}),
		out:   make([]byte, 0, initialOut),
		slow:  slowLoop{all: s.ops.each},
	}
}
