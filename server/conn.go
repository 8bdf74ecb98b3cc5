package server

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

const errMaxClients = "-ERR max number of clients reached\r\n"

// onOpen admits a connection or refuses it when MaxClients are connected.
func (s *Server) onOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if refusal, ok := s.admit(c); !ok {
		return refusal, gnet.Close
	}
	s.addClient(s.loopOf(c.EventLoop()), c)
	return nil, gnet.None
}

// admit decides whether a new connection c, from either listener, may be
// served: not while shutting down (closed without a reply), not when
// protected mode refuses it, and not beyond MaxClients (refusal holds the
// reply to send before closing). When it returns ok, c counts in
// connsCurrent until forget.
func (s *Server) admit(c gnet.Conn) (refusal []byte, ok bool) {
	select {
	case <-s.drainCh:
		s.connsRejected.Add(1)
		return nil, false
	default:
	}
	if denied := s.protectedRefusal(c); denied != nil { // protected mode: security.go
		s.connsRejected.Add(1)
		return denied, false
	}
	if s.connsCurrent.Add(1) > int64(s.cfg.MaxClients) {
		s.connsCurrent.Add(-1)
		s.connsRejected.Add(1)
		return []byte(errMaxClients), false
	}
	s.connsAccepted.Add(1)
	return nil, true
}

// addClient creates the client of an admitted connection c served by l.
func (s *Server) addClient(l *loop, c gnet.Conn) *client {
	since := time.Now()
	cl := &client{
		id:     s.nextID.Add(1),
		loop:   l,
		conn:   c,
		authed: s.cfg.RequirePass == "",
		since:  since,
		fd:     c.Fd(),
	}
	if a := c.RemoteAddr(); a != nil {
		cl.addr = a.String()
	}
	if a := c.LocalAddr(); a != nil {
		cl.laddr = a.String()
	}
	s.startConn(cl) // the default user: security.go
	cl.lastActive.Store(s.now())
	c.SetContext(cl)
	l.conns[cl] = struct{}{}
	s.mu.Lock()
	s.clients[cl.id] = cl
	s.mu.Unlock()
	return cl
}

// onClose forgets a connection.
func (s *Server) onClose(c gnet.Conn, err error) gnet.Action {
	cl, _ := c.Context().(*client)
	if cl == nil {
		return gnet.None // refused in OnOpen
	}
	c.SetContext(nil)
	cl.outq.reset()
	cl.qmove = queryMove{}
	s.forget(cl)
	s.dropHeld(cl) // durability.go
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, unix.ECONNRESET) {
		s.log.Debug("connection closed", "id", cl.id, "addr", cl.addr, "err", err)
	}
	return gnet.None
}

// forget removes a closed connection's client, whichever listener it came
// from. It runs on the goroutine of the client's loop.
func (s *Server) forget(cl *client) {
	s.connsCurrent.Add(-1)
	delete(cl.loop.conns, cl)
	s.mu.Lock()
	delete(s.clients, cl.id)
	s.mu.Unlock()
}

// Query buffer sizes. A buffer of at most maxKeptQuery bytes is kept
// once it is empty; a larger one is dropped and reallocated if a frame is
// cut again. While frames keep being cut (a client pipelining without
// pause), the buffer holds a cut frame and the read after it: it grows
// once to pipeQueryCap and is reused, so a stream of small commands costs
// no allocation per read. Only a buffer grown past that, toward a large
// frame, is released as soon as the frame is done (keepQuery).
const (
	maxKeptQuery = 16 * 1024
	pipeQueryCap = readBufferCap + maxKeptQuery
)

