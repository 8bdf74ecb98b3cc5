package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

// TestRunReportsMaxMemory: the maxmemory setting reaches INFO memory.
func TestRunReportsMaxMemory(t *testing.T) {
	addr := testserver.FreeAddr(t)
	startProgram(t, addr, testserver.FreeAddr(t), "--maxmemory", "64mb")
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "*2\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	head, err := r.ReadString('\n')
	if err != nil || head[0] != '$' {
		t.Fatalf("INFO memory: %q, %v", head, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(head[1:]))
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	if want := "\r\nmaxmemory:67108864\r\nmaxmemory_human:64.00M\r\nmaxmemory_policy:allkeys-lru\r\n"; !strings.Contains(string(body), want) {
		t.Fatalf("INFO memory lacks %q:\n%s", want, body)
	}
}

// TestRunBadMetricsAddr: a metrics address that cannot be served stops the
// program at start-up with one line on stderr: a port in use (status 1,
// found when listening) or a malformed address (status 2, refused with the
// other settings).
func TestRunBadMetricsAddr(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tt := range []struct {
		metrics string
		status  int
		stderr  string
	}{
		{busy.Addr().String(), 1, "metrics listener"},
		{"nonsense", 2, "metrics-addr"},
	} {
		var stdout, stderr bytes.Buffer
		args := []string{"--addr", testserver.FreeAddr(t), "--metrics-addr", tt.metrics, "--log-level", "error"}
		got := run(args, func(string) string { return "" }, &stdout, &stderr)
		line := strings.TrimSpace(stderr.String())
		if got != tt.status || !strings.HasPrefix(line, "throttlekit-server: ") || !strings.Contains(line, tt.stderr) || strings.Contains(line, "\n") {
			t.Errorf("--metrics-addr %s: status %d, stderr %q; want %d and one line about %q", tt.metrics, got, stderr.String(), tt.status, tt.stderr)
		}
	}
}
