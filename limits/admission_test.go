package limits

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// newLocal returns a Local over a fresh store.
func newLocal(t testing.TB) *Local {
	t.Helper()
	return NewLocal(shard.New(shard.Config{Shards: 16, MaxKeys: 1 << 16}), Config{
		Misroute: func(err error) { t.Errorf("misrouted call: %v", err) },
	})
}

func newLimit(t testing.TB, algo engine.Kind, limit, period int64) engine.Limit {
	t.Helper()
	lim, err := engine.NewLimit(algo, limit, period, 0)
	if err != nil {
		t.Fatal(err)
	}
	return lim
}

// mlimit is one limit of the MCheck property tests.
type mlimit struct {
	key string
	lim engine.Limit
}

func mlimits(t *testing.T) []mlimit {
	t.Helper()
	return []mlimit{
		{"m:gcra", newLimit(t, engine.KindGCRA, 5, 1e9)},
		{"m:token", newLimit(t, engine.KindToken, 8, 2e9)},
		{"m:fixed", newLimit(t, engine.KindFixed, 6, 1e9)},
		{"m:sliding", newLimit(t, engine.KindSliding, 7, 15e8)},
	}
}

// TestMCheckProperty runs generated interleavings of MCheck and Check over
// four limits at an injected clock and checks, for every MCheck, that it
// admits exactly when a sequential peek of every limit at Cost says all
// would admit, that a denial changes no state, and that an admission
// changes each state as one check would.
func TestMCheckProperty(t *testing.T) {
	lims := mlimits(t)
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		c := newLocal(t)
		var op Op
		var m MCheck
		now := int64(1_700_000_000_000_000_000)
		for step := 0; step < 400; step++ {
			now += r.Int64N(200e6)
			if r.IntN(4) == 0 { // a single-limit check interleaves
				ml := lims[r.IntN(len(lims))]
				op = Op{Kind: OpCheck, Key: []byte(ml.key), Limit: ml.lim, Cost: 1}
				c.Do(&op, now, nil)
				continue
			}
			// 1 to 4 distinct limits in random order, a random cost.
			perm := r.Perm(len(lims))[:1+r.IntN(len(lims))]
			cost := int64(1 + r.IntN(3))
			m.Keys, m.Limits, m.Cost = m.Keys[:0], m.Limits[:0], cost
			var before []engine.State
			want := true
			for _, i := range perm {
				ml := lims[i]
				m.Keys = append(m.Keys, []byte(ml.key))
				m.Limits = append(m.Limits, ml.lim)
				st, _ := c.Get([]byte(ml.key), now, nil)
				before = append(before, st)
				_, d, _, err := ml.lim.Check(st, now, cost)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed == 0 {
					want = false
				}
			}
			if err := c.MCheck(&m, now, nil); err != nil {
				t.Fatal(err)
			}
			if len(m.Decisions) != len(perm) {
				t.Fatalf("seed %d step %d: %d decisions for %d limits", seed, step, len(m.Decisions), len(perm))
			}
			if m.Allowed != want {
				t.Fatalf("seed %d step %d: %v admitted %v, sequential peeks say %v", seed, step, perm, m.Allowed, want)
			}
			for j, i := range perm {
				ml := lims[i]
				after, _ := c.Get([]byte(ml.key), now, nil)
				expect := before[j]
				if want {
					expect, _, _, _ = ml.lim.Check(before[j], now, cost)
				}
				if after != expect {
					t.Fatalf("seed %d step %d: %s state %+v, want %+v (admitted %v)", seed, step, ml.key, after, expect, want)
				}
			}
		}
	}
}

