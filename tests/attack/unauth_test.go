package attack

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestUnauthenticatedBounds checks Redis's bounds on what a client may send
// before AUTH when a password is set: more than 10 arguments or a bulk
// over 16 KiB is a protocol error that closes the connection, detected from
// the header alone; at the bounds the command is parsed and refused with
// NOAUTH; after AUTH neither bound applies.
func TestUnauthenticatedBounds(t *testing.T) {
	p := startServer(t, "--requirepass", "s3cret")
	const (
		maxArgs = 10        // resp.MaxUnauthArgs
		maxBulk = 16 * 1024 // resp.MaxUnauthBulkLen
	)
	closing := []struct {
		name, send, want string
	}{
		{"11 arguments announced", "*11\r\n",
			"-ERR Protocol error: unauthenticated multibulk length\r\n"},
		{"a million arguments announced", "*1000000\r\n",
			"-ERR Protocol error: unauthenticated multibulk length\r\n"},
		{"bulk one byte over 16 KiB", "*2\r\n$4\r\nAUTH\r\n$" + strconv.Itoa(maxBulk+1) + "\r\n",
			"-ERR Protocol error: unauthenticated bulk length\r\n"},
		{"1 MiB bulk announced", "*2\r\n$4\r\nECHO\r\n$1048576\r\n",
			"-ERR Protocol error: unauthenticated bulk length\r\n"},
		// Over proto-max-bulk-len (64mb) the length itself is refused
		// first, as redis-server orders its checks.
		{"512 MiB bulk announced", "*2\r\n$4\r\nECHO\r\n$536870912\r\n",
			"-ERR Protocol error: invalid bulk length\r\n"},
		{"oversized command name", "*1\r\n$20000\r\n",
			"-ERR Protocol error: unauthenticated bulk length\r\n"},
		{"after a refused command", "*1\r\n$4\r\nPING\r\n*12\r\n",
			"-NOAUTH Authentication required.\r\n-ERR Protocol error: unauthenticated multibulk length\r\n"},
	}
	run := func(t *testing.T, p *proc) {
		for _, tc := range closing {
			t.Run(tc.name, func(t *testing.T) {
				c := dial(t, p)
				c.write([]byte(tc.send))
				// Only the header was sent: the error must not wait for
				// the announced bytes. The deadline is a safety net.
				if got := c.expectClosed(60 * time.Second); string(got) != tc.want {
					t.Fatalf("%s: got %q, want %q then the close", p.name, got, tc.want)
				}
			})
		}
	}
	run(t, p)
	t.Run("redis-server gives the same replies", func(t *testing.T) {
		run(t, startRedis(t, "--requirepass", "s3cret", "--proto-max-bulk-len", "64mb"))
	})

	t.Run("at the bounds", func(t *testing.T) {
		c := dial(t, p)
		args := []string{"THROTTLE.RESET"}
		for len(args) < maxArgs {
			args = append(args, "k"+strconv.Itoa(len(args)))
		}
		if v := c.do(args...); v.kind != '-' || !strings.HasPrefix(v.str, "NOAUTH") {
			t.Fatalf("10 arguments before AUTH: %+v, want NOAUTH", v)
		}
		if v := c.do("ECHO", strings.Repeat("b", maxBulk)); v.kind != '-' || !strings.HasPrefix(v.str, "NOAUTH") {
			t.Fatalf("16 KiB bulk before AUTH: %+v, want NOAUTH", v)
		}
		if v := c.do("AUTH", strings.Repeat("p", maxBulk)); v.kind != '-' || !strings.HasPrefix(v.str, "WRONGPASS") {
			t.Fatalf("AUTH with a 16 KiB password: %+v, want WRONGPASS", v)
		}
		if v := c.do("AUTH", "s3cret"); v.str != "OK" {
			t.Fatalf("AUTH: %+v", v)
		}
		big := append([]string{"THROTTLE.RESET"}, make([]string, 100)...)
		for i := 1; i < len(big); i++ {
			big[i] = "k" + strconv.Itoa(i)
		}
		if v := c.do(big...); v.kind != ':' || v.n != 0 {
			t.Fatalf("100 arguments after AUTH: %+v, want :0", v)
		}
		if v := c.do("ECHO", strings.Repeat("a", 1<<20)); v.kind != '$' || v.n != 1<<20 {
			t.Fatalf("1 MiB bulk after AUTH: kind %q length %d", v.kind, v.n)
		}
	})

	t.Run("RESET forgets the authentication", func(t *testing.T) {
		c := dial(t, p)
		if v := c.do("AUTH", "s3cret"); v.str != "OK" {
			t.Fatalf("AUTH: %+v", v)
		}
		if v := c.do("RESET"); v.str != "RESET" {
			t.Fatalf("RESET: %+v", v)
		}
		c.write([]byte("*11\r\n"))
		if got := c.expectClosed(60 * time.Second); string(got) != "-ERR Protocol error: unauthenticated multibulk length\r\n" {
			t.Fatalf("11 arguments after RESET: %q", got)
		}
	})
}

// TestAuthGuessing makes one address fail AUTH auth-fail-limit times: its
// next attempt is refused without looking at the password, even a correct
// one, on a new connection too, and the connection is closed; a client
// authenticated before keeps working.
func TestAuthGuessing(t *testing.T) {
	const limit = 10
	// A one-hour period: no attempt drips back while the test runs.
	p := startServer(t, "--requirepass", "s3cret", "--auth-fail-limit", strconv.Itoa(limit), "--auth-fail-period", "1h")
	good := dial(t, p)
	if v := good.do("AUTH", "s3cret"); v.str != "OK" {
		t.Fatalf("AUTH: %+v", v)
	}
	c := dial(t, p)
	for i := 0; i < limit; i++ {
		if v := c.do("AUTH", "guess"+strconv.Itoa(i)); v.kind != '-' || !strings.HasPrefix(v.str, "WRONGPASS") {
			t.Fatalf("wrong password %d: %+v, want WRONGPASS", i, v)
		}
	}
	for _, try := range []*conn{c, dial(t, p)} {
		try.write(cmd("AUTH", "s3cret"))
		got := string(try.expectClosed(60 * time.Second))
		if !strings.HasPrefix(got, "-ERR too many failed authentication attempts, retry in ") {
			t.Fatalf("AUTH after %d failures: %q, want the refusal then the close", limit, got)
		}
	}
	if v := good.do("THROTTLE.CHECK", "k", "5", "1h"); v.kind != '*' {
		t.Fatalf("authenticated client after the guessing: %+v", v)
	}
}
