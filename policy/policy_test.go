package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
)

func e(kv ...string) []Entry {
	out := make([]Entry, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Entry{kv[i], kv[i+1]})
	}
	return out
}

func loadReadme(t *testing.T) *Set {
	t.Helper()
	s, err := Load("testdata/readme")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReadmeExamples replays, for the configuration mirroring each example
// of envoyproxy/ratelimit's README (testdata/readme/exNN.yaml), the
// requests the README describes and checks which rule applies.
func TestReadmeExamples(t *testing.T) {
	s := loadReadme(t)
	cases := []struct {
		example string
		domain  string
		entries []Entry
		path    string // "" = no rule applies
		rpu     uint32
	}{
		// Example 1: each value has its own limit; an unknown value has none.
		{"1", "postgres_qps", e("table", "accounts"), "table_accounts", 400},
		{"1", "postgres_qps", e("table", "fallback"), "table_fallback", 300},
		{"1", "postgres_qps", e("table", "orders"), "", 0},
		// Example 2: nested any-value under a placeholder; top-level any-value.
		{"2", "sms", e("category", "promo", "recipient", "2065550101"), "category_promo.recipient", 3},
		{"2", "sms", e("recipient", "2065550101"), "recipient", 50},
		{"2", "sms", e("category", "promo"), "", 0}, // placeholder: no limit of its own
		{"2", "sms", e("category", "news", "recipient", "2065550101"), "", 0},
		// Example 3: key=value is tried before key.
		{"3", "ingress_by_client", e("client_ip", "192.0.2.1"), "client_ip", 20},
		{"3", "ingress_by_client", e("client_ip", "192.0.2.66"), "client_ip_192.0.2.66", 0},
		// Example 4: depth must equal.
		{"4", "depth_one", e("tenant", "acme", "project", "p1"), "", 0},
		{"4", "depth_one", e("tenant", "acme"), "tenant_acme", 120},
		{"4", "depth_two", e("tenant", "acme", "project", "p1"), "tenant_acme.project", 120},
		{"4", "depth_two", e("tenant", "acme"), "", 0},
		// Example 5: unlimited is a rule (Unlimited), not "no rule".
		{"5", "backends", e("kerberos", "x"), "kerberos", 0},
		{"5", "backends", e("s3", "bucket1"), "s3", 60},
		// Example 6: shadow mode on alice only.
		{"6", "login", e("app", "auth", "account", "alice"), "app.account_alice", 4},
		{"6", "login", e("app", "auth", "account", "bob"), "app.account_bob", 6},
		// Example 7: both rules are found; replacing is the service's job.
		{"7", "upgrades", e("route", "reads", "customer", "c42"), "route_reads.customer_c42", 3},
		{"7", "upgrades", e("plan", "gold", "customer", "c42"), "plan_gold.customer_c42", 8},
		// Example 8: key=value before key.
		{"8", "detailed", e("api_key", "k1"), "api_key", 7},
		{"8", "detailed", e("api_key", "partner"), "api_key_partner", 70},
		// Example 9: wildcards.
		{"9", "wildcards", e("user_agent", "curl/8.5"), "user_agent_curl/*", 5},
		{"9", "wildcards", e("user_agent", "curl/"), "user_agent_curl/*", 5},
		{"9", "wildcards", e("user_agent", "wget/1"), "", 0},
		{"9", "wildcards", e("path", "/v1/123/orders"), "path_/v1/*/orders", 15},
		{"9", "wildcards", e("path", "/v1/123/refunds"), "", 0},
		{"9", "wildcards", e("route", "/shop/a/item/7/buy"), "route_/shop/*/item/*/buy", 25},
		{"9", "wildcards", e("route", "/shop/a/item/7/sell"), "", 0},
		// Example 10: value_to_metric changes metrics only.
		{"10", "per_value_metrics", e("service", "api", "verb", "GET", "caller", "u1"), "service.verb.caller", 30},
		{"10", "per_value_metrics", e("team", "t1", "op", "writefile", "bucket", "b"), "team.op_write*.bucket", 90},
		// Example 11: share_threshold does not change matching.
		{"11", "shared", e("report", "reports/a.pdf"), "report_reports/*", 4},
		{"11", "shared", e("export", "exports/a.pdf"), "export_exports/*", 4},
		{"11", "shared", e("api", "v2/users", "method", "GET"), "api_v2/*.method", 40},
		// Unknown domain.
		{"-", "nope", e("table", "accounts"), "", 0},
	}
	for _, c := range cases {
		r := s.Match(c.domain, c.entries)
		got := ""
		if r != nil {
			got = r.Path
		}
		if got != c.path {
			t.Errorf("example %s: %s %v matched %q, want %q", c.example, c.domain, c.entries, got, c.path)
			continue
		}
		if r != nil && r.RequestsPerUnit != c.rpu {
			t.Errorf("example %s: %s %v: requests_per_unit %d, want %d", c.example, c.domain, c.entries, r.RequestsPerUnit, c.rpu)
		}
	}
	if r := s.Match("ingress_by_client", e("client_ip", "192.0.2.66")); !r.Block {
		t.Error("example 3: requests_per_unit 0 must block")
	}
	if r := s.Match("backends", e("kerberos", "x")); !r.Unlimited {
		t.Error("example 5: kerberos must be unlimited")
	}
	if r := s.Match("login", e("app", "auth", "account", "alice")); !r.ShadowMode {
		t.Error("example 6: alice must be in shadow mode")
	}
	if r := s.Match("login", e("app", "auth", "account", "bob")); r.ShadowMode {
		t.Error("example 6: bob must not be in shadow mode")
	}
	r := s.Match("upgrades", e("plan", "gold", "customer", "c42"))
	if len(r.Replaces) != 1 || r.Replaces[0] != "reads_c42" {
		t.Errorf("example 7: replaces = %v", r.Replaces)
	}
}

// TestNoBacktracking: once a key=value descriptor matched, its nested list
// is the only one searched, as in envoyproxy/ratelimit's single walk down
// the tree (no fallback to the key-only sibling).
func TestNoBacktracking(t *testing.T) {
	s := mustParse(t, `
domain: d
descriptors:
  - key: a
    value: x
    descriptors:
      - key: b
        value: only
        rate_limit: {unit: second, requests_per_unit: 1}
  - key: a
    descriptors:
      - key: b
        rate_limit: {unit: second, requests_per_unit: 2}
`)
	if r := s.Match("d", e("a", "x", "b", "other")); r != nil {
		t.Errorf("matched %s; want none (no backtracking to key-only a)", r.Path)
	}
	if r := s.Match("d", e("a", "y", "b", "other")); r == nil || r.RequestsPerUnit != 2 {
		t.Errorf("a=y b=other: %v", r)
	}
}

// TestWildcardOrder: an exact value beats every wildcard, the first
// wildcard in file order beats later ones, and a wildcard beats key-only.
func TestWildcardOrder(t *testing.T) {
	s := mustParse(t, `
domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: ab*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: k
    value: a*
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: k
    value: abc
    rate_limit: {unit: second, requests_per_unit: 4}
`)
	for v, want := range map[string]uint32{"abc": 4, "abd": 2, "ax": 3, "zz": 1} {
		if r := s.Match("d", e("k", v)); r == nil || r.RequestsPerUnit != want {
			t.Errorf("k=%s: %v, want %d", v, r, want)
		}
	}
}

func mustParse(t *testing.T, y string) *Set {
	t.Helper()
	s, err := Parse(map[string][]byte{"test.yaml": []byte(y)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestCounterKeys(t *testing.T) {
	s := loadReadme(t)
	key := func(d string, en []Entry) string {
		r := s.Match(d, en)
		if r == nil {
			t.Fatalf("%s %v: no rule", d, en)
		}
		return string(r.AppendKey(nil, en))
	}
	if got, want := key("sms", e("category", "promo", "recipient", "2065550101")),
		"rls:sms:category=promo:recipient=2065550101#fixed:24h0m0s"; got != want {
		t.Errorf("key %q, want %q", got, want)
	}
	// Example 11: share_threshold makes every match one counter.
	a, b := key("shared", e("report", "reports/a.pdf")), key("shared", e("report", "reports/b.csv"))
	if a != b || a != "rls:shared:report=reports/*#fixed:1h0m0s" {
		t.Errorf("shared keys %q and %q", a, b)
	}
	// Without it, one counter per value.
	if key("shared", e("export", "exports/a.pdf")) == key("shared", e("export", "exports/b.pdf")) {
		t.Error("export without share_threshold shares a counter")
	}
	// A shared level keeps the pattern, the nested any-value level its value.
	if got := key("shared", e("api", "v2/users", "method", "GET")); got != "rls:shared:api=v2/*:method=GET#fixed:1m0s" {
		t.Errorf("nested shared key %q", got)
	}
	// Escaping keeps keys unambiguous: the separator characters in values
	// cannot forge another descriptor's key.
	r := &Rule{Domain: "d", tag: "fixed:1s"}
	k1 := string(r.AppendKey(nil, e("a", "b:c=d")))
	k2 := string(r.AppendKey(nil, e("a", "b", "c", "d")))
	if k1 == k2 {
		t.Errorf("escaping failed: %q == %q", k1, k2)
	}
	if k1 != `rls:d:a=b\:c\=d#fixed:1s` {
		t.Errorf("escaped key %q", k1)
	}
}

func TestMetricKeys(t *testing.T) {
	s := loadReadme(t)
	cases := []struct {
		domain  string
		entries []Entry
		want    string
	}{
		// Example 8: detailed_metric puts the request's value in.
		{"detailed", e("api_key", "unlisted1"), "api_key_unlisted1"},
		{"detailed", e("api_key", "partner"), "api_key_partner"},
		// Example 10: value_to_metric per level.
		{"per_value_metrics", e("service", "api", "verb", "GET", "caller", "123"), "service_api.verb_GET.caller"},
		{"per_value_metrics", e("team", "alice", "op", "writefile", "bucket", "docs"), "team_alice.op_writefile.bucket"},
		// Example 11: a shared wildcard level reports its pattern.
		{"shared", e("api", "v2/users", "method", "GET"), "api_v2/*.method"},
		// Example 3: the dots of an IPv4 address are sanitised.
		{"ingress_by_client", e("client_ip", "192.0.2.66"), "client_ip_192_0_2_66"},
		{"sms", e("category", "promo", "recipient", "1"), "category_promo.recipient"},
	}
	for _, c := range cases {
		r := s.Match(c.domain, c.entries)
		if got := r.MetricKey(c.entries); got != c.want {
			t.Errorf("%s %v: metric key %q, want %q", c.domain, c.entries, got, c.want)
		}
	}
}

func TestExtensions(t *testing.T) {
	s := mustParse(t, `
domain: ext
descriptors:
  - key: g
    mode: leased
    rate_limit: {unit: minute, requests_per_unit: 60, algorithm: gcra, burst: 10}
  - key: t
    rate_limit: {period: 90s, requests_per_unit: 30, algorithm: token}
  - key: s
    mode: cached-deny
    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: sliding, name: hourly}
  - key: f
    rate_limit: {period: 2d, requests_per_unit: 5}
  - key: m
    rate_limit: {unit: MONTH, requests_per_unit: 5}
  - key: y
    rate_limit: {unit: year, requests_per_unit: 5}
  - key: w
    rate_limit: {unit: Week, requests_per_unit: 5}
`)
	want := map[string]engine.Limit{}
	mk := func(k engine.Kind, lim int64, p time.Duration, burst int64) engine.Limit {
		l, err := engine.NewLimit(k, lim, int64(p), burst)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	want["g"] = mk(engine.KindGCRA, 60, time.Minute, 10)
	want["t"] = mk(engine.KindToken, 30, 90*time.Second, 0)
	want["s"] = mk(engine.KindSliding, 100, time.Hour, 0)
	want["f"] = mk(engine.KindFixed, 5, 48*time.Hour, 0)
	want["m"] = mk(engine.KindFixed, 5, 30*24*time.Hour, 0)
	want["y"] = mk(engine.KindFixed, 5, 365*24*time.Hour, 0)
	want["w"] = mk(engine.KindFixed, 5, 7*24*time.Hour, 0)
	for k, w := range want {
		r := s.Match("ext", e(k, "v"))
		if r == nil || r.Limit != w {
			t.Errorf("%s: limit %+v, want %+v", k, r, w)
		}
	}
	if r := s.Match("ext", e("g", "v")); r.Mode != ModeLeased {
		t.Errorf("g mode %v", r.Mode)
	}
	if r := s.Match("ext", e("s", "v")); r.Mode != ModeCachedDeny {
		t.Errorf("s mode %v", r.Mode)
	}
	if u, n := s.Match("ext", e("t", "v")).UnitMultiple(); u != UnitMinute && !(u == UnitSecond && n == 90) {
		t.Errorf("90s as %v x %d", u, n)
	}
	if u, n := s.Match("ext", e("f", "v")).UnitMultiple(); u != UnitDay || n != 2 {
		t.Errorf("2d as %v x %d", u, n)
	}
	// A changed rate keeps the counter key; a changed window or algorithm does not.
	s2 := mustParse(t, `
domain: ext
descriptors:
  - key: g
    rate_limit: {unit: minute, requests_per_unit: 600, algorithm: gcra, burst: 20}
  - key: t
    rate_limit: {period: 91s, requests_per_unit: 30, algorithm: token}
  - key: s
    rate_limit: {unit: hour, requests_per_unit: 100, algorithm: fixed}
`)
	for k, same := range map[string]bool{"g": true, "t": false, "s": false} {
		en := e(k, "v")
		a := string(s.Match("ext", en).AppendKey(nil, en))
		b := string(s2.Match("ext", en).AppendKey(nil, en))
		if (a == b) != same {
			t.Errorf("%s: keys %q and %q, same=%v wanted %v", k, a, b, a == b, same)
		}
	}
}

func TestLookupAndRules(t *testing.T) {
	s := mustParse(t, `
domain: d
descriptors:
  - key: a
    rate_limit: {unit: second, requests_per_unit: 1, name: one}
  - key: b
    rate_limit: {unit: second, requests_per_unit: 2, name: two}
  - key: c
    rate_limit: {unit: second, requests_per_unit: 3, name: two}
`)
	r, err := s.Lookup("d", "one")
	if err != nil || r.RequestsPerUnit != 1 {
		t.Fatalf("Lookup one: %v %v", r, err)
	}
	if _, err := s.Lookup("x", "one"); !errors.Is(err, ErrUnknownDomain) {
		t.Errorf("unknown domain: %v", err)
	}
	if _, err := s.Lookup("d", "three"); !errors.Is(err, ErrUnknownName) {
		t.Errorf("unknown name: %v", err)
	}
	if _, err := s.Lookup("d", "two"); !errors.Is(err, ErrAmbiguousName) {
		t.Errorf("ambiguous name: %v", err)
	}
	rules := s.Rules()
	if len(rules) != 3 || rules[0].Path != "a" || rules[2].Path != "c" {
		t.Errorf("Rules: %v", rules)
	}
	if got := rules[0].String(); got != "d a name=one 1 per second fixed" {
		t.Errorf("String: %q", got)
	}
}

// TestLoadErrors: every rejected configuration names the file, the line and
// the descriptor path, with a stable code.
func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name, yaml string
		code       Code
		line       int
		path, msg  string
	}{
		{"empty domain", "descriptors: []\n", CodeDomain, 1, "", "empty domain"},
		{"empty file", "", CodeDomain, 0, "", "empty domain"},
		{"syntax", "domain: [\n", CodeSyntax, 0, "", "yaml"},
		{"unknown key", "domain: d\ndescriptors:\n  - key: a\n    rate_limt: {unit: second}\n", CodeUnknownKey, 4, "d", "unknown key 'rate_limt'"},
		{"empty key", "domain: d\ndescriptors:\n  - value: a\n", CodeKey, 3, "d", "empty key"},
		{"duplicate", "domain: d\ndescriptors:\n  - key: a\n    value: x\n  - key: a\n    value: x\n", CodeDuplicateDescriptor, 5, "d/a=x", "duplicate"},
		{"bad unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n", CodeUnit, 5, "d/a", "invalid rate limit unit 'fortnight'"},
		{"no unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      requests_per_unit: 1\n", CodeUnit, 5, "d/a", "invalid rate limit unit"},
		{"unit and unlimited", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unlimited: true, unit: second}\n", CodeUnit, 4, "d/a", "unlimited"},
		{"negative rpu", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: -1}\n", CodeType, 4, "d/a", "requests_per_unit"},
		{"empty replaces", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      replaces:\n        - name: \"\"\n", CodeReplaces, 7, "d/a", "empty replaces"},
		{"self replaces", "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      name: n\n      unit: second\n      replaces: [{name: n}]\n", CodeReplaces, 7, "d/a", "same descriptor"},
		{"share without wildcard", "domain: d\ndescriptors:\n  - key: a\n    value: x\n    share_threshold: true\n", CodeShareThreshold, 5, "d/a=x", "wildcard"},
		{"algorithm", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: leaky}\n", CodeAlgorithm, 4, "d/a", "leaky"},
		{"burst on fixed", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, burst: 3}\n", CodeBurst, 4, "d/a", "gcra and token"},
		{"burst zero", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, algorithm: gcra, burst: 0}\n", CodeBurst, 4, "d/a", "positive"},
		{"period and unit", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, period: 5s, requests_per_unit: 1}\n", CodePeriod, 4, "d/a", "not both"},
		{"bad period", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {period: -5s, requests_per_unit: 1}\n", CodePeriod, 4, "d/a", "positive duration"},
		{"mode", "domain: d\ndescriptors:\n  - key: a\n    mode: eventual\n    rate_limit: {unit: second, requests_per_unit: 1}\n", CodeMode, 4, "d/a", "eventual"},
		{"mode without limit", "domain: d\ndescriptors:\n  - key: a\n    mode: strict\n", CodeMode, 4, "d/a", "no"},
		{"rate out of range", "domain: d\ndescriptors:\n  - key: a\n    rate_limit: {period: 1ns, requests_per_unit: 5, algorithm: gcra}\n", CodeRate, 4, "d/a", "cannot be enforced"},
		{"bool type", "domain: d\ndescriptors:\n  - key: a\n    shadow_mode: maybe\n", CodeType, 4, "d/a", "shadow_mode"},
		{"list of scalars", "domain: d\ndescriptors:\n  - a\n", CodeType, 3, "d", "mapping"},
		{"metadata timestamp", "domain: d\ndescriptors:\n  - key: a\n    metadata: {at: 2026-01-02T03:04:05Z}\n", CodeType, 4, "d/a", "metadata"},
		{"nested path", "domain: d\ndescriptors:\n  - key: a\n    value: x\n    descriptors:\n      - key: b\n        rate_limit: {unit: eon}\n", CodeUnit, 7, "d/a=x/b", "eon"},
	}
	for _, c := range cases {
		_, err := Parse(map[string][]byte{"bad.yaml": []byte(c.yaml)})
		var pe *Error
		if !errors.As(err, &pe) {
			t.Errorf("%s: error %v is not a policy error", c.name, err)
			continue
		}
		if pe.Code != c.code || pe.Line != c.line || pe.Path != c.path || pe.File != "bad.yaml" || !strings.Contains(pe.Msg, c.msg) {
			t.Errorf("%s: got code %d line %d path %q file %q msg %q; want code %d line %d path %q msg containing %q",
				c.name, pe.Code, pe.Line, pe.Path, pe.File, pe.Msg, c.code, c.line, c.path, c.msg)
		}
		if !strings.HasPrefix(err.Error(), "bad.yaml") {
			t.Errorf("%s: %q does not name the file", c.name, err)
		}
	}
}

// TestAcceptedKeys: every key of envoyproxy/ratelimit's format loads,
// including those its README lists without describing (quota_mode,
// metadata), and an unlimited rule with an invalid unit loads as it does
// there.
func TestAcceptedKeys(t *testing.T) {
	s := mustParse(t, `
domain: all
descriptors:
  - key: a
    value: v*
    shadow_mode: true
    quota_mode: true
    detailed_metric: true
    value_to_metric: true
    share_threshold: true
    metadata:
      team: payments
      tags: [x, y]
    rate_limit:
      name: n
      replaces: [{name: other}]
      unit: second
      requests_per_unit: 9
    descriptors: []
  - key: b
    rate_limit: {unlimited: true, unit: not-a-unit}
  - key: c
    descriptors:
`)
	r := s.Match("all", e("a", "v1"))
	if r == nil || !r.ShadowMode || !r.QuotaMode || !r.DetailedMetric || r.Metadata["team"] != "payments" {
		t.Fatalf("rule %+v", r)
	}
	if r := s.Match("all", e("b", "x")); r == nil || !r.Unlimited {
		t.Errorf("b: %v", r)
	}
	if r := s.Match("all", e("c", "x")); r != nil {
		t.Errorf("c (no rate_limit) matched %v", r)
	}
}

func TestDuplicateDomain(t *testing.T) {
	_, err := Parse(map[string][]byte{
		"a.yaml": []byte("domain: d\n"),
		"b.yaml": []byte("domain: d\n"),
	})
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != CodeDuplicateDomain || pe.File != "b.yaml" || !strings.Contains(pe.Msg, "a.yaml") {
		t.Fatalf("duplicate domain: %v", err)
	}
}

func TestLoadDirectorySkipsOthers(t *testing.T) {
	s := loadReadme(t)
	if got := len(s.Domains()); got != 12 {
		t.Errorf("%d domains from testdata/readme, want 12: %v", got, s.Domains())
	}
	if _, err := Load("testdata/missing"); err == nil {
		t.Error("missing path loaded")
	}
	// Dot files (editor swap files, a ConfigMap's ..data entries), other
	// extensions and subdirectories are not loaded.
	dir := t.TempDir()
	for name, body := range map[string]string{
		"a.yaml":        "domain: a\n",
		"b.yml":         "domain: b\n",
		".a.yaml":       "domain: a\n",
		"notes.txt":     "not yaml: [",
		"sub/c.yaml":    "domain: a\n",
		"..data/d.yaml": "domain: a\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s2, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s2.Domains(), ","); got != "a,b" {
		t.Errorf("domains %q, want a,b", got)
	}
}

// FuzzParse: no input makes the loader or the matcher panic, and every
// error is a policy error.
func FuzzParse(f *testing.F) {
	ents, _ := os.ReadDir("testdata/readme")
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join("testdata/readme", e.Name()))
		f.Add(b, "k", "v")
	}
	f.Add([]byte("domain: d\ndescriptors: [{key: k, value: '*a*b*', rate_limit: {unit: second}}]\n"), "k", "xaybz")
	f.Fuzz(func(t *testing.T, data []byte, k, v string) {
		s, err := Parse(map[string][]byte{"f.yaml": data})
		if err != nil {
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a policy error", err)
			}
			return
		}
		for _, d := range s.Domains() {
			en := []Entry{{k, v}, {k, v}}
			for n := 1; n <= 2; n++ {
				if r := s.Match(d, en[:n]); r != nil {
					_ = r.AppendKey(nil, en[:n])
					_ = r.MetricKey(en[:n])
					_ = r.String()
				}
			}
		}
	})
}

// TestMatchKeyZeroAlloc: matching and building the counter key into a
// reused buffer allocate nothing, wildcards included.
func TestMatchKeyZeroAlloc(t *testing.T) {
	s := loadReadme(t)
	en := e("category", "promo", "recipient", "2065550101")
	wild := e("route", "/shop/a/item/7/buy")
	buf := make([]byte, 0, 256)
	allocs := testing.AllocsPerRun(1000, func() {
		r := s.Match("sms", en)
		buf = r.AppendKey(buf[:0], en)
		r = s.Match("wildcards", wild)
		buf = r.AppendKey(buf[:0], wild)
		_ = r.MetricKey(wild)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per match", allocs)
	}
}

func BenchmarkMatch(b *testing.B) {
	s, err := Load("testdata/readme")
	if err != nil {
		b.Fatal(err)
	}
	en := e("category", "promo", "recipient", "2065550101")
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		r := s.Match("sms", en)
		buf = r.AppendKey(buf[:0], en)
	}
}

func TestWindowEnd(t *testing.T) {
	s := loadReadme(t)
	r := s.Match("sms", e("recipient", "1")) // a day
	day := int64(24 * time.Hour)
	for _, c := range []struct{ now, want int64 }{{0, day}, {day - 1, day}, {day, 2 * day}, {day + 5, 2 * day}} {
		if got := r.WindowEnd(c.now); got != c.want {
			t.Errorf("WindowEnd(%d) = %d, want %d", c.now, got, c.want)
		}
	}
}

// TestModeOpMode: each mode maps to the core's operation hint of the same
// name, and ModeDefault to none.
func TestModeOpMode(t *testing.T) {
	for m, want := range map[Mode]limits.Mode{
		ModeDefault: limits.ModeDefault, ModeStrict: limits.ModeStrict,
		ModeCachedDeny: limits.ModeCachedDeny, ModeLeased: limits.ModeLeased,
	} {
		if got := m.OpMode(); got != want {
			t.Errorf("%q.OpMode() = %d, want %d", m, got, want)
		}
	}
}
