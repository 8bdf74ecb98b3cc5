// Command tkbench is the benchmark harness of throttlekit-server: in one run
// it builds the server, starts it and a real redis-server side by side, drives
// both with the same load generator (package bench/loadgen), runs
// redis-benchmark as an independent check, measures server CPU and memory per
// key, and writes BENCHMARKS.md and charts. With -persist it also measures
// THROTTLE.CHECK with async and sync persistence on Postgres and DynamoDB
// (dynalite), which it starts itself, against the server in memory, and the
// time a server takes to load a table at start-up (persist.go).
//
// Usage (bench/ is a module of its own; run it from there, or make bench):
//
//	go run ./cmd/tkbench           # full grid (about 15 minutes)
//	go run ./cmd/tkbench -quick    # a subset, under 2 minutes
//	go run ./cmd/tkbench -quick -pprof
//	go run ./cmd/tkbench -quick -compare-args='--metrics-addr='   # metrics on vs off
//	go run ./cmd/tkbench -quick -persist -out /tmp/tkout           # + persistence, report elsewhere
//	go run ./cmd/tkbench -run 'check|ping|gcra' -duration 3s      # part of the grid
//
// It finds the repository root (the directory whose go.mod declares the
// server's module) above the working directory, builds the server there and
// writes BENCHMARKS.md and bench/charts/ under it unless -out says otherwise.
//
// Every throttlekit figure is reported next to Redis figures measured in the
// same run (ratios to Redis PING, Redis+Lua GCRA and Redis INCR), because the
// machine is shared and absolute numbers drift between runs.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/throttlekit/throttlekit-server/bench/loadgen"
)

// options are the command-line settings.
type options struct {
	quick        bool
	out          string
	duration     time.Duration
	warmup       time.Duration
	pprof        bool
	pprofSeconds int
	serverArgs   string
	compareArgs  string
	run          string
	memKeys      string
	redisServer  string
	redisBench   string
	noRedisBench bool
	scrapeEvery  time.Duration

	persist         persistFlag   // backends of the persistence section; none: off
	persistInterval time.Duration // --persist-interval of the async servers
	persistDuration time.Duration // measured time per persistence row
	persistRounds   int           // times each persistence row is measured
	persistLoadKeys string        // key counts of the start-up load test
	pin             bool          // pin servers and load generator to separate CPUs in the persistence and live sections

	live       bool // run the live-key section
	liveKeys   int  // keyspace of the live-key section
	liveRounds int  // interleaved rounds of the live-key section
}

