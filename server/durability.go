package server

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/panjf2000/gnet/v2"
)

// Durability connects the server to a persistence layer (package persist,
// wired in the command). The server asks it three things, all without
// blocking an event loop:
//
//   - whether to refuse changing commands now (the closed failure policy
//     while the backend fails): they get "-TRYAGAIN persistence
//     unavailable" and change nothing;
//   - after a read batch that ran a changing command, a ticket to wait for
//     and whether to wait at all (sync mode; not while an open policy is
//     riding out an outage);
//   - whether the replies held for a ticket may go now.
//
// Holding works per connection: the batch's replies, and those of every
// later batch of the same connection (replies keep their order), wait in
// the connection's own buffer instead of being written, each batch marked
// with its ticket so that they leave batch by batch as tickets become
// durable. The persistence
// layer calls Server.NotifyDurable when a write completes or fails; each
// event loop holding replies then gets one task (gnet's Execute) that
// writes the buffers whose ticket Released accepts. A connection keeps
// being read while it waits, so a pipelining client adds to the same
// group commit; its held bytes count against OutputBufferLimit. The cost
// in sync mode is one Commit (an atomic add and a non-blocking channel
// send) per changing batch and a copy of its replies; with Durability nil
// or in async mode the hot path pays one pointer test per command.
type Durability interface {
	// Refusing reports whether changing commands must be refused now.
	Refusing() bool
	// Commit is called once after a read batch that ran a changing
	// command. It returns the ticket to wait for, and false when the
	// replies need not wait (async mode, or sync mode with the open
	// policy while the backend fails). It must not block.
	Commit() (ticket uint64, hold bool)
	// Released reports whether replies held for ticket may be written: the
	// ticket is durable, or the policy gives up waiting (open, failing).
	Released(ticket uint64) bool
	// InfoFields returns the key/value lines INFO persistence shows after
	// loading (backend, mode, lag, dirty keys, ...).
	InfoFields() [][2]string
}

// Error replies of the durability checks.
const (
	errLoadingMsg  = "Redis is loading the dataset in memory"
	errTryAgainMsg = "persistence unavailable"
)

// durState is the server's side of durability: the loading flag and, per
// event loop, the connections holding replies.
type durState struct {
	loading atomic.Bool

	mu    sync.Mutex
	loops map[*loop]*heldLoop // loops that have held replies at least once
	wake  chan struct{}       // closed by NotifyDurable: wakes awaitDurable
}

// heldLoop is one event loop's connections holding replies. clients is
// touched only on the loop's goroutine; scheduled says a release task is
// already queued on the loop, so a burst of commits queues one task.
type heldLoop struct {
	l         *loop
	scheduled atomic.Bool
	waiting   atomic.Int32 // len(clients), readable from any goroutine
	clients   map[*client]struct{}
}

// clientHold is a connection's held replies (client.dur), touched only on
// its loop's goroutine.
type clientHold struct {
	held    *heldLoop  // the connection's loop's held set, once looked up
	wrote   bool       // the batch being processed ran a changing command
	out     []byte     // held replies, in order
	marks   []heldMark // where each held batch's replies end in out, and its ticket
	waiting bool       // the connection is in its loop's held set
	closing bool       // close once the held replies are written; ignore input meanwhile
}

// heldMark ends a run of held replies that wait for one ticket. Tickets
// never decrease along a connection's marks.
type heldMark struct {
	end    int
	ticket uint64
	pend   *parked // a reply parked after the run's bytes (park.go), or nil
}

// SetLoading marks the server as loading its state: until SetLoading(false)
// every command but those Redis allows while loading (INFO, PING, HELLO,
// AUTH, SELECT, CLIENT, COMMAND, QUIT, ...) is answered "-LOADING Redis is
// loading the dataset in memory", and INFO persistence shows loading:1.
// Call it before Serve to load while the listener is up.
func (s *Server) SetLoading(on bool) { s.dur.loading.Store(on) }

// Loading reports whether the server is loading its state (see SetLoading).
func (s *Server) Loading() bool { return s.dur.loading.Load() }

// NotifyDurable tells the server that a persistence write completed or
// failed: every event loop holding replies checks them again on its own
// goroutine. It never blocks; call it from the persistence layer's commit
// and error callbacks.
func (s *Server) NotifyDurable() {
	s.dur.mu.Lock()
	defer s.dur.mu.Unlock()
	if s.dur.wake != nil {
		close(s.dur.wake)
		s.dur.wake = nil
	}
	for l, h := range s.dur.loops {
		if h.waiting.Load() == 0 || !h.scheduled.CompareAndSwap(false, true) {
			continue
		}
		if l.el == nil {
			h.scheduled.Store(false)
			continue
		}
		l, h := l, h
		err := l.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			s.releaseHeld(h)
			return nil
		}))
		if err != nil { // shutting down: the connections are being closed anyway
			h.scheduled.Store(false)
		}
	}
}

