package server_test

// Shared helpers of the end-to-end tests: an in-process server on a free
// loopback port, a minimal RESP reader for raw-socket tests, and the decoding
// of the five-field decision reply in RESP2 (array) and RESP3 (map) form.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
)

// testServer is one running server under test.
type testServer struct {
	Addr  string
	Srv   *server.Server
	Store *shard.Store // the store it serves
	done  chan error   // receives Serve's result once
}

// startServer starts a server with a fresh store and registers its shutdown
// with t.Cleanup. mutate, if not nil, adjusts the configuration first.
func startServer(t testing.TB, mutate func(*server.Config)) *testServer {
	t.Helper()
	cfg := server.Config{
		Addr:    "127.0.0.1:0", // the kernel picks the port: no race with other processes
		Loops:   2,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Version: "0.0.0-e2e",
	}
	if mutate != nil {
		mutate(&cfg)
	}
	store := shard.New(shard.Config{})
	srv, err := server.New(cfg, store)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	ts := &testServer{Addr: cfg.Addr, Srv: srv, Store: store, done: make(chan error, 1)}
	go func() { ts.done <- srv.Serve() }()
	stopped := false
	t.Cleanup(func() {
		if stopped {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		select {
		case err := <-ts.done:
			if err != nil {
				t.Errorf("Serve returned %v after Shutdown, want nil", err)
			}
		case <-ctx.Done():
			t.Errorf("Serve did not return within 15s of Shutdown")
		}
	})
	// Wait until the server accepts connections (a deadline for failure only).
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case err := <-ts.done:
			stopped = true
			t.Fatalf("Serve returned before the server was ready: %v", err)
		default:
		}
		if srv.Ready() {
			if a := srv.Addr(); a != nil {
				ts.Addr = a.String()
			}
			if c, err := net.DialTimeout("tcp", ts.Addr, time.Second); err == nil {
				_ = c.Close()
				// The probe is a client until the server has seen it
				// close: wait for that, so that a test at a client limit
				// (maxclients) is not refused because of the probe.
				for srv.Stats().ConnsCurrent != 0 {
					if time.Now().After(deadline) {
						t.Fatalf("the readiness probe still counted as a client after 15s")
					}
					time.Sleep(time.Millisecond)
				}
				return ts
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server on %s not ready within 15s", ts.Addr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stop shuts the server down now and returns Serve's result; the cleanup
// registered by startServer then finds it stopped and only re-checks.
func (ts *testServer) stop(t testing.TB) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := ts.Srv.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	select {
	case err := <-ts.done:
		ts.done <- err // keep it for the cleanup
		return err
	case <-ctx.Done():
		t.Fatalf("Serve did not return within 15s of Shutdown")
	}
	return nil
}

// ---------------------------------------------------------------------------
// A minimal RESP2/RESP3 reader for raw-socket tests.

// respErr is an error reply read from the wire (text without the leading '-').
type respErr string

func (e respErr) Error() string { return string(e) }

// respMap keeps the pairs of a RESP3 map in wire order.
type respMap [][2]any

// rawConn is a TCP connection with a buffered RESP reader.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{Conn: c, r: bufio.NewReaderSize(c, 64<<10)}
}

// send writes s in one call.
func (c *rawConn) send(t testing.TB, s string) {
	t.Helper()
	_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(c.Conn, s); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// read reads one reply; an error reply is returned as a respErr value.
func (c *rawConn) read(t testing.TB) any {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	v, err := readReply(c.r)
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	return v
}

// do sends one command as a multibulk and reads its reply.
func (c *rawConn) do(t testing.TB, args ...string) any {
	t.Helper()
	c.send(t, encodeCommand(args...))
	return c.read(t)
}

// expectClosed reads until the server closes the connection; anything but
// EOF (or a reset) within the deadline is a failure.
func (c *rawConn) expectClosed(t testing.TB) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 512)
	n, err := c.r.Read(buf)
	if err == nil {
		t.Fatalf("connection still open: read %q, want EOF", buf[:n])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection not closed by the server within 10s")
	}
}