func main() {
	var o options
	flag.BoolVar(&o.quick, "quick", false, "run a small subset of the grid (under 2 minutes)")
	flag.StringVar(&o.out, "out", "", "directory for BENCHMARKS.md, charts/ go under <out>/bench/charts (default: the repository root)")
	flag.DurationVar(&o.duration, "duration", 0, "measured time per cell (default 1.5s quick, 2s full)")
	flag.DurationVar(&o.warmup, "warmup", 300*time.Millisecond, "load applied before each cell is measured")
	flag.BoolVar(&o.pprof, "pprof", false, "profile throttlekit-server under THROTTLE.CHECK load (c50 p16 1M keys) and report hot spots")
	flag.IntVar(&o.pprofSeconds, "pprof-seconds", 10, "length of the -pprof profile")
	flag.StringVar(&o.serverArgs, "server-args", "", "extra flags for throttlekit-server (space separated)")
	flag.StringVar(&o.compareArgs, "compare-args", "", "if set, start a second throttlekit-server with these extra flags and run THROTTLE.CHECK on it too (e.g. --metrics-addr= for metrics off)")
	flag.StringVar(&o.run, "run", "", "only run cells whose id matches this regexp (ids look like tk-check/c50/p16/k1000000/uniform)")
	flag.StringVar(&o.memKeys, "mem-keys", "", "comma-separated key counts for the bytes-per-key test (default 1000000 quick, 1000000,10000000 full; \"none\" skips)")
	flag.StringVar(&o.redisServer, "redis-server", "redis-server", "redis-server binary")
	flag.StringVar(&o.redisBench, "redis-benchmark", "redis-benchmark", "redis-benchmark binary")
	flag.BoolVar(&o.noRedisBench, "no-redis-benchmark", false, "skip the redis-benchmark cross-check")
	flag.DurationVar(&o.scrapeEvery, "scrape-interval", time.Second, "GET /metrics of a throttlekit server this often while it is under load, as Prometheus would (0: never)")
	flag.Var(&o.persist, "persist", "run the persistence section on these backends (postgres,dynamodb; bare -persist: both): THROTTLE.CHECK in memory, async and sync, and start-up load times")
	flag.DurationVar(&o.persistInterval, "persist-interval", 100*time.Millisecond, "--persist-interval of the async servers in the persistence section")
	flag.DurationVar(&o.persistDuration, "persist-duration", 3*time.Second, "measured time per row of the persistence section (several async flushes)")
	flag.IntVar(&o.persistRounds, "persist-rounds", 3, "rounds of the persistence rows; each round runs every row back to back, the report gives medians")
	flag.StringVar(&o.persistLoadKeys, "persist-load-keys", "10000,1000000", "key counts of the start-up load test of -persist (a table that cannot be filled in 60s is skipped; \"none\" skips)")
	flag.BoolVar(&o.pin, "pin", true, "in the persistence and live sections, run servers and databases on CPU 1 and the load generator on CPU 0 (needs taskset and 2 CPUs)")
	flag.BoolVar(&o.live, "live", true, "run the live-key section: every server warmed with -live-keys 16-byte keys that stay live (1 h period), pinned, rows in interleaved rounds")
	flag.IntVar(&o.liveKeys, "live-keys", 0, "keyspace of the live-key section, each key set warmed whole before measuring (default 1000000, 200000 with -quick)")
	flag.IntVar(&o.liveRounds, "live-rounds", 0, "interleaved rounds of the live-key section; the report gives medians (default 5, 1 with -quick)")
	flag.Parse()
	if o.duration == 0 {
		o.duration = 2 * time.Second
		if o.quick {
			o.duration = 1500 * time.Millisecond
		}
	}
	if o.liveKeys <= 0 {
		o.liveKeys = 1_000_000
		if o.quick {
			o.liveKeys = 200_000
		}
	}
	if o.liveRounds <= 0 {
		o.liveRounds = 5
		if o.quick {
			o.liveRounds = 1
		}
	}
	if o.memKeys == "" {
		o.memKeys = "1000000,10000000"
		if o.quick {
			o.memKeys = "1000000"
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "tkbench:", err)
		os.Exit(1)
	}
}

// results gathers everything a run measured, for the report and charts.
type results struct {
	started    time.Time
	finished   time.Time
	command    string
	opts       options
	env        envInfo
	tkBuildErr string
	cells      []cellResult
	rbench     []rbResult
	memory     []memResult
	profile    *profileResult
	notes      []string
	probes     []probeResult
	persist    *persistSection // nil unless -persist
	live       *liveSection    // nil with -live=false
}

// probeResult is one sample reply of a workload, shown in the report so a
// reader can see that each command did what its name says.
type probeResult struct{ workload, command, reply string }

// probe sends every available workload's command once, on key "<prefix>probe".
func probe(servers map[string]*server, shas map[string]string) []probeResult {
	var out []probeResult
	for i := range allWorkloads {
		w := &allWorkloads[i]
		srv := servers[w.target]
		if srv == nil {
			continue
		}
		args := w.argv(shas, "probe")
		r, err := call(srv.addr, args...)
		if err != nil {
			r = "-" + err.Error()
		}
		r = strings.Join(strings.Fields(strings.ReplaceAll(r, "\r\n", " ")), " ")
		if len(r) > 160 {
			r = r[:160] + "..."
		}
		out = append(out, probeResult{w.id, strings.Join(args, " "), r})
	}
	return out
}

