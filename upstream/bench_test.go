package upstream

import (
	"bytes"
	"context"
	"encoding/csv"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/internal/testdeps"
)

// benchClients is the number of concurrent callers of both sides of
// BenchmarkStrict: goroutines sharing one Client, and redis-benchmark's
// connections.
const benchClients = 50

// BenchmarkStrict measures the strict-mode call: THROTTLE.CHECK as EVALSHA
// of the check script on a local redis-server, through Client.Check from
// benchClients goroutines ("client"), beside redis-benchmark sending the
// same EVALSHA straight to the same server over benchClients connections
// ("redis-benchmark"), in the same run. Both report calls/s; client/redis-
// benchmark is the cost of the Go client (go-redis, argument formatting,
// reply parsing) over the floor the server and its script set. Run it
// pinned, the server on CPU 1 (done here when taskset exists) and the load
// generators on CPU 0:
//
//	taskset -c 0 go test ./upstream -run '^$' -bench Strict -benchtime 20000x -count 5
func BenchmarkStrict(b *testing.B) {
	addr := clustertest.Server(b)
	c, err := Dial("redis://"+addr, Options{PoolSize: benchClients})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	pinServer(b, c.rdb.(*redis.Client), "1")
	if err := c.Load(ctx); err != nil {
		b.Fatal(err)
	}
	// 1e6 per second, burst 1e6: every call is admitted and writes.
	lim, _ := engine.NewLimit(engine.KindGCRA, 1e6, 1e9, 0)
	key := "bench"

	r := c.rdb.(*redis.Client)
	b.Run("client", func(b *testing.B) {
		b.ReportAllocs()
		resetStats(b, r)
		b.SetParallelism(max(1, benchClients/testingProcs()))
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Check(ctx, key, lim, 1); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		reportServerCost(b, r)
	})

	b.Run("redis-benchmark", func(b *testing.B) {
		bin := testdeps.Require(b, "redis-benchmark")[0]
		host, port := splitAddr(b, addr)
		args := []string{"-h", host, "-p", port, "-c", strconv.Itoa(benchClients), "-n", strconv.Itoa(max(b.N, benchClients)),
			"--csv", "EVALSHA", c.s.check.Hash(), "1", key, "", "check", "gcra",
			strconv.FormatInt(lim.Limit, 10), strconv.FormatInt(lim.Period, 10), "0", "1"}
		var out, errb bytes.Buffer
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		resetStats(b, r)
		b.ResetTimer()
		if err := cmd.Run(); err != nil {
			b.Fatalf("redis-benchmark: %v\n%s", err, errb.String())
		}
		b.StopTimer()
		rows, err := csv.NewReader(&out).ReadAll()
		if err != nil || len(rows) < 2 || len(rows[1]) < 2 {
			b.Fatalf("redis-benchmark printed %q: %v", out.String(), err)
		}
		rps, err := strconv.ParseFloat(rows[1][1], 64)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(rps, "calls/s")
		reportServerCost(b, r)
	})
}

func resetStats(b *testing.B, r *redis.Client) {
	if err := r.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
}

// reportServerCost reports the server's CPU time per EVALSHA since
// resetStats (INFO commandstats usec_per_call): the share of a call the
// upstream pays, which the client's overhead does not change.
func reportServerCost(b *testing.B, r *redis.Client) {
	b.ReportMetric(serverCost(b, r), "upstream-us/call")
}

// serverCost returns INFO commandstats usec_per_call of EVALSHA.
func serverCost(b *testing.B, r *redis.Client) float64 {
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

// pinServer moves the redis-server behind r to cpu with taskset, when it
// is installed and the machine has that CPU.
func pinServer(b *testing.B, r *redis.Client, cpu string) {
	info, err := r.InfoMap(context.Background(), "server").Result()
	if err != nil {
		b.Fatal(err)
	}
	pid := info["Server"]["process_id"]
	if _, err := exec.LookPath("taskset"); err != nil || pid == "" {
		b.Logf("redis-server not pinned (taskset: %v)", err)
		return
	}
	if out, err := exec.Command("taskset", "-a", "-p", "-c", cpu, pid).CombinedOutput(); err != nil {
		b.Logf("redis-server not pinned: %v %s", err, out)
	}
}

func splitAddr(b *testing.B, addr string) (string, string) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:]
		}
	}
	b.Fatalf("bad address %q", addr)
	return "", ""
}

