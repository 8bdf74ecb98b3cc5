package server_test

// Transport limits and counters over real TCP: idle timeout, output buffer
// limit and Stats. Pipelining, atomicity, protocol errors, partial frames,
// maxclients and shutdown are in e2e_protocol_test.go.

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/server"
)

func TestTCPIdleTimeout(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.IdleTimeout = 100 * time.Millisecond })
	c := dialRaw(t, ts.Addr)
	if v := c.do(t, "PING"); v != "PONG" {
		t.Fatalf("PING = %#v", v)
	}
	c.expectClosed(t) // closed by the server once idle; fails if still open after 10s
}

func TestTCPOutputBufferLimit(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.OutputBufferLimit = 256 << 10 })
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
	time.Sleep(200 * time.Millisecond) // let replies pile up unread (not an assertion)
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
