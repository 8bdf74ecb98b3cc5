package rls

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/policy"
)

// envoyRatelimit is the envoyproxy/ratelimit version BenchmarkSameLoad
// builds from the module proxy (go install, cached under the temporary
// directory).
const envoyRatelimit = "github.com/envoyproxy/ratelimit/src/service_cmd@v1.4.1-0.20260122083618-3fb702589d36"

// BenchmarkSameLoad runs one load, in one run, against three servers on
// loopback, each in a process of its own: "rls" is ShouldRateLimit on the
// server binary's --grpc-addr, "resp" the same server's THROTTLE.CHECK
// of the same counter keys and limits (one go-redis pipeline per request,
// one command per descriptor), and "envoy-ratelimit" ShouldRateLimit on
// envoyproxy/ratelimit with a local redis-server, loaded with the same
// file (benchCfg uses only its format). Each request has one or three
// descriptors over 1000 distinct values (benchRequest), sent by 16
// callers at once (8 per CPU). Each sub-benchmark reports ops/s and the
// 50th and 99th percentile of a request's latency (p50-µs, p99-µs). Run it
// with -count N so the three alternate N times; without a go command or
// redis-server it skips, or fails under CI=1.
func BenchmarkSameLoad(b *testing.B) {
	dir := b.TempDir()
	cfg := filepath.Join(dir, "bench.yaml")
	if err := os.WriteFile(cfg, []byte(benchCfg), 0o644); err != nil {
		b.Fatal(err)
	}
	set, err := policy.Parse(map[string][]byte{"b.yaml": []byte(benchCfg)})
	if err != nil {
		b.Fatal(err)
	}

	// This server: RLS and RESP on one process.
	grpcAddr := testserver.FreeAddr(b)
	srv := testserver.Start(b, "--grpc-addr", grpcAddr, "--policies", cfg)
	tk := dialBench(b, grpcAddr)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: 2, PoolSize: 32})
	b.Cleanup(func() { rdb.Close() })

	// envoyproxy/ratelimit over its own redis-server.
	ext := dialBench(b, startEnvoyRatelimit(b, clustertest.Server(b)))

	for _, n := range []int{1, 3} {
		reqs := make([]*rlsv3.RateLimitRequest, 1000)
		cmds := make([][][]any, len(reqs)) // the THROTTLE.CHECK arguments of request i
		for i := range reqs {
			reqs[i] = benchRequest(i, n)
			for _, d := range reqs[i].Descriptors {
				en := make([]policy.Entry, len(d.Entries))
				for j, x := range d.Entries {
					en[j] = policy.Entry{Key: x.Key, Value: x.Value}
				}
				r := set.Match("bench", en)
				cmds[i] = append(cmds[i], []any{"THROTTLE.CHECK", string(r.AppendKey(nil, en)),
					r.RequestsPerUnit, int64(r.Period / time.Millisecond), "ALGO", "fixed"})
			}
		}
		rls := func(c rlsv3.RateLimitServiceClient) func(i int) error {
			return func(i int) error {
				r, err := c.ShouldRateLimit(context.Background(), reqs[i%len(reqs)])
				if err == nil && (r.OverallCode != rlsv3.RateLimitResponse_OK || len(r.Statuses) != n) {
					err = fmt.Errorf("unexpected response %v", r)
				}
				return err
			}
		}
		resp := func(i int) error {
			_, err := rdb.Pipelined(context.Background(), func(p redis.Pipeliner) error {
				for _, args := range cmds[i%len(cmds)] {
					p.Do(context.Background(), args...)
				}
				return nil
			})
			return err
		}
		name := strconv.Itoa(n) + "desc/"
		b.Run(name+"rls", func(b *testing.B) { loadLatency(b, rls(tk)) })
		b.Run(name+"resp", func(b *testing.B) { loadLatency(b, resp) })
		b.Run(name+"envoy-ratelimit", func(b *testing.B) { loadLatency(b, rls(ext)) })
	}
}

// loadLatency runs call from 8 goroutines per CPU for b.N calls in all and
// reports ops/s and the 50th and 99th percentile latency in µs.
func loadLatency(b *testing.B, call func(i int) error) {
	var (
		next atomic.Int64
		mu   sync.Mutex
		all  []time.Duration
	)
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		lat := make([]time.Duration, 0, 1024)
		defer func() { mu.Lock(); all = append(all, lat...); mu.Unlock() }()
		for pb.Next() {
			t := time.Now()
			if err := call(int(next.Add(1))); err != nil {
				b.Error(err)
				return
			}
			lat = append(lat, time.Since(t))
		}
	})
	b.StopTimer()
	if len(all) == 0 {
		return
	}
	slices.Sort(all)
	q := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))]) / 1e3 }
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

func dialBench(b *testing.B, addr string) rlsv3.RateLimitServiceClient {
	b.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cc.Close() })
	c := rlsv3.NewRateLimitServiceClient(cc)
	// Ready: the listener is up and the configuration loaded.
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		r, err := c.ShouldRateLimit(ctx, benchRequest(0, 1), grpc.WaitForReady(true))
		cancel()
		if err == nil && r.OverallCode == rlsv3.RateLimitResponse_OK && r.Statuses[0].GetCurrentLimit() != nil {
			return c
		}
		if time.Now().After(deadline) {
			b.Fatalf("RLS server at %s not ready: %v %v", addr, r, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startEnvoyRatelimit builds envoyproxy/ratelimit's server (once; the
// binary stays in the temporary directory for later runs), starts it on
// benchCfg with the redis-server at redisAddr, and returns its gRPC
// address. It stops it when b ends.
func startEnvoyRatelimit(b *testing.B, redisAddr string) string {
	b.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		if os.Getenv("CI") != "" {
			b.Fatalf("no go command to build envoyproxy/ratelimit: %v", err)
		}
		b.Skipf("no go command to build envoyproxy/ratelimit: %v", err)
	}
	bin := filepath.Join(os.TempDir(), "throttlekit-envoy-ratelimit", "service_cmd")
	if _, err := os.Stat(bin); err != nil {
		cmd := exec.Command(goCmd, "install", envoyRatelimit)
		cmd.Env = append(os.Environ(), "GOBIN="+filepath.Dir(bin), "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("go install %s: %v\n%s", envoyRatelimit, err, out)
		}
	}
	root := b.TempDir()
	conf := filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "bench.yaml"), []byte(benchCfg), 0o644); err != nil {
		b.Fatal(err)
	}
	port := func() string { _, p, _ := net.SplitHostPort(testserver.FreeAddr(b)); return p }
	grpcPort := port()
	cmd := exec.Command(bin)
	cmd.Env = []string{"USE_STATSD=false", "LOG_LEVEL=error", "REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redisAddr,
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_APPDIRECTORY=config", "RUNTIME_WATCH_ROOT=false",
		"GRPC_HOST=127.0.0.1", "GRPC_PORT=" + grpcPort, "HOST=127.0.0.1", "PORT=" + port(),
		"DEBUG_HOST=127.0.0.1", "DEBUG_PORT=" + port()}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return net.JoinHostPort("127.0.0.1", grpcPort)
}
