package server

import (
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

	"github.com/throttlekit/throttlekit-server/internal/clock"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/policy"
	"github.com/throttlekit/throttlekit-server/shard"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultMaxClients = 10000
	DefaultMaxArgs    = 1024 * 1024

	// DefaultProtoMaxBulkLen bounds one bulk argument. A rate limiter's
	// arguments are keys and numbers; 64 MiB (Redis allows 512 MiB) still
	// takes any key a client could mean while bounding what one argument
	// may make the server hold.
	DefaultProtoMaxBulkLen = 64 * 1024 * 1024

	// DefaultQueryBufferLimit bounds the bytes of one command that has not
	// fully arrived (Redis calls it client-query-buffer-limit and defaults
	// to 1 GB). A rate limiter's commands are a few hundred bytes, and the
	// largest legitimate ones (THROTTLE.RESET of many keys) a few
	// megabytes; 128 MiB is twice DefaultProtoMaxBulkLen, so one argument
	// of the largest default size is accepted with room for the rest of
	// its command, while what a slow or hostile client can make one
	// connection hold stays bounded.
	DefaultQueryBufferLimit = 128 * 1024 * 1024

	// DefaultShutdownTimeout is how long Shutdown's caller in the command
	// waits for clients to read their pending replies.
	DefaultShutdownTimeout = 10 * time.Second

	// QueryHeaderRoom is what a command needs in its query buffer besides
	// its largest bulk: the headers and a few small arguments. New refuses
	// a QueryBufferLimit below ProtoMaxBulkLen plus this, which would make
	// the bulk length limit unreachable.
	QueryHeaderRoom = 64 * 1024
)

// Config sets up a Server. Zero fields take defaults: Loops = GOMAXPROCS,
// MaxClients = DefaultMaxClients, MaxArgs = DefaultMaxArgs, ProtoMaxBulkLen =
// DefaultProtoMaxBulkLen, QueryBufferLimit = DefaultQueryBufferLimit; a zero
// OutputBufferLimit or IdleTimeout means no limit; an empty RequirePass
// means no authentication.
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

	// Durability, if set, connects a persistence layer: changing commands
	// refused while it fails (closed policy) and replies held until their
	// changes are durable (sync mode). See durability.go.
	Durability Durability

	// Upstream, if its New is set, serves every limit operation from a
	// backend over an upstream Redis or Redis Cluster (park.go): replies
	// wait for it without blocking an event loop. It excludes Durability
	// (the upstream is the durable state).
	Upstream UpstreamConfig

	// Clock returns "now" in Unix nanoseconds for every decision, for the
	// idle timeout of TCP and TLS clients and for the latency the server
	// measures. nil means clock.New(): a monotonic clock anchored to the
	// wall clock when New runs, so a step of the wall clock cannot grant a
	// second budget. Tests inject their own to drive time.
	Clock func() int64

	// EnableDebugCommand says who may run DEBUG (cmd_debug.go), as Redis 7's
	// enable-debug-command: DebugNo (the zero value) refuses it to every
	// client, DebugLocal allows it from 127.0.0.1 and ::1, DebugYes from
	// anywhere. When it is not DebugNo, the server's clock is DebugClock,
	// which DEBUG SET-CLOCK and ADVANCE-CLOCK move; New makes one over
	// Clock if DebugClock is nil. With DebugNo, DebugClock is ignored and
	// the server reads Clock directly.
	EnableDebugCommand DebugCommand

	// DebugClock, if set, is the clock DEBUG moves, for a caller whose other
	// readers of the time (the store's sweeper, persistence) must move with
	// the server's: give them its Now. It replaces Clock.
	DebugClock *clock.Manual

	// TLS (tls.go): a second listener on TLSAddr serves the same commands
	// over crypto/tls. See TLSConfig.
	TLS TLSConfig

	// QueryBufferLimit bounds the bytes one client's incomplete command may
	// occupy: counted from what its headers announce (a frame that cannot
	// fit is refused when its header arrives) and from what has arrived.
	// Over it the client gets "-ERR Protocol error: client reached max
	// query buffer length" and is closed. Complete commands never wait in
	// that buffer: a pipeline of any length is answered as it arrives.
	QueryBufferLimit int64

	// MaxKeyLen bounds the bytes of a key: a command naming a longer key gets
	// "-ERR key is too long" and changes nothing. 0 means shard.MaxKeyLen,
	// the longest key the store can hold; larger values are refused by New.
	MaxKeyLen int

	// MaxMemory is the store's bound in bytes (shard.Config.MaxMemory, the
	// maxmemory setting), reported by INFO memory; 0 means none. The store
	// enforces it; the server only shows it.
	MaxMemory int64

	// AdmissionMaxRecords and AdmissionMaxMemory bound the records the
	// admission commands keep (held slots, open reservations, ban counts;
	// see package limits): a full record store refuses new slots and
	// reservations with -OOM rather than drop a held one. 0 means
	// DefaultAdmissionMaxRecords and DefaultAdmissionMaxMemory.
	AdmissionMaxRecords int
	AdmissionMaxMemory  int64

	// Access control (security.go). RequirePass is the default user's
	// password; ACLFile, if set, holds the users in Redis's ACL file format
	// (loaded by New and ACL LOAD, written by ACL SAVE). ACLLogMaxLen
	// bounds ACL LOG (0: DefaultACLLogMaxLen, negative: no entries).
	// ProtectedMode refuses connections from addresses other than
	// 127.0.0.1 and ::1 while the default user has no password.
	// AuthFailLimit failed AUTH attempts per client IP are allowed per
	// AuthFailPeriod (0: DefaultAuthFailLimit and DefaultAuthFailPeriod; a
	// negative limit turns the limit off).
	ACLFile        string
	ACLLogMaxLen   int
	ProtectedMode  bool
	AuthFailLimit  int
	AuthFailPeriod time.Duration

	// Slow log and latency monitor (cmd_slowlog.go, cmd_latency.go).
	// SlowlogLogSlowerThan is the duration from which a command is logged
	// (0: DefaultSlowlogLogSlowerThan; negative: off); SlowlogLogAll logs
	// every command (Redis's slowlog-log-slower-than 0). SlowlogMaxLen
	// bounds the log (0: DefaultSlowlogMaxLen; negative: no entries).
	// LatencyMonitorThreshold is the duration from which the latency
	// monitor samples an event, in whole milliseconds; 0 turns it off.
	SlowlogLogSlowerThan    time.Duration
	SlowlogLogAll           bool
	SlowlogMaxLen           int
	LatencyMonitorThreshold time.Duration
	// Policies, if set, holds the named policies (the --policies file or
	// directory, package policy) that THROTTLE.CHECK, PEEK and LEASE take
	// with POLICY domain/name and THROTTLE.POLICIES lists (cmd_policy.go);
	// *policy.Store implements it. nil: POLICY is refused.
	Policies interface{ Current() *policy.Set }

	// GRPCInfo, if set, gives the lines of INFO's grpc section (the gRPC
	// front's address, counters and policy reloads) as name/value pairs;
	// nil: the section says grpc_enabled:0.
	GRPCInfo func() [][2]string
}

