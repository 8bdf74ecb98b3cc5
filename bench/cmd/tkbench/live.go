package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttlekit-server/bench/loadgen"
)

// The live-key section measures the store with keys that stay live: every
// server is first warmed with one command per key name of a keyspace of
// -live-keys 16-byte names, with a 1 h period, so that the measured commands
// (random names from the same keyspace) find an existing, unexpired key, as
// a rate limiter in steady state does. Workloads with a 1 s period hide the
// store, because most keys have expired by the time they are checked again.
//
// Servers run on CPU 1 (taskset) and the load generator on CPU 0; the rows
// run back to back in each of -live-rounds rounds and the report gives
// medians, so drift on a shared machine hits every row alike.

// liveWidth zero-pads key indexes so that prefix (2 bytes) + index is 16 bytes.
const liveWidth = 14

// liveWorkload is one row of the section: a command on one of its servers.
type liveWorkload struct {
	id       string
	title    string
	target   string // liveTK, liveTKMore, liveRedis or liveRedisLua
	args     []string
	keys     []loadgen.KeyArg // none: a keyless command
	pipeline int
	script   string // if set, args[1] is the SHA1 of this script
}

// Servers of the live section. THROTTLE.CHECK and Redis INCR each have a
// server of their own, so each is measured at the same live key count; the
// other workloads share one server per program.
const (
	liveTK       = "throttlekit"
	liveTKMore   = "throttlekit-2"
	liveRedis    = "redis"
	liveRedisLua = "redis-2"
)

func liveKey(pos int, prefix string) loadgen.KeyArg {
	return loadgen.KeyArg{Pos: pos, Prefix: prefix, Width: liveWidth}
}

// liveWorkloads lists the rows. A GCRA key lives one emission interval per
// admitted request (period/limit), so the rate limits are 10 per hour: a
// warmed key lives at least 6 minutes, and longer with every later check,
// so it stays live for the whole run (the first 10 checks of a key are
// admitted, later ones denied; either way the key is read and kept). The
// lease's fixed window lasts the hour. Redis INCR keys never expire.
func liveWorkloads() []liveWorkload {
	var out []liveWorkload
	for _, p := range []int{16, 1} {
		out = append(out,
			liveWorkload{id: "live-tk-ping", title: "throttlekit PING", target: liveTK, args: []string{"PING"}, pipeline: p},
			liveWorkload{id: "live-redis-ping", title: "Redis PING", target: liveRedis, args: []string{"PING"}, pipeline: p},
			liveWorkload{id: "live-redis-incr", title: "Redis INCR", target: liveRedis, args: []string{"INCR", ""},
				keys: []loadgen.KeyArg{liveKey(1, "i:")}, pipeline: p},
			liveWorkload{id: "live-tk-check", title: "THROTTLE.CHECK gcra 10/1h", target: liveTK,
				args: []string{"THROTTLE.CHECK", "", "10", "1h"}, keys: []loadgen.KeyArg{liveKey(1, "t:")}, pipeline: p},
		)
	}
	out = append(out,
		liveWorkload{id: "live-tk-mcheck", title: "THROTTLE.MCHECK, 2 gcra limits on 2 keys", target: liveTKMore,
			args: []string{"THROTTLE.MCHECK", "2", "", "10", "1h", "gcra", "", "10", "1h", "gcra"},
			keys: []loadgen.KeyArg{liveKey(2, "m:"), liveKey(6, "n:")}, pipeline: 16},
		liveWorkload{id: "live-tk-lease", title: "THROTTLE.LEASE BATCH 10", target: liveTKMore,
			args: []string{"THROTTLE.LEASE", "", "1000", "1h", "BATCH", "10"}, keys: []loadgen.KeyArg{liveKey(1, "l:")}, pipeline: 16},
		liveWorkload{id: "live-tk-cl", title: "CL.THROTTLE 9 10/3600 s", target: liveTKMore,
			args: []string{"CL.THROTTLE", "", "9", "10", "3600", "1"}, keys: []loadgen.KeyArg{liveKey(1, "c:")}, pipeline: 16},
		liveWorkload{id: "live-redis-gcra-lua", title: "Redis GCRA in Lua, 10/1h", target: liveRedisLua,
			args: []string{"EVALSHA", "", "1", "", "10", "10", "3600000", "1"}, keys: []loadgen.KeyArg{liveKey(3, "g:")}, pipeline: 16, script: gcraLua},
	)
	return out
}

