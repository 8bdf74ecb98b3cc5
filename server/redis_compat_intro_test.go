package server

// Introspection compared with a real redis-server 7: the errors and replies
// of CLIENT KILL, CLIENT REPLY, CLIENT LIST and INFO byte for byte, the
// fields of CLIENT LIST and CLIENT INFO, the keys of INFO commandstats and
// errorstats after the same commands, and the lines MONITOR streams.
// Values that differ by nature (ids, ports, ages, times, memory) are masked.

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/shard"
)

// TestRedisCompatIntrospectExact: replies equal to redis-server's, byte for
// byte, in RESP2 and RESP3.
func TestRedisCompatIntrospectExact(t *testing.T) {
	rc := startRedis(t)
	cases := [][]string{
		{"CLIENT", "KILL", "1.2.3.4:5"},
		{"CLIENT", "KILL", "ID", "x"},
		{"CLIENT", "KILL", "ID", "0"},
		{"CLIENT", "KILL", "ID", "99999"},
		{"CLIENT", "KILL", "USER", "nobody"},
		{"CLIENT", "KILL", "SKIPME", "maybe"},
		{"CLIENT", "KILL", "FOO", "bar"},
		{"CLIENT", "KILL", "ID", "1", "SKIPME"},
		{"CLIENT", "KILL", "TYPE", "foo"},
		{"CLIENT", "KILL", "TYPE", "master"},
		{"CLIENT", "KILL", "TYPE", "pubsub", "SKIPME", "no"},
		{"CLIENT", "KILL", "ADDR", "1.2.3.4:5"},
		{"CLIENT", "KILL", "LADDR", "1.2.3.4:5"},
		{"CLIENT", "KILL"},
		{"CLIENT", "REPLY", "maybe"},
		{"CLIENT", "REPLY"},
		{"CLIENT", "REPLY", "ON"},
		{"CLIENT", "LIST", "ID", "0"},
		{"CLIENT", "LIST", "ID", "99999", "-3"},
		{"CLIENT", "LIST", "ID", "x"},
		{"CLIENT", "LIST", "TYPE", "pubsub"},
		{"CLIENT", "LIST", "TYPE", "normal", "ID", "1"},
		{"CLIENT", "LIST", "ID", "1", "TYPE", "normal"},
		{"CLIENT", "LIST", "ID"},
		{"CLIENT", "LIST", "TYPE"},
		{"CLIENT", "LIST", "TYPE", "normal", "x"},
		{"CLIENT", "KILL", "ID", "99998", "ID", "99999"},
		{"CLIENT", "KILL", "ADDR"},
		{"CLIENT", "NO-EVICT", "on"},
		{"CLIENT", "NO-EVICT", "OFF"},
		{"CONFIG", "RESETSTAT", "x"},
		{"CONFIG", "RESETSTAT"},
		{"INFO", "errorstats"}, // nothing since the reset: the exact framing of a section
		{"MONITOR", "x"},
		{"INFO", "errorstats"},
		{"INFO", "nosuchsection"},
		{"COMMAND", "INFO", "client|kill", "client|reply", "config|resetstat", "monitor"}, // no tips: compared whole
	}
	for _, proto := range []string{"2", "3"} {
		tl := statsLoop(t)
		tl.run(cmd("HELLO", proto))
		rc.do(t, "HELLO", proto)
		for _, c := range cases {
			want := rc.do(t, c...)
			if got, _ := tl.run(cmd(c...)); got != want {
				t.Errorf("RESP%s %q:\n got %q\nwant %q", proto, c, got, want)
			}
		}
	}
}

// TestRedisCompatClientReply: a pipeline mixing CLIENT REPLY OFF, SKIP and
// ON gives the same byte stream.
func TestRedisCompatClientReply(t *testing.T) {
	rc := startRedis(t)
	pipeline := [][]string{
		{"CLIENT", "REPLY", "OFF"}, {"PING", "off"}, {"CLIENT", "REPLY", "SKIP"}, {"PING", "stilloff"}, {"NOSUCH"},
		{"ECHO"}, {"CLIENT", "REPLY", "ON"}, {"PING", "on"}, {"CLIENT", "REPLY", "SKIP"}, {"PING", "skipped"},
		{"PING", "shown"}, {"CLIENT", "REPLY", "SKIP"}, {"CLIENT", "REPLY", "SKIP"}, {"PING", "skipped2"},
		{"PING", "shown2"}, {"CLIENT", "REPLY", "SKIP"}, {"CLIENT", "REPLY", "OFF"}, {"PING", "off2"},
		{"CLIENT", "REPLY", "ON"}, {"ECHO", "end"},
	}
	var in strings.Builder
	for _, c := range pipeline {
		in.WriteString(cmd(c...))
	}
	if _, err := rc.c.Write([]byte(in.String())); err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	for !strings.HasSuffix(want.String(), "$3\r\nend\r\n") {
		line, err := rc.r.ReadString('\n')
		if err != nil {
			t.Fatalf("reading redis-server's replies after %q: %v", want.String(), err)
		}
		want.WriteString(line)
	}
	tl := newTestLoop(t, nil)
	if got, _ := tl.run(in.String()); got != want.String() {
		t.Fatalf("replies:\n got %q\nwant %q", got, want.String())
	}
}

