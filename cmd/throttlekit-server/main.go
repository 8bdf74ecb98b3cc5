// Command throttlekit-server runs the rate-limit server: a RESP (Redis
// protocol) listener serving THROTTLE.* and CL.THROTTLE over an in-memory
// sharded store, plus an optional HTTP listener for /metrics, /healthz and
// /readyz.
//
// Settings come from flags, THROTTLEKIT_* environment variables and an
// optional config file (see --help). SIGINT or SIGTERM stops accepting
// connections, answers the commands already read and exits with status 0.
// An invalid configuration exits with status 2 after one line per problem on
// stderr. "throttlekit-server healthcheck" probes /healthz for a container
// HEALTHCHECK.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/throttlekit/throttlekit-server/config"
	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
	"github.com/throttlekit/throttlekit-server/telemetry"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

// run is main with its dependencies passed in; it returns the exit status.
// SIGINT and SIGTERM stop the server.
func run(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, getenv, stdout, stderr)
}

// runContext is run stopped by ctx instead of signals: cancelling ctx shuts
// the server down gracefully.
func runContext(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "healthcheck" {
		return telemetry.HealthCheckCommand(args[1:], getenv, stderr)
	}
	cfg, err := config.LoadTo(args, getenv, stdout)
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

	store := shard.New(shard.Config{Shards: cfg.Shards, MaxKeys: cfg.MaxKeys})
	srv, err := server.New(server.Config{
		Addr:              cfg.Addr,
		Loops:             cfg.Loops,
		MaxClients:        cfg.MaxClients,
		MaxArgs:           cfg.MaxArgs,
		ProtoMaxBulkLen:   cfg.ProtoMaxBulkLen,
		OutputBufferLimit: cfg.ClientOutputBufferLimit,
		IdleTimeout:       cfg.Timeout,
		RequirePass:       cfg.RequirePass,
		Logger:            logger,
		Version:           version,
		ConfigGet:         cfg.ConfigGet,
	}, store)
	if err != nil {
		fmt.Fprintf(stderr, "throttlekit-server: %v\n", err)
		return 2
	}

	go store.RunSweeper(ctx, cfg.SweepInterval, func() int64 { return time.Now().UnixNano() })

	if cfg.MetricsAddr != "" {
		ln, err := net.Listen("tcp", cfg.MetricsAddr)
		if err != nil {
			fmt.Fprintf(stderr, "throttlekit-server: metrics listener: %v\n", err)
			return 1
		}
		exp := telemetry.NewExporter(telemetry.Sources{
			Server: func() telemetry.ServerStats { return telemetry.ServerStats(srv.Stats()) },
			Store: func() telemetry.StoreStats {
				st := store.Stats()
				return telemetry.StoreStats{Keys: st.Keys, Expired: st.Expired, Evicted: st.Evicted}
			},
			Ready:         srv.Ready,
			LogSuppressed: limited.Suppressed,
			Version:       version,
		})
		// The metrics listener outlives ctx until the server has drained, so
		// /readyz answers 503 and a last scrape sees the final counters.
		mctx, mcancel := context.WithCancel(context.Background())
		mdone := make(chan struct{})
		defer func() { mcancel(); <-mdone }()
		go func() {
			defer close(mdone)
			if err := telemetry.ServeListener(mctx, ln, telemetry.Handler(exp, srv.Ready)); err != nil {
				logger.Error("metrics listener stopped", "err", err)
			}
		}()
		logger.Info("metrics listening", "addr", ln.Addr().String())
	}

	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve() }()

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
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
