package throttlekit_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
)

// fakeClock is the real clock moved by a settable offset, so that the
// server (which reads the real clock) and the limiter can disagree.
type fakeClock struct{ off atomic.Int64 }

func (f *fakeClock) Now() time.Time      { return time.Now().Add(time.Duration(f.off.Load())) }
func (f *fakeClock) Add(d time.Duration) { f.off.Add(int64(d)) }
func (f *fakeClock) Set(d time.Duration) { f.off.Store(int64(d)) }
func newFakeClock(d time.Duration) *fakeClock {
	f := new(fakeClock)
	f.Set(d)
	return f
}

// windowCounts is what a hammering run saw, by the window (reset time) of
// each admitted decision.
type windowCounts struct {
	admitted  map[int64]int64
	overshoot time.Duration // latest admission after its window's end, real clock
}

// hammer runs workers goroutines per limiter calling Allow(key, 1) until
// the real clock passes stop. A denied worker waits for the decision's
// retry-after, as a well-behaved caller does: workers spinning on denials
// would keep the goroutines that carry lease replies off the CPU.
func hammer(t *testing.T, lims []*throttlekit.Limiter, key string, workers int, stop time.Time) windowCounts {
	t.Helper()
	var (
		mu  sync.Mutex
		out = windowCounts{admitted: map[int64]int64{}}
		wg  sync.WaitGroup
	)
	errs := make(chan error, len(lims)*workers)
	for _, l := range lims {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				local := map[int64]int64{}
				var over time.Duration
				ctx := context.Background()
				for i := 0; ; i++ {
					if i%64 == 0 && !time.Now().Before(stop) {
						break
					}
					d, err := l.Allow(ctx, key, 1)
					if err != nil {
						errs <- err
						return
					}
					if d.Allowed {
						local[d.ResetAt.UnixMilli()]++
						if late := time.Since(d.ResetAt); late > over {
							over = late
						}
					} else if d.RetryAfter > 0 {
						time.Sleep(min(d.RetryAfter, time.Until(stop)))
					}
				}
				mu.Lock()
				for w, n := range local {
					out.admitted[w] += n
				}
				out.overshoot = max(out.overshoot, over)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return out
}

// TestLeasedWindowCoupling: N nodes (separate go-redis clients and
// limiters), 8 goroutines each, hammer one key limited to 1000 per second
// for at least 5 windows. Admitted per window never exceeds 1000.
func TestLeasedWindowCoupling(t *testing.T) {
	srv := startServer(t)
	const limit, windows, workers = 1000, 5, 8
	for _, sz := range []string{"fixed50", "adaptive"} {
		for _, n := range []int{1, 2, 4, 8} {
			t.Run(fmt.Sprintf("%s/N=%d", sz, n), func(t *testing.T) {
				t.Parallel()
				key := fmt.Sprintf("coupled:%s:%d", sz, n)
				lims := make([]*throttlekit.Limiter, n)
				for i := range lims {
					opts := throttlekit.LimiterOptions{
						Mode:  throttlekit.ModeLeased,
						Limit: throttlekit.Limit{Limit: limit, Period: time.Second},
					}
					if sz == "fixed50" {
						opts.Sizer = throttlekit.FixedSizer(50)
					}
					lims[i] = throttlekit.NewLimiter(throttlekit.NewClient(srv.redisClient(t, 3, nil)), opts)
				}
				// Start at a window boundary and run windows+1 of them: the
				// first and last may be partial.
				start := time.Now().Truncate(time.Second).Add(time.Second)
				time.Sleep(time.Until(start))
				got := hammer(t, lims, key, workers, start.Add((windows+1)*time.Second))
				var st throttlekit.LimiterStats
				for _, l := range lims {
					if err := l.Close(); err != nil {
						t.Error(err)
					}
					s := l.Stats()
					st.Leases += s.Leases
					st.Returns += s.Returns
					st.Probes += s.Probes
				}
				ws := make([]int64, 0, len(got.admitted))
				var total, full, fullSum int64
				for w, c := range got.admitted {
					ws = append(ws, w)
					total += c
					if c > limit {
						t.Errorf("window ending %d admitted %d > %d", w, c, limit)
					}
				}
				sort.Slice(ws, func(i, j int) bool { return ws[i] < ws[j] })
				if len(ws) < windows {
					t.Fatalf("saw %d windows, want at least %d", len(ws), windows)
				}
				for _, w := range ws[1 : len(ws)-1] {
					full++
					fullSum += got.admitted[w]
				}
				util := float64(fullSum) / float64(full*limit)
				rt := float64(st.Leases+st.Returns) / float64(total)
				t.Logf("N=%d %s: windows %d, admitted %d, utilisation of full windows %.3f, round trips/admitted %.4f (leases %d, returns %d, time probes %d), latest admission after window end %v",
					n, sz, len(ws), total, util, rt, st.Leases, st.Returns, st.Probes, got.overshoot)
				if sz == "fixed50" {
					// Per node and window: ceil(admitted/50) leases plus
					// the one that finds the window empty.
					bound := float64(total)/50 + float64(2*n*len(ws))
					if float64(st.Leases) > bound {
						t.Errorf("leases %d > admitted/batch + 2 per node and window = %.0f", st.Leases, bound)
					}
				}
				if testing.Verbose() {
					for _, w := range ws {
						t.Logf("  window ending %d: %d", w, got.admitted[w])
					}
				}
				if util < 0.8 {
					t.Errorf("utilisation %.3f of full windows under hammering, want >= 0.8", util)
				}
			})
		}
	}
}

// TestLeasedClockSkew: a node whose clock is seconds off the server's
// spends a window's credits while the server's window is open and never
// after it ends. A node that trusted its own clock would, 3 s behind, keep
// spending a window's credits 3 s after the server ended it, and, 3 s
// ahead, find every lease void on arrival.
func TestLeasedClockSkew(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	for _, skew := range []time.Duration{-3 * time.Second, 3 * time.Second} {
		t.Run(skew.String(), func(t *testing.T) {
			clk := newFakeClock(skew)
			c := throttlekit.NewClient(srv.redisClient(t, 2, nil))

			// A week-long window: credits of one lease serve later calls.
			long := throttlekit.NewLimiter(c, throttlekit.LimiterOptions{
				Mode: throttlekit.ModeLeased, Limit: throttlekit.Limit{Limit: 1000, Period: 7 * 24 * time.Hour},
				Sizer: throttlekit.FixedSizer(10), Now: clk.Now,
			})
			defer long.Close()
			for i := range 5 {
				if d, err := long.Allow(ctx, "skew:long"+skew.String(), 1); err != nil || !d.Allowed {
					t.Fatalf("call %d: %+v %v", i, d, err)
				}
			}
			if n := long.Stats().Leases; n != 1 {
				t.Fatalf("%d leases for 5 calls, want 1: the credits were judged void", n)
			}

			// A short window: once the server has ended it, its credits are
			// not spent, whatever the node's clock says.
			short := throttlekit.NewLimiter(c, throttlekit.LimiterOptions{
				Mode: throttlekit.ModeLeased, Limit: throttlekit.Limit{Limit: 1000, Period: 200 * time.Millisecond},
				Sizer: throttlekit.FixedSizer(100), Now: clk.Now,
			})
			defer short.Close()
			key := "skew:short" + skew.String()
			d, err := short.Allow(ctx, key, 1)
			if err != nil || !d.Allowed {
				t.Fatalf("first call: %+v %v", d, err)
			}
			first := d.ResetAt
			time.Sleep(time.Until(first.Add(5 * time.Millisecond))) // the server's window is over
			d, err = short.Allow(ctx, key, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed && !d.ResetAt.After(first) {
				t.Fatalf("spent a credit of the window ending %v after it ended (now %v)", first, time.Now())
			}
		})
	}
}

// TestStrictAndLeasedAgree: on one node with batch 1 a leased limiter gives
// the decisions the server gives a strict one.
func TestStrictAndLeasedAgree(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	lim := throttlekit.Limit{Limit: 7, Period: time.Hour, Algo: "fixed"}
	mk := func(m throttlekit.Mode) *throttlekit.Limiter {
		return throttlekit.NewLimiter(throttlekit.NewClient(srv.redisClient(t, 3, nil)), throttlekit.LimiterOptions{
			Mode: m, Limit: lim, Sizer: throttlekit.FixedSizer(1),
		})
	}
	strict, leased := mk(throttlekit.ModeStrict), mk(throttlekit.ModeLeased)
	defer strict.Close()
	defer leased.Close()
	costs := []int64{1, 2, 1, 3, 1, 2, 8, 1, 1, 8, 1, 0}
	for attempt := 0; ; attempt++ {
		ks, kl := fmt.Sprint("agree:s", attempt), fmt.Sprint("agree:l", attempt)
		same := true
		for i, c := range costs {
			ds, err := strict.Allow(ctx, ks, c)
			if err != nil {
				t.Fatal(err)
			}
			dl, err := leased.Allow(ctx, kl, c)
			if err != nil {
				t.Fatal(err)
			}
			if !ds.ResetAt.Equal(dl.ResetAt) && c != 0 && ds.RetryAfter >= 0 {
				same = false // the hour rolled over between the two: retry
				break
			}
			if ds.Allowed != dl.Allowed || ds.Remaining != dl.Remaining || ds.Limit != dl.Limit ||
				(ds.RetryAfter < 0) != (dl.RetryAfter < 0) || (ds.RetryAfter > 0) != (dl.RetryAfter > 0) {
				t.Fatalf("call %d cost %d: strict %+v, leased %+v", i, c, ds, dl)
			}
		}
		if same || attempt == 2 {
			break
		}
	}
}

// TestCachedDeny: a flood on a denied key sends nothing to the server until
// the retry-after has passed, counted both by the client and by the
// server's /metrics.
func TestCachedDeny(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	var sent atomic.Int64
	clk := newFakeClock(0)
	l := throttlekit.NewLimiter(throttlekit.NewClient(srv.redisClient(t, 2, &sent)), throttlekit.LimiterOptions{
		Mode:  throttlekit.ModeCachedDeny,
		Limit: throttlekit.Limit{Limit: 2, Period: time.Minute},
		Now:   clk.Now,
	})
	defer l.Close()
	for i, want := range []bool{true, true, false} {
		d, err := l.Allow(ctx, "flood", 1)
		if err != nil || d.Allowed != want {
			t.Fatalf("call %d: %+v %v", i, d, err)
		}
	}
	sentBefore, serverBefore := sent.Load(), srv.throttleCommands(t)
	var denied int
	for range 10000 {
		d, err := l.Allow(ctx, "flood", 1)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			denied++
		}
		if d.RetryAfter <= 0 || d.RetryAfter > 30*time.Second {
			t.Fatalf("cached denial retry-after %v", d.RetryAfter)
		}
	}
	if denied != 10000 {
		t.Fatalf("%d of 10000 denied", denied)
	}
	if n := sent.Load() - sentBefore; n != 0 {
		t.Fatalf("client sent %d commands during the flood", n)
	}
	if n := srv.throttleCommands(t) - serverBefore; n != 0 {
		t.Fatalf("server executed %d THROTTLE commands during the flood", n)
	}
	// A larger cost is denied from the cache too; another key is asked.
	if d, _ := l.Allow(ctx, "flood", 2); d.Allowed || sent.Load() != sentBefore {
		t.Fatalf("cost 2 during a cached denial: %+v", d)
	}
	if d, _ := l.Allow(ctx, "other", 1); !d.Allowed || sent.Load() != sentBefore+1 {
		t.Fatalf("another key: %+v, sent %d", d, sent.Load()-sentBefore)
	}
	// Past the retry-after (30 s at 2 per minute) the server is asked again.
	clk.Add(31 * time.Second)
	if _, err := l.Allow(ctx, "flood", 1); err != nil || sent.Load() != sentBefore+2 {
		t.Fatalf("after retry-after: sent %d, %v", sent.Load()-sentBefore, err)
	}
}

// TestLeasedCoalesce: concurrent misses on one key make one lease.
func TestLeasedCoalesce(t *testing.T) {
	srv := startServer(t)
	l := throttlekit.NewLimiter(throttlekit.NewClient(srv.redisClient(t, 3, nil)), throttlekit.LimiterOptions{
		Mode: throttlekit.ModeLeased, Limit: throttlekit.Limit{Limit: 1000, Period: time.Hour}, Sizer: throttlekit.FixedSizer(100),
	})
	defer l.Close()
	var wg sync.WaitGroup
	var allowed atomic.Int64
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := l.Allow(context.Background(), "coalesce", 1)
			if err != nil {
				t.Error(err)
			}
			if d.Allowed {
				allowed.Add(1)
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != 64 || l.Stats().Leases != 1 {
		t.Fatalf("allowed %d with %d leases, want 64 with 1", allowed.Load(), l.Stats().Leases)
	}
}

// TestLeasedLowWaterIdleEvict: prefetch below the low-water mark, return of
// idle credits, and eviction that returns credits, each checked on the
// server's budget.
func TestLeasedLowWaterIdleEvict(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	// A week-long window (epoch-aligned): no test here straddles its end.
	lim := throttlekit.Limit{Limit: 1000, Period: 7 * 24 * time.Hour}
	fixed := lim
	fixed.Algo = "fixed"
	c := throttlekit.NewClient(srv.redisClient(t, 3, nil))
	remaining := func(key string) int64 {
		d, err := c.Peek(ctx, key, fixed)
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}

	t.Run("low-water", func(t *testing.T) {
		l := throttlekit.NewLimiter(c, throttlekit.LimiterOptions{Mode: throttlekit.ModeLeased, Limit: lim, Sizer: throttlekit.FixedSizer(10), LowWater: 5})
		for range 6 {
			if d, err := l.Allow(ctx, "lw", 1); err != nil || !d.Allowed {
				t.Fatal(d, err)
			}
		}
		if err := l.Close(); err != nil { // waits for the prefetch, returns the rest
			t.Fatal(err)
		}
		if st := l.Stats(); st.Leases != 2 {
			t.Fatalf("leases %d, want 2 (one prefetch)", st.Leases)
		}
		if r := remaining("lw"); r != 1000-6 {
			t.Fatalf("server remaining %d, want %d", r, 1000-6)
		}
	})
	t.Run("idle", func(t *testing.T) {
		clk := newFakeClock(0)
		l := throttlekit.NewLimiter(c, throttlekit.LimiterOptions{Mode: throttlekit.ModeLeased, Limit: lim, Sizer: throttlekit.FixedSizer(10),
			ReturnIdleAfter: 10 * time.Minute, Now: clk.Now})
		defer l.Close()
		for _, k := range []string{"idle:a", "idle:b"} {
			if d, err := l.Allow(ctx, k, 1); err != nil || !d.Allowed {
				t.Fatal(d, err)
			}
		}
		if n, err := l.ReturnIdle(ctx); err != nil || n != 0 {
			t.Fatalf("nothing idle yet: %d %v", n, err)
		}
		clk.Add(6 * time.Minute)
		if _, err := l.Allow(ctx, "idle:b", 1); err != nil {
			t.Fatal(err)
		}
		clk.Add(6 * time.Minute)
		n, err := l.ReturnIdle(ctx)
		if err != nil || n != 9 {
			t.Fatalf("returned %d (%v), want the 9 credits of idle:a", n, err)
		}
		if ra, rb := remaining("idle:a"), remaining("idle:b"); ra != 999 || rb != 990 {
			t.Fatalf("server remaining a=%d b=%d, want 999 and 990", ra, rb)
		}
	})
	t.Run("evict", func(t *testing.T) {
		l := throttlekit.NewLimiter(c, throttlekit.LimiterOptions{Mode: throttlekit.ModeLeased, Limit: lim, Sizer: throttlekit.FixedSizer(10), MaxKeys: 4})
		for i := range 12 {
			if d, err := l.Allow(ctx, fmt.Sprint("ev:", i), 1); err != nil || !d.Allowed {
				t.Fatal(d, err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if st := l.Stats(); st.Evicted != 8 {
			t.Fatalf("evicted %d, want 8", st.Evicted)
		}
		for i := range 12 {
			if r := remaining(fmt.Sprint("ev:", i)); r != 999 {
				t.Fatalf("key %d: server remaining %d, want 999 (credits returned)", i, r)
			}
		}
	})
}

// TestFailOpenClosed: with the server unreachable Allow applies FailOpen
// and returns the error.
func TestFailOpenClosed(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: freePort(t), MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1})
	defer rdb.Close()
	c := throttlekit.NewClient(rdb)
	for _, mode := range []throttlekit.Mode{throttlekit.ModeStrict, throttlekit.ModeCachedDeny, throttlekit.ModeLeased} {
		for _, open := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/open=%v", mode, open), func(t *testing.T) {
				l := throttlekit.NewLimiter(c, throttlekit.LimiterOptions{Mode: mode, Limit: throttlekit.Limit{Limit: 10, Period: time.Second}, FailOpen: open})
				defer l.Close()
				d, err := l.Allow(context.Background(), "k", 1)
				if err == nil || d.Allowed != open {
					t.Fatalf("%+v %v", d, err)
				}
			})
		}
	}
}

