package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	gerrors "github.com/panjf2000/gnet/v2/pkg/errors"
	"golang.org/x/sys/unix"

	"github.com/throttlekit/throttlekit-server/shard"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultMaxClients      = 10000
	DefaultMaxArgs         = 1024 * 1024
	DefaultProtoMaxBulkLen = 512 * 1024 * 1024
)

// Config sets up a Server. Zero fields take defaults: Loops = GOMAXPROCS,
// MaxClients = DefaultMaxClients, MaxArgs = DefaultMaxArgs, ProtoMaxBulkLen =
// DefaultProtoMaxBulkLen; a zero OutputBufferLimit or IdleTimeout means no
// limit; an empty RequirePass means no authentication.
type Config struct {
	Addr              string        // TCP address, e.g. "127.0.0.1:6380"
	Loops             int           // event loops
	MaxClients        int           // connections served at once; more are refused
	MaxArgs           int           // arguments in one command
	ProtoMaxBulkLen   int64         // bytes in one bulk string
	OutputBufferLimit int64         // bytes of replies queued for one client before it is closed
	IdleTimeout       time.Duration // idle connections are closed after this
	RequirePass       string        // password of AUTH/HELLO for the default user
	Logger            *slog.Logger  // nil: discard
	Version           string        // reported by INFO and HELLO

	// ConfigGet, if set, answers CONFIG GET: the settings whose name matches
	// the glob pattern, as name/value pairs.
	ConfigGet func(pattern string) [][2]string
}

// Server is a RESP server over a shard.Store. Create it with New, run it
// with Serve and stop it with Shutdown.
type Server struct {
	cfg   Config
	store *shard.Store
	log   *slog.Logger
	start time.Time

	connsCurrent, connsAccepted, connsRejected atomic.Int64
	nextID                                     atomic.Int64

	ready   atomic.Bool
	serving atomic.Bool // Serve was called

	mu       sync.Mutex // guards eng, booted, stopping, clients and client names
	eng      gnet.Engine
	booted   bool
	stopping bool
	bootCh   chan struct{}
	clients  map[int64]*client

	loopsMu sync.Mutex
	loops   []*loop
	byLoop  map[gnet.EventLoop]*loop

	addr atomic.Pointer[net.TCPAddr]

	gnet.BuiltinEventEngine
}