// awaitDurable is holdBatch for connections served by a goroutine of
// their own (TLS, tls.go): after a batch that changed state it blocks that
// goroutine, not an event loop, until Released accepts the batch's ticket
// or the server drains. Call it before writing the batch's replies.
func (s *Server) awaitDurable(cl *client) {
	d := s.cfg.Durability
	if d == nil || !cl.dur.wrote {
		return
	}
	cl.dur.wrote = false
	t, hold := d.Commit()
	if !hold {
		return
	}
	for {
		s.dur.mu.Lock()
		if s.dur.wake == nil {
			s.dur.wake = make(chan struct{})
		}
		wake := s.dur.wake
		s.dur.mu.Unlock()
		if d.Released(t) {
			return
		}
		select {
		case <-wake:
		case <-s.drainCh:
			return
		}
	}
}

// heldOf returns l's held set, creating it on first use.
func (s *Server) heldOf(l *loop) *heldLoop {
	s.dur.mu.Lock()
	defer s.dur.mu.Unlock()
	h := s.dur.loops[l]
	if h == nil {
		if s.dur.loops == nil {
			s.dur.loops = make(map[*loop]*heldLoop)
		}
		h = &heldLoop{l: l, clients: make(map[*client]struct{})}
		s.dur.loops[l] = h
	}
	return h
}

// durabilityActive reports whether checkDurability has anything to do: the
// server is loading its state or persistence is on.
func (s *Server) durabilityActive() bool { return s.dur.loading.Load() || s.cfg.Durability != nil }

// checkDurability runs before a command (dispatch): it refuses it while
// loading or while changes are refused, and marks the batch as changing.
// It reports whether the command was refused (its error reply appended).
// It does nothing unless durabilityActive, which dispatch tests first so
// that the common case costs no call.
func (l *loop) checkDurability(cl *client, id cmdID, spec *cmdSpec) bool {
	s := l.srv
	if s.dur.loading.Load() && spec.flags&flagLoading == 0 && id != cmdPing {
		l.errorReply("LOADING", errLoadingMsg)
		return true
	}
	d := s.cfg.Durability
	if d == nil {
		return false
	}
	write := spec.flags&flagWrite != 0 || (id == cmdExec && cl.inMulti() && queuedWrite(cl.multi))
	if !write {
		return false
	}
	if d.Refusing() {
		if id == cmdExec {
			endMulti(cl)
		}
		l.errorReply("TRYAGAIN", errTryAgainMsg)
		return true
	}
	cl.dur.wrote = true
	return false
}

// queuedWrite reports whether a MULTI queue holds a changing command.
func queuedWrite(m *multiState) bool {
	i := 0
	for _, n := range m.argc {
		start := 0
		if i > 0 {
			start = m.ends[i-1]
		}
		if sp := resolveName(m.buf[start:m.ends[i]]); sp != nil && sp.flags&flagWrite != 0 {
			return true
		}
		i += int(n)
	}
	return false
}

// resolveName returns the table entry of a command name, or nil. A
// container's subcommands never change state, so the container is enough.
func resolveName(name []byte) *cmdSpec {
	id, ok := lookup(name)
	if !ok {
		return nil
	}
	return &commandTable[id]
}