// cellResult is one measured cell.
type cellResult struct {
	id, workload, target string
	cfg                  cellCfg
	ops, errors          int64
	lastError            string
	tput                 float64       // replies per second
	p50, p99, p999, max  float64       // µs
	cpuPerM              float64       // server CPU seconds per million commands
	rss                  int64         // server RSS after the cell, bytes
	elapsed              time.Duration // measured interval as observed
	runErr               string
}

func run(ctx context.Context, o options) error {
	res := &results{started: time.Now().UTC(), opts: o, command: commandLine()}
	root, err := repoRoot()
	if err != nil {
		return err
	}
	if o.out == "" {
		o.out = root
		res.opts.out = root
	}
	tmp, err := os.MkdirTemp("", "tkbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var filter *regexp.Regexp
	if o.run != "" {
		if filter, err = regexp.Compile(o.run); err != nil {
			return fmt.Errorf("-run: %w", err)
		}
	}

	logf("building ./cmd/throttlekit-server")
	tkBin, err := buildServer(ctx, root, tmp)
	if err != nil {
		res.tkBuildErr = err.Error()
		logf("throttlekit-server unavailable, Redis only: %v", err)
	}
	res.env = collectEnv(ctx, root, o.redisServer, tkBin)

	redis, err := startRedis(o.redisServer, tmp)
	if err != nil {
		return err
	}
	defer redis.stop()
	shas := map[string]string{}
	for _, s := range []string{gcraLua, fixedLua} {
		r, err := call(redis.addr, "SCRIPT", "LOAD", s)
		if err != nil {
			return fmt.Errorf("SCRIPT LOAD: %w", err)
		}
		shas[s] = bulkText(r)
	}
	servers := map[string]*server{targetRedis: redis}
	if tkBin != "" {
		tk, err := startThrottlekit(tkBin, tmp, strings.Fields(o.serverArgs))
		if err != nil {
			return err
		}
		defer tk.stop()
		servers[targetTK] = tk
		if o.compareArgs != "" {
			tk2, err := startThrottlekit(tkBin, tmp, strings.Fields(o.compareArgs))
			if err != nil {
				return err
			}
			defer tk2.stop()
			servers[targetTK2] = tk2
		}
	}

	res.probes = probe(servers, shas)
	cells := plan(o.quick, servers[targetTK] != nil, servers[targetTK2] != nil, filter)
	logf("%d cells, %v each (+%v warm-up)", len(cells), o.duration, o.warmup)
	for i, pc := range cells {
		if ctx.Err() != nil {
			break
		}
		cr := runCell(ctx, o, servers[pc.w.target], pc, shas, nil)
		res.cells = append(res.cells, cr)
		logf("[%d/%d] %-45s %10.0f ops/s  p50 %7.1fµs p99 %8.1fµs  cpu/M %.2fs  errors %d %s",
			i+1, len(cells), cr.id, cr.tput, cr.p50, cr.p99, cr.cpuPerM, cr.errors, cr.lastError+cr.runErr)
	}

	if !o.noRedisBench && ctx.Err() == nil {
		res.rbench = runRedisBenchmark(ctx, o, servers, shas)
	}
	if o.pprof && servers[targetTK] != nil && ctx.Err() == nil {
		p, err := profileServer(ctx, o, servers[targetTK], tkBin, tmp, shas)
		if err != nil {
			res.notes = append(res.notes, "profile failed: "+err.Error())
			logf("profile: %v", err)
		}
		res.profile = p
	}
	// The memory test starts fresh servers: stop the load-test ones first so
	// they do not hold memory or CPU.
	for _, s := range servers {
		s.stop()
	}
	if o.memKeys != "none" && ctx.Err() == nil {
		res.memory = measureMemory(ctx, o, tkBin, tmp, shas)
	}
	if o.live && ctx.Err() == nil {
		var match func(string) bool
		if filter != nil {
			match = filter.MatchString
		}
		res.live = runLive(ctx, o, tkBin, tmp, match)
	}
	if len(o.persist.list) > 0 && ctx.Err() == nil {
		if tkBin == "" {
			res.notes = append(res.notes, "persistence section skipped: throttlekit-server was not built")
		} else {
			res.persist = runPersist(ctx, o, root, tkBin, tmp, filter)
		}
	}
	res.finished = time.Now().UTC()
	if err := writeReport(res); err != nil {
		return err
	}
	if err := writeCharts(res); err != nil {
		return fmt.Errorf("charts: %w", err)
	}
	logf("wrote %s and %s", filepath.Join(o.out, "BENCHMARKS.md"), filepath.Join(o.out, "bench", "charts"))
	return nil
}

// runCell measures one workload at one grid point. onMeasure, if not nil,
// is called when measuring starts and stops, after the CPU samples.
func runCell(ctx context.Context, o options, srv *server, pc plannedCell, shas map[string]string, onMeasure func(start bool)) cellResult {
	cr := cellResult{id: cellID(pc.w.id, pc.cfg), workload: pc.w.id, target: pc.w.target, cfg: pc.cfg}
	var cpu0, cpu1 float64
	cfg := loadgen.Config{
		Addr: srv.addr, Conns: pc.cfg.conns, Pipeline: pc.cfg.pipeline, Warmup: o.warmup, Duration: o.duration,
		Rate: pc.cfg.rate, Cmd: pc.w.command(shas), Keys: pc.cfg.keys, Dist: pc.cfg.dist, Seed: 1,
		OnMeasure: func(start bool) {
			v, _ := cpuSeconds(srv.pid())
			if start {
				cpu0 = v
			} else {
				cpu1 = v
			}
			if onMeasure != nil {
				onMeasure(start)
			}
		},
	}
	stopScrape := scrapeMetrics(ctx, srv.metricsAddr, o.scrapeEvery)
	r, err := loadgen.Run(ctx, cfg)
	stopScrape()
	if err != nil {
		cr.runErr = err.Error()
	}
	cr.ops, cr.errors, cr.lastError = r.Ops, r.Errors, r.LastError
	cr.tput, cr.elapsed = r.Throughput(), r.Elapsed
	cr.p50, cr.p99, cr.p999, cr.max = r.Quantile(50), r.Quantile(99), r.Quantile(99.9), r.MaxMicros()
	if r.Ops > 0 {
		cr.cpuPerM = (cpu1 - cpu0) / float64(r.Ops) * 1e6
	}
	cr.rss, _ = rssBytes(srv.pid())
	return cr
}

// scrapeMetrics GETs http://addr/metrics every interval until the returned
// stop function is called, so that "metrics on" includes the cost of being
// scraped. It does nothing if addr is empty or interval is 0.
func scrapeMetrics(ctx context.Context, addr string, interval time.Duration) (stop func()) {
	if addr == "" || interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
			if err != nil {
				return
			}
			if resp, err := http.DefaultClient.Do(req); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	return func() { cancel(); <-done }
}

// bulkText extracts the text of a bulk or simple-string reply.
func bulkText(r string) string {
	r = strings.TrimRight(r, "\r\n")
	if strings.HasPrefix(r, "+") {
		return r[1:]
	}
	if i := strings.Index(r, "\r\n"); i >= 0 {
		return r[i+2:]
	}
	return r
}

func commandLine() string {
	args := []string{"cd bench && go run ./cmd/tkbench"}
	for _, a := range os.Args[1:] {
		if strings.ContainsAny(a, " '\"|*$") || a == "" {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		args = append(args, a)
	}
	return strings.Join(args, " ")
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}
