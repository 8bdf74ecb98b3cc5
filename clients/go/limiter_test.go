package throttlekit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
)

// fakeClock is the real clock moved by a settable offset, so that the
// server (which reads the real clock) and the limiter can disagree. It
// sleeps on the real clock.
type fakeClock struct{ off atomic.Int64 }

func (f *fakeClock) Now() time.Time      { return time.Now().Add(time.Duration(f.off.Load())) }
func (f *fakeClock) Add(d time.Duration) { f.off.Add(int64(d)) }
func (f *fakeClock) Set(d time.Duration) { f.off.Store(int64(d)) }
func (f *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func newFakeClock(d time.Duration) *fakeClock {
	f := new(fakeClock)
	f.Set(d)
	return f
}

// newLimiter is NewLimiter for options the test knows to be valid.
func newLimiter(tb testing.TB, c *throttlekit.Client, opts throttlekit.LimiterOptions) *throttlekit.Limiter {
	tb.Helper()
	l, err := throttlekit.NewLimiter(c, opts)
	if err != nil {
		tb.Fatal(err)
	}
	return l
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
			c := throttlekit.NewClient(srv.RedisClient(t, 2, nil))

			// A week-long window: credits of one lease serve later calls.
			long := newLimiter(t, c, throttlekit.LimiterOptions{
				Mode: throttlekit.ModeLeased, Rate: throttlekit.Rate{Limit: 1000, Period: 7 * 24 * time.Hour},
				Sizer: throttlekit.FixedSizer(10), Clock: clk,
			})
			defer long.Close()
			for i := range 5 {
				if d, err := long.Allow(ctx, "skew:long"+skew.String()); err != nil || !d.Allowed {
					t.Fatalf("call %d: %+v %v", i, d, err)
				}
			}
			if n := long.Stats().Leases; n != 1 {
				t.Fatalf("%d leases for 5 calls, want 1: the credits were judged void", n)
			}

			// A short window: once the server has ended it, its credits are
			// not spent, whatever the node's clock says.
			short := newLimiter(t, c, throttlekit.LimiterOptions{
				Mode: throttlekit.ModeLeased, Rate: throttlekit.Rate{Limit: 1000, Period: 200 * time.Millisecond},
				Sizer: throttlekit.FixedSizer(100), Clock: clk,
			})
			defer short.Close()
			key := "skew:short" + skew.String()
			d, err := short.Allow(ctx, key)
			if err != nil || !d.Allowed {
				t.Fatalf("first call: %+v %v", d, err)
			}
			first := d.ResetAt
			time.Sleep(time.Until(first.Add(5 * time.Millisecond))) // the server's window is over
			d, err = short.Allow(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed && !d.ResetAt.After(first) {
				t.Fatalf("spent a credit of the window ending %v after it ended (now %v)", first, time.Now())
			}
		})
	}
}

// TestStrictAndLeasedAgree: on one node with batch 1 (FixedSizer(1) leases
// exactly what a call lacks) a leased limiter gives the decisions the
// server gives a strict one, for many cost sequences on a fixed window of
// an hour.
//
// Allowed, Limit, Remaining and ResetAt must be equal. RetryAfter is 0 for
// both when allowed and -1 for both when the cost can never pass; when
// denied, each is bounded by the instants the test read around its call:
// the strict one is the server's wait until ResetAt (so within [ResetAt -
// after, ResetAt - before], to the millisecond), the leased one never
// shorter, and longer by at most the leased tier's margin (1 ms, 2 ms for
// the coarse clock, drift) plus the uncertainty of its clock offset, which
// is at most the longest leased call so far (the probe rode in one).
//
// The two limiters use distinct keys of the same window; should the hour
// end during a sequence, the server's own reset times show it (a final
// peek of the strict key reports a later ResetAt than its first decision)
// and the sequence runs again on new keys, as it does when it ended within
// the leased tier's margin of the window's end. Three such attempts in a
// row fail.
func TestStrictAndLeasedAgree(t *testing.T) {
	srv := startServer(t)
	for _, tc := range []struct {
		name  string
		limit int64
		costs []int64
	}{
		{"mixed", 7, []int64{1, 2, 1, 3, 1, 2, 8, 1, 1, 8, 1, 0}},
		{"whole limit at once", 5, []int64{5, 0, 1, 5, 0}},
		{"peeks", 3, []int64{0, 0, 1, 0, 2, 0, 1, 0}},
		{"above the limit first", 4, []int64{9, 1, 9, 3, 9, 1, 0}},
		{"partial grant then fits", 10, []int64{6, 6, 4, 1, 0}},
		{"limit one", 1, []int64{1, 1, 0, 2, 1}},
		{"large", 1000, []int64{999, 2, 1, 1000, 0, 1001}},
		{"ones", 4, []int64{1, 1, 1, 1, 1, 1, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for attempt := 1; ; attempt++ {
				if !agreeOnce(t, srv, tc.name, attempt, tc.limit, tc.costs) {
					return
				}
				if attempt == 3 {
					t.Fatalf("the window rolled over during each of %d attempts", attempt)
				}
				t.Logf("attempt %d: the window rolled over; again on new keys", attempt)
			}
		})
	}
}

