package tier

import (
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/limits"
)

// TestLocalLeased: Local answers a leased key's checks from the credits
// Do leased, as Do would, without a round trip or an allocation; it
// declines (op untouched) a key without a lease, another limit, other
// operations and strict keys.
func TestLocalLeased(t *testing.T) {
	b := newBackend(t, "redis://"+clustertest.Server(t), Config{Mode: ModeLeased, Batch: 10,
		Prefixes: []PrefixMode{{"s:", ModeStrict}}})
	lim, _ := engine.NewLimit(engine.KindFixed, 100, int64(time.Second), 0)
	check := func(key string) *limits.Op {
		return &limits.Op{Kind: limits.OpCheck, Key: []byte(key), Limit: lim, Cost: 1}
	}
	if op := check("k"); b.Local(op, t0) || op.Err != nil || op.Decision != (engine.Decision{}) {
		t.Fatalf("no lease yet: answered %+v", op)
	}
	first := do(b, check("k"), t0) // leases 10, spends 1
	if first.Err != nil || first.Decision.Allowed != 1 {
		t.Fatalf("first check: %+v", first)
	}
	s := b.UpstreamStats()
	op := check("k")
	if !b.Local(op, t0) || op.Err != nil || op.Decision.Allowed != 1 || op.Decision.Remaining != first.Decision.Remaining-1 ||
		op.Decision.ResetAt != first.Decision.ResetAt || op.Decision.Limit != 100 {
		t.Fatalf("second check: %+v after %+v", op.Decision, first.Decision)
	}
	if allocs := testing.AllocsPerRun(4, func() { b.Local(op, t0) }); allocs != 0 {
		t.Fatalf("Local allocates %v times per hit", allocs)
	}
	// 2 + 4 + AllocsPerRun's warm-up 1 = 7 of the 10 credits spent. The
	// eighth check would leave 2, the low-water mark of a batch of 10:
	// Local declines it, Do answers it and starts the next lease.
	if op := check("k"); b.Local(op, t0) || op.Decision != (engine.Decision{}) {
		t.Fatalf("check at the low-water mark answered %+v", op.Decision)
	}
	if got := b.UpstreamStats(); got.RoundTrips != s.RoundTrips || got.LeaseHits != s.LeaseHits+6 || got.Allowed != s.Allowed+6 {
		t.Fatalf("stats %+v after %+v: want no round trip and 6 more lease hits and admissions", got, s)
	}
	if r := do(b, check("k"), t0); r.Err != nil || r.Decision.Allowed != 1 || r.Decision.Remaining != first.Decision.Remaining-7 {
		t.Fatalf("Do at the low-water mark: %+v", r.Decision)
	}
	waitLease(t, b, "k")
	// The 2 credits left and the 10 prefetched: Local answers until the
	// next check would leave 2 again.
	for i := int64(8); i < 17; i++ {
		if !b.Local(op, t0) || op.Decision.Allowed != 1 || op.Decision.Remaining != first.Decision.Remaining-i {
			t.Fatalf("check %d after the prefetch: %+v", i+1, op.Decision)
		}
	}
	if op := check("k"); b.Local(op, t0) {
		t.Fatalf("second low-water mark: answered %+v", op.Decision)
	}
	if got := b.UpstreamStats(); got.Leases != s.Leases+1 || got.Prefetches != 1 || got.LeaseWaits != 1 {
		t.Fatalf("stats %+v: want one prefetch and only the first check waiting", got)
	}

	other, _ := engine.NewLimit(engine.KindFixed, 50, int64(time.Second), 0)
	declined := []*limits.Op{
		{Kind: limits.OpCheck, Key: []byte("k"), Limit: other, Cost: 1}, // another limit than the lease's
		{Kind: limits.OpPeek, Key: []byte("k"), Limit: lim, Cost: 1},
		{Kind: limits.OpCheck, Key: []byte("k"), Limit: lim, Cost: 101}, // never admitted: strict
		check("s:k"),
	}
	for _, op := range declined {
		if b.Local(op, t0) || op.Decision != (engine.Decision{}) || op.Err != nil {
			t.Errorf("%+v answered locally", op)
		}
	}
}

// TestLocalCachedDeny: Local answers a cached-deny key's check from a
// remembered denial, as Do does, without a round trip or an allocation,
// and declines once it lapsed.
func TestLocalCachedDeny(t *testing.T) {
	b := newBackend(t, "redis://"+clustertest.Server(t), Config{Mode: ModeCachedDeny})
	lim, _ := engine.NewLimit(engine.KindFixed, 1, int64(time.Second), 0)
	check := func() *limits.Op {
		return &limits.Op{Kind: limits.OpCheck, Key: []byte("d"), Limit: lim, Cost: 1}
	}
	if op := check(); b.Local(op, t0) {
		t.Fatalf("nothing cached: answered %+v", op)
	}
	if r := do(b, check(), t0); r.Decision.Allowed != 1 {
		t.Fatalf("first: %+v", r.Decision)
	}
	if r := do(b, check(), t0); r.Decision.Allowed != 0 || r.Decision.RetryAfter != 1000 {
		t.Fatalf("denial: %+v", r.Decision)
	}
	rt := b.UpstreamStats().RoundTrips
	// The cache lasts until t0 + 999 ms (remember: the retry-after less its
	// rounding).
	op := check()
	if !b.Local(op, t0+int64(400*time.Millisecond)) || op.Decision.Allowed != 0 || op.Decision.RetryAfter != 599 {
		t.Fatalf("cached: %+v", op.Decision)
	}
	if allocs := testing.AllocsPerRun(5, func() { b.Local(op, t0+int64(400*time.Millisecond)) }); allocs != 0 {
		t.Fatalf("Local allocates %v times per cached denial", allocs)
	}
	if b.UpstreamStats().RoundTrips != rt || b.UpstreamStats().CachedDenials != 7 {
		t.Fatalf("stats %+v", b.UpstreamStats())
	}
	if op := check(); b.Local(op, t0+int64(999*time.Millisecond)) {
		t.Fatalf("lapsed denial answered %+v", op.Decision)
	}
}