// encodeCommand returns args as a RESP multibulk.
func encodeCommand(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// readReply parses one RESP2 or RESP3 value. Integers are int64, simple and
// bulk strings are string, nulls are nil, arrays/sets/pushes are []any,
// maps are respMap, errors are respErr.
func readReply(r *bufio.Reader) (any, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, fmt.Errorf("malformed line %q", line)
	}
	typ, body := line[0], line[1:len(line)-2]
	switch typ {
	case '+':
		return body, nil
	case '-', '!':
		if typ == '!' {
			s, err := readBulkBody(r, body)
			return respErr(s), err
		}
		return respErr(body), nil
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '_':
		return nil, nil
	case '#':
		return body == "t", nil
	case ',':
		return strconv.ParseFloat(body, 64)
	case '(':
		return body, nil
	case '$', '=':
		if body == "-1" {
			return nil, nil
		}
		s, err := readBulkBody(r, body)
		if typ == '=' && len(s) >= 4 {
			s = s[4:] // drop the "txt:" format prefix of a verbatim string
		}
		return s, err
	case '*', '~', '>':
		if body == "-1" {
			return nil, nil
		}
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("bad array length %q", body)
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = readReply(r); err != nil {
				return nil, err
			}
		}
		return out, nil
	case '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil {
			return nil, fmt.Errorf("bad map length %q", body)
		}
		out := make(respMap, n)
		for i := range out {
			if out[i][0], err = readReply(r); err != nil {
				return nil, err
			}
			if out[i][1], err = readReply(r); err != nil {
				return nil, err
			}
		}
		if typ == '|' { // attribute: skip it, return the value it annotates
			return readReply(r)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown reply type %q in %q", typ, line)
}

func readBulkBody(r *bufio.Reader, lenText string) (string, error) {
	n, err := strconv.Atoi(lenText)
	if err != nil || n < 0 {
		return "", fmt.Errorf("bad bulk length %q", lenText)
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	if buf[n] != '\r' || buf[n+1] != '\n' {
		return "", fmt.Errorf("bulk not terminated by CRLF")
	}
	return string(buf[:n]), nil
}

// ---------------------------------------------------------------------------
// Decisions.

// decision is the five-field reply of THROTTLE.CHECK/PEEK/LEASE.
type decision struct {
	Allowed, Limit, Remaining, ResetAt, RetryAfter int64
}

// The RESP3 field names are those of issue 4: allowed (or granted for a lease),
// limit, remaining, reset_at_ms, retry_after_ms.
var decisionKeys = [5]string{"allowed", "limit", "remaining", "reset_at_ms", "retry_after_ms"}

// toDecision decodes v as returned by go-redis (RESP2: []any; RESP3:
// map[any]any) or by readReply (respMap). In RESP3 the first key must be
// firstKey ("allowed"; a lease may also name it "granted").
func toDecision(v any, proto int, firstKeys ...string) (decision, error) {
	if len(firstKeys) == 0 {
		firstKeys = []string{"allowed"}
	}
	var f [5]int64
	if proto == 2 {
		arr, ok := v.([]any)
		if !ok || len(arr) != 5 {
			return decision{}, fmt.Errorf("RESP2 reply %#v: want an array of 5 integers", v)
		}
		for i, e := range arr {
			n, ok := e.(int64)
			if !ok {
				return decision{}, fmt.Errorf("RESP2 reply %#v: element %d is %T, want integer", v, i, e)
			}
			f[i] = n
		}
		return decision{f[0], f[1], f[2], f[3], f[4]}, nil
	}
	m := map[string]any{}
	switch mv := v.(type) {
	case map[any]any:
		for k, e := range mv {
			ks, ok := k.(string)
			if !ok {
				return decision{}, fmt.Errorf("RESP3 reply %#v: key %#v not a string", v, k)
			}
			m[ks] = e
		}
	case map[string]any:
		m = mv
	case respMap:
		for _, kv := range mv {
			ks, ok := kv[0].(string)
			if !ok {
				return decision{}, fmt.Errorf("RESP3 reply %#v: key %#v not a string", v, kv[0])
			}
			m[ks] = kv[1]
		}
	default:
		return decision{}, fmt.Errorf("RESP3 reply %#v (%T): want a map", v, v)
	}
	if len(m) != 5 {
		return decision{}, fmt.Errorf("RESP3 reply %#v: want 5 fields", v)
	}
	keys := decisionKeys
	for _, fk := range firstKeys {
		if _, ok := m[fk]; ok {
			keys[0] = fk
		}
	}
	for i, k := range keys {
		e, ok := m[k]
		if !ok {
			return decision{}, fmt.Errorf("RESP3 reply %#v: missing key %q", v, k)
		}
		n, ok := e.(int64)
		if !ok {
			return decision{}, fmt.Errorf("RESP3 reply %#v: %q is %T, want integer", v, k, e)
		}
		f[i] = n
	}
	return decision{f[0], f[1], f[2], f[3], f[4]}, nil
}

// between fails t unless lo <= got <= hi.
func between(t testing.TB, what string, got, lo, hi int64) {
	t.Helper()
	if got < lo || got > hi {
		t.Errorf("%s = %d, want in [%d, %d]", what, got, lo, hi)
	}
}

// nowMs is the wall clock in epoch milliseconds (the server's clock source).
func nowMs() int64 { return time.Now().UnixMilli() }
