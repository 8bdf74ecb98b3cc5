package rls

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

const algos = `
domain: algos
descriptors:
  - key: fixed
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: gcra
    rate_limit: {unit: second, requests_per_unit: 4, algorithm: gcra, burst: 2}
  - key: token
    rate_limit: {period: 2s, requests_per_unit: 4, algorithm: token}
  - key: sliding
    rate_limit: {unit: minute, requests_per_unit: 10, algorithm: sliding}
`

// TestAlgorithms runs each algorithm through gRPC on the injected clock.
func TestAlgorithms(t *testing.T) {
	e := startEnv(t, map[string]string{"a.yaml": algos}, nil)
	one := func(k string) *rlsv3.RateLimitResponse { return e.call("algos", 0, desc(k, "x")) }

	// fixed: 4 per second, reset at the second's end.
	for i := 0; i < 4; i++ {
		one("fixed")
	}
	e.clock.Advance(250e6)
	r := one("fixed")
	if codesOf(r) != "OVER OVER" || r.Statuses[0].DurationUntilReset.AsDuration() != 750*time.Millisecond {
		t.Errorf("fixed 5th: %v", r)
	}

	// gcra: 4/s (250 ms apart), burst 2: two at once, the third waits.
	e.clock.Set(t0)
	if got := codesOf(one("gcra")) + "|" + codesOf(one("gcra")) + "|" + codesOf(one("gcra")); got != "OK OK|OK OK|OVER OVER" {
		t.Errorf("gcra burst: %s", got)
	}
	e.clock.Advance(250e6)
	r = one("gcra")
	if codesOf(r) != "OK OK" || r.Statuses[0].LimitRemaining != 0 {
		t.Errorf("gcra after 250 ms: %v", r)
	}

	// token: bucket of 4 refilling 4 per 2 s (one per 500 ms).
	e.clock.Set(t0)
	r = e.call("algos", 4, desc("token", "x"))
	if codesOf(r) != "OK OK" || r.Statuses[0].DurationUntilReset.AsDuration() != 2*time.Second {
		t.Errorf("token 4: %v", r)
	}
	if got := codesOf(one("token")); got != "OVER OVER" {
		t.Errorf("token empty: %s", got)
	}
	e.clock.Advance(500e6)
	if got := codesOf(one("token")); got != "OK OK" {
		t.Errorf("token refilled one: %s", got)
	}
	if cl := r.Statuses[0].CurrentLimit; cl.Unit != rlsv3.RateLimitResponse_RateLimit_SECOND || cl.UnitMultiplier.GetValue() != 2 {
		t.Errorf("token current_limit %v, want 2 x SECOND", cl)
	}

	// sliding: 10 per minute; 8 in the previous minute weigh 8*45/60 = 6
	// at 15 s into this one, so 4 more pass.
	e.clock.Set(t0)
	e.call("algos", 8, desc("sliding", "x"))
	e.clock.Set(t0 + 75e9)
	if got := codesOf(e.call("algos", 4, desc("sliding", "x"))); got != "OK OK" {
		t.Errorf("sliding 4: %s", got)
	}
	if got := codesOf(one("sliding")); got != "OVER OVER" {
		t.Errorf("sliding 11th weighted: %s", got)
	}
}

// TestHitsAddend: the descriptor's hits_addend wins over the request's, a
// zero descriptor addend checks without counting, a zero request addend
// counts one.
func TestHitsAddend(t *testing.T) {
	e := startEnv(t, map[string]string{"a.yaml": algos}, nil)
	r := e.call("algos", 3, desc("fixed", "a"), withHits(desc("fixed", "b"), 1))
	if r.Statuses[0].LimitRemaining != 1 || r.Statuses[1].LimitRemaining != 3 {
		t.Errorf("remaining %d and %d, want 1 and 3", r.Statuses[0].LimitRemaining, r.Statuses[1].LimitRemaining)
	}
	r = e.call("algos", 0, withHits(desc("fixed", "a"), 0))
	if codesOf(r) != "OK OK" || r.Statuses[0].LimitRemaining != 1 {
		t.Errorf("peek: %v", r)
	}
	e.call("algos", 0, desc("fixed", "a")) // request 0 = 1 hit
	r = e.call("algos", 0, withHits(desc("fixed", "a"), 0))
	if codesOf(r) != "OVER OVER" {
		t.Errorf("peek of a spent window: %v", r)
	}
	// A cost larger than the limit is over the limit and consumes nothing.
	r = e.call("algos", 5, desc("fixed", "c"))
	if codesOf(r) != "OVER OVER" {
		t.Errorf("cost 5 of 4: %v", r)
	}
	if r := e.call("algos", 4, desc("fixed", "c")); codesOf(r) != "OK OK" {
		t.Errorf("after a denied 5, 4 pass: %v", r)
	}
	e.wantMetric(`ratelimit_service_rate_limit_total_hits{domain="algos",descriptor="fixed"} 14`)
}

