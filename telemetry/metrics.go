package telemetry

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"

	"github.com/throttlekit/throttlekit-server/persist"
	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
)

// Sources are the functions an Exporter reads at scrape time. Any of them may
// be nil; its metrics are then left out. Server and Store return the
// snapshots of the packages that count, so that a counter they add is one
// line here and never a copy to keep in step:
//
//	telemetry.Sources{Server: srv.Stats, Store: store.Stats, Ready: srv.Ready}
type Sources struct {
	Server        func() server.Stats  // (*server.Server).Stats, folded from the per-loop counters
	Store         func() shard.Stats   // (*shard.Store).Stats
	Ready         func() bool          // throttlekit_ready 1/0
	LogSuppressed func() int64         // LimitedHandler.Suppressed
	Persist       func() persist.Stats // (*persist.Persister).Stats; nil when persistence is off
	Upstream      UpstreamSource       // the upstream tier (*tier.Backend); nil without --upstream
	Version       string               // throttlekit_build_info{version="..."}
	// Sets are written as they are after the server's metrics: the
	// counters other packages keep in a metrics.Set of their own (the RLS
	// service's ratelimit_service_* statistics, the policy reloads, the
	// gRPC front's requests).
	Sets []*metrics.Set
}

// Exporter writes the server's metrics in the Prometheus text format. It owns
// a metrics.Set (no global registry is touched) whose writer reads Sources
// once per scrape, so counting on the hot path stays with the server's own
// per-loop counters and costs nothing here until a scrape.
type Exporter struct {
	set     *metrics.Set
	src     Sources
	scrapes atomic.Int64
}

// NewExporter returns an Exporter reading src.
func NewExporter(src Sources) *Exporter {
	e := &Exporter{set: metrics.NewSet(), src: src}
	e.set.RegisterMetricsWriter(e.writeStats)
	return e
}

// WritePrometheus writes every metric to w: the snapshot from Sources, the
// Set's own metrics, and the Go runtime and process metrics (go_*, process_*,
// including process_open_fds and process_max_fds).
func (e *Exporter) WritePrometheus(w io.Writer) {
	e.scrapes.Add(1)
	e.set.WritePrometheus(w)
	for _, s := range e.src.Sets {
		s.WritePrometheus(w)
	}
	metrics.WriteProcessMetrics(w)
	metrics.WriteFDMetrics(w)
}

// Metric names, exported so that tests and dashboards can refer to them.
const (
	MetricCommands      = "throttlekit_commands_total"           // {cmd}
	MetricDecisions     = "throttlekit_decisions_total"          // {result="allowed"|"denied"}
	MetricLatency       = "throttlekit_command_duration_seconds" // histogram
	MetricConns         = "throttlekit_connections"              // gauge
	MetricConnsAccepted = "throttlekit_connections_accepted_total"
	MetricConnsRejected = "throttlekit_connections_rejected_total"
	MetricBytesIn       = "throttlekit_net_input_bytes_total"
	MetricBytesOut      = "throttlekit_net_output_bytes_total"
	MetricErrors        = "throttlekit_errors_total" // {kind}
	MetricLeaseGranted  = "throttlekit_lease_credits_granted_total"
	MetricLeaseReturned = "throttlekit_lease_credits_returned_total"
	MetricKeys          = "throttlekit_keys" // gauge
	MetricKeysExpired   = "throttlekit_keys_expired_total"
	MetricKeysEvicted   = "throttlekit_keys_evicted_total"
	MetricReady         = "throttlekit_ready" // gauge 1/0
	MetricLogSuppressed = "throttlekit_log_lines_suppressed_total"
	MetricBuildInfo     = "throttlekit_build_info" // {version} 1
	MetricScrapes       = "throttlekit_metrics_scrapes_total"
	metricLatencyBucket = MetricLatency + "_bucket"
	metricLatencySum    = MetricLatency + "_sum"
	metricLatencyCount  = MetricLatency + "_count"
)

