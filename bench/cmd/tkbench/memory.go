package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttlekit-server/bench/loadgen"
)

// memResult is the memory held by one server after loading keys distinct
// GCRA keys into a freshly started process.
type memResult struct {
	target                string
	keys                  int
	dbsize                int64
	rssBefore, rssAfter   int64
	usedBefore, usedAfter int64 // INFO used_memory (Redis: allocator; throttlekit: Go heap in use plus off-heap index tables)
	// rssSettled and usedSettled are read a while after the load (the live
	// section's memory rows), 0 when not measured.
	rssSettled, usedSettled int64
	loadTime                time.Duration
	errors                  int64
	lastError, err          string
}

func (m *memResult) rssPerKey() float64 {
	if m.dbsize <= 0 {
		return 0
	}
	return float64(m.rssAfter-m.rssBefore) / float64(m.dbsize)
}

func (m *memResult) usedPerKey() float64 {
	if m.dbsize <= 0 || m.usedAfter == 0 {
		return 0
	}
	return float64(m.usedAfter-m.usedBefore) / float64(m.dbsize)
}

func (m *memResult) settledRSSPerKey() float64 {
	if m.dbsize <= 0 || m.rssSettled == 0 {
		return 0
	}
	return float64(m.rssSettled-m.rssBefore) / float64(m.dbsize)
}

func (m *memResult) settledUsedPerKey() float64 {
	if m.dbsize <= 0 || m.usedSettled == 0 {
		return 0
	}
	return float64(m.usedSettled-m.usedBefore) / float64(m.dbsize)
}

// Keys for the memory test live for a day, so none expires while loading:
// 100 per day, one unit each, on both servers.
var (
	memRedisArgs = []string{"EVALSHA", "", "1", "", "100", "100", "86400000", "1"}
	memTKArgs    = []string{"THROTTLE.CHECK", "", "100", "1d"}
)

// measureMemory loads each requested number of distinct keys into a fresh
// redis-server and a fresh throttlekit-server and reads their memory.
func measureMemory(ctx context.Context, o options, tkBin, dir string, shas map[string]string) []memResult {
	var out []memResult
	for _, f := range strings.Split(o.memKeys, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			logf("mem-keys: skipping %q", f)
			continue
		}
		// Redis with the Lua GCRA script.
		m := memResult{target: targetRedis, keys: n}
		if r, err := startRedis(o.redisServer, dir); err != nil {
			m.err = err.Error()
		} else {
			args := append([]string(nil), memRedisArgs...)
			if sr, err := call(r.addr, "SCRIPT", "LOAD", gcraLua); err == nil {
				args[1] = bulkText(sr)
			}
			fillAndMeasure(ctx, r, loadgen.NewCommand(args, 3, "g:"), &m)
			r.stop()
		}
		out = append(out, m)
		logf("memory %-11s %9d keys: dbsize %d, RSS %+.1f B/key, used_memory %+.1f B/key, load %v %s%s",
			m.target, n, m.dbsize, m.rssPerKey(), m.usedPerKey(), m.loadTime.Round(time.Millisecond), m.lastError, m.err)
		if ctx.Err() != nil || tkBin == "" {
			continue
		}
		// throttlekit with room for every key, so nothing is evicted.
		m = memResult{target: targetTK, keys: n}
		extra := append(strings.Fields(o.serverArgs), "--maxkeys", strconv.Itoa(n+n/4))
		if s, err := startThrottlekit(tkBin, dir, extra); err != nil {
			m.err = err.Error()
		} else {
			fillAndMeasure(ctx, s, loadgen.NewCommand(memTKArgs, 1, "g:"), &m)
			s.stop()
		}
		out = append(out, m)
		logf("memory %-11s %9d keys: dbsize %d, RSS %+.1f B/key, used_memory %+.1f B/key, load %v %s%s",
			m.target, n, m.dbsize, m.rssPerKey(), m.usedPerKey(), m.loadTime.Round(time.Millisecond), m.lastError, m.err)
	}
	return out
}

func fillAndMeasure(ctx context.Context, s *server, cmd loadgen.Command, m *memResult) {
	m.rssBefore, _ = rssBytes(s.pid())
	m.usedBefore = usedMemory(s.addr)
	fr, err := loadgen.Fill(ctx, s.addr, cmd, m.keys, 8, 64)
	m.loadTime, m.errors, m.lastError = fr.Elapsed, fr.Errors, fr.LastError
	if err != nil {
		m.err = err.Error()
		return
	}
	if r, err := call(s.addr, "DBSIZE"); err == nil {
		m.dbsize, _ = intReply(r)
	} else {
		m.err = fmt.Sprintf("DBSIZE: %v", err)
	}
	m.rssAfter, _ = rssBytes(s.pid())
	m.usedAfter = usedMemory(s.addr)
}

// usedMemory reads used_memory from INFO memory, 0 if absent.
func usedMemory(addr string) int64 {
	r, err := call(addr, "INFO", "memory")
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(infoField(r, "used_memory"), 10, 64)
	return v
}
