// Package telemetry is what an operator sees of throttlekit-server besides the
// RESP port: structured logs, Prometheus metrics and health endpoints.
//
// # Logs
//
// [NewLogger] builds a log/slog logger from the --log-level and --log-format
// settings. Nothing is logged per request; the events that can come in floods
// (connection errors from a misbehaving client) go through a
// [LimitedHandler], which lets through at most N records with the same
// message per interval and reports how many it dropped, both in the next
// record it writes (suppressed=N) and as a metric.
//
// # Metrics
//
// The server counts on its hot path with plain per-loop integers and folds
// them into a snapshot on demand. [Exporter] reads that snapshot (and the
// store's) once per scrape and writes the Prometheus text format with
// github.com/VictoriaMetrics/metrics on its own metrics.Set, so the cost of
// metrics is paid by the scraper, not by commands. The names are the Metric*
// constants; the latency histogram is written from the server's fixed buckets
// as throttlekit_command_duration_seconds_{bucket,sum,count}. Go runtime and
// process metrics (go_*, process_*) come from the same library.
//
// # HTTP
//
// [Handler] serves /metrics, /healthz (the process is up) and /readyz (the
// server accepts commands); [Serve] runs it until a context ends. For images
// without a shell or curl, [HealthCheck] probes /healthz from the server
// binary itself and returns a HEALTHCHECK exit status.
//
// A typical wiring in main:
//
//	logger, err := telemetry.NewLogger(os.Stderr, cfg.LogLevel, cfg.LogFormat)
//	limited := telemetry.NewLimitedHandler(logger.Handler(), telemetry.DefaultLogBurst, telemetry.DefaultLogInterval)
//	logger = slog.New(limited)
//	...
//	exp := telemetry.NewExporter(telemetry.Sources{
//		Server:        func() telemetry.ServerStats { return telemetry.ServerStats(srv.Stats()) },
//		Store:         func() telemetry.StoreStats { st := store.Stats(); return telemetry.StoreStats{Keys: st.Keys, Expired: st.Expired, Evicted: st.Evicted} },
//		Ready:         srv.Ready,
//		LogSuppressed: limited.Suppressed,
//		Version:       version,
//	})
//	if cfg.MetricsAddr != "" {
//		ln, err := net.Listen("tcp", cfg.MetricsAddr) // fail at startup on a bad address
//		...
//		go telemetry.ServeListener(ctx, ln, telemetry.Handler(exp, srv.Ready))
//	}
package telemetry
