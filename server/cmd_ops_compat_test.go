package server

import (
	"strings"
	"testing"
	"time"
)

// TestRedisCompatOpsErrors: the errors and empty replies of SLOWLOG,
// LATENCY, MEMORY and OBJECT, byte for byte with redis-server 7, in RESP2
// and RESP3.
func TestRedisCompatOpsErrors(t *testing.T) {
	rc := startRedis(t)
	cases := [][]string{
		{"SLOWLOG"},
		{"SLOWLOG", "NOPE"},
		{"SLOWLOG", "GET", "-2"},
		{"SLOWLOG", "GET", "abc"},
		{"SLOWLOG", "GET", "1", "2"},
		{"SLOWLOG", "LEN", "x"},
		{"SLOWLOG", "RESET", "x"},
		{"SLOWLOG", "RESET"},
		{"LATENCY"},
		{"LATENCY", "NOPE"},
		{"LATENCY", "HISTORY"},
		{"LATENCY", "HISTORY", "command"},
		{"LATENCY", "LATEST"},
		{"LATENCY", "LATEST", "x"},
		{"LATENCY", "RESET"},
		{"LATENCY", "RESET", "command", "nosuch"},
		{"LATENCY", "HISTOGRAM", "nosuchcommand"},
		{"MEMORY"},
		{"MEMORY", "NOPE"},
		{"MEMORY", "USAGE"},
		{"MEMORY", "USAGE", "nokey"},
		{"MEMORY", "USAGE", "nokey", "SAMPLES"},
		{"MEMORY", "USAGE", "nokey", "FOO", "1"},
		{"MEMORY", "USAGE", "nokey", "SAMPLES", "abc"},
		{"MEMORY", "USAGE", "nokey", "SAMPLES", "-1"},
		{"MEMORY", "USAGE", "nokey", "SAMPLES", "1", "SAMPLES", "2"},
		{"MEMORY", "USAGE", "nokey", "SAMPLES", "1", "x"},
		{"MEMORY", "STATS", "x"},
		{"OBJECT"},
		{"OBJECT", "NOPE"},
		{"OBJECT", "ENCODING"},
		{"OBJECT", "ENCODING", "nokey"},
		{"OBJECT", "FREQ", "nokey"},
		{"OBJECT", "IDLETIME", "nokey"},
		{"OBJECT", "REFCOUNT", "nokey"},
		{"COMMAND", "INFO", "slowlog", "latency", "memory", "object"},
	}
	for _, proto := range []string{"2", "3"} {
		tl := statsLoop(t)
		tl.run(cmd("HELLO", proto))
		rc.do(t, "HELLO", proto)
		for _, c := range cases {
			want := rc.do(t, c...)
			got, _ := tl.run(cmd(c...))
			if c[0] == "COMMAND" { // subcommand lists differ by design: compare the first seven fields
				g, w := splitValue(t, got), splitValue(t, want)
				for i := range w {
					gf, wf := splitValue(t, g[i]), splitValue(t, w[i])
					for j := 0; j < 7; j++ {
						if gf[j] != wf[j] {
							t.Errorf("RESP%s COMMAND INFO %s field %d: got %q want %q", proto, c[2+i], j, gf[j], wf[j])
						}
					}
				}
				continue
			}
			if got != want {
				t.Errorf("RESP%s %q:\n got %q\nwant %q", proto, c, got, want)
			}
		}
	}
}

// busyScript keeps redis-server busy for far more than the 1 ms latency
// threshold (tens of millions of Lua steps), so that it records a
// "command" latency event.
const busyScript = "local i = 0 while i < 20000000 do i = i + 1 end return i"

// TestRedisCompatOpsShapes: the replies that carry values (ids, times,
// durations, addresses, sizes) have Redis 7's shape once every run of
// digits is masked.
func TestRedisCompatOpsShapes(t *testing.T) {
	rc := startRedis(t)
	rc.do(t, "CONFIG", "SET", "slowlog-log-slower-than", "0")
	rc.do(t, "CONFIG", "SET", "latency-monitor-threshold", "1")
	clk := &stepClock{step: int64(2 * time.Millisecond)}
	tl := opsLoop(t, clk, func(c *Config) { c.SlowlogLogAll = true; c.LatencyMonitorThreshold = time.Millisecond })
	tl.cl.addr = "127.0.0.1:45678"
	mask := func(s string) string { return digits.ReplaceAllString(s, "N") }
	del := []string{"DEL"}
	for i := 0; i < 40; i++ {
		del = append(del, "key")
	}
	for _, proto := range []string{"2", "3"} {
		tl.batch(t, cmd("HELLO", proto))
		rc.do(t, "HELLO", proto)
		steps := []struct {
			setup [][]string // run on both first
			redis [][]string // run on redis-server only (to cause a latency event)
			cmp   []string
		}{
			{setup: [][]string{{"CLIENT", "SETNAME", "ops"}, {"SLOWLOG", "RESET"}, del, {"ECHO", strings.Repeat("x", 300)}}, cmp: []string{"SLOWLOG", "GET", "2"}},
			{cmp: []string{"SLOWLOG", "LEN"}},
			{setup: [][]string{{"LATENCY", "RESET"}}, redis: [][]string{{"EVAL", busyScript, "0"}}, cmp: []string{"LATENCY", "LATEST"}},
			{cmp: []string{"LATENCY", "HISTORY", "command"}},
			{setup: [][]string{{"CONFIG", "RESETSTAT"}, {"PING"}}, cmp: []string{"LATENCY", "HISTOGRAM", "ping"}},
		}
		for _, st := range steps {
			for _, c := range st.setup {
				rc.do(t, c...)
				tl.batch(t, cmd(c...))
			}
			for _, c := range st.redis {
				rc.do(t, c...)
			}
			want := mask(rc.do(t, st.cmp...))
			if got := mask(tl.batch(t, cmd(st.cmp...))); got != want {
				t.Errorf("RESP%s %q:\n got %q\nwant %q", proto, st.cmp, got, want)
			}
		}
		// A held key: MEMORY USAGE an integer, OBJECT REFCOUNT 1, FREQ
		// Redis's error for a policy that is not LFU, ENCODING a string.
		rc.do(t, "SET", "held", "v")
		tl.batch(t, cmd("THROTTLE.CHECK", "held", "5", "1m"))
		for _, c := range [][]string{{"MEMORY", "USAGE", "held"}, {"OBJECT", "REFCOUNT", "held"}, {"OBJECT", "FREQ", "held"}} {
			want := mask(rc.do(t, c...))
			if got := mask(tl.batch(t, cmd(c...))); got != want {
				t.Errorf("RESP%s %q:\n got %q\nwant %q", proto, c, got, want)
			}
		}
		if got, want := tl.batch(t, cmd("OBJECT", "ENCODING", "held"))[0], rc.do(t, "OBJECT", "ENCODING", "held")[0]; got != want {
			t.Errorf("RESP%s OBJECT ENCODING: a %q reply, want %q", proto, got, want)
		}
		for _, c := range [][]string{{"LATENCY", "DOCTOR"}, {"MEMORY", "DOCTOR"}} {
			if got, want := tl.batch(t, cmd(c...))[0], rc.do(t, c...)[0]; got != want {
				t.Errorf("RESP%s %q: a %q reply, want %q", proto, c, got, want)
			}
		}
	}
}
