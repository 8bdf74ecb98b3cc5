package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/policy"
	"github.com/throttlekit/throttlekit-server/upstream/tier"
)

// modePolicies are two rules alike but for their per-descriptor mode.
const modePolicies = `
domain: modes
descriptors:
  - key: tier
    value: hot
    mode: leased
    rate_limit: {name: hot, unit: minute, requests_per_unit: 1000}
  - key: tier
    value: exact
    mode: strict
    rate_limit: {name: exact, unit: minute, requests_per_unit: 1000}
`

// TestUpstreamPolicyMode: over an upstream whose own mode is strict for
// every key, THROTTLE.CHECK with POLICY serves a leased rule from leased
// credits (upstream_leases and upstream_lease_hits in INFO upstream grow,
// one lease for many checks) and a strict rule with one upstream call per
// check, against a real redis-server; and a strict rule on a key whose
// prefix is leased stays strict (the rule's mode comes before the prefix
// table).
func TestUpstreamPolicyMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "modes.yaml")
	if err := os.WriteFile(path, []byte(modePolicies), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := policy.Open(path, policy.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clk := newUpClock()
	up, bp := startUpstream(t, "redis://"+clustertest.Server(t), clk, upOpts{
		mode: tier.ModeStrict, prefixes: []tier.PrefixMode{{Prefix: "lz:", Mode: tier.ModeLeased}},
		batch: 50, policies: st})
	c := goredis(t, up.Addr, 2)
	b := *bp

	before := b.UpstreamStats()
	for i := 0; i < 10; i++ {
		if d := reply(c, "THROTTLE.CHECK", "h1", "POLICY", "modes/hot"); d.([]any)[0] != int64(1) {
			t.Fatalf("leased check %d: %#v", i, d)
		}
	}
	after := b.UpstreamStats()
	if after.Leases-before.Leases != 1 || after.LeaseHits-before.LeaseHits < 9 {
		t.Fatalf("leased rule: %d leases, %d lease hits for 10 checks; want 1 lease, the rest answered from it",
			after.Leases-before.Leases, after.LeaseHits-before.LeaseHits)
	}
	if got := infoField(t, reply(c, "INFO", "upstream"), "upstream_leases"); got != "1" {
		t.Fatalf("INFO upstream_leases = %q after the leased checks, want 1", got)
	}

	for _, key := range []string{"s1", "lz:s2"} {
		before = b.UpstreamStats()
		for i := 0; i < 10; i++ {
			if d := reply(c, "THROTTLE.CHECK", key, "POLICY", "modes/exact"); d.([]any)[0] != int64(1) {
				t.Fatalf("strict check %d of %s: %#v", i, key, d)
			}
		}
		after = b.UpstreamStats()
		if after.Leases != before.Leases || after.LeaseHits != before.LeaseHits || after.RoundTrips-before.RoundTrips != 10 {
			t.Fatalf("strict rule on %s: %d leases, %d lease hits, %d round trips for 10 checks; want 0, 0, 10", key,
				after.Leases-before.Leases, after.LeaseHits-before.LeaseHits, after.RoundTrips-before.RoundTrips)
		}
	}

	// The same key checked inline (no POLICY) after a POLICY check gets
	// the backend's own mode again: the hint does not outlive its command.
	before = b.UpstreamStats()
	reply(c, "THROTTLE.CHECK", "h9", "1000", "1m", "ALGO", "fixed")
	after = b.UpstreamStats()
	if after.Leases != before.Leases || after.RoundTrips-before.RoundTrips != 1 {
		t.Fatalf("inline check after POLICY checks: %d leases, %d round trips; want 0, 1",
			after.Leases-before.Leases, after.RoundTrips-before.RoundTrips)
	}
}

// infoField returns field's value in an INFO reply, or "" if absent.
func infoField(t *testing.T, info any, field string) string {
	t.Helper()
	s, ok := info.(string)
	if !ok {
		t.Fatalf("INFO: %#v", info)
	}
	for _, ln := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(ln, field+":"); ok {
			return v
		}
	}
	return ""
}
