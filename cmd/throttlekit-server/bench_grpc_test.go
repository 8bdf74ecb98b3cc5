package main

import (
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/credentials/insecure"
)

const benchPolicies = `domain: bench
descriptors:
  - key: user
    rate_limit:
      name: user
      algorithm: gcra
      unit: second
      requests_per_unit: 1000000000
  - key: tenant
    rate_limit:
      name: tenant
      algorithm: gcra
      unit: second
      requests_per_unit: 1000000000
  - key: route
    rate_limit:
      name: route
      algorithm: gcra
      unit: second
      requests_per_unit: 1000000000
`

// BenchmarkEnvoyVsRESP measures one client's round trip through the
// running program for the same limit (a gcra policy no request reaches):
// rls is ShouldRateLimit with one descriptor over gRPC (go-control-plane's
// client), resp is THROTTLE.CHECK key POLICY bench/user over RESP2
// (go-redis), resp-inline the same check with the limit inline; rls-3 and
// resp-3 check three limits (user, tenant, route): three descriptors in one
// request, and three THROTTLE.CHECK POLICY in one pipeline. All loopback,
// sequential calls, so ns/op is the round trip.
func BenchmarkEnvoyVsRESP(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "bench.yaml")
	writePolicies(b, path, benchPolicies)
	addr, grpcAddr := freeAddr(b), freeAddr(b)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"--addr", addr, "--metrics-addr", "", "--loops", "1",
			"--grpc-addr", grpcAddr, "--policies", path}, func(string) string { return "" }, io.Discard, io.Discard)
	}()
	defer func() { cancel(); <-done }()
	rdb := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			b.Fatal("server not up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cc := dialGRPC(b, grpcAddr, insecure.NewCredentials())
	rl := rlsv3.NewRateLimitServiceClient(cc)
	req := &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "42"}}}}}

	desc := func(k, v string) *ratelimitv3.RateLimitDescriptor {
		return &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: k, Value: v}}}
	}
	req3 := &rlsv3.RateLimitRequest{Domain: "bench", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		desc("user", "42"), desc("tenant", "7"), desc("route", "/a")}}

	b.Run("rls", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := rl.ShouldRateLimit(ctx, req)
			if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
				b.Fatal(resp, err)
			}
		}
	})
	b.Run("resp", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := rdb.Do(ctx, "THROTTLE.CHECK", "user_42", "POLICY", "bench/user").Int64Slice()
			if err != nil || res[0] != 1 {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("resp-inline", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			res, err := rdb.Do(ctx, "THROTTLE.CHECK", "user_43", "1000000000", "1s").Int64Slice()
			if err != nil || res[0] != 1 {
				b.Fatal(res, err)
			}
		}
	})
	b.Run("rls-3", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			resp, err := rl.ShouldRateLimit(ctx, req3)
			if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK || len(resp.Statuses) != 3 {
				b.Fatal(resp, err)
			}
		}
	})
	b.Run("resp-3", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			cmds, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, "THROTTLE.CHECK", "user_42", "POLICY", "bench/user")
				p.Do(ctx, "THROTTLE.CHECK", "tenant_7", "POLICY", "bench/tenant")
				p.Do(ctx, "THROTTLE.CHECK", "route_/a", "POLICY", "bench/route")
				return nil
			})
			if err != nil || len(cmds) != 3 {
				b.Fatal(cmds, err)
			}
		}
	})
}
