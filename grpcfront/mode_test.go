package grpcfront

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/policy"
	"github.com/throttlekit/throttlekit-server/rls"
	"github.com/throttlekit/throttlekit-server/shard"
	"github.com/throttlekit/throttlekit-server/upstream"
	"github.com/throttlekit/throttlekit-server/upstream/tier"
)

// modePolicies are two rules alike but for their per-descriptor mode.
const modePolicies = `
domain: modes
descriptors:
  - key: tier
    value: hot
    mode: leased
    rate_limit: {unit: minute, requests_per_unit: 1000}
  - key: tier
    value: exact
    mode: strict
    rate_limit: {unit: minute, requests_per_unit: 1000}
`

// TestRLSModeOverUpstream: ShouldRateLimit over an upstream backend whose
// own mode is strict serves a descriptor whose rule says leased from
// leased credits (one lease for many requests) and a strict one with an
// upstream call per request, against a real redis-server.
func TestRLSModeOverUpstream(t *testing.T) {
	path := filepath.Join(t.TempDir(), "modes.yaml")
	if err := os.WriteFile(path, []byte(modePolicies), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := policy.Open(path, policy.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := upstream.Dial("redis://"+clustertest.Server(t), upstream.Options{Timeout: time.Second, PoolSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := tier.New(tier.Config{Client: c, Local: limits.NewLocal(shard.New(shard.Config{}), limits.Config{}),
		Mode: tier.ModeStrict, ServerClock: true, Batch: 50})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	now := int64(1_700_000_040_000) * 1e6 // one instant: the window never rolls over
	svc, err := rls.New(rls.Options{Policies: st, Limiter: NewLimiter(b), Now: func() int64 { return now }})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(value string) {
		t.Helper()
		req := &rlsv3.RateLimitRequest{Domain: "modes", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "tier", Value: value}}}}}
		resp, err := svc.ShouldRateLimit(context.Background(), req)
		if err != nil || resp.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("tier=%s: %v, %v", value, resp, err)
		}
	}
	for _, c := range []struct {
		value             string
		leases, roundTrip int64
	}{{"hot", 1, 1}, {"exact", 0, 10}} {
		before := b.UpstreamStats()
		for range 10 {
			ask(c.value)
		}
		after := b.UpstreamStats()
		if l, r := after.Leases-before.Leases, after.RoundTrips-before.RoundTrips; l != c.leases || r != c.roundTrip {
			t.Errorf("tier=%s, 10 requests: %d leases, %d upstream calls; want %d, %d", c.value, l, r, c.leases, c.roundTrip)
		}
	}
}
