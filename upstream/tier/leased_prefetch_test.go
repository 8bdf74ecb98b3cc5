package tier

import (
	"strconv"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/limits"
)

// waitLease returns once key's lease has no lease call in flight: a test
// stands for a round trip shorter than the time the low-water mark's
// credits take to spend.
func waitLease(t *testing.T, b *Backend, key string) {
	t.Helper()
	b.leaseMu.Lock()
	l := b.leases[key]
	b.leaseMu.Unlock()
	if l == nil {
		t.Fatalf("no lease of %q", key)
	}
	for {
		l.mu.Lock()
		busy := l.inflight
		l.mu.Unlock()
		if !busy {
			return
		}
		time.Sleep(50 * time.Microsecond) // polled, not timed: any wait is enough
	}
}

// steady sends n checks of key, one every step from start, as a front
// does (Local first, then Do), each lease landing before the next check.
// It returns how many were admitted.
func steady(t *testing.T, b *Backend, key string, lim engine.Limit, start, step int64, n int) int {
	t.Helper()
	allowed := 0
	for i := 0; i < n; i++ {
		now := start + int64(i)*step
		op := &limits.Op{Kind: limits.OpCheck, Key: []byte(key), Limit: lim, Cost: 1}
		if !b.Local(op, now) {
			op = do(b, op, now)
		}
		if op.Err != nil {
			t.Fatal(op.Err)
		}
		allowed += int(op.Decision.Allowed)
		waitLease(t, b, key)
	}
	return allowed
}

// TestLeasedPrefetchSteady: under a steady load below the limit a fixed
// or sliding window's lease is renewed at the low-water mark, so after
// the first lease no check waits for one; no window admits more than the
// limit; the first check of the next window waits (the old credits are
// void), and INFO reports both counters.
func TestLeasedPrefetchSteady(t *testing.T) {
	for _, algo := range []engine.Kind{engine.KindFixed, engine.KindSliding} {
		t.Run(algo.String(), func(t *testing.T) {
			b := newBackend(t, "redis://"+clustertest.Server(t), Config{Mode: ModeLeased, Batch: 20})
			lim, _ := engine.NewLimit(algo, 1000, int64(time.Second), 0)
			ms := int64(time.Millisecond)
			// 500 checks, one every 1.9 ms: the window's first 950 ms.
			if got := steady(t, b, "p", lim, t0, 19*ms/10, 500); got != 500 {
				t.Fatalf("admitted %d of 500", got)
			}
			s := b.UpstreamStats()
			if s.LeaseWaits != 1 || s.Prefetches != s.Leases-1 || s.Leases < 500/20 {
				t.Fatalf("%+v: want only the first check waiting, every later lease a prefetch", s)
			}
			if s.Leased > 500+20 {
				t.Fatalf("leased %d credits for 500 checks, batch 20", s.Leased)
			}
			// The next window: its first check waits (the old credits are
			// void), then prefetches again.
			if got := steady(t, b, "p", lim, t0+int64(time.Second), 19*ms/10, 100); got != 100 {
				t.Fatalf("next window: admitted %d of 100", got)
			}
			if s3 := b.UpstreamStats(); s3.LeaseWaits != 2 || s3.Prefetches <= s.Prefetches {
				t.Fatalf("next window: %+v", s3)
			}
			fields := map[string]string{}
			for _, f := range b.InfoFields() {
				fields[f[0]] = f[1]
			}
			s3 := b.UpstreamStats()
			if fields["upstream_lease_prefetches"] != strconv.FormatInt(s3.Prefetches, 10) || fields["upstream_lease_waits"] != "2" {
				t.Fatalf("INFO %v, stats %+v", fields, s3)
			}
		})
	}
}

