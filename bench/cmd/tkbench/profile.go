package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttlekit-server/bench/loadgen"
)

// profileResult is a CPU profile of throttlekit-server under load.
type profileResult struct {
	method   string  // "pprof" (the server's /debug/pprof) or "perf"
	file     string  // raw profile, relative to the output directory
	top      string  // flat hot spots, text
	cum      string  // cumulative view, text
	tput     float64 // THROTTLE.CHECK throughput while profiling
	cpuPerM  float64
	workload string
}

// profileServer drives THROTTLE.CHECK (50 connections, pipeline 16, 1M
// uniform keys) and profiles the server meanwhile: through the metrics
// listener's /debug/pprof/profile if the server serves it, otherwise with
// perf(1) attached to the process.
func profileServer(ctx context.Context, o options, srv *server, bin, tmp string, shas map[string]string) (*profileResult, error) {
	var w *workload
	for i := range allWorkloads {
		if allWorkloads[i].id == "tk-check" {
			w = &allWorkloads[i]
		}
	}
	secs := o.pprofSeconds
	pc := plannedCell{w, cellCfg{50, 16, 1_000_000, loadgen.Uniform, 0}}
	po := o
	po.warmup = time.Second
	po.duration = time.Duration(secs+2) * time.Second
	done := make(chan cellResult, 1)
	go func() { done <- runCell(ctx, po, srv, pc, shas, nil) }()
	time.Sleep(1500 * time.Millisecond)

	profDir := filepath.Join(o.out, "bench", "profiles")
	if err := os.MkdirAll(profDir, 0o755); err != nil {
		return nil, err
	}
	p := &profileResult{workload: cellID(w.id, pc.cfg)}
	var perr error
	if ok := tryPprof(ctx, srv, secs, filepath.Join(profDir, "throttlekit-cpu.pprof")); ok {
		p.method, p.file = "pprof", "bench/profiles/throttlekit-cpu.pprof"
		p.top = runOut(ctx, "go", "tool", "pprof", "-top", "-nodecount=30", bin, filepath.Join(profDir, "throttlekit-cpu.pprof"))
		p.cum = runOut(ctx, "go", "tool", "pprof", "-top", "-cum", "-nodecount=30", bin, filepath.Join(profDir, "throttlekit-cpu.pprof"))
	} else {
		data := filepath.Join(tmp, "perf.data")
		rec := exec.CommandContext(ctx, "perf", "record", "-F", "499", "-g", "-p", strconv.Itoa(srv.pid()), "-o", data,
			"--", "sleep", strconv.Itoa(secs))
		if b, err := rec.CombinedOutput(); err != nil {
			perr = fmt.Errorf("perf record: %v: %s", err, strings.TrimSpace(string(b)))
		} else {
			p.method = "perf"
			p.top = runOut(ctx, "perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "symbol",
				"-g", "none", "--percent-limit", "0.5")
			p.cum = runOut(ctx, "perf", "report", "-i", data, "--stdio", "--children", "--sort", "symbol",
				"-g", "none", "--percent-limit", "2")
			p.file = "bench/profiles/throttlekit-perf.txt"
			_ = os.WriteFile(filepath.Join(profDir, "throttlekit-perf.txt"),
				[]byte("# self\n"+p.top+"\n\n# children (cumulative)\n"+p.cum+"\n"), 0o644)
		}
	}
	cr := <-done
	p.tput, p.cpuPerM = cr.tput, cr.cpuPerM
	return p, perr
}

func tryPprof(ctx context.Context, srv *server, secs int, dst string) bool {
	if srv.metricsAddr == "" {
		return false
	}
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", srv.metricsAddr, secs)
	cctx, cancel := context.WithTimeout(ctx, time.Duration(secs+15)*time.Second)
	defer cancel()
	// Probe first so a server without pprof costs no profile-length wait.
	probe, _ := http.NewRequestWithContext(cctx, http.MethodGet, fmt.Sprintf("http://%s/debug/pprof/", srv.metricsAddr), nil)
	if resp, err := http.DefaultClient.Do(probe); err != nil || resp.StatusCode != http.StatusOK {
		if resp != nil {
			resp.Body.Close()
		}
		return false
	} else {
		resp.Body.Close()
	}
	req, _ := http.NewRequestWithContext(cctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || len(b) == 0 {
		return false
	}
	return os.WriteFile(dst, b, 0o644) == nil
}

func runOut(ctx context.Context, name string, args ...string) string {
	b, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("%s failed: %v\n%s", name, err, b)
	}
	return string(b)
}
