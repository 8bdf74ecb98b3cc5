package attack

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestMalformedInputMatchesRedis sends malformed and borderline frames to
// our server and to redis-server and compares every byte each sends back
// until it closes the connection. Each input is followed by a QUIT, so a
// connection the input did not close ends with +OK.
func TestMalformedInputMatchesRedis(t *testing.T) {
	ours := startServer(t)
	redis := startRedis(t, "--proto-max-bulk-len", "64mb")
	quit := "*1\r\n$4\r\nQUIT\r\n"
	cases := []struct {
		name, in string
		// ours, when set, is our server's reply where it differs from
		// redis-server on purpose (reply shown in the comment).
		ours string
	}{
		{"negative bulk length", "*2\r\n$4\r\nECHO\r\n$-5\r\nabc\r\n", ""},
		{"null bulk argument", "*2\r\n$4\r\nECHO\r\n$-1\r\n", ""},
		{"negative multibulk count", "*-5\r\n", ""},
		{"null multibulk", "*-1\r\n", ""},
		{"empty multibulk", "*0\r\n", ""},
		{"multibulk count not a number", "*x\r\n", ""},
		// redis-server has no bound on the count but INT_MAX and takes
		// the QUIT that follows for the first argument ("expected '$',
		// got '*'"); ours bounds it by max-args.
		{"multibulk count over max-args", "*2000000\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"bulk length not a number", "*1\r\n$abc\r\n", ""},
		{"bulk length over proto-max-bulk-len", "*2\r\n$4\r\nECHO\r\n$67108865\r\n", ""},
		{"bulk length overflowing int64", "*1\r\n$99999999999999999999\r\n", ""},
		// redis-server skips the two bytes after a bulk without looking
		// at them (and answers +PONG); ours wants CRLF there.
		{"bulk without its CRLF", "*1\r\n$4\r\nPINGxx", "-ERR Protocol error: invalid bulk length\r\n"},
		{"integer where a bulk is due", "*1\r\n:4\r\n", ""},
		{"simple string where a bulk is due", "*1\r\n+PING\r\n", ""},
		{"header line of 70 KiB", "*" + strings.Repeat("1", 70<<10), ""},
		{"bulk header line of 70 KiB", "*1\r\n$" + strings.Repeat("1", 70<<10), ""},
		{"inline line of 70 KiB", "ECHO " + strings.Repeat("a", 70<<10), ""},
		{"inline unbalanced quotes", "ECHO \"abc\r\n", ""},
		{"inline closing quote then a letter", "ECHO \"a\"b\r\n", ""},
		{"inline quotes and escapes", "ECHO \"a\\x41\\tb\" 'c\\'d'\r\n", ""},
		{"inline blank lines", "\r\n\r\n  \r\nPING\r\n", ""},
		{"inline bare LF", "PING\nECHO x\n", ""},
		{"unknown command", "*2\r\n$6\r\nNOSUCH\r\n$1\r\nx\r\n", ""},
		{"ECHO with no argument", "*1\r\n$4\r\nECHO\r\n", ""},
		{"ECHO of an empty bulk", "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", ""},
		{"ECHO of binary", "*2\r\n$4\r\nECHO\r\n$4\r\n\x00\r\n\xff\r\n", ""},
		{"bulk length with a plus sign", "*1\r\n$+4\r\nPING\r\n", ""},
		{"bulk length with leading zero", "*1\r\n$04\r\nPING\r\n", ""},
		{"multibulk count with a plus sign", "*+1\r\n$4\r\nPING\r\n", ""},
		{"valid then invalid", "*1\r\n$4\r\nPING\r\n*1\r\n$-2\r\n", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got [2][]byte
			for i, p := range []*proc{ours, redis} {
				c := dial(t, p)
				c.write([]byte(tc.in + quit))
				got[i] = c.expectClosed(60 * time.Second)
			}
			if tc.ours != "" {
				if string(got[0]) != tc.ours {
					t.Errorf("input %q: got %q, want %q", trim([]byte(tc.in)), trim(got[0]), tc.ours)
				}
				if bytes.Equal(got[0], got[1]) {
					t.Logf("redis-server now agrees with us on %q: the exception can go", tc.in)
				}
				return
			}
			if !bytes.Equal(got[0], got[1]) {
				t.Errorf("input %q:\nthrottlekit-server: %q\nredis-server:       %q", trim([]byte(tc.in)), trim(got[0]), trim(got[1]))
			}
		})
	}
}
