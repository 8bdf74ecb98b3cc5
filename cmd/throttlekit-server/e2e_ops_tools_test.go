package main

// The operator's tools pointed at the real binary: prometheus-redis-exporter
// (Debian's prometheus-redis-exporter) and redis-cli's --latency,
// --bigkeys, --memkeys and --stat. Thresholds are set so that nothing
// depends on how fast the machine is: the slow log takes every command
// (slowlog-log-slower-than 0) and the only latency event comes from DEBUG
// ADVANCE-CLOCK 2000, which moves the server's clock by 2 s inside the
// command, against a threshold of 1 s that no real command nears.

import (
	"bytes"
	"context"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/lockedbuf"
	"github.com/throttlekit/throttlekit-server/internal/testdeps"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

func TestOpsToolsPrometheusRedisExporter(t *testing.T) {
	bin := testdeps.Require(t, "prometheus-redis-exporter")[0]
	srv := testserver.Start(t, "--enable-debug-command", "local", "--slowlog-log-slower-than", "0", "--latency-monitor-threshold", "1000")
	web := testserver.FreeAddr(t)
	cmd := exec.Command(bin, "-redis.addr", "redis://"+srv.Addr, "-web.listen-address", web, "-debug")
	var log lockedbuf.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; { // bounds a broken start; times nothing
		if resp, err := http.Get("http://" + web + "/metrics"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the exporter did not listen on %s; log:\n%s", web, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	before := scrape(t, web)
	if before["redis_up"] != 1 {
		t.Fatalf("redis_up %v; log:\n%s", before["redis_up"], log.String())
	}
	rc := dialRESP(t, srv.Addr)
	const n = 50
	for i := 0; i < n; i++ {
		rc.do(t, "THROTTLE.CHECK", "load:"+strconv.Itoa(i%5), "10", "1m")
	}
	if r := rc.do(t, "DEBUG", "ADVANCE-CLOCK", "2000"); r != "OK" {
		t.Fatalf("DEBUG ADVANCE-CLOCK: %q", r)
	}
	after := scrape(t, web)
	if d := delta(before, after, `redis_commands_total{cmd="throttle.check"}`); d != n {
		t.Errorf("commandstats: throttle.check moved by %v, want %d", d, n)
	}
	if d := delta(before, after, "redis_slowlog_last_id"); d < n {
		t.Errorf("slowlog: last id moved by %v, want at least %d", d, n)
	}
	if after["redis_slowlog_length"] <= before["redis_slowlog_length"] && after["redis_slowlog_length"] != 128 {
		t.Errorf("slowlog length %v -> %v", before["redis_slowlog_length"], after["redis_slowlog_length"])
	}
	if v := after[`redis_latency_spike_duration_seconds{event_name="command"}`]; v < 2 {
		t.Errorf("latency: the DEBUG ADVANCE-CLOCK 2000 spike reads %vs, want at least 2", v)
	}
	if _, ok := before[`redis_latency_spike_duration_seconds{event_name="command"}`]; ok {
		t.Error("latency: a command spike before the load")
	}
	for _, bad := range []string{"unknown command", "level=error", "level=warning"} {
		if strings.Contains(strings.ToLower(log.String()), bad) {
			t.Errorf("the exporter's log says %q:\n%s", bad, log.String())
		}
	}
}

// redisCLI runs redis-cli against addr with args, bounded by d (the
// continuous modes never end on their own), and returns what it printed.
// stdbuf makes redis-cli write line by line into the pipe, so a run cut by
// the bound keeps its output.
func redisCLI(t *testing.T, addr string, d time.Duration, args ...string) string {
	t.Helper()
	bins := testdeps.Require(t, "redis-cli", "stdbuf")
	host, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	full := append([]string{"-oL", bins[0], "-h", host, "-p", port}, args...)
	c := exec.CommandContext(ctx, bins[1], full...)
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	if err != nil && ctx.Err() == nil {
		t.Fatalf("redis-cli %q: %v\n%s", args, err, out.String())
	}
	return out.String()
}

func TestOpsToolsRedisCLI(t *testing.T) {
	srv := testserver.Start(t)
	rc := dialRESP(t, srv.Addr)
	for i := 0; i < 10; i++ {
		rc.do(t, "THROTTLE.CHECK", "user:"+strconv.Itoa(i), "10", "1m")
	}
	rc.do(t, "THROTTLE.CHECK", "a-key-longer-than-twenty-bytes", "10", "1m", "ALGO", "fixed")
	rc.do(t, "GCRA", "gcra:1", "4", "1", "3600") // lives an hour: no key expires during the test

	// --latency in raw mode: one line "min max avg samples" after -i.
	out := redisCLI(t, srv.Addr, 20*time.Second, "--latency", "--raw", "-i", "0.2")
	if !regexp.MustCompile(`(?m)^\d+ \d+ \d+\.\d+ [1-9]\d*$`).MatchString(out) {
		t.Errorf("--latency --raw: %q", out)
	}
	// --bigkeys and --memkeys: one-shot scans of every key.
	out = redisCLI(t, srv.Addr, 20*time.Second, "--bigkeys")
	if !strings.Contains(out, "Sampled 12 keys in the keyspace!") || !strings.Contains(out, "10 gcras") || !strings.Contains(out, "1 fixeds") {
		t.Errorf("--bigkeys:\n%s", out)
	}
	out = redisCLI(t, srv.Addr, 20*time.Second, "--memkeys")
	m := regexp.MustCompile(`Biggest\s+fixed found '"a-key-longer-than-twenty-bytes"' has (\d+) bytes`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("--memkeys:\n%s", out)
	}
	if usage := rc.do(t, "MEMORY", "USAGE", "a-key-longer-than-twenty-bytes"); m[1] != usage {
		t.Errorf("--memkeys says %s bytes, MEMORY USAGE %s", m[1], usage)
	}
	// --stat runs until stopped: a bounded run shows its header and rows.
	out = redisCLI(t, srv.Addr, 1500*time.Millisecond, "--stat", "-i", "0.1")
	if !strings.Contains(out, "------- data ------") || !regexp.MustCompile(`(?m)^12\s+\S+\s+\d+\s`).MatchString(out) {
		t.Errorf("--stat:\n%s", out)
	}
}

// TestOutputLimitBelowBulkLen: Redis accepts client-output-buffer-limit
// below proto-max-bulk-len, and so does the program; a client whose reply
// outgrows the limit is closed, and other clients are unaffected.
func TestOutputLimitBelowBulkLen(t *testing.T) {
	srv := testserver.Start(t, "--client-output-buffer-limit", "2mb") // proto-max-bulk-len stays 64mb
	big := dialRESP(t, srv.Addr)
	// 32 MB: more than loopback socket buffers take at once, so the reply
	// is still queued in the server when it checks the limit.
	payload := strings.Repeat("x", 32<<20)
	if _, err := big.c.Write([]byte("*2\r\n$4\r\nECHO\r\n$" + strconv.Itoa(len(payload)) + "\r\n" + payload + "\r\n")); err != nil {
		t.Fatal(err)
	}
	// The client reads nothing but what the server sends before closing it:
	// never the whole reply.
	var got int
	buf := make([]byte, 64<<10)
	for {
		n, err := big.r.Read(buf)
		got += n
		if err != nil {
			break
		}
	}
	if got >= len(payload) {
		t.Fatalf("read %d bytes: the 32 MB reply passed a 2 MB limit", got)
	}
	if r := dialRESP(t, srv.Addr).do(t, "PING"); r != "PONG" {
		t.Fatalf("another client: %q", r)
	}
}
