package server

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
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

// mlimit is one limit of the MCHECK property tests.
type mlimit struct {
	key, limit, period, algo string
	lim                      engine.Limit
}

func mlimits(t *testing.T) []mlimit {
	t.Helper()
	defs := []struct {
		key   string
		limit int64
		p     string
		pns   int64
		algo  engine.Kind
		aname string
	}{
		{"m:gcra", 5, "1s", 1e9, engine.KindGCRA, "gcra"},
		{"m:token", 8, "2s", 2e9, engine.KindToken, "token"},
		{"m:fixed", 6, "1s", 1e9, engine.KindFixed, "fixed"},
		{"m:sliding", 7, "1500ms", 15e8, engine.KindSliding, "sliding"},
	}
	var out []mlimit
	for _, d := range defs {
		lim, err := engine.NewLimit(d.algo, d.limit, d.pns, 0)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, mlimit{d.key, strconv.FormatInt(d.limit, 10), d.p, d.aname, lim})
	}
	return out
}

// TestMCheckProperty runs generated interleavings of MCHECK and CHECK over
// four limits at an injected clock and checks, for every MCHECK, that it
// admits exactly when a sequential peek of every limit at COST says all
// would admit, that a denial changes no state, and that an admission
// changes each state as one THROTTLE.CHECK would.
func TestMCheckProperty(t *testing.T) {
	lims := mlimits(t)
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		tl := newTestLoop(t, nil)
		now := int64(1_700_000_000_000_000_000)
		for step := 0; step < 400; step++ {
			now += r.Int64N(200e6)
			if r.IntN(4) == 0 { // a single-limit check interleaves
				m := lims[r.IntN(len(lims))]
				tl.at(now, "THROTTLE.CHECK", m.key, m.limit, m.period, "ALGO", m.algo)
				continue
			}
			// 1 to 4 distinct limits in random order, a random cost.
			perm := r.Perm(len(lims))[:1+r.IntN(len(lims))]
			cost := int64(1 + r.IntN(3))
			args := []string{"THROTTLE.MCHECK", strconv.Itoa(len(perm))}
			var before []engine.State
			want := int64(1)
			for _, i := range perm {
				m := lims[i]
				args = append(args, m.key, m.limit, m.period, m.algo)
				st, _ := tl.srv.store.Get([]byte(m.key), now)
				before = append(before, st)
				_, d, _, err := m.lim.Check(st, now, cost)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed == 0 {
					want = 0
				}
			}
			args = append(args, "COST", strconv.FormatInt(cost, 10))
			ints, _ := replyInts(tl.at(now, args...))
			if len(ints) != 1+5*len(perm) {
				t.Fatalf("seed %d step %d: reply ints %v", seed, step, ints)
			}
			if ints[0] != want {
				t.Fatalf("seed %d step %d: %v admitted %d, sequential peeks say %d", seed, step, args, ints[0], want)
			}
			for j, i := range perm {
				m := lims[i]
				after, _ := tl.srv.store.Get([]byte(m.key), now)
				expect := before[j]
				if want == 1 {
					expect, _, _, _ = m.lim.Check(before[j], now, cost)
				}
				if after != expect {
					t.Fatalf("seed %d step %d: %s state %+v, want %+v (admitted %d)", seed, step, m.key, after, expect, want)
				}
			}
		}
	}
}

// TestMCheckConcurrent: loops on many goroutines MCHECK two limits of 100
// and 1000 at one instant: exactly 100 pass, and the 1000-limit key has
// consumed exactly 100.
func TestMCheckConcurrent(t *testing.T) {
	tl := newTestLoop(t, nil)
	now := time.Now().UnixNano()
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := newLoop(tl.srv)
			cl := &client{id: int64(10 + g), loop: l, authed: true}
			in := []byte(cmd("THROTTLE.MCHECK", "2", "ca", "100", "1h", "fixed", "cb", "1000", "1h", "fixed"))
			for i := 0; i < 40; i++ {
				l.process(cl, in, now)
				if bytes.HasPrefix(l.out, []byte("*3\r\n:1\r\n")) {
					admitted.Add(1)
				}
				l.out = l.out[:0]
			}
		}()
	}
	wg.Wait()
	if n := admitted.Load(); n != 100 {
		t.Fatalf("admitted %d, want 100", n)
	}
	st, _ := tl.srv.store.Get([]byte("cb"), now)
	if st.B != 100 {
		t.Fatalf("cb used %d, want 100", st.B)
	}
}

