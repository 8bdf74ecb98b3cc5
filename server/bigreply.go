package server

import (
	"strconv"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// Large replies.
//
// A reply that repeats a large argument (ECHO of a 64 MiB message) is not
// copied into the loop's reply buffer. The buffer gets the bulk's header
// and its closing CRLF, and a bigRef remembers where the payload goes
// between them. At the end of the batch queueOut moves the replies to the
// connection's outQueue, the payload by reference, and feed hands them to
// gnet a window at a time as the client reads, in pieces of writePiece
// bytes: no copy of the payload is longer than that (a copy is not
// preemptible, and a garbage collection that must stop the world waits
// for it), and no callback hands over more than feedBudget.
//
// The payload stays where the parser left it, in the client's query
// buffer, which the queue then owns (client.qbufShared): the connection
// reads on into a new one. Only arguments known to live there are written
// this way (loop.ownedInput); a reply that must outlive the batch in other
// ways (held for durability, queued inside MULTI, suppressed by CLIENT
// REPLY) is copied as any other.

const (
	// bigReplyMin is the smallest payload written from the argument
	// instead of copied into the reply buffer.
	bigReplyMin = 1 << 20
	// writePiece is the largest piece of a payload handed to gnet as one
	// buffer, and so the longest copy made of it.
	writePiece = 1 << 20
	// maxIovecs bounds the buffers of one writev; Linux refuses more than
	// 1024 (IOV_MAX).
	maxIovecs = 512
)

// bigRef is a payload that goes at offset at of the loop's reply buffer.
type bigRef struct {
	at   int
	data []byte
}

// appendBulkArg writes arg, an argument of the command being run for cl,
// as a bulk string reply, exactly as appendBulk does. A large arg read into
// cl's query buffer is not copied: the reply refers to it until the batch
// is written.
func (l *loop) appendBulkArg(cl *client, arg []byte) {
	if len(arg) < bigReplyMin || !l.ownedInput || cl.multi != nil ||
		cl.intro.reply != replyOn || cl.intro.quiet || l.srv.cfg.Durability != nil {
		l.out = appendBulk(l.out, arg)
		return
	}
	l.out = append(l.out, '$')
	l.out = strconv.AppendInt(l.out, int64(len(arg)), 10)
	l.out = append(l.out, '\r', '\n')
	l.bigs = append(l.bigs, bigRef{at: len(l.out), data: arg})
	l.bigBytes += int64(len(arg))
	l.out = append(l.out, '\r', '\n')
}

// outConn is the part of gnet.Conn that large replies use.
type outConn interface {
	Write(b []byte) (int, error)
	Writev(bs [][]byte) (int, error)
	OutboundBuffered() int
	Wake(callback gnet.AsyncCallback) error
}

var _ outConn = gnet.Conn(nil)

// outQueue holds a connection's replies that gnet has not been given yet:
// the payloads of large replies, by reference, and copies of the reply
// bytes around them, in order. feed hands them over as the socket drains.
//
// gnet has no event for an outbound buffer that has emptied, so a queue
// that waits for the client to read polls: a timer wakes the connection's
// loop every outPoll (Conn.Wake runs OnTraffic on the loop), and each
// wake tops gnet's buffer up to outWindow. gnet copies what it is given
// into its outbound buffer when the socket is full; with a window of a
// few MiB those copies land in the same few pooled buffers, where handing
// it a 64 MiB reply at once would copy the whole of it into fresh memory
// in one callback.
type outQueue struct {
	bufs  [][]byte
	bytes int64
	wake  *time.Timer
	poll  time.Duration // the wait before the next look, doubled while the client reads nothing
	seen  int           // gnet's outbound bytes at the last look
}

const (
	// outWindow is how much of a queued reply gnet's outbound buffer may
	// hold before feed waits for the client to read.
	outWindow = 4 << 20
	// feedBudget bounds the bytes one callback hands to gnet, so the
	// loop's other connections wait for at most that much copying.
	feedBudget = 512 << 10
	// outPoll is how soon a queue that waits for the client looks again;
	// the wait doubles, up to outPollMax, while the client reads nothing,
	// so a client that never reads costs a few wakes a second.
	outPoll    = 500 * time.Microsecond
	outPollMax = 64 * time.Millisecond
)

// pending reports whether replies wait in the queue.
func (q *outQueue) pending() bool { return len(q.bufs) > 0 }

// reset forgets the queued replies and stops the poll (the connection is
// closing).
func (q *outQueue) reset() {
	if q.wake != nil {
		q.wake.Stop()
		q.wake = nil
	}
	clear(q.bufs)
	*q = outQueue{}
}

func (q *outQueue) push(b []byte) {
	q.bufs = append(q.bufs, b)
	q.bytes += int64(len(b))
}

// queueOut moves the batch's replies, l.out with the payloads of l.bigs
// in their places, to cl's queue: the reply bytes copied, the payloads
// (which stay in cl's query buffer, from then on left to the queue) in
// pieces of at most writePiece bytes. l.out is left to be reset by the
// caller.
func (l *loop) queueOut(cl *client) {
	q := &cl.outq
	prev := 0
	for _, b := range l.bigs {
		if b.at > prev {
			q.push(append([]byte(nil), l.out[prev:b.at]...))
		}
		for d := b.data; len(d) > 0; {
			k := min(len(d), writePiece)
			q.push(d[:k:k])
			d = d[k:]
		}
		prev = b.at
	}
	if prev < len(l.out) {
		q.push(append([]byte(nil), l.out[prev:]...))
	}
	if len(l.bigs) > 0 {
		cl.qbufShared = true
	}
	clear(l.bigs)
	l.bigs = l.bigs[:0]
	l.bigBytes = 0
}

// feed hands cl's queued replies to gnet: while gnet holds less than
// outWindow of them, at most feedBudget bytes per call, or all of them
// when all is set (the connection closes after them). When some are left
// it arranges to be called again: at once (Wake) if only the budget
// stopped it, after outPoll if the client has not read enough yet.
func (l *loop) feed(c outConn, cl *client, all bool) error {
	q := &cl.outq
	budget := feedBudget
	for q.pending() && (all || (budget > 0 && c.OutboundBuffered() < outWindow)) {
		k, n := 0, 0
		for k < len(q.bufs) && k < maxIovecs && (all || n < budget) {
			n += len(q.bufs[k])
			k++
		}
		if _, err := c.Writev(q.bufs[:k]); err != nil {
			q.reset()
			return err
		}
		clear(q.bufs[:k])
		q.bufs = q.bufs[k:]
		q.bytes -= int64(n)
		budget -= n
	}
	if !q.pending() {
		q.reset()
		return nil
	}
	buffered := c.OutboundBuffered()
	if buffered < outWindow {
		q.poll = 0
		return c.Wake(nil)
	}
	if buffered < q.seen || q.poll == 0 {
		q.poll = outPoll // the client is reading
	} else {
		q.poll = min(2*q.poll, outPollMax)
	}
	q.seen = buffered
	if q.wake == nil {
		q.wake = time.AfterFunc(q.poll, func() { _ = c.Wake(nil) })
	} else {
		q.wake.Reset(q.poll)
	}
	return nil
}
