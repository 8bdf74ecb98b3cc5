package tier

import (
	"math/rand/v2"
	"testing"
	"time"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/shard"
	"github.com/throttlekit/throttlekit-server/upstream"
)

// The leased-mode tests of GCRA, token bucket and sliding window: n
// simulated servers (n Backends on one real redis-server) share a key and
// one injected clock, each running its scripts at the server's instant, so
// every count below is the same on every run.

const (
	fleetN     = 3
	fleetBatch = 10
	fleetStep  = int64(time.Millisecond)
	fleetSteps = 5000
	fleetIdle  = 20 * fleetStep // idle return after 20 ms without a spend
)

// offered returns the checks server srv receives at step i (1 ms steps):
// saturated (1000 checks/s per server against limits of 100/s); then
// server 0 quiet while the others go on; then light load (one check per
// server every 50 ms, 60/s in all), so leases go idle with credits left;
// then all quiet; then random load (0 to 2 checks per server and ms).
func offered(r *rand.Rand, i, srv int) int {
	switch {
	case i < 1000:
		return 1
	case i < 1500:
		if srv == 0 {
			return 0
		}
		return 1
	case i < 2500:
		if i%50 == 17*srv {
			return 1
		}
		return 0
	case i < 3000:
		return 0
	}
	return r.IntN(3)
}

// simulate runs the offered load on key against lim through check (one
// server each), calling idle on every server every 10 steps, and returns
// the instant of every admitted unit, in order.
func simulate(t *testing.T, n int, check func(srv int, now int64) bool, idle func(srv int, now int64)) []int64 {
	t.Helper()
	r := rand.New(rand.NewPCG(19, 1))
	var admits []int64
	for i := 0; i < fleetSteps; i++ {
		now := t0 + int64(i)*fleetStep
		for srv := 0; srv < n; srv++ {
			for k := offered(r, i, srv); k > 0; k-- {
				if check(srv, now) {
					admits = append(admits, now)
				}
			}
			if idle != nil && i%10 == 9 {
				idle(srv, now)
			}
		}
	}
	return admits
}

