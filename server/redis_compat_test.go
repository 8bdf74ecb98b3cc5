package server

// Replies that Redis defines, compared byte for byte with a real
// redis-server 7: the errors of the handshake and introspection commands,
// COMMAND LIST's filters, COMMAND INFO of unknown names and of the
// commands both servers have. Without redis-server the test is skipped
// loudly, and under CI it fails (internal/testdeps).

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/testdeps"
)

// redisConn is a raw connection to a redis-server started for the test.
type redisConn struct {
	c net.Conn
	r *bufio.Reader
}

// startRedis starts redis-server on a free port and connects to it.
func startRedis(t *testing.T) *redisConn {
	t.Helper()
	bin := testdeps.Require(t, "redis-server")[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--loglevel", "warning", "--logfile", "")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	// Wait for the listener: redis-server prints nothing we could wait on
	// instead. The deadline bounds a broken start, it times nothing.
	var c net.Conn
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err = net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not listen on %d: %v", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &redisConn{c: c, r: bufio.NewReader(c)}
}

// do sends one command and returns its reply's bytes.
func (rc *redisConn) do(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := rc.c.Write([]byte(cmd(args...))); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := readValue(rc.r, &b); err != nil {
		t.Fatalf("%v: reading redis-server's reply: %v", args, err)
	}
	return b.String()
}

// readValue copies one RESP2 or RESP3 value from r to out.
func readValue(r *bufio.Reader, out *bytes.Buffer) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	out.WriteString(line)
	if len(line) < 3 {
		return fmt.Errorf("short line %q", line)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	switch line[0] {
	case '$', '!', '=':
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		out.Write(buf)
	case '*', '~', '>':
		for i := 0; i < n; i++ {
			if err := readValue(r, out); err != nil {
				return err
			}
		}
	case '%':
		for i := 0; i < 2*n; i++ {
			if err := readValue(r, out); err != nil {
				return err
			}
		}
	}
	return nil
}

// splitValue returns the elements of an aggregate reply as raw bytes.
func splitValue(t *testing.T, s string) []string {
	t.Helper()
	r := bufio.NewReader(strings.NewReader(s))
	line, _ := r.ReadString('\n')
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	out := make([]string, n)
	for i := range out {
		var b bytes.Buffer
		if err := readValue(r, &b); err != nil {
			t.Fatalf("splitting %q: %v", s, err)
		}
		out[i] = b.String()
	}
	return out
}

// TestRedisCompatExact: replies equal to redis-server's, byte for byte, in
// RESP2 and RESP3.
func TestRedisCompatExact(t *testing.T) {
	rc := startRedis(t)
	cases := [][]string{
		{"COMMAND", "INFO", "nosuchcmd"},
		{"COMMAND", "INFO", "nosuchcmd", "client|nosuch", "ping|x"},
		{"COMMAND", "INFO", "hello", "auth", "echo", "select", "quit", "reset"},
		{"COMMAND", "INFO", "client|id", "client|getname", "client|setname", "client|help", "client|no-evict"},
		{"COMMAND", "INFO", "config|get", "command|count", "command|getkeys", "command|help"},
		{"COMMAND", "DOCS", "nosuchcmd"},
		{"COMMAND", "COUNT", "x"},
		{"COMMAND", "nope"},
		{"COMMAND", "LIST", "x"},
		{"COMMAND", "LIST", "FILTERBY"},
		{"COMMAND", "LIST", "FILTERBY", "MODULE"},
		{"COMMAND", "LIST", "FILTERBY", "x", "y"},
		{"COMMAND", "LIST", "FILTERBY", "MODULE", "x"},
		{"COMMAND", "LIST", "FILTERBY", "ACLCAT", "nosuch"},
		{"COMMAND", "LIST", "FILTERBY", "ACLCAT", "@fast"},
		{"COMMAND", "LIST", "FILTERBY", "PATTERN", "nosuchcmd*"},
		{"COMMAND", "LIST", "FILTERBY", "PATTERN", "PIN?"},
		{"COMMAND", "LIST", "FILTERBY", "pattern", "command|c*"},
		{"COMMAND", "LIST", "FILTERBY", "PATTERN", "x", "y"},
		{"COMMAND", "GETKEYS"},
		{"COMMAND", "GETKEYS", "ping"},
		{"COMMAND", "GETKEYS", "ping", "x"},
		{"COMMAND", "GETKEYS", "nosuch", "a"},
		{"COMMAND", "GETKEYS", "echo", "a", "b"},
		{"COMMAND", "GETKEYS", "client", "id"},
		{"COMMAND", "GETKEYS", "client", "nosuch"},
		{"CLIENT"},
		{"CLIENT", "NOSUCH"},
		{"CLIENT", "SETNAME"},
		{"CLIENT", "SETNAME", "a", "b"},
		{"CLIENT", "SETNAME", "a b"},
		{"CLIENT", "GETNAME", "x"},
		{"CLIENT", "ID", "x"},
		{"CLIENT", "HELP", "x"},
		{"CLIENT", "NO-EVICT", "maybe"},
		{"CLIENT", "NO-EVICT", "on", "x"},
		{"CLIENT", "LIST", "x"},
		{"CLIENT", "LIST", "TYPE", "foo"},
		{"CONFIG"},
		{"CONFIG", "GET"},
		{"CONFIG", "NOPE"},
		{"CONFIG", "HELP", "x"},
		{"PING"},
		{"PING", "a"},
		{"PING", "a", "b"},
		{"ECHO"},
		{"ECHO", "x y"},
		{"SELECT", "x"},
		{"SELECT", "0"},
		{"SELECT", "99999999999"},
		{"HELLO", "4"},
		{"HELLO", "x"},
		{"HELLO", "3", "FOO"},
		{"AUTH", "x"},
		{"AUTH", "a", "b", "c"},
		{"DBSIZE", "x"},
		{"TIME", "x"},
		{"RESET", "x"},
		{"FOO", "a", "b"},
		{"INFO", "nosuchsection"},
		// DEBUG, refused by default (enable-debug-command no): arity first,
		// then Redis's refusal, also inside MULTI (EXEC aborts).
		{"DEBUG"},
		{"DEBUG", "HELP"},
		{"debug", "set-clock", "0"},
		{"DEBUG", "nosuch", "a", "b"},
		{"MULTI"},
		{"DEBUG", "HELP"},
		{"EXEC"},
	}
	for _, proto := range []string{"2", "3"} {
		tl := newTestLoop(t, nil)
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

// TestRedisCompatCommandInfo: for every command and subcommand both servers
// have, COMMAND INFO agrees on the first seven fields (name, arity, flags,
// key positions, ACL categories). Tips and subcommand lists differ by design:
// Redis has cluster tips and more subcommands.
func TestRedisCompatCommandInfo(t *testing.T) {
	rc := startRedis(t)
	var names []string
	for i := range commandTable {
		sp := &commandTable[i]
		names = append(names, sp.name)
		for j := range sp.subs {
			names = append(names, sp.subs[j].name)
		}
	}
	for _, proto := range []string{"2", "3"} {
		tl := newTestLoop(t, nil)
		tl.run(cmd("HELLO", proto))
		rc.do(t, "HELLO", proto)
		compared := 0
		for _, name := range names {
			want := rc.do(t, "COMMAND", "INFO", name)
			if strings.HasSuffix(want, "$-1\r\n") || strings.HasSuffix(want, "_\r\n") {
				continue // ours alone: THROTTLE.*, CL.THROTTLE, CLIENT SETINFO (7.2), ...
			}
			got, _ := tl.run(cmd("COMMAND", "INFO", name))
			g, w := splitValue(t, splitValue(t, got)[0]), splitValue(t, splitValue(t, want)[0])
			for f := 0; f < 7; f++ {
				if g[f] != w[f] {
					t.Errorf("RESP%s COMMAND INFO %s field %d: got %q want %q", proto, name, f+1, g[f], w[f])
				}
			}
			compared++
		}
		if compared < 20 {
			t.Errorf("RESP%s: only %d commands compared", proto, compared)
		}
	}
}
