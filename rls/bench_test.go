package rls

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/policy"
)

// benchCfg uses only envoyproxy/ratelimit's own format, so the same file
// drives BenchmarkShouldRateLimitExternal against its server.
const benchCfg = `
domain: bench
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000000}
  - key: route
    value: /api/*
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 1000000000}
  - key: tenant
    value: acme
    descriptors:
      - key: plan
        value: gold
        descriptors:
          - key: user
            rate_limit: {unit: hour, requests_per_unit: 1000000000}
`

func benchRequest(i int, n int) *rlsv3.RateLimitRequest {
	u := "user-" + strconv.Itoa(i%1000)
	ds := []*ratelimitDesc{desc("remote_address", "10.0.0."+strconv.Itoa(i%250))}
	if n == 3 {
		ds = append(ds, desc("route", "/api/orders", "user", u), desc("tenant", "acme", "plan", "gold", "user", u))
	}
	return &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: ds}
}

// BenchmarkShouldRateLimit measures one and three descriptors per request:
// "grpc" through a client over a loopback listener (what Envoy pays,
// serial and with parallel callers), "direct" calling the service method
// (the service's own cost). ops/s is reported for the parallel runs.
func BenchmarkShouldRateLimit(b *testing.B) {
	for _, n := range []int{1, 3} {
		name := strconv.Itoa(n) + "desc"
		b.Run(name+"/direct", func(b *testing.B) {
			e := startEnv(b, map[string]string{"b.yaml": benchCfg}, nil)
			reqs := make([]*rlsv3.RateLimitRequest, 1000)
			for i := range reqs {
				reqs[i] = benchRequest(i, n)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := e.svc.ShouldRateLimit(context.Background(), reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(name+"/grpc", func(b *testing.B) {
			e := startEnv(b, map[string]string{"b.yaml": benchCfg}, nil)
			reqs := make([]*rlsv3.RateLimitRequest, 1000)
			for i := range reqs {
				reqs[i] = benchRequest(i, n)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := e.client.ShouldRateLimit(context.Background(), reqs[i%len(reqs)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(name+"/grpc-parallel", func(b *testing.B) {
			e := startEnv(b, map[string]string{"b.yaml": benchCfg}, nil)
			reqs := make([]*rlsv3.RateLimitRequest, 1000)
			for i := range reqs {
				reqs[i] = benchRequest(i, n)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					if _, err := e.client.ShouldRateLimit(context.Background(), reqs[i%int64(len(reqs))]); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkShouldRateLimitExternal runs the grpc and grpc-parallel loads of
// BenchmarkShouldRateLimit against another RLS server at RLS_BENCH_ADDR
// (host:port) loaded with benchCfg, e.g. envoyproxy/ratelimit with a local
// redis-server; bench/README.md says how. Without RLS_BENCH_ADDR it skips.
func BenchmarkShouldRateLimitExternal(b *testing.B) {
	addr := os.Getenv("RLS_BENCH_ADDR")
	if addr == "" {
		b.Skip("RLS_BENCH_ADDR not set")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	client := rlsv3.NewRateLimitServiceClient(conn)
	for _, n := range []int{1, 3} {
		reqs := make([]*rlsv3.RateLimitRequest, 1000)
		for i := range reqs {
			reqs[i] = benchRequest(i, n)
		}
		name := strconv.Itoa(n) + "desc"
		b.Run(name+"/grpc", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r, err := client.ShouldRateLimit(context.Background(), reqs[i%len(reqs)])
				if err != nil || r.OverallCode != rlsv3.RateLimitResponse_OK || r.Statuses[0].CurrentLimit == nil {
					b.Fatal(r, err)
				}
				i++
			}
		})
		b.Run(name+"/grpc-parallel", func(b *testing.B) {
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					if _, err := client.ShouldRateLimit(context.Background(), reqs[i%int64(len(reqs))]); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}

// BenchmarkThrottleCheckRESP is the RESP baseline for the same loads: the
// server binary on a loopback port, and per request one pipeline of
// THROTTLE.CHECK commands (one per descriptor) on the counter keys and
// limits that the policy gives the RLS requests, sent with go-redis.
func BenchmarkThrottleCheckRESP(b *testing.B) {
	srv := testserver.Start(b)
	set, err := policy.Parse(map[string][]byte{"b.yaml": []byte(benchCfg)})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 3} {
		// cmds[i] holds the THROTTLE.CHECK arguments of request i.
		cmds := make([][][]any, 1000)
		for i := range cmds {
			for _, d := range benchRequest(i, n).Descriptors {
				en := make([]policy.Entry, len(d.Entries))
				for j, x := range d.Entries {
					en[j] = policy.Entry{Key: x.Key, Value: x.Value}
				}
				r := set.Match("bench", en)
				cmds[i] = append(cmds[i], []any{"THROTTLE.CHECK", string(r.AppendKey(nil, en)),
					r.RequestsPerUnit, int64(r.Period / time.Millisecond), "ALGO", "fixed"})
			}
		}
		run := func(c *redis.Client, i int) error {
			_, err := c.Pipelined(context.Background(), func(p redis.Pipeliner) error {
				for _, args := range cmds[i%len(cmds)] {
					p.Do(context.Background(), args...)
				}
				return nil
			})
			return err
		}
		name := strconv.Itoa(n) + "desc"
		b.Run(name+"/resp", func(b *testing.B) {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2})
			defer c.Close()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := run(c, i); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(name+"/resp-parallel", func(b *testing.B) {
			c := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2, PoolSize: 32})
			defer c.Close()
			var next atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := run(c, int(next.Add(1))); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
		})
	}
}
