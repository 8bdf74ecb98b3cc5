package main

import (
	"fmt"
	"regexp"

	"github.com/throttlekit/throttlekit-server/bench/loadgen"
)

// gcraLua is Redis's side of the GCRA comparison: the generic cell rate
// algorithm as go-redis/redis_rate runs it, written from the algorithm. The
// key holds the theoretical arrival time (TAT) in milliseconds; the server's
// clock (TIME) is the only clock.
//
// ARGV: burst, rate, period_ms, cost.
// Reply: {allowed, remaining, retry_after_ms, reset_after_ms}.
const gcraLua = `
local burst = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local period = tonumber(ARGV[3])
local cost = tonumber(ARGV[4])
local emission = period / rate
local tolerance = emission * burst
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local tat = tonumber(redis.call('GET', KEYS[1]))
if tat == nil or tat < now then tat = now end
local new_tat = tat + emission * cost
local diff = now - (new_tat - tolerance)
if diff < 0 then
  return {0, 0, math.ceil(-diff), math.ceil(tat - now)}
end
local ttl = new_tat - now
redis.call('SET', KEYS[1], string.format('%.3f', new_tat), 'PX', math.ceil(ttl))
return {1, math.floor(diff / emission), 0, math.ceil(ttl)}
`

// fixedLua is the fixed-window limiter most Redis users write: INCR, and
// PEXPIRE when the window's first request created the key.
//
// ARGV: limit, window_ms. Reply: {allowed, count}.
const fixedLua = `
local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if c > tonumber(ARGV[1]) then return {0, c} end
return {1, c}
`

// Targets a workload runs against.
const (
	targetRedis = "redis"       // redis-server
	targetTK    = "throttlekit" // throttlekit-server started with -server-args
	targetTK2   = "compare"     // throttlekit-server started with -compare-args
)

// workload is one command shape sent to one server.
type workload struct {
	id     string   // stable name used in tables, charts and -run
	title  string   // what it is, for the report
	target string   // targetRedis, targetTK or targetTK2
	args   []string // the command; args[keyArg] is replaced by the key
	keyArg int      // -1: the command has no key
	prefix string   // key prefix
	script string   // if set, args[1] is replaced by the script's SHA1
	// more are further key arguments: each gets the same key index as
	// args[keyArg], behind its own prefix.
	more []loadgen.KeyArg
}

// keyed reports whether the workload's keyspace matters.
func (w *workload) keyed() bool { return w.keyArg >= 0 }

// The limits every rate-limit workload uses: 1000 per second, burst 1000.
var allWorkloads = []workload{
	{id: "redis-ping", title: "Redis PING (I/O ceiling)", target: targetRedis, args: []string{"PING"}, keyArg: -1},
	{id: "redis-incr", title: "Redis INCR", target: targetRedis, args: []string{"INCR", ""}, keyArg: 1, prefix: "i:"},
	{id: "redis-fixed-lua", title: "Redis fixed window (INCR+PEXPIRE in Lua, EVALSHA)", target: targetRedis,
		args: []string{"EVALSHA", "", "1", "", "1000", "1000"}, keyArg: 3, prefix: "f:", script: fixedLua},
	{id: "redis-gcra-lua", title: "Redis GCRA in Lua (EVALSHA)", target: targetRedis,
		args: []string{"EVALSHA", "", "1", "", "1000", "1000", "1000", "1"}, keyArg: 3, prefix: "g:", script: gcraLua},
	{id: "tk-ping", title: "throttlekit PING", target: targetTK, args: []string{"PING"}, keyArg: -1},
	{id: "tk-check", title: "throttlekit THROTTLE.CHECK gcra", target: targetTK,
		args: []string{"THROTTLE.CHECK", "", "1000", "1s"}, keyArg: 1, prefix: "t:"},
	{id: "tk-mcheck", title: "throttlekit THROTTLE.MCHECK, 2 gcra limits on 2 keys", target: targetTK,
		args: []string{"THROTTLE.MCHECK", "2", "", "1000", "1s", "gcra", "", "1000", "1s", "gcra"}, keyArg: 2, prefix: "m1:",
		more: []loadgen.KeyArg{{Pos: 6, Prefix: "m2:"}}},
	{id: "tk-cl", title: "throttlekit CL.THROTTLE", target: targetTK,
		args: []string{"CL.THROTTLE", "", "999", "1000", "1", "1"}, keyArg: 1, prefix: "c:"},
	{id: "tk-lease", title: "throttlekit THROTTLE.LEASE (BATCH 10)", target: targetTK,
		args: []string{"THROTTLE.LEASE", "", "1000", "1s", "BATCH", "10"}, keyArg: 1, prefix: "l:"},
	{id: "cmp-check", title: "THROTTLE.CHECK gcra on the -compare-args server", target: targetTK2,
		args: []string{"THROTTLE.CHECK", "", "1000", "1s"}, keyArg: 1, prefix: "t:"},
}