func testingProcs() int { return runtime.GOMAXPROCS(0) }

// BenchmarkScriptCost measures the upstream's time per call of the check
// (gcra, admitted and written), lease, cell, GCRA, leased GCRA, acquire,
// check-with-ban, banned and reserve scripts as loaded by Client
// ("pruned": the library blocks the operation uses) against the same
// operation after the whole of lib.lua ("full"), EVALSHA after EVALSHA from
// one connection to a local redis-server. The two alternate in rounds of
// scriptCostRound calls, so that other load on the machine hits both, and
// each round reads INFO commandstats usec_per_call, the server's CPU time
// per call. It reports full-us/call, pruned-us/call and their ratio
// pruned/full.
//
//	go test ./upstream -run '^$' -bench ScriptCost -benchtime 20000x -count 3
func BenchmarkScriptCost(b *testing.B) {
	addr := clustertest.Server(b)
	r := redis.NewClient(&redis.Options{Addr: addr})
	defer r.Close()
	ctx := context.Background()
	full := mustRead("lib.lua") + "\n"
	s := loadScripts()
	ops := []struct {
		name   string
		pruned *redis.Script
		file   string
		argv   []any
		keys   int // 1, or 2: the key and a record beside it
	}{
		{"check", s.check, "check.lua", []any{"", "check", "gcra", 1e6, 1e9, 0, 1}, 1},
		{"lease", s.lease, "lease.lua", []any{"", 1e9, 1e9, 10}, 1},
		{"cell", s.cell, "cell.lua", []any{"", 1e6, 1e6, 1, 1}, 1},
		{"gcra", s.gcra, "gcra.lua", []any{"", 1e6, 1, 1}, 1},
		{"lease-gcra", s.leaseAlgo, "lease_algo.lua", []any{"", "gcra", 1e6, 1e9, 0, 10}, 1},
		// A slot held 1 ns: each call finds the last one expired, drops it
		// and takes one.
		{"acquire", s.slots, "slots.lua", []any{"", "acquire", 1024, 1}, 1},
		{"check-ban", s.ban, "ban.lua", []any{"", "check", "gcra", 1e6, 1e9, 0, 1, 3, 1e9}, 2},
		{"banned", s.banned, "banned.lua", []any{"", "banned"}, 1},
		// A reservation held 1 ns: its record is gone by the next call.
		{"reserve", s.reserve, "reserve.lua", []any{"", "reserve", "gcra", 1e6, 1e9, 1, 1}, 2},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			scripts := []*redis.Script{redis.NewScript(full + mustRead(op.file)), op.pruned}
			for _, sc := range scripts {
				if err := sc.Load(ctx, r).Err(); err != nil {
					b.Fatal(err)
				}
			}
			key := []string{"cost:" + op.name, "cost:" + op.name + ":record"}[:op.keys]
			var us [2]float64
			b.ResetTimer()
			for done := 0; done < b.N; done += scriptCostRound {
				n := min(scriptCostRound, b.N-done)
				for i, sc := range scripts {
					resetStats(b, r)
					for range n {
						if err := sc.EvalSha(ctx, r, key, op.argv...).Err(); err != nil {
							b.Fatal(err)
						}
					}
					us[i] += serverCost(b, r) * float64(n)
				}
			}
			b.StopTimer()
			b.ReportMetric(us[0]/float64(b.N), "full-us/call")
			b.ReportMetric(us[1]/float64(b.N), "pruned-us/call")
			b.ReportMetric(us[1]/us[0], "pruned/full")
		})
	}
}

// scriptCostRound is the number of calls of one script between two
// readings of INFO commandstats in BenchmarkScriptCost.
const scriptCostRound = 500

