package server

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// replyInts returns the integers of a RESP2 reply in wire order and its
// bulk strings (nil bulks as "").
func replyInts(s string) (ints []int64, bulks []string) {
	lines := strings.Split(s, "\r\n")
	for i := 0; i < len(lines); i++ {
		ln := lines[i]
		switch {
		case strings.HasPrefix(ln, ":"):
			n, _ := strconv.ParseInt(ln[1:], 10, 64)
			ints = append(ints, n)
		case ln == "$-1":
			bulks = append(bulks, "")
		case strings.HasPrefix(ln, "$"):
			bulks = append(bulks, lines[i+1])
			i++
		}
	}
	return ints, bulks
}

// at runs one command at the injected clock now (ns) and returns its reply.
func (tl *testLoop) at(now int64, args ...string) string {
	tl.l.process(tl.cl, []byte(cmd(args...)), now)
	return tl.take()
}

// The property tests of the admission operations (MCHECK, RESERVE and
// SETTLE, the penalty box, ACQUIRE) run against package limits directly:
// limits/admission_test.go. These tests cover the commands' parsing,
// replies, allocations and INFO fields.

// FuzzAdmissionArgs: no argument list makes an admission command panic or
// leave a shard locked (a second call would then hang).
func FuzzAdmissionArgs(f *testing.F) {
	f.Add("THROTTLE.MCHECK 2 a 1 1s gcra b 1 1s fixed COST 2")
	f.Add("THROTTLE.RESERVE k 10 1s COST 3 TTL 5s")
	f.Add("THROTTLE.SETTLE k 1.1.10.1000000000 4")
	f.Add("THROTTLE.CHECK k 1 1s BAN 2 1m")
	f.Add("THROTTLE.ACQUIRE k 3 1s")
	f.Add("THROTTLE.RELEASE k 0.1")
	f.Add("THROTTLE.REFRESH k 0.1 1s")
	tl := newTestLoop(f, nil)
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		if len(args) == 0 || len(args) > 40 {
			return
		}
		now := int64(1_700_000_000_000_000_000)
		tl.l.process(tl.cl, []byte(cmd(args...)), now)
		tl.l.process(tl.cl, []byte(cmd(args...)), now)
		tl.take()
	})
}