// TestReserveSettleProperty: with a fixed window large enough never to
// deny, the units used always equal the actual cost of every settled
// reservation plus the estimate of every other one; SETTLE answers 1
// exactly for a live, unsettled reservation.
func TestReserveSettleProperty(t *testing.T) {
	type resv struct {
		id       string
		estimate int64
		expires  int64
		settled  bool
	}
	for seed := uint64(1); seed <= 10; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		tl := newTestLoop(t, nil)
		start := int64(1_700_000_000_000_000_000) // a whole hour
		now := start
		var all []*resv
		used := int64(0)
		for step := 0; step < 500; step++ {
			now += r.Int64N(20e6)
			if len(all) == 0 || r.IntN(2) == 0 {
				est := r.Int64N(50)
				ttlMs := 1 + r.Int64N(500)
				ints, bulks := replyInts(tl.at(now, "THROTTLE.RESERVE", "rs", "1000000000", "1h", "COST",
					strconv.FormatInt(est, 10), "ALGO", "fixed", "TTL", strconv.FormatInt(ttlMs, 10)))
				if ints[0] != 1 || len(bulks) != 1 || bulks[0] == "" {
					t.Fatalf("seed %d: RESERVE denied or without id: %v %v", seed, ints, bulks)
				}
				all = append(all, &resv{id: bulks[0], estimate: est, expires: now + ttlMs*1e6})
				used += est
				continue
			}
			rv := all[r.IntN(len(all))]
			actual := r.Int64N(80)
			ints, _ := replyInts(tl.at(now, "THROTTLE.SETTLE", "rs", rv.id, strconv.FormatInt(actual, 10)))
			want := int64(0)
			if !rv.settled && now < rv.expires {
				want = 1
				rv.settled = true
				used += actual - rv.estimate
			}
			if ints[0] != want {
				t.Fatalf("seed %d step %d: SETTLE %+v at %d = %d, want %d", seed, step, rv, now, ints[0], want)
			}
			st, _ := tl.srv.store.Get([]byte("rs"), now)
			if st.B != used {
				t.Fatalf("seed %d step %d: used %d, want %d", seed, step, st.B, used)
			}
		}
	}
}

// TestSettleExactlyOnce: many loops settle the same reservations at once;
// each is applied exactly once.
func TestSettleExactlyOnce(t *testing.T) {
	tl := newTestLoop(t, nil)
	now := time.Now().UnixNano()
	var ids []string
	for i := 0; i < 50; i++ {
		_, bulks := replyInts(tl.at(now, "THROTTLE.RESERVE", "eo", "1000000", "1h", "COST", "10", "ALGO", "fixed"))
		ids = append(ids, bulks[0])
	}
	var ones atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := newLoop(tl.srv)
			cl := &client{id: int64(10 + g), loop: l, authed: true}
			for _, id := range ids {
				l.process(cl, []byte(cmd("THROTTLE.SETTLE", "eo", id, "3")), now)
				if string(l.out) == ":1\r\n" {
					ones.Add(1)
				}
				l.out = l.out[:0]
			}
		}()
	}
	wg.Wait()
	if ones.Load() != 50 {
		t.Fatalf("settled %d times, want 50", ones.Load())
	}
	if st, _ := tl.srv.store.Get([]byte("eo"), now); st.B != 150 {
		t.Fatalf("used %d, want 150", st.B)
	}
}

// TestBanNeverConsumes: generated CHECK ... BAN traffic at an injected
// clock; whenever THROTTLE.BANNED says the key is banned, a check changes
// nothing and is denied with the ban's time left.
func TestBanNeverConsumes(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		tl := newTestLoop(t, nil)
		now := int64(1_700_000_000_000_000_000)
		bans := 0
		for step := 0; step < 600; step++ {
			now += r.Int64N(300e6)
			if r.IntN(40) == 0 {
				tl.at(now, "THROTTLE.UNBAN", "bk")
			}
			left, _ := replyInts(tl.at(now, "THROTTLE.BANNED", "bk"))
			before, _ := tl.srv.store.Get([]byte("bk"), now)
			ints, _ := replyInts(tl.at(now, "THROTTLE.CHECK", "bk", "3", "1s", "ALGO", "token", "BAN", "2", "5s"))
			after, _ := tl.srv.store.Get([]byte("bk"), now)
			if left[0] > 0 {
				bans++
				if after != before || ints[0] != 0 || ints[4] != left[0] {
					t.Fatalf("seed %d step %d: banned %d ms: reply %v, state %+v -> %+v", seed, step, left[0], ints, before, after)
				}
			}
		}
		if bans == 0 {
			t.Fatalf("seed %d: no check ran while banned", seed)
		}
	}
}

