// Package telemetry is what an operator sees of throttlekit-server besides the
// RESP port: structured logs, Prometheus metrics and health endpoints.
//
// # Design
//
// Nothing here runs per command. The server counts on its hot path with plain
// per-loop integers and folds them into a server.Stats snapshot on demand; the
// store does the same into shard.Stats. An [Exporter] is handed the functions
// that take those snapshots ([Sources]) and calls them once per scrape, so the
// cost of metrics is paid by the scraper, and a scrape every few seconds
// costs the event loops only the folding of their counters. Telemetry reads
// the snapshot types of the packages that count rather than copies of them:
// a counter added to server.Stats is one new line in the exporter, and no
// mirror type can fall out of step.
//
// # Logs
//
// [NewLogger] builds a log/slog logger from the --log-level and --log-format
// settings. Nothing is logged per request; the events that can come in floods
// (connection errors from a misbehaving client) go through a
// [LimitedHandler], which lets through at most N records with the same
// message per interval and reports how many it dropped, both in the next
// record it writes (suppressed=N) and as a metric. Its cost is a map lookup
// under a mutex per record that reaches it, bounded to a fixed number of
// distinct messages.
//
// # Metrics
//
// [Exporter] writes the Prometheus text format with
// github.com/VictoriaMetrics/metrics on its own metrics.Set (no global
// registry). The names are the Metric* constants; the latency histogram is
// written from the server's fixed buckets as
// throttlekit_command_duration_seconds_{bucket,sum,count}. Go runtime and
// process metrics (go_*, process_*) come from the same library. A scrape
// allocates in proportion to the number of command names and error kinds
// (label values are sorted for stable output); BenchmarkWritePrometheus
// measures it.
//
// With persistence on, Sources.Persist hands over persist.Stats and the
// throttlekit_persist_* families appear (persist.go): the backend, mode and
// policy as labels of throttlekit_persist_info, health, lag, the keys not
// yet durable, rows written by operation, flushes, errors, the flush
// duration histogram over persist.FlushBounds and the start-up load. They
// come from one (*persist.Persister).Stats per scrape, which gathers the
// store's pending changes to count them (never waiting for a write).
//
// # HTTP
//
// [Handler] serves /metrics, /healthz (the process is up) and /readyz (the
// server accepts commands: the command passes a ready function that is
// false while persistent state loads); [Serve] runs it on a listener the caller opened
// until a context ends, so a bad address fails at start-up. [HealthURL] and
// [HealthCheck] let the server binary probe /healthz itself, for images
// without a shell or curl (the "healthcheck" mode of cmd/throttlekit-server).
//
// A typical wiring in main:
//
//	logger, err := telemetry.NewLogger(os.Stderr, cfg.LogLevel, cfg.LogFormat)
//	limited := telemetry.NewLimitedHandler(logger.Handler(), telemetry.DefaultLogBurst, telemetry.DefaultLogInterval)
//	logger = slog.New(limited)
//	...
//	exp := telemetry.NewExporter(telemetry.Sources{
//		Server:        srv.Stats,
//		Store:         store.Stats,
//		Ready:         srv.Ready,
//		LogSuppressed: limited.Suppressed,
//		Version:       version,
//	})
//	ln, err := net.Listen("tcp", cfg.MetricsAddr) // fail at start-up on a bad address
//	...
//	go telemetry.Serve(ctx, ln, telemetry.Handler(exp, srv.Ready))
package telemetry
