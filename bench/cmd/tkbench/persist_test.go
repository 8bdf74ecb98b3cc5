package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/throttlekit/throttlekit-server/bench/loadgen"
	"github.com/throttlekit/throttlekit-server/internal/testdeps"
)

func TestParsePersist(t *testing.T) {
	both := []string{backendPostgres, backendDynamo}
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{"false", nil, false},
		{"none", nil, false},
		{"true", both, false},
		{"all", both, false},
		{"postgres", []string{backendPostgres}, false},
		{"dynamodb,pg", []string{backendDynamo, backendPostgres}, false},
		{"postgres, postgresql ,dynalite", both, false},
		{"mysql", nil, true},
		{"postgres,", nil, true},
	}
	for _, tc := range tests {
		got, err := parsePersist(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("%q: err = %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if !tc.wantErr && !slices.Equal(got, tc.want) {
			t.Errorf("%q = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestPersistFlag: bare -persist means every backend, -persist=LIST names
// them, and no flag leaves the section off.
func TestPersistFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"-persist"}, "postgres,dynamodb"},
		{[]string{"-persist=dynamodb"}, "dynamodb"},
		{[]string{"-persist", "-quick"}, "postgres,dynamodb"},
		{[]string{"-persist=false"}, ""},
	} {
		var f persistFlag
		var quick bool
		fs := flag.NewFlagSet("tkbench", flag.ContinueOnError)
		fs.Var(&f, "persist", "")
		fs.BoolVar(&quick, "quick", false, "")
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := f.String(); got != tc.want {
			t.Errorf("%v: -persist = %q, want %q", tc.args, got, tc.want)
		}
	}
}

func TestPlanPersist(t *testing.T) {
	cells := planPersist([]string{backendPostgres, backendDynamo}, 1, nil)
	var ids []string
	for _, c := range cells {
		ids = append(ids, c.id())
		if c.cfg.conns != 50 || c.cfg.keys != 10_000 || c.cfg.dist != loadgen.Uniform || c.cfg.rate != 0 {
			t.Errorf("%s: grid point %+v", c.id(), c.cfg)
		}
	}
	want := []string{
		"persist/memory/c50/p16/k10000/uniform", "persist/pg-async/c50/p16/k10000/uniform", "persist/pg-sync/c50/p16/k10000/uniform",
		"persist/dynamo-async/c50/p16/k10000/uniform", "persist/dynamo-sync/c50/p16/k10000/uniform",
		"persist/memory/c50/p1/k10000/uniform", "persist/pg-async/c50/p1/k10000/uniform", "persist/pg-sync/c50/p1/k10000/uniform",
		"persist/dynamo-async/c50/p1/k10000/uniform", "persist/dynamo-sync/c50/p1/k10000/uniform",
	}
	if !slices.Equal(ids, want) {
		t.Errorf("plan:\n%s\nwant\n%s", strings.Join(ids, "\n"), strings.Join(want, "\n"))
	}
	// One table per server: no two backed rows of a backend share one.
	tables := map[string]string{}
	for _, c := range cells {
		if c.setup.backend == "" {
			continue
		}
		k := c.setup.backend + "/" + c.table()
		if prev, ok := tables[k]; ok {
			t.Errorf("%s and %s share table %s", prev, c.id(), k)
		}
		tables[k] = c.id()
	}
	if got := planPersist([]string{backendPostgres}, 1, regexp.MustCompile("p16")); len(got) != 3 {
		t.Errorf("postgres at p16: %d rows, want 3", len(got))
	}
	if got := planPersist(nil, 0, nil); len(got) != 2 || got[0].setup.name != "memory" {
		t.Errorf("no backend: %+v, want the two memory rows", got)
	}
	// Rounds: at each depth, whole rounds back to back, tables never shared.
	three := planPersist([]string{backendPostgres}, 3, nil)
	var order []string
	seen := map[string]bool{}
	for _, c := range three {
		order = append(order, fmt.Sprintf("%s/p%d/r%d", c.setup.name, c.cfg.pipeline, c.round))
		if c.setup.backend != "" {
			if seen[c.table()] {
				t.Errorf("table %s used twice", c.table())
			}
			seen[c.table()] = true
		}
	}
	if len(three) != 18 || order[0] != "memory/p16/r1" || order[3] != "memory/p16/r2" || order[8] != "pg-sync/p16/r3" || order[9] != "memory/p1/r1" {
		t.Errorf("3 rounds: %v", order)
	}
}

