package telemetry

import (
	"fmt"
	"io"
	"strconv"

	"github.com/throttlekit/throttlekit-server/upstream"
	"github.com/throttlekit/throttlekit-server/upstream/tier"
)

// Upstream metric names (written when Sources.Upstream is set).
const (
	MetricUpstreamMode       = "throttlekit_upstream_mode"                // {prefix,mode} 1
	MetricUpstreamRoundTrips = "throttlekit_upstream_round_trips_total"   // counter
	MetricUpstreamAllowed    = "throttlekit_upstream_allowed_total"       // counter
	MetricUpstreamLocal      = "throttlekit_upstream_local_answers_total" // {kind="cached_deny"|"lease"}
	MetricUpstreamLeases     = "throttlekit_upstream_leases_total"        // counter
	MetricUpstreamCredits    = "throttlekit_upstream_credits_total"       // {kind="leased"|"returned"|"stranded"}
	MetricUpstreamFailOpen   = "throttlekit_upstream_fail_open_total"     // counter
	MetricUpstreamErrors     = "throttlekit_upstream_errors_total"        // {kind}
	MetricUpstreamLatency    = "throttlekit_upstream_latency_seconds"     // histogram
	MetricUpstreamPending    = "throttlekit_upstream_pending_operations"  // gauge
	MetricUpstreamQueueFull  = "throttlekit_upstream_queue_full_total"    // counter
)

// UpstreamSource is what the upstream metrics read: *tier.Backend.
type UpstreamSource interface {
	UpstreamStats() tier.Stats
	Modes() (tier.Mode, []tier.PrefixMode)
}

// writeUpstream writes the upstream families from one Stats snapshot.
func writeUpstream(w io.Writer, src UpstreamSource) {
	st := src.UpstreamStats()
	def, prefixes := src.Modes()
	header(w, MetricUpstreamMode)
	sample(w, MetricUpstreamMode, `{prefix="",mode="`+def.String()+`"}`, 1)
	for _, p := range prefixes {
		sample(w, MetricUpstreamMode, `{prefix="`+escapeLabel(p.Prefix)+`",mode="`+p.Mode.String()+`"}`, 1)
	}
	single(w, MetricUpstreamRoundTrips, st.RoundTrips)
	single(w, MetricUpstreamAllowed, st.Allowed)
	header(w, MetricUpstreamLocal)
	sample(w, MetricUpstreamLocal, `{kind="cached_deny"}`, st.CachedDenials)
	sample(w, MetricUpstreamLocal, `{kind="lease"}`, st.LeaseHits)
	single(w, MetricUpstreamLeases, st.Leases)
	header(w, MetricUpstreamCredits)
	sample(w, MetricUpstreamCredits, `{kind="leased"}`, st.Leased)
	sample(w, MetricUpstreamCredits, `{kind="returned"}`, st.Returned)
	sample(w, MetricUpstreamCredits, `{kind="stranded"}`, st.Stranded)
	single(w, MetricUpstreamFailOpen, st.FailOpen)
	header(w, MetricUpstreamErrors)
	for c := upstream.Code(1); int(c) < len(st.Errors); c++ {
		if st.Errors[c] > 0 {
			sample(w, MetricUpstreamErrors, `{kind="`+c.String()+`"}`, st.Errors[c])
		}
	}
	header(w, MetricUpstreamLatency)
	var cum int64
	for i, n := range st.Latency {
		cum += n
		le := "+Inf"
		if i < len(tier.LatencyBounds) {
			le = strconv.FormatFloat(tier.LatencyBounds[i].Seconds(), 'g', -1, 64)
		}
		fmt.Fprintf(w, "%s_bucket{le=%q} %d\n", MetricUpstreamLatency, le, cum)
	}
	fmt.Fprintf(w, "%s_sum %s\n", MetricUpstreamLatency, strconv.FormatFloat(float64(st.LatencyNs)/1e9, 'g', -1, 64))
	fmt.Fprintf(w, "%s_count %d\n", MetricUpstreamLatency, cum)
	single(w, MetricUpstreamPending, st.Pending)
	single(w, MetricUpstreamQueueFull, st.QueueFull)
}
