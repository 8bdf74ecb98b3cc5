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
	"github.com/throttlekit/throttlekit-server/server"
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

// BenchmarkLeasedVsMemory compares leased mode with memory on hot keys
// through the TCP server, with one load generator for both: redis-benchmark
// sends THROTTLE.CHECKs of hotKeys fixed-window keys (always admitted) from
// hotClients connections in pipelines of hotDepth, to a server in memory
// and to a server in leased mode over a redis-server, both started alike
// at one injected instant. Each iteration runs the two in the order
// memory, leased, leased, memory, b.N/2 checks each run, so drift in the
// machine's other load weighs on both alike; it reports each side's rate
// (the mean of its two runs) and leased/memory. This process (both
// servers) is pinned to CPU 0, redis-benchmark and the redis-server to
// CPU 1, when taskset exists: the servers get the same core to themselves
// and the load generator does not compete with them. The sub-benchmarks
// lease 1000 credits at a time (a lease per 1000 checks of a key; the
// checks that find the credits spent wait for the next, and with them
// their connections' later replies) and 100000 (the cost of a hit alone).
//
//	go test ./server -run '^$' -bench LeasedVsMemory -benchtime 200000x -count 5
func BenchmarkLeasedVsMemory(b *testing.B) {
	bin := testdeps.Require(b, "redis-benchmark")[0]
	addr := clustertest.Server(b)
	r := redis.NewClient(&redis.Options{Addr: addr})
	defer r.Close()
	genCPU := pin(b, r, "1", "0")
	for _, batch := range []int64{1000, 100000} {
		b.Run("batch="+strconv.FormatInt(batch, 10), func(b *testing.B) {
			clk := newUpClock()
			mem := startServer(b, func(cfg *server.Config) { cfg.Clock = clk.now })
			leased, _ := startUpstream(b, "redis://"+addr, clk, upOpts{mode: tier.ModeLeased, batch: batch})
			n := strconv.Itoa(max(b.N/2, hotClients))
			run := func(addr string) float64 {
				host, port, _ := net.SplitHostPort(addr)
				args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(hotClients), "-P", strconv.Itoa(hotDepth),
					"-n", n, "-r", strconv.Itoa(hotKeys), "--csv", "THROTTLE.CHECK", "hot:__rand_int__", "1000000000", "1h", "ALGO", "fixed"}
				if genCPU != "" {
					return redisBenchmark(b, "taskset", append([]string{"-c", genCPU, bin}, args...))
				}
				return redisBenchmark(b, bin, args)
			}
			b.ResetTimer()
			m1 := run(mem.Addr)
			l1 := run(leased.Addr)
			l2 := run(leased.Addr)
			m2 := run(mem.Addr)
			b.StopTimer()
			m, l := (m1+m2)/2, (l1+l2)/2
			b.ReportMetric(m, "memory-checks/s")
			b.ReportMetric(l, "leased-checks/s")
			b.ReportMetric(l/m, "leased/memory")
		})
	}
}

// Load of BenchmarkLeasedVsMemory: hot keys, connections and pipeline
// depth of each redis-benchmark run.
const (
	hotKeys    = 5
	hotClients = 50
	hotDepth   = 16
)