// rowID names a row, e.g. live-tk-check/p16.
func (w *liveWorkload) rowID() string { return fmt.Sprintf("%s/p%d", w.id, w.pipeline) }

func (w *liveWorkload) command(shas map[string]string) loadgen.Command {
	args := slices.Clone(w.args)
	if w.script != "" {
		args[1] = shas[w.script]
	}
	return loadgen.NewMultiKeyCommand(args, w.keys...)
}

// liveRow is the measurements of one row over the rounds.
type liveRow struct {
	w          liveWorkload
	tput, p99  []float64 // per round
	errors     int64
	lastError  string
	liveKeys   int64 // the smallest DBSIZE of its server after a measurement of the row; -1 before
	runErrText string
}

func (r *liveRow) medTput() float64 { return median(r.tput) }
func (r *liveRow) medP99() float64  { return median(r.p99) }

// liveSection is what the section measured.
type liveSection struct {
	keys, rounds int
	conns        int
	serverArgs   []string
	pin          string
	warm         []string // one line per warmed key set
	rows         []*liveRow
	memory       []memResult
	notes        []string
}

// row returns the row with the given id, or nil.
func (sec *liveSection) row(id string) *liveRow {
	for _, r := range sec.rows {
		if r.w.rowID() == id {
			return r
		}
	}
	return nil
}

// runLive runs the live-key section.
func runLive(ctx context.Context, o options, tkBin, tmp string, filter func(string) bool) *liveSection {
	sec := &liveSection{keys: o.liveKeys, rounds: o.liveRounds, conns: 50}
	pin := newPinning(o.pin)
	if pin.on {
		restore, err := pinSelf(clientCPU)
		if err != nil {
			pin = pinning{note: "Not pinned: " + err.Error()}
		} else {
			defer func() {
				if err := restore(); err != nil {
					logf("live: restoring CPU affinity: %v", err)
				}
			}()
		}
	}
	sec.pin = pin.note
	logf("live: %s", pin.note)
	sec.serverArgs = append([]string{"--loops", "1", "--maxkeys", strconv.Itoa(8 * o.liveKeys)}, strings.Fields(o.serverArgs)...)

	servers := map[string]*server{}
	for _, name := range []string{liveRedis, liveRedisLua, liveTK, liveTKMore} {
		var srv *server
		var err error
		switch {
		case name == liveRedis || name == liveRedisLua:
			srv, err = startRedisVia(pin.wrap, o.redisServer, tmp)
		case tkBin != "":
			srv, err = startThrottlekitVia(pin.wrap, tkBin, tmp, sec.serverArgs)
		default:
			continue
		}
		if err != nil {
			sec.notes = append(sec.notes, name+" not started: "+err.Error())
			continue
		}
		defer srv.stop()
		servers[name] = srv
	}
	shas := map[string]string{}
	if srv := servers[liveRedisLua]; srv != nil {
		if r, err := call(srv.addr, "SCRIPT", "LOAD", gcraLua); err == nil {
			shas[gcraLua] = bulkText(r)
		}
	}

	var rows []*liveRow
	for _, w := range liveWorkloads() {
		if servers[w.target] == nil || (filter != nil && !filter(w.rowID())) {
			continue
		}
		rows = append(rows, &liveRow{w: w})
	}
	// Warm every key set once: each keyed workload's command for every index.
	warmed := map[string]bool{}
	for _, r := range rows {
		if len(r.w.keys) == 0 || warmed[r.w.id] || ctx.Err() != nil {
			continue
		}
		warmed[r.w.id] = true
		srv := servers[r.w.target]
		fr, err := loadgen.Fill(ctx, srv.addr, r.w.command(shas), o.liveKeys, 8, 64)
		n := dbsize(srv.addr)
		line := fmt.Sprintf("%s: %d commands in %v, %d errors, server DBSIZE now %d", r.w.id, fr.Sent, fr.Elapsed.Round(time.Millisecond), fr.Errors, n)
		if err != nil || fr.LastError != "" {
			line += " (" + oneLine(fmt.Sprint(err, " ", fr.LastError)) + ")"
		}
		sec.warm = append(sec.warm, line)
		logf("live: warm %s", line)
	}
	for _, r := range rows {
		r.liveKeys = -1
	}
	for round := range sec.rounds {
		for _, r := range rows {
			if ctx.Err() != nil {
				return sec
			}
			srv := servers[r.w.target]
			res, err := loadgen.Run(ctx, loadgen.Config{
				Addr: srv.addr, Conns: sec.conns, Pipeline: r.w.pipeline, Warmup: o.warmup, Duration: o.duration,
				Cmd: r.w.command(shas), Keys: o.liveKeys, Dist: loadgen.Uniform, Seed: uint64(round + 1),
			})
			if err != nil {
				r.runErrText = err.Error()
			}
			if len(r.w.keys) > 0 { // the fewest keys its server held after a measurement
				if n := dbsize(srv.addr); r.liveKeys < 0 || n < r.liveKeys {
					r.liveKeys = n
				}
			}
			r.tput = append(r.tput, res.Throughput())
			r.p99 = append(r.p99, res.Quantile(99))
			r.errors += res.Errors
			if res.LastError != "" {
				r.lastError = res.LastError
			}
			logf("live [round %d/%d] %-28s %10.0f ops/s  p99 %8.1fµs  errors %d %s", round+1, sec.rounds, r.w.rowID(),
				res.Throughput(), res.Quantile(99), res.Errors, res.LastError)
		}
	}
	sec.rows = rows
	for _, s := range servers {
		s.stop()
	}
	if ctx.Err() == nil && o.memKeys != "none" {
		sec.memory = measureLiveMemory(ctx, o, pin.wrap, tkBin, tmp, sec.serverArgs)
	}
	return sec
}

