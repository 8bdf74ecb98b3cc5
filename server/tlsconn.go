package server

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// serveTLS serves one TLS connection until it closes.
func (s *Server) serveTLS(raw net.Conn, nc *tls.Conn) {
	t := s.tls
	tc := &tlsConn{raw: raw, nc: nc}
	tc.idle.L = &tc.mu
	defer func() { _ = raw.Close() }()
	// Listed from the start, so that Shutdown can interrupt the handshake.
	t.mu.Lock()
	t.conns[tc] = struct{}{}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.conns, tc)
		t.mu.Unlock()
	}()
	select {
	case <-s.drainCh:
		return
	default:
	}
	_ = raw.SetDeadline(time.Now().Add(tlsHandshakeTimeout))
	if err := nc.Handshake(); err != nil {
		s.log.Debug("TLS handshake failed", "addr", raw.RemoteAddr().String(), "err", err)
		return // a plaintext client lands here
	}
	_ = raw.SetDeadline(time.Time{})
	if refusal, ok := s.admit(tc); !ok {
		if refusal != nil {
			_ = raw.SetWriteDeadline(time.Now().Add(tlsHandshakeTimeout))
			_, _ = nc.Write(refusal)
		}
		return
	}
	l := t.takeLoop(s)
	cl := s.addClient(l, tc)
	s.readTLS(l, cl, tc)
	s.forget(cl)
	t.mu.Lock()
	t.free = append(t.free, l)
	t.mu.Unlock()
	tc.closed.Store(true)
	_ = nc.Close() // close_notify after the last reply, then the socket
}

// readTLS is the read loop of one TLS connection: read, answer every
// complete command, write the replies, until the client leaves, a command
// closes the connection, or Shutdown drains it.
func (s *Server) readTLS(l *loop, cl *client, tc *tlsConn) {
	var in []byte // the bytes read and not yet consumed
	timeout := s.cfg.IdleTimeout
	poll := idlePoll(timeout)
	for {
		// The deadline is set before looking at drainCh: Shutdown sets a
		// past deadline after closing drainCh, so either this goroutine sees
		// drainCh closed or its Read is woken. The idle timeout is measured
		// on Config.Clock, as for TCP clients (OnTick): the read deadline
		// only wakes the goroutine to look at it.
		if timeout > 0 {
			_ = tc.raw.SetReadDeadline(time.Now().Add(poll))
		}
		select {
		case <-s.drainCh:
			tc.waitWritten()
			return
		default:
		}
		in = growQuery(in, tlsReadSize, cl.pend.Need())
		m, err := tc.nc.Read(in[len(in):cap(in)])
		in = in[:len(in)+m]
		if m > 0 {
			now := s.now()
			cl.lastActive.Store(now)
			n, closeAfter := 0, false
			if int64(len(in)) >= cl.pend.Wait() {
				n, closeAfter = l.process(cl, in, now)
			}
			in = keepQuery(in, n)
			l.endBatch(n, now)
			s.awaitDurable(cl) // sync persistence: replies wait until durable (durability.go)
			werr := tc.writeReplies(l.out)
			l.out = l.out[:0]
			if cap(l.out) > maxKeptOut {
				l.out = make([]byte, 0, initialOut)
			}
			if closeAfter || werr != nil {
				return
			}
			if lim := s.cfg.OutputBufferLimit; lim > 0 && int64(tc.OutboundBuffered()) > lim {
				s.log.Warn("closing client over the output buffer limit", "id", cl.id, "addr", cl.addr, "limit", lim)
				return
			}
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !tc.closed.Load() {
				select {
				case <-s.drainCh:
					continue // woken by Shutdown: answer nothing more, flush, close
				default:
				}
				if timeout > 0 && cl.lastActive.Load() >= s.now()-int64(timeout) {
					continue // not idle for the timeout yet
				}
				s.log.Debug("closing idle client", "id", cl.id, "addr", cl.addr)
			}
			return
		}
	}
}

// idlePoll is how often a TLS connection waiting for input looks at its
// idle time: as often as OnTick scans the TCP connections.
func idlePoll(timeout time.Duration) time.Duration {
	if timeout/4 < time.Second {
		return max(timeout/4, 10*time.Millisecond)
	}
	return time.Second
}

