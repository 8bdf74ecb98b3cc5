package upstream

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
)

// gen draws the random arguments of the differential tests. Numbers come
// from pools of the values the engine treats specially (0, 1, limits,
// 2^31-1, 2^53 +- 1, 2^62, MaxInt64, negatives) mixed with uniform draws,
// so sequences reach rounding, saturation and the bounds NewLimit accepts.
type gen struct {
	r *rand.Rand
}

func (g gen) pick(vs ...int64) int64 { return vs[g.r.IntN(len(vs))] }

// num returns a value of up to bits bits, often an edge.
func (g gen) num(bits uint) int64 {
	switch g.r.IntN(4) {
	case 0:
		return g.pick(0, 1, 2, 3, 7, 10, 1000, 1<<31-1, 1<<31, 1<<53-1, 1<<53, 1<<53+1, 1<<62, math.MaxInt64, -1, math.MinInt64)
	case 1:
		return g.r.Int64N(1 << 20)
	}
	return g.r.Int64N(1<<bits - 1)
}

func (g gen) algo() engine.Kind { return engine.Kind(1 + g.r.IntN(4)) }

// limit returns a limit that NewLimit accepts most of the time.
func (g gen) limit(algo engine.Kind) engine.Limit {
	l := engine.Limit{Algo: algo}
	switch g.r.IntN(10) {
	case 0: // anything, valid or not
		l.Limit, l.Period, l.Burst = g.num(63), g.num(63), g.num(63)
	case 1: // the largest values accepted
		l.Limit = g.pick(1, 3, 1<<31-1, 1<<40)
		l.Period = g.pick(1<<62, 1<<62-1, 1<<62+1, 1<<61+12345)
		if algo == engine.KindGCRA || algo == engine.KindToken {
			t := l.Period / l.Limit
			l.Burst = g.pick(0, 1, (1<<62)/t, (1<<62)/t+1)
		}
	default:
		l.Limit = g.pick(1, 2, 3, 5, 10, 100, 1000, 1e6, 1<<31-1, g.r.Int64N(1e4)+1, g.r.Int64N(1e9)+1)
		l.Period = g.pick(1e6, 1e9, 3e9+7, 60e9, 3600e9, 1000, 86400e9, g.r.Int64N(1e12)+1, 1<<53+1, 1e6+1, 1e6-1, 2e6+1)
		l.Burst = g.pick(0, 0, 0, 1, 5, l.Limit, 2*l.Limit+1, g.r.Int64N(1e6))
	}
	return l
}

func (g gen) cost(l engine.Limit) int64 {
	switch g.r.IntN(12) {
	case 0:
		return 0
	case 1:
		return g.num(63)
	case 2:
		return l.Limit + g.r.Int64N(3) - 1
	case 3:
		return max(l.Burst, l.Limit) + g.r.Int64N(3) - 1
	case 4:
		return g.pick(-1, math.MinInt64, 1<<62, math.MaxInt64, 1<<31, 1<<31-1)
	case 5, 6:
		return g.r.Int64N(10) + 1
	}
	return 1
}

func (g gen) cell() engine.Cell {
	switch g.r.IntN(8) {
	case 0:
		return engine.Cell{MaxBurst: g.num(63), CountPerPeriod: g.num(63), PeriodSec: g.num(40)}
	case 1:
		return engine.Cell{MaxBurst: g.pick(0, 1, math.MaxInt64-1, 1<<40), CountPerPeriod: g.pick(1, 3, 7, 1<<40, 1e9, 1e9+1),
			PeriodSec: g.pick(1, 60, math.MaxInt64/1_000_000_000, math.MaxInt64/1_000_000_000+1, 1<<30)}
	}
	return engine.Cell{MaxBurst: g.r.Int64N(20), CountPerPeriod: g.pick(1, 3, 10, 30, 1000, g.r.Int64N(1e6)+1),
		PeriodSec: g.pick(1, 60, 3600, g.r.Int64N(100)+1)}
}

