package engine

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"testing"
)

// edgeInts are dividends, divisors and products that arithmetic shortcuts
// tend to get wrong: 0, ±1, powers of two and their neighbours, 2^53
// (float64's last exact integer), and the ends of int64.
func edgeInts() []int64 {
	v := []int64{0, 1, 2, 3, 7, 10, 999, 1000, 1001, 999_999, 1e6, 1e6 + 1, 1e9 - 1, 1e9, 1e9 + 1,
		math.MaxInt64, math.MaxInt64 - 1, math.MinInt64, math.MinInt64 + 1}
	for i := 1; i < 63; i++ {
		v = append(v, 1<<i-1, 1<<i, 1<<i+1)
	}
	n := len(v)
	for _, x := range v[:n] {
		v = append(v, -x)
	}
	return v
}

// randInt mixes edge values, values near them and uniform values of random
// magnitude, both signs.
func randInt(r *rand.Rand, edges []int64) int64 {
	switch r.IntN(4) {
	case 0:
		return edges[r.IntN(len(edges))]
	case 1:
		return edges[r.IntN(len(edges))] + r.Int64N(7) - 3
	case 2:
		return int64(r.Uint64())
	}
	x := r.Int64N(1 << r.IntN(63))
	if r.IntN(2) == 0 {
		x = -x
	}
	return x
}

// randPos is randInt folded into [1, MaxInt64].
func randPos(r *rand.Rand, edges []int64) int64 {
	x := randInt(r, edges)
	if x < 0 {
		x = -(x + 1)
	}
	if x == 0 {
		x = 1
	}
	return x
}

// TestRateExact checks that the reduced rate (1 token per t ns) gives the
// same mulDiv and mulDivCeil results as Limit per Period whenever Period is
// a whole multiple of Limit, for every dividend including "negative" ones
// (a clock gap that overflowed).
func TestRateExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	edges := edgeInts()
	for i := 0; i < 300_000; i++ {
		limit, iv := randPos(r, edges), randPos(r, edges)
		if r.IntN(2) == 0 {
			limit, iv = 1+r.Int64N(2_000_000), 1+r.Int64N(1e9)
		}
		if limit > math.MaxInt64/iv {
			continue
		}
		period := limit * iv
		for _, l := range []Limit{{Algo: KindToken, Limit: limit, Period: period, interval: iv}, {Algo: KindToken, Limit: limit, Period: period}} {
			n, p := l.rate()
			if n != 1 || p != iv {
				t.Fatalf("rate(%d per %d) = %d per %d, want 1 per %d", limit, period, n, p, iv)
			}
		}
		x := randInt(r, edges)
		if got, want := mulDiv(x, 1, iv), mulDiv(x, limit, period); got != want {
			t.Fatalf("mulDiv(%d, 1, %d) = %d, mulDiv(%d, %d, %d) = %d", x, iv, got, x, limit, period, want)
		}
		if got, want := mulDivCeil(x, iv, 1), mulDivCeil(x, period, limit); got != want {
			t.Fatalf("mulDivCeil(%d, %d, 1) = %d, mulDivCeil(%d, %d, %d) = %d", x, iv, got, x, period, limit, want)
		}
	}
	// A rate that does not divide exactly, and a stale cached interval, keep
	// Limit per Period.
	for _, l := range []Limit{
		{Algo: KindToken, Limit: 3, Period: 10, interval: 3},
		{Algo: KindToken, Limit: 3, Period: 10},
		{Algo: KindToken, Limit: 7, Period: 1e9, interval: 166_666_666},
		{Algo: KindToken, Limit: 1 << 40, Period: 1 << 62, interval: 1 << 23},
	} {
		if n, p := l.rate(); n != l.Limit || p != l.Period {
			t.Errorf("rate(%+v) = %d per %d", l, n, p)
		}
	}
}

// TestMulDivCeilOne checks the division-free c == 1 branch of mulDivCeil
// against the 128-bit division it replaces.
func TestMulDivCeilOne(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	edges := edgeInts()
	ref := func(a, b int64) int64 { // mulDivCeil before the c == 1 branch
		hi, lo := mulFull(a, b)
		if hi >= 1 {
			return math.MaxInt64
		}
		return int64(min(lo, math.MaxInt64))
	}
	for i := 0; i < 300_000; i++ {
		a, b := randInt(r, edges), randInt(r, edges)
		if got, want := mulDivCeil(a, b, 1), ref(a, b); got != want {
			t.Fatalf("mulDivCeil(%d, %d, 1) = %d, want %d", a, b, got, want)
		}
	}
}

