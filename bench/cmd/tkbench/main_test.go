package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/bench/loadgen"
	"github.com/throttlekit/throttlekit-server/internal/testdeps"
)

func TestParseRBCSV(t *testing.T) {
	tests := []struct {
		in            string
		rps, p50, p99 float64
		wantErr       bool
	}{
		{`"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"PING","941176.50","0.600","0.100","0.567","0.900","1.175","2.000"
`, 941176.5, 0.567, 1.175, false},
		{"", 0, 0, 0, true},
		{`"test","rps"` + "\n", 0, 0, 0, true},
	}
	for _, tc := range tests {
		var r rbResult
		err := parseRBCSV(tc.in, &r)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%q: err = %v, want error %v", tc.in, err, tc.wantErr)
		}
		if r.rps != tc.rps || r.p50 != tc.p50 || r.p99 != tc.p99 {
			t.Errorf("%q: got rps %v p50 %v p99 %v", tc.in, r.rps, r.p50, r.p99)
		}
	}
}

func TestInfoFieldAndReplies(t *testing.T) {
	info := "$60\r\n# Memory\r\nused_memory:12345\r\nused_memory_human:12K\r\n"
	if got := infoField(info, "used_memory"); got != "12345" {
		t.Errorf("infoField = %q", got)
	}
	if got := infoField(info, "maxmemory"); got != "" {
		t.Errorf("absent field = %q", got)
	}
	for in, want := range map[string]string{"+OK\r\n": "OK", "$3\r\nabc\r\n": "abc"} {
		if got := bulkText(in); got != want {
			t.Errorf("bulkText(%q) = %q, want %q", in, got, want)
		}
	}
	if n, err := intReply(":42\r\n"); err != nil || n != 42 {
		t.Errorf("intReply = %d, %v", n, err)
	}
}

func TestProcReaders(t *testing.T) {
	pid := os.Getpid()
	cpu, err := cpuSeconds(pid)
	if err != nil || cpu < 0 {
		t.Fatalf("cpuSeconds = %v, %v", cpu, err)
	}
	rss, err := rssBytes(pid)
	if err != nil || rss <= 0 {
		t.Fatalf("rssBytes = %v, %v", rss, err)
	}
}

func TestPlan(t *testing.T) {
	tests := []struct {
		name          string
		quick         bool
		tk, tk2       bool
		filter        string
		wantMin       int
		wantMax       int
		mustHave      []string
		mustNotPrefix string
	}{
		{"quick redis only", true, false, false, "", 10, 20,
			[]string{"redis-ping/c50/p16/k1000000/uniform", "redis-gcra-lua/c50/p16/k1000000/uniform", "redis-incr/c50/p1/k1000000/uniform"}, "tk-"},
		{"quick with server", true, true, false, "", 20, 40,
			[]string{"tk-check/c50/p16/k1000000/uniform", "tk-check/c50/p1/k1000000/uniform", "tk-lease/c50/p16/k1000000/uniform",
				"tk-mcheck/c50/p16/k1000000/uniform", "tk-mcheck/c50/p1/k1000000/uniform"}, "cmp-"},
		{"full", false, true, true, "", 200, 400,
			[]string{"tk-check/c200/p1/k10000/zipf", "redis-ping/c1/p1/k1000000/uniform", "cmp-check/c50/p16/k1/uniform"}, "none"},
		{"filtered", false, true, false, "^tk-check/c50/p16", 5, 5, []string{"tk-check/c50/p16/k1000000/uniform"}, "redis-"},
	}
	for _, tc := range tests {
		var f *regexp.Regexp
		if tc.filter != "" {
			f = regexp.MustCompile(tc.filter)
		}
		cells := plan(tc.quick, tc.tk, tc.tk2, f)
		if len(cells) < tc.wantMin || len(cells) > tc.wantMax {
			t.Errorf("%s: %d cells, want %d..%d", tc.name, len(cells), tc.wantMin, tc.wantMax)
		}
		ids := map[string]bool{}
		for _, c := range cells {
			id := cellID(c.w.id, c.cfg)
			if ids[id] {
				t.Errorf("%s: duplicate cell %s", tc.name, id)
			}
			ids[id] = true
			if strings.HasPrefix(id, tc.mustNotPrefix) {
				t.Errorf("%s: unexpected cell %s", tc.name, id)
			}
		}
		for _, id := range tc.mustHave {
			if !ids[id] {
				t.Errorf("%s: missing cell %s", tc.name, id)
			}
		}
	}
}

