package server

import (
	"context"
	"errors"
	"time"

	"github.com/panjf2000/gnet/v2"
	gerrors "github.com/panjf2000/gnet/v2/pkg/errors"
)

// Shutdown stops the server in three steps and makes Serve return:
//
//  1. It stops accepting: the TLS listener is closed, and a connection the
//     TCP listener still accepts is closed at once without a reply.
//  2. Every command already read is answered: a batch being processed
//     completes, and its replies are queued. Bytes that arrive after this
//     point are read and discarded, not answered.
//  3. It waits until each connection's queued replies have all been
//     handed to the kernel, then closes that connection. Closing a socket
//     does not discard what the kernel holds: the client receives every
//     reply, each complete, then EOF.
//
// If ctx ends before every connection has drained (a client that does not
// read), the connections left are closed at once and Shutdown returns
// ctx's error. Such a client may then see its last reply cut: it receives
// the bytes the kernel had accepted, which can end anywhere in a reply,
// then EOF or a reset. Replies that were complete in the kernel are never
// lost, except that a client which kept sending during the shutdown can
// get a reset (the kernel's answer to closing a socket with unread input)
// instead of its pending bytes.
func (s *Server) Shutdown(ctx context.Context) error {
	s.ready.Store(false)
	s.mu.Lock()
	s.stopping = true
	booted := s.booted
	s.mu.Unlock()
	s.drained.Do(func() { close(s.drainCh) })
	if !booted && !s.serving.Load() {
		return nil // a later Serve boots and stops at once
	}
	if !booted {
		select {
		case <-s.bootCh:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.mu.Lock()
	eng := s.eng
	s.mu.Unlock()
	var tlsDone chan error
	if s.tls != nil {
		tlsDone = make(chan error, 1)
		go func() { tlsDone <- s.tls.drain(ctx) }()
	}
	var errs []error
	if eng.Validate() == nil { // else Serve failed before booting, or already stopped
		errs = append(errs, s.drainLoops(ctx))
	}
	if tlsDone != nil {
		errs = append(errs, <-tlsDone)
	}
	if eng.Validate() == nil {
		// Every connection is closed or being closed: stopping the engine
		// takes one pass of each loop, bounded anyway in case ctx has ended.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopGrace)
		err := eng.Stop(sctx)
		cancel()
		if !errors.Is(err, gerrors.ErrEngineInShutdown) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// stopGrace bounds how long Shutdown waits for the event loops to exit
// once every connection is closed.
const stopGrace = 5 * time.Second

// drainPoll is how often Shutdown asks the event loops whether their
// connections have drained. gnet has no event for an emptied outbound
// buffer; a poll costs one task per loop.
const drainPoll = 2 * time.Millisecond

// drainLoops closes every connection of the event loops as soon as its
// outbound buffer is empty, until none is left, or closes them all when ctx
// ends and returns ctx's error.
func (s *Server) drainLoops(ctx context.Context) error {
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for {
		left, err := s.closeDrained(ctx, false)
		if err == nil && left == 0 {
			return nil
		}
		if err == nil {
			select {
			case <-tick.C:
				continue
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		_, _ = s.closeDrained(context.WithoutCancel(ctx), true)
		return err
	}
}

// closeDrained runs on every event loop a task that marks the loop
// draining and closes its connections whose outbound buffer is empty (all
// of them when force). It returns how many connections still hold replies.
func (s *Server) closeDrained(ctx context.Context, force bool) (int, error) {
	s.loopsMu.Lock()
	loops := append([]*loop(nil), s.loops...)
	s.loopsMu.Unlock()
	res := make(chan int, len(loops))
	asked := 0
	for _, l := range loops {
		if l.el == nil {
			continue // a TLS connection's loop drains itself (tls.go)
		}
		err := l.el.Execute(ctx, gnet.RunnableFunc(func(context.Context) error {
			l.draining = true
			left := 0
			for cl := range l.conns {
				if force || (cl.conn.OutboundBuffered() == 0 && !cl.outq.pending()) {
					_ = cl.conn.Close() // gnet writes nothing more: the buffer is empty
				} else {
					left++
				}
			}
			res <- left
			return nil
		}))
		if err == nil {
			asked++
		}
	}
	total := 0
	for range asked {
		select {
		case n := <-res:
			total += n
		case <-ctx.Done():
			return total, ctx.Err()
		}
	}
	return total, nil
}
