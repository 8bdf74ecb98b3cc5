package server

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
)

// TestLimitCacheMatchesParsing drives random argument lists through
// limitArgs on a loop whose limitCache is kept and on one whose cache is
// emptied before every call, and requires the same outcome: the same
// reply bytes (errors included), and on success the same engine.Limit and
// cost. The lists repeat often, also with one byte changed or in another
// case, so the cache hits and is tested for exactness; the argument bytes
// are overwritten after every call, so a cache that kept a reference to
// them instead of a copy would answer wrongly.
func TestLimitCacheMatchesParsing(t *testing.T) {
	cached := newTestLoop(t, func(c *Config) { c.MaxKeyLen = 8 })
	fresh := newTestLoop(t, func(c *Config) { c.MaxKeyLen = 8 })
	rng := rand.New(rand.NewSource(21))
	pick := func(words ...string) string { return words[rng.Intn(len(words))] }
	limitWords := []string{"1", "10", "1000000", "0", "-5", "abc", "", "+1", "007", "9223372036854775807",
		"9223372036854775808", "1234567890123456", "12345678901234567", "1e3", "99999999"}
	periodWords := []string{"1s", "1S", "1000ms", "1000MS", "60m", "1h", "1500", "1.5s", "0", "-1s", "x", "1d",
		"1h30m", "106751d", "106752d", "2562047h", "2562048h", "1ns", "250us", "", "0.5ms", "1000000000000000"}
	optionWords := []string{"ALGO", "algo", "Algo", "BURST", "burst", "COST", "cost", "BAN", "x"}
	valueWords := []string{"gcra", "TOKEN", "fixed", "sliding", "Sliding", "bogus", "1", "5", "0", "-1", "100",
		"1000001", "abc", "9223372036854775807", "4611686018427387904"}
	randomList := func() []string {
		list := []string{pick("k", "key:1", "too-long-key"), pick(limitWords...), pick(periodWords...)}
		for n := rng.Intn(4); n > 0; n-- {
			list = append(list, pick(optionWords...))
			if rng.Intn(12) > 0 {
				list = append(list, pick(valueWords...))
			}
		}
		return list
	}
	// Lists that mostly parse, as clients send them.
	goodList := func() []string {
		list := []string{pick("k", "key:1"), pick("1", "10", "1000000", "99999999", "1234567890123456"),
			pick("1s", "1S", "1000ms", "60m", "1h", "1500", "1.5s", "1d", "1h30m", "250us")}
		for n := rng.Intn(4); n > 0; n-- {
			switch rng.Intn(3) {
			case 0:
				list = append(list, pick("ALGO", "algo"), pick("gcra", "TOKEN", "fixed", "sliding"))
			case 1:
				list = append(list, pick("COST", "cost"), pick("1", "5", "0", "-1", "100"))
			default:
				list = append(list, "BURST", pick("1", "5", "100"))
			}
		}
		return list
	}
	pool := make([][]string, 64)
	for i := range pool {
		if i%4 == 0 {
			pool[i] = randomList()
		} else {
			pool[i] = goodList()
		}
	}
	call := func(tl *testLoop, list []string, reset bool) (bool, string) {
		args := argBytes(append([]string{"THROTTLE.CHECK"}, list...))
		if reset {
			tl.l.limCache = limitCache{}
		}
		tl.l.out = tl.l.out[:0]
		ok := tl.l.limitArgs(args)
		scrub(args)
		return ok, string(tl.l.out)
	}
	hits, optionHits, oks := 0, 0, 0
	var prev []string
	for i := 0; i < 40_000; i++ {
		var list []string
		switch r := rng.Intn(10); {
		case r < 4 && prev != nil:
			list = prev
		case r < 6 && prev != nil: // one byte changed, or the case of one argument
			list = oneChanged(rng, prev, true)
		case r < 9:
			list = pool[rng.Intn(len(pool))]
		default:
			list = randomList()
		}
		prev = list
		if cached.l.limCache.match(argBytes(list[1:])) {
			hits++
			if len(list) > 3 {
				optionHits++
			}
		}
		gotOK, gotOut := call(cached, list, false)
		wantOK, wantOut := call(fresh, list, true)
		if gotOK != wantOK || gotOut != wantOut {
			t.Fatalf("%q: cached (%v, %q), parsed (%v, %q)", list, gotOK, gotOut, wantOK, wantOut)
		}
		if !gotOK {
			continue
		}
		oks++
		if cached.l.op.Limit != fresh.l.op.Limit || cached.l.op.Cost != fresh.l.op.Cost {
			t.Fatalf("%q: cached %+v cost %d, parsed %+v cost %d", list,
				cached.l.op.Limit, cached.l.op.Cost, fresh.l.op.Limit, fresh.l.op.Cost)
		}
	}
	if hits < 5000 || optionHits < 500 || oks < 5000 {
		t.Fatalf("cache hits %d (with options %d), successful parses %d: the test did not exercise the cache",
			hits, optionHits, oks)
	}
}

