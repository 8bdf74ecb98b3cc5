package rls

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
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
