package server

// DEBUG beyond the data-driven vectors (testdata/commands/debug.txt): a
// clock change within one read batch, what a server with DEBUG refused
// reads its time from, and the address check of enable-debug-command local.

import (
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/internal/clock"
	"github.com/throttlekit/throttlekit-server/shard"
)

// A DEBUG clock command applies to the next command of the same batch.
func TestDebugClockMovesWithinABatch(t *testing.T) {
	tl := newTestLoop(t, func(c *Config) { c.EnableDebugCommand = DebugYes })
	got, _ := tl.run(cmd("DEBUG", "SET-CLOCK", "1700000000000") + cmd("TIME") +
		cmd("DEBUG", "ADVANCE-CLOCK", "2500") + cmd("TIME") + cmd("THROTTLE.CHECK", "k", "1", "1m"))
	want := "+OK\r\n*2\r\n$10\r\n1700000000\r\n$1\r\n0\r\n" +
		"+OK\r\n*2\r\n$10\r\n1700000002\r\n$6\r\n500000\r\n" +
		"*5\r\n:1\r\n:1\r\n:0\r\n:1700000062500\r\n:0\r\n"
	if got != want {
		t.Fatalf("replies\n got %q\nwant %q", got, want)
	}
}

// With DEBUG refused (the default) the server reads Config.Clock itself:
// no clock.Manual is made, and one given is ignored. With DEBUG allowed it
// reads a Manual over Config.Clock, or the one given.
func TestDebugClockOnlyWhenEnabled(t *testing.T) {
	src := func() int64 { return 42 }
	given := clock.NewManual(src)
	given.Freeze(7)
	tests := []struct {
		name   string
		mode   DebugCommand
		given  *clock.Manual
		want   int64 // the server's reading
		manual bool  // the server has a DebugClock
	}{
		{"no", DebugNo, nil, 42, false},
		{"no, a DebugClock given", DebugNo, given, 42, true},
		{"local", DebugLocal, nil, 42, true},
		{"yes, a DebugClock given", DebugYes, given, 7, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTestLoop(t, func(c *Config) {
				c.Clock, c.EnableDebugCommand, c.DebugClock = src, tt.mode, tt.given
			})
			if got := tl.srv.now(); got != tt.want {
				t.Errorf("now() = %d, want %d", got, tt.want)
			}
			if got := tl.srv.cfg.DebugClock != nil; got != tt.manual {
				t.Errorf("DebugClock set = %v, want %v", got, tt.manual)
			}
		})
	}
	if _, err := New(Config{Addr: "127.0.0.1:0", EnableDebugCommand: DebugLocal + 1}, shard.New(shard.Config{Shards: 1})); err == nil ||
		!strings.Contains(err.Error(), "EnableDebugCommand") {
		t.Errorf("New with an unknown EnableDebugCommand: %v", err)
	}
}

func TestParseDebugCommand(t *testing.T) {
	for s, want := range map[string]DebugCommand{"no": DebugNo, "yes": DebugYes, "local": DebugLocal} {
		if got, err := ParseDebugCommand(s); err != nil || got != want {
			t.Errorf("ParseDebugCommand(%q) = %v, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "YES", "on", "1"} {
		if _, err := ParseDebugCommand(s); err == nil {
			t.Errorf("ParseDebugCommand(%q) accepted", s)
		}
	}
}

// enable-debug-command local trusts the addresses protected mode trusts.
func TestDebugLocalAddr(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:5000":        true,
		"[::1]:5000":            true,
		"[::ffff:127.0.0.1]:80": true,
		"":                      true, // no peer: an in-process client
		"127.0.0.2:5000":        false,
		"10.0.0.1:5000":         false,
		"[fe80::1]:5000":        false,
		"garbage":               false,
	} {
		if got := localAddr(addr); got != want {
			t.Errorf("localAddr(%q) = %v, want %v", addr, got, want)
		}
	}
}
