package server

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
	"time"
)

// FuzzDispatch sends one command, built from space-separated words, and
// checks that dispatch answers it with exactly one well-formed reply and
// closes the connection only for QUIT: no argument may panic a handler or
// leave a reply unwritten or doubled.
func FuzzDispatch(f *testing.F) {
	for _, seed := range []string{
		"THROTTLE.CHECK k 10 1s ALGO token BURST 3 COST 2",
		"THROTTLE.PEEK k 10 1500ms ALGO sliding",
		"THROTTLE.LEASE k 10 1m BATCH 4",
		"THROTTLE.RETURN k 3 1700000100000",
		"THROTTLE.RESET a b",
		"CL.THROTTLE k 15 30 60 +1",
		"GCRA k 4 10 0.5 TOKENS 3",
		"GCRA k 9223372036854775807 1 1e-7 TOKENS 2",
		"SLOWLOG GET -1",
		"LATENCY HISTOGRAM throttle.check client|id",
		"LATENCY RESET command",
		"MEMORY USAGE k SAMPLES 5",
		"OBJECT ENCODING k",
		"HELLO 3 AUTH default x SETNAME me",
		"CLIENT LIST TYPE normal ID 1 2",
		"CLIENT SETINFO lib-name x",
		"COMMAND LIST FILTERBY PATTERN [a-z]*",
		"COMMAND GETKEYS throttle.reset a b",
		"COMMAND INFO client|id",
		"COMMAND DOCS config",
		"CONFIG GET *",
		"INFO keyspace",
		"SELECT -1",
		"QUIT",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		if len(args) == 0 || len(args) > 64 {
			return
		}
		tl := newTestLoop(t, func(c *Config) {
			c.ConfigGet = func(string) [][2]string { return [][2]string{{"timeout", "0"}} }
		})
		in := cmd(args...)
		n, closed := tl.l.process(tl.cl, []byte(in), time.Now().UnixNano())
		if n != len(in) {
			t.Fatalf("%q: consumed %d of %d", line, n, len(in))
		}
		if closed != strings.EqualFold(args[0], "quit") {
			t.Fatalf("%q: closed = %v", line, closed)
		}
		out := tl.take()
		r := bufio.NewReader(strings.NewReader(out))
		var b bytes.Buffer
		if err := readValue(r, &b); err != nil {
			t.Fatalf("%q: reply %q: %v", line, out, err)
		}
		if b.Len() != len(out) {
			t.Fatalf("%q: %d bytes after the reply in %q", line, len(out)-b.Len(), out)
		}
	})
}