// dbsize returns DBSIZE of the server at addr, -1 if it fails.
func dbsize(addr string) int64 {
	r, err := call(addr, "DBSIZE")
	if err != nil {
		return -1
	}
	n, err := intReply(r)
	if err != nil {
		return -1
	}
	return n
}

// liveSettle is how long the memory rows wait after loading before reading
// RSS a second time, so that the Go runtime's background scavenger has
// returned what a collection freed (Redis's allocator needs no settling).
const liveSettle = 5 * time.Second

// measureLiveMemory loads -live-keys 16-byte keys into fresh, pinned
// servers: Redis with the Lua GCRA script, Redis with SET PX (what a plain
// Redis limiter keeps per key), throttlekit with THROTTLE.CHECK. It reads
// RSS and used_memory right after the load and again after liveSettle.
func measureLiveMemory(ctx context.Context, o options, wrap []string, tkBin, tmp string, tkArgs []string) []memResult {
	n := o.liveKeys
	type probe struct {
		target, label string
		args          []string
		keyPos        int
	}
	probes := []probe{
		{liveRedis, "Redis GCRA Lua", []string{"EVALSHA", "", "1", "", "100", "100", "86400000", "1"}, 3},
		{liveRedis, "Redis SET PX", []string{"SET", "", "1800000000000.000", "PX", "86400000"}, 1},
		{liveTK, "throttlekit THROTTLE.CHECK", []string{"THROTTLE.CHECK", "", "100", "1d"}, 1},
	}
	var out []memResult
	for _, p := range probes {
		if ctx.Err() != nil {
			break
		}
		m := memResult{target: p.label, keys: n}
		var s *server
		var err error
		if p.target == liveRedis {
			s, err = startRedisVia(wrap, o.redisServer, tmp)
		} else if tkBin != "" {
			s, err = startThrottlekitVia(wrap, tkBin, tmp, tkArgs)
		} else {
			continue
		}
		if err != nil {
			m.err = err.Error()
			out = append(out, m)
			continue
		}
		args := slices.Clone(p.args)
		if args[0] == "EVALSHA" {
			if r, err := call(s.addr, "SCRIPT", "LOAD", gcraLua); err == nil {
				args[1] = bulkText(r)
			}
		}
		fillAndMeasure(ctx, s, loadgen.NewMultiKeyCommand(args, liveKey(p.keyPos, "g:")), &m)
		time.Sleep(liveSettle)
		m.rssSettled, _ = rssBytes(s.pid())
		m.usedSettled = usedMemory(s.addr)
		s.stop()
		out = append(out, m)
		logf("live memory %-28s %d keys: RSS %.1f B/key (settled %.1f), used_memory %.1f B/key (settled %.1f) %s%s",
			m.target, m.dbsize, m.rssPerKey(), m.settledRSSPerKey(), m.usedPerKey(), m.settledUsedPerKey(), m.lastError, m.err)
	}
	return out
}