// command compiles w for the load generator, substituting the script SHA.
func (w *workload) command(shas map[string]string) loadgen.Command {
	keys := append([]loadgen.KeyArg{{Pos: w.keyArg, Prefix: w.prefix}}, w.more...)
	return loadgen.NewMultiKeyCommand(w.argv(shas, ""), keys...)
}

// argv returns w's arguments with its script's SHA filled in and, for a
// keyed workload with key != "", prefix+key in the key position.
func (w *workload) argv(shas map[string]string, key string) []string {
	args := append([]string(nil), w.args...)
	if w.script != "" {
		args[1] = shas[w.script]
	}
	if w.keyed() && key != "" {
		args[w.keyArg] = w.prefix + key
		for _, k := range w.more {
			args[k.Pos] = k.Prefix + key
		}
	}
	return args
}

// cellCfg is one point of the grid.
type cellCfg struct {
	conns, pipeline, keys int
	dist                  loadgen.Dist
	rate                  float64 // open loop if > 0
}

// cellID names a workload at a grid point, e.g. tk-check/c50/p16/k1000000/uniform.
func cellID(w string, c cellCfg) string {
	if c.rate > 0 {
		return fmt.Sprintf("%s/open%.0f/c%d/k%d/%s", w, c.rate, c.conns, c.keys, c.dist)
	}
	return fmt.Sprintf("%s/c%d/p%d/k%d/%s", w, c.conns, c.pipeline, c.keys, c.dist)
}

// plannedCell is a workload at a grid point.
type plannedCell struct {
	w   *workload
	cfg cellCfg
}

// plan lists the cells of a run in execution order: at each grid point every
// workload runs back to back, so drift on a shared machine hits all alike.
func plan(quick bool, haveTK, haveTK2 bool, filter *regexp.Regexp) []plannedCell {
	byID := map[string]*workload{}
	for i := range allWorkloads {
		byID[allWorkloads[i].id] = &allWorkloads[i]
	}
	avail := func(w *workload) bool {
		switch w.target {
		case targetTK:
			return haveTK
		case targetTK2:
			return haveTK2
		}
		return true
	}
	var out []plannedCell
	add := func(c cellCfg, ids ...string) {
		for _, id := range ids {
			w := byID[id]
			if !avail(w) {
				continue
			}
			if filter != nil && !filter.MatchString(cellID(id, c)) {
				continue
			}
			out = append(out, plannedCell{w, c})
		}
	}
	all := []string{"redis-ping", "redis-incr", "redis-fixed-lua", "redis-gcra-lua", "tk-ping", "tk-check", "tk-mcheck", "tk-cl", "tk-lease", "cmp-check"}
	const m = 1_000_000
	if quick {
		// PING is keyless; in quick mode it runs at the 1M point itself.
		for _, c := range []cellCfg{{50, 16, m, loadgen.Uniform, 0}, {50, 1, m, loadgen.Uniform, 0}} {
			addPing(&out, byID, c, avail, filter)
			add(c, all[1:4]...)
			add(c, all[5:]...)
		}
		for _, conns := range []int{1, 200} {
			c := cellCfg{conns, 16, m, loadgen.Uniform, 0}
			addPing(&out, byID, c, avail, filter)
			add(c, "redis-gcra-lua", "tk-check", "cmp-check")
		}
		add(cellCfg{50, 16, m, loadgen.Zipf, 0}, "redis-gcra-lua", "tk-check", "cmp-check")
		add(cellCfg{50, 1, m, loadgen.Uniform, 40_000}, "redis-incr", "redis-gcra-lua", "tk-check", "cmp-check")
		return out
	}
	for _, conns := range []int{1, 50, 200} {
		for _, p := range []int{1, 16} {
			addPing(&out, byID, cellCfg{conns, p, m, loadgen.Uniform, 0}, avail, filter)
			for _, keys := range []int{1, 10_000, m} {
				for _, d := range []loadgen.Dist{loadgen.Uniform, loadgen.Zipf} {
					if keys == 1 && d == loadgen.Zipf {
						continue // one key is one key whatever the distribution
					}
					add(cellCfg{conns, p, keys, d, 0}, all[1:4]...)
					add(cellCfg{conns, p, keys, d, 0}, all[5:]...)
				}
			}
		}
	}
	for _, rate := range []float64{20_000, 60_000} {
		add(cellCfg{50, 1, m, loadgen.Uniform, rate}, "redis-incr", "redis-gcra-lua", "tk-check", "tk-cl", "cmp-check")
	}
	return out
}

// addPing adds the PING workloads at grid point c (key settings ignored).
func addPing(out *[]plannedCell, byID map[string]*workload, c cellCfg, avail func(*workload) bool, filter *regexp.Regexp) {
	for _, id := range []string{"redis-ping", "tk-ping"} {
		w := byID[id]
		if avail(w) && (filter == nil || filter.MatchString(cellID(id, c))) {
			*out = append(*out, plannedCell{w, c})
		}
	}
}
