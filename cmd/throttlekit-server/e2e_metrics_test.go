package main

// End-to-end test of the operations surface: the whole program (flags,
// store, server, metrics listener) runs in this process; commands go over
// raw TCP so that every byte and every command is known, and /metrics is
// scraped before and after to check that each counter moved by exactly what
// the commands caused.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/lockedbuf"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

// startProgram runs the program with args until the test ends and returns
// once both listeners answer. stop shuts the program down as SIGTERM would
// and waits for it, failing the test unless it exits with status 0; it runs
// at the end of the test if the test did not call it.
func startProgram(t *testing.T, addr, metricsAddr string, args ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var stderr lockedbuf.Buffer
	all := append([]string{"--addr", addr, "--metrics-addr", metricsAddr, "--log-level", "error"}, args...)
	go func() { done <- runContext(ctx, all, func(string) string { return "" }, io.Discard, &stderr) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case code := <-done:
				if code != 0 {
					t.Errorf("exit status %d after shutdown, want 0; stderr: %s", code, stderr.String())
				}
			case <-time.After(30 * time.Second):
				t.Errorf("program did not stop within 30s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case code := <-done:
			done <- code // for stop, which reports it too
			t.Fatalf("program exited with %d before it was up; stderr: %s", code, stderr.String())
		default:
		}
		if code, _ := httpGet(t, metricsAddr, "/readyz"); code == http.StatusOK {
			if c, err := net.Dial("tcp", addr); err == nil {
				c.Close()
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("program not ready within 15s; stderr: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// httpGet returns the status and body of GET http://addr+path (0 if the
// request failed).
func httpGet(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// scrape parses /metrics into series ("name{labels}") -> value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	code, body := httpGet(t, addr, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d", code)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("bad metrics line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("bad value in %q: %v", line, err)
		}
		if _, dup := m[line[:i]]; dup {
			t.Fatalf("series %s written twice in one scrape", line[:i])
		}
		m[line[:i]] = v
	}
	return m
}

// respClient is a raw RESP connection that counts the bytes it moves.
type respClient struct {
	c        net.Conn
	r        *bufio.Reader
	in, out  int64 // bytes read from / written to the server
	commands int64
}

func dialRESP(t *testing.T, addr string) *respClient {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return &respClient{c: c, r: bufio.NewReader(c)}
}

// do sends one command and returns its reply as text (arrays joined by
// spaces, errors with their leading '-').
func (rc *respClient) do(t *testing.T, args ...string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	n, err := io.WriteString(rc.c, b.String())
	if err != nil {
		t.Fatalf("write: %v", err)
	}
	rc.out += int64(n)
	rc.commands++
	return rc.reply(t)
}

func (rc *respClient) line(t *testing.T) string {
	t.Helper()
	s, err := rc.r.ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	rc.in += int64(len(s))
	return strings.TrimSuffix(s, "\r\n")
}

func (rc *respClient) reply(t *testing.T) string {
	t.Helper()
	l := rc.line(t)
	switch l[0] {
	case '*':
		n, _ := strconv.Atoi(l[1:])
		parts := make([]string, n)
		for i := range parts {
			parts[i] = rc.reply(t)
		}
		return strings.Join(parts, " ")
	case ':', '+':
		return l[1:]
	case '$':
		return rc.line(t)
	}
	return l
}

// delta is after - before for one series (a missing series counts as 0).
func delta(before, after map[string]float64, series string) float64 {
	return after[series] - before[series]
}

// waitFor scrapes until cond holds or 10 s pass; the counters of a loop are
// published before its replies are written, but store counters such as
// expirations move with the background sweep.
func waitFor(t *testing.T, addr, what string, cond func(m map[string]float64) bool) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := scrape(t, addr)
		if cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached within 10s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestE2EMetrics(t *testing.T) {
	addr, maddr := testserver.FreeAddr(t), testserver.FreeAddr(t)
	const maxKeys, maxClients = 40, 3
	startProgram(t, addr, maddr, "--shards", "1", "--maxkeys", strconv.Itoa(maxKeys),
		"--maxclients", strconv.Itoa(maxClients), "--sweep-interval", "5ms", "--loops", "2")

	if code, body := httpGet(t, maddr, "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := httpGet(t, maddr, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz: %d %q", code, body)
	}

	// startProgram's probe connection is counted asynchronously: start from
	// a state where it has been accepted and closed.
	before := waitFor(t, maddr, "probe connection counted and closed", func(m map[string]float64) bool {
		return m["throttlekit_connections_accepted_total"] >= 1 && m["throttlekit_connections"] == 0
	})
	for _, s := range []string{"go_goroutines", "process_resident_memory_bytes", "throttlekit_ready", `throttlekit_build_info{version="dev"}`} {
		if _, ok := before[s]; !ok {
			t.Errorf("/metrics lacks %s", s)
		}
	}
	if before["throttlekit_ready"] != 1 {
		t.Errorf("throttlekit_ready = %v, want 1", before["throttlekit_ready"])
	}

	c := dialRESP(t, addr)
	// Decisions: limit 3 per hour, 5 checks -> 3 allowed, 2 denied.
	var allowed int
	for i := 0; i < 5; i++ {
		if strings.HasPrefix(c.do(t, "THROTTLE.CHECK", "m:a", "3", "1h"), "1 ") {
			allowed++
		}
	}
	if allowed != 3 {
		t.Fatalf("%d of 5 checks allowed at limit 3", allowed)
	}
	for i := 0; i < 2; i++ {
		if got := c.do(t, "PING"); got != "PONG" {
			t.Fatalf("PING = %q", got)
		}
	}
	// Leases: 4 granted, 1 returned.
	lease := strings.Fields(c.do(t, "THROTTLE.LEASE", "m:l", "10", "1h", "BATCH", "4"))
	if len(lease) != 5 || lease[0] != "4" {
		t.Fatalf("LEASE = %v", lease)
	}
	if got := c.do(t, "THROTTLE.RETURN", "m:l", "1", lease[3]); got != "1" {
		t.Fatalf("RETURN = %q", got)
	}
	// Errors by kind: two ERR (unknown command, wrong arity), one WRONGTYPE,
	// one Cell.
	for _, tc := range []struct {
		args   []string
		prefix string
	}{
		{[]string{"NOPE", "x"}, "-ERR unknown command"},
		{[]string{"THROTTLE.CHECK", "m:a", "3"}, "-ERR wrong number of arguments"},
		{[]string{"THROTTLE.CHECK", "m:a", "3", "1h", "ALGO", "fixed"}, "-WRONGTYPE"},
		{[]string{"CL.THROTTLE", "m:z", "15", "0", "60"}, "-Cell error: Store error: Zero rates"},
	} {
		if got := c.do(t, tc.args...); !strings.HasPrefix(got, tc.prefix) {
			t.Fatalf("%v = %q, want prefix %q", tc.args, got, tc.prefix)
		}
	}

	mid := scrape(t, maddr)
	for _, w := range []struct {
		series string
		want   float64
	}{
		{`throttlekit_commands_total{cmd="throttle.check"}`, 7}, // 5 + wrong arity + WRONGTYPE
		{`throttlekit_commands_total{cmd="ping"}`, 2},
		{`throttlekit_commands_total{cmd="throttle.lease"}`, 1},
		{`throttlekit_commands_total{cmd="throttle.return"}`, 1},
		{`throttlekit_commands_total{cmd="cl.throttle"}`, 1},
		{`throttlekit_decisions_total{result="allowed"}`, 3},
		{`throttlekit_decisions_total{result="denied"}`, 2},
		{`throttlekit_errors_total{kind="ERR"}`, 2},
		{`throttlekit_errors_total{kind="WRONGTYPE"}`, 1},
		{`throttlekit_errors_total{kind="Cell"}`, 1},
		{"throttlekit_lease_credits_granted_total", 4},
		{"throttlekit_lease_credits_returned_total", 1},
		{"throttlekit_command_duration_seconds_count", float64(c.commands)}, // unknown commands included
		{`throttlekit_command_duration_seconds_bucket{le="+Inf"}`, float64(c.commands)},
		{"throttlekit_net_input_bytes_total", float64(c.out)},
		{"throttlekit_net_output_bytes_total", float64(c.in)},
		{"throttlekit_connections_accepted_total", 1},
		{"throttlekit_connections", 1},
		{"throttlekit_keys", 2},                  // m:a and m:l; rejected commands create nothing
		{"throttlekit_metrics_scrapes_total", 1}, // the scrape of "before"
	} {
		if got := delta(before, mid, w.series); got != w.want {
			t.Errorf("%s moved by %v, want %v", w.series, got, w.want)
		}
	}
	if mid["throttlekit_command_duration_seconds_sum"] <= before["throttlekit_command_duration_seconds_sum"] {
		t.Errorf("latency sum did not grow")
	}

	// Connections: maxclients 3 open, a fourth is refused.
	c2, c3 := dialRESP(t, addr), dialRESP(t, addr)
	c2.do(t, "PING")
	c3.do(t, "PING")
	c4 := dialRESP(t, addr)
	if got := c4.line(t); got != "-ERR max number of clients reached" {
		t.Fatalf("fourth client got %q", got)
	}
	conns := waitFor(t, maddr, "rejected connection counted", func(m map[string]float64) bool {
		return delta(before, m, "throttlekit_connections_rejected_total") == 1
	})
	if got := conns["throttlekit_connections"]; got != maxClients {
		t.Errorf("throttlekit_connections = %v with %d clients open", got, maxClients)
	}
	if got := delta(before, conns, "throttlekit_connections_accepted_total"); got != maxClients {
		t.Errorf("accepted moved by %v, want %d", got, maxClients)
	}

	// Expirations: 5 keys whose budget is full again after 50 ms.
	for i := 0; i < 5; i++ {
		c.do(t, "THROTTLE.CHECK", "m:e"+strconv.Itoa(i), "1", "50ms")
	}
	exp := waitFor(t, maddr, "5 keys expired", func(m map[string]float64) bool {
		return delta(before, m, "throttlekit_keys_expired_total") >= 5
	})
	if got := delta(before, exp, "throttlekit_keys_expired_total"); got != 5 {
		t.Errorf("expired moved by %v, want 5", got)
	}
	if got := exp["throttlekit_keys"]; got != 2 {
		t.Errorf("throttlekit_keys = %v after expiry, want 2", got)
	}

	// Evictions: 2*maxkeys long-lived keys into a store bounded at maxkeys.
	const flood = 2 * maxKeys
	for i := 0; i < flood; i++ {
		c.do(t, "THROTTLE.CHECK", "m:f"+strconv.Itoa(i), "1", "1h")
	}
	ev := scrape(t, maddr)
	keys := ev["throttlekit_keys"]
	if keys > maxKeys {
		t.Errorf("throttlekit_keys = %v > maxkeys %d", keys, maxKeys)
	}
	// Every key created either is still there or was evicted.
	if got, want := delta(exp, ev, "throttlekit_keys_evicted_total"), 2+flood-keys; got != want {
		t.Errorf("evicted moved by %v, want %v (2 + %d created - %v held)", got, want, flood, keys)
	}
	if delta(before, ev, "throttlekit_keys_evicted_total") < flood-maxKeys {
		t.Errorf("evicted only %v keys for %d created over maxkeys %d", delta(before, ev, "throttlekit_keys_evicted_total"), flood, maxKeys)
	}
}
