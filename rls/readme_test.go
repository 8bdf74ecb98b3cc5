package rls

import (
	"math"
	"strings"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// The configurations of ../policy/testdata/readme mirror, one each, the
// examples of envoyproxy/ratelimit's README; these tests play Envoy against
// them over gRPC and check, request by request, the decisions the README
// describes.

func readmeEnv(t *testing.T, mod func(*Options)) *env {
	return startEnvDir(t, "../policy/testdata/readme", mod)
}

// Example 1: each value of one key has its own limit; a value the
// configuration does not list has none.
func TestReadmeExample1(t *testing.T) {
	e := readmeEnv(t, nil)
	if got := codesOf(e.call("postgres_qps", 400, desc("table", "accounts"))); got != "OK OK" {
		t.Fatalf("400 hits: %s", got)
	}
	if got := codesOf(e.call("postgres_qps", 0, desc("table", "accounts"))); got != "OVER OVER" {
		t.Errorf("401st: %s", got)
	}
	r := e.call("postgres_qps", 300, desc("table", "fallback"))
	if codesOf(r) != "OK OK" || r.Statuses[0].CurrentLimit.RequestsPerUnit != 300 {
		t.Errorf("fallback: %v", r)
	}
	r = e.call("postgres_qps", 1000, desc("table", "orders"))
	if codesOf(r) != "OK OK" || r.Statuses[0].CurrentLimit != nil {
		t.Errorf("unlisted value limited: %v", r)
	}
	// The next second is a new window.
	e.clock.Advance(1e9)
	if got := codesOf(e.call("postgres_qps", 0, desc("table", "accounts"))); got != "OK OK" {
		t.Errorf("next second: %s", got)
	}
}

// Example 2: a request carries both descriptors; the nested one allows 3
// promo texts a day per recipient, the top-level one 50 texts, and the
// answer is over the limit when either is.
func TestReadmeExample2(t *testing.T) {
	e := readmeEnv(t, nil)
	promo := func(to string) []*ratelimitDesc {
		return []*ratelimitDesc{desc("category", "promo", "recipient", to), desc("recipient", to)}
	}
	for i := 0; i < 3; i++ {
		if got := codesOf(e.call("sms", 0, promo("2065550101")...)); got != "OK OK OK" {
			t.Fatalf("promo %d: %s", i+1, got)
		}
	}
	r := e.call("sms", 0, promo("2065550101")...)
	if got := codesOf(r); got != "OVER OVER OK" {
		t.Errorf("4th promo: %s", got)
	}
	if r.Statuses[1].LimitRemaining != 46 {
		t.Errorf("recipient remaining %d, want 46 (4 of 50 used)", r.Statuses[1].LimitRemaining)
	}
	// Another recipient has counters of its own.
	if got := codesOf(e.call("sms", 0, promo("2065550102")...)); got != "OK OK OK" {
		t.Errorf("other recipient: %s", got)
	}
	// Plain texts are only under the 50 a day.
	if got := codesOf(e.call("sms", 46, desc("recipient", "2065550101"))); got != "OK OK" {
		t.Errorf("46 plain texts: %s", got)
	}
	if got := codesOf(e.call("sms", 0, desc("recipient", "2065550101"))); got != "OVER OVER" {
		t.Errorf("51st text: %s", got)
	}
	if r := e.call("sms", 0, desc("recipient", "x")); r.Statuses[0].CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_DAY {
		t.Errorf("unit %v", r.Statuses[0].CurrentLimit.Unit)
	}
}

// Example 3: a blocked address (requests_per_unit 0) is over the limit at
// once; any other gets 20 a second.
func TestReadmeExample3(t *testing.T) {
	e := readmeEnv(t, nil)
	r := e.call("ingress_by_client", 0, desc("client_ip", "192.0.2.66"))
	if codesOf(r) != "OVER OVER" || r.Statuses[0].CurrentLimit.RequestsPerUnit != 0 || r.Statuses[0].DurationUntilReset.AsDuration() != 1e9 {
		t.Errorf("blocked address: %v", r)
	}
	if got := codesOf(e.call("ingress_by_client", 20, desc("client_ip", "192.0.2.1"))); got != "OK OK" {
		t.Errorf("20 requests: %s", got)
	}
	if got := codesOf(e.call("ingress_by_client", 0, desc("client_ip", "192.0.2.1"))); got != "OVER OVER" {
		t.Errorf("21st: %s", got)
	}
}

// Example 4: a two-entry descriptor matches only a two-level configuration.
func TestReadmeExample4(t *testing.T) {
	e := readmeEnv(t, nil)
	r := e.call("depth_one", 1000, desc("tenant", "acme", "project", "p1"))
	if codesOf(r) != "OK OK" || r.Statuses[0].CurrentLimit != nil {
		t.Errorf("depth_one: %v", r)
	}
	r = e.call("depth_two", 120, desc("tenant", "acme", "project", "p1"))
	if codesOf(r) != "OK OK" || r.Statuses[0].CurrentLimit.RequestsPerUnit != 120 {
		t.Errorf("depth_two: %v", r)
	}
	if got := codesOf(e.call("depth_two", 0, desc("tenant", "acme", "project", "p1"))); got != "OVER OVER" {
		t.Errorf("depth_two 121st: %s", got)
	}
}

// Example 5: unlimited answers OK with limit_remaining MaxUint32 and is
// never counted.
func TestReadmeExample5(t *testing.T) {
	e := readmeEnv(t, nil)
	for i := 0; i < 3; i++ {
		r := e.call("backends", 1000000, desc("kerberos", "x"))
		if codesOf(r) != "OK OK" || r.Statuses[0].LimitRemaining != math.MaxUint32 || r.Statuses[0].CurrentLimit != nil {
			t.Fatalf("unlimited: %v", r)
		}
	}
	if got := codesOf(e.call("backends", 61, desc("s3", "b"))); got != "OVER OVER" {
		t.Errorf("61 on s3: %s", got)
	}
	if m := e.metrics(); strings.Contains(m, "kerberos") {
		t.Error("unlimited descriptor counted")
	}
}

// Example 6: alice's limit is in shadow mode: over it she still gets OK and
// the shadow_mode statistic counts it; bob is limited.
func TestReadmeExample6(t *testing.T) {
	e := readmeEnv(t, nil)
	for i := 0; i < 10; i++ {
		r := e.call("login", 0, desc("app", "auth", "account", "alice"))
		if got := codesOf(r); got != "OK OK" {
			t.Fatalf("alice request %d: %s", i+1, got)
		}
		if want := uint32(max(0, 3-i)); r.Statuses[0].LimitRemaining != want {
			t.Errorf("alice request %d: limit_remaining %d, want %d", i+1, r.Statuses[0].LimitRemaining, want)
		}
	}
	e.wantMetric(`ratelimit_service_rate_limit_shadow_mode{domain="login",descriptor="app.account_alice"} 6`)
	e.wantMetric(`ratelimit_service_rate_limit_over_limit{domain="login",descriptor="app.account_alice"} 6`)
	e.wantMetric(`ratelimit_service_rate_limit_total_hits{domain="login",descriptor="app.account_alice"} 10`)
	if got := codesOf(e.call("login", 6, desc("app", "auth", "account", "bob"))); got != "OK OK" {
		t.Errorf("bob 6: %s", got)
	}
	if got := codesOf(e.call("login", 0, desc("app", "auth", "account", "bob"))); got != "OVER OVER" {
		t.Errorf("bob 7th: %s", got)
	}
}

// Example 7: when both rules match in one request, the replacing one (8/s)
// applies and the replaced one (3/s) is neither checked nor counted.
func TestReadmeExample7(t *testing.T) {
	e := readmeEnv(t, nil)
	both := []*ratelimitDesc{desc("route", "reads", "customer", "c42"), desc("plan", "gold", "customer", "c42")}
	for i := 0; i < 8; i++ {
		r := e.call("upgrades", 0, both...)
		if codesOf(r) != "OK OK OK" || r.Statuses[0].CurrentLimit != nil || r.Statuses[1].CurrentLimit.RequestsPerUnit != 8 {
			t.Fatalf("request %d: %v", i+1, r)
		}
	}
	if got := codesOf(e.call("upgrades", 0, both...)); got != "OVER OK OVER" {
		t.Errorf("9th: %s", got)
	}
	// The replaced limit was not touched: 3 requests of its own still pass.
	if got := codesOf(e.call("upgrades", 3, desc("route", "reads", "customer", "c42"))); got != "OK OK" {
		t.Errorf("replaced limit alone: %s", got)
	}
}

// Example 8: detailed_metric gives each unlisted value its own statistics.
func TestReadmeExample8(t *testing.T) {
	e := readmeEnv(t, nil)
	e.call("detailed", 0, desc("api_key", "unlisted1"))
	e.call("detailed", 0, desc("api_key", "unlisted2"))
	e.call("detailed", 0, desc("api_key", "partner"))
	e.wantMetric(`ratelimit_service_rate_limit_total_hits{domain="detailed",descriptor="api_key_unlisted1"} 1`)
	e.wantMetric(`ratelimit_service_rate_limit_total_hits{domain="detailed",descriptor="api_key_unlisted2"} 1`)
	e.wantMetric(`ratelimit_service_rate_limit_total_hits{domain="detailed",descriptor="api_key_partner"} 1`)
}

// Example 9: wildcard values match; each matching value counts on its own.
func TestReadmeExample9(t *testing.T) {
	e := readmeEnv(t, nil)
	if got := codesOf(e.call("wildcards", 5, desc("user_agent", "curl/8.5"))); got != "OK OK" {
		t.Errorf("curl/8.5: %s", got)
	}
	if got := codesOf(e.call("wildcards", 0, desc("user_agent", "curl/8.5"))); got != "OVER OVER" {
		t.Errorf("curl/8.5 6th: %s", got)
	}
	if got := codesOf(e.call("wildcards", 0, desc("user_agent", "curl/7.0"))); got != "OK OK" {
		t.Errorf("curl/7.0 has its own counter: %s", got)
	}
	if r := e.call("wildcards", 0, desc("path", "/v1/9/orders")); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 15 {
		t.Errorf("middle wildcard: %v", r)
	}
	if r := e.call("wildcards", 0, desc("route", "/shop/x/item/9/buy")); r.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 25 {
		t.Errorf("two wildcards: %v", r)
	}
	if r := e.call("wildcards", 0, desc("path", "/v1/9/refunds")); r.Statuses[0].CurrentLimit != nil {
		t.Errorf("non-matching path limited: %v", r)
	}
}

// Example 10: value_to_metric puts runtime values into the statistics key.
func TestReadmeExample10(t *testing.T) {
	e := readmeEnv(t, nil)
	e.call("per_value_metrics", 0, desc("service", "api", "verb", "GET", "caller", "123"))
	e.call("per_value_metrics", 0, desc("team", "alice", "op", "writefile", "bucket", "docs"))
	e.wantMetric(`ratelimit_service_rate_limit_total_hits{domain="per_value_metrics",descriptor="service_api.verb_GET.caller"} 1`)
	e.wantMetric(`ratelimit_service_rate_limit_total_hits{domain="per_value_metrics",descriptor="team_alice.op_writefile.bucket"} 1`)
}

// Example 11: with share_threshold every match of reports/* draws on one
// counter; without it each exports/* value has its own.
func TestReadmeExample11(t *testing.T) {
	e := readmeEnv(t, nil)
	e.call("shared", 2, desc("report", "reports/a.pdf"))
	e.call("shared", 2, desc("report", "reports/b.csv"))
	if got := codesOf(e.call("shared", 0, desc("report", "reports/c.txt"))); got != "OVER OVER" {
		t.Errorf("shared threshold: %s", got)
	}
	if got := codesOf(e.call("shared", 4, desc("export", "exports/a.pdf"))); got != "OK OK" {
		t.Errorf("exports/a: %s", got)
	}
	if got := codesOf(e.call("shared", 0, desc("export", "exports/a.pdf"))); got != "OVER OVER" {
		t.Errorf("exports/a 5th: %s", got)
	}
	if got := codesOf(e.call("shared", 0, desc("export", "exports/b.pdf"))); got != "OK OK" {
		t.Errorf("exports/b: %s", got)
	}
	e.call("shared", 0, desc("api", "v2/users", "method", "GET"))
	e.wantMetric(`ratelimit_service_rate_limit_total_hits{domain="shared",descriptor="api_v2/*.method"} 1`)
}