// clientFields returns the field names of a CLIENT LIST line and the line
// with the values that differ by nature masked.
func clientFields(line string) (names []string, masked string) {
	var out []string
	for _, kv := range strings.Fields(line) {
		k, v, _ := strings.Cut(kv, "=")
		names = append(names, k)
		switch k {
		case "id", "addr", "laddr", "fd", "age", "idle", "qbuf", "qbuf-free", "argv-mem", "rbs", "rbp", "tot-mem":
			v = "*"
		}
		out = append(out, k+"="+v)
	}
	return names, strings.Join(out, " ")
}

// bulkText returns the text of a bulk or verbatim string reply.
func bulkText(t *testing.T, reply string) string {
	t.Helper()
	_, body, ok := strings.Cut(reply, "\r\n")
	if !ok || (reply[0] != '$' && reply[0] != '=') {
		t.Fatalf("not a bulk or verbatim string: %q", reply)
	}
	body = strings.TrimSuffix(body, "\r\n")
	if reply[0] == '=' {
		body = strings.TrimPrefix(body, "txt:")
	}
	return body
}

// TestRedisCompatClientList: CLIENT INFO and CLIENT LIST have Redis 7.0's
// fields in its order, with equal values where they do not differ by nature,
// plus lib-name and lib-ver at the end, where Redis 7.2 puts them; the reply
// is a verbatim string in RESP3 as in Redis.
func TestRedisCompatClientList(t *testing.T) {
	rc := startRedis(t)
	ts := startIntroServer(t, nil)
	ours := dialIntro(t, ts)
	for _, proto := range []string{"2", "3"} {
		rc.do(t, "HELLO", proto)
		ours.do(t, "HELLO", proto)
		for _, c := range [][]string{{"CLIENT", "INFO"}, {"CLIENT", "LIST"}} {
			want, got := rc.do(t, c...), ours.do(t, c...)
			if got[0] != want[0] || (got[0] == '=' && !strings.Contains(got, "\r\ntxt:")) {
				t.Errorf("RESP%s %v: reply type %q, want %q", proto, c, got[:8], want[:8])
			}
			wantNames, wantMasked := clientFields(bulkText(t, want))
			gotNames, gotMasked := clientFields(bulkText(t, got))
			if len(gotNames) != len(wantNames)+2 || strings.Join(gotNames[len(wantNames):], " ") != "lib-name lib-ver" {
				t.Fatalf("RESP%s %v fields:\n got %v\nwant %v + lib-name lib-ver", proto, c, gotNames, wantNames)
			}
			gotMasked = strings.TrimSuffix(gotMasked, " lib-name= lib-ver=")
			if gotMasked != wantMasked {
				t.Errorf("RESP%s %v:\n got %s\nwant %s", proto, c, gotMasked, wantMasked)
			}
		}
	}
}

// statLines returns the sorted lines of an INFO reply with the measured
// times masked.
func statLines(t *testing.T, reply string) []string {
	lines := strings.Split(strings.TrimSpace(bulkText(t, reply)), "\r\n")
	for i := range lines {
		lines[i] = usecFields.ReplaceAllString(lines[i], "usec=U")
	}
	sort.Strings(lines)
	return lines
}

// TestRedisCompatInfoStats: after the same commands, INFO commandstats and
// errorstats hold the same lines (times masked): calls, refusals and
// failures counted alike, subcommands named container|sub.
func TestRedisCompatInfoStats(t *testing.T) {
	rc := startRedis(t)
	for _, proto := range []string{"2", "3"} {
		tl := statsLoop(t)
		commands := [][]string{
			{"HELLO", proto}, {"CONFIG", "RESETSTAT"},
			{"PING"}, {"PING", "a", "b"}, {"ECHO", "x"}, {"CLIENT", "ID"}, {"CLIENT", "SETNAME"},
			{"CLIENT", "SETNAME", "a b"}, {"CLIENT", "NOSUCH"}, {"NOSUCH"}, {"SELECT", "x"}, {"SELECT", "0"},
			{"HELLO", "9"}, {"CLIENT", "KILL", "ID", "99999"}, {"CLIENT", "KILL", "FOO", "bar"},
			{"CLIENT", "LIST", "ID", "0"}, {"COMMAND", "COUNT"}, {"COMMAND", "INFO", "ping"}, {"DBSIZE"},
		}
		for _, c := range commands {
			rc.do(t, c...)
			tl.run(cmd(c...))
		}
		for _, sec := range []string{"commandstats", "errorstats"} {
			want := rc.do(t, "INFO", sec)
			got, _ := tl.run(cmd("INFO", sec))
			if got[0] != want[0] {
				t.Errorf("RESP%s INFO %s: reply type %q, want %q", proto, sec, got[:1], want[:1])
			}
			g, w := statLines(t, got), statLines(t, want)
			if strings.Join(g, "\n") != strings.Join(w, "\n") {
				t.Errorf("RESP%s INFO %s:\n got %q\nwant %q", proto, sec, g, w)
			}
		}
	}
}