// holdBatch is OnTraffic's hook between processing a batch and writing
// its replies in l.out. It reports whether the replies were held (then
// OnTraffic writes nothing and returns action). Replies are held when the
// batch changed state and Durability asks to wait, or when earlier replies
// of the connection are still held (order is kept). Each batch's replies
// keep their own ticket, so a client that pipelines without pause gets the
// replies of each batch as soon as that batch is durable, not once the
// newest one is.
func (s *Server) holdBatch(l *loop, cl *client, closeAfter bool) (held bool, action gnet.Action) {
	d := s.cfg.Durability
	if d == nil && !cl.dur.waiting { // cl.dur.waiting without d: parked replies (park.go)
		return false, gnet.None
	}
	var ticket uint64
	if cl.dur.wrote {
		cl.dur.wrote = false
		// The loop's set counts the connection before the ticket exists,
		// so a commit that completes at once still finds the loop waiting
		// and queues a release task, which runs after this callback has
		// put the connection in the set.
		h := cl.dur.held
		if h == nil {
			h = s.heldOf(l) // takes the server-wide lock: once per connection
			cl.dur.held = h
		}
		h.waiting.Add(1)
		t, hold := d.Commit()
		if hold && !cl.dur.waiting {
			cl.dur.waiting = true
			h.clients[cl] = struct{}{}
		} else {
			h.waiting.Add(-1)
		}
		if hold {
			ticket = t
		}
	}
	if !cl.dur.waiting {
		return false, gnet.None
	}
	if n := len(cl.dur.marks); n > 0 {
		// A batch never goes before the one held ahead of it.
		ticket = max(ticket, cl.dur.marks[n-1].ticket)
	}
	cl.dur.out = append(cl.dur.out, l.out...)
	if n := len(cl.dur.marks); n > 0 && cl.dur.marks[n-1].ticket == ticket && cl.dur.marks[n-1].pend == nil {
		cl.dur.marks[n-1].end = len(cl.dur.out)
	} else {
		cl.dur.marks = append(cl.dur.marks, heldMark{end: len(cl.dur.out), ticket: ticket})
	}
	cl.dur.closing = cl.dur.closing || closeAfter
	l.out = l.out[:0]
	return true, s.heldLimit(cl)
}

// heldLimit closes a connection whose held replies exceed the output
// buffer limit, as unsent replies in gnet's buffer would.
func (s *Server) heldLimit(cl *client) gnet.Action {
	if lim := s.cfg.OutputBufferLimit; lim > 0 && int64(len(cl.dur.out)) > lim {
		s.log.Warn("closing client over the output buffer limit", "id", cl.id, "addr", cl.addr, "limit", lim)
		return gnet.Close
	}
	return gnet.None
}

// releaseHeld runs on a loop's goroutine: it writes the held replies whose
// ticket is released, in order, and forgets the connections left with
// none.
func (s *Server) releaseHeld(h *heldLoop) {
	h.scheduled.Store(false)
	for cl := range h.clients {
		marks := cl.dur.marks
		n := 0
		for n < len(marks) && s.released(&marks[n]) {
			n++
		}
		if n == 0 {
			continue
		}
		end := marks[n-1].end
		if n == len(marks) {
			delete(h.clients, cl)
			h.waiting.Add(-1)
			cl.dur.waiting = false
		}
		s.writeHeld(cl, end, n)
	}
}

// writeHeld writes a connection's first end bytes of held replies (its
// first n marks), keeps the rest, and closes the connection once nothing
// is held if it asked to be closed.
func (s *Server) writeHeld(cl *client, end, n int) {
	var err error
	buf := cl.dur.out[:end]
	parked := false
	for i := 0; i < n; i++ {
		parked = parked || cl.dur.marks[i].pend != nil
	}
	if parked {
		buf = cl.loop.renderHeld(cl, n) // park.go
	}
	if len(buf) > 0 {
		_, err = cl.conn.Write(buf)
	}
	if parked {
		cl.loop.out = cl.loop.out[:0]
	}
	rest := copy(cl.dur.out, cl.dur.out[end:])
	cl.dur.out = cl.dur.out[:rest]
	m := copy(cl.dur.marks, cl.dur.marks[n:])
	cl.dur.marks = cl.dur.marks[:m]
	for i := range cl.dur.marks {
		cl.dur.marks[i].end -= end
	}
	if rest == 0 && cap(cl.dur.out) > maxKeptOut {
		cl.dur.out = nil
	}
	if err != nil || (cl.dur.closing && !cl.dur.waiting) {
		_ = cl.conn.Close()
	}
}

// dropHeld forgets a closed connection's held replies (OnClose).
func (s *Server) dropHeld(cl *client) {
	if !cl.dur.waiting {
		return
	}
	if h := cl.dur.held; h != nil {
		delete(h.clients, cl)
		h.waiting.Add(-1)
	}
	cl.dur = clientHold{}
}

// writeDurabilityInfo adds the persistence fields of INFO after loading.
func (s *Server) writeDurabilityInfo(kv func(k string, v any)) {
	if d := s.cfg.Durability; d != nil {
		for _, f := range d.InfoFields() {
			kv(f[0], f[1])
		}
	}
}

// loadingInfo is INFO's loading field.
func (s *Server) loadingInfo() int {
	if s.dur.loading.Load() {
		return 1
	}
	return 0
}
