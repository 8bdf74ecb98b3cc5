package server_test

// Shutdown keeps its promise: every command read before it is answered,
// and every reply reaches the client whole, however far behind the client
// is in reading them.

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/server"
)

// waitFor polls cond until it holds; the deadline only turns a hang into a
// failure.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestShutdownFlushesEveryReply(t *testing.T) {
	const n = 300_000
	ts := startServer(t, nil) // no output buffer limit
	c := dialRaw(t, ts.Addr)
	one := encodeCommand("THROTTLE.CHECK", "k", "1000000", "1h")
	sent := make(chan error, 1)
	go func() {
		_, err := io.WriteString(c.Conn, strings.Repeat(one, n))
		sent <- err
	}()
	if err := <-sent; err != nil {
		t.Fatalf("write the pipeline: %v", err)
	}
	// Every command has been read and answered into the server's buffers;
	// none of the replies has been read by the client.
	waitFor(t, "the server to run every command", func() bool {
		return ts.Srv.Stats().Commands["throttle.check"] == n
	})
	stopped := make(chan error, 1)
	go func() { stopped <- ts.stop(t) }()
	waitFor(t, "Shutdown to start", func() bool { return !ts.Srv.Ready() })

	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i := range n {
		v, err := readReply(c.r)
		if err != nil {
			t.Fatalf("reply %d of %d: %v", i+1, n, err)
		}
		d, err := toDecision(v, 2)
		if err != nil {
			t.Fatalf("reply %d: %v", i+1, err)
		}
		if d.Allowed != 1 || d.Limit != 1000000 {
			t.Fatalf("reply %d = %+v, want allowed with limit 1000000", i+1, d)
		}
	}
	if b, err := c.r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("after %d replies: read %q, %v; want EOF", n, b, err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
}

// TestShutdownDeadlineClosesLaggards: a client that never reads cannot hold
// the server past the deadline; Shutdown then reports it.
func TestShutdownDeadlineClosesLaggards(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr)
	payload := strings.Repeat("x", 64<<10)
	const n = 400 // 25 MiB of replies: more than the kernel buffers hold
	go func() { _, _ = io.WriteString(c.Conn, strings.Repeat(encodeCommand("ECHO", payload), n)) }()
	waitFor(t, "the server to run every command", func() bool { return ts.Srv.Stats().Commands["echo"] == n })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := ts.Srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the context's deadline error", err)
	}
	// The connection is closed: reading ends (EOF or a reset) before all
	// the replies arrive.
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, _ := io.Copy(io.Discard, c.r)
	if want := int64(n * (len(payload) + 11)); got >= want {
		t.Fatalf("read all %d bytes of replies after the deadline", got)
	}
}

// TestShutdownRefusesNewConnections: once Shutdown has begun, a new
// connection is closed without a reply.
func TestShutdownRefusesNewConnections(t *testing.T) {
	ts := startServer(t, func(c *server.Config) {})
	c := dialRaw(t, ts.Addr)
	// A client that has not read a large reply keeps the server draining.
	c.send(t, encodeCommand("ECHO", strings.Repeat("y", 32<<20)))
	waitFor(t, "the ECHO to run", func() bool { return ts.Srv.Stats().Commands["echo"] == 1 })
	stopped := make(chan error, 1)
	go func() { stopped <- ts.stop(t) }()
	waitFor(t, "Shutdown to start", func() bool { return !ts.Srv.Ready() })
	late := dialRaw(t, ts.Addr)
	late.expectClosed(t)
	if v := c.read(t); v != strings.Repeat("y", 32<<20) {
		t.Fatalf("the ECHO reply was cut: %d bytes", len(v.(string)))
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
}