// rateGCRA returns the numbers of a GCRA command as engine.NewRateGCRA
// makes them, or (case 0) edges whose products overflow, and (case 1)
// anything, for the raw calls that bypass the client's check.
func (g gen) rateGCRA() engine.RateGCRA {
	switch g.r.IntN(10) {
	case 0:
		return engine.RateGCRA{Burst: g.pick(1, 2, 1<<40, math.MaxInt64), Interval: g.pick(1, 1e6, 1<<40, 1e17),
			Tokens: g.pick(1, 5, 1<<30, math.MaxInt64)}
	case 1:
		return engine.RateGCRA{Burst: g.num(63), Interval: g.num(40), Tokens: g.pick(0, -1, 1, 3)}
	}
	maxBurst := g.pick(0, 1, 3, 10, g.r.Int64N(20))
	rate := g.pick(1, 3, 10, 100, 1000, g.r.Int64N(1e6)+1)
	period := []float64{1, 60, 0.5, 3600, 1e-6, 0.001, 2.5}[g.r.IntN(7)]
	tokens := int64(1)
	switch g.r.IntN(4) {
	case 0:
		tokens = g.r.Int64N(10) + 1
	case 1:
		tokens = maxBurst + g.r.Int64N(3)
	}
	r, err := engine.NewRateGCRA(maxBurst, rate, period, max(tokens, 1))
	if err != nil {
		panic(err) // the pools above hold valid arguments only
	}
	return r
}

func (g gen) quantity() int64 {
	switch g.r.IntN(10) {
	case 0:
		return 0
	case 1:
		return -g.r.Int64N(5) - 1
	case 2:
		return g.num(63)
	case 3:
		return g.pick(math.MaxInt64, math.MinInt64, 1<<40, -(1 << 40))
	}
	return g.r.Int64N(5) + 1
}

// step advances the clock: mostly forward by amounts around the periods in
// use, sometimes not at all or a little backward.
func (g gen) step(now int64) int64 {
	var d int64
	switch g.r.IntN(12) {
	case 10, 11: // to a millisecond or second boundary, or 1 ns beside it
		unit := g.pick(1e6, 1e9)
		d = (now/unit+1)*unit + g.pick(-1, 0, 1, 2) - now
	case 0:
		d = 0
	case 1:
		d = -g.r.Int64N(2e9)
	case 2:
		d = g.r.Int64N(1000)
	case 3:
		d = g.r.Int64N(1e6)
	case 4:
		d = g.pick(1e9, 60e9, 3600e9, 1e6, 999_999, 1_000_001)
	case 5:
		d = g.r.Int64N(1e13)
	default:
		d = g.r.Int64N(2e9)
	}
	if n := now + d; (d > 0) == (n > now) {
		return n
	}
	return now
}

// origins are the instants sequences start at: today, near the largest
// int64 (window ends and TATs wrap, as in the engine), near 2^62, 2^53
// and 0, and before the epoch.
var origins = []int64{1_795_000_000_123_456_789, math.MaxInt64 - 5e12, 1 << 62, 1<<53 + 77, 12345, -3_000_000_000_000_000_000}

