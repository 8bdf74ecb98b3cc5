package server

import (
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/upstream"
	"github.com/throttlekit/throttlekit-server/upstream/tier"
)

// TestUpstreamLeasedHitZeroAlloc: over an upstream in leased mode, a check
// answered from leased credits costs the event loop no allocation (no copy
// of the operation or its key, no parked reply), and its reply is the
// credit's decision, written in place.
func TestUpstreamLeasedHitZeroAlloc(t *testing.T) {
	c, err := upstream.Dial("redis://"+clustertest.Server(t), upstream.Options{Timeout: 10 * time.Second, PoolSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var b *tier.Backend
	tl := newTestLoop(t, func(cfg *Config) {
		cfg.Upstream = UpstreamConfig{New: func(local *limits.Local) (limits.Backend, error) {
			b, err = tier.New(tier.Config{Client: c, Local: local, Mode: tier.ModeLeased, Batch: 1000,
				Workers: 1, ServerClock: true})
			return b, err
		}}
	})
	t.Cleanup(func() { b.Close() })
	const now = 1_800_000_000_123_000_000
	in := []byte(cmd("THROTTLE.CHECK", "hot", "1000000", "1h", "ALGO", "fixed"))
	// The first check leases (the test loop has no event loop: it waits
	// for the upstream in place); the rest spend the lease's credits.
	tl.l.process(tl.cl, in, now)
	if got := tl.take(); !strings.HasPrefix(got, "*5\r\n:1\r\n:1000000\r\n:999999\r\n") {
		t.Fatalf("first check: %q", got)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		tl.l.out = tl.l.out[:0]
		tl.l.process(tl.cl, in, now)
	}); allocs != 0 {
		t.Fatalf("%v allocations per leased hit", allocs)
	}
	tl.l.out = tl.l.out[:0]
	tl.l.process(tl.cl, in, now) // the 103rd check
	if got := tl.take(); !strings.HasPrefix(got, "*5\r\n:1\r\n:1000000\r\n:999897\r\n") {
		t.Fatalf("103rd check: %q", got)
	}
	if s := b.UpstreamStats(); s.Leases != 1 || s.LeaseHits != 102 {
		t.Fatalf("%d leases, %d lease hits; want 1 and 102", s.Leases, s.LeaseHits)
	}
}