// BenchmarkStrictVsRedis compares strict mode with its floor, in the same
// run: redis-benchmark sends THROTTLE.CHECKs (fixed window, always
// admitted and written, over 1000 keys) to a server in strict mode over a
// redis-server ("strict"), and EVALSHAs of the check script with the
// arguments such a check sends (upstream.Client.Wire) straight to the same
// redis-server ("redis"), each side with strictClients connections and
// pipelines of strictDepth, in the order redis, strict, strict, redis,
// b.N/2 calls each run. It reports both rates (each the mean of its two
// runs), their ratio strict/redis, and the redis-server's cost per
// EVALSHA on each side (evalCost): the elapsed time INFO commandstats
// reports, and its main thread's CPU time and run-queue wait, which add up
// to about the former; strict-cpu/redis-cpu compares the CPU times. The
// redis-server is pinned to CPU 1 and this
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
	n := strconv.Itoa(max(b.N/2, strictClients))
	common := []string{"-c", strconv.Itoa(strictClients), "-P", strconv.Itoa(strictDepth), "-n", n, "-r", "1000", "--csv"}
	pid := redisPid(b, r)
	run := func(addr string, args ...string) (rps float64, cost evalCost) {
		if err := r.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		host, port, _ := net.SplitHostPort(addr)
		before := schedStat(b, pid)
		rps = redisBenchmark(b, bin, append(append([]string{"-h", host, "-p", port}, common...), args...))
		after := schedStat(b, pid)
		cost.us = evalshaCost(b, r)
		calls := evalshaCalls(b, r)
		cost.cpu = float64(after[0]-before[0]) / 1e3 / calls
		cost.wait = float64(after[1]-before[1]) / 1e3 / calls
		return rps, cost
	}
	both := func(a, b float64, x, y evalCost) (float64, evalCost) {
		return (a + b) / 2, evalCost{(x.us + y.us) / 2, (x.cpu + y.cpu) / 2, (x.wait + y.wait) / 2}
	}
	b.ResetTimer()
	d1, dc1 := run(addr, append([]string{"EVALSHA"}, wire...)...)
	s1, sc1 := run(ts.Addr, "THROTTLE.CHECK", "s:__rand_int__", "1000000000", "1h", "ALGO", "fixed")
	s2, sc2 := run(ts.Addr, "THROTTLE.CHECK", "s:__rand_int__", "1000000000", "1h", "ALGO", "fixed")
	d2, dc2 := run(addr, append([]string{"EVALSHA"}, wire...)...)
	b.StopTimer()
	direct, dc := both(d1, d2, dc1, dc2)
	strict, sc := both(s1, s2, sc1, sc2)
	b.ReportMetric(direct, "redis-calls/s")
	b.ReportMetric(strict, "strict-calls/s")
	b.ReportMetric(strict/direct, "strict/redis")
	b.ReportMetric(dc.us, "redis-us/call")
	b.ReportMetric(sc.us, "strict-us/call")
	b.ReportMetric(dc.cpu, "redis-cpu-us/call")
	b.ReportMetric(sc.cpu, "strict-cpu-us/call")
	b.ReportMetric(dc.wait, "redis-wait-us/call")
	b.ReportMetric(sc.wait, "strict-wait-us/call")
	b.ReportMetric(sc.cpu/dc.cpu, "strict-cpu/redis-cpu")
}

// evalCost is what one EVALSHA cost the redis-server: INFO commandstats
// usec_per_call (us), which Redis measures as elapsed time and so counts
// whatever ran on the CPU while a script ran, and, from the main thread's
// /proc schedstat, its time on the CPU (cpu) and its time ready but
// waiting for the CPU (wait), each divided by the EVALSHAs of the run.
type evalCost struct{ us, cpu, wait float64 }

// redisPid returns the process id of the redis-server behind r.
func redisPid(b *testing.B, r *redis.Client) string {
	info, err := r.InfoMap(context.Background(), "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	return info["Server"]["process_id"]
}

// schedStat returns the first two fields of /proc/<pid>/schedstat: ns the
// process's main thread ran on a CPU, and ns it waited on a run queue.
func schedStat(b *testing.B, pid string) [2]int64 {
	raw, err := os.ReadFile("/proc/" + pid + "/schedstat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw))
	var v [2]int64
	for i := range v {
		if i < len(f) {
			v[i], _ = strconv.ParseInt(f[i], 10, 64)
		}
	}
	return v
}

// evalshaCalls returns the redis-server's EVALSHA count since CONFIG
// RESETSTAT (INFO commandstats calls).
func evalshaCalls(b *testing.B, r *redis.Client) float64 {
	return commandStat(b, r, "calls=")
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
	return commandStat(b, r, "usec_per_call=")
}

// commandStat returns the field named by prefix of EVALSHA's line of the
// redis-server's INFO commandstats.
func commandStat(b *testing.B, r *redis.Client, prefix string) float64 {
	info, err := r.InfoMap(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range strings.Split(info["Commandstats"]["cmdstat_evalsha"], ",") {
		if v, ok := strings.CutPrefix(f, prefix); ok {
			if n, err := strconv.ParseFloat(v, 64); err == nil {
				return n
			}
		}
	}
	b.Fatalf("no EVALSHA %s in INFO commandstats: %v", prefix, info["Commandstats"])
	return 0
}

// pin moves the redis-server behind r to CPU upCPU and this process (its
// goroutines, and the programs it starts from now on) to selfCPU with
// taskset, when taskset exists and the machine has two CPUs; the cleanup
// gives this process every CPU back. It returns upCPU, or "" when it
// pinned nothing.
func pin(b *testing.B, r *redis.Client, upCPU, selfCPU string) string {
	if _, err := exec.LookPath("taskset"); err != nil || runtime.NumCPU() < 2 {
		b.Logf("not pinned (taskset: %v, %d CPUs)", err, runtime.NumCPU())
		return ""
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
	return upCPU
}