// Server is a RESP server over a shard.Store. Create it with New, run it
// with Serve and stop it with Shutdown.
type Server struct {
	cfg   Config
	log   *slog.Logger
	start time.Time

	connsCurrent, connsAccepted, connsRejected atomic.Int64
	nextID                                     atomic.Int64

	ready   atomic.Bool
	serving atomic.Bool // Serve was called
	dur     durState    // loading flag and held replies: durability.go

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

	core     limits.Backend // every operation on the store and the admission records (package limits)
	ops      opsState       // slow log and latency monitor (cmd_slowlog.go)
	upstream bool           // core may answer limits.ErrPending (park.go)
	quick    localAnswerer  // core's answers without the upstream, if it has them (park.go)

	sec *security // users, protected mode, failed AUTH limit (security.go)

	now     func() int64  // Config.Clock: "now" for decisions and timeouts
	tls     *tlsState     // the TLS listener and its connections, nil without TLS (tls.go)
	drainCh chan struct{} // closed when Shutdown starts draining
	drained sync.Once
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
		cfg.OutputBufferLimit < 0 || cfg.IdleTimeout < 0 || cfg.QueryBufferLimit < 0 {
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
	if cfg.QueryBufferLimit == 0 {
		cfg.QueryBufferLimit = max(DefaultQueryBufferLimit, cfg.ProtoMaxBulkLen+QueryHeaderRoom)
	}
	if cfg.QueryBufferLimit < cfg.ProtoMaxBulkLen+QueryHeaderRoom {
		return nil, fmt.Errorf("server: query buffer limit %d cannot hold a bulk of the proto max bulk len %d and its headers (%d more bytes)",
			cfg.QueryBufferLimit, cfg.ProtoMaxBulkLen, QueryHeaderRoom)
	}
	if cfg.MaxKeyLen == 0 {
		cfg.MaxKeyLen = shard.MaxKeyLen
	}
	if cfg.MaxKeyLen < 0 || cfg.MaxKeyLen > shard.MaxKeyLen {
		return nil, fmt.Errorf("server: max key length %d outside 1..%d", cfg.MaxKeyLen, shard.MaxKeyLen)
	}
	if cfg.AdmissionMaxRecords <= 0 {
		cfg.AdmissionMaxRecords = DefaultAdmissionMaxRecords
	}
	if cfg.AdmissionMaxMemory <= 0 {
		cfg.AdmissionMaxMemory = DefaultAdmissionMaxMemory
	}
	if cfg.EnableDebugCommand > DebugLocal {
		return nil, fmt.Errorf("server: unknown EnableDebugCommand %d", cfg.EnableDebugCommand)
	}
	if cfg.EnableDebugCommand != DebugNo && cfg.DebugClock != nil {
		cfg.Clock = cfg.DebugClock.Now
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.New().Now
	}
	if cfg.EnableDebugCommand != DebugNo && cfg.DebugClock == nil {
		// Only a server that may be told to move its clock pays for a
		// movable one: a few atomic loads per read (clock.Manual).
		cfg.DebugClock = clock.NewManual(cfg.Clock)
		cfg.Clock = cfg.DebugClock.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	sec, err := newSecurity(&cfg) // security.go
	if err != nil {
		return nil, err
	}
	tlsState, err := newTLSState(cfg.TLS, cfg.Logger) // tls.go
	if err != nil {
		return nil, err
	}
	srv := &Server{
		sec:     sec,
		cfg:     cfg,
		log:     cfg.Logger,
		start:   time.Now(),
		now:     cfg.Clock,
		tls:     tlsState,
		drainCh: make(chan struct{}),
		bootCh:  make(chan struct{}),
		clients: make(map[int64]*client),
		byLoop:  make(map[gnet.EventLoop]*loop),
		ops:     newOpsState(&cfg),
	}
	local := limits.NewLocal(store, limits.Config{MaxRecords: cfg.AdmissionMaxRecords, MaxMemory: cfg.AdmissionMaxMemory,
		Misroute: srv.txnBug})
	srv.core = local
	if cfg.Upstream.New != nil {
		if cfg.Durability != nil {
			return nil, errors.New("server: an upstream and persistence exclude each other (the upstream is the durable state)")
		}
		if srv.core, err = cfg.Upstream.New(local); err != nil {
			return nil, err
		}
		srv.upstream = true
		srv.quick, _ = srv.core.(localAnswerer)
	}
	return srv, nil
}

// txnBug logs a store call inside EXEC on a key EXEC did not declare: a
// command whose table entry lacks its key positions. The call acts on an
// absent key instead of taking a lock out of order.
func (s *Server) txnBug(err error) {
	s.log.Error("transaction touched an undeclared key; check the command's key positions", "err", err)
}

// Serve listens on Config.Addr (and on Config.TLS.Addr when set) and serves
// until Shutdown. It returns nil after a clean stop, or the error that kept
// it from listening.
func (s *Server) Serve() error {
	s.serving.Store(true)
	var err error
	if s.tls != nil {
		err = s.tls.listen(s)
	}
	if err == nil {
		// gnet's defaults for the I/O mode: level-triggered epoll, one read
		// per readable event, and loops not locked to threads. Edge-triggered
		// mode costs a second read per event and a locked loop futex calls
		// when it gets its P back (doc.go, "Scaling with cores").
		opts := []gnet.Option{
			gnet.WithMulticore(true),
			gnet.WithNumEventLoop(s.cfg.Loops),
			gnet.WithReuseAddr(true),
			gnet.WithTCPNoDelay(gnet.TCPNoDelay),
			gnet.WithTicker(s.cfg.IdleTimeout > 0),
			gnet.WithLogger(gnetLogger{s.log}),
		}
		err = gnet.Run(&events{s: s}, "tcp://"+s.cfg.Addr, opts...)
	}
	s.ready.Store(false)
	if s.tls != nil {
		s.tls.stop() // a TLS client left after Shutdown's deadline is closed here
	}
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

// onBoot records the engine and marks the server ready.
func (s *Server) onBoot(eng gnet.Engine) gnet.Action {
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
	addr := s.cfg.Addr
	if a := s.Addr(); a != nil {
		addr = a.String() // the bound port when Addr asked for port 0
	}
	s.log.Info("listening", "addr", addr, "loops", s.cfg.Loops, "version", s.cfg.Version)
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

// gnetLogger routes gnet's own log lines to slog.
type gnetLogger struct{ l *slog.Logger }

func (g gnetLogger) Debugf(f string, a ...any) { g.l.Debug(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Infof(f string, a ...any)  { g.l.Debug(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Warnf(f string, a ...any)  { g.l.Warn(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Errorf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...)) }
func (g gnetLogger) Fatalf(f string, a ...any) { g.l.Error(fmt.Sprintf(f, a...)) }