// TestMCheckConcurrent: many goroutines MCheck two limits of 100 and 1000
// at one instant: exactly 100 pass, and the 1000-limit key has consumed
// exactly 100.
func TestMCheckConcurrent(t *testing.T) {
	c := newLocal(t)
	now := time.Now().UnixNano()
	la, lb := newLimit(t, engine.KindFixed, 100, 3600e9), newLimit(t, engine.KindFixed, 1000, 3600e9)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := MCheck{Keys: [][]byte{[]byte("ca"), []byte("cb")}, Limits: []engine.Limit{la, lb}, Cost: 1}
			for i := 0; i < 40; i++ {
				if err := c.MCheck(&m, now, nil); err != nil {
					t.Error(err)
					return
				}
				if m.Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if n := admitted.Load(); n != 100 {
		t.Fatalf("admitted %d, want 100", n)
	}
	st, _ := c.Get([]byte("cb"), now, nil)
	if st.B != 100 {
		t.Fatalf("cb used %d, want 100", st.B)
	}
}

// TestReserveSettleProperty: with a fixed window large enough never to
// deny, the units used always equal the actual cost of every settled
// reservation plus the estimate of every other one; Settle settles
// exactly a live, unsettled reservation.
func TestReserveSettleProperty(t *testing.T) {
	type resv struct {
		id       ReservationID
		estimate int64
		expires  int64
		settled  bool
	}
	lim := newLimit(t, engine.KindFixed, 1_000_000_000, 3600e9)
	key := []byte("rs")
	for seed := uint64(1); seed <= 10; seed++ {
		r := rand.New(rand.NewPCG(seed, 3))
		c := newLocal(t)
		start := int64(1_700_000_000_000_000_000) // a whole hour
		now := start
		var all []*resv
		used := int64(0)
		for step := 0; step < 500; step++ {
			now += r.Int64N(20e6)
			if len(all) == 0 || r.IntN(2) == 0 {
				est := r.Int64N(50)
				ttlMs := 1 + r.Int64N(500)
				rv := Reserve{Key: key, Limit: lim, Estimate: est, TTL: ttlMs * 1e6}
				if err := c.Reserve(&rv, now, nil); err != nil || rv.Decision.Allowed != 1 {
					t.Fatalf("seed %d: Reserve denied: %+v %v", seed, rv.Decision, err)
				}
				all = append(all, &resv{id: rv.ID, estimate: est, expires: now + ttlMs*1e6})
				used += est
				continue
			}
			rv := all[r.IntN(len(all))]
			actual := r.Int64N(80)
			s := Settle{Key: key, ID: rv.id, Actual: actual}
			if err := c.Settle(&s, now, nil); err != nil {
				t.Fatal(err)
			}
			want := false
			if !rv.settled && now < rv.expires {
				want = true
				rv.settled = true
				used += actual - rv.estimate
			}
			if s.Settled != want {
				t.Fatalf("seed %d step %d: Settle %+v at %d = %v, want %v", seed, step, rv, now, s.Settled, want)
			}
			st, _ := c.Get(key, now, nil)
			if st.B != used {
				t.Fatalf("seed %d step %d: used %d, want %d", seed, step, st.B, used)
			}
		}
	}
}

// TestSettleExactlyOnce: many goroutines settle the same reservations at
// once; each is applied exactly once.
func TestSettleExactlyOnce(t *testing.T) {
	c := newLocal(t)
	now := time.Now().UnixNano()
	lim := newLimit(t, engine.KindFixed, 1_000_000, 3600e9)
	key := []byte("eo")
	var ids []ReservationID
	for i := 0; i < 50; i++ {
		rv := Reserve{Key: key, Limit: lim, Estimate: 10, TTL: lim.Period}
		if err := c.Reserve(&rv, now, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, rv.ID)
	}
	var ones atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, id := range ids {
				s := Settle{Key: key, ID: id, Actual: 3}
				if err := c.Settle(&s, now, nil); err != nil {
					t.Error(err)
				}
				if s.Settled {
					ones.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if ones.Load() != 50 {
		t.Fatalf("settled %d times, want 50", ones.Load())
	}
	if st, _ := c.Get(key, now, nil); st.B != 150 {
		t.Fatalf("used %d, want 150", st.B)
	}
}

// TestBanNeverConsumes: generated checks with a penalty box at an
// injected clock; whenever Banned says the key is banned, a check changes
// nothing and is denied with the ban's time left.
func TestBanNeverConsumes(t *testing.T) {
	lim := newLimit(t, engine.KindToken, 3, 1e9)
	ban, ok := engine.NewBan(2, lim.Period, 5e9)
	if !ok {
		t.Fatal("NewBan refused")
	}
	key := []byte("bk")
	for seed := uint64(1); seed <= 10; seed++ {
		r := rand.New(rand.NewPCG(seed, 11))
		c := newLocal(t)
		now := int64(1_700_000_000_000_000_000)
		bans := 0
		for step := 0; step < 600; step++ {
			now += r.Int64N(300e6)
			if r.IntN(40) == 0 {
				if _, err := c.Unban(key, now, nil); err != nil {
					t.Fatal(err)
				}
			}
			left, err := c.Banned(key, now)
			if err != nil {
				t.Fatal(err)
			}
			before, _ := c.Get(key, now, nil)
			cb := CheckBan{Key: key, Limit: lim, Cost: 1, Ban: ban}
			if err := c.CheckBan(&cb, now, nil); err != nil {
				t.Fatal(err)
			}
			after, _ := c.Get(key, now, nil)
			if left > 0 {
				bans++
				if after != before || cb.Decision.Allowed != 0 || cb.Decision.RetryAfter != left {
					t.Fatalf("seed %d step %d: banned %d ms: decision %+v, state %+v -> %+v", seed, step, left, cb.Decision, before, after)
				}
			}
		}
		if bans == 0 {
			t.Fatalf("seed %d: no check ran while banned", seed)
		}
	}
}

// TestAcquireProperty: generated Acquire/Release/Refresh from many holders
// at an injected clock against a model of held slots: InFlight is the
// model's count (never above the limit), an acquisition succeeds exactly
// when a slot is free, and Release and Refresh succeed exactly for a
// token whose slot is held and unexpired; each slot is freed once.
func TestAcquireProperty(t *testing.T) {
	const limit = 4
	key := []byte("sem")
	for seed := uint64(1); seed <= 10; seed++ {
		r := rand.New(rand.NewPCG(seed, 5))
		c := newLocal(t)
		now := int64(1_700_000_000_000_000_000)
		held := map[SlotToken]int64{} // token -> expiry
		var gone []SlotToken          // released or expired tokens
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
				ttl := (1 + r.Int64N(200)) * 1e6
				q := Acquire{Key: key, Limit: limit, TTL: ttl}
				if err := c.Acquire(&q, now, nil); err != nil {
					t.Fatal(err)
				}
				wantOK := n < limit
				if q.Acquired != wantOK {
					t.Fatalf("seed %d step %d: acquired %v with %d held", seed, step, q.Acquired, n)
				}
				if wantOK {
					held[q.Token] = now + ttl
					n++
				}
				if q.InFlight != n || q.InFlight > limit {
					t.Fatalf("seed %d step %d: in_flight %d, model %d", seed, step, q.InFlight, n)
				}
			case op < 8 && (len(held) > 0 || len(gone) > 0):
				tok, live := pickToken(r, held, gone)
				ok, err := c.Release(key, tok, now, nil)
				if err != nil {
					t.Fatal(err)
				}
				if ok != live {
					t.Fatalf("seed %d step %d: Release %v = %v, live %v", seed, step, tok, ok, live)
				}
				if live {
					delete(held, tok)
					gone = append(gone, tok)
				}
			case len(held) > 0 || len(gone) > 0:
				tok, live := pickToken(r, held, gone)
				ttl := (1 + r.Int64N(200)) * 1e6
				ok, err := c.Refresh(key, tok, ttl, now, nil)
				if err != nil {
					t.Fatal(err)
				}
				if ok != live {
					t.Fatalf("seed %d step %d: Refresh %v = %v, live %v", seed, step, tok, ok, live)
				}
				if live {
					held[tok] = now + ttl
				}
			}
		}
	}
}

func pickToken(r *rand.Rand, held map[SlotToken]int64, gone []SlotToken) (SlotToken, bool) {
	if len(held) > 0 && (len(gone) == 0 || r.IntN(3) > 0) {
		for tok := range held {
			return tok, true
		}
	}
	return gone[r.IntN(len(gone))], false
}

// TestAcquireConcurrent: many goroutines acquire and release a limit of
// 10 at one instant. A holder counts itself after Acquire returns and
// uncounts itself before Release, so the count never exceeds what the
// store holds: it must never exceed 10, nor may InFlight.
func TestAcquireConcurrent(t *testing.T) {
	c := newLocal(t)
	now := time.Now().UnixNano()
	key := []byte("cc")
	var holding, peak atomic.Int64
	var bad atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				q := Acquire{Key: key, Limit: 10, TTL: 3600e9}
				if err := c.Acquire(&q, now, nil); err != nil {
					bad.Add(1)
					continue
				}
				if q.InFlight > 10 {
					bad.Add(1)
				}
				if !q.Acquired {
					continue
				}
				h := holding.Add(1)
				for p := peak.Load(); h > p && !peak.CompareAndSwap(p, h); p = peak.Load() {
				}
				holding.Add(-1)
				if ok, err := c.Release(key, q.Token, now, nil); !ok || err != nil {
					bad.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 || peak.Load() > 10 {
		t.Fatalf("%d bad results, peak holders %d (limit 10)", bad.Load(), peak.Load())
	}
	q := Acquire{Key: key, Limit: 10, TTL: 3600e9}
	if err := c.Acquire(&q, now, nil); err != nil || q.InFlight != 1 {
		t.Fatalf("in_flight after every release = %d (%v), want 1 (the new one)", q.InFlight, err)
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
		{"9223372036854775807.1", 2, true, []int64{1<<63 - 1, 1}},
		{"9223372036854775808.1", 2, false, nil},
	}
	for _, tt := range tests {
		out := make([]int64, tt.n)
		ok := parseDotted([]byte(tt.in), out)
		if ok != tt.ok || (ok && fmt.Sprint(out) != fmt.Sprint(tt.want)) {
			t.Errorf("parseDotted(%q) = %v %v, want %v %v", tt.in, out, ok, tt.want, tt.ok)
		}
	}
}

// TestIDsRoundTrip: a reservation id and a slot token parse back to what
// was written.
func TestIDsRoundTrip(t *testing.T) {
	id := ReservationID{Seq: 42, Limit: newLimit(t, engine.KindSliding, 10, 15e8)}
	got, ok := ParseReservationID(id.AppendText(nil))
	if !ok || got != id {
		t.Fatalf("reservation id %q parsed as %+v %v", id.AppendText(nil), got, ok)
	}
	tok := SlotToken{Slot: 1023, Gen: 7}
	gt, ok := ParseSlotToken(tok.AppendText(nil))
	if !ok || gt != tok {
		t.Fatalf("slot token %q parsed as %+v %v", tok.AppendText(nil), gt, ok)
	}
	if _, ok := ParseSlotToken([]byte("1024.1")); ok {
		t.Fatal("slot index 1024 accepted")
	}
}

// TestSlotAndBanCalls: SlotCall and BanCall, the value forms of Release,
// Refresh, Banned and Unban in Backend, give what those calls give.
func TestSlotAndBanCalls(t *testing.T) {
	c := newLocal(t)
	now := int64(1_700_000_000_000_000_000)
	key := []byte("sb")
	q := Acquire{Key: key, Limit: 1, TTL: 1e9}
	if err := c.Acquire(&q, now, nil); err != nil || !q.Acquired {
		t.Fatalf("acquire: %+v, %v", q, err)
	}
	s := SlotCall{Key: key, Token: q.Token, TTL: 5e9}
	if err := c.Slot(&s, now, nil); err != nil || !s.Held {
		t.Fatalf("refresh: %+v, %v", s, err)
	}
	// Refreshed to 5 s: held at 4 s, where the first ttl had ended.
	s = SlotCall{Key: key, Token: q.Token}
	if err := c.Slot(&s, now+4e9, nil); err != nil || !s.Held {
		t.Fatalf("release at 4 s: %+v, %v", s, err)
	}
	if err := c.Slot(&s, now+4e9, nil); err != nil || s.Held {
		t.Fatalf("second release: %+v, %v", s, err)
	}

	lim, _ := engine.NewLimit(engine.KindFixed, 1, 1e9, 0)
	ban, _ := engine.NewBan(1, lim.Period, 10e9)
	cb := CheckBan{Key: key, Limit: lim, Cost: 2, Ban: ban}
	if err := c.CheckBan(&cb, now, nil); err != nil || cb.Decision.Allowed != 0 {
		t.Fatalf("checkban: %+v, %v", cb, err)
	}
	b := BanCall{Key: key}
	if err := c.Ban(&b, now+1e9, nil); err != nil || b.Left != 9000 || b.Lifted {
		t.Fatalf("banned: %+v, %v; want 9000 ms left", b, err)
	}
	b = BanCall{Key: key, Lift: true}
	if err := c.Ban(&b, now+1e9, nil); err != nil || !b.Lifted {
		t.Fatalf("unban: %+v, %v", b, err)
	}
	b = BanCall{Key: key}
	if err := c.Ban(&b, now+1e9, nil); err != nil || b.Left != 0 {
		t.Fatalf("banned after unban: %+v, %v", b, err)
	}
}
