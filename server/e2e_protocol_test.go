package server_test

// End-to-end tests on raw TCP: protocol violations, frames split across
// reads, deep pipelines, atomicity under concurrent connections and
// graceful shutdown.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/server"
)

// TestE2EProtocolErrors: each violation gets "-ERR Protocol error: ..." and
// the connection is closed, while a client connected before it is unaffected.
func TestE2EProtocolErrors(t *testing.T) {
	ts := startServer(t, func(cfg *server.Config) {
		cfg.ProtoMaxBulkLen = 1024
		cfg.MaxArgs = 16
	})
	bystander := dialRaw(t, ts.Addr)
	if v := bystander.do(t, "PING"); v != "PONG" {
		t.Fatalf("bystander PING = %#v", v)
	}
	// The bystander has a partial command pending while the others fail.
	bystander.send(t, "*2\r\n$4\r\nECHO\r\n$5\r\nhel")

	for _, tc := range []struct {
		name, input, reason string
	}{
		{"multibulk length not a number", "*abc\r\n", "invalid multibulk length"},
		{"multibulk length too big", "*99999999999999999999\r\n", "invalid multibulk length"},
		{"bulk length not a number", "*2\r\n$4\r\nECHO\r\n$x\r\n", "invalid bulk length"},
		{"negative bulk length", "*1\r\n$-5\r\n", "invalid bulk length"},
		{"bulk over proto-max-bulk-len", "*2\r\n$4\r\nECHO\r\n$2048\r\n", "invalid bulk length"},
		{"bulk length overflow", "*1\r\n$99999999999999999999\r\n", "invalid bulk length"},
		{"more args than max-args", "*17\r\n", ""},
		{"expected $", "*1\r\nPING\r\n", ""},
		{"unbalanced quotes inline", "ECHO \"abc\r\n", "unbalanced quotes in request"},
		{"unbalanced single quote inline", "ECHO 'abc\r\n", "unbalanced quotes in request"},
		{"after a valid command", "PING\r\n*abc\r\n", "invalid multibulk length"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, ts.Addr)
			c.send(t, tc.input)
			v := c.read(t)
			if strings.HasPrefix(tc.input, "PING\r\n") {
				if v != "PONG" {
					t.Fatalf("reply to the valid PING = %#v, want PONG", v)
				}
				v = c.read(t)
			}
			e, ok := v.(respErr)
			if !ok || !strings.HasPrefix(string(e), "ERR Protocol error") {
				t.Fatalf("reply %#v, want -ERR Protocol error", v)
			}
			if tc.reason != "" && string(e) != "ERR Protocol error: "+tc.reason {
				t.Errorf("reply %q, want %q", e, "ERR Protocol error: "+tc.reason)
			}
			c.expectClosed(t)
			if v := dialRaw(t, ts.Addr).do(t, "PING"); v != "PONG" {
				t.Errorf("new client after the violation: PING = %#v", v)
			}
		})
	}
	// The bystander finishes its command and carries on.
	bystander.send(t, "lo\r\n")
	if v := bystander.read(t); v != "hello" {
		t.Errorf("bystander ECHO = %#v, want hello", v)
	}
	if v := bystander.do(t, "PING"); v != "PONG" {
		t.Errorf("bystander PING = %#v, want PONG", v)
	}
	// Limits at their bounds are accepted.
	c := dialRaw(t, ts.Addr)
	max := strings.Repeat("x", 1024)
	if v := c.do(t, "ECHO", max); v != max {
		t.Errorf("ECHO of a 1024-byte bulk (= limit): %d bytes back, want 1024", len(fmt.Sprint(v)))
	}
	args := []string{"THROTTLE.RESET"}
	for i := 0; i < 15; i++ {
		args = append(args, "k"+strconv.Itoa(i))
	}
	if v := c.do(t, args...); v != int64(0) {
		t.Errorf("THROTTLE.RESET with 16 args (= max-args): %#v, want 0", v)
	}
}