// TestLimitCacheExact checks the boundaries of a match: every length up to
// the longest argument kept, each byte of each, the count of arguments, and
// lists the cache cannot hold, which are parsed (and answered) every time.
func TestLimitCacheExact(t *testing.T) {
	var c limitCache
	for n := 0; n <= limitCacheArgLen; n++ {
		a := bytes.Repeat([]byte{'7'}, n)
		args := [][]byte{[]byte("5"), a}
		c.keep(args, limitFor(t, 5), 1)
		if !c.match([][]byte{[]byte("5"), bytes.Clone(a)}) {
			t.Fatalf("length %d: no match for the same bytes", n)
		}
		for i := 0; i < n; i++ {
			b := bytes.Clone(a)
			b[i] = '8'
			if c.match([][]byte{[]byte("5"), b}) {
				t.Fatalf("length %d: byte %d changed still matches", n, i)
			}
		}
		if c.match([][]byte{[]byte("5"), bytes.Repeat([]byte{'7'}, n+1)}) ||
			(n > 0 && c.match([][]byte{[]byte("5"), bytes.Repeat([]byte{'7'}, n-1)})) {
			t.Fatalf("length %d: another length matches", n)
		}
		if c.match([][]byte{[]byte("5")}) || c.match([][]byte{[]byte("5"), a, a}) {
			t.Fatalf("length %d: another count of arguments matches", n)
		}
	}
	// A zero byte is a byte: "1" and "1\x00" differ only in length.
	c.keep([][]byte{[]byte("1"), []byte("1s")}, limitFor(t, 1), 1)
	if c.match([][]byte{[]byte("1\x00"), []byte("1s")}) {
		t.Fatal("a trailing zero byte matches")
	}
	long := [][]byte{[]byte("5"), bytes.Repeat([]byte{'7'}, limitCacheArgLen+1)}
	c.keep(long, limitFor(t, 5), 1)
	if c.argc != 0 || c.match(long) {
		t.Fatal("an argument longer than limitCacheArgLen was kept")
	}
	many := make([][]byte, limitCacheArgs+1)
	for i := range many {
		many[i] = []byte("1")
	}
	c.keep(many, limitFor(t, 1), 1)
	if c.argc != 0 || c.match(many) {
		t.Fatal("more than limitCacheArgs arguments were kept")
	}
}