// TestGlobalShadowMode: the overall code turns OK, the statuses keep
// OVER_LIMIT, the switch's counter counts.
func TestGlobalShadowMode(t *testing.T) {
	e := startEnv(t, map[string]string{"a.yaml": algos}, func(o *Options) { o.ShadowMode = true })
	r := e.call("algos", 5, desc("fixed", "a"), desc("gcra", "a"))
	if got := codesOf(r); got != "OK OVER OVER" {
		t.Errorf("global shadow: %s", got)
	}
	e.wantMetric(`ratelimit_service_global_shadow_mode 1`)
	e.wantMetric(`ratelimit_service_rate_limit_over_limit{domain="algos",descriptor="fixed"} 1`)
}

const quota = `
domain: q
descriptors:
  - key: a
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: b
    quota_mode: true
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: c
    rate_limit: {unit: second, requests_per_unit: 5}
`

// TestQuotaMode: quota descriptors fail the request only when all of them
// are over; an ordinary descriptor over its limit always does.
func TestQuotaMode(t *testing.T) {
	e := startEnv(t, map[string]string{"q.yaml": quota}, nil)
	e.call("q", 0, desc("a", "x"))
	if got := codesOf(e.call("q", 0, desc("a", "x"), desc("b", "x"))); got != "OK OVER OK" {
		t.Errorf("one quota over: %s", got)
	}
	e.call("q", 2, desc("b", "x"))
	if got := codesOf(e.call("q", 0, desc("a", "x"), desc("b", "x"))); got != "OVER OVER OVER" {
		t.Errorf("all quota over: %s", got)
	}
	if got := codesOf(e.call("q", 6, desc("c", "x"))); got != "OVER OVER" {
		t.Errorf("ordinary over: %s", got)
	}
}

// TestHeaders: both header sets, on the descriptor envoyproxy/ratelimit
// picks and as one IETF list item per limited descriptor.
func TestHeaders(t *testing.T) {
	e := startEnv(t, map[string]string{"a.yaml": algos + "  - key: named\n    rate_limit: {unit: minute, requests_per_unit: 100, name: \"api \\\"v1\\\"\"}\n"}, func(o *Options) {
		o.RateLimitHeaders = true
		o.LimitHeaders = true
		o.LimitHeaderNames = HeaderNames{Limit: "X-RateLimit-Limit", Remaining: "X-RateLimit-Remaining", Reset: "X-RateLimit-Reset"}
	})
	e.clock.Set(t0 + 15e9)
	r := e.call("algos", 0, desc("named", "k"), desc("fixed", "k"), desc("unknown", "k"))
	got := map[string]string{}
	for _, h := range r.ResponseHeadersToAdd {
		got[h.Key] = h.Value
	}
	want := map[string]string{
		"X-RateLimit-Limit":     "4",
		"X-RateLimit-Remaining": "3",
		"X-RateLimit-Reset":     "1",
		"RateLimit-Policy":      `"api \"v1\"";q=100;w=60, "fixed";q=4;w=1`,
		"RateLimit":             `"api \"v1\"";r=99;t=45, "fixed";r=3;t=1`,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
	// Over the limit, envoyproxy/ratelimit's set describes the failing one.
	r = e.call("algos", 4, desc("named", "k"), desc("fixed", "k"))
	for _, h := range r.ResponseHeadersToAdd {
		if h.Key == "X-RateLimit-Limit" && h.Value != "4" || h.Key == "X-RateLimit-Remaining" && h.Value != "0" {
			t.Errorf("over limit: %s: %s", h.Key, h.Value)
		}
	}
	// Without options, no headers.
	e2 := startEnv(t, map[string]string{"a.yaml": algos}, nil)
	if r := e2.call("algos", 0, desc("fixed", "k")); len(r.ResponseHeadersToAdd) != 0 {
		t.Errorf("headers without options: %v", r.ResponseHeadersToAdd)
	}
}

// TestOverride: Envoy's per-descriptor limit override applies in a known
// domain, whatever the configuration says for the descriptor.
func TestOverride(t *testing.T) {
	e := startEnv(t, map[string]string{"a.yaml": algos}, nil)
	d := desc("anything", "v")
	// unit_multiplier is ignored, as envoyproxy/ratelimit ignores it.
	d.Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE, UnitMultiplier: wrapperspb.UInt32(5)}
	for i, want := range []string{"OK OK", "OK OK", "OVER OVER"} {
		r := e.call("algos", 0, d)
		if codesOf(r) != want || r.Statuses[0].CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE || r.Statuses[0].CurrentLimit.UnitMultiplier != nil {
			t.Errorf("override request %d: %v", i+1, r)
		}
	}
	if r := e.call("nope", 0, d, desc("x", "y")); codesOf(r) != "OK OK OK" || r.Statuses[0].CurrentLimit != nil {
		t.Errorf("override in an unknown domain: %v", r)
	}
	e.wantMetric(`ratelimit_service_domain_not_found 2`)
}

