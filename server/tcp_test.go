package server_test

// Tests over real TCP against a server started in this process on a free
// loopback port. The end-to-end suites with client libraries live in the
// e2e_*_test.go files; these check the transport: pipelining, atomicity,
// limits, protocol errors and shutdown.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
)

// tcpServer starts a server on 127.0.0.1:0 and stops it at cleanup.
func tcpServer(t *testing.T, mutate func(*server.Config)) (*server.Server, string, <-chan error) {
	t.Helper()
	cfg := server.Config{Addr: "127.0.0.1:0", Loops: 2, Version: "test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mutate != nil {
		mutate(&cfg)
	}
	srv, err := server.New(cfg, shard.New(shard.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	deadline := time.Now().Add(10 * time.Second)
	for !srv.Ready() {
		select {
		case err := <-done:
			t.Fatalf("Serve: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("server not ready within 10s")
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return srv, srv.Addr().String(), done
}

type tcpConn struct {
	net.Conn
	r *bufio.Reader
}

func tcpDial(t *testing.T, addr string) *tcpConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return &tcpConn{Conn: c, r: bufio.NewReaderSize(c, 1<<16)}
}

func resp(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// line reads one CRLF-terminated line without the CRLF.
func (c *tcpConn) line(t *testing.T) string {
	t.Helper()
	s, err := c.r.ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v (got %q)", err, s)
	}
	return strings.TrimSuffix(s, "\r\n")
}

// value reads one RESP2 reply as text: arrays flattened with spaces.
func (c *tcpConn) value(t *testing.T) string {
	t.Helper()
	l := c.line(t)
	switch l[0] {
	case '$':
		n, _ := strconv.Atoi(l[1:])
		if n < 0 {
			return "(nil)"
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	case '*':
		n, _ := strconv.Atoi(l[1:])
		parts := make([]string, n)
		for i := range parts {
			parts[i] = c.value(t)
		}
		return strings.Join(parts, " ")
	case ':', '+':
		return l[1:]
	}
	return l
}

func (c *tcpConn) expectEOF(t *testing.T) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rest, err := io.ReadAll(c.r)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("connection not closed by the server (read %q)", rest)
		}
	}
}

func TestTCPPipeline10000(t *testing.T) {
	_, addr, _ := tcpServer(t, nil)
	c := tcpDial(t, addr)
	const n = 10000
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			b.WriteString(resp("ECHO", strconv.Itoa(i)))
		} else {
			b.WriteString(resp("THROTTLE.CHECK", "pipe", "5000", "1h"))
		}
	}
	go func() { _, _ = io.WriteString(c.Conn, b.String()) }() // one write
	allowed := 0
	for i := 0; i < n; i++ {
		v := c.value(t)
		if i%2 == 0 {
			if v != strconv.Itoa(i) {
				t.Fatalf("reply %d = %q, want %d (out of order)", i, v, i)
			}
			continue
		}
		f := strings.Fields(v)
		if len(f) != 5 {
			t.Fatalf("reply %d = %q, want a decision", i, v)
		}
		if f[0] == "1" {
			allowed++
		}
	}
	if allowed != n/2 {
		t.Fatalf("allowed %d of %d checks at limit 5000", allowed, n/2)
	}
}

func TestTCPAtomicity(t *testing.T) {
	_, addr, _ := tcpServer(t, nil)
	for _, algo := range []string{"gcra", "token", "fixed", "sliding"} {
		t.Run(algo, func(t *testing.T) {
			const conns, perConn = 50, 4 // 200 checks
			key := "atomic:" + algo
			var wg sync.WaitGroup
			var mu sync.Mutex
			allowed := 0
			cs := make([]*tcpConn, conns)
			for i := range cs {
				cs[i] = tcpDial(t, addr)
			}
			start := make(chan struct{})
			errs := make(chan string, conns)
			for i := 0; i < conns; i++ {
				wg.Add(1)
				go func(c *tcpConn) {
					defer wg.Done()
					<-start
					var b strings.Builder
					for j := 0; j < perConn; j++ {
						b.WriteString(resp("THROTTLE.CHECK", key, "50", "1h", "ALGO", algo))
					}
					if _, err := io.WriteString(c.Conn, b.String()); err != nil {
						errs <- err.Error()
						return
					}
					for j := 0; j < perConn; j++ {
						l, err := c.r.ReadString('\n')
						if err != nil || l != "*5\r\n" {
							errs <- fmt.Sprintf("reply %q %v", l, err)
							return
						}
						first, _ := c.r.ReadString('\n')
						for k := 0; k < 4; k++ {
							_, _ = c.r.ReadString('\n')
						}
						if first == ":1\r\n" {
							mu.Lock()
							allowed++
							mu.Unlock()
						}
					}
				}(cs[i])
			}
			close(start)
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Fatal(e)
			}
			if allowed != 50 {
				t.Fatalf("allowed %d of 200 concurrent checks at limit 50, want exactly 50", allowed)
			}
		})
	}
}

