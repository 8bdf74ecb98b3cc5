package telemetry

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/throttlekit/throttlekit-server/persist"
	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
)

// fakeServer holds a snapshot that tests change between scrapes, as the
// server's counters would move.
type fakeServer struct {
	mu    sync.Mutex
	stats server.Stats
	store shard.Stats
	ready bool
}

func (f *fakeServer) Stats() server.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	s.Commands = maps.Clone(s.Commands)
	s.Errors = maps.Clone(s.Errors)
	s.LatencyCounts = slices.Clone(s.LatencyCounts)
	return s
}

func (f *fakeServer) Store() shard.Stats { f.mu.Lock(); defer f.mu.Unlock(); return f.store }
func (f *fakeServer) Ready() bool        { f.mu.Lock(); defer f.mu.Unlock(); return f.ready }

// bounds are the latency bucket bounds of the fake server: 10µs, 100µs, 1ms.
var bounds = []int64{10_000, 100_000, 1_000_000}

func newFake() *fakeServer {
	return &fakeServer{stats: server.Stats{
		Commands:      map[string]int64{},
		Errors:        map[string]int64{},
		LatencyBounds: bounds,
		LatencyCounts: make([]int64, len(bounds)+1),
	}}
}

// command records one command as the server would.
func (f *fakeServer) command(name string, latencyNs int64, allowed int, errKind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &f.stats
	s.Commands[name]++
	switch allowed {
	case 1:
		s.Allowed++
	case 0:
		s.Denied++
	}
	if errKind != "" {
		s.Errors[errKind]++
	}
	i, _ := slices.BinarySearch(bounds, latencyNs)
	s.LatencyCounts[i]++
	s.LatencySumNs += latencyNs
	s.LatencyCount++
}

// scrape GETs /metrics and returns every sample line as name{labels} -> value.
func scrape(t *testing.T, url string) map[string]string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %s", resp.Status)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Fatalf("/metrics Content-Type = %q", ct)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return parseSamples(t, string(body))
}

func parseSamples(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("malformed sample line %q", line)
		}
		if _, dup := out[line[:i]]; dup {
			t.Fatalf("duplicate sample %q", line[:i])
		}
		out[line[:i]] = line[i+1:]
	}
	return out
}

