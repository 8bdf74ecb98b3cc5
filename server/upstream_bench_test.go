package server_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/internal/testdeps"
	"github.com/throttlekit/throttlekit-server/upstream"
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

// BenchmarkStrictVsRedis compares strict mode with its floor, in the same
// run: redis-benchmark sends b.N THROTTLE.CHECKs (fixed window, always
// admitted and written, over 1000 keys) to a server in strict mode over a
// redis-server ("strict"), and b.N EVALSHAs of the check script with the
// arguments such a check sends (upstream.Client.Wire) straight to the same
// redis-server ("redis"), each side with strictClients connections and
// pipelines of strictDepth. It reports both rates, their ratio
// strict/redis, and the redis-server's time per EVALSHA on each side (INFO
// commandstats usec_per_call). The redis-server is pinned to CPU 1 and this
// process, our server and redis-benchmark to CPU 0, when taskset exists:
// the single-threaded redis-server is the floor both sides share, and the
// other core carries the load generator and, on the strict side, our
// server. Interleave the two by running it several times:
//
//	go test ./server -run '^$' -bench StrictVsRedis -benchtime 20000x -count 5
func BenchmarkStrictVsRedis(b *testing.B) {
	bin := testdeps.Require(b, "redis-benchmark")[0]
	addr := clustertest.Server(b)
	r := redis.NewClient(&redis.Options{Addr: addr})
	defer r.Close()
	ctx := context.Background()
	pin(b, r, "1", "0")
	clk := newUpClock()
	ts, _ := startUpstream(b, "redis://"+addr, clk, upOpts{mode: tier.ModeStrict, upstreamClock: true})
	c, err := upstream.Dial("redis://"+addr, upstream.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Load(ctx); err != nil {
		b.Fatal(err)
	}
	lim, _ := engine.NewLimit(engine.KindFixed, 1_000_000_000, int64(time.Hour), 0)
	wire, err := c.Wire(&upstream.Call{Kind: upstream.CallCheck, Key: "r:__rand_int__", Limit: lim, N: 1})
	if err != nil {
		b.Fatal(err)
	}
	n := strconv.Itoa(max(b.N, strictClients))
	common := []string{"-c", strconv.Itoa(strictClients), "-P", strconv.Itoa(strictDepth), "-n", n, "-r", "1000", "--csv"}
	run := func(addr string, args ...string) (rps, us float64) {
		if err := r.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		host, port, _ := net.SplitHostPort(addr)
		rps = redisBenchmark(b, bin, append(append([]string{"-h", host, "-p", port}, common...), args...))
		return rps, evalshaCost(b, r)
	}
	b.ResetTimer()
	direct, directUs := run(addr, append([]string{"EVALSHA"}, wire...)...)
	strict, strictUs := run(ts.Addr, "THROTTLE.CHECK", "s:__rand_int__", "1000000000", "1h", "ALGO", "fixed")
	b.StopTimer()
	b.ReportMetric(direct, "redis-calls/s")
	b.ReportMetric(strict, "strict-calls/s")
	b.ReportMetric(strict/direct, "strict/redis")
	b.ReportMetric(directUs, "redis-us/call")
	b.ReportMetric(strictUs, "strict-us/call")
}

// Load of BenchmarkStrictVsRedis: connections and pipeline depth of each
// redis-benchmark run.
const (
	strictClients = 50
	strictDepth   = 16
)

// redisBenchmark runs redis-benchmark with args (--csv among them) and
// returns the requests per second it printed.
func redisBenchmark(b *testing.B, bin string, args []string) float64 {
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		b.Fatalf("redis-benchmark %v: %v\n%s", args, err, errb.String())
	}
	rows, err := csv.NewReader(&out).ReadAll()
	if err != nil || len(rows) < 2 || len(rows[1]) < 2 {
		b.Fatalf("redis-benchmark printed %q: %v", out.String(), err)
	}
	rps, err := strconv.ParseFloat(rows[1][1], 64)
	if err != nil {
		b.Fatal(err)
	}
	return rps
}

// evalshaCost returns the redis-server's INFO commandstats usec_per_call
// of EVALSHA since CONFIG RESETSTAT.
func evalshaCost(b *testing.B, r *redis.Client) float64 {
	info, err := r.InfoMap(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range strings.Split(info["Commandstats"]["cmdstat_evalsha"], ",") {
		if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
			if us, err := strconv.ParseFloat(v, 64); err == nil {
				return us
			}
		}
	}
	b.Fatalf("no EVALSHA in INFO commandstats: %v", info["Commandstats"])
	return 0
}

// pin moves the redis-server behind r to CPU upCPU and this process (its
// goroutines, and the programs it starts from now on) to selfCPU with
// taskset, when taskset exists and the machine has two CPUs; the cleanup
// gives this process every CPU back.
func pin(b *testing.B, r *redis.Client, upCPU, selfCPU string) {
	if _, err := exec.LookPath("taskset"); err != nil || runtime.NumCPU() < 2 {
		b.Logf("not pinned (taskset: %v, %d CPUs)", err, runtime.NumCPU())
		return
	}
	info, err := r.InfoMap(context.Background(), "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	set := func(cpus, pid string) {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, pid).CombinedOutput(); err != nil {
			b.Logf("taskset %s %s: %v %s", cpus, pid, err, out)
		}
	}
	set(upCPU, info["Server"]["process_id"])
	self := strconv.Itoa(os.Getpid())
	set(selfCPU, self)
	b.Cleanup(func() { set("0-"+strconv.Itoa(runtime.NumCPU()-1), self) })
}
