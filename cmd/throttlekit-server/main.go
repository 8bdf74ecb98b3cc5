// Command throttlekit-server runs the rate-limit server: a RESP (Redis
// protocol) listener serving THROTTLE.* and CL.THROTTLE over an in-memory
// sharded store, plus an optional HTTP listener for /metrics, /healthz and
// /readyz.
//
// # Design
//
// This is the only package that knows every other one: it reads the settings
// (package config), builds the store (shard), the server over it (server)
// and the logs, metrics and health endpoints (telemetry), and connects them
// with plain function values: CONFIG GET is answered by
// config.Config.ConfigGet, and the metrics exporter reads
// (*server.Server).Stats and (*shard.Store).Stats at scrape time. Nothing
// here runs per command. The whole program is the function run, whose
// arguments, environment and output are parameters, so tests drive it
// in-process and as a built binary alike.
//
// With --persist (persist.go) the backend is opened and its writer lock
// taken before anything listens; the listener then comes up while the
// stored state loads (INFO says loading:1, /readyz fails, other commands
// get -LOADING), the Persister starts, and the server is handed a
// server.Durability over it: TRYAGAIN under the closed policy, replies
// held until durable in sync mode. On shutdown the server drains first,
// then the Persister writes what is left and releases the table.
//
// With --policies (grpc.go) the policy files load before anything listens
// (an invalid one exits with 2) and are watched from then on; the RESP
// server resolves POLICY domain/name through them. With --grpc-addr the
// gRPC front (package grpcfront) serves Envoy's RLS over the server's core
// once the persistent state has loaded, and stops before the RESP server
// drains.
//
// # Garbage collector
//
// The store keeps its keys in pointer-free node chunks and off-heap
// tables, so the live heap is large next to what the collector must trace,
// and the hot path allocates nothing. Go's default GOGC=100 would still let
// garbage (grown buffers, replaced tables) reach the whole live heap before
// a collection, which a store of a million keys pays for in RSS. Unless the
// GOGC environment variable is set, run sets GOGC to DefaultGCPercent: a
// collection once garbage reaches a quarter of the live heap, cheap because
// the node chunks are never scanned. GOMEMLIMIT, if set, applies as usual.
//
// # Modes and exit statuses
//
//	throttlekit-server [flags]              serve until SIGINT or SIGTERM
//	throttlekit-server healthcheck [flags]  probe /healthz for a container HEALTHCHECK
//
// Settings come from flags, THROTTLEKIT_* environment variables and an
// optional config file (see --help, which lists the modes too). SIGINT or
// SIGTERM stops accepting connections, answers the commands already read,
// gives clients up to --shutdown-timeout to read the replies queued for
// them and exits with status 0 (1 if some client had to be cut off). With
// --tls-port, SIGHUP reloads the TLS certificate, key and CA files; a file
// that does not load keeps the old ones and is logged. A listener that cannot start, a persistence backend
// that cannot be opened or is in use by another server (one line on
// stderr), or a failed shutdown exits with 1; an invalid configuration
// (a --persist URL naming no backend included) exits with status 2 after
// one line per problem on stderr. The healthcheck mode exits 0 when /healthz answers
// 200 and 1 otherwise, including for a bad setting, since Docker reserves 2.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/throttlekit/throttlekit-server/config"
	"github.com/throttlekit/throttlekit-server/internal/clock"
	"github.com/throttlekit/throttlekit-server/persist"
	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
	"github.com/throttlekit/throttlekit-server/telemetry"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// DefaultGCPercent is the GOGC run sets when the GOGC environment
// variable is unset (see the package doc).
const DefaultGCPercent = 25

// gcPercent returns the GOGC to set: DefaultGCPercent when the environment
// leaves GOGC unset, or -1 to keep the runtime's (from GOGC).
func gcPercent(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		return -1
	}
	return DefaultGCPercent
}

// run is main with its dependencies passed in; it returns the exit status.
// SIGINT and SIGTERM stop the server.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, getenv, stdout, stderr)
}

// runSweeper is shard.Store.RunSweeper that also gives each sweep's
// duration to the latency monitor ("expire-cycle").
func runSweeper(ctx context.Context, store *shard.Store, srv *server.Server, interval time.Duration, now func() int64) {
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			start := time.Now()
			store.Sweep(now())
			srv.RecordLatency("expire-cycle", time.Since(start))
		}
	}
}