func TestExporterScrape(t *testing.T) {
	f := newFake()
	f.ready = true
	f.store = shard.Stats{Keys: 7, Expired: 3, Evicted: 1}
	f.stats.ConnsCurrent, f.stats.ConnsAccepted, f.stats.ConnsRejected = 2, 5, 1
	f.stats.BytesIn, f.stats.BytesOut = 1000, 2000
	f.stats.LeaseGranted, f.stats.LeaseReturned = 40, 9
	var suppressed int64 = 12
	exp := NewExporter(Sources{
		Server:        f.Stats,
		Store:         f.Store,
		Ready:         f.Ready,
		LogSuppressed: func() int64 { return suppressed },
		Version:       "1.2.3",
	})
	ts := httptest.NewServer(Handler(exp, f.Ready))
	defer ts.Close()

	before := scrape(t, ts.URL)
	want := map[string]string{
		`throttlekit_build_info{version="1.2.3"}`:                  "1",
		`throttlekit_ready`:                                        "1",
		`throttlekit_log_lines_suppressed_total`:                   "12",
		`throttlekit_keys`:                                         "7",
		`throttlekit_keys_expired_total`:                           "3",
		`throttlekit_keys_evicted_total`:                           "1",
		`throttlekit_decisions_total{result="allowed"}`:            "0",
		`throttlekit_decisions_total{result="denied"}`:             "0",
		`throttlekit_connections`:                                  "2",
		`throttlekit_connections_accepted_total`:                   "5",
		`throttlekit_connections_rejected_total`:                   "1",
		`throttlekit_net_input_bytes_total`:                        "1000",
		`throttlekit_net_output_bytes_total`:                       "2000",
		`throttlekit_lease_credits_granted_total`:                  "40",
		`throttlekit_lease_credits_returned_total`:                 "9",
		`throttlekit_command_duration_seconds_bucket{le="1e-05"}`:  "0",
		`throttlekit_command_duration_seconds_bucket{le="0.0001"}`: "0",
		`throttlekit_command_duration_seconds_bucket{le="0.001"}`:  "0",
		`throttlekit_command_duration_seconds_bucket{le="+Inf"}`:   "0",
		`throttlekit_command_duration_seconds_sum`:                 "0",
		`throttlekit_command_duration_seconds_count`:               "0",
		`throttlekit_metrics_scrapes_total`:                        "1", // counted before writing
	}
	for k, v := range want {
		if before[k] != v {
			t.Errorf("before: %s = %q, want %q", k, before[k], v)
		}
	}
	for _, k := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"} {
		if _, ok := before[k]; !ok {
			t.Errorf("runtime metric %s missing", k)
		}
	}

	// Traffic: 3 allowed checks at 5µs, 2 denied checks at 50µs, one ping at
	// 2ms (over the last bound), one unknown command answered with ERR at 500µs.
	for range 3 {
		f.command("throttle.check", 5_000, 1, "")
	}
	for range 2 {
		f.command("throttle.check", 50_000, 0, "")
	}
	f.command("ping", 2_000_000, -1, "")
	f.command("cl.throttle", 500_000, -1, "ERR")
	f.mu.Lock()
	f.store.Keys = 9
	f.stats.ConnsCurrent = 1
	f.stats.BytesIn += 345
	f.ready = false
	f.mu.Unlock()
	suppressed = 20

	after := scrape(t, ts.URL)
	want = map[string]string{
		`throttlekit_commands_total{cmd="throttle.check"}`:         "5",
		`throttlekit_commands_total{cmd="ping"}`:                   "1",
		`throttlekit_commands_total{cmd="cl.throttle"}`:            "1",
		`throttlekit_decisions_total{result="allowed"}`:            "3",
		`throttlekit_decisions_total{result="denied"}`:             "2",
		`throttlekit_errors_total{kind="ERR"}`:                     "1",
		`throttlekit_command_duration_seconds_bucket{le="1e-05"}`:  "3",
		`throttlekit_command_duration_seconds_bucket{le="0.0001"}`: "5",
		`throttlekit_command_duration_seconds_bucket{le="0.001"}`:  "6",
		`throttlekit_command_duration_seconds_bucket{le="+Inf"}`:   "7",
		`throttlekit_command_duration_seconds_sum`:                 "0.002615",
		`throttlekit_command_duration_seconds_count`:               "7",
		`throttlekit_keys`:                       "9",
		`throttlekit_connections`:                "1",
		`throttlekit_net_input_bytes_total`:      "1345",
		`throttlekit_ready`:                      "0",
		`throttlekit_log_lines_suppressed_total`: "20",
		`throttlekit_metrics_scrapes_total`:      "2",
	}
	for k, v := range want {
		if after[k] != v {
			t.Errorf("after: %s = %q, want %q", k, after[k], v)
		}
	}
	// No label set appears that the snapshot does not hold.
	for k := range after {
		if strings.HasPrefix(k, "throttlekit_commands_total{") || strings.HasPrefix(k, "throttlekit_errors_total{") {
			if _, ok := want[k]; !ok {
				t.Errorf("unexpected sample %s", k)
			}
		}
	}
}

func TestExporterNilSources(t *testing.T) {
	var buf bytes.Buffer
	NewExporter(Sources{}).WritePrometheus(&buf)
	s := parseSamples(t, buf.String())
	for k := range s {
		if strings.HasPrefix(k, "throttlekit_") && k != MetricScrapes {
			t.Errorf("sample %s written without a source", k)
		}
	}
	if s[MetricScrapes] != "1" {
		t.Errorf("%s = %q, want 1", MetricScrapes, s[MetricScrapes])
	}
}

func TestExporterSetsAreIndependent(t *testing.T) {
	a := NewExporter(Sources{Version: "a"})
	b := NewExporter(Sources{Version: "b"})
	var ba, bb bytes.Buffer
	a.WritePrometheus(io.Discard)
	a.WritePrometheus(&ba)
	b.WritePrometheus(&bb)
	sa, sb := parseSamples(t, ba.String()), parseSamples(t, bb.String())
	if sa[MetricScrapes] != "2" || sa[`throttlekit_build_info{version="a"}`] != "1" {
		t.Errorf("exporter a: scrapes=%q, %v", sa[MetricScrapes], sa)
	}
	if _, ok := sb[`throttlekit_build_info{version="a"}`]; ok || sb[MetricScrapes] != "1" || sb[`throttlekit_build_info{version="b"}`] != "1" {
		t.Errorf("exporter b shares state with a: %v", sb)
	}
}