// TestAcquireProperty: generated ACQUIRE/RELEASE/REFRESH from many holders
// at an injected clock against a model of held slots: in_flight is the
// model's count (never above the limit), an acquisition succeeds exactly
// when a slot is free, and RELEASE and REFRESH answer 1 exactly for a
// token whose slot is held and unexpired; each slot is freed once.
func TestAcquireProperty(t *testing.T) {
	const limit = 4
	for seed := uint64(1); seed <= 10; seed++ {
		r := rand.New(rand.NewPCG(seed, 5))
		tl := newTestLoop(t, nil)
		now := int64(1_700_000_000_000_000_000)
		held := map[string]int64{} // token -> expiry
		var gone []string          // released or expired tokens
		count := func() int64 {
			n := int64(0)
			for tok, exp := range held {
				if exp <= now {
					delete(held, tok)
					gone = append(gone, tok)
					continue
				}
				n++
			}
			return n
		}
		for step := 0; step < 800; step++ {
			now += r.Int64N(30e6)
			n := count()
			switch op := r.IntN(10); {
			case op < 5:
				ttl := 1 + r.Int64N(200)
				ints, bulks := replyInts(tl.at(now, "THROTTLE.ACQUIRE", "sem", strconv.Itoa(limit), strconv.FormatInt(ttl, 10)))
				wantOK := n < limit
				if (ints[0] == 1) != wantOK {
					t.Fatalf("seed %d step %d: acquired %d with %d held", seed, step, ints[0], n)
				}
				if wantOK {
					held[bulks[0]] = now + ttl*1e6
					n++
				}
				if ints[2] != n || ints[2] > limit {
					t.Fatalf("seed %d step %d: in_flight %d, model %d", seed, step, ints[2], n)
				}
			case op < 8 && (len(held) > 0 || len(gone) > 0):
				tok, live := pickToken(r, held, gone)
				ints, _ := replyInts(tl.at(now, "THROTTLE.RELEASE", "sem", tok))
				if (ints[0] == 1) != live {
					t.Fatalf("seed %d step %d: RELEASE %s = %d, live %v", seed, step, tok, ints[0], live)
				}
				if live {
					delete(held, tok)
					gone = append(gone, tok)
				}
			case len(held) > 0 || len(gone) > 0:
				tok, live := pickToken(r, held, gone)
				ttl := 1 + r.Int64N(200)
				ints, _ := replyInts(tl.at(now, "THROTTLE.REFRESH", "sem", tok, strconv.FormatInt(ttl, 10)))
				if (ints[0] == 1) != live {
					t.Fatalf("seed %d step %d: REFRESH %s = %d, live %v", seed, step, tok, ints[0], live)
				}
				if live {
					held[tok] = now + ttl*1e6
				}
			}
		}
	}
}

func pickToken(r *rand.Rand, held map[string]int64, gone []string) (string, bool) {
	if len(held) > 0 && (len(gone) == 0 || r.IntN(3) > 0) {
		for tok := range held {
			return tok, true
		}
	}
	return gone[r.IntN(len(gone))], false
}

// TestAcquireConcurrent: loops on many goroutines acquire and release a
// limit of 10 at one instant. A holder counts itself after ACQUIRE
// returns and uncounts itself before RELEASE, so the count never exceeds
// what the server holds: it must never exceed 10, nor may in_flight.
func TestAcquireConcurrent(t *testing.T) {
	tl := newTestLoop(t, nil)
	now := time.Now().UnixNano()
	var holding, peak atomic.Int64
	var bad atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := newLoop(tl.srv)
			cl := &client{id: int64(10 + g), loop: l, authed: true}
			acq := []byte(cmd("THROTTLE.ACQUIRE", "cc", "10", "1h"))
			for i := 0; i < 200; i++ {
				l.process(cl, acq, now)
				ints, bulks := replyInts(string(l.out))
				l.out = l.out[:0]
				if ints[2] > 10 {
					bad.Add(1)
				}
				if ints[0] != 1 {
					continue
				}
				h := holding.Add(1)
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				holding.Add(-1)
				l.process(cl, []byte(cmd("THROTTLE.RELEASE", "cc", bulks[0])), now)
				if string(l.out) != ":1\r\n" {
					bad.Add(1)
				}
				l.out = l.out[:0]
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 || peak.Load() > 10 {
		t.Fatalf("%d bad replies, peak holders %d (limit 10)", bad.Load(), peak.Load())
	}
	ints, _ := replyInts(tl.at(now, "THROTTLE.ACQUIRE", "cc", "10", "1h"))
	if ints[2] != 1 {
		t.Fatalf("in_flight after every release = %d, want 1 (the new one)", ints[2])
	}
}

func TestParseDotted(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		ok   bool
		want []int64
	}{
		{"1.2", 2, true, []int64{1, 2}},
		{"12.3.10.60000", 4, true, []int64{12, 3, 10, 60000}},
		{"1.2.3", 2, false, nil},
		{"1", 2, false, nil},
		{"1..2", 3, false, nil},
		{"-1.2", 2, false, nil},
		{"+1.2", 2, false, nil},
		{"1.2.", 2, false, nil},
		{"", 1, false, nil},
	}
	for _, tt := range tests {
		out := make([]int64, tt.n)
		ok := parseDotted([]byte(tt.in), out)
		if ok != tt.ok || (ok && fmt.Sprint(out) != fmt.Sprint(tt.want)) {
			t.Errorf("parseDotted(%q) = %v %v, want %v %v", tt.in, out, ok, tt.want, tt.ok)
		}
	}
}

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
	st := tl.srv.adm.internal().Stats()
	if refused == 0 || admitted == 0 || st.Keys > 6400 || st.Evicted != 0 {
		t.Fatalf("admitted %d, refused %d, records %+v", admitted, refused, st)
	}
	// A refused RESERVE charged nothing: the flood keys used exactly what
	// was admitted.
	used := int64(0)
	for k := 0; k < 50; k++ {
		if s, ok := tl.srv.store.Get([]byte(fmt.Sprintf("flood:%d", k)), now); ok {
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
	st = tl.srv.adm.internal().Stats()
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
