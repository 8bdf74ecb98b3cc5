package persisttests

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/dynatest"
	"github.com/throttlekit/throttlekit-server/internal/pgtest"
)

// BenchmarkPersist compares THROTTLE.CHECK throughput and latency of the
// server in memory, with async persistence and with sync persistence
// (Postgres; dynalite too with TK_PERSIST_BENCH_DYNAMO=1), at 50
// connections with pipelines of 16 and of 1, over 10k keys. Each case is
// one fixed-length run (TK_PERSIST_BENCH_SECONDS, default 3; the async
// interval is TK_PERSIST_BENCH_INTERVAL, default 100ms), so run it with
// -benchtime 1x; it is skipped unless TK_PERSIST_BENCH is set:
//
//	TK_PERSIST_BENCH=1 go test ./tests/persist -run '^$' -bench Persist -benchtime 1x
//
// Reported per case: ops/s, p99-ms (the round trip of one pipelined batch:
// at P=1 one command's latency, at P=16 that of the batch's last reply),
// x-memory (ops/s as a ratio to the in-memory run at the same depth, in
// the same process) and rows/s written to the backend. The load
// generator shares the machine with the server and the database.
func BenchmarkPersist(b *testing.B) {
	if os.Getenv("TK_PERSIST_BENCH") == "" {
		b.Skip("set TK_PERSIST_BENCH=1 to run (starts servers and databases)")
	}
	secs := 3
	if s, err := strconv.Atoi(os.Getenv("TK_PERSIST_BENCH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	dur := time.Duration(secs) * time.Second
	asyncInterval := "100ms"
	if v := os.Getenv("TK_PERSIST_BENCH_INTERVAL"); v != "" {
		asyncInterval = v
	}
	pg := pgtest.Start(b)
	type setup struct {
		name string
		args func(depth int) []string
	}
	setups := []setup{
		{"memory", func(int) []string { return nil }},
		{"pg-async", func(d int) []string {
			return []string{"--persist", pg.URL + "&table=bench_async_" + strconv.Itoa(d), "--persist-mode", "async", "--persist-interval", asyncInterval}
		}},
		{"pg-sync", func(d int) []string {
			return []string{"--persist", pg.URL + "&table=bench_sync_" + strconv.Itoa(d), "--persist-mode", "sync"}
		}},
	}
	if os.Getenv("TK_PERSIST_BENCH_DYNAMO") != "" {
		dy := dynatest.Start(b)
		setups = append(setups, setup{"dynamo-sync", func(d int) []string {
			return []string{"--persist", dy.URL("bench_sync_" + strconv.Itoa(d)), "--persist-mode", "sync"}
		}})
	}
	for _, depth := range []int{16, 1} {
		var memOps float64
		for _, s := range setups {
			b.Run(s.name+"/P"+strconv.Itoa(depth), func(b *testing.B) {
				srv := startServer(b, s.args(depth)...)
				before, fbefore := persistCounters(srv.Addr)
				ctx, cancel := context.WithTimeout(context.Background(), dur)
				began := time.Now()
				ld := runLoad(ctx, srv.Addr, 50, depth, 10_000)
				took := time.Since(began)
				cancel()
				ops := float64(ld.ops.Load()) / took.Seconds()
				if s.name == "memory" {
					memOps = ops
				}
				b.ReportMetric(ops, "ops/s")
				b.ReportMetric(float64(ld.p99().Microseconds())/1000, "p99-ms")
				if memOps > 0 {
					b.ReportMetric(ops/memOps, "x-memory")
				}
				rows, flushes := persistCounters(srv.Addr)
				b.ReportMetric(float64(rows-before)/took.Seconds(), "rows/s")
				if flushes > fbefore {
					b.ReportMetric(float64(rows-before)/float64(flushes-fbefore), "rows/flush")
				}
				if e := ld.other.Load() + ld.tryAgain.Load(); e > 0 {
					b.Errorf("%d error replies", e)
				}
				srv.Stop()
			})
		}
	}
}

// persistCounters reads INFO's persist_rows_written and persist_flushes
// (0 in memory).
func persistCounters(addr string) (rows, flushes int64) {
	m, err := info(addr)
	if err != nil {
		return 0, 0
	}
	rows, _ = strconv.ParseInt(m["persist_rows_written"], 10, 64)
	flushes, _ = strconv.ParseInt(m["persist_flushes"], 10, 64)
	return rows, flushes
}
