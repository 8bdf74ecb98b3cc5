package grpcfront

import (
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/policy"
	"github.com/throttlekit/throttlekit-server/shard"
	"github.com/throttlekit/throttlekit-server/upstream"
	"github.com/throttlekit/throttlekit-server/upstream/tier"
)

// TestLimiterOverUpstream: over an upstream backend, whose operations
// complete later on its own goroutines (limits.ErrPending), the Limiter's
// checks, leases and returns wait for the completed values and give what
// the upstream decided, against a real redis-server.
func TestLimiterOverUpstream(t *testing.T) {
	c, err := upstream.Dial("redis://"+clustertest.Server(t), upstream.Options{Timeout: time.Second, PoolSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, err := tier.New(tier.Config{Client: c, Local: limits.NewLocal(shard.New(shard.Config{}), limits.Config{}), ServerClock: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l := NewLimiter(b)
	now := int64(1_700_000_040_000) * 1e6 // one instant: the window never rolls over
	lim, err := engine.NewLimit(engine.KindFixed, 3, int64(time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []int64{1, 1, 1, 0} {
		d, err := l.Check([]byte("rls:k"), lim, policy.ModeDefault, 1, now)
		if err != nil || d.Allowed != want || d.Remaining != max(0, 2-int64(i)) {
			t.Fatalf("check %d: %+v, %v; want allowed %d", i+1, d, err, want)
		}
	}
	g, err := l.Lease([]byte("rlqs:k"), lim, now, 2)
	if err != nil || g.Allowed != 2 || g.Remaining != 1 {
		t.Fatalf("lease: %+v, %v; want 2 granted, 1 left", g, err)
	}
	n, err := l.Return([]byte("rlqs:k"), now, 2, g.ResetAt)
	if err != nil || n != 2 {
		t.Fatalf("return: %d, %v; want 2 taken back", n, err)
	}
	if d, err := l.Check([]byte("rlqs:k"), lim, policy.ModeDefault, 3, now); err != nil || d.Allowed != 1 {
		t.Fatalf("after the return: %+v, %v; want the whole limit back", d, err)
	}
}