// onTraffic answers every complete command in the connection's input with
// one write.
//
// Between frames the input is read in place (Peek of gnet's buffer, no
// copy). A command cut at the end of the input is moved into the client's
// own query buffer and gnet's buffer is emptied; from then on every read is
// appended to the query buffer, and the parser resumes the frame where it
// stopped (client.pend), so a frame that arrives in k reads costs O(frame
// + k), not O(frame * k) as peeking and rescanning the whole input on each
// read would. The query buffer is left once it empties.
func (s *Server) onTraffic(c gnet.Conn) gnet.Action {
	cl, _ := c.Context().(*client)
	if cl == nil {
		return gnet.Close
	}
	l := cl.loop
	if cl.outq.pending() { // large replies waiting for the client to read: bigreply.go
		if err := l.feed(c, cl, l.draining); err != nil {
			return gnet.Close
		}
	}
	if l.draining || cl.dur.closing { // cl.dur: durability.go
		// Shutting down: what arrives now is read and dropped, so the
		// kernel holds no unread input when the connection is closed.
		_, _ = c.Discard(-1)
		return gnet.None
	}
	if lim := s.cfg.OutputBufferLimit; lim > 0 && int64(c.OutboundBuffered())+cl.outq.bytes > lim {
		s.log.Warn("closing client over the output buffer limit", "id", cl.id, "addr", cl.addr, "limit", lim)
		return gnet.Close
	}
	queued := len(cl.qbuf) > 0
	var in []byte
	if queued {
		cl.moveQuery(moveBudget) // a grown buffer filled a slice at a time (largearg.go)
		avail := c.InboundBuffered()
		if avail == 0 {
			return gnet.None
		}
		if len(cl.qbuf)+avail > cap(cl.qbuf) {
			cl.moveQuery(-1)
		}
		cl.qbuf = growQuery(cl.qbuf, avail, cl.pend.Need())
		m, _ := c.Read(cl.qbuf[len(cl.qbuf) : len(cl.qbuf)+avail])
		cl.qbuf = cl.qbuf[:len(cl.qbuf)+m]
		if need := cl.pend.Need(); m == avail && need-int64(len(cl.qbuf)) > directReadMin {
			// A large frame, and gnet's buffers are empty: the rest
			// comes straight from the socket (largearg.go).
			var from []byte
			cl.qbuf, from = readDirect(cl.qbuf, fdReader(cl.fd), need, directReadBudget, cl.qmove.from != nil)
			if from != nil {
				cl.qmove = queryMove{from: from}
			}
		}
		in = cl.qbuf
	} else {
		var err error
		if in, err = c.Peek(-1); err != nil || len(in) == 0 {
			return gnet.None
		}
	}
	now := s.now()
	cl.lastActive.Store(now)
	n, closeAfter := 0, false
	if int64(len(in)) >= cl.pend.Wait() { // else nothing about the pending frame can change yet
		cl.moveQuery(-1)      // the parser may look back at the frame's first bytes
		l.ownedInput = queued // arguments in cl.qbuf may be replied without a copy: bigreply.go
		n, closeAfter = l.process(cl, in, now)
		l.ownedInput = false
	}
	// Replies that refer to arguments in the query buffer (l.bigs) are
	// queued before the buffer moves.
	consumeLater := queued && n > 0 && len(l.bigs) > 0
	switch {
	case consumeLater:
	case queued && n > 0:
		cl.consumeQuery(n)
	case queued:
		// Still inside the pending frame: its bytes stay in the query buffer.
	case n < len(in) && !closeAfter:
		part := in[n:]
		cl.qbuf = append(growQuery(cl.qbuf[:0], len(part), cl.pend.Need()), part...)
		_, _ = c.Discard(len(in))
	case n > 0:
		_, _ = c.Discard(n)
	}
	l.endBatch(n, now)
	if held, act := s.holdBatch(l, cl, closeAfter); held { // sync persistence: durability.go
		return act
	}
	action := gnet.None
	if len(l.out) > 0 {
		if len(l.bigs) > 0 || cl.outq.pending() {
			// Large replies, or replies behind them: queued (bigreply.go).
			l.queueOut(cl)
			if err := l.feed(c, cl, closeAfter); err != nil {
				action = gnet.Close
			}
		} else if _, err := c.Write(l.out); err != nil {
			action = gnet.Close
		}
		l.out = l.out[:0]
		if cap(l.out) > maxKeptOut {
			l.out = make([]byte, 0, initialOut)
		}
	}
	if consumeLater {
		cl.consumeQuery(n)
	}
	if closeAfter {
		return gnet.Close
	}
	if lim := s.cfg.OutputBufferLimit; lim > 0 && int64(c.OutboundBuffered())+cl.outq.bytes > lim {
		s.log.Warn("closing client over the output buffer limit", "id", cl.id, "addr", cl.addr, "limit", lim)
		return gnet.Close
	}
	return action
}