// TestAdmissionZeroAlloc: once their keys and records exist, MCHECK,
// CHECK with BAN, BANNED and ACQUIRE allocate nothing per command.
func TestAdmissionZeroAlloc(t *testing.T) {
	if admRace {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	tl := newTestLoop(t, nil)
	var in []byte
	for i := 0; i < 32; i++ {
		in = append(in, cmd("THROTTLE.MCHECK", "2", fmt.Sprintf("a%d", i), "1000000", "1s", "gcra",
			fmt.Sprintf("b%d", i), "1000000", "1s", "fixed")...)
		in = append(in, cmd("THROTTLE.CHECK", fmt.Sprintf("z%d", i), "1", "1h", "BAN", "1000000", "1h")...)
		in = append(in, cmd("THROTTLE.BANNED", fmt.Sprintf("z%d", i))...)
		in = append(in, cmd("THROTTLE.ACQUIRE", fmt.Sprintf("s%d", i), "1", "1h")...)
	}
	now := time.Now().UnixNano()
	tl.l.process(tl.cl, in, now)
	tl.l.out = tl.l.out[:0]
	var seen []float64
	for range 5 {
		allocs := testing.AllocsPerRun(20, func() {
			now += 1000
			tl.l.process(tl.cl, in, now)
			tl.l.out = tl.l.out[:0]
		})
		if allocs == 0 {
			return
		}
		seen = append(seen, allocs)
	}
	t.Fatalf("allocations per batch in 5 attempts: %v, want 0 in at least one", seen)
}

// lastBulk returns the last bulk string of a RESP2 reply, without allocating.
func lastBulk(out []byte) []byte {
	i := bytes.LastIndexByte(out, '$')
	j := bytes.IndexByte(out[i:], '\r') + i
	n, _ := strconv.Atoi(string(out[i+1 : j]))
	return out[j+2 : j+2+n]
}

// appendCmd appends args as a multibulk, without allocating once dst has grown.
func appendCmd(dst []byte, args ...[]byte) []byte {
	dst = strconv.AppendInt(append(dst, '*'), int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = strconv.AppendInt(append(dst, '$'), int64(len(a)), 10)
		dst = append(append(append(dst, '\r', '\n'), a...), '\r', '\n')
	}
	return dst
}

// benchPair measures a command whose second half needs the first's reply:
// RESERVE then SETTLE, ACQUIRE then RELEASE. One op is the pair, both
// through the dispatcher; the test side allocates nothing once warm.
func benchPair(b *testing.B, first []byte, second func(dst, bulk []byte) []byte) {
	pair := newPair(b, first, second)
	b.ReportAllocs()
	for b.Loop() {
		pair()
	}
}

// newPair returns a function that runs first, then second built from the
// last bulk of first's reply, 1µs later each time, on one test loop.
func newPair(t testing.TB, first []byte, second func(dst, bulk []byte) []byte) func() {
	tl := newTestLoop(t, nil)
	now := time.Now().UnixNano()
	var buf, out []byte
	return func() {
		now += 1000
		tl.l.process(tl.cl, first, now)
		out = append(out[:0], lastBulk(tl.l.out)...)
		tl.l.out = tl.l.out[:0]
		buf = second(buf[:0], out)
		tl.l.process(tl.cl, buf, now)
		if string(tl.l.out) != ":1\r\n" {
			t.Fatalf("second command: %q", tl.l.out)
		}
		tl.l.out = tl.l.out[:0]
	}
}

// admissionPairs are the commands whose second half needs the first's
// reply, as BenchmarkDispatchAdmission and TestAdmissionPairsZeroAlloc
// run them.
var admissionPairs = []struct {
	name   string
	first  []byte
	second func(dst, bulk []byte) []byte
}{
	{"reserve+settle", []byte(cmd("THROTTLE.RESERVE", "rk", "1000000000", "1s", "COST", "5")),
		func(dst, id []byte) []byte {
			return appendCmd(dst, []byte("THROTTLE.SETTLE"), []byte("rk"), id, []byte("3"))
		}},
	{"acquire+release", []byte(cmd("THROTTLE.ACQUIRE", "ak", "10", "1s")),
		func(dst, tok []byte) []byte { return appendCmd(dst, []byte("THROTTLE.RELEASE"), []byte("ak"), tok) }},
	// ttl 10µs and 1µs between runs: about ten slots are held at once,
	// under the limit of 16, so every ACQUIRE gets a token. (ACQUIRE looks
	// at up to limit slots: its cost grows with it.)
	{"acquire+refresh", []byte(cmd("THROTTLE.ACQUIRE", "fk", "16", "10us")),
		func(dst, tok []byte) []byte {
			return appendCmd(dst, []byte("THROTTLE.REFRESH"), []byte("fk"), tok, []byte("10us"))
		}},
}

// TestAdmissionPairsZeroAlloc: RESERVE+SETTLE, ACQUIRE+RELEASE and
// ACQUIRE+REFRESH allocate nothing per pair once warm. A reservation's
// record key lives in the internal store's key arena, whose occasional
// growth is amortized over many pairs (AllocsPerRun's average truncates
// it); an allocation on every pair fails.
func TestAdmissionPairsZeroAlloc(t *testing.T) {
	if admRace {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items)")
	}
	for _, p := range admissionPairs {
		t.Run(p.name, func(t *testing.T) {
			pair := newPair(t, p.first, p.second)
			for range 1000 {
				pair()
			}
			var seen []float64
			for range 5 {
				allocs := testing.AllocsPerRun(500, pair)
				if allocs == 0 {
					return
				}
				seen = append(seen, allocs)
			}
			t.Fatalf("allocations per pair in 5 attempts: %v, want 0 in at least one", seen)
		})
	}
}

// BenchmarkDispatchAdmission measures the admission commands through the
// dispatcher, next to THROTTLE.CHECK in the same run (for the MCHECK
// ratio).
func BenchmarkDispatchAdmission(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	b.Run("throttle.check/gcra", func(b *testing.B) {
		benchDispatch(b, func(i int) string { return cmd("THROTTLE.CHECK", keys[i%len(keys)], "1000000", "1s") }, 256, false)
	})
	b.Run("throttle.mcheck/1", func(b *testing.B) {
		benchDispatch(b, func(i int) string {
			return cmd("THROTTLE.MCHECK", "1", keys[i%len(keys)], "1000000", "1s", "gcra")
		}, 256, false)
	})
	b.Run("throttle.mcheck/2", func(b *testing.B) {
		benchDispatch(b, func(i int) string {
			return cmd("THROTTLE.MCHECK", "2", keys[i%len(keys)], "1000000", "1s", "gcra", keys[(i+512)%len(keys)], "1000000", "1s", "gcra")
		}, 256, false)
	})
	b.Run("throttle.mcheck/4/resp3", func(b *testing.B) {
		benchDispatch(b, func(i int) string {
			return cmd("THROTTLE.MCHECK", "4", keys[i%len(keys)], "1000000", "1s", "gcra", keys[(i+256)%len(keys)], "1000000", "1s", "token",
				keys[(i+512)%len(keys)], "1000000", "1s", "fixed", keys[(i+768)%len(keys)], "1000000", "1s", "sliding")
		}, 256, true)
	})
	b.Run("throttle.check/ban", func(b *testing.B) {
		benchDispatch(b, func(i int) string {
			return cmd("THROTTLE.CHECK", keys[i%len(keys)], "1000000", "1s", "BAN", "10", "1m")
		}, 256, false)
	})
	b.Run("throttle.banned", func(b *testing.B) {
		benchDispatch(b, func(i int) string { return cmd("THROTTLE.BANNED", keys[i%len(keys)]) }, 256, false)
	})
	b.Run("throttle.acquire/denied", func(b *testing.B) {
		// limit 1, ttl 1h: the first call per key holds the slot, the rest are denied.
		benchDispatch(b, func(i int) string { return cmd("THROTTLE.ACQUIRE", keys[i%len(keys)], "1", "1h") }, 256, false)
	})
	for _, p := range admissionPairs {
		b.Run("throttle."+p.name, func(b *testing.B) { benchPair(b, p.first, p.second) })
	}
	b.Run("throttle.unban", func(b *testing.B) {
		benchDispatch(b, func(i int) string { return cmd("THROTTLE.UNBAN", keys[i%len(keys)]) }, 256, false)
	})
}