// writeLive writes the live-key section of the report.
func writeLive(sec *liveSection, p func(string, ...any)) {
	if sec == nil {
		return
	}
	p("## Live keys: the store at %s live keys (medians of %d interleaved rounds)\n\n", keysLabel(sec.keys), sec.rounds)
	p("Every keyed workload's key set is first warmed with one command per key name (%s 16-byte names: a 2-byte prefix and %d digits), "+
		"with a 1 h period (10 per hour: a GCRA key lives 6 minutes per admitted check) so that no key expires during the run; the measured commands then draw uniform random names "+
		"from the same keyspace, so each finds a live key. %d connections; throttlekit runs with `%s`. %s. "+
		"Each round runs every row back to back; the table gives the median over the rounds (throughput and p99 separately).\n\n",
		keysLabel(sec.keys), liveWidth, sec.conns, strings.Join(sec.serverArgs, " "), sec.pin)
	for _, w := range sec.warm {
		p("- warmed %s\n", w)
	}
	p("\n")
	med := func(id string) (*liveRow, float64) {
		r := sec.row(id)
		if r == nil || len(r.tput) == 0 || r.errors > 0 {
			return r, 0
		}
		return r, r.medTput()
	}
	p("| row | throttlekit ops/s | baseline ops/s | ratio | keys held, fewest after a round (tk / baseline) |\n|---|---|---|---|---|\n")
	pair := func(label, a, b string) {
		ra, va := med(a)
		rb, vb := med(b)
		if ra == nil || rb == nil {
			return
		}
		ratio := "–"
		if va > 0 && vb > 0 {
			ratio = fmt.Sprintf("%.2fx", va/vb)
		}
		p("| %s | %s | %s | %s | %s / %s |\n", label, fmtNum(va), fmtNum(vb), ratio, liveKeysText(ra), liveKeysText(rb))
		if a == "live-tk-check/p1" && b == "live-redis-incr/p1" {
			p("| p99 at P=1: THROTTLE.CHECK vs Redis INCR | %.0f µs | %.0f µs | %.2fx | |\n", ra.medP99(), rb.medP99(), ra.medP99()/max(rb.medP99(), 1))
		}
	}
	pair("THROTTLE.CHECK P=16 vs own PING P=16", "live-tk-check/p16", "live-tk-ping/p16")
	pair("THROTTLE.CHECK P=16 vs Redis PING P=16", "live-tk-check/p16", "live-redis-ping/p16")
	pair("THROTTLE.CHECK P=16 vs Redis INCR P=16", "live-tk-check/p16", "live-redis-incr/p16")
	pair("THROTTLE.CHECK P=1 vs Redis INCR P=1", "live-tk-check/p1", "live-redis-incr/p1")
	pair("THROTTLE.CHECK P=1 vs own PING P=1", "live-tk-check/p1", "live-tk-ping/p1")
	pair("THROTTLE.MCHECK (2 keys) P=16 vs THROTTLE.CHECK P=16", "live-tk-mcheck/p16", "live-tk-check/p16")
	pair("THROTTLE.LEASE P=16 vs THROTTLE.CHECK P=16", "live-tk-lease/p16", "live-tk-check/p16")
	pair("CL.THROTTLE P=16 vs THROTTLE.CHECK P=16", "live-tk-cl/p16", "live-tk-check/p16")
	pair("THROTTLE.CHECK P=16 vs Redis GCRA Lua P=16", "live-tk-check/p16", "live-redis-gcra-lua/p16")
	p("\n| row | median ops/s | median p99 | rounds ops/s | errors |\n|---|---|---|---|---|\n")
	for _, r := range sec.rows {
		var each []string
		for _, v := range r.tput {
			each = append(each, fmtNum(v))
		}
		errs := fmt.Sprint(r.errors)
		if r.lastError != "" || r.runErrText != "" {
			errs += " " + mdCell(r.lastError+" "+r.runErrText)
		}
		p("| %s (%s) | %s | %.0f µs | %s | %s |\n", r.w.rowID(), r.w.title, fmtNum(r.medTput()), r.medP99(), strings.Join(each, ", "), errs)
	}
	p("\n")
	if len(sec.memory) > 0 {
		p("### Memory per live key (%s 16-byte keys, fresh pinned servers)\n\n", keysLabel(sec.keys))
		p("Bytes per key = (after - before) / DBSIZE, read right after the load and again %v later (settled). "+
			"used_memory is Redis's allocator figure and, for throttlekit, the Go heap in use plus its index tables mapped outside the heap.\n\n", liveSettle)
		p("| server | DBSIZE | RSS B/key | RSS B/key settled | used_memory B/key | used_memory B/key settled | load time | errors |\n|---|---|---|---|---|---|---|---|\n")
		for _, m := range sec.memory {
			errs := fmt.Sprint(m.errors)
			if m.lastError != "" || m.err != "" {
				errs += " " + mdCell(m.lastError+" "+m.err)
			}
			p("| %s | %d | %.1f | %.1f | %.1f | %.1f | %v | %s |\n", m.target, m.dbsize, m.rssPerKey(), m.settledRSSPerKey(),
				m.usedPerKey(), m.settledUsedPerKey(), m.loadTime.Round(time.Millisecond), errs)
		}
		p("\n")
	}
	for _, n := range sec.notes {
		p("- %s\n", n)
	}
}