// TestE2EPartialFrames: commands split byte by byte, mixing multibulk and
// inline forms, give the same replies as when sent whole.
func TestE2EPartialFrames(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr)
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	input := encodeCommand("ECHO", "split\r\nacross") +
		"PING\r\n" +
		"ECHO \"quoted arg\" \r\n" +
		encodeCommand("THROTTLE.CHECK", "part", "3", "1h") +
		encodeCommand("THROTTLE.CHECK", "part", "3", "1h") +
		"THROTTLE.PEEK part 3 1h\r\n" +
		encodeCommand("CL.THROTTLE", "partcell", "15", "30", "60", "1") +
		"ECHO 'single'\n" // inline with a bare LF, as redis accepts
	for i := 0; i < len(input); i++ {
		c.send(t, input[i:i+1])
		if i%16 == 0 {
			time.Sleep(time.Millisecond) // let the server see the fragments
		}
	}
	want := []string{"split\r\nacross", "PONG", "quoted arg"}
	for i, w := range want {
		if v := c.read(t); v != w {
			t.Errorf("reply %d = %#v, want %q", i, v, w)
		}
	}
	for i, remaining := range []int64{2, 1, 1} {
		d, err := toDecision(c.read(t), 2)
		if err != nil {
			t.Fatalf("decision %d: %v", i, err)
		}
		wantAllowed := int64(1)
		if d.Allowed != wantAllowed || d.Limit != 3 || d.Remaining != remaining {
			t.Errorf("decision %d = %+v, want [1 3 %d _ 0]", i, d, remaining)
		}
	}
	cell, ok := c.read(t).([]any)
	if !ok || fmt.Sprint(cell) != "[0 16 15 -1 2]" {
		t.Errorf("CL.THROTTLE split byte by byte = %v, want [0 16 15 -1 2]", cell)
	}
	if v := c.read(t); v != "single" {
		t.Errorf("inline ECHO 'single' = %#v", v)
	}
}

