package server

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Large arguments.
//
// gnet reads a socket readBufferCap bytes at a time into its loop's buffer
// and calls OnTraffic for each read, which copies the bytes into the query
// buffer: a 64 MiB argument costs a thousand callbacks and a second copy of
// every byte. While the pending frame still needs more than directReadMin
// bytes, OnTraffic instead reads the socket itself, straight into the
// query buffer, up to directReadBudget bytes per callback: one copy (the
// kernel's), and a bounded share of the loop for each connection, since
// the other connections of the loop wait while it reads. Data the socket
// still holds wakes the loop again (gnet polls level-triggered), so a large
// upload proceeds in slices with the loop's other connections served in
// between.
//
// The query buffer grows by growQuery's rule (at most queryGrowth times
// what has arrived); the bytes it moves when it grows are copied in
// copyPiece pieces, so no single copy holds off a garbage collection's
// stop-the-world for long.

const (
	// directReadMin is how much the pending frame must still need for
	// OnTraffic to read the socket itself.
	directReadMin = 64 << 10
	// directReadBudget bounds the bytes one callback reads from a
	// socket directly.
	directReadBudget = 128 << 10
	// copyPiece is the longest single copy made when a query buffer
	// grows.
	copyPiece = 1 << 20
)

// rawReader reads a socket without blocking: unix.Read on a non-blocking
// descriptor in the server, a fake in tests.
type rawReader func(p []byte) (int, error)

// fdReader reads the non-blocking socket fd.
func fdReader(fd int) rawReader {
	return func(p []byte) (int, error) { return unix.Read(fd, p) }
}

// readDirect appends to q what read returns while the pending frame, of
// which q holds the first len(q) bytes, is known to need more than
// directReadMin bytes beyond them (need, Pending.Need: a lower bound on
// the frame's length), until budget bytes have been read or read has no
// more (a short read, EAGAIN, the end of the stream or an error: gnet
// finds the end or the error on its own next read). It never reads past
// need, so what follows the frame stays with gnet.
//
// q grows by growQuery's rule. A buffer of at least lazyMoveMin bytes is
// not copied when it grows: the new one is returned with its first
// len(from) bytes still to be copied from from (see queryMove), and
// readDirect stops rather than grow again while that copy is pending
// (moving is true).
func readDirect(q []byte, read rawReader, need int64, budget int, moving bool) (_, from []byte) {
	for budget > 0 && need-int64(len(q)) > directReadMin {
		want := int(min(need-int64(len(q)), int64(budget)))
		if len(q) == cap(q) {
			switch {
			case moving || from != nil:
				return q, from
			case len(q) >= lazyMoveMin:
				from = q
				q = make([]byte, len(q), queryCap(len(q), cap(q), min(want, readBufferCap), need))
			default:
				q = growQuery(q, min(want, readBufferCap), need)
			}
		}
		room := q[len(q):min(cap(q), len(q)+want)]
		n, err := read(room)
		if n <= 0 {
			return q, from
		}
		q = q[:len(q)+n]
		budget -= n
		if n < len(room) || (err != nil && !errors.Is(err, unix.EINTR)) {
			return q, from
		}
	}
	return q, from
}

const (
	// lazyMoveMin is the smallest query buffer whose bytes move to a
	// larger one over several callbacks instead of at once.
	lazyMoveMin = 1 << 20
	// moveBudget bounds the bytes one callback moves.
	moveBudget = 256 << 10
)

// queryMove is a query buffer moving to a larger one over several
// callbacks: the first done bytes of from have been copied to the client's
// qbuf, whose first len(from) bytes are from's; the bytes after them are
// already in place. Copying into memory not touched before costs a page
// fault per page, which on some virtual machines makes an 8 MiB copy take
// tens of milliseconds: done at once, the loop's other connections would
// wait that long.
type queryMove struct {
	from []byte
	done int
}

// moveQuery copies up to budget more bytes of a pending move into
// cl.qbuf, all of them when budget < 0.
func (cl *client) moveQuery(budget int) {
	m := &cl.qmove
	if m.from == nil {
		return
	}
	end := len(m.from)
	if budget >= 0 {
		end = min(end, m.done+budget)
	}
	m.done += copyPieces(cl.qbuf[m.done:end], m.from[m.done:end])
	if m.done == len(m.from) {
		*m = queryMove{}
	}
}

// readBufferCap is the size of gnet's read buffer (its default), the step
// a query buffer grows by when nothing larger is known.
const readBufferCap = 64 << 10

// copyPieces copies src into dst, as copy does, in copyPiece pieces.
func copyPieces(dst, src []byte) int {
	n := 0
	for n < len(src) && n < len(dst) {
		n += copy(dst[n:min(len(dst), n+copyPiece)], src[n:])
	}
	return n
}
