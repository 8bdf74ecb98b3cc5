package engine

import (
	"math/rand/v2"
	"testing"
)

const sec = int64(1e9)

type step struct {
	at   int64 // ns after epoch
	cost int64
	want Decision
}

func runSteps(t *testing.T, name string, l Limit, steps []step) {
	t.Helper()
	var s State
	for i, st := range steps {
		next, d, ttl, err := l.Check(s, epoch+st.at, st.cost)
		if err != nil {
			t.Fatalf("%s step %d: %v", name, i, err)
		}
		want := st.want
		want.ResetAt += epoch / 1e6
		if d != want {
			t.Errorf("%s step %d: got %+v want %+v", name, i, d, want)
		}
		if d.Allowed == 0 || st.cost == 0 {
			if next != s {
				t.Errorf("%s step %d: denied/peek changed state %+v -> %+v", name, i, s, next)
			}
		}
		if ttl < 0 {
			t.Errorf("%s step %d: negative ttl %d", name, i, ttl)
		}
		s = next
	}
}

func mustLimit(t testing.TB, k Kind, limit, period, burst int64) Limit {
	l, err := NewLimit(k, limit, period, burst)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestGCRA(t *testing.T) {
	// 10 per second, burst 2: T = 100 ms, tolerance 200 ms.
	l := mustLimit(t, KindGCRA, 10, sec, 2)
	runSteps(t, "gcra", l, []step{
		{0, 0, Decision{1, 2, 2, 0, 0}},
		{0, 1, Decision{1, 2, 1, 100, 0}},
		{0, 1, Decision{1, 2, 0, 200, 0}},
		{0, 1, Decision{0, 2, 0, 200, 100}},
		{0, 3, Decision{0, 2, 0, 200, -1}},
		{100 * 1e6, 1, Decision{1, 2, 0, 300, 0}},
		{150 * 1e6, 0, Decision{0, 2, 0, 300, 50}},
		{1000 * 1e6, 2, Decision{1, 2, 0, 1200, 0}},
	})
	// 1,000,000 per second is exact: T = 1000 ns.
	m := mustLimit(t, KindGCRA, 1_000_000, sec, 0)
	var s State
	n := 0
	for i := int64(0); i < 3_000_000; i++ {
		var d Decision
		s, d, _, _ = m.Check(s, epoch+sec+i*1000/3, 1) // 3 arrivals per microsecond
		n += int(d.Allowed)
	}
	// burst 1e6 at once plus 1e6 per second for the 1 s elapsed (±1).
	if n < 2_000_000-1 || n > 2_000_001 {
		t.Fatalf("1e6/s admitted %d, want ~2,000,000", n)
	}
}

func TestTokenBucket(t *testing.T) {
	// capacity 5, 1 per second.
	l := mustLimit(t, KindToken, 1, sec, 5)
	runSteps(t, "token", l, []step{
		{0, 5, Decision{1, 5, 0, 5000, 0}},
		{0, 1, Decision{0, 5, 0, 5000, 1000}},
		{2500 * 1e6, 0, Decision{1, 5, 2, 5000, 0}},
		{2500 * 1e6, 2, Decision{1, 5, 0, 7000, 0}},
		{2500 * 1e6, 6, Decision{0, 5, 0, 7000, -1}},
		{2999 * 1e6, 1, Decision{0, 5, 0, 7000, 1}},
		{100 * sec, 1, Decision{1, 5, 4, 101000, 0}},
	})
}

func TestFixedWindow(t *testing.T) {
	l := mustLimit(t, KindFixed, 3, 60*sec, 0)
	runSteps(t, "fixed", l, []step{
		{10 * sec, 2, Decision{1, 3, 1, 60000, 0}},
		{20 * sec, 1, Decision{1, 3, 0, 60000, 0}},
		{50 * sec, 1, Decision{0, 3, 0, 60000, 10000}},
		{50 * sec, 4, Decision{0, 3, 0, 60000, -1}},
		{60*sec - 1, 0, Decision{0, 3, 0, 60000, 1}},
		{60 * sec, 3, Decision{1, 3, 0, 120000, 0}},
		{30 * sec, 1, Decision{0, 3, 0, 120000, 90000}}, // clock went back
	})
}

func TestSlidingWindow(t *testing.T) {
	l := mustLimit(t, KindSliding, 10, 60*sec, 0)
	runSteps(t, "sliding", l, []step{
		{10 * sec, 8, Decision{1, 10, 2, 120000, 0}},
		{75 * sec, 2, Decision{1, 10, 2, 180000, 0}},    // ceil(8*45/60)=6, +2 = 8 used
		{75 * sec, 3, Decision{0, 10, 2, 180000, 7500}}, // fits once ceil(8*(60-e)/60) <= 5: e = 22.5 s
		{90 * sec, 2, Decision{1, 10, 2, 180000, 0}},    // ceil(8*30/60)=4, +2+2 = 8 used
		{200 * sec, 0, Decision{1, 10, 10, 200000, 0}},
		{200 * sec, 11, Decision{0, 10, 10, 200000, -1}},
	})
}

func TestLeaseReturn(t *testing.T) {
	l := mustLimit(t, KindFixed, 10, 60*sec, 0)
	now := epoch + 5*sec
	s, d, _, err := l.Lease(State{}, now, 4)
	if err != nil || d.Allowed != 4 || d.Remaining != 6 {
		t.Fatalf("lease: %+v %v", d, err)
	}
	s, d2, _, _ := l.Lease(s, now, 8)
	if d2.Allowed != 6 || d2.Remaining != 0 {
		t.Fatalf("lease 2: %+v", d2)
	}
	if _, d3, _, _ := l.Lease(s, now, 1); d3.Allowed != 0 || d3.RetryAfter == 0 {
		t.Fatalf("lease 3: %+v", d3)
	}
	s2, acc, _, _ := Return(s, now, 3, d.ResetAt+1) // wrong window
	if acc != 0 || s2 != s {
		t.Fatalf("return wrong window accepted %d", acc)
	}
	s, acc, _, _ = Return(s, now, 3, d.ResetAt)
	if acc != 3 {
		t.Fatalf("return accepted %d", acc)
	}
	if _, d4, _, _ := l.Check(s, now, 3); d4.Allowed != 1 || d4.Remaining != 0 {
		t.Fatalf("check after return: %+v", d4)
	}
	// a return after the window ended counts for nothing.
	if _, acc, _, _ = Return(s, now+60*sec, 3, d.ResetAt); acc != 0 {
		t.Fatalf("late return accepted %d", acc)
	}
	g := mustLimit(t, KindGCRA, 10, sec, 0)
	if _, _, _, err := g.Lease(State{}, now, 1); err != ErrLeaseAlgo {
		t.Fatalf("lease on gcra: %v", err)
	}
}

func TestValidation(t *testing.T) {
	for _, tc := range []struct {
		k                    Kind
		limit, period, burst int64
		want                 *Error
	}{
		{KindGCRA, 0, sec, 0, ErrLimit},
		{KindGCRA, -1, sec, 0, ErrLimit},
		{KindFixed, 1, 0, 0, ErrPeriod},
		{KindToken, 1, sec, -1, ErrBurst},
		{KindGCRA, 2e9, sec, 0, ErrOutOfRange},
		{KindGCRA, 1, 1 << 62, 4, ErrOutOfRange},
		{KindSliding, 1 << 31, sec, 0, ErrOutOfRange},
		{KindNone, 1, sec, 0, ErrAlgo},
		{Kind(9), 1, sec, 0, ErrAlgo},
	} {
		if _, err := NewLimit(tc.k, tc.limit, tc.period, tc.burst); err != tc.want {
			t.Errorf("NewLimit(%v,%d,%d,%d) = %v, want %v", tc.k, tc.limit, tc.period, tc.burst, err, tc.want)
		}
	}
	l := mustLimit(t, KindGCRA, 1, sec, 0)
	if _, _, _, err := l.Check(State{}, epoch, -1); err != ErrNegativeCost {
		t.Errorf("negative cost: %v", err)
	}
	s := State{A: 1, B: 2, Kind: KindToken}
	if next, _, _, err := l.Check(s, epoch, 1); err != ErrWrongType || next != s {
		t.Errorf("wrong type: %v %+v", err, next)
	}
	if got := ErrLimit.Error(); got != "engine: limit must be positive" {
		t.Errorf("Error() = %q", got)
	}
}

// TestErrorCodes pins every error to its code: codes are stable and each
// names one condition, so the server's wire table can be indexed by them.
func TestErrorCodes(t *testing.T) {
	seen := map[Code]*Error{}
	for _, tc := range []struct {
		err  *Error
		code Code
	}{
		{ErrWrongType, 1}, {ErrLimit, 2}, {ErrPeriod, 3}, {ErrBurst, 4}, {ErrAlgo, 5},
		{ErrOutOfRange, 6}, {ErrNegativeCost, 7}, {ErrLeaseAlgo, 8}, {ErrZeroRate, 9},
		{ErrNegativeRate, 10}, {ErrQuantityRange, 11}, {ErrGCRAPeriod, 12}, {ErrGCRATokensOverflow, 13},
		{ErrGCRABurstOverflow, 14},
	} {
		if tc.err.Code != tc.code {
			t.Errorf("%v: code %d, want %d", tc.err, tc.err.Code, tc.code)
		}
		if prev := seen[tc.err.Code]; prev != nil {
			t.Errorf("%v and %v share code %d", prev, tc.err, tc.err.Code)
		}
		seen[tc.err.Code] = tc.err
	}
	if len(seen) != int(NumCodes)-1 {
		t.Errorf("%d errors checked, want %d", len(seen), NumCodes-1)
	}
}

// TestPropertyBound drives random timelines, with backward jumps, through
// every algorithm and checks the admission bound, remaining >= 0 and
// determinism.
func TestPropertyBound(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for it := 0; it < 4000; it++ {
		k := Kind(1 + r.IntN(4))
		limit := 1 + r.Int64N(20)
		period := (1 + r.Int64N(5)) * sec / int64(1+r.IntN(4))
		l, err := NewLimit(k, limit, period, r.Int64N(25))
		if err != nil {
			t.Fatal(err)
		}
		var s State
		now := epoch + r.Int64N(period)
		minNow, maxNow := now, now
		var admitted int64
		perWin := map[int64]int64{}
		for i := 0; i < 200; i++ {
			switch r.IntN(10) {
			case 0:
				now -= r.Int64N(2 * period) // backward jump
			case 1:
				now += r.Int64N(3 * period)
			default:
				now += r.Int64N(period / 4)
			}
			maxNow, minNow = max(maxNow, now), min(minNow, now)
			cost := r.Int64N(4)
			next, d, ttl, err := l.Check(s, now, cost)
			if err != nil {
				t.Fatal(err)
			}
			n2, d2, ttl2, _ := l.Check(s, now, cost)
			if n2 != next || d2 != d || ttl2 != ttl {
				t.Fatal("not deterministic")
			}
			if d.Remaining < 0 || d.Remaining > max(limit, l.burst()) {
				t.Fatalf("%v remaining %d", k, d.Remaining)
			}
			if d.Allowed == 1 && d.RetryAfter != 0 || d.Allowed == 0 && d.RetryAfter == 0 && cost > 0 {
				t.Fatalf("%v retry %+v", k, d)
			}
			if d.Allowed == 1 && cost > 0 {
				admitted += cost
				if k == KindFixed {
					perWin[next.A] += cost
					if perWin[next.A] > limit {
						t.Fatalf("fixed: window %d admitted %d > %d", next.A, perWin[next.A], limit)
					}
				}
			}
			s = next
		}
		// GCRA/token: burst + rate * elapsed (over the furthest clock seen).
		elapsed := maxNow - minNow
		switch k {
		case KindGCRA, KindToken:
			bound := l.burst() + elapsed*limit/period + 1
			if admitted > bound {
				t.Fatalf("%v admitted %d > bound %d", k, admitted, bound)
			}
		case KindSliding:
			bound := 2 * limit * (elapsed/period + 2)
			if admitted > bound {
				t.Fatalf("sliding admitted %d > %d", admitted, bound)
			}
		}
	}
}

// TestPropertyLeases simulates N nodes leasing and returning on one fixed
// window key: per window, granted minus accepted returns never exceeds the
// limit, and each node uses only credits of a live window.
func TestPropertyLeases(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for it := 0; it < 2000; it++ {
		limit := 1 + r.Int64N(50)
		period := (1 + r.Int64N(10)) * sec
		l := mustLimit(t, KindFixed, limit, period, 0)
		nodes := 1 + r.IntN(8)
		type lease struct{ credits, resetAt int64 }
		held := make([]lease, nodes)
		var s State
		now := epoch
		net := map[int64]int64{} // resetAt -> granted - returned
		for i := 0; i < 300; i++ {
			if r.IntN(8) == 0 {
				now -= r.Int64N(period)
			} else {
				now += r.Int64N(period / 3)
			}
			n := r.IntN(nodes)
			if r.IntN(2) == 0 {
				next, d, _, err := l.Lease(s, now, 1+r.Int64N(limit))
				if err != nil || d.Remaining < 0 {
					t.Fatal(err, d)
				}
				s = next
				net[d.ResetAt] += d.Allowed
				if net[d.ResetAt] > limit {
					t.Fatalf("window %d net granted %d > %d", d.ResetAt, net[d.ResetAt], limit)
				}
				held[n] = lease{d.Allowed, d.ResetAt}
			} else if held[n].credits > 0 {
				give := r.Int64N(held[n].credits + 1)
				next, acc, _, err := Return(s, now, give, held[n].resetAt)
				if err != nil || acc > give || acc < 0 {
					t.Fatal(err, acc)
				}
				s = next
				net[held[n].resetAt] -= acc
				held[n].credits -= give
			}
		}
	}
}

func FuzzCheck(f *testing.F) {
	f.Add(uint8(1), int64(10), int64(1e9), int64(0), int64(epoch), int64(1), int64(0), int64(0), uint8(1))
	f.Add(uint8(4), int64(3), int64(60e9), int64(0), int64(epoch), int64(2), int64(5), int64(1<<32|2), uint8(4))
	f.Fuzz(func(t *testing.T, k uint8, limit, period, burst, now, cost, a, b int64, sk uint8) {
		l, err := NewLimit(Kind(k), limit, period, burst)
		if err != nil {
			return
		}
		s := State{A: a, B: b, Kind: Kind(sk % 5)}
		_, d, _, err := l.Check(s, now, cost)
		if err == nil && d.Remaining < 0 {
			t.Fatalf("remaining %d", d.Remaining)
		}
		if pd, err := l.Peek(s, now); err == nil && pd.Remaining < 0 {
			t.Fatalf("peek remaining %d", pd.Remaining)
		}
	})
}

// FuzzTimeline checks a fresh key over fuzzed steps: no panic, remaining >= 0.
func FuzzTimeline(f *testing.F) {
	f.Add(uint8(1), int64(5), int64(1e9), int64(0), []byte{1, 2, 3, 200, 5})
	f.Fuzz(func(t *testing.T, k uint8, limit, period, burst int64, steps []byte) {
		l, err := NewLimit(Kind(k), limit, period, burst)
		if err != nil {
			return
		}
		var s State
		now := int64(epoch)
		for _, b := range steps {
			now += (int64(b) - 100) * (period/50 + 1)
			next, d, _, err := l.Check(s, now, int64(b%4))
			if err != nil {
				t.Fatal(err)
			}
			if d.Remaining < 0 {
				t.Fatalf("remaining %d", d.Remaining)
			}
			s = next
		}
	})
}

func FuzzCell(f *testing.F) {
	f.Add(int64(15), int64(30), int64(60), int64(1), int64(epoch), int64(0))
	f.Fuzz(func(t *testing.T, burst, count, period, qty, now, tat int64) {
		c, err := NewCell(burst, count, period)
		if err != nil {
			return
		}
		var s State
		if tat != 0 {
			s = State{A: tat, Kind: KindGCRA}
		}
		_, r, _, err := c.Throttle(s, now, qty)
		if err == nil && r.Limit != burst+1 {
			t.Fatalf("limit %d", r.Limit)
		}
	})
}

func BenchmarkCheck(b *testing.B) {
	for _, bc := range []struct {
		name string
		k    Kind
	}{{"gcra", KindGCRA}, {"token", KindToken}, {"fixed", KindFixed}, {"sliding", KindSliding}} {
		b.Run(bc.name, func(b *testing.B) {
			l := mustLimit(b, bc.k, 1_000_000, sec, 0)
			var s State
			now := epoch
			b.ReportAllocs()
			for b.Loop() {
				now += 700
				s, _, _, _ = l.Check(s, now, 1)
			}
		})
	}
	b.Run("cell", func(b *testing.B) {
		c, _ := NewCell(100, 1_000_000, 1)
		var s State
		now := epoch
		b.ReportAllocs()
		for b.Loop() {
			now += 700
			s, _, _, _ = c.Throttle(s, now, 1)
		}
	})
}

//go:noinline
func nopCheck(l *Limit, s State, now, cost int64) (State, Decision, int64, error) {
	return State{A: now + cost, Kind: l.Algo}, Decision{Allowed: 1, Limit: l.Limit, Remaining: s.A}, cost, nil
}

//go:noinline
func nopThrottle(c *Cell, s State, now, quantity int64) (State, CellReply, int64, error) {
	return State{A: now + quantity, Kind: KindGCRA}, CellReply{Limit: c.MaxBurst, Remaining: s.A}, quantity, nil
}

// BenchmarkLoopFloor is BenchmarkCheck's loop around functions that have
// Check's and Throttle's signatures and do no work: what BenchmarkCheck
// costs with an engine that costs nothing. Most of it is b.Loop keeping the
// discarded 40-byte Decision (CellReply) alive: the compiler copies it from
// the result registers through the stack with 16-byte moves that straddle
// the 8-byte stores, which the CPU cannot forward.
func BenchmarkLoopFloor(b *testing.B) {
	b.Run("check", func(b *testing.B) {
		l := mustLimit(b, KindGCRA, 1_000_000, sec, 0)
		var s State
		now := epoch
		b.ReportAllocs()
		for b.Loop() {
			now += 700
			s, _, _, _ = nopCheck(&l, s, now, 1)
		}
	})
	b.Run("cell", func(b *testing.B) {
		c, _ := NewCell(100, 1_000_000, 1)
		var s State
		now := epoch
		b.ReportAllocs()
		for b.Loop() {
			now += 700
			s, _, _, _ = nopThrottle(&c, s, now, 1)
		}
	})
}

// BenchmarkBareCheck runs BenchmarkCheck's requests in a plain b.N loop
// that discards the results, so nothing copies them: the engine's own cost
// (Check is not inlined, so the work is still done). "nop" is the same loop
// around nopCheck.
func BenchmarkBareCheck(b *testing.B) {
	for _, bc := range []struct {
		name string
		k    Kind
	}{{"gcra", KindGCRA}, {"token", KindToken}, {"fixed", KindFixed}, {"sliding", KindSliding}, {"nop", KindNone}} {
		b.Run(bc.name, func(b *testing.B) {
			l := mustLimit(b, max(bc.k, KindGCRA), 1_000_000, sec, 0)
			check := (*Limit).Check
			if bc.k == KindNone {
				check = nopCheck
			}
			var s State
			now := epoch
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				now += 700
				s, _, _, _ = check(&l, s, now, 1)
			}
		})
	}
	b.Run("cell", func(b *testing.B) {
		c, _ := NewCell(100, 1_000_000, 1)
		var s State
		now := epoch
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			now += 700
			s, _, _, _ = c.Throttle(s, now, 1)
		}
	})
}

// TestKindString: every kind's name is the one commands and configuration
// files use, and a kind past the known ones is "unknown".
func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindNone: "none", KindGCRA: "gcra", KindToken: "token", KindFixed: "fixed",
		KindSliding: "sliding", KindRateGCRA: "gcra-redis", KindRateGCRA + 1: "unknown", 0xff: "unknown"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}