// TestE2EPipeline10k: 10,000 commands in one write give 10,000 replies in
// order: ECHO i interleaved with checks whose remaining counts down.
func TestE2EPipeline10k(t *testing.T) {
	ts := startServer(t, nil)
	c := dialRaw(t, ts.Addr)
	const n = 10_000
	const checks = n / 2
	var b strings.Builder
	for i := 0; i < n/2; i++ {
		b.WriteString(encodeCommand("ECHO", strconv.Itoa(i)))
		b.WriteString(encodeCommand("THROTTLE.CHECK", "pipe", strconv.Itoa(checks-1), "1h"))
	}
	payload := b.String()

	type result struct {
		got int
		err error
	}
	done := make(chan result, 1)
	go func() { // read while writing: replies may fill the socket buffers
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		for i := 0; i < n; i++ {
			v, err := readReply(c.r)
			if err != nil {
				done <- result{i, fmt.Errorf("reply %d: %w", i, err)}
				return
			}
			if i%2 == 0 {
				if v != strconv.Itoa(i/2) {
					done <- result{i, fmt.Errorf("reply %d = %#v, want %q", i, v, strconv.Itoa(i/2))}
					return
				}
				continue
			}
			d, err := toDecision(v, 2)
			if err != nil {
				done <- result{i, fmt.Errorf("reply %d: %w", i, err)}
				return
			}
			k := int64(i / 2) // checks before this one
			want := decision{Allowed: 1, Limit: checks - 1, Remaining: checks - 2 - k}
			if k >= checks-1 {
				want = decision{Allowed: 0, Limit: checks - 1}
			}
			if d.Allowed != want.Allowed || d.Limit != want.Limit || d.Remaining != want.Remaining {
				done <- result{i, fmt.Errorf("check %d = %+v, want allowed %d limit %d remaining %d", k, d, want.Allowed, want.Limit, want.Remaining)}
				return
			}
		}
		done <- result{n, nil}
	}()
	_ = c.SetWriteDeadline(time.Now().Add(60 * time.Second))
	if w, err := io.WriteString(c.Conn, payload); err != nil || w != len(payload) {
		t.Fatalf("one write of %d bytes: wrote %d, %v", len(payload), w, err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.got != n {
		t.Fatalf("got %d replies, want %d", r.got, n)
	}
	// Nothing more than the 10,000 replies arrives.
	if v := c.do(t, "PING"); v != "PONG" {
		t.Errorf("PING after the pipeline = %#v", v)
	}
}

// TestE2EAtomicity: 200 concurrent checks at limit 50 from 50 connections
// admit exactly 50, for every algorithm, CL.THROTTLE and leases.
func TestE2EAtomicity(t *testing.T) {
	ts := startServer(t, nil)
	const conns, perConn, limit = 50, 4, 50
	cases := []struct {
		name string
		cmd  []string
		// admitted returns the units admitted by one reply.
		admitted func(v any) (int64, error)
	}{
		{"gcra", []string{"THROTTLE.CHECK", "atom:gcra", "50", "1h"}, allowedField},
		{"token", []string{"THROTTLE.CHECK", "atom:token", "50", "1h", "ALGO", "token"}, allowedField},
		{"fixed", []string{"THROTTLE.CHECK", "atom:fixed", "50", "1d", "ALGO", "fixed"}, allowedField},
		{"sliding", []string{"THROTTLE.CHECK", "atom:sliding", "50", "1d", "ALGO", "sliding"}, allowedField},
		{"cl.throttle", []string{"CL.THROTTLE", "atom:cell", "49", "50", "3600"}, func(v any) (int64, error) {
			arr, ok := v.([]any)
			if !ok || len(arr) != 5 {
				return 0, fmt.Errorf("CL.THROTTLE reply %#v", v)
			}
			if arr[0] == int64(0) {
				return 1, nil
			}
			return 0, nil
		}},
		{"lease", []string{"THROTTLE.LEASE", "atom:lease", "50", "1d", "BATCH", "1"}, allowedField},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cs := make([]*rawConn, conns)
			for i := range cs {
				cs[i] = dialRaw(t, ts.Addr)
			}
			var (
				wg    sync.WaitGroup
				start = make(chan struct{})
				mu    sync.Mutex
				total int64
				errs  []error
			)
			for _, c := range cs {
				wg.Add(1)
				go func(c *rawConn) {
					defer wg.Done()
					<-start
					for j := 0; j < perConn; j++ {
						_ = c.SetDeadline(time.Now().Add(30 * time.Second))
						if _, err := io.WriteString(c.Conn, encodeCommand(tc.cmd...)); err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							return
						}
						v, err := readReply(c.r)
						var n int64
						if err == nil {
							n, err = tc.admitted(v)
						}
						mu.Lock()
						total += n
						if err != nil {
							errs = append(errs, err)
						}
						mu.Unlock()
						if err != nil {
							return
						}
					}
				}(c)
			}
			close(start)
			wg.Wait()
			for _, err := range errs {
				t.Error(err)
			}
			if total != limit {
				t.Errorf("%d concurrent requests from %d connections admitted %d, want exactly %d", conns*perConn, conns, total, limit)
			}
		})
	}
}

func allowedField(v any) (int64, error) {
	d, err := toDecision(v, 2, "allowed", "granted")
	if err != nil {
		return 0, err
	}
	return d.Allowed, nil
}