// agreeOnce runs costs on fresh keys through a strict and a leased limiter
// and compares their decisions; it reports whether the window rolled over
// (and nothing was compared).
func agreeOnce(t *testing.T, srv *testServer, name string, attempt int, limit int64, costs []int64) (rolled bool) {
	t.Helper()
	ctx := context.Background()
	lim := throttlekit.Rate{Limit: limit, Period: time.Hour, Algo: throttlekit.FixedWindow}
	mk := func(m throttlekit.Mode) *throttlekit.Limiter {
		return newLimiter(t, throttlekit.NewClient(srv.RedisClient(t, 3, nil)), throttlekit.LimiterOptions{
			Mode: m, Rate: lim, Sizer: throttlekit.FixedSizer(1),
		})
	}
	created := time.Now()
	strict, leased := mk(throttlekit.ModeStrict), mk(throttlekit.ModeLeased)
	defer strict.Close()
	defer leased.Close()
	ks, kl := fmt.Sprintf("agree:%s:%d:s", name, attempt), fmt.Sprintf("agree:%s:%d:l", name, attempt)

	type step struct {
		cost                     int64
		ds, dl                   throttlekit.Decision
		sBefore, sAfter          time.Time
		lBefore, lAfter          time.Time
		longestLeased, sinceMade time.Duration
		leasedBefore             bool // the leased limiter had leased the key before this call
	}
	steps := make([]step, len(costs))
	var longest time.Duration
	for i, c := range costs {
		st := &steps[i]
		st.cost = c
		st.leasedBefore = leased.Stats().Leases > 0
		var err error
		st.sBefore = time.Now()
		st.ds, err = strict.AllowN(ctx, ks, c)
		st.sAfter = time.Now()
		if err != nil {
			t.Fatal(err)
		}
		st.lBefore = time.Now()
		st.dl, err = leased.AllowN(ctx, kl, c)
		st.lAfter = time.Now()
		if err != nil {
			t.Fatal(err)
		}
		longest = max(longest, st.lAfter.Sub(st.lBefore))
		st.longestLeased, st.sinceMade = longest, st.lAfter.Sub(created)
	}
	final, err := strict.AllowN(ctx, ks, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if !st.ds.ResetAt.Equal(final.ResetAt) {
			return true
		}
	}
	// The leased tier stops spending a margin before the window's end (and
	// denies): a sequence that came that close to the end is void too.
	if time.Until(final.ResetAt) < 5*time.Millisecond+longest+time.Since(created)/10_000 {
		return true
	}

	for i, st := range steps {
		ds, dl := st.ds, st.dl
		bad := func(format string, args ...any) {
			t.Errorf("call %d (cost %d): %s\n\tstrict %+v\n\tleased %+v", i, st.cost, fmt.Sprintf(format, args...), ds, dl)
		}
		if ds.Limit != limit || dl.Limit != limit {
			bad("limit, want %d", limit)
		}
		if ds.Allowed != dl.Allowed {
			bad("allowed differs")
		}
		if ds.Remaining != dl.Remaining {
			bad("remaining differs")
		}
		if st.cost > limit && !st.leasedBefore {
			// A cost above the limit is denied without a round trip: before
			// its first lease of the key the leased tier knows no window.
			if !dl.ResetAt.IsZero() {
				bad("reset time of a never-leased key, want zero")
			}
		} else if !ds.ResetAt.Equal(dl.ResetAt) {
			bad("reset time differs")
		}
		switch {
		case ds.Allowed:
			if ds.RetryAfter != 0 || dl.RetryAfter != 0 {
				bad("retry-after of an admission, want 0")
			}
		case st.cost > limit:
			if ds.RetryAfter != -1 || dl.RetryAfter != -1 {
				bad("retry-after of a cost above the limit, want -1")
			}
		default:
			const ms = time.Millisecond
			if lo, hi := ds.ResetAt.Sub(st.sAfter)-ms, ds.ResetAt.Sub(st.sBefore)+ms; ds.RetryAfter < lo || ds.RetryAfter > hi {
				bad("strict retry-after outside [%v, %v], the wait until the reset time", lo, hi)
			}
			margin := 3*ms + st.sinceMade/10_000 + st.longestLeased + ms
			if lo, hi := dl.ResetAt.Sub(st.lAfter)-ms, dl.ResetAt.Sub(st.lBefore)+margin; dl.RetryAfter < lo || dl.RetryAfter > hi {
				bad("leased retry-after outside [%v, %v]: the wait until the reset time plus at most the margin", lo, hi)
			}
		}
	}
	return false
}