// TestWindowIndex checks the division-free cases of windowIndex against
// floorDiv for hints in, before, after and far from now's window.
func TestWindowIndex(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	edges := edgeInts()
	for i := 0; i < 500_000; i++ {
		p := randPos(r, edges)
		if r.IntN(2) == 0 {
			p = 1 + r.Int64N(120e9)
		}
		now := randInt(r, edges)
		if r.IntN(2) == 0 {
			now = epoch + r.Int64N(1e12)
		}
		var a int64
		switch w := floorDiv(now, p); r.IntN(5) {
		case 0:
			a = w
		case 1:
			a = w - 1
		case 2:
			a = w + 1
		case 3:
			a = w + r.Int64N(5) - 2
		default:
			a = randInt(r, edges)
		}
		if got, want := windowIndex(now, p, a), floorDiv(now, p); got != want {
			t.Fatalf("windowIndex(%d, %d, %d) = %d, want %d", now, p, a, got, want)
		}
	}
}

// TestCellArith checks Throttle's integer shortcuts against redis-cell's
// expressions they replace: the overflow test, the float64 remaining count
// and the seconds rounding.
func TestCellArith(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	edges := edgeInts()
	edges = append(edges, 1<<53-1, 1<<53, 1<<53+1, -(1<<53 - 1), -(1 << 53), -(1<<53 + 1), 1e12, 1e15, 9_007_199_254_740_993)
	for i := 0; i < 1_000_000; i++ {
		tv, q := randInt(r, edges), randInt(r, edges)
		if r.IntN(2) == 0 {
			tv = randPos(r, edges)
		}
		if q != 0 {
			inc := tv * q
			if got, want := mulOverflows(tv, q, inc), inc/q != tv; got != want {
				t.Fatalf("mulOverflows(%d, %d) = %v, want %v", tv, q, got, want)
			}
		}
		n, d := randInt(r, edges), randInt(r, edges)
		if r.IntN(2) == 0 {
			d = randPos(r, edges) % (1<<53 + 2)
		}
		if r.IntN(4) == 0 { // n near a multiple of d
			n = d*(r.Int64N(1<<20)-1<<19) + r.Int64N(3) - 1
		}
		if got, want := cellRemaining(n, d), f64toi64(float64(n)/float64(d)); got != want {
			t.Fatalf("cellRemaining(%d, %d) = %d, want %d", n, d, got, want)
		}
		ns := randInt(r, edges)
		want := ns / 1e9
		if (ns%1e9)/1e6 > 0 {
			want++
		}
		if got := cellSecs(ns); got != want {
			t.Fatalf("cellSecs(%d) = %d, want %d", ns, got, want)
		}
	}
}

// TestCellCache checks that a Cell whose fields changed after NewCell, and a
// Cell literal, behave like a fresh NewCell.
func TestCellCache(t *testing.T) {
	c, _ := NewCell(15, 30, 60)
	c.CountPerPeriod, c.PeriodSec = 7, 1
	lit := Cell{MaxBurst: 15, CountPerPeriod: 7, PeriodSec: 1}
	fresh, _ := NewCell(15, 7, 1)
	for _, q := range []int64{0, 1, 5, 20, -3} {
		s := State{A: epoch + 2e9, Kind: KindGCRA}
		n1, r1, t1, e1 := c.Throttle(s, epoch, q)
		n2, r2, t2, e2 := lit.Throttle(s, epoch, q)
		n3, r3, t3, e3 := fresh.Throttle(s, epoch, q)
		if n1 != n3 || r1 != r3 || t1 != t3 || e1 != e3 || n2 != n3 || r2 != r3 || t2 != t3 || e2 != e3 {
			t.Fatalf("q=%d: changed %+v %+v, literal %+v %+v, fresh %+v %+v", q, n1, r1, n2, r2, n3, r3)
		}
	}
}

// TestPeekUnknownAlgo: a Limit literal with an unknown algorithm is an
// error for peeks too, not some algorithm's answer.
func TestPeekUnknownAlgo(t *testing.T) {
	l := Limit{Algo: 9, Limit: 1, Period: sec}
	for _, cost := range []int64{0, 1} {
		if next, d, ttl, err := l.Check(State{}, epoch, cost); err != ErrAlgo || next != (State{}) || d != (Decision{}) || ttl != 0 {
			t.Errorf("cost %d: %+v %+v %d %v", cost, next, d, ttl, err)
		}
	}
	if _, err := l.Peek(State{}, epoch); err != ErrAlgo {
		t.Errorf("Peek: %v", err)
	}
}

// mulFull is the 128-bit product of a and b taken as unsigned.
func mulFull(a, b int64) (hi, lo uint64) { return bits.Mul64(uint64(a), uint64(b)) }
