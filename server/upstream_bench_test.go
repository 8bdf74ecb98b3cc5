package server_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/upstream/tier"
)

// BenchmarkUpstreamHotKeys: THROTTLE.CHECK of 5 hot fixed-window keys in
// pipelines of 16 from parallel go-redis connections, against one server in
// memory, over a redis-server in leased mode (batch 1000) and in strict
// mode, in the same run. One op is one check; compare the modes' ns/op.
func BenchmarkUpstreamHotKeys(b *testing.B) {
	addr := clustertest.Server(b)
	for _, mode := range []string{"memory", "leased", "strict"} {
		b.Run(mode, func(b *testing.B) {
			clk := newUpClock()
			var srvAddr string
			switch mode {
			case "memory":
				srvAddr = startServer(b, nil).Addr
			default:
				m := tier.ModeStrict
				if mode == "leased" {
					m = tier.ModeLeased
				}
				ts, _ := startUpstream(b, "redis://"+addr, clk, upOpts{mode: m, batch: 1000})
				srvAddr = ts.Addr
			}
			c := redis.NewClient(&redis.Options{Addr: srvAddr, Protocol: 2, PoolSize: 16})
			defer c.Close()
			var seq atomic.Int64
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for {
					p := c.Pipeline()
					n := 0
					for n < 16 && pb.Next() {
						k := "bench:" + mode + ":" + strconv.Itoa(int(seq.Add(1)%5))
						p.Do(ctx, "THROTTLE.CHECK", k, "1000000000", "1h", "ALGO", "fixed")
						n++
					}
					if n > 0 {
						if _, err := p.Exec(ctx); err != nil {
							b.Error(err)
							return
						}
					}
					if n < 16 {
						return
					}
				}
			})
		})
	}
}
