package upstream

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

// TestUnavailableReloadsSlots: a call to a cluster master that does not
// answer makes the client reload its slot map at once, instead of calling
// the dead address until go-redis's ten-second refresh. The map here comes
// from a counting ClusterSlots function naming a port where nothing
// listens.
func TestUnavailableReloadsSlots(t *testing.T) {
	dead := testserver.FreeAddr(t)
	var loads atomic.Int64
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			loads.Add(1)
			return []redis.ClusterSlot{{Start: 0, End: 16383, Nodes: []redis.ClusterNode{{Addr: dead}}}}, nil
		},
		MaxRetries: -1, DialTimeout: time.Second,
	})
	c := New(rdb)
	t.Cleanup(func() { _ = c.Close() })
	l := engine.Limit{Algo: engine.KindFixed, Limit: 10, Period: int64(time.Second)}
	if _, err := c.Check(context.Background(), "k", l, 1); CodeOf(err) != CodeUnavailable {
		t.Fatalf("check against a dead master: %v, want CodeUnavailable", err)
	}
	// The call loaded the map once before it was sent; the failure reloads
	// it in the background (maybe already done). The deadline bounds a
	// broken run and stays below go-redis's own ten-second refresh.
	for deadline := time.Now().Add(5 * time.Second); loads.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("no reload of the slot map after a failed call (%d loads)", loads.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