func TestTCPProtocolErrorClosesOnlyThatConnection(t *testing.T) {
	_, addr, _ := tcpServer(t, nil)
	good := tcpDial(t, addr)
	bad := tcpDial(t, addr)
	_, _ = io.WriteString(bad.Conn, resp("PING")+"*1\r\n$-7\r\n")
	if v := bad.value(t); v != "PONG" {
		t.Fatalf("before the violation: %q", v)
	}
	if l := bad.line(t); l != "-ERR Protocol error: invalid bulk length" {
		t.Fatalf("violation reply %q", l)
	}
	bad.expectEOF(t)
	_, _ = io.WriteString(good.Conn, resp("PING"))
	if v := good.value(t); v != "PONG" {
		t.Fatalf("other connection: %q", v)
	}
}

func TestTCPInlineAndPartialFrames(t *testing.T) {
	_, addr, _ := tcpServer(t, nil)
	c := tcpDial(t, addr)
	msg := "PING\r\n" + resp("ECHO", "split me") + "ECHO \"quoted arg\"\n"
	for i := 0; i < len(msg); i++ { // one byte per write
		if _, err := c.Write([]byte{msg[i]}); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"PONG", "split me", "quoted arg"} {
		if v := c.value(t); v != want {
			t.Fatalf("got %q want %q", v, want)
		}
	}
}

func TestTCPMaxClients(t *testing.T) {
	srv, addr, _ := tcpServer(t, func(c *server.Config) { c.MaxClients = 2 })
	a, b := tcpDial(t, addr), tcpDial(t, addr)
	for _, c := range []*tcpConn{a, b} {
		_, _ = io.WriteString(c.Conn, "PING\r\n")
		if v := c.value(t); v != "PONG" {
			t.Fatal(v)
		}
	}
	x := tcpDial(t, addr)
	if l := x.line(t); l != "-ERR max number of clients reached" {
		t.Fatalf("third client: %q", l)
	}
	x.expectEOF(t)
	if st := srv.Stats(); st.ConnsRejected != 1 || st.ConnsCurrent != 2 {
		t.Fatalf("stats: rejected %d current %d", st.ConnsRejected, st.ConnsCurrent)
	}
}

func TestTCPIdleTimeout(t *testing.T) {
	_, addr, _ := tcpServer(t, func(c *server.Config) { c.IdleTimeout = 100 * time.Millisecond })
	c := tcpDial(t, addr)
	_, _ = io.WriteString(c.Conn, "PING\r\n")
	if v := c.value(t); v != "PONG" {
		t.Fatal(v)
	}
	c.expectEOF(t) // closed by the server once idle; fails if still open after 10s
}

func TestTCPOutputBufferLimit(t *testing.T) {
	_, addr, _ := tcpServer(t, func(c *server.Config) { c.OutputBufferLimit = 256 << 10 })
	c := tcpDial(t, addr)
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	payload := strings.Repeat("x", 60000)
	const n = 1000 // 60 MB of replies if the server kept them all
	go func() {
		one := resp("ECHO", payload)
		for i := 0; i < n; i++ {
			if _, err := io.WriteString(c.Conn, one); err != nil {
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond) // let replies pile up unread (not an assertion)
	got, _ := io.Copy(io.Discard, c.r)
	if want := int64(n * (len(payload) + 9)); got >= want {
		t.Fatalf("read all %d bytes of replies: the client was not closed at the limit", got)
	}
}

func TestTCPShutdownAnswersWhatWasRead(t *testing.T) {
	srv, addr, done := tcpServer(t, nil)
	c := tcpDial(t, addr)
	var b strings.Builder
	for i := 0; i < 500; i++ {
		b.WriteString(resp("ECHO", strconv.Itoa(i)))
	}
	_, _ = io.WriteString(c.Conn, b.String())
	if v := c.value(t); v != "0" { // the batch is being answered
		t.Fatal(v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	for i := 1; i < 500; i++ {
		if v := c.value(t); v != strconv.Itoa(i) {
			t.Fatalf("reply %d after Shutdown = %q", i, v)
		}
	}
	c.expectEOF(t)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve = %v, want nil", err)
		}
	case <-ctx.Done():
		t.Fatal("Serve did not return")
	}
	if srv.Ready() {
		t.Fatal("Ready after Shutdown")
	}
	if _, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
}

func TestTCPStats(t *testing.T) {
	srv, addr, _ := tcpServer(t, nil)
	c := tcpDial(t, addr)
	_, _ = io.WriteString(c.Conn, resp("THROTTLE.CHECK", "s", "1", "1h")+resp("THROTTLE.CHECK", "s", "1", "1h")+resp("NOPE")+"PING\r\n")
	for i := 0; i < 4; i++ {
		c.value(t)
	}
	st := srv.Stats()
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
