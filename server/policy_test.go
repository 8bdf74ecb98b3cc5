package server

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/policy"
)

// TestPolicyZeroAlloc: THROTTLE.CHECK and PEEK with POLICY allocate nothing
// per command once keys exist, as the inline forms (TestDispatchZeroAlloc).
func TestPolicyZeroAlloc(t *testing.T) {
	st, err := policy.Open(filepath.Join("testdata", "policies", "api.yaml"), policy.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tl := newTestLoop(t, func(c *Config) { c.Policies = st })
	var in []byte
	for i := 0; i < 64; i++ {
		in = append(in, cmd("THROTTLE.CHECK", fmt.Sprintf("k%d", i), "POLICY", "api/pro", "COST", "0")...)
		in = append(in, cmd("THROTTLE.PEEK", fmt.Sprintf("k%d", i), "POLICY", "api/pro")...)
	}
	now := time.Now().UnixNano()
	tl.l.process(tl.cl, in, now)
	if strings.Contains(string(tl.l.out), "-ERR") {
		t.Fatalf("replies: %q", tl.l.out)
	}
	tl.l.out = tl.l.out[:0]
	var seen []float64
	for range 5 {
		allocs := testing.AllocsPerRun(20, func() {
			now += 1000
			tl.l.process(tl.cl, in, now)
			tl.l.out = tl.l.out[:0]
		})
		if allocs == 0 {
			return
		}
		seen = append(seen, allocs)
	}
	t.Fatalf("allocations per batch of %d commands in 5 attempts: %v, want 0 in at least one", 2*64, seen)
}

// TestPolicyReloadAppliesToNextCommand: a policy file changed and reloaded
// between two commands gives the second one the new limit; a name the new
// set lacks is unknown from then on.
func TestPolicyReloadAppliesToNextCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api.yaml")
	write := func(n string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("domain: api\ndescriptors:\n  - key: plan\n    rate_limit: {name: "+n+", unit: minute, requests_per_unit: 7}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("free")
	st, err := policy.Open(path, policy.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tl := newTestLoop(t, func(c *Config) { c.Policies = st })
	if got, _ := tl.run(cmd("THROTTLE.CHECK", "k", "POLICY", "api/free")); !strings.HasPrefix(got, "*5\r\n:1\r\n:7\r\n") {
		t.Fatalf("before the reload: %q", got)
	}
	write("paid")
	if err := st.Reload(); err != nil {
		t.Fatal(err)
	}
	if got, _ := tl.run(cmd("THROTTLE.CHECK", "k", "POLICY", "api/free")); got != "-ERR unknown policy 'api/free'\r\n" {
		t.Fatalf("after the reload: %q", got)
	}
}