func TestInvalidRequests(t *testing.T) {
	e := startEnv(t, map[string]string{"a.yaml": algos}, func(o *Options) { o.MaxDescriptors = 2; o.MaxEntries = 2 })
	neg := desc("fixed", "x")
	neg.IsNegativeHits = true
	cases := []struct {
		name string
		req  *rlsv3.RateLimitRequest
		msg  string
	}{
		{"no domain", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitDesc{desc("a", "b")}}, "domain"},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "algos"}, "descriptor list"},
		{"too many descriptors", &rlsv3.RateLimitRequest{Domain: "algos", Descriptors: []*ratelimitDesc{desc("a", "b"), desc("a", "b"), desc("a", "b")}}, "descriptors"},
		{"too many entries", &rlsv3.RateLimitRequest{Domain: "algos", Descriptors: []*ratelimitDesc{desc("a", "b", "c", "d", "e", "f")}}, "entries"},
		{"negative hits", &rlsv3.RateLimitRequest{Domain: "algos", Descriptors: []*ratelimitDesc{neg}}, "is_negative_hits"},
	}
	for _, c := range cases {
		_, err := e.client.ShouldRateLimit(context.Background(), c.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	e.wantMetric(`ratelimit_service_should_rate_limit_error{err_type="service_error"} 5`)
}

func TestHealth(t *testing.T) {
	e := startEnv(t, map[string]string{"a.yaml": algos}, nil)
	h := healthpb.NewHealthClient(e.conn)
	for _, svc := range []string{"", "envoy.service.ratelimit.v3.RateLimitService"} {
		r, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q: %v %v", svc, r, err)
		}
	}
	e.svc.Health().Shutdown()
	if r, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("after Shutdown: %v %v", r, err)
	}
}

// TestNearLimitStats: hits are split into within, near and over as
// envoyproxy/ratelimit's base limiter splits them (limit 10, near from 8).
func TestNearLimitStats(t *testing.T) {
	e := startEnv(t, map[string]string{"a.yaml": "domain: n\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10}\n"}, nil)
	e.call("n", 7, desc("k", "x")) // 0 -> 7: within 7
	e.call("n", 2, desc("k", "x")) // 7 -> 9: within 2, near 1
	e.call("n", 3, desc("k", "x")) // 9 -> 12: over 2, near 1
	e.call("n", 1, desc("k", "x")) // 9 -> 10: within 1, near 1
	e.call("n", 1, desc("k", "x")) // 10 -> 11: over 1
	const p = `ratelimit_service_rate_limit_%s{domain="n",descriptor="k"} `
	for stat, v := range map[string]string{"total_hits": "14", "within_limit": "10", "near_limit": "3", "over_limit": "3", "shadow_mode": "0"} {
		e.wantMetric(strings.Replace(p, "%s", stat, 1) + v)
	}
}