// patientBackend is newBackend with 10 s timeouts: these tests count every
// decision, and a call that timed out on a loaded machine (or under -race)
// would fail them for a reason that has nothing to do with leasing.
func patientBackend(t *testing.T, url string, cfg Config) *Backend {
	t.Helper()
	c, err := upstream.Dial(url, upstream.Options{Timeout: 10 * time.Second, PoolSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cfg.Client, cfg.Local, cfg.ServerClock = c, limits.NewLocal(shard.New(shard.Config{}), limits.Config{}), true
	cfg.Timeout = 10 * time.Second
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// fleet starts n leased Backends on url, and returns simulate's check and
// idle over them for key and lim.
func fleet(t *testing.T, url string, n int, key string, lim engine.Limit) ([]*Backend, func(int, int64) bool, func(int, int64)) {
	bs := make([]*Backend, n)
	for i := range bs {
		bs[i] = patientBackend(t, url, Config{Mode: ModeLeased, Batch: fleetBatch})
	}
	check := func(srv int, now int64) bool {
		r := do(bs[srv], &limits.Op{Kind: limits.OpCheck, Key: []byte(key), Limit: lim, Cost: 1}, now)
		if r.Err != nil {
			t.Fatalf("server %d at %d: %v", srv, now-t0, r.Err)
		}
		return r.Decision.Allowed != 0
	}
	idle := func(srv int, now int64) { bs[srv].ReturnIdle(now, fleetIdle) }
	return bs, check, idle
}

// inMemory is simulate's check on one in-memory server, whichever server
// the load was offered to: the engine's own admissions under the same
// offered load, the baseline of utilisation.
func inMemory(lim engine.Limit) func(int, int64) bool {
	loc := limits.NewLocal(shard.New(shard.Config{}), limits.Config{})
	return func(_ int, now int64) bool {
		op := limits.Op{Kind: limits.OpCheck, Key: []byte("k"), Limit: lim, Cost: 1}
		loc.Do(&op, now, nil)
		return op.Decision.Allowed != 0
	}
}

// worstInterval returns the largest excess, over every interval [a, b]
// between two admissions, of the units admitted in it over bound(b - a).
func worstInterval(admits []int64, bound func(d int64) int64) int64 {
	worst := int64(-1 << 62)
	for i := range admits {
		if i > 0 && admits[i-1] == admits[i] {
			continue // the first admission of an instant starts its intervals
		}
		for j := i; j < len(admits); j++ {
			if j+1 < len(admits) && admits[j+1] == admits[j] {
				continue // the last admission of an instant ends them
			}
			worst = max(worst, int64(j-i+1)-bound(admits[j]-admits[i]))
		}
	}
	return worst
}

// TestLeasedRateBound: GCRA and token-bucket keys leased by three servers
// admit over every interval at most what the engine admits over it plus
// N x (batch - 1) (package doc, Modes), idle servers' credits are
// un-charged, and the fleet admits about what one in-memory server does.
func TestLeasedRateBound(t *testing.T) {
	url := "redis://" + clustertest.Server(t)
	for _, tc := range []struct {
		name  string
		lim   engine.Limit
		bound func(d int64) int64 // the engine's most admitted over an interval of d ns
	}{
		{"gcra", engine.Limit{Algo: engine.KindGCRA, Limit: 100, Period: int64(time.Second)},
			func(d int64) int64 { return 100 + d/(int64(time.Second)/100) }},
		{"token", engine.Limit{Algo: engine.KindToken, Limit: 100, Period: int64(time.Second), Burst: 20},
			func(d int64) int64 { return 20 + d*100/int64(time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lim, err := engine.NewLimit(tc.lim.Algo, tc.lim.Limit, tc.lim.Period, tc.lim.Burst)
			if err != nil {
				t.Fatal(err)
			}
			base := simulate(t, fleetN, inMemory(lim), nil)
			if w := worstInterval(base, tc.bound); w > 0 {
				t.Fatalf("the in-memory engine exceeds the stated bound by %d: the bound is wrong", w)
			}
			bs, check, idle := fleet(t, url, fleetN, "rate:"+tc.name, lim)
			admits := simulate(t, fleetN, check, idle)
			excess := worstInterval(admits, tc.bound)
			var st Stats
			for _, b := range bs {
				s := b.UpstreamStats()
				st.Leases += s.Leases
				st.LeaseHits += s.LeaseHits
				st.Returned += s.Returned
				st.Stranded += s.Stranded
			}
			t.Logf("%s: %d admitted by %d servers, %d by one in-memory server (utilisation %.3f); worst interval %+d over the engine's bound (allowed %d); %d leases, %d local hits, %d credits returned, %d stranded",
				tc.name, len(admits), fleetN, len(base), float64(len(admits))/float64(len(base)), excess,
				fleetN*(fleetBatch-1), st.Leases, st.LeaseHits, st.Returned, st.Stranded)
			if excess > fleetN*(fleetBatch-1) {
				t.Fatalf("an interval admitted %d over the engine's bound, more than N x (batch - 1) = %d", excess, fleetN*(fleetBatch-1))
			}
			if st.Returned == 0 {
				t.Fatal("no idle credits were returned")
			}
			if st.LeaseHits == 0 || st.Leases == 0 {
				t.Fatal("no check was answered from a lease")
			}
			if u := float64(len(admits)) / float64(len(base)); u < 0.9 {
				t.Fatalf("utilisation %.3f of the in-memory server's admissions, want >= 0.9", u)
			}
		})
	}
}

// TestLeasedSlidingCoupled: a sliding window leased by three servers. At
// every admission, the window estimate computed from the units actually
// admitted (the current window's count plus the previous one's weighted by
// the part of it still inside the sliding period, rounded up, as the
// engine computes it) is within the limit: the leases never let the fleet
// admit what the in-memory engine would refuse at that instant. A second
// scenario leases just before a window's end and spends late in the next
// window, where carried credits would exceed the limit.
func TestLeasedSlidingCoupled(t *testing.T) {
	url := "redis://" + clustertest.Server(t)
	lim, err := engine.NewLimit(engine.KindSliding, 100, int64(time.Second), 0)
	if err != nil {
		t.Fatal(err)
	}
	worst := func(admits []int64) (worst int64, perWindow map[int64]int64) {
		p := lim.Period
		perWindow = map[int64]int64{}
		worst = -1 << 62
		for i, at := range admits {
			w := floorDiv(at, p)
			perWindow[w]++
			if i+1 < len(admits) && admits[i+1] == at {
				continue // count every admission of the instant first
			}
			cur, prev := perWindow[w], perWindow[w-1]
			e := at - w*p
			est := cur + (prev*(p-e)+p-1)/p
			worst = max(worst, est-lim.Limit)
		}
		return worst, perWindow
	}
	base := simulate(t, fleetN, inMemory(lim), nil)
	if w, _ := worst(base); w > 0 {
		t.Fatalf("the in-memory engine's estimate exceeds the limit by %d: the measure is wrong", w)
	}
	bs, check, idle := fleet(t, url, fleetN, "sliding", lim)
	admits := simulate(t, fleetN, check, idle)
	excess, perWindow := worst(admits)
	_, baseWindow := worst(base)
	for w := floorDiv(t0, lim.Period); w <= floorDiv(t0+fleetSteps*fleetStep, lim.Period); w++ {
		t.Logf("window %d: %d admitted by %d servers, %d by one in-memory server", w-floorDiv(t0, lim.Period),
			perWindow[w], fleetN, baseWindow[w])
	}
	var st Stats
	for _, b := range bs {
		s := b.UpstreamStats()
		st.Leases += s.Leases
		st.Returned += s.Returned
		st.Stranded += s.Stranded
	}
	t.Logf("sliding: %d admitted, %d in memory (utilisation %.3f); largest estimate %+d against the limit; %d leases, %d returned, %d stranded",
		len(admits), len(base), float64(len(admits))/float64(len(base)), excess, st.Leases, st.Returned, st.Stranded)
	if excess > 0 {
		t.Fatalf("the estimate of the admitted units exceeded the limit by %d", excess)
	}
	if u := float64(len(admits)) / float64(len(base)); u < 0.8 {
		t.Fatalf("utilisation %.3f of the in-memory server's admissions, want >= 0.8", u)
	}

	// Credits leased 10 ms before a window's end do not carry into the
	// next window: there the previous window's count weighs less than the
	// upstream counted it when it granted them, and spending them late in
	// the next window on top of its own grants would exceed the limit.
	_, check, _ = fleet(t, url, fleetN, "sliding:carry", lim)
	w0 := (floorDiv(t0, lim.Period) + 1) * lim.Period
	admits = admits[:0]
	for srv := 0; srv < fleetN; srv++ {
		if !check(srv, w0+int64(990*time.Millisecond)) {
			t.Fatal("a lease near the window's end was denied")
		}
		admits = append(admits, w0+int64(990*time.Millisecond))
	}
	late := w0 + lim.Period + int64(900*time.Millisecond)
	for srv := 0; srv < fleetN; srv++ {
		for k := 0; k < 200; k++ {
			if check(srv, late) {
				admits = append(admits, late)
			}
		}
	}
	excess, perWindow = worst(admits)
	t.Logf("carry: %d admitted before the window's end, %d late in the next; largest estimate %+d against the limit",
		perWindow[floorDiv(w0, lim.Period)], perWindow[floorDiv(late, lim.Period)], excess)
	if excess > 0 {
		t.Fatalf("credits carried into the next window: the estimate exceeded the limit by %d", excess)
	}
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// TestLeasedReturnSafe: a GCRA lease's idle units are un-charged once
// (a second idle pass has nothing to give), and a return that comes after
// the lease's charge drained takes nothing back, so it cannot undo another
// server's later charge.
func TestLeasedReturnSafe(t *testing.T) {
	url := "redis://" + clustertest.Server(t)
	lim, _ := engine.NewLimit(engine.KindGCRA, 100, int64(time.Second), 0) // one unit per 10 ms, burst 100
	a := patientBackend(t, url, Config{Mode: ModeLeased, Batch: 10})
	b := patientBackend(t, url, Config{Mode: ModeLeased, Batch: 10})
	check := func(be *Backend, key string, now int64) engine.Decision {
		r := do(be, &limits.Op{Kind: limits.OpCheck, Key: []byte(key), Limit: lim, Cost: 1}, now)
		if r.Err != nil || r.Decision.Allowed != 1 {
			t.Fatalf("check %s at %d: %+v %v", key, now-t0, r.Decision, r.Err)
		}
		return r.Decision
	}
	peek := func(key string, now int64) int64 {
		d, err := a.cfg.Client.At(now).Peek(t.Context(), key, lim, 1)
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}

	check(a, "once", t0) // leases 10, spends 1
	if got := peek("once", t0); got != 90 {
		t.Fatalf("after the lease the upstream has %d left, want 90", got)
	}
	idle := int64(5 * time.Millisecond)
	if got := a.ReturnIdle(t0+idle, idle); got != 9 {
		t.Fatalf("idle return took back %d, want the 9 unused units", got)
	}
	if got := peek("once", t0+idle); got != 99 {
		t.Fatalf("after the return the upstream has %d left, want 99", got)
	}
	if got := a.ReturnIdle(t0+2*idle, idle); got != 0 {
		t.Fatalf("a second idle pass took back %d, want 0", got)
	}

	d := check(a, "late", t0) // leases 10 (full again at t0+100ms), spends 1
	late := t0 + int64(200*time.Millisecond)
	check(b, "late", late) // b charges 10 after a's charge drained
	before := peek("late", late)
	n, err := a.cfg.Client.At(late).ReturnLimit(t.Context(), "late", lim, 9, d.ResetAt)
	if err != nil || n != 0 {
		t.Fatalf("a return after the lease drained took back %d (%v), want 0", n, err)
	}
	if got := peek("late", late); got != before {
		t.Fatalf("the late return changed the upstream: %d left, was %d", got, before)
	}
}

// TestLeasedRateExcess: the N x (batch - 1) of the bound is reached when
// every server holds the rest of a lease while the upstream refills, and
// then all spend at once beside a full burst; the idle return takes that
// excess away.
func TestLeasedRateExcess(t *testing.T) {
	url := "redis://" + clustertest.Server(t)
	for _, tc := range []struct {
		name  string
		lim   engine.Limit
		burst int64
	}{
		{"gcra", engine.Limit{Algo: engine.KindGCRA, Limit: 100, Period: int64(time.Second)}, 100},
		{"token", engine.Limit{Algo: engine.KindToken, Limit: 100, Period: int64(time.Second), Burst: 40}, 40},
	} {
		for _, idleReturn := range []bool{false, true} {
			lim, _ := engine.NewLimit(tc.lim.Algo, tc.lim.Limit, tc.lim.Period, tc.lim.Burst)
			key := "excess:" + tc.name
			if idleReturn {
				key += ":idle"
			}
			_, check, idle := fleet(t, url, fleetN, key, lim)
			for srv := 0; srv < fleetN; srv++ {
				if !check(srv, t0) {
					t.Fatalf("%s: server %d's first check was denied", tc.name, srv)
				}
			}
			if idleReturn {
				for srv := 0; srv < fleetN; srv++ {
					idle(srv, t0+int64(50*time.Millisecond))
				}
			}
			later := t0 + int64(2*time.Second) // the upstream is full again
			admitted := int64(0)
			for srv := 0; srv < fleetN; srv++ {
				for k := 0; k < 200; k++ {
					if check(srv, later) {
						admitted++
					}
				}
			}
			want := tc.burst + fleetN*(fleetBatch-1)
			if idleReturn {
				want = tc.burst
			}
			t.Logf("%s, idle return %v: %d admitted at one instant (burst %d, N x (batch - 1) = %d)", tc.name, idleReturn,
				admitted, tc.burst, fleetN*(fleetBatch-1))
			if admitted != want {
				t.Fatalf("%s, idle return %v: %d admitted at one instant, want %d", tc.name, idleReturn, admitted, want)
			}
		}
	}
}

// TestLeasedRateAutoBatch: with the Go client's AdaptiveSizer
// (--upstream-batch auto) a GCRA key leased in many small batches over one
// period asks for larger ones in the next.
func TestLeasedRateAutoBatch(t *testing.T) {
	b := patientBackend(t, "redis://"+clustertest.Server(t), Config{Mode: ModeLeased, Sizer: &throttlekit.AdaptiveSizer{}})
	lim, _ := engine.NewLimit(engine.KindGCRA, 10000, int64(time.Second), 0) // initial batch sqrt(10000) = 100
	run := func(from int64) (leases, leased int64) {
		s0 := b.UpstreamStats()
		for i := int64(0); i < 1000; i++ {
			now := from + i*int64(time.Millisecond)
			r := do(b, &limits.Op{Kind: limits.OpCheck, Key: []byte("auto"), Limit: lim, Cost: 1}, now)
			if r.Err != nil || r.Decision.Allowed != 1 {
				t.Fatalf("check at %d: %+v %v", now-t0, r.Decision, r.Err)
			}
			for k := 0; k < 4; k++ { // 5 checks per ms: 5000/s, half the rate
				do(b, &limits.Op{Kind: limits.OpCheck, Key: []byte("auto"), Limit: lim, Cost: 1}, now)
			}
		}
		s := b.UpstreamStats()
		return s.Leases - s0.Leases, s.Leased - s0.Leased
	}
	l1, c1 := run(t0)
	l2, c2 := run(t0 + int64(time.Second))
	t.Logf("period 1: %d leases of %.1f credits; period 2: %d leases of %.1f", l1, float64(c1)/float64(l1), l2, float64(c2)/float64(l2))
	if c1/l1 != 100 {
		t.Fatalf("period 1 leased %d credits per lease, want the initial batch 100", c1/l1)
	}
	if c2/l2 <= 100 || l2 >= l1 {
		t.Fatalf("period 2 leased %d credits per lease in %d leases, want more than 100 in fewer than %d", c2/l2, l2, l1)
	}
}