// TestLimitCacheZeroAlloc: a hit and a miss of limitArgs allocate nothing.
func TestLimitCacheZeroAlloc(t *testing.T) {
	tl := newTestLoop(t, nil)
	a := [][]byte{[]byte("THROTTLE.CHECK"), []byte("k"), []byte("1000000"), []byte("1s"), []byte("ALGO"), []byte("token")}
	b := [][]byte{[]byte("THROTTLE.CHECK"), []byte("k"), []byte("100"), []byte("1m")}
	for name, f := range map[string]func(){
		"hit":  func() { tl.l.limitArgs(a) },
		"miss": func() { tl.l.limitArgs(a); tl.l.limitArgs(b) },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
	if tl.l.out = tl.l.out[:0]; !tl.l.limitArgs(a) || len(tl.l.out) != 0 {
		t.Fatalf("limitArgs failed: %q", tl.l.out)
	}
}

func limitFor(t *testing.T, limit int64) engine.Limit {
	t.Helper()
	lim, err := engine.NewLimit(engine.KindGCRA, limit, 1e9, 0)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// TestCellCacheMatchesParsing is TestLimitCacheMatchesParsing for
// CL.THROTTLE's integers: random lists through cellArgs on a loop whose
// cellCache is kept and on one whose cache is emptied before every call
// must give the same reply bytes (redis-cell's errors included) and, on
// success, the same engine.Cell and quantity, with the argument bytes
// overwritten after every call.
func TestCellCacheMatchesParsing(t *testing.T) {
	cached, fresh := newTestLoop(t, nil), newTestLoop(t, nil)
	rng := rand.New(rand.NewSource(22))
	pick := func(words ...string) string { return words[rng.Intn(len(words))] }
	ints := []string{"0", "1", "9", "10", "60", "3600", "-1", "+5", "+-5", "abc", "", "007", "1e3",
		"9223372036854775807", "9223372036854775808", "4611686018427387904"}
	randomList := func() []string {
		list := []string{"k", pick(ints...), pick(ints...), pick(ints...)}
		if rng.Intn(2) == 0 {
			list = append(list, pick(ints...))
		}
		return list
	}
	goodList := func() []string {
		list := []string{"k", pick("0", "9", "15", "100"), pick("1", "10", "30"), pick("1", "60", "3600")}
		if rng.Intn(2) == 0 {
			list = append(list, pick("0", "1", "3", "+2"))
		}
		return list
	}
	call := func(tl *testLoop, list []string, reset bool) (engine.Cell, int64, bool, string) {
		args := argBytes(append([]string{"CL.THROTTLE"}, list...))
		if reset {
			tl.l.cellCache = cellCache{}
		}
		tl.l.out = tl.l.out[:0]
		cell, cost, ok := tl.l.cellArgs(args)
		scrub(args)
		return cell, cost, ok, string(tl.l.out)
	}
	hits, oks := 0, 0
	var prev []string
	for i := 0; i < 20_000; i++ {
		var list []string
		switch r := rng.Intn(10); {
		case r < 5 && prev != nil:
			list = prev
		case r < 6 && prev != nil: // one byte changed
			list = oneChanged(rng, prev, false)
		case r < 9:
			list = goodList()
		default:
			list = randomList()
		}
		prev = list
		if cached.l.cellCache.match(argBytes(list[1:])) {
			hits++
		}
		gc, gq, gok, gout := call(cached, list, false)
		wc, wq, wok, wout := call(fresh, list, true)
		if gok != wok || gout != wout || gc != wc || gq != wq {
			t.Fatalf("%q: cached (%+v %d %v %q), parsed (%+v %d %v %q)", list, gc, gq, gok, gout, wc, wq, wok, wout)
		}
		if gok {
			oks++
		}
	}
	if hits < 5000 || oks < 5000 {
		t.Fatalf("cache hits %d, successful parses %d: the test did not exercise the cache", hits, oks)
	}
}

// argBytes returns words as command arguments, each a copy of its own.
func argBytes(words []string) [][]byte {
	args := make([][]byte, len(words))
	for i, w := range words {
		args[i] = []byte(w)
	}
	return args
}

// scrub overwrites every byte of args, as the next read overwrites the
// input buffer arguments alias: a cache that kept a reference rather
// than a copy then answers wrongly.
func scrub(args [][]byte) {
	for _, a := range args {
		for i := range a {
			a[i] = 0xff
		}
	}
}

// oneChanged returns a copy of list (a key, then the arguments a cache
// keeps) with one of those arguments changed in one bit of one byte or,
// when upper is set, half the time, written in upper case.
func oneChanged(rng *rand.Rand, list []string, upper bool) []string {
	list = append([]string(nil), list...)
	j := 1 + rng.Intn(len(list)-1)
	if w := []byte(list[j]); len(w) > 0 {
		if upper && rng.Intn(2) == 1 {
			list[j] = strings.ToUpper(list[j])
		} else {
			w[rng.Intn(len(w))] ^= byte(1 << rng.Intn(7))
			list[j] = string(w)
		}
	}
	return list
}