// TestLeasedPrefetchOverload: many checks on one key, one lease in flight
// at a time: prefetched or not, a fixed or sliding window never admits
// more than its limit, and a window known to be spent (a short grant)
// sends no more leases.
func TestLeasedPrefetchOverload(t *testing.T) {
	for _, algo := range []engine.Kind{engine.KindFixed, engine.KindSliding} {
		t.Run(algo.String(), func(t *testing.T) {
			b := newBackend(t, "redis://"+clustertest.Server(t), Config{Mode: ModeLeased, Batch: 8})
			lim, _ := engine.NewLimit(algo, 100, int64(time.Second), 0)
			if got := steady(t, b, "o", lim, t0, int64(time.Millisecond), 300); got != 100 {
				t.Fatalf("admitted %d of 300, limit 100", got)
			}
			s := b.UpstreamStats()
			leases := s.Leases
			if s.Prefetches == 0 || s.Leased != 100 {
				t.Fatalf("%+v", s)
			}
			steady(t, b, "o", lim, t0+300*int64(time.Millisecond), int64(time.Millisecond), 100)
			if s := b.UpstreamStats(); s.Leases != leases {
				t.Fatalf("a spent window leased again: %+v", s)
			}
		})
	}
}

// TestLeasedPrefetchUncoupled: GCRA and token bucket leases never
// prefetch, so their bound (limit + N x (B-1), package doc) holds as
// stated: a check waits whenever the credits ran out.
func TestLeasedPrefetchUncoupled(t *testing.T) {
	for _, algo := range []engine.Kind{engine.KindGCRA, engine.KindToken} {
		t.Run(algo.String(), func(t *testing.T) {
			b := newBackend(t, "redis://"+clustertest.Server(t), Config{Mode: ModeLeased, Batch: 10})
			lim, _ := engine.NewLimit(algo, 1000, int64(time.Second), 1000)
			if got := steady(t, b, "u", lim, t0, int64(time.Millisecond), 100); got != 100 {
				t.Fatalf("admitted %d of 100", got)
			}
			if s := b.UpstreamStats(); s.Prefetches != 0 || s.LeaseWaits != s.Leases || s.Leases < 10 {
				t.Fatalf("%+v: want no prefetch, a wait per lease", s)
			}
		})
	}
}

// TestLeasedPrefetchWindowEnd: a prefetch is sent only if the window's end
// is further away than the last grant: a batch of 20 spent one credit
// every 10 ms reaches its low-water mark (5 left) 140 ms after its grant,
// so a grant at 600 ms of a 1 s window prefetches at 740 ms, and one at
// 800 ms does not at 940 ms (it would lease 20 credits of a window with
// 60 ms left, spendable at 6). Without it the 20 credits are spent
// exactly, none stranded, and the next window's first check waits.
func TestLeasedPrefetchWindowEnd(t *testing.T) {
	ms := int64(time.Millisecond)
	for _, tc := range []struct {
		start      int64
		prefetches int64
	}{{600 * ms, 1}, {800 * ms, 0}} {
		b := newBackend(t, "redis://"+clustertest.Server(t), Config{Mode: ModeLeased, Batch: 20})
		lim, _ := engine.NewLimit(engine.KindFixed, 1000, int64(time.Second), 0)
		if got := steady(t, b, "e", lim, t0+tc.start, 10*ms, 20); got != 20 {
			t.Fatalf("start %d ms: admitted %d of 20", tc.start/ms, got)
		}
		s := b.UpstreamStats()
		if s.Prefetches != tc.prefetches || s.Leases != 1+tc.prefetches || s.LeaseWaits != 1 {
			t.Fatalf("start %d ms: %+v, want %d prefetches", tc.start/ms, s, tc.prefetches)
		}
		if got := steady(t, b, "e", lim, t0+int64(time.Second), 10*ms, 1); got != 1 {
			t.Fatalf("start %d ms: next window denied", tc.start/ms)
		}
		s = b.UpstreamStats()
		if s.LeaseWaits != 2 || s.Stranded != 20*tc.prefetches {
			t.Fatalf("start %d ms, next window: %+v, want 2 waits and %d stranded", tc.start/ms, s, 20*tc.prefetches)
		}
	}
}