func TestCommandsForWorkloads(t *testing.T) {
	shas := map[string]string{gcraLua: "sha-g", fixedLua: "sha-f"}
	for _, w := range allWorkloads {
		c := w.command(shas)
		b, _ := c.Append(nil, nil, 7)
		s := string(b)
		if w.keyed() && !strings.Contains(s, w.prefix+"7\r\n") {
			t.Errorf("%s: key missing in %q", w.id, s)
		}
		for _, k := range w.more {
			if !strings.Contains(s, k.Prefix+"7\r\n") {
				t.Errorf("%s: key %s missing in %q", w.id, k.Prefix, s)
			}
			if got := w.argv(shas, "x")[k.Pos]; got != k.Prefix+"x" {
				t.Errorf("%s: argv key %d = %q", w.id, k.Pos, got)
			}
		}
		if w.script != "" && !strings.Contains(s, "sha-") {
			t.Errorf("%s: script SHA missing in %q", w.id, s)
		}
	}
	if got := cellID("tk-check", cellCfg{50, 16, 1000, loadgen.Zipf, 0}); got != "tk-check/c50/p16/k1000/zipf" {
		t.Errorf("cellID = %q", got)
	}
	for n, want := range map[int]string{1: "1", 10_000: "10k", 1_000_000: "1M", 1500: "1500"} {
		if got := keysLabel(n); got != want {
			t.Errorf("keysLabel(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestRunEndToEnd runs the whole harness on a tiny slice of the grid and
// checks that the report and every chart are written.
func TestRunEndToEnd(t *testing.T) {
	testdeps.Require(t, "redis-server", "redis-benchmark")
	if testing.Short() {
		t.Skip("builds the server and starts processes; skipped with -short")
	}
	out := t.TempDir()
	o := options{quick: true, out: out, duration: 200 * time.Millisecond, warmup: 50 * time.Millisecond,
		run: "ping/c50/p16|gcra-lua/c50/p16/k1000000/uniform|tk-check/c50/p16/k1000000/uniform|^live-tk-(check|ping)/p16$", memKeys: "2000",
		redisServer: "redis-server", redisBench: "redis-benchmark", noRedisBench: true,
		live: true, liveKeys: 2000, liveRounds: 2}
	if err := run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(out, "BENCHMARKS.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Targets", "| redis-ping | 50 | 16 |", "| redis-gcra-lua | 50 | 16 | 1M | uniform |", "## Memory per key", "| redis | 2k | 2000 |",
		"## Live keys: the store at 2k live keys (medians of 2 interleaved rounds)", "| THROTTLE.CHECK P=16 vs own PING P=16 |",
		"- warmed live-tk-check: 2000 commands", "| throttlekit THROTTLE.CHECK | 2000 |", "| Redis SET PX | 2000 |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
	for _, c := range chartFiles {
		st, err := os.Stat(filepath.Join(out, "bench", "charts", c.name))
		if err != nil || st.Size() < 1000 {
			t.Errorf("chart %s: %v", c.name, err)
		}
	}
}

// TestEvenTicks checks the chart axis steps: round numbers, four to ten
// labels from 0 to the top.
func TestEvenTicks(t *testing.T) {
	for _, c := range []struct {
		top  float64
		want []string
	}{
		{2700, []string{"0", "500", "1000", "1500", "2000", "2500"}},
		{1.2, []string{"0", "0.2", "0.4", "0.6", "0.8", "1", "1.2"}},
		{95, []string{"0", "10", "20", "30", "40", "50", "60", "70", "80", "90"}},
		{0, []string{"0"}},
	} {
		var got []string
		for _, tk := range evenTicks(c.top) {
			got = append(got, tk.Label)
		}
		if strings.Join(got, " ") != strings.Join(c.want, " ") {
			t.Errorf("evenTicks(%v) = %v, want %v", c.top, got, c.want)
		}
	}
}
