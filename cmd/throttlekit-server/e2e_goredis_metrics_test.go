package main

// End-to-end test of /metrics under the traffic shape real clients produce:
// several go-redis clients pipelining at once over event loops of their own,
// so the per-loop counters are folded from more than one loop and one read
// batch carries several commands (one latency observation per command).

import (
	"context"
	"math"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

// countingConn counts the bytes one client connection reads and writes, so
// that the server's byte counters can be checked exactly.
type countingConn struct {
	net.Conn
	read, written *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.read.Add(int64(n))
	return n, err
}

func (c countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// newCountingClient returns a go-redis client with one connection whose
// handshake is exactly one HELLO 3 (no CLIENT SETINFO, no CLIENT
// MAINT_NOTIFICATIONS), counting its bytes into read and written.
func newCountingClient(t *testing.T, addr string, read, written *atomic.Int64) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr:                     addr,
		Protocol:                 3,
		PoolSize:                 1,
		MaxRetries:               -1, // a retry would send a command twice
		DialTimeout:              5 * time.Second,
		ReadTimeout:              20 * time.Second,
		WriteTimeout:             20 * time.Second,
		DisableIdentity:          true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{Conn: c, read: read, written: written}, nil
		},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// decisionAllowed returns the first field of a THROTTLE.CHECK reply as
// go-redis decodes it: an array in RESP2, a map with "allowed" in RESP3.
func decisionAllowed(t *testing.T, v any) bool {
	t.Helper()
	var f any
	switch r := v.(type) {
	case []any:
		if len(r) == 5 {
			f = r[0]
		}
	case map[any]any:
		f = r["allowed"]
	case map[string]any:
		f = r["allowed"]
	}
	n, ok := f.(int64)
	if !ok || (n != 0 && n != 1) {
		t.Errorf("THROTTLE.CHECK reply %#v (%T): no allowed field of 0 or 1", v, v)
	}
	return n == 1
}

// bucket is one cumulative histogram bucket: its upper bound in seconds and
// the count of observations at or below it.
type bucket struct {
	le    float64
	count float64
}

// latencyBuckets returns the buckets of the latency histogram in m, sorted
// by upper bound, the last one +Inf.
func latencyBuckets(t *testing.T, m map[string]float64) []bucket {
	t.Helper()
	const prefix = `throttlekit_command_duration_seconds_bucket{le="`
	var out []bucket
	for series, v := range m {
		rest, ok := strings.CutPrefix(series, prefix)
		if !ok {
			continue
		}
		le, err := strconv.ParseFloat(strings.TrimSuffix(rest, `"}`), 64) // ParseFloat reads "+Inf"
		if err != nil {
			t.Fatalf("bucket %s: %v", series, err)
		}
		out = append(out, bucket{le, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].le < out[j].le })
	return out
}

func TestE2EMetricsGoRedisPipelines(t *testing.T) {
	addr, maddr := testserver.FreeAddr(t), testserver.FreeAddr(t)
	startProgram(t, addr, maddr, "--loops", "2", "--shards", "2")
	before := waitFor(t, maddr, "probe connection counted and closed", func(m map[string]float64) bool {
		return m["throttlekit_connections_accepted_total"] >= 1 && m["throttlekit_connections"] == 0
	})

	// Each client checks its own key, limit 4 per hour, 5 pipelines of
	// 3 checks and 1 PING: 4 allowed and 11 denied per client.
	const clients, pipelines, checksPerPipe, limit = 4, 5, 3, 4
	const checksPerClient = pipelines * checksPerPipe
	var read, written atomic.Int64
	rdbs := make([]*redis.Client, clients)
	for i := range rdbs {
		rdbs[i] = newCountingClient(t, addr, &read, &written)
	}
	ctx := context.Background()
	allowed := make([]int, clients)
	var wg sync.WaitGroup
	for i, rdb := range rdbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "gr:" + strconv.Itoa(i)
			for range pipelines {
				pipe := rdb.Pipeline()
				checks := make([]*redis.Cmd, checksPerPipe)
				for j := range checks {
					checks[j] = pipe.Do(ctx, "THROTTLE.CHECK", key, limit, "1h")
				}
				ping := pipe.Ping(ctx)
				if _, err := pipe.Exec(ctx); err != nil {
					t.Errorf("client %d: pipeline: %v", i, err)
					return
				}
				for _, c := range checks {
					if decisionAllowed(t, c.Val()) {
						allowed[i]++
					}
				}
				if ping.Val() != "PONG" {
					t.Errorf("client %d: PING = %q", i, ping.Val())
				}
			}
		}()
	}
	wg.Wait()
	for i, n := range allowed {
		if n != limit {
			t.Errorf("client %d: %d of %d checks allowed at limit %d", i, n, checksPerClient, limit)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Every reply has been read, and a loop publishes its counters before
	// it writes a batch's replies: no waiting needed.
	after := scrape(t, maddr)
	wantCmds := map[string]float64{
		"hello":          clients, // go-redis's handshake, one per connection
		"throttle.check": clients * checksPerClient,
		"ping":           clients * pipelines,
	}
	var total float64
	for series, v := range after {
		name, ok := strings.CutPrefix(series, `throttlekit_commands_total{cmd="`)
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, `"}`)
		d := v - before[series]
		total += d
		if d != wantCmds[name] {
			t.Errorf("commands{cmd=%q} moved by %v, want %v", name, d, wantCmds[name])
		}
	}
	for name, want := range wantCmds {
		if _, ok := after[`throttlekit_commands_total{cmd="`+name+`"}`]; !ok {
			t.Errorf("no commands series for %q (want %v)", name, want)
		}
	}
	for _, w := range []struct {
		series string
		want   float64
	}{
		{`throttlekit_decisions_total{result="allowed"}`, clients * limit},
		{`throttlekit_decisions_total{result="denied"}`, clients * (checksPerClient - limit)},
		{"throttlekit_connections_accepted_total", clients},
		{"throttlekit_connections", clients},
		{"throttlekit_keys", clients},
		{"throttlekit_net_input_bytes_total", float64(written.Load())},
		{"throttlekit_net_output_bytes_total", float64(read.Load())},
		{"throttlekit_command_duration_seconds_count", total},
	} {
		if got := delta(before, after, w.series); got != w.want {
			t.Errorf("%s moved by %v, want %v", w.series, got, w.want)
		}
	}
	for series := range after {
		if strings.HasPrefix(series, "throttlekit_errors_total") && delta(before, after, series) != 0 {
			t.Errorf("%s moved by %v, want 0", series, delta(before, after, series))
		}
	}

	// The histogram: same bounds before and after, cumulative buckets that
	// never decrease, +Inf equal to _count, and each command in exactly one
	// bucket (the +Inf delta is the number of commands).
	bb, ab := latencyBuckets(t, before), latencyBuckets(t, after)
	if len(ab) < 2 || len(ab) != len(bb) || !math.IsInf(ab[len(ab)-1].le, 1) {
		t.Fatalf("latency buckets before %v after %v: want the same bounds ending in +Inf", bb, ab)
	}
	for i := range ab {
		if ab[i].le != bb[i].le {
			t.Fatalf("bucket bounds changed between scrapes: %v vs %v", bb, ab)
		}
		if i > 0 && ab[i].count < ab[i-1].count {
			t.Errorf("bucket le=%v holds %v < %v of le=%v", ab[i].le, ab[i].count, ab[i-1].count, ab[i-1].le)
		}
		if d := ab[i].count - bb[i].count; d < 0 || (i > 0 && d < ab[i-1].count-bb[i-1].count) {
			t.Errorf("bucket le=%v moved by %v: cumulative deltas must not decrease", ab[i].le, d)
		}
	}
	if got := ab[len(ab)-1].count - bb[len(bb)-1].count; got != total {
		t.Errorf("+Inf bucket moved by %v, want %v commands", got, total)
	}
	if after[`throttlekit_command_duration_seconds_bucket{le="+Inf"}`] != after["throttlekit_command_duration_seconds_count"] {
		t.Errorf("+Inf bucket %v != _count %v", after[`throttlekit_command_duration_seconds_bucket{le="+Inf"}`], after["throttlekit_command_duration_seconds_count"])
	}
	if delta(before, after, "throttlekit_command_duration_seconds_sum") <= 0 {
		t.Errorf("latency _sum did not grow")
	}

	// Closing the clients brings the connection gauge back; the server
	// learns of a close asynchronously, so poll.
	for _, rdb := range rdbs {
		if err := rdb.Close(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, maddr, "closed go-redis connections leave the gauge", func(m map[string]float64) bool {
		return m["throttlekit_connections"] == 0
	})
}

// TestE2EMetricsProtocolError sends a malformed frame: the server answers a
// protocol error, closes the connection, and counts the error under
// kind="protocol", not under ERR, and the frame's bytes as input.
func TestE2EMetricsProtocolError(t *testing.T) {
	addr, maddr := testserver.FreeAddr(t), testserver.FreeAddr(t)
	startProgram(t, addr, maddr, "--loops", "1")
	before := waitFor(t, maddr, "probe connection counted and closed", func(m map[string]float64) bool {
		return m["throttlekit_connections_accepted_total"] >= 1 && m["throttlekit_connections"] == 0
	})
	c := dialRESP(t, addr)
	const frame = "*1\r\n$abc\r\n"
	if _, err := c.c.Write([]byte(frame)); err != nil {
		t.Fatal(err)
	}
	if got := c.line(t); !strings.HasPrefix(got, "-ERR Protocol error: invalid bulk length") {
		t.Fatalf("reply %q, want a protocol error", got)
	}
	if _, err := c.r.ReadByte(); err == nil {
		t.Fatal("connection still open after a protocol error")
	}
	after := waitFor(t, maddr, "connection closed", func(m map[string]float64) bool {
		return m["throttlekit_connections"] == 0
	})
	for _, w := range []struct {
		series string
		want   float64
	}{
		{`throttlekit_errors_total{kind="protocol"}`, 1},
		{`throttlekit_errors_total{kind="ERR"}`, 0},
		{"throttlekit_net_input_bytes_total", float64(len(frame))},
		{"throttlekit_net_output_bytes_total", float64(c.in)},
		{"throttlekit_command_duration_seconds_count", 0}, // no command was parsed
		{"throttlekit_connections_accepted_total", 1},
	} {
		if got := delta(before, after, w.series); got != w.want {
			t.Errorf("%s moved by %v, want %v", w.series, got, w.want)
		}
	}
}

// TestE2EReadiness follows /readyz and throttlekit_ready through the
// program's life: ready while it serves, and no longer answering "ready"
// once it has been told to stop. The metrics listener stops with the RESP
// listener, so after shutdown /readyz is refused (or, in the moment before
// the HTTP listener closes, 503): either way not 200.
func TestE2EReadiness(t *testing.T) {
	addr, maddr := testserver.FreeAddr(t), testserver.FreeAddr(t)
	stop := startProgram(t, addr, maddr, "--loops", "1")
	for _, path := range []string{"/healthz", "/readyz"} {
		code, body := httpGet(t, maddr, path)
		if want := map[string]string{"/healthz": "ok\n", "/readyz": "ready\n"}[path]; code != http.StatusOK || body != want {
			t.Errorf("GET %s = %d %q, want 200 %q", path, code, body, want)
		}
	}
	if got := scrape(t, maddr)["throttlekit_ready"]; got != 1 {
		t.Errorf("throttlekit_ready = %v while serving, want 1", got)
	}
	c := dialRESP(t, addr)
	if got := c.do(t, "PING"); got != "PONG" {
		t.Fatalf("PING = %q", got)
	}

	stop()
	if _, err := c.r.ReadByte(); err == nil {
		t.Error("client connection still open after shutdown")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := httpGet(t, maddr, "/readyz")
		if code != http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("/readyz still answers 200 10s after shutdown")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("RESP listener still accepts after shutdown")
	}
}