// consumeQuery drops the first n bytes of the query buffer. A buffer
// grown past maxKeptQuery is not kept for the few bytes that may follow:
// they move to a small one, and the large one is left to the collector at
// once. A buffer whose arguments the output queue still refers to
// (qbufShared) is left to the queue.
func (cl *client) consumeQuery(n int) {
	if cl.qbufShared {
		rest := cl.qbuf[n:]
		cl.qbufShared = false
		cl.qbuf = nil
		if len(rest) > 0 {
			cl.qbuf = append(make([]byte, 0, max(len(rest), maxKeptQuery)), rest...)
		}
		return
	}
	cl.qbuf = keepQuery(cl.qbuf, n)
}

// keepQuery drops the first n bytes of the query buffer q and returns the
// buffer to keep: nil once it is empty if it is larger than maxKeptQuery;
// q itself, the rest moved to its start, while it is no larger than
// pipeQueryCap (a stream of cut frames reuses it); and for a buffer grown
// toward a large frame, a new one of maxKeptQuery bytes when the rest fits
// in half of that, so the large one goes to the collector at once.
func keepQuery(q []byte, n int) []byte {
	rest := q[n:]
	switch {
	case len(rest) == 0 && cap(q) > maxKeptQuery:
		return nil
	case cap(q) > pipeQueryCap && len(rest) <= maxKeptQuery/2:
		return append(make([]byte, 0, maxKeptQuery), rest...)
	default:
		return q[:copyPieces(q, rest)]
	}
}

// growQuery returns q with room for n more bytes. When the pending frame is
// known to need more than that, the capacity jumps toward the need, but to
// at most queryGrowth times what has arrived: a large frame is copied and
// first touched a bounded number of times (O(frame) in all, close to one
// pass with a factor of 8), and a client that announces a large argument
// and sends little makes the server commit at most that multiple of what it
// sent.
func growQuery(q []byte, n int, need int64) []byte {
	if len(q)+n <= cap(q) {
		return q
	}
	grown := make([]byte, len(q), queryCap(len(q), cap(q), n, need))
	copyPieces(grown, q)
	return grown
}

// queryCap is growQuery's capacity for a buffer of length l and capacity
// c that needs room for n more bytes of a frame of at least need bytes.
func queryCap(l, c, n int, need int64) int {
	want := l + n
	grown := max(want, 2*c)
	switch {
	case l > 0 && need <= int64(grown) && want > maxKeptQuery && want <= pipeQueryCap:
		// A cut frame (l > 0) and a read after it: the size a stream of small
		// commands keeps (keepQuery).
		return pipeQueryCap
	case need > int64(grown):
		// Toward the need in steps of queryGrowth counted back from it, so
		// that the last step lands on the need exactly: a 64 MiB bulk
		// grows 128 KiB, 1 MiB, 8 MiB, 64 MiB, copying 9 MiB in all.
		step := need
		for step/queryGrowth >= int64(grown) {
			step /= queryGrowth
		}
		grown = int(min(step, int64(queryGrowth)*int64(want)))
	}
	return grown
}

// queryGrowth bounds how far past the bytes received a query buffer grows
// toward what the pending frame announced.
const queryGrowth = 8

// onTick closes idle connections: each loop scans its own connections on
// its own goroutine.
func (s *Server) onTick() (time.Duration, gnet.Action) {
	timeout := s.cfg.IdleTimeout
	delay := time.Second
	if timeout/4 < delay {
		delay = max(timeout/4, 10*time.Millisecond)
	}
	s.loopsMu.Lock()
	loops := s.loops
	s.loopsMu.Unlock()
	deadline := s.now() - int64(timeout)
	for _, l := range loops {
		if l.el == nil {
			continue // a TLS connection's loop: its read deadline is the idle timeout (tls.go)
		}
		_ = l.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			for cl := range l.conns {
				if cl.lastActive.Load() < deadline {
					s.log.Debug("closing idle client", "id", cl.id, "addr", cl.addr)
					_ = cl.conn.Close()
				}
			}
			return nil
		}))
	}
	return delay, gnet.None
}