// TestE2EGracefulShutdown: commands already read are answered in full and
// in order before the connection closes; Serve returns nil; idle clients
// see EOF; new connections are refused.
func TestE2EGracefulShutdown(t *testing.T) {
	ts := startServer(t, nil)
	idle := dialRaw(t, ts.Addr)
	if v := idle.do(t, "PING"); v != "PONG" {
		t.Fatalf("idle PING = %#v", v)
	}
	busy := dialRaw(t, ts.Addr)
	const n = 20_000
	var b strings.Builder
	for i := 0; i < n; i++ {
		b.WriteString(encodeCommand("ECHO", strconv.Itoa(i)))
	}
	payload := b.String()
	firstByte := make(chan struct{})
	got := make(chan int, 1)
	readErr := make(chan error, 1)
	go func() {
		_ = busy.SetReadDeadline(time.Now().Add(60 * time.Second))
		if _, err := busy.r.Peek(1); err != nil {
			close(firstByte)
			got <- 0
			readErr <- fmt.Errorf("no reply at all: %w", err)
			return
		}
		close(firstByte)
		for i := 0; ; i++ {
			v, err := readReply(busy.r)
			if err != nil {
				got <- i
				if err == io.EOF {
					readErr <- nil
				} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
					readErr <- fmt.Errorf("after %d replies: no EOF within 60s", i)
				} else if strings.Contains(err.Error(), "reset") {
					readErr <- nil
				} else {
					// A reply cut in the middle is a failure.
					readErr <- fmt.Errorf("after %d replies: %w", i, err)
				}
				return
			}
			if v != strconv.Itoa(i) {
				got <- i
				readErr <- fmt.Errorf("reply %d = %#v, want %q", i, v, strconv.Itoa(i))
				return
			}
		}
	}()
	go func() { _, _ = io.WriteString(busy.Conn, payload) }() // may fail once the server closes
	<-firstByte
	if err := ts.stop(t); err != nil {
		t.Errorf("Serve after Shutdown = %v, want nil", err)
	}
	replies := <-got
	if err := <-readErr; err != nil {
		t.Error(err)
	}
	if replies < 1 {
		t.Errorf("busy client got %d replies, want at least the first batch", replies)
	}
	t.Logf("busy client got %d of %d replies before the close", replies, n)
	// Every command the server read in full was answered: count the whole
	// commands inside the bytes it read (less the idle client's PING).
	read := ts.Srv.Stats().BytesIn - int64(len(encodeCommand("PING")))
	whole := 0
	for i := 0; i < n; i++ {
		read -= int64(len(encodeCommand("ECHO", strconv.Itoa(i))))
		if read < 0 {
			break
		}
		whole++
	}
	if replies != whole {
		t.Errorf("server read %d whole commands (Stats.BytesIn) but answered %d", whole, replies)
	}
	idle.expectClosed(t)
	if c, err := net.DialTimeout("tcp", ts.Addr, time.Second); err == nil {
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.WriteString(c, "PING\r\n")
		line, rerr := bufio.NewReader(c).ReadString('\n')
		_ = c.Close()
		if rerr == nil {
			t.Errorf("server answered %q after Shutdown, want the connection refused", line)
		}
	}
	if ts.Srv.Ready() {
		t.Errorf("Ready() = true after Shutdown")
	}
}

// TestE2EMaxClients: connections beyond MaxClients are told so and closed;
// the ones already served carry on, and a freed slot is usable again.
func TestE2EMaxClients(t *testing.T) {
	ts := startServer(t, func(cfg *server.Config) { cfg.MaxClients = 2 })
	// acquire dials until the server serves the connection: the readiness
	// probe of startServer counts until the server has seen it close.
	acquire := func() *rawConn {
		deadline := time.Now().Add(10 * time.Second)
		for {
			c := dialRaw(t, ts.Addr)
			v := c.do(t, "PING")
			if v == "PONG" {
				return c
			}
			_ = c.Close()
			if time.Now().After(deadline) {
				t.Fatalf("no connection served within 10s: %#v", v)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	a, b := acquire(), acquire()
	extra := dialRaw(t, ts.Addr)
	extra.send(t, "PING\r\n")
	if v := extra.read(t); v != respErr("ERR max number of clients reached") {
		t.Errorf("third client got %#v, want -ERR max number of clients reached", v)
	}
	extra.expectClosed(t)
	if v := a.do(t, "PING"); v != "PONG" {
		t.Errorf("first client after the refusal: %#v", v)
	}
	if v := b.do(t, "PING"); v != "PONG" {
		t.Errorf("second client after the refusal: %#v", v)
	}
	_ = b.Close()
	acquire() // the freed slot serves again (the server notices the close asynchronously)
}