// BenchmarkFunctionCost measures what Redis Functions would save per call:
// the check, lease and cell operations as Client loads them (EVALSHA of
// the assembled script, "script") against the same code registered once
// as a function library (FUNCTION LOAD, then FCALL, "function"), whose
// library functions Redis creates at load instead of on every call. Both
// alternate in rounds of scriptCostRound calls from one connection, each
// round reading INFO commandstats usec_per_call (EVALSHA, FCALL): the
// server's CPU time per call. It reports script-us/call,
// function-us/call and their ratio function/script.
//
//	go test ./upstream -run '^$' -bench FunctionCost -benchtime 20000x -count 3
func BenchmarkFunctionCost(b *testing.B) {
	addr := clustertest.Server(b)
	r := redis.NewClient(&redis.Options{Addr: addr})
	defer r.Close()
	ctx := context.Background()
	lib := splitLib(mustRead("lib.lua"))
	s := loadScripts()
	ops := []struct {
		name   string
		script *redis.Script
		file   string
		argv   []any
	}{
		{"check", s.check, "check.lua", []any{"", "check", "gcra", 1e6, 1e9, 0, 1}},
		{"lease", s.lease, "lease.lua", []any{"", 1e9, 1e9, 10}},
		{"cell", s.cell, "cell.lua", []any{"", 1e6, 1e6, 1, 1}},
	}
	for _, op := range ops {
		b.Run(op.name, func(b *testing.B) {
			fn := "tkcost_" + op.name
			// The operation file becomes the body of a function, KEYS and
			// ARGV its parameters, and the library the blocks it uses, less
			// the per-script replication switch (functions know only
			// effects replication). Redis 7.0 runs a library's load
			// without the standard libraries (math is not there), so the
			// registered function builds library and operation on its first
			// call and keeps them in an upvalue for the next.
			code := lib.assemble("return function(KEYS, ARGV)\n" + mustRead(op.file) + "\nend\n")
			code = strings.Replace(code, "if redis.replicate_commands then redis.replicate_commands() end", "", 1)
			code = "local main\nlocal function build()\n" + code + "end\n" +
				"redis.register_function('" + fn + "', function(KEYS, ARGV)\n" +
				"  if not main then main = build() end\n  return main(KEYS, ARGV)\nend)\n"
			if err := r.FunctionLoadReplace(ctx, "#!lua name="+fn+"\n"+code).Err(); err != nil {
				b.Fatal(err)
			}
			if err := op.script.Load(ctx, r).Err(); err != nil {
				b.Fatal(err)
			}
			key := []string{"fcost:" + op.name}
			calls := []struct {
				cmd string
				run func() error
			}{
				{"evalsha", func() error { return op.script.EvalSha(ctx, r, key, op.argv...).Err() }},
				{"fcall", func() error { return r.FCall(ctx, fn, key, op.argv...).Err() }},
			}
			var us [2]float64
			b.ResetTimer()
			for done := 0; done < b.N; done += scriptCostRound {
				n := min(scriptCostRound, b.N-done)
				for i, c := range calls {
					resetStats(b, r)
					for range n {
						if err := c.run(); err != nil {
							b.Fatal(err)
						}
					}
					us[i] += commandCost(b, r, c.cmd) * float64(n)
				}
			}
			b.StopTimer()
			b.ReportMetric(us[0]/float64(b.N), "script-us/call")
			b.ReportMetric(us[1]/float64(b.N), "function-us/call")
			b.ReportMetric(us[1]/us[0], "function/script")
		})
	}
}

// commandCost returns INFO commandstats usec_per_call of cmd.
func commandCost(b *testing.B, r *redis.Client, cmd string) float64 {
	info, err := r.InfoMap(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, f := range strings.Split(info["Commandstats"]["cmdstat_"+cmd], ",") {
		if v, ok := strings.CutPrefix(f, "usec_per_call="); ok {
			if us, err := strconv.ParseFloat(v, 64); err == nil {
				return us
			}
		}
	}
	b.Fatalf("no %s in INFO commandstats: %v", cmd, info["Commandstats"])
	return 0
}
