package server

import (
	"regexp"
	"strconv"
	"testing"
)

// maxmemoryLines matches the lines of INFO memory that report the limit.
var maxmemoryLines = regexp.MustCompile(`(?m)^maxmemory(_human)?:.*\r\n`)

// TestInfoMaxMemory: INFO memory reports the configured maxmemory in bytes
// and as redis-server writes it for humans (compared with a real
// redis-server at the same setting), and the eviction policy's Redis name.
func TestInfoMaxMemory(t *testing.T) {
	rc := startRedis(t)
	for _, n := range []int64{0, 1000, 1023, 1024, 1536, 64 << 20, 3 << 30, 5 << 40, 3 << 50, 1 << 60} {
		tl := newTestLoop(t, func(c *Config) { c.MaxMemory = n })
		got, _ := tl.run(cmd("INFO", "memory"))
		if r := rc.do(t, "CONFIG", "SET", "maxmemory", strconv.FormatInt(n, 10)); r != "+OK\r\n" {
			t.Fatalf("redis-server CONFIG SET maxmemory %d: %q", n, r)
		}
		want := rc.do(t, "INFO", "memory")
		g, w := maxmemoryLines.FindAllString(got, -1), maxmemoryLines.FindAllString(want, -1)
		if len(w) != 2 || len(g) != 2 || g[0] != w[0] || g[1] != w[1] {
			t.Errorf("maxmemory %d: INFO memory says %q, redis-server %q", n, g, w)
		}
		if !regexp.MustCompile(`(?m)^maxmemory_policy:allkeys-lru\r$`).MatchString(got) {
			t.Errorf("maxmemory %d: INFO memory has no maxmemory_policy:allkeys-lru:\n%s", n, got)
		}
	}
	// Redis's own field names, in its order.
	want := rc.do(t, "INFO", "memory")
	order := regexp.MustCompile(`(?m)^(maxmemory|maxmemory_human|maxmemory_policy):`)
	var names []string
	for _, m := range order.FindAllStringSubmatch(want, -1) {
		names = append(names, m[1])
	}
	if len(names) != 3 || names[0] != "maxmemory" || names[1] != "maxmemory_human" || names[2] != "maxmemory_policy" {
		t.Fatalf("redis-server's INFO memory fields: %q", names)
	}
}
