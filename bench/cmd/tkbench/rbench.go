package main

import (
	"context"
	"encoding/csv"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// rbResult is one redis-benchmark run.
type rbResult struct {
	workload, target string
	conns, pipeline  int
	requests         int
	rps              float64
	p50, p99         float64 // ms
	command          string
	err              string
}

// runRedisBenchmark runs redis-benchmark against both servers for the main
// workloads, as a check on our own load generator: 50 connections at
// pipeline 16 and 1, keys random over 1M (__rand_int__ with -r 1000000).
func runRedisBenchmark(ctx context.Context, o options, servers map[string]*server, shas map[string]string) []rbResult {
	var out []rbResult
	ids := []string{"redis-ping", "redis-incr", "redis-gcra-lua", "tk-ping", "tk-check", "tk-cl", "tk-lease"}
	for _, p := range []int{16, 1} {
		n := 2_000_000
		if p == 1 {
			n = 400_000
		}
		if o.quick {
			n /= 5
		}
		for _, id := range ids {
			var w *workload
			for i := range allWorkloads {
				if allWorkloads[i].id == id {
					w = &allWorkloads[i]
				}
			}
			srv := servers[w.target]
			if srv == nil {
				continue
			}
			args := w.argv(shas, "__rand_int__")
			host, port, _ := strings.Cut(srv.addr, ":")
			cmdArgs := append([]string{"-h", host, "-p", port, "-c", "50", "-P", strconv.Itoa(p),
				"-n", strconv.Itoa(n), "-r", "1000000", "--csv"}, args...)
			r := rbResult{workload: id, target: w.target, conns: 50, pipeline: p, requests: n,
				command: "redis-benchmark " + strings.Join(cmdArgs, " ")}
			b, err := exec.CommandContext(ctx, o.redisBench, cmdArgs...).Output()
			if err != nil {
				r.err = err.Error()
			} else if err := parseRBCSV(string(b), &r); err != nil {
				r.err = err.Error()
			}
			logf("redis-benchmark %-16s P%-2d %10.0f req/s p50 %.3fms p99 %.3fms %s", id, p, r.rps, r.p50, r.p99, r.err)
			out = append(out, r)
		}
	}
	return out
}

// parseRBCSV reads redis-benchmark --csv output:
// "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms".
func parseRBCSV(s string, r *rbResult) error {
	recs, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	if err != nil {
		return fmt.Errorf("redis-benchmark csv: %w", err)
	}
	for _, rec := range recs {
		if len(rec) < 7 || rec[0] == "test" {
			continue
		}
		r.rps, _ = strconv.ParseFloat(rec[1], 64)
		r.p50, _ = strconv.ParseFloat(rec[4], 64)
		r.p99, _ = strconv.ParseFloat(rec[6], 64)
		return nil
	}
	return fmt.Errorf("redis-benchmark: no result in %q", s)
}