// tlsConn is a TLS client's connection as handlers see it: it implements
// the methods of gnet.Conn that the command code calls on client.conn
// (Close, AsyncWrite, OutboundBuffered, RemoteAddr, LocalAddr, Fd,
// Context, SetContext); the embedded gnet.Conn is nil, so any other
// method would panic and must not be called on a client's conn.
//
// Writes go through a queue so that a write from another goroutine (a
// MONITOR line) never blocks it: the goroutine that finds no writer active
// becomes the writer and writes until the queue is empty. The connection's
// own goroutine writes its replies itself, blocking while the client does
// not read, which is the back-pressure of a TLS client.
type tlsConn struct {
	gnet.Conn
	raw net.Conn  // the TCP connection under nc
	nc  *tls.Conn // its TLS layer

	mu       sync.Mutex
	idle     sync.Cond // signalled when writing ends; uses mu
	queued   []byte    // bytes waiting for the writer
	spare    []byte    // the writer's previous buffer, reused
	inflight int       // bytes being written by the writer
	writing  bool
	werr     error // the first write error: the connection is dead

	closed atomic.Bool
	ctx    any
}

// writeReplies queues p (copied) and writes, on the calling goroutine,
// everything queued unless another goroutine is already writing. It
// returns the write error, if any.
func (c *tlsConn) writeReplies(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	c.mu.Lock()
	if c.werr != nil {
		err := c.werr
		c.mu.Unlock()
		return err
	}
	if c.writing {
		c.queued = append(c.queued, p...)
		c.mu.Unlock()
		return nil
	}
	c.writing = true
	if len(c.queued) == 0 {
		// The common case: nothing queued, write p in place.
		c.inflight = len(p)
		c.mu.Unlock()
		_, err := c.nc.Write(p)
		c.mu.Lock()
		c.inflight = 0
		if err != nil {
			c.fail(err)
		}
	} else {
		c.queued = append(c.queued, p...)
	}
	c.mu.Unlock()
	return c.flush()
}

// flush writes the queue until it is empty; the caller has set writing.
func (c *tlsConn) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.queued) > 0 && c.werr == nil {
		buf := c.queued
		c.queued = c.spare[:0]
		c.inflight = len(buf)
		c.mu.Unlock()
		_, err := c.nc.Write(buf)
		c.mu.Lock()
		c.inflight = 0
		c.spare = buf[:0]
		if err != nil {
			c.fail(err)
		}
	}
	c.writing = false
	c.idle.Broadcast()
	return c.werr
}

// fail records a write error and closes the socket; c.mu is held.
func (c *tlsConn) fail(err error) {
	if c.werr == nil {
		c.werr = err
	}
	c.queued = nil
	_ = c.raw.Close()
}

// waitWritten waits until no write is in progress and nothing is queued.
func (c *tlsConn) waitWritten() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.writing || (len(c.queued) > 0 && c.werr == nil) {
		if !c.writing {
			c.writing = true
			c.mu.Unlock()
			_ = c.flush()
			c.mu.Lock()
			continue
		}
		c.idle.Wait()
	}
}

// AsyncWrite queues p to be written after the bytes already queued and
// returns at once; safe from any goroutine. cb, if not nil, is called with
// c once p is queued (as gnet calls it once p is in its outbound buffer).
func (c *tlsConn) AsyncWrite(p []byte, cb gnet.AsyncCallback) error {
	if c.closed.Load() {
		return net.ErrClosed
	}
	c.mu.Lock()
	if c.werr != nil {
		err := c.werr
		c.mu.Unlock()
		return err
	}
	c.queued = append(c.queued, p...)
	start := !c.writing
	c.writing = true
	c.mu.Unlock()
	if start {
		go func() { _ = c.flush() }()
	}
	if cb != nil {
		return cb(c, nil)
	}
	return nil
}

// OutboundBuffered returns the bytes queued or being written; safe from
// any goroutine.
func (c *tlsConn) OutboundBuffered() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queued) + c.inflight
}

// Close closes the connection at once, unsent bytes included; safe from
// any goroutine. The connection's goroutine then forgets the client.
func (c *tlsConn) Close() error {
	c.closed.Store(true)
	return c.raw.Close()
}

// RemoteAddr returns the client's address.
func (c *tlsConn) RemoteAddr() net.Addr { return c.raw.RemoteAddr() }

// LocalAddr returns the listener's side of the connection.
func (c *tlsConn) LocalAddr() net.Addr { return c.raw.LocalAddr() }

// Fd returns the socket's file descriptor, or -1 if it is not known.
func (c *tlsConn) Fd() int {
	tc, ok := c.raw.(*net.TCPConn)
	if !ok {
		return -1
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	_ = rc.Control(func(f uintptr) { fd = int(f) })
	return fd
}

// Context returns the value set by SetContext.
func (c *tlsConn) Context() any { return c.ctx }

// SetContext stores a value with the connection.
func (c *tlsConn) SetContext(v any) { c.ctx = v }
