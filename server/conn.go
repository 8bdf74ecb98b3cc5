package server

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/throttlekit/throttlekit-server/server/acl"
	"github.com/throttlekit/throttlekit-server/server/resp"
)

const errMaxClients = "-ERR max number of clients reached\r\n"

// OnOpen admits a connection or refuses it when MaxClients are connected.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
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

// OnClose forgets a connection.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	cl, _ := c.Context().(*client)
	if cl == nil {
		return gnet.None // refused in OnOpen
	}
	c.SetContext(nil)
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

// maxKeptQuery is the capacity of a query buffer kept once it is empty;
// a larger one is dropped and reallocated if a frame is cut again.
const maxKeptQuery = 16 * 1024

// OnTraffic answers every complete command in the connection's input with
// one write.
//
// Between frames the input is read in place (Peek of gnet's buffer, no
// copy). A command cut at the end of the input is moved into the client's
// own query buffer and gnet's buffer is emptied; from then on every read is
// appended to the query buffer, and the parser resumes the frame where it
// stopped (client.pend), so a frame that arrives in k reads costs O(frame
// + k), not O(frame * k) as peeking and rescanning the whole input on each
// read would. The query buffer is left once it empties.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	cl, _ := c.Context().(*client)
	if cl == nil {
		return gnet.Close
	}
	l := cl.loop
	if l.draining || cl.dur.closing { // cl.dur: durability.go
		// Shutting down: what arrives now is read and dropped, so the
		// kernel holds no unread input when the connection is closed.
		_, _ = c.Discard(-1)
		return gnet.None
	}
	if lim := s.cfg.OutputBufferLimit; lim > 0 && int64(c.OutboundBuffered()) > lim {
		s.log.Warn("closing client over the output buffer limit", "id", cl.id, "addr", cl.addr, "limit", lim)
		return gnet.Close
	}
	queued := len(cl.qbuf) > 0
	var in []byte
	if queued {
		avail := c.InboundBuffered()
		if avail == 0 {
			return gnet.None
		}
		cl.qbuf = growQuery(cl.qbuf, avail, cl.pend.Need())
		m, _ := c.Read(cl.qbuf[len(cl.qbuf) : len(cl.qbuf)+avail])
		cl.qbuf = cl.qbuf[:len(cl.qbuf)+m]
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
		n, closeAfter = l.process(cl, in, now)
	}
	switch {
	case queued && n > 0:
		rest := copy(cl.qbuf, cl.qbuf[n:])
		cl.qbuf = cl.qbuf[:rest]
		if rest == 0 && cap(cl.qbuf) > maxKeptQuery {
			cl.qbuf = nil
		}
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
		if _, err := c.Write(l.out); err != nil {
			action = gnet.Close
		}
		l.out = l.out[:0]
		if cap(l.out) > maxKeptOut {
			l.out = make([]byte, 0, initialOut)
		}
	}
	if closeAfter {
		return gnet.Close
	}
	if lim := s.cfg.OutputBufferLimit; lim > 0 && int64(c.OutboundBuffered()) > lim {
		s.log.Warn("closing client over the output buffer limit", "id", cl.id, "addr", cl.addr, "limit", lim)
		return gnet.Close
	}
	return action
}

// growQuery returns q with room for n more bytes. When the pending frame is
// known to need more than that, the capacity jumps toward the need, but to
// at most queryGrowth times what has arrived: a large frame is copied and
// first touched a bounded number of times (O(frame) in all, close to one
// pass with a factor of 8), and a client that announces a large argument
// and sends little makes the server commit at most that multiple of what it
// sent.
func growQuery(q []byte, n int, need int64) []byte {
	want := len(q) + n
	if want <= cap(q) {
		return q
	}
	c := max(want, 2*cap(q))
	if need > int64(c) {
		c = int(min(need, int64(queryGrowth)*int64(want)))
	}
	grown := make([]byte, len(q), c)
	copy(grown, q)
	return grown
}

// queryGrowth bounds how far past the bytes received a query buffer grows
// toward what the pending frame announced.
const queryGrowth = 8

// OnTick closes idle connections: each loop scans its own connections on
// its own goroutine.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
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

// client is one connection's state. Fields other than name, libName and
// libVer are touched only by the connection's event loop; those three are
// written under Server.mu so that CLIENT LIST on another loop can read them.
type client struct {
	id     int64
	loop   *loop
	conn   gnet.Conn // nil in tests that drive a loop directly
	resp3  bool
	authed bool
	fd     int
	addr   string
	laddr  string
	since  time.Time

	name, libName, libVer string

	// pend is the parser's progress through a command that has not fully
	// arrived; qbuf holds that command's bytes (and what arrived after
	// them) while it does, and is empty between frames.
	pend resp.Pending
	qbuf []byte

	lastCmd    cmdID
	lastActive atomic.Int64

	intro clientIntro // CLIENT REPLY, MONITOR, CLIENT LIST's cmd and resp: client.go
	multi *multiState // MULTI queue and WATCH snapshots, nil until first used: multi.go
	user  *acl.User   // the ACL user; nil until first checked in tests driving a loop: security.go
	dur   clientHold  // replies held until durable: durability.go
}