func TestBackendURLAndArgs(t *testing.T) {
	pg := "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	if got, want := backendURL(backendPostgres, pg, "t1"), pg+"&table=t1"; got != want {
		t.Errorf("postgres URL = %q, want %q", got, want)
	}
	if got, want := backendURL(backendPostgres, "postgres://h/db", "t1"), "postgres://h/db?table=t1"; got != want {
		t.Errorf("postgres URL = %q, want %q", got, want)
	}
	if got, want := backendURL(backendDynamo, "http://127.0.0.1:8000", "t1"),
		"dynamodb://t1?region=us-east-1&endpoint=http%3A%2F%2F127.0.0.1%3A8000"; got != want {
		t.Errorf("dynamodb URL = %q, want %q", got, want)
	}
	if got := persistArgs("", "u", time.Second); got != nil {
		t.Errorf("memory args = %v", got)
	}
	if got, want := strings.Join(persistArgs("async", "u", 100*time.Millisecond), " "), "--persist u --persist-mode async --persist-interval 100ms"; got != want {
		t.Errorf("async args = %q, want %q", got, want)
	}
	if got, want := strings.Join(persistArgs("sync", "u", time.Second), " "), "--persist u --persist-mode sync"; got != want {
		t.Errorf("sync args = %q, want %q", got, want)
	}
	if got := loadKeyCounts("10000, 1000000,none,0,-3"); !slices.Equal(got, []int{10_000, 1_000_000}) {
		t.Errorf("loadKeyCounts = %v", got)
	}
}

func TestThrottlekitArgv(t *testing.T) {
	argv, addr, maddr, err := throttlekitArgv([]string{"/usr/bin/taskset", "-c", "1"}, "/bin/tk", []string{"--persist", "u"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(argv[:4], []string{"/usr/bin/taskset", "-c", "1", "/bin/tk"}) || argv[5] != addr || argv[7] != maddr ||
		!slices.Equal(argv[8:], []string{"--persist", "u"}) {
		t.Errorf("argv = %v (addr %s, metrics %s)", argv, addr, maddr)
	}
	argv, _, maddr, err = throttlekitArgv(nil, "/bin/tk", []string{"--metrics-addr="})
	if err != nil {
		t.Fatal(err)
	}
	if argv[0] != "/bin/tk" || maddr != "" {
		t.Errorf("argv %v, metrics %q: want the binary first and metrics off", argv, maddr)
	}
}

func TestPinPlan(t *testing.T) {
	for _, tc := range []struct {
		want    bool
		taskset string
		cpus    int
		ok      bool
		note    string
	}{
		{true, "/usr/bin/taskset", 2, true, "Pinned: servers"},
		{false, "/usr/bin/taskset", 2, false, "-pin=false"},
		{true, "", 8, false, "taskset not found"},
		{true, "/usr/bin/taskset", 1, false, "1 CPU"},
	} {
		ok, note := pinPlan(tc.want, tc.taskset, tc.cpus)
		if ok != tc.ok || !strings.Contains(note, tc.note) {
			t.Errorf("pinPlan(%v, %q, %d) = %v, %q", tc.want, tc.taskset, tc.cpus, ok, note)
		}
	}
}

// TestPinSelf moves every thread to one CPU of the process's set and back.
func TestPinSelf(t *testing.T) {
	var old unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Skipf("sched_getaffinity: %v", err)
	}
	cpu := -1
	for i := range 1024 {
		if old.IsSet(i) {
			cpu = i
			break
		}
	}
	restore, err := pinSelf(cpu)
	if err != nil {
		t.Fatal(err)
	}
	every := func(want unix.CPUSet) {
		t.Helper()
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			var tid int
			if _, err := fmt.Sscan(e.Name(), &tid); err != nil {
				continue
			}
			var cur unix.CPUSet
			if err := unix.SchedGetaffinity(tid, &cur); err == nil && cur != want {
				t.Errorf("thread %d on %v CPUs, want %v", tid, cur.Count(), want.Count())
			}
		}
	}
	var one unix.CPUSet
	one.Set(cpu)
	every(one)
	if err := restore(); err != nil {
		t.Fatal(err)
	}
	every(old)
}