// New checks cfg and returns a Server that serves store.
func New(cfg Config, store *shard.Store) (*Server, error) {
	if store == nil {
		return nil, errors.New("server: nil store")
	}
	if cfg.Addr == "" {
		return nil, errors.New("server: empty address")
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("server: bad address %q: %w", cfg.Addr, err)
	}
	if cfg.Loops < 0 || cfg.MaxClients < 0 || cfg.MaxArgs < 0 || cfg.ProtoMaxBulkLen < 0 ||
		cfg.OutputBufferLimit < 0 || cfg.IdleTimeout < 0 {
		return nil, errors.New("server: negative limit in config")
	}
	if cfg.Loops == 0 {
		cfg.Loops = runtime.GOMAXPROCS(0)
	}
	if cfg.MaxClients == 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.MaxArgs == 0 {
		cfg.MaxArgs = DefaultMaxArgs
	}
	if cfg.ProtoMaxBulkLen == 0 {
		cfg.ProtoMaxBulkLen = DefaultProtoMaxBulkLen
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	return &Server{
		cfg:     cfg,
		store:   store,
		log:     cfg.Logger,
		start:   time.Now(),
		bootCh:  make(chan struct{}),
		clients: make(map[int64]*client),
		byLoop:  make(map[gnet.EventLoop]*loop),
	}, nil
}

// Serve listens on Config.Addr and serves until Shutdown. It returns nil
// after a clean stop, or the error that kept it from listening.
func (s *Server) Serve() error {
	s.serving.Store(true)
	opts := []gnet.Option{
		gnet.WithMulticore(true),
		gnet.WithNumEventLoop(s.cfg.Loops),
		gnet.WithReuseAddr(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithTicker(s.cfg.IdleTimeout > 0),
		gnet.WithLogger(gnetLogger{s.log}),
	}
	err := gnet.Run(s, "tcp://"+s.cfg.Addr, opts...)
	s.ready.Store(false)
	s.mu.Lock()
	stopping := s.stopping
	if !s.booted {
		s.booted = true
		close(s.bootCh)
	}
	s.mu.Unlock()
	if err != nil && stopping && errors.Is(err, gerrors.ErrEngineInShutdown) {
		return nil
	}
	return err
}

// Ready reports whether the server accepts commands.
func (s *Server) Ready() bool { return s.ready.Load() }

// Addr returns the address the server listens on once it is ready (useful
// with port 0), or nil.
func (s *Server) Addr() net.Addr {
	if a := s.addr.Load(); a != nil {
		return a
	}
	return nil
}

// Shutdown stops accepting connections, answers every command already read,
// flushes pending replies, closes the connections and makes Serve return.
// It returns ctx's error if that takes longer than ctx allows.
func (s *Server) Shutdown(ctx context.Context) error {
	s.ready.Store(false)
	s.mu.Lock()
	s.stopping = true
	booted := s.booted
	s.mu.Unlock()
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
	if eng.Validate() != nil { // Serve failed before booting, or already stopped
		return nil
	}
	err := eng.Stop(ctx)
	if errors.Is(err, gerrors.ErrEngineInShutdown) {
		return nil
	}
	return err
}

// OnBoot records the engine and marks the server ready.
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.mu.Lock()
	s.eng = eng
	stopping := s.stopping
	s.booted = true
	close(s.bootCh)
	s.mu.Unlock()
	if fd, err := eng.Dup(); err == nil {
		if sa, err := unix.Getsockname(fd); err == nil {
			if in4, ok := sa.(*unix.SockaddrInet4); ok {
				s.addr.Store(&net.TCPAddr{IP: net.IP(in4.Addr[:]).To16(), Port: in4.Port})
			} else if in6, ok := sa.(*unix.SockaddrInet6); ok {
				s.addr.Store(&net.TCPAddr{IP: net.IP(in6.Addr[:]), Port: in6.Port})
			}
		}
		_ = unix.Close(fd)
	}
	if stopping {
		return gnet.Shutdown
	}
	s.ready.Store(true)
	s.log.Info("listening", "addr", s.cfg.Addr, "loops", s.cfg.Loops, "version", s.cfg.Version)
	return gnet.None
}

// loopOf returns the per-loop state of el, creating it on first use.
func (s *Server) loopOf(el gnet.EventLoop) *loop {
	s.loopsMu.Lock()
	defer s.loopsMu.Unlock()
	l := s.byLoop[el]
	if l == nil {
		l = newLoop(s)
		l.el = el
		s.byLoop[el] = l
		s.loops = append(s.loops, l)
	}
	return l
}

const errMaxClients = "-ERR max number of clients reached\r\n"

// OnOpen admits a connection or refuses it when MaxClients are connected.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if s.connsCurrent.Add(1) > int64(s.cfg.MaxClients) {
		s.connsCurrent.Add(-1)
		s.connsRejected.Add(1)
		return []byte(errMaxClients), gnet.Close
	}
	s.connsAccepted.Add(1)
	l := s.loopOf(c.EventLoop())
	cl := &client{
		id:     s.nextID.Add(1),
		loop:   l,
		conn:   c,
		authed: s.cfg.RequirePass == "",
		since:  time.Now(),
		fd:     c.Fd(),
	}
	if a := c.RemoteAddr(); a != nil {
		cl.addr = a.String()
	}
	if a := c.LocalAddr(); a != nil {
		cl.laddr = a.String()
	}
	cl.lastActive.Store(cl.since.UnixNano())
	c.SetContext(cl)
	l.conns[cl] = struct{}{}
	s.mu.Lock()
	s.clients[cl.id] = cl
	s.mu.Unlock()
	return nil, gnet.None
}

// OnClose forgets a connection.
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	cl, _ := c.Context().(*client)
	if cl == nil {
		return gnet.None // refused in OnOpen
	}
	c.SetContext(nil)
	s.connsCurrent.Add(-1)
	delete(cl.loop.conns, cl)
	s.mu.Lock()
	delete(s.clients, cl.id)
	s.mu.Unlock()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, unix.ECONNRESET) {
		s.log.Debug("connection closed", "id", cl.id, "addr", cl.addr, "err", err)
	}
	return gnet.None
}

// OnTraffic answers every complete command in the connection's input with
// one write, keeping a partial command for the next read.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	cl, _ := c.Context().(*client)
	if cl == nil {
		return gnet.Close
	}
	l := cl.loop
	if lim := s.cfg.OutputBufferLimit; lim > 0 && int64(c.OutboundBuffered()) > lim {
		s.log.Warn("closing client over the output buffer limit", "id", cl.id, "addr", cl.addr, "limit", lim)
		return gnet.Close
	}
	in, err := c.Peek(-1)
	if err != nil || len(in) == 0 {
		return gnet.None
	}
	start := time.Now()
	cl.lastActive.Store(start.UnixNano())
	n, closeAfter := l.process(cl, in, start.UnixNano())
	if n > 0 {
		_, _ = c.Discard(n)
	}
	// Counters are published before the write, so a client that has read a
	// reply sees it counted in Stats.
	l.ctr.bytesIn += int64(n)
	l.ctr.bytesOut += int64(len(l.out))
	l.ctr.observe(int64(time.Since(start)), l.batchCmds)
	l.batchCmds = 0
	l.ctr.flush(&l.pub)
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
	deadline := time.Now().Add(-timeout).UnixNano()
	for _, l := range loops {
		l := l
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

	lastCmd    cmdID
	lastActive atomic.Int64
}

// gnetLogger routes gnet's own log lines to slog.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(f string, a ...any) { g.l.Debug(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Infof(f string, a ...any)  { g.l.Debug(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Warnf(f string, a ...any)  { g.l.Warn(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Errorf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Fatalf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...)) }