const histHeader = "# HELP throttlekit_command_duration_seconds Time to execute one command, from parsed request to appended reply.\n" +
	"# TYPE throttlekit_command_duration_seconds histogram\n"

func TestHistogramEdgeCases(t *testing.T) {
	tests := []struct {
		name   string
		bounds []int64
		counts []int64
		sum    int64
		want   string
	}{
		{"no buckets", nil, nil, 0, ""},
		{"only +Inf", nil, []int64{4}, 2e9, histHeader +
			"throttlekit_command_duration_seconds_bucket{le=\"+Inf\"} 4\n" +
			"throttlekit_command_duration_seconds_sum 2\n" +
			"throttlekit_command_duration_seconds_count 4\n"},
		{"negative counts clamp", []int64{1000}, []int64{-1, 2}, 1500, histHeader +
			"throttlekit_command_duration_seconds_bucket{le=\"1e-06\"} 0\n" +
			"throttlekit_command_duration_seconds_bucket{le=\"+Inf\"} 2\n" +
			"throttlekit_command_duration_seconds_sum 1.5e-06\n" +
			"throttlekit_command_duration_seconds_count 2\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		writeHistogram(&buf, tt.bounds, tt.counts, tt.sum)
		if buf.String() != tt.want {
			t.Errorf("%s:\n got %q\nwant %q", tt.name, buf.String(), tt.want)
		}
	}
}

func TestEscapeLabel(t *testing.T) {
	var buf bytes.Buffer
	writeLabeled(&buf, MetricErrors, "kind", map[string]int64{"a\"b": 1, "c\\d": 2, "e\nf": 3, "plain": 4})
	want := "# HELP throttlekit_errors_total Error replies, by kind (first word of the error, or protocol).\n" +
		"# TYPE throttlekit_errors_total counter\n" +
		"throttlekit_errors_total{kind=\"a\\\"b\"} 1\n" +
		"throttlekit_errors_total{kind=\"c\\\\d\"} 2\n" +
		"throttlekit_errors_total{kind=\"e\\nf\"} 3\n" +
		"throttlekit_errors_total{kind=\"plain\"} 4\n"
	if buf.String() != want {
		t.Fatalf("got %q\nwant %q", buf.String(), want)
	}
}

func BenchmarkWritePrometheus(b *testing.B) {
	f := newFake()
	for _, c := range []string{"throttle.check", "throttle.peek", "cl.throttle", "ping", "hello", "info"} {
		f.command(c, 5_000, 1, "")
	}
	exp := NewExporter(Sources{Server: f.Stats, Store: f.Store, Ready: f.Ready, Version: "bench"})
	b.ReportAllocs()
	for b.Loop() {
		exp.WritePrometheus(io.Discard)
	}
}

// TestExporterMetadata checks that every throttlekit_ sample follows the
// HELP and TYPE lines of its family, each written once.
func TestExporterMetadata(t *testing.T) {
	f := newFake()
	f.command("throttle.check", 5_000, 1, "ERR")
	var buf bytes.Buffer
	NewExporter(Sources{Server: f.Stats, Store: f.Store, Ready: f.Ready, LogSuppressed: func() int64 { return 0 }, Version: "v",
		Persist:  func() persist.Stats { return persist.Stats{Backend: "postgres", Mode: "sync", Policy: "open"} },
		Upstream: fakeUpstream{}}).WritePrometheus(&buf)
	typed := map[string]string{}
	helped := map[string]bool{}
	for _, line := range strings.Split(buf.String(), "\n") {
		switch fields := strings.Fields(line); {
		case strings.HasPrefix(line, "# TYPE throttlekit_"):
			if _, dup := typed[fields[2]]; dup {
				t.Errorf("TYPE of %s written twice", fields[2])
			}
			typed[fields[2]] = fields[3]
		case strings.HasPrefix(line, "# HELP throttlekit_"):
			helped[fields[2]] = len(fields) > 3
		case strings.HasPrefix(line, "throttlekit_"):
			name := line[:strings.IndexAny(line, "{ ")]
			family := name
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suf); ok && typed[b] == "histogram" {
					family = b
				}
			}
			if typed[family] == "" || !helped[family] {
				t.Errorf("sample %q has no TYPE/HELP for family %s before it", line, family)
			}
		}
	}
	if len(typed) != len(help) {
		t.Errorf("%d families typed, want all %d", len(typed), len(help))
	}
}
