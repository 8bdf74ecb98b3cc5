package telemetry

import (
	"bytes"
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/upstream"
	"github.com/throttlekit/throttlekit-server/upstream/tier"
)

// fakeUpstream is an UpstreamSource with fixed figures.
type fakeUpstream struct{}

func (fakeUpstream) UpstreamStats() tier.Stats {
	s := tier.Stats{RoundTrips: 40, Allowed: 1000, CachedDenials: 7, LeaseHits: 900, Leases: 20, Leased: 1000,
		Returned: 30, Stranded: 5, FailOpen: 2, LatencyNs: 40_000_000}
	s.Errors[upstream.CodeUnavailable] = 3
	s.Latency[3] = 40
	return s
}

func (fakeUpstream) Modes() (tier.Mode, []tier.PrefixMode) {
	return tier.ModeStrict, []tier.PrefixMode{{Prefix: "hot:", Mode: tier.ModeLeased}}
}

func TestUpstreamMetrics(t *testing.T) {
	var buf bytes.Buffer
	NewExporter(Sources{Upstream: fakeUpstream{}}).WritePrometheus(&buf)
	out := buf.String()
	for _, want := range []string{
		`throttlekit_upstream_mode{prefix="hot:",mode="leased"} 1`,
		`throttlekit_upstream_mode{prefix="",mode="strict"} 1`,
		"throttlekit_upstream_round_trips_total 40",
		`throttlekit_upstream_local_answers_total{kind="lease"} 900`,
		`throttlekit_upstream_credits_total{kind="stranded"} 5`,
		`throttlekit_upstream_errors_total{kind="unavailable"} 3`,
		`throttlekit_upstream_latency_seconds_bucket{le="0.001"} 40`,
		`throttlekit_upstream_latency_seconds_bucket{le="+Inf"} 40`,
		"throttlekit_upstream_latency_seconds_sum 0.04",
	} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