// TestRedisCompatMonitor: the same commands produce the same MONITOR lines
// (time and port masked): administrative commands and refused ones are not
// shown, AUTH and HELLO AUTH passwords are redacted, arguments are quoted
// alike.
func TestRedisCompatMonitor(t *testing.T) {
	rc := startRedis(t)
	redisAddr := rc.c.RemoteAddr().String()
	ts := startIntroServer(t, nil)
	commands := [][]string{
		{"PING"}, {"ECHO", "a b\n\"\\\x01\xff"}, {"AUTH", "user", "pass"}, {"HELLO", "3", "AUTH", "u", "p", "SETNAME", "x"},
		{"HELLO", "2"}, {"CLIENT", "LIST"}, {"CONFIG", "GET", "maxclients"}, {"PING", "a", "b"}, {"NOSUCH"},
		{"CLIENT", "ID"}, {"CLIENT", "SETNAME", "a b"}, {"CONFIG", "RESETSTAT"}, {"INFO", "cpu"}, {"ECHO", "end"},
	}
	stamp := regexp.MustCompile(`^\+[0-9]+\.[0-9]{6} \[0 127\.0\.0\.1:[0-9]+\] `)
	feed := func(addr string) []string {
		mon := dialIntroAddr(t, addr)
		if got := mon.do(t, "MONITOR"); got != "+OK\r\n" {
			t.Fatalf("%s MONITOR: %q", addr, got)
		}
		c := dialIntroAddr(t, addr)
		for _, a := range commands {
			c.do(t, a...)
		}
		var lines []string
		_ = mon.c.SetReadDeadline(time.Now().Add(20 * time.Second)) // bounds a broken feed; times nothing
		for {
			line, err := mon.r.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: reading the feed after %q: %v", addr, lines, err)
			}
			if !stamp.MatchString(line) {
				t.Fatalf("%s: feed line %q", addr, line)
			}
			lines = append(lines, stamp.ReplaceAllString(line, "+T [0 ADDR] "))
			if strings.HasSuffix(line, `"ECHO" "end"`+"\r\n") {
				return lines
			}
		}
	}
	want := feed(redisAddr)
	got := feed(ts.Addr().String())
	if strings.Join(got, "") != strings.Join(want, "") {
		t.Fatalf("MONITOR feed:\n got %q\nwant %q", got, want)
	}
}

// TestRedisCompatMonitorKeyspace: a connection that runs MONITOR is
// refused every command that reads or writes keys, in Redis's words, and
// may still run the others.
func TestRedisCompatMonitorKeyspace(t *testing.T) {
	rc := startRedis(t)
	ts := startIntroServer(t, nil)
	commands := [][]string{
		{"EXISTS", "x"}, {"DBSIZE"}, {"DEL", "x"}, {"KEYS", "*"}, {"SCAN", "0"}, {"TTL", "x"}, {"TYPE", "x"},
		{"FLUSHALL"}, {"ECHO", "still here"},
	}
	replies := func(addr string) []string {
		c := dialIntroAddr(t, addr)
		if got := c.do(t, "MONITOR"); got != "+OK\r\n" {
			t.Fatalf("%s MONITOR: %q", addr, got)
		}
		var out []string
		for _, a := range commands {
			out = append(out, c.do(t, a...))
		}
		return out
	}
	want := replies(rc.c.RemoteAddr().String())
	got := replies(ts.Addr().String())
	for i := range commands {
		if got[i] != want[i] {
			t.Errorf("%q after MONITOR: got %q, redis-server %q", commands[i], got[i], want[i])
		}
	}
	if !strings.HasPrefix(want[0], "-ERR Replica") {
		t.Fatalf("redis-server answered EXISTS after MONITOR with %q", want[0])
	}
}

// startIntroServer runs a Server on a free loopback port until the test ends.
func startIntroServer(t *testing.T, mutate func(*Config)) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	cfg := Config{Addr: addr, Loops: 2, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg, shard.New(shard.Config{Shards: 4}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		<-done
	})
	for deadline := time.Now().Add(20 * time.Second); !s.Ready(); { // bounds a broken start; times nothing
		if time.Now().After(deadline) {
			t.Fatal("server did not start")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return s
}

// dialIntro connects to s.
func dialIntro(t *testing.T, s *Server) *redisConn { return dialIntroAddr(t, s.Addr().String()) }

// dialIntroAddr connects to a server at addr.
func dialIntroAddr(t *testing.T, addr string) *redisConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &redisConn{c: c, r: bufio.NewReader(c)}
}