// help holds the HELP text and TYPE of each metric family written from
// Sources.
var help = map[string][2]string{
	MetricScrapes:         {"counter", "Scrapes of /metrics served by this process."},
	MetricBuildInfo:       {"gauge", "Always 1; the version label names the running build."},
	MetricReady:           {"gauge", "1 while the server accepts commands, 0 otherwise."},
	MetricLogSuppressed:   {"counter", "Log lines dropped by the rate-limited log handler."},
	MetricKeys:            {"gauge", "Keys holding rate-limit state."},
	MetricKeysExpired:     {"counter", "Keys reclaimed after their state expired."},
	MetricKeysEvicted:     {"counter", "Keys evicted to stay within --maxkeys."},
	MetricCommands:        {"counter", "Commands executed, by lower-case command name."},
	MetricDecisions:       {"counter", "Rate-limit decisions of THROTTLE.CHECK, CL.THROTTLE and GCRA, by result."},
	MetricConns:           {"gauge", "Client connections open now."},
	MetricConnsAccepted:   {"counter", "Client connections accepted."},
	MetricConnsRejected:   {"counter", "Client connections refused (over --maxclients)."},
	MetricBytesIn:         {"counter", "Bytes read from clients."},
	MetricBytesOut:        {"counter", "Bytes written to clients."},
	MetricErrors:          {"counter", "Error replies, by kind (first word of the error, or protocol)."},
	MetricLeaseGranted:    {"counter", "Credits granted by THROTTLE.LEASE."},
	MetricLeaseReturned:   {"counter", "Credits given back by THROTTLE.RETURN."},
	MetricLatency:         {"histogram", "Time to execute one command, from parsed request to appended reply."},
	MetricPersistInfo:     {"gauge", "Always 1 when persistence is on; labels name the backend, the mode (async, sync) and the failure policy (open, closed)."},
	MetricPersistHealthy:  {"gauge", "1 while the last write to the persistence backend succeeded, 0 while it fails."},
	MetricPersistLag:      {"gauge", "Age of the oldest change not yet durable (in memory, or in a write to the backend not yet done): what a crash would lose; 0 when everything is durable."},
	MetricPersistDirty:    {"gauge", "Keys changed and not yet durable, those of a write in flight included (one per key however often it changed)."},
	MetricPersistRows:     {"counter", "Rows written to the backend, by operation: upsert, delete, or expire (removed in the background)."},
	MetricPersistFlushes:  {"counter", "Flushes that wrote everything they gathered."},
	MetricPersistErrors:   {"counter", "Failed writes and expiries of the persistence backend."},
	MetricPersistFlushDur: {"histogram", "Duration of each flush that wrote something: gathering the changes and writing them."},
	MetricPersistLoaded:   {"gauge", "Keys loaded from the backend at start-up."},
	MetricPersistLoadTime: {"gauge", "Time the start-up load took."},

	MetricUpstreamMode:       {"gauge", "Always 1 with an upstream; labels name each key prefix (\"\" for the default) and its mode (strict, cached-deny, leased)."},
	MetricUpstreamRoundTrips: {"counter", "Round trips to the upstream (a pipeline of script calls is one)."},
	MetricUpstreamAllowed:    {"counter", "Checks admitted over the upstream, from its answers or from leased credits."},
	MetricUpstreamLocal:      {"counter", "Checks answered without an upstream call, by kind: a cached denial or leased credits."},
	MetricUpstreamLeases:     {"counter", "Lease calls that succeeded (leased mode)."},
	MetricUpstreamCredits:    {"counter", "Leased credits, by kind: granted by the upstream, returned to it while idle, or stranded (expired unused)."},
	MetricUpstreamFailOpen:   {"counter", "Operations answered from local state while the upstream was unavailable (--upstream-fail open)."},
	MetricUpstreamErrors:     {"counter", "Failed upstream calls, by kind (unavailable, script, wrongtype, crossslot, engine, args)."},
	MetricUpstreamLatency:    {"histogram", "Duration of one upstream call."},
	MetricUpstreamPending:    {"gauge", "Operations waiting for or running on the upstream now."},
	MetricUpstreamQueueFull:  {"counter", "Operations refused because the workers' queue was full (counted as unavailable)."},
}

// header writes the HELP and TYPE lines of a family.
func header(w io.Writer, name string) {
	h := help[name]
	fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s %s\n", name, h[1], name, h[0])
}