// reloadOnHangup reloads the TLS certificates on each signal from hup
// (SIGHUP) until ctx ends. A failed reload keeps the certificates in use
// (ReloadTLS logs it).
func reloadOnHangup(ctx context.Context, srv *server.Server, hup <-chan os.Signal) {
	for {
		select {
		case <-hup:
			_ = srv.ReloadTLS()
		case <-ctx.Done():
			return
		}
	}
}

// runContext is run stopped by ctx instead of signals: cancelling ctx shuts
// the server down gracefully.
func runContext(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "healthcheck" {
		return healthcheck(args[1:], getenv, stderr)
	}
	if p := gcPercent(getenv); p >= 0 {
		debug.SetGCPercent(p)
	}
	cfg, err := config.Load(args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, modesHelp)
		return 0
	}
	if errors.Is(err, config.ErrVersion) {
		fmt.Fprintf(stdout, "throttlekit-server %s\n", version)
		return 0
	}
	if err != nil {
		return config.Exit(err, stderr)
	}
	logger, err := telemetry.NewLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		fmt.Fprintf(stderr, "throttlekit-server: %v\n", err)
		return 2
	}
	limited := telemetry.NewLimitedHandler(logger.Handler(), telemetry.DefaultLogBurst, telemetry.DefaultLogInterval)
	logger = slog.New(limited)

	// The settings table says where each setting goes (config.Wire); what
	// only a running program has (logger, clock, durability) is added here.
	wired, err := cfg.Wire()
	if err != nil {
		fmt.Fprintf(stderr, "throttlekit-server: %v\n", err)
		return 2
	}
	if cfg.Upstream != "" && cfg.Persist != "" {
		fmt.Fprintln(stderr, "throttlekit-server: --upstream and --persist exclude each other: the upstream is the durable state")
		return 2
	}
	var srv *server.Server
	wired.Store.OnGrow = func(d time.Duration) {
		if srv != nil { // set before anything can insert a key
			srv.RecordLatency("table-growth", d) // LATENCY (server/cmd_latency.go)
		}
	}
	store := shard.New(wired.Store)
	// One clock for every reader of the time: decisions, the sweeper,
	// persistence. With DEBUG enabled it is a clock.Manual, so that DEBUG
	// SET-CLOCK moves all of them together; otherwise the plain Clock.
	now := clock.New().Now
	var debugClock *clock.Manual
	if wired.Server.EnableDebugCommand != server.DebugNo {
		debugClock = clock.NewManual(now)
		now = debugClock.Now
	}
	// Persistence (persist.go): the backend is opened, and its writer lock
	// taken, before anything listens; a second server on the same table
	// stops here with one line.
	var ps *persistence
	var durability server.Durability
	var envoy *envoyFront // set before persistence starts writing
	if cfg.Persist != "" {
		octx, ocancel := context.WithTimeout(ctx, 30*time.Second)
		ps, err = openPersistence(octx, &cfg, store, now, logger, func() {
			if srv != nil {
				srv.NotifyDurable()
			}
			if envoy != nil {
				envoy.notifyDurable() // the gRPC calls waiting in sync mode (grpc.go)
			}
		}, func(d time.Duration) {
			if srv != nil {
				srv.RecordLatency("persist-flush", d) // LATENCY (server/cmd_latency.go)
			}
		})
		ocancel()
		if err != nil {
			fmt.Fprintf(stderr, "throttlekit-server: %v\n", err)
			if persist.CodeOf(err) == persist.CodeBadURL {
				return 2
			}
			return 1
		}
		durability = ps
		defer func() {
			cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer ccancel()
			if err := ps.p.Close(cctx); err != nil {
				logger.Error("persistence: final flush", "err", err)
			}
		}()
	}
	// Policies (grpc.go): an invalid file stops the start here.
	envoy, err = openPolicies(&wired, logger)
	if err != nil {
		fmt.Fprintf(stderr, "throttlekit-server: %v\n", err)
		return 2
	}
	if ps != nil {
		envoy.durability = ps // RLS and RLQS answers wait as RESP replies do
	}
	sc := wired.Server
	if envoy.policies != nil {
		sc.Policies = envoy.policies
		sc.GRPCInfo = envoy.info
	}
	var so *scaleOut
	if cfg.Upstream != "" { // upstream.go
		var uc server.UpstreamConfig
		so, uc, err = openUpstream(&cfg, now)
		if err != nil {
			fmt.Fprintf(stderr, "throttlekit-server: %v\n", err)
			return 2
		}
		defer so.close()
		sc.Upstream = uc
	}
	sc.Logger = logger
	sc.Version = version
	sc.ConfigGet = cfg.ConfigGet
	sc.Clock = now
	sc.DebugClock = debugClock
	sc.Durability = durability
	srv, err = server.New(sc, store)
	if err != nil {
		fmt.Fprintf(stderr, "throttlekit-server: %v\n", err)
		return 2
	}

	// Ready: listening and not loading persistent state (/readyz, metrics).
	ready := func() bool { return srv.Ready() && !srv.Loading() }
	if cfg.MetricsAddr != "" {
		ln, err := telemetry.Listen(cfg.MetricsAddr)
		if err != nil {
			fmt.Fprintf(stderr, "throttlekit-server: %v\n", err)
			return 1
		}
		src := telemetry.Sources{
			Server:        srv.Stats,
			Store:         store.Stats,
			Ready:         ready,
			LogSuppressed: limited.Suppressed,
			Version:       version,
		}
		if ps != nil {
			src.Persist = ps.p.Stats
		}
		src.Sets = append(src.Sets, envoy.metrics)
		if so != nil && so.backend != nil {
			src.Upstream = so.backend
		}
		exp := telemetry.NewExporter(src)
		// The metrics listener outlives ctx until the server has drained, so
		// /readyz answers 503 and a last scrape sees the final counters.
		mctx, mcancel := context.WithCancel(context.Background())
		mdone := make(chan struct{})
		defer func() { mcancel(); <-mdone }()
		go func() {
			defer close(mdone)
			if err := telemetry.Serve(mctx, ln, telemetry.Handler(exp, ready)); err != nil {
				logger.Error("metrics listener stopped", "err", err)
			}
		}()
		logger.Info("metrics listening", "addr", ln.Addr().String())
	}

	if sc.TLS.Addr != "" {
		// Registered before the listeners open: a SIGHUP once TLS clients
		// can connect reloads the certificates, never kills the process.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		go reloadOnHangup(ctx, srv, hup)
	}
	if ps != nil {
		// Loading is on before the listener opens, so no client is ever
		// served from the store before its state is loaded: until the load
		// ends INFO says loading:1, /readyz fails and commands that touch
		// keys get -LOADING.
		srv.SetLoading(true)
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve() }()
	// abort reports a start-up failure after Serve began: it stops the
	// server and waits for Serve to return.
	abort := func(what string, err error) int {
		logger.Error(what, "err", err)
		fmt.Fprintf(stderr, "throttlekit-server: %v\n", err)
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = srv.Shutdown(sctx)
		cancel()
		<-serveErr
		return 1
	}
	if ps != nil {
		if err := ps.load(ctx, srv, now, logger); err != nil {
			return abort("persistence", err)
		}
		ps.p.Start()
	}
	// The gRPC front (grpc.go) shares the server's core. It starts after
	// the load, so Envoy is never answered from a store still loading; an
	// address in use stops the program.
	if err := envoy.start(ctx, &wired, srv, now, logger); err != nil {
		_ = envoy.stop(context.Background()) // the policy watcher, if it started
		return abort("gRPC", err)
	}
	defer func() { _ = envoy.stop(context.Background()) }()
	// The sweeper starts after the load: an expiry during it would be
	// taken for loaded state and not written.
	go runSweeper(ctx, store, srv, cfg.SweepInterval, now)

	select {
	case err := <-serveErr:
		if err != nil {
			logger.Error("server stopped", "err", err)
			return 1
		}
		return 0
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := envoy.stop(sctx); err != nil {
		logger.Warn("gRPC shutdown: calls cancelled", "err", err)
	}
	if err := srv.Shutdown(sctx); err != nil {
		logger.Error("shutdown", "err", err)
		return 1
	}
	if err := <-serveErr; err != nil {
		logger.Error("server stopped", "err", err)
		return 1
	}
	logger.Info("stopped")
	return 0
}
