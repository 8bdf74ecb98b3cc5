package server

import (
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/shard"
)

// Config.MaxKeyLen refuses longer keys in every command that keeps state,
// and such a refusal changes nothing.
func TestMaxKeyLen(t *testing.T) {
	tl := newTestLoop(t, func(c *Config) { c.MaxKeyLen = 8 })
	long := strings.Repeat("k", 9)
	for _, c := range [][]string{
		{"THROTTLE.CHECK", long, "10", "1m"},
		{"THROTTLE.PEEK", long, "10", "1m"},
		{"THROTTLE.LEASE", long, "10", "1m", "BATCH", "2"},
		{"THROTTLE.RETURN", long, "1", "0"},
		{"CL.THROTTLE", long, "15", "30", "60"},
		{"THROTTLE.MCHECK", "1", long, "10", "1m", "gcra"},
		{"THROTTLE.RESERVE", long, "10", "1m", "COST", "1"},
		{"THROTTLE.ACQUIRE", long, "2", "30s"},
	} {
		out, _ := tl.run(cmd(c...))
		if !strings.HasPrefix(out, "-") || !strings.Contains(out, "key is too long") {
			t.Errorf("%s with a 9-byte key: %q, want a \"key is too long\" error", c[0], out)
		}
	}
	if out, _ := tl.run(cmd("DBSIZE")); out != ":0\r\n" {
		t.Fatalf("DBSIZE after refused commands = %q", out)
	}
	if out, _ := tl.run(cmd("THROTTLE.CHECK", strings.Repeat("k", 8), "10", "1m")); !strings.HasPrefix(out, "*5\r\n:1\r\n") {
		t.Fatalf("an 8-byte key: %q", out)
	}
}

func TestMaxKeyLenBounds(t *testing.T) {
	for _, n := range []int{-1, 1 << 16} {
		cfg := Config{Addr: "127.0.0.1:0", MaxKeyLen: n}
		if _, err := New(cfg, shard.New(shard.Config{Shards: 4})); err == nil {
			t.Errorf("New with MaxKeyLen %d succeeded", n)
		}
	}
}
