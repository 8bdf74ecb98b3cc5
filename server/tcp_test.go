package server_test

// Transport limits and counters over real TCP: idle timeout, output buffer
// limit and Stats. Pipelining, atomicity, protocol errors, partial frames,
// maxclients and shutdown are in e2e_protocol_test.go.

import (
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/clock"
	"github.com/throttlekit/throttlekit-server/server"
)

// TestTCPIdleTimeout: the idle timeout follows Config.Clock, which stands
// still until the test moves it, so the connection cannot time out before
// its PING however slowly the test runs.
func TestTCPIdleTimeout(t *testing.T) {
	var mono atomic.Int64
	ts := startServer(t, func(c *server.Config) {
		c.Clock = clock.NewFrom(1_700_000_000_000_000_000, mono.Load).Now
		c.IdleTimeout = time.Hour
	})
	c := dialRaw(t, ts.Addr)
	if v := c.do(t, "PING"); v != "PONG" {
		t.Fatalf("PING = %#v", v)
	}
	mono.Add(int64(59 * time.Minute))
	if v := c.do(t, "PING"); v != "PONG" { // idle 59 minutes: still open, and active again
		t.Fatalf("PING after 59 idle minutes = %#v", v)
	}
	mono.Add(int64(2 * time.Hour))
	c.expectClosed(t) // the server looks at idle times every second; fails if still open after 10s
}

func TestTCPOutputBufferLimit(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.OutputBufferLimit = 256 << 10 })
	before := ts.Srv.Stats().ConnsAccepted // startServer's own probe
	c := dialRaw(t, ts.Addr)
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	payload := strings.Repeat("x", 60000)
	const n = 1000 // 60 MB of replies if the server kept them all
	go func() {
		one := encodeCommand("ECHO", payload)
		for i := 0; i < n; i++ {
			if _, err := io.WriteString(c.Conn, one); err != nil {
				return
			}
		}
	}()
	// Read nothing until the server has closed the connection: its
	// replies pile up unread past the limit.
	waitFor(t, "the server to close the client at the output-buffer limit", func() bool {
		st := ts.Srv.Stats()
		return st.ConnsAccepted > before && st.ConnsCurrent == 0
	})
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got, _ := io.Copy(io.Discard, c.r)
	if want := int64(n * (len(payload) + 9)); got >= want {
		t.Fatalf("read all %d bytes of replies: the client was not closed at the limit", got)
	}
}

func TestTCPStats(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr)
	c.send(t, encodeCommand("THROTTLE.CHECK", "s", "1", "1h")+encodeCommand("THROTTLE.CHECK", "s", "1", "1h")+encodeCommand("NOPE")+"PING\r\n")
	for i := 0; i < 4; i++ {
		c.read(t)
	}
	st := ts.Srv.Stats()
	if st.Commands["throttle.check"] != 2 || st.Commands["ping"] != 1 || st.Allowed != 1 || st.Denied != 1 || st.Errors["ERR"] != 1 {
		t.Fatalf("stats %+v", st)
	}
	if st.ConnsAccepted < 1 || st.BytesIn == 0 || st.BytesOut == 0 || st.LatencyCount != 4 {
		t.Fatalf("stats %+v", st)
	}
	var sum int64
	for _, v := range st.LatencyCounts {
		sum += v
	}
	if sum != st.LatencyCount {
		t.Fatalf("latency buckets sum %d != count %d", sum, st.LatencyCount)
	}
}