// TestCachedDeny: a flood on a denied key sends nothing to the server until
// the retry-after has passed, counted both by the client and by the
// server's /metrics.
func TestCachedDeny(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	var sent atomic.Int64
	clk := newFakeClock(0)
	l := newLimiter(t, throttlekit.NewClient(srv.RedisClient(t, 2, &sent)), throttlekit.LimiterOptions{
		Mode:  throttlekit.ModeCachedDeny,
		Rate:  throttlekit.Rate{Limit: 2, Period: time.Minute},
		Clock: clk,
	})
	defer l.Close()
	for i, want := range []bool{true, true, false} {
		d, err := l.Allow(ctx, "flood")
		if err != nil || d.Allowed != want {
			t.Fatalf("call %d: %+v %v", i, d, err)
		}
	}
	sentBefore, serverBefore := sent.Load(), srv.ThrottleCommands(t)
	var denied int
	for range 10000 {
		d, err := l.Allow(ctx, "flood")
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
	if n := srv.ThrottleCommands(t) - serverBefore; n != 0 {
		t.Fatalf("server executed %d THROTTLE commands during the flood", n)
	}
	// A larger cost is denied from the cache too; another key is asked.
	if d, _ := l.AllowN(ctx, "flood", 2); d.Allowed || sent.Load() != sentBefore {
		t.Fatalf("cost 2 during a cached denial: %+v", d)
	}
	if d, _ := l.Allow(ctx, "other"); !d.Allowed || sent.Load() != sentBefore+1 {
		t.Fatalf("another key: %+v, sent %d", d, sent.Load()-sentBefore)
	}
	// Past the retry-after (30 s at 2 per minute) the server is asked again.
	clk.Add(31 * time.Second)
	if _, err := l.Allow(ctx, "flood"); err != nil || sent.Load() != sentBefore+2 {
		t.Fatalf("after retry-after: sent %d, %v", sent.Load()-sentBefore, err)
	}
}

// TestLeasedCoalesce: concurrent misses on one key make one lease.
func TestLeasedCoalesce(t *testing.T) {
	srv := startServer(t)
	l := newLimiter(t, throttlekit.NewClient(srv.RedisClient(t, 3, nil)), throttlekit.LimiterOptions{
		Mode: throttlekit.ModeLeased, Rate: throttlekit.Rate{Limit: 1000, Period: time.Hour}, Sizer: throttlekit.FixedSizer(100),
	})
	defer l.Close()
	var wg sync.WaitGroup
	var allowed atomic.Int64
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := l.Allow(context.Background(), "coalesce")
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
	lim := throttlekit.Rate{Limit: 1000, Period: 7 * 24 * time.Hour}
	fixed := lim
	fixed.Algo = "fixed"
	c := throttlekit.NewClient(srv.RedisClient(t, 3, nil))
	remaining := func(key string) int64 {
		d, err := c.Peek(ctx, key, fixed)
		if err != nil {
			t.Fatal(err)
		}
		return d.Remaining
	}

	t.Run("low-water", func(t *testing.T) {
		l := newLimiter(t, c, throttlekit.LimiterOptions{Mode: throttlekit.ModeLeased, Rate: lim, Sizer: throttlekit.FixedSizer(10), LowWater: 5})
		for range 6 {
			if d, err := l.Allow(ctx, "lw"); err != nil || !d.Allowed {
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
		l := newLimiter(t, c, throttlekit.LimiterOptions{Mode: throttlekit.ModeLeased, Rate: lim, Sizer: throttlekit.FixedSizer(10),
			ReturnIdleAfter: 10 * time.Minute, Clock: clk})
		defer l.Close()
		for _, k := range []string{"idle:a", "idle:b"} {
			if d, err := l.Allow(ctx, k); err != nil || !d.Allowed {
				t.Fatal(d, err)
			}
		}
		if n, err := l.ReturnIdle(ctx); err != nil || n != 0 {
			t.Fatalf("nothing idle yet: %d %v", n, err)
		}
		clk.Add(6 * time.Minute)
		if _, err := l.Allow(ctx, "idle:b"); err != nil {
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
		l := newLimiter(t, c, throttlekit.LimiterOptions{Mode: throttlekit.ModeLeased, Rate: lim, Sizer: throttlekit.FixedSizer(10), MaxKeys: 4})
		for i := range 12 {
			if d, err := l.Allow(ctx, fmt.Sprint("ev:", i)); err != nil || !d.Allowed {
				t.Fatal(d, err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// MaxKeys 4 makes 4 local shards of one key each; which shards
		// the 12 keys hash to depends on the Limiter's random seed, so
		// 8 keys are evicted when every shard got one, more when some
		// shard got none.
		if st := l.Stats(); st.Evicted < 8 || st.Evicted > 11 {
			t.Fatalf("evicted %d, want 8 to 11 of 12 keys with MaxKeys 4", st.Evicted)
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
				l := newLimiter(t, c, throttlekit.LimiterOptions{Mode: mode, Rate: throttlekit.Rate{Limit: 10, Period: time.Second}, FailOpen: open})
				defer l.Close()
				d, err := l.Allow(context.Background(), "k")
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
		{"leased gcra", throttlekit.LimiterOptions{Mode: throttlekit.ModeLeased, Rate: throttlekit.Rate{Limit: 1, Period: time.Second, Algo: throttlekit.GCRA}}},
		{"negative low water", throttlekit.LimiterOptions{Mode: throttlekit.ModeLeased, Rate: throttlekit.Rate{Limit: 1, Period: time.Second}, LowWater: -1}},
		{"unknown mode", throttlekit.LimiterOptions{Mode: 9, Rate: throttlekit.Rate{Limit: 1, Period: time.Second}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := throttlekit.NewLimiter(c, tc.opts)
			var ae *throttlekit.ArgError
			if l != nil || !errors.As(err, &ae) || !errors.Is(err, throttlekit.ErrInvalidArgument) {
				t.Fatalf("got %v, %v; want no limiter and an *ArgError", l, err)
			}
		})
	}
	if l, err := throttlekit.NewLimiter(nil, throttlekit.LimiterOptions{Rate: throttlekit.PerSecond(1)}); l != nil || !errors.Is(err, throttlekit.ErrInvalidArgument) {
		t.Fatalf("nil client: %v, %v", l, err)
	}
	l := newLimiter(t, c, throttlekit.LimiterOptions{Rate: throttlekit.Rate{Limit: 1, Period: time.Second}})
	if _, err := l.AllowN(context.Background(), "k", -1); !errors.Is(err, throttlekit.ErrInvalidArgument) {
		t.Fatalf("negative cost: %v", err)
	}
	l.Close()
	if _, err := l.Allow(context.Background(), "k"); !errors.Is(err, throttlekit.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestLocalPathsAllocateNothing guards what BenchmarkAllowLocalHit and
// BenchmarkAllowCachedDeny measure: answering from the local tier (a
// leased key holding credits; a remembered denial) allocates nothing.
func TestLocalPathsAllocateNothing(t *testing.T) {
	srv := startServer(t)
	ctx := context.Background()
	c := throttlekit.NewClient(srv.RedisClient(t, 3, nil))
	for _, tc := range []struct {
		name    string
		opts    throttlekit.LimiterOptions
		allowed bool
	}{
		{"leased local hit", throttlekit.LimiterOptions{
			Mode:  throttlekit.ModeLeased,
			Rate:  throttlekit.Rate{Limit: 1 << 40, Period: 7 * 24 * time.Hour},
			Sizer: throttlekit.FixedSizer(1 << 30),
		}, true},
		{"cached denial", throttlekit.LimiterOptions{
			Mode: throttlekit.ModeCachedDeny,
			Rate: throttlekit.Rate{Limit: 1, Period: 24 * time.Hour},
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLimiter(t, c, tc.opts)
			defer l.Close()
			key := "allocs:" + tc.name
			for range 2 { // the first call leases, or is admitted and the second denied
				if _, err := l.Allow(ctx, key); err != nil {
					t.Fatal(err)
				}
			}
			before := l.Stats()
			var d throttlekit.Decision
			allocs := testing.AllocsPerRun(1000, func() { d, _ = l.Allow(ctx, key) })
			if d.Allowed != tc.allowed {
				t.Fatalf("decision %+v, want allowed=%v", d, tc.allowed)
			}
			if after := l.Stats(); after != before {
				t.Fatalf("the server was asked during the runs: %+v, then %+v", before, after)
			}
			if allocs != 0 {
				t.Fatalf("%v allocations per Allow on the local path, want 0", allocs)
			}
		})
	}
}