// TestReplacesAndUnlimited: the names an unlimited rule replaces are
// dropped like any other's, a replaced unlimited rule stays unlimited, and
// two rules replacing each other are both dropped.
func TestReplacesAndUnlimited(t *testing.T) {
	e := startEnv(t, map[string]string{"r.yaml": `
domain: r
descriptors:
  - key: vip
    rate_limit: {unlimited: true, name: vip, replaces: [{name: base}]}
  - key: base
    rate_limit: {unit: second, requests_per_unit: 1, name: base}
  - key: over
    rate_limit: {unit: second, requests_per_unit: 1, replaces: [{name: vip}]}
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: b}]}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 1, name: b, replaces: [{name: a}]}
`}, nil)
	r := e.call("r", 5, desc("vip", "1"), desc("base", "1"))
	if codesOf(r) != "OK OK OK" || r.Statuses[0].LimitRemaining != math.MaxUint32 || r.Statuses[1].CurrentLimit != nil {
		t.Errorf("vip replaces base: %v", r)
	}
	r = e.call("r", 1, desc("vip", "1"), desc("over", "1"))
	if codesOf(r) != "OK OK OK" || r.Statuses[0].LimitRemaining != math.MaxUint32 || r.Statuses[1].CurrentLimit.GetRequestsPerUnit() != 1 {
		t.Errorf("replaced unlimited: %v", r)
	}
	r = e.call("r", 5, desc("a", "1"), desc("b", "1"))
	if codesOf(r) != "OK OK OK" || r.Statuses[0].CurrentLimit != nil || r.Statuses[1].CurrentLimit != nil {
		t.Errorf("mutual replaces: %v", r)
	}
}

// TestHugeHitsAddend: an addend beyond any limit, up to 2^64-1, is over the
// limit for every algorithm (never an error), and the statistics count it
// without overflowing.
func TestHugeHitsAddend(t *testing.T) {
	e := startEnv(t, map[string]string{"a.yaml": algos}, nil)
	for _, k := range []string{"fixed", "gcra", "token", "sliding"} {
		for _, h := range []uint64{1 << 31, 1<<63 - 1, 1 << 63, 1<<64 - 1} {
			if r := e.call("algos", 0, withHits(desc(k, "x"), h)); codesOf(r) != "OVER OVER" {
				t.Errorf("%s hits %d: %s", k, h, codesOf(r))
			}
		}
	}
	e2 := startEnv(t, map[string]string{"a.yaml": algos}, nil)
	e2.call("algos", 0, withHits(desc("fixed", "x"), 1<<63-1))
	e2.wantMetric(`ratelimit_service_rate_limit_over_limit{domain="algos",descriptor="fixed"} 9223372036854775803`)
	e2.wantMetric(`ratelimit_service_rate_limit_near_limit{domain="algos",descriptor="fixed"} 1`)
}

// TestDynamicMetadata: metadata of the rules that passed, merged, beside
// the request's domain, descriptors and hits_addend.
func TestDynamicMetadata(t *testing.T) {
	e := startEnv(t, map[string]string{"m.yaml": `
domain: m
descriptors:
  - key: a
    metadata: {team: payments, tags: {tier: gold}}
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: b
    metadata: {team: search, tags: {region: eu}, extra: 1}
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: c
    metadata: {blocked: true}
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: d
    metadata: {replaced: true}
    rate_limit: {unit: second, requests_per_unit: 5, name: d}
  - key: e
    rate_limit: {unit: second, requests_per_unit: 5, replaces: [{name: d}]}
`}, func(o *Options) { o.DynamicMetadata = true })
	r := e.call("m", 2, desc("a", "1"), withHits(desc("b", "1"), 1), desc("c", "1"), desc("d", "1"), desc("e", "1"))
	got := r.DynamicMetadata.AsMap()
	if got["domain"] != "m" || got["hitsAddend"] != 2.0 {
		t.Errorf("domain/hitsAddend: %v", got)
	}
	ds := got["descriptors"].([]any)
	if len(ds) != 5 || ds[0].(map[string]any)["entries"].([]any)[0] != "a=1" || ds[1].(map[string]any)["hitsAddend"] != 1.0 {
		t.Errorf("descriptors: %v", ds)
	}
	md := got["metadata"].(map[string]any)
	tags := md["tags"].(map[string]any)
	if md["team"] != "payments" || md["extra"] != 1.0 || tags["tier"] != "gold" || tags["region"] != "eu" || md["blocked"] != nil || md["replaced"] != nil {
		t.Errorf("merged metadata: %v", md)
	}
	if r := startEnv(t, map[string]string{"m.yaml": "domain: m\n"}, nil).call("m", 0, desc("a", "1")); r.DynamicMetadata != nil {
		t.Errorf("dynamic metadata without the option: %v", r.DynamicMetadata)
	}
}
