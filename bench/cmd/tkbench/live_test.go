package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestLiveWorkloads checks that every keyed row of the live section sends
// 16-byte key names, that each row the report pairs exists, and that the
// rows THROTTLE.CHECK is compared with run at its pipeline depth.
func TestLiveWorkloads(t *testing.T) {
	ids := map[string]bool{}
	keyRe := regexp.MustCompile(`\$16\r\n([a-z]:[0-9]{14})\r\n`)
	for _, w := range liveWorkloads() {
		ids[w.rowID()] = true
		cmd := w.command(map[string]string{gcraLua: "sha"})
		got, _ := cmd.Append(nil, nil, 999_999)
		if n := len(keyRe.FindAllSubmatch(got, -1)); n != len(w.keys) {
			t.Errorf("%s: %d 16-byte keys in %q, want %d", w.rowID(), n, got, len(w.keys))
		}
		if len(w.keys) > 0 && !strings.Contains(string(got), "00000000999999") {
			t.Errorf("%s: key index not padded in %q", w.rowID(), got)
		}
	}
	for _, id := range []string{"live-tk-check/p16", "live-tk-ping/p16", "live-redis-ping/p16", "live-redis-incr/p16",
		"live-tk-check/p1", "live-redis-incr/p1", "live-tk-mcheck/p16", "live-tk-lease/p16", "live-tk-cl/p16", "live-redis-gcra-lua/p16"} {
		if !ids[id] {
			t.Errorf("row %s missing", id)
		}
	}
}

// TestWriteLive checks the report of the live section: ratios of medians
// over the rounds, a row with errors left out of ratios, the p99 row.
func TestWriteLive(t *testing.T) {
	rows := map[string]*liveRow{}
	sec := &liveSection{keys: 1_000_000, rounds: 3, conns: 50}
	for _, w := range liveWorkloads() {
		r := &liveRow{w: w, liveKeys: 1_000_000}
		rows[w.rowID()] = r
		sec.rows = append(sec.rows, r)
	}
	rows["live-tk-check/p16"].tput = []float64{300_000, 900_000, 600_000} // median 600k
	rows["live-tk-ping/p16"].tput = []float64{800_000, 700_000, 750_000}  // median 750k
	rows["live-tk-check/p1"].tput = []float64{60_000, 60_000, 60_000}
	rows["live-tk-check/p1"].p99 = []float64{100, 300, 200}
	rows["live-redis-incr/p1"].tput = []float64{50_000, 50_000, 50_000}
	rows["live-redis-incr/p1"].p99 = []float64{400, 400, 400}
	rows["live-redis-ping/p16"].tput = []float64{1, 2, 3}
	rows["live-redis-ping/p16"].errors = 1
	var b strings.Builder
	writeLive(sec, func(f string, a ...any) { fmt.Fprintf(&b, f, a...) })
	sec.memory = []memResult{
		{target: "throttlekit THROTTLE.CHECK", keys: 1_000_000, dbsize: 1_000_000, rssBefore: 10e6, rssSettled: 66e6, usedSettled: 54e6},
		{target: "Redis GCRA Lua", keys: 1_000_000, dbsize: 1_000_000, rssBefore: 10e6, rssSettled: 175e6, usedSettled: 161e6},
	}
	writeLiveTargets(sec, func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }, func(ok, have bool) string {
		if !have {
			return "not measured"
		}
		if ok {
			return "met"
		}
		return "missed"
	})
	out := b.String()
	for _, want := range []string{
		"| live keys (1M): THROTTLE.CHECK P=16 >= 1.0x own PING P=16 (ops/s) | 0.80x (600k vs 750k) | missed |",
		"| live keys (1M): THROTTLE.CHECK P=16 >= 1.0x Redis PING P=16 (ops/s) | – | not measured |",
		"| live keys (1M): THROTTLE.CHECK P=1 >= 1.1x Redis INCR P=1 (ops/s) | 1.20x (60k vs 50k) | met |",
		"| live keys (1M): THROTTLE.CHECK P=1 p99 <= Redis INCR P=1 p99 (µs), closed loop | 0.50x (200 vs 400) | met |",
		"| live keys (1M): RSS per key after settling <= 48 B | 56.0 B/key (used_memory 54.0) | missed |",
		"| live keys (1M): RSS per key <= 0.3x Redis Lua GCRA | 0.34x (56.0 vs 165.0 B/key) | missed |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("targets lack %q:\n%s", want, out)
		}
	}
	for _, want := range []string{
		"| THROTTLE.CHECK P=16 vs own PING P=16 | 600k | 750k | 0.80x | 1000000 / – |",
		"| THROTTLE.CHECK P=1 vs Redis INCR P=1 | 60k | 50k | 1.20x | 1000000 / 1000000 |",
		"| p99 at P=1: THROTTLE.CHECK vs Redis INCR | 200 µs | 400 µs | 0.50x | |",
		"| THROTTLE.CHECK P=16 vs Redis PING P=16 | 600k | 0.0 | – |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