// TestAdmissionRecordsFull: a full record store refuses new slots and
// reservations with -OOM, charging nothing, and never drops a held slot, a
// running ban or an open reservation to make room.
func TestAdmissionRecordsFull(t *testing.T) {
	tl := newTestLoop(t, func(c *Config) { c.AdmissionMaxRecords = 6400 })
	now := time.Now().UnixNano()
	if ints, _ := replyInts(tl.at(now, "THROTTLE.ACQUIRE", "sem", "1", "1h")); ints[0] != 1 {
		t.Fatalf("first ACQUIRE: %v", ints)
	}
	_, bulks := replyInts(tl.at(now, "THROTTLE.RESERVE", "kept", "100", "1h", "COST", "5", "ALGO", "fixed"))
	kept := bulks[0]
	for i := 0; i < 3; i++ {
		tl.at(now, "THROTTLE.CHECK", "hammer", "1", "1h", "BAN", "2", "1h")
	}
	if r := tl.at(now, "THROTTLE.BANNED", "hammer"); r == ":0\r\n" {
		t.Fatalf("hammer not banned: %q", r)
	}
	// Flood reservations on other keys until the store is full, and on.
	admitted, refused := 0, 0
	for i := 0; i < 20_000; i++ {
		r := tl.at(now, "THROTTLE.RESERVE", fmt.Sprintf("flood:%d", i%50), "1000000", "1h", "COST", "1", "ALGO", "fixed")
		switch {
		case strings.HasPrefix(r, "-OOM admission records full"):
			refused++
		case strings.HasPrefix(r, "*6\r\n:1\r\n"):
			admitted++
		default:
			t.Fatalf("RESERVE %d: %q", i, r)
		}
	}
	st := tl.srv.core.RecordStats()
	if refused == 0 || admitted == 0 || st.Keys > 6400 || st.Evicted != 0 {
		t.Fatalf("admitted %d, refused %d, records %+v", admitted, refused, st)
	}
	// A refused RESERVE charged nothing: the flood keys used exactly what
	// was admitted.
	used := int64(0)
	for k := 0; k < 50; k++ {
		if s, ok := tl.srv.core.Get([]byte(fmt.Sprintf("flood:%d", k)), now, nil); ok {
			used += s.B
		}
	}
	if used != int64(admitted) {
		t.Fatalf("flood keys used %d, want the %d admitted", used, admitted)
	}
	// Nothing held was dropped: the slot, the ban and the reservation.
	if ints, _ := replyInts(tl.at(now, "THROTTLE.ACQUIRE", "sem", "1", "1h")); ints[0] != 0 || ints[2] != 1 {
		t.Fatalf("ACQUIRE on a held slot after the flood: %v", ints)
	}
	if r := tl.at(now, "THROTTLE.BANNED", "hammer"); r == ":0\r\n" {
		t.Fatal("the ban was lifted by the flood")
	}
	if r := tl.at(now, "THROTTLE.SETTLE", "kept", kept, "2"); r != ":1\r\n" {
		t.Fatalf("SETTLE of a reservation made before the flood: %q", r)
	}
	// A full store refuses a new slot with -OOM, not a denial.
	for i := 0; ; i++ {
		r := tl.at(now, "THROTTLE.ACQUIRE", fmt.Sprintf("other:%d", i), "5", "1h")
		if strings.HasPrefix(r, "-OOM ") {
			break
		}
		if i == 10_000 {
			t.Fatal("no ACQUIRE refused in a full store")
		}
	}
	// Room comes back as records expire.
	later := now + int64(2*time.Hour)
	if ints, _ := replyInts(tl.at(later, "THROTTLE.ACQUIRE", "sem", "1", "1h")); ints[0] != 1 {
		t.Fatalf("ACQUIRE after every record expired: %v", ints)
	}
	st = tl.srv.core.RecordStats()
	r := tl.at(later, "INFO", "throttle")
	for _, want := range []string{
		"admission_maxrecords:6400\r\n",
		fmt.Sprintf("admission_maxmemory:%d\r\n", DefaultAdmissionMaxMemory),
		fmt.Sprintf("admission_records:%d\r\n", st.Keys),
		fmt.Sprintf("admission_records_bytes:%d\r\n", st.Bytes),
	} {
		if !strings.Contains(r, want) {
			t.Fatalf("INFO throttle lacks %q: %q", want, r)
		}
	}
}