// TestDifferential runs random sequences of every operation through the
// scripts on a real redis-server and through the engine on the model, at
// the same injected instants, and compares every reply, every error code
// and, after every operation, the stored value of each key it touched.
func TestDifferential(t *testing.T) {
	c, err := Dial("redis://"+clustertest.Server(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	seqs, ops := 24, 600
	if testing.Short() {
		seqs, ops = 6, 300
	}
	var tally tally
	for seq := 0; seq < seqs; seq++ {
		runSequence(t, c, uint64(seq), ops, &tally)
	}
	tally.require(t)
}

// Outcomes of an operation, tallied so the test shows (and asserts) that
// the sequences reach admissions, denials and each kind of error.
const (
	outAllowed = iota
	outDenied
	outEngineErr
	outWrongType
	outKinds
)

var outNames = [outKinds]string{"allowed", "denied", "engine-error", "wrongtype"}

// tally counts outcomes per operation, and admitted and denied checks
// (CHECK, PEEK, raw CHECK) per algorithm.
type tally struct {
	ops  [opKinds][outKinds]int
	algo [engine.KindSliding + 1][2]int
	back [engine.KindSliding + 1]int // return-limit calls that took units back, per algorithm
}

func (t *tally) add(op int, allowed bool, err error) {
	switch {
	case CodeOf(err) == CodeWrongType:
		t.ops[op][outWrongType]++
	case err != nil:
		t.ops[op][outEngineErr]++
	case allowed:
		t.ops[op][outAllowed]++
	default:
		t.ops[op][outDenied]++
	}
}

func (t *tally) addAlgo(k engine.Kind, allowed bool, err error) {
	if err == nil && k >= engine.KindGCRA && k <= engine.KindSliding {
		if allowed {
			t.algo[k][0]++
		} else {
			t.algo[k][1]++
		}
	}
}

// require fails unless every operation ran with every outcome it can have
// (reset has no denial and no error; return no denial).
func (t *tally) require(tb testing.TB) {
	tb.Helper()
	for k := engine.KindGCRA; k <= engine.KindSliding; k++ {
		tb.Logf("%s checks: admitted=%d denied=%d", k.String(), t.algo[k][0], t.algo[k][1])
		if t.algo[k][0] == 0 || t.algo[k][1] == 0 {
			tb.Errorf("%s: no admitted or no denied check", k.String())
		}
	}
	for _, k := range []engine.Kind{engine.KindGCRA, engine.KindToken, engine.KindSliding} {
		tb.Logf("%s: %d return-limit calls took units back", k.String(), t.back[k])
		if t.back[k] == 0 {
			tb.Errorf("%s: no return-limit took units back", k.String())
		}
	}
	for op := range t.ops {
		line := opNames[op] + ":"
		for out, n := range t.ops[op] {
			line += fmt.Sprintf(" %s=%d", outNames[out], n)
			impossible := op == opReset && out != outAllowed || (op == opReturn || op == opReturnLimit) && out == outDenied
			if n == 0 && !impossible {
				tb.Errorf("no %s outcome of %s", outNames[out], opNames[op])
			}
		}
		tb.Log(line)
	}
}

const (
	opCheck = iota
	opPeek
	opMCheck
	opReset
	opLease
	opReturn
	opCell
	opRawCheck
	opRawCell
	opGCRA
	opLeaseLimit
	opReturnLimit
	opKinds
)

var opNames = [opKinds]string{"check", "peek", "mcheck", "reset", "lease", "return", "cell", "raw-check", "raw-cell", "gcra", "lease-limit", "return-limit"}

// profile is the limit a key is mostly used with, so states build up.
type profile struct {
	lim  engine.Limit
	cell engine.Cell
	gcra engine.RateGCRA
	kind int // 0 limit, 1 lease, 2 cell, 3 Redis's GCRA
}

func runSequence(t *testing.T, c *Client, seed uint64, ops int, tl *tally) {
	runSequenceKeys(t, c, seed, ops, tl, "d"+strconv.FormatUint(seed, 10)+":")
}

// runSequenceKeys is runSequence on keys that start with prefix.
func runSequenceKeys(t *testing.T, c *Client, seed uint64, ops int, tl *tally, prefix string) {
	ctx := context.Background()
	g := gen{rand.New(rand.NewPCG(seed, 0x7e57))}
	m := newModel()
	keys := []string{}
	profiles := map[string]profile{}
	for i := 0; i < 6; i++ {
		k := prefix + strconv.Itoa(i)
		keys = append(keys, k)
		p := profile{kind: g.r.IntN(5)}
		switch p.kind {
		case 3:
			p.gcra = g.rateGCRA()
		case 1:
			p.lim = engine.Limit{Algo: engine.KindFixed, Limit: g.pick(1, 5, 100, 1000), Period: g.pick(1e9, 60e9, 1e6)}
		case 2:
			p.cell = g.cell()
		default:
			p.kind = 0
			p.lim = g.limit(g.algo())
		}
		profiles[k] = p
	}
	now := origins[int(seed)%len(origins)] + g.r.Int64N(1e12)
	lastReset := map[string]int64{}
	lastLimit := map[string]int64{} // ResetAt of the last LeaseLimit of a key
	fail := func(i int, what string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d op %d at now=%d: %s", seed, i, now, fmt.Sprintf(what, args...))
	}
	limitFor := func(k string) engine.Limit {
		if p := profiles[k]; p.kind == 0 && g.r.IntN(10) != 0 {
			return p.lim
		}
		return g.limit(g.algo())
	}
	// unfixed returns a limit of key that LeaseLimit takes: not a fixed window.
	unfixed := func(k string) engine.Limit {
		l := limitFor(k)
		for l.Algo == engine.KindFixed {
			l = g.limit(g.algo())
		}
		return l
	}
	for i := 0; i < ops; i++ {
		now = g.step(now)
		at := c.At(now)
		k := keys[g.r.IntN(len(keys))]
		p := profiles[k]
		op := g.r.IntN(opKinds)
		switch {
		case p.kind == 1 && g.r.IntN(3) != 0:
			op = opLease + g.r.IntN(2)
		case p.kind == 2 && g.r.IntN(3) != 0:
			op = opCell
		case p.kind == 3 && g.r.IntN(3) != 0:
			op = opGCRA
		case p.kind == 0 && p.lim.Algo != engine.KindFixed && g.r.IntN(3) == 0:
			op = opLeaseLimit + g.r.IntN(2)
		}
		touched := []string{k}
		switch op {
		case opCheck, opPeek:
			l := limitFor(k)
			cost := g.cost(l)
			var got, want engine.Decision
			var gerr, werr error
			if op == opCheck {
				got, gerr = at.Check(ctx, k, l, cost)
				want, werr = m.check(k, l, now, cost)
			} else {
				got, gerr = at.Peek(ctx, k, l, cost)
				want, werr = m.peek(k, l, now, cost)
			}
			if !sameErr(gerr, werr) || got != want {
				fail(i, "%s %s %+v cost %d: got %+v, %v; want %+v, %v", opNames[op], k, l, cost, got, gerr, want, werr)
			}
			tl.add(op, got.Allowed != 0, gerr)
			tl.addAlgo(l.Algo, got.Allowed != 0, gerr)
		case opRawCheck:
			// Straight to the script, past the client's validation: the
			// script's own checks must reject what NewLimit rejects.
			l := g.limit(g.algo())
			if g.r.IntN(3) == 0 {
				l = limitFor(k)
			}
			cost := g.cost(l)
			got, gerr := decisionOf(c.run(ctx, c.s.check, []string{k}, strconv.FormatInt(now, 10), "check",
				l.Algo.String(), l.Limit, l.Period, l.Burst, cost))
			want, werr := m.check(k, l, now, cost)
			if !sameErr(gerr, werr) || got != want {
				fail(i, "raw check %s %+v cost %d: got %+v, %v; want %+v, %v", k, l, cost, got, gerr, want, werr)
			}
			tl.add(op, got.Allowed != 0, gerr)
			tl.addAlgo(l.Algo, got.Allowed != 0, gerr)
		case opMCheck:
			n := 1 + g.r.IntN(4)
			perm := g.r.Perm(len(keys))[:n]
			rules := make([]Rule, n)
			touched = touched[:0]
			for j, pi := range perm {
				rules[j] = Rule{Key: keys[pi], Limit: limitFor(keys[pi])}
				touched = append(touched, keys[pi])
			}
			cost := g.cost(rules[0].Limit)
			if g.r.IntN(2) == 0 {
				cost = g.r.Int64N(4)
			}
			got, gerr := at.MCheck(ctx, rules, cost)
			want, werr := m.mcheck(rules, now, cost)
			if !sameErr(gerr, werr) || fmt.Sprint(got) != fmt.Sprint(want) {
				fail(i, "mcheck %+v cost %d: got %+v, %v; want %+v, %v", rules, cost, got, gerr, want, werr)
			}
			tl.add(op, got.Allowed, gerr)
		case opReset:
			if g.r.IntN(4) != 0 && i > 0 {
				break // resets are rarer: they empty what the others build
			}
			touched = []string{k, keys[(g.r.IntN(len(keys)))]}
			if touched[0] == touched[1] {
				touched = touched[:1]
			}
			got, gerr := at.Reset(ctx, touched...)
			if want := m.reset(touched, now); gerr != nil || got != want {
				fail(i, "reset %v: got %d, %v; want %d", touched, got, gerr, want)
			}
			tl.add(op, true, gerr)
		case opLease:
			l := p.lim
			if p.kind != 1 || g.r.IntN(8) == 0 {
				l = g.limit(engine.KindFixed)
			}
			batch := g.pick(0, 1, 3, 10, 1000, -1, math.MaxInt64, g.r.Int64N(100))
			got, gerr := at.Lease(ctx, k, l.Limit, l.Period, batch)
			want, werr := m.lease(k, l.Limit, l.Period, now, batch)
			if !sameErr(gerr, werr) || got != want {
				fail(i, "lease %s %+v batch %d: got %+v, %v; want %+v, %v", k, l, batch, got, gerr, want, werr)
			}
			tl.add(op, got.Allowed != 0, gerr)
			if werr == nil {
				lastReset[k] = want.ResetAt
			}
		case opReturn:
			credits := g.pick(0, 1, 2, 5, 100, -1, math.MaxInt64, g.r.Int64N(50))
			reset := lastReset[k]
			if g.r.IntN(5) == 0 {
				reset = g.pick(0, reset+1, reset-1, now/1e6, g.num(63))
			}
			got, gerr := at.Return(ctx, k, credits, reset)
			want, werr := m.giveBack(k, now, credits, reset)
			if credits < 0 && gerr == nil {
				fail(i, "return %s %d: accepted a negative credit count", k, credits)
			}
			if !sameErr(gerr, werr) || got != want {
				fail(i, "return %s %d %d: got %d, %v; want %d, %v", k, credits, reset, got, gerr, want, werr)
			}
			tl.add(op, true, gerr)
		case opCell, opRawCell:
			cl := p.cell
			if p.kind != 2 || g.r.IntN(8) == 0 {
				cl = g.cell()
			}
			q := g.quantity()
			var got engine.CellReply
			var gerr error
			if op == opCell {
				got, gerr = at.Throttle(ctx, k, cl, q)
			} else {
				var v []string
				v, gerr = c.run(ctx, c.s.cell, []string{k}, strconv.FormatInt(now, 10), cl.MaxBurst, cl.CountPerPeriod,
					cl.PeriodSec, q).StringSlice()
				gerr = classify(gerr)
				if gerr == nil {
					var n [5]int64
					for j := range v {
						n[j], _ = strconv.ParseInt(v[j], 10, 64)
					}
					got = engine.CellReply{Limited: n[0], Limit: n[1], Remaining: n[2], RetryAfter: n[3], ResetAfter: n[4]}
				}
			}
			want, werr := m.throttle(k, cl, now, q)
			if !sameErr(gerr, werr) || got != want {
				fail(i, "%s %s %+v q %d: got %+v, %v; want %+v, %v", opNames[op], k, cl, q, got, gerr, want, werr)
			}
			tl.add(op, got.Limited == 0, gerr)
		case opLeaseLimit:
			l := unfixed(k)
			batch := g.pick(0, 1, 3, 10, 1000, -1, math.MaxInt64, g.r.Int64N(100))
			got, gerr := at.LeaseLimit(ctx, k, l, batch)
			want, werr := m.leaseLimit(k, l, now, batch)
			if !sameErr(gerr, werr) || got != want {
				fail(i, "lease-limit %s %+v batch %d: got %+v, %v; want %+v, %v", k, l, batch, got, gerr, want, werr)
			}
			tl.add(op, got.Allowed != 0, gerr)
			if werr == nil {
				lastLimit[k] = want.ResetAt
			}
		case opReturnLimit:
			l := unfixed(k)
			credits := g.pick(0, 1, 2, 5, 100, -1, math.MaxInt64, g.r.Int64N(50))
			reset := lastLimit[k]
			if g.r.IntN(5) == 0 {
				reset = g.pick(0, reset+1, reset-1, now/1e6, now/1e6+1, g.num(63), math.MaxInt64, math.MinInt64)
			}
			got, gerr := at.ReturnLimit(ctx, k, l, credits, reset)
			want, werr := m.returnLimit(k, l, now, credits, reset)
			if !sameErr(gerr, werr) || got != want {
				fail(i, "return-limit %s %+v %d %d: got %d, %v; want %d, %v", k, l, credits, reset, got, gerr, want, werr)
			}
			tl.add(op, true, gerr)
			if got > 0 {
				tl.back[l.Algo]++
			}
		case opGCRA:
			rg := p.gcra
			if p.kind != 3 || g.r.IntN(8) == 0 {
				rg = g.rateGCRA()
			}
			var got engine.RateGCRAReply
			var gerr error
			if g.r.IntN(4) == 0 { // past the client's check: the script's own must hold
				got, gerr = gcraReplyOf(c.run(ctx, c.s.gcra, []string{k}, strconv.FormatInt(now, 10), rg.Burst, rg.Interval, rg.Tokens))
			} else {
				got, gerr = at.GCRA(ctx, k, rg)
			}
			want, werr := m.rateGCRA(k, rg, now)
			if !sameErr(gerr, werr) || got != want {
				fail(i, "gcra %s %+v: got %+v, %v; want %+v, %v", k, rg, got, gerr, want, werr)
			}
			tl.add(op, got.Limited == 0, gerr)
		}
		for _, tk := range touched {
			raw, err := c.rdb.Get(ctx, tk).Result()
			if err != nil {
				raw = ""
			}
			if want := m.raw(tk); raw != want {
				fail(i, "after %s, key %s holds %q, want %q", opNames[op], tk, raw, want)
			}
		}
	}
}