func TestLimiterInvalidOptions(t *testing.T) {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	for _, tc := range []struct {
		name string
		opts throttlekit.LimiterOptions
	}{
		{"no limit", throttlekit.LimiterOptions{}},
		{"leased gcra", throttlekit.LimiterOptions{Mode: throttlekit.ModeLeased, Limit: throttlekit.Limit{Limit: 1, Period: time.Second, Algo: "gcra"}}},
		{"negative low water", throttlekit.LimiterOptions{Mode: throttlekit.ModeLeased, Limit: throttlekit.Limit{Limit: 1, Period: time.Second}, LowWater: -1}},
		{"unknown mode", throttlekit.LimiterOptions{Mode: 9, Limit: throttlekit.Limit{Limit: 1, Period: time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := throttlekit.NewLimiter(c, tc.opts)
			defer l.Close()
			if _, err := l.Allow(context.Background(), "k", 1); !errors.Is(err, throttlekit.ErrInvalidArgument) {
				t.Fatalf("got %v", err)
			}
		})
	}
	l := throttlekit.NewLimiter(c, throttlekit.LimiterOptions{Limit: throttlekit.Limit{Limit: 1, Period: time.Second}})
	if _, err := l.Allow(context.Background(), "k", -1); !errors.Is(err, throttlekit.ErrInvalidArgument) {
		t.Fatalf("negative cost: %v", err)
	}
	l.Close()
	if _, err := l.Allow(context.Background(), "k", 1); !errors.Is(err, throttlekit.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