func TestPeekSummary(t *testing.T) {
	if got := peekSummary("*5\r\n:1\r\n:100\r\n:99\r\n:0\r\n:864000\r\n"); got != "remaining 99 of 100" {
		t.Errorf("peekSummary = %q", got)
	}
	if got := peekSummary("%5\r\n+allowed\r\n:1\r\n"); !strings.HasPrefix(got, "PEEK: ") {
		t.Errorf("unexpected shape = %q", got)
	}
}

// sectionFixture is a persistence section as a run would leave it: two
// rounds at pipeline 16 for memory and pg-async, one for the rest.
func sectionFixture() *persistSection {
	row := func(name, backend, mode string, depth, round int, tput, p99 float64, rows, flushes, errs int64) persistRow {
		return persistRow{setup: persistSetup{name, backend, mode}, round: round,
			cell: cellResult{workload: name, cfg: cellCfg{50, depth, 10_000, loadgen.Uniform, 0}, tput: tput, p50: p99 / 4, p99: p99, p999: p99,
				ops: int64(tput), errors: errs, cpuPerM: 1.5, elapsed: time.Second, lastError: map[bool]string{true: "TRYAGAIN backend", false: ""}[errs > 0]},
			rows: rows, flushes: flushes, rowsPerSec: float64(rows), dels: rows / 10, delsPerSec: float64(rows / 10)}
	}
	return &persistSection{
		backends: []string{backendPostgres, backendDynamo}, interval: 100 * time.Millisecond, duration: 3 * time.Second, rounds: 2,
		pin: "Pinned: test",
		rows: []persistRow{
			row("memory", "", "", 16, 1, 500_000, 900, 0, 0, 0),
			row("pg-async", backendPostgres, "async", 16, 1, 480_000, 1000, 30_000, 30, 0),
			row("pg-sync", backendPostgres, "sync", 16, 1, 200_000, 8_000, 200_000, 1000, 0),
			row("dynamo-async", backendDynamo, "async", 16, 1, 400_000, 2_000, 5_000, 10, 3),
			{setup: persistSetup{"dynamo-sync", backendDynamo, "sync"}, round: 1, cell: cellResult{cfg: cellCfg{50, 16, 10_000, loadgen.Uniform, 0}},
				startErr: "dynalite not started"},
			row("memory", "", "", 16, 2, 400_000, 1100, 0, 0, 0),
			row("pg-async", backendPostgres, "async", 16, 2, 320_000, 3000, 10_000, 10, 0),
			row("memory", "", "", 1, 1, 80_000, 400, 0, 0, 0),
			row("pg-async", backendPostgres, "async", 1, 1, 60_000, 500, 1_000, 10, 0),
		},
		startup: []startupResult{
			{backend: backendPostgres, keys: 10_000, fill: 700 * time.Millisecond, toPing: 300 * time.Millisecond,
				toLoaded: 900 * time.Millisecond, loadMs: 580, loaded: 10_000, check: "remaining 99 of 100"},
			{backend: backendDynamo, keys: 1_000_000, err: "skipped: 500000 CHECKs sent and 20000 rows written in 1m0s"},
		},
	}
}