func liveKeysText(r *liveRow) string {
	if len(r.w.keys) == 0 {
		return "–"
	}
	return strconv.FormatInt(r.liveKeys, 10)
}

// writeLiveTargets adds the live section's targets (issue 21) to the
// Targets table: ratios of medians, and memory per live key after settling.
func writeLiveTargets(sec *liveSection, p func(string, ...any), verdict func(ok, have bool) string) {
	if sec == nil {
		return
	}
	med := func(id string, f func(*liveRow) float64) (float64, bool) {
		r := sec.row(id)
		if r == nil || len(r.tput) == 0 || r.errors > 0 {
			return 0, false
		}
		return f(r), true
	}
	tput := (*liveRow).medTput
	p99 := (*liveRow).medP99
	t := func(name, a, b string, f func(*liveRow) float64, want float64, higher bool) {
		va, oka := med(a, f)
		vb, okb := med(b, f)
		have := oka && okb && vb > 0
		meas, x := "–", 0.0
		if have {
			x = va / vb
			meas = fmt.Sprintf("%.2fx (%s vs %s)", x, fmtNum(va), fmtNum(vb))
		}
		p("| %s | %s | %s |\n", name, meas, verdict((higher && x >= want) || (!higher && x <= want), have))
	}
	k := keysLabel(sec.keys)
	t("live keys ("+k+"): THROTTLE.CHECK P=16 >= 1.0x own PING P=16 (ops/s)", "live-tk-check/p16", "live-tk-ping/p16", tput, 1.0, true)
	t("live keys ("+k+"): THROTTLE.CHECK P=16 >= 1.0x Redis PING P=16 (ops/s)", "live-tk-check/p16", "live-redis-ping/p16", tput, 1.0, true)
	t("live keys ("+k+"): THROTTLE.CHECK P=1 >= 1.1x Redis INCR P=1 (ops/s)", "live-tk-check/p1", "live-redis-incr/p1", tput, 1.1, true)
	t("live keys ("+k+"): THROTTLE.CHECK P=1 p99 <= Redis INCR P=1 p99 (µs), closed loop", "live-tk-check/p1", "live-redis-incr/p1", p99, 1.0, false)
	var tk, lua *memResult
	for i := range sec.memory {
		switch sec.memory[i].target {
		case "throttlekit THROTTLE.CHECK":
			tk = &sec.memory[i]
		case "Redis GCRA Lua":
			lua = &sec.memory[i]
		}
	}
	have := tk != nil && tk.settledRSSPerKey() > 0
	meas := "–"
	if have {
		meas = fmt.Sprintf("%.1f B/key (used_memory %.1f)", tk.settledRSSPerKey(), tk.settledUsedPerKey())
	}
	p("| live keys (%s): RSS per key after settling <= 48 B | %s | %s |\n", k, meas, verdict(have && tk.settledRSSPerKey() <= 48, have))
	have = have && lua != nil && lua.settledRSSPerKey() > 0
	meas, x := "–", 0.0
	if have {
		x = tk.settledRSSPerKey() / lua.settledRSSPerKey()
		meas = fmt.Sprintf("%.2fx (%.1f vs %.1f B/key)", x, tk.settledRSSPerKey(), lua.settledRSSPerKey())
	}
	p("| live keys (%s): RSS per key <= 0.3x Redis Lua GCRA | %s | %s |\n", k, meas, verdict(x <= 0.3, have))
}