// sample writes one sample line; labels is "" or `{k="v"}`.
func sample(w io.Writer, name, labels string, v int64) {
	fmt.Fprintf(w, "%s%s %d\n", name, labels, nonNeg(v))
}

// single writes a family with one unlabeled sample.
func single(w io.Writer, name string, v int64) {
	header(w, name)
	sample(w, name, "", v)
}

// writeStats is the Set's metrics writer: one snapshot per scrape.
func (e *Exporter) writeStats(w io.Writer) {
	single(w, MetricScrapes, e.scrapes.Load())
	if e.src.Version != "" {
		header(w, MetricBuildInfo)
		sample(w, MetricBuildInfo, `{version="`+escapeLabel(e.src.Version)+`"}`, 1)
	}
	if e.src.Ready != nil {
		var v int64
		if e.src.Ready() {
			v = 1
		}
		single(w, MetricReady, v)
	}
	if e.src.LogSuppressed != nil {
		single(w, MetricLogSuppressed, e.src.LogSuppressed())
	}
	if e.src.Store != nil {
		st := e.src.Store()
		single(w, MetricKeys, st.Keys)
		single(w, MetricKeysExpired, st.Expired)
		single(w, MetricKeysEvicted, st.Evicted)
	}
	if e.src.Persist != nil {
		writePersist(w, e.src.Persist())
	}
	if e.src.Upstream != nil {
		writeUpstream(w, e.src.Upstream)
	}
	if e.src.Server == nil {
		return
	}
	s := e.src.Server()
	writeLabeled(w, MetricCommands, "cmd", s.Commands)
	header(w, MetricDecisions)
	sample(w, MetricDecisions, `{result="allowed"}`, s.Allowed)
	sample(w, MetricDecisions, `{result="denied"}`, s.Denied)
	single(w, MetricConns, s.ConnsCurrent)
	single(w, MetricConnsAccepted, s.ConnsAccepted)
	single(w, MetricConnsRejected, s.ConnsRejected)
	single(w, MetricBytesIn, s.BytesIn)
	single(w, MetricBytesOut, s.BytesOut)
	writeLabeled(w, MetricErrors, "kind", s.Errors)
	single(w, MetricLeaseGranted, s.LeaseGranted)
	single(w, MetricLeaseReturned, s.LeaseReturned)
	writeHistogram(w, s.LatencyBounds, s.LatencyCounts, s.LatencySumNs)
}

// writeLabeled writes a counter family with one sample per map entry, sorted
// by label value. An empty map writes nothing.
func writeLabeled(w io.Writer, name, label string, m map[string]int64) {
	if len(m) == 0 {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	header(w, name)
	for _, k := range keys {
		sample(w, name, "{"+label+`="`+escapeLabel(k)+`"}`, m[k])
	}
}

// writeHistogram writes a Prometheus histogram from per-bucket counts with
// upper bounds in nanoseconds; the last count is the +Inf bucket. _count is
// the +Inf bucket's cumulative count, so the two always agree even if the
// snapshot's own total was folded at a slightly different moment.
func writeHistogram(w io.Writer, boundsNs, counts []int64, sumNs int64) {
	if len(counts) == 0 {
		return
	}
	header(w, MetricLatency)
	var cum uint64
	for i, c := range counts {
		cum += nonNeg(c)
		le := "+Inf"
		if i < len(boundsNs) && i < len(counts)-1 {
			le = strconv.FormatFloat(float64(boundsNs[i])/1e9, 'g', -1, 64)
		}
		fmt.Fprintf(w, "%s{le=%q} %d\n", metricLatencyBucket, le, cum)
	}
	fmt.Fprintf(w, "%s %s\n", metricLatencySum, strconv.FormatFloat(float64(sumNs)/1e9, 'g', -1, 64))
	fmt.Fprintf(w, "%s %d\n", metricLatencyCount, cum)
}

// escapeLabel escapes a label value for the Prometheus text format.
func escapeLabel(s string) string {
	if !strings.ContainsAny(s, "\\\"\n") {
		return s
	}
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s)
}

func nonNeg(v int64) uint64 {
	if v < 0 {
		return 0
	}
	return uint64(v)
}