func TestWritePersist(t *testing.T) {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	writePersist(&results{persist: sectionFixture(), opts: options{warmup: 300 * time.Millisecond}}, p)
	md := b.String()
	for _, want := range []string{
		"Pinned: test",
		"3s measured per row",
		"2 round(s)",
		"| memory | 16 | 450k | 400k-500k | 250 | 1000 | 1000 | 0 | – | – | – | – | – | 1.50 | 68% |",
		// medians of two rounds: ops 400k, ratio (0.96+0.80)/2, rows/flush 40000/40.
		"| pg-async | 16 | 400k | 320k-480k | 500 | 2000 | 2000 | 0 | 0.88x | 0.80-0.96 | 20k | 2000 | 1000 |",
		"| pg-sync | 16 | 200k | 200k-200k |",
		"| 0.40x | 0.40-0.40 | 200k | 20k | 200 |",
		"| dynamo-async | 16 | 400k | 400k-400k | 500 | 2000 | 2000 | 0 | – | – | 5000 | 500 | 500 |", // errors: out of ratios
		"3 (TRYAGAIN backend)",
		"| dynamo-sync | 16 | – | – | – | – | – | – | – | – | – | – | – | – | – | not started: dynalite not started |",
		"| pg-async | 1 | 60k | 60k-60k | 125 | 500 | 500 | 0 | 0.75x |",
		"| postgres async, pipeline 16 >= 0.9x memory (ops/s) | 0.88x (range 0.80-0.96 over 2 rounds) | **missed** |",
		"| postgres async, pipeline 1 >= 0.9x memory (ops/s) | 0.75x (range 0.75-0.75 over 1 rounds) | **missed** |",
		"| dynamodb async, pipeline 16 >= 0.9x memory (ops/s) | 3 error replies | **missed** |",
		"| dynamodb async, pipeline 1 >= 0.9x memory (ops/s) | – | not measured |",
		"| postgres sync, pipeline 16 >= 0.3x memory (ops/s) | 0.40x (range 0.40-0.40 over 1 rounds) | met |",
		"| postgres sync, pipeline 16: p99 <= 10 ms | p99 8.00 ms (range 8.00-8.00) | met |",
		"| postgres | 10k | 0.700 s | 0.300 s | 0.900 s | 0.580 s | 10000 | remaining 99 of 100 |  |",
		"| dynamodb | 1M | – | – | – | – | – | – | skipped: 500000 CHECKs sent and 20000 rows written in 1m0s |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
	b.Reset()
	writePersist(&results{}, p)
	if b.Len() != 0 {
		t.Errorf("no section wrote %q", b.String())
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.v); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.v, got, tc.want)
		}
	}
}

func TestWriteMCheck(t *testing.T) {
	c16 := cellCfg{50, 16, 1_000_000, loadgen.Uniform, 0}
	c1 := cellCfg{50, 1, 1_000_000, loadgen.Uniform, 0}
	r := &results{cells: []cellResult{
		{workload: "tk-check", cfg: c16, tput: 400_000, p99: 2000},
		{workload: "tk-mcheck", cfg: c16, tput: 240_000, p99: 3000},
		{workload: "tk-check", cfg: c1, tput: 80_000},
		{workload: "tk-mcheck", cfg: c1, tput: 60_000, errors: 2, lastError: "ERR x"},
	}}
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	writeMCheck(r, p)
	writeTargets(r, p)
	md := b.String()
	for _, want := range []string{
		"| 50 | 16 | 1M | uniform | 400k | 240k | 0.60x | 2000 | 3000 |",
		"| 50 | 1 | 1M | uniform | 80k | 60k | – |",
		"2 (ERR x)",
		"| THROTTLE.MCHECK (2 limits) 1M keys, 50 conns, pipeline 16 >= 0.5x THROTTLE.CHECK (ops/s) | 0.60x (240k vs 400k) | met |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q\n%s", want, md)
		}
	}
}

// TestRunPersistEndToEnd runs the persistence section on Postgres for the
// in-memory and async rows at pipeline 16 and a small start-up table, and
// checks the report.
func TestRunPersistEndToEnd(t *testing.T) {
	testdeps.Require(t, "redis-server", "/usr/lib/postgresql/15/bin/initdb", "python3")
	if testing.Short() {
		t.Skip("builds the server and starts processes; skipped with -short")
	}
	out := t.TempDir()
	o := options{quick: true, out: out, duration: 200 * time.Millisecond, warmup: 50 * time.Millisecond,
		run: "^persist/(memory|pg-async)/c50/p16|^persist-start/", memKeys: "none",
		redisServer: "redis-server", redisBench: "redis-benchmark", noRedisBench: true,
		persist: persistFlag{[]string{backendPostgres}}, persistInterval: 50 * time.Millisecond,
		persistDuration: 300 * time.Millisecond, persistRounds: 1, persistLoadKeys: "2000", pin: true}
	if err := run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	md := string(b)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`\| memory \| 16 \| [0-9.]+[kM]? \|`),
		regexp.MustCompile(`\| pg-async \| 16 \| [0-9.]+[kM]? \| .* \| [0-9.]+x \| .* \| 0 \|`),
		regexp.MustCompile(`\| postgres \| 2k \| [0-9.]+ s \| [0-9.]+ s \| [0-9.]+ s \| [0-9.]+ s \| 2000 \| remaining 99 of 100 \|`),
	} {
		if !want.MatchString(md) {
			t.Errorf("BENCHMARKS.md lacks %s", want)
		}
	}
	if t.Failed() {
		t.Log(md)
	}
}
