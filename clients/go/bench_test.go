package throttlekit_test

import (
	"context"
	"testing"
	"time"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
)

// BenchmarkAllowLocalHit measures ModeLeased's local path: a key holding
// credits of its window (a huge window and batch, so no lease happens while
// the benchmark runs).
func BenchmarkAllowLocalHit(b *testing.B) {
	srv := startServer(b)
	ctx := context.Background()
	l := newLimiter(b, throttlekit.NewClient(srv.RedisClient(b, 3, nil)), throttlekit.LimiterOptions{
		Mode:  throttlekit.ModeLeased,
		Rate:  throttlekit.Rate{Limit: 1 << 44, Period: 7 * 24 * time.Hour},
		Sizer: throttlekit.FixedSizer(1 << 43),
	})
	defer l.Close()
	if d, err := l.Allow(ctx, "bench:hit"); err != nil || !d.Allowed {
		b.Fatal(d, err)
	}
	leases := l.Stats().Leases
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if d, _ := l.Allow(ctx, "bench:hit"); !d.Allowed {
			b.Fatal("denied")
		}
	}
	b.StopTimer()
	if n := l.Stats().Leases - leases; n != 0 {
		b.Fatalf("%d leases during the benchmark", n)
	}
}

// BenchmarkAllowLocalHitParallel is the local path from every P at once on
// one key (one shard lock).
func BenchmarkAllowLocalHitParallel(b *testing.B) {
	srv := startServer(b)
	ctx := context.Background()
	l := newLimiter(b, throttlekit.NewClient(srv.RedisClient(b, 3, nil)), throttlekit.LimiterOptions{
		Mode:  throttlekit.ModeLeased,
		Rate:  throttlekit.Rate{Limit: 1 << 44, Period: 7 * 24 * time.Hour},
		Sizer: throttlekit.FixedSizer(1 << 43),
	})
	defer l.Close()
	if _, err := l.Allow(ctx, "bench:hitp"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = l.Allow(ctx, "bench:hitp")
		}
	})
}

// BenchmarkAllowCachedDeny measures ModeCachedDeny answering a denied key
// from its cache.
func BenchmarkAllowCachedDeny(b *testing.B) {
	srv := startServer(b)
	ctx := context.Background()
	l := newLimiter(b, throttlekit.NewClient(srv.RedisClient(b, 3, nil)), throttlekit.LimiterOptions{
		Mode: throttlekit.ModeCachedDeny,
		Rate: throttlekit.Rate{Limit: 1, Period: time.Hour},
	})
	defer l.Close()
	_, _ = l.Allow(ctx, "bench:deny")
	if d, _ := l.Allow(ctx, "bench:deny"); d.Allowed {
		b.Fatal("not denied")
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		_, _ = l.Allow(ctx, "bench:deny")
	}
}

// BenchmarkStrictVsRawDo runs ModeStrict's Allow and a raw go-redis Do of
// the same THROTTLE.CHECK alternately on the same connection pool and
// reports each one's time per call and their ratio (strict/raw), so both
// see the same machine load.
func BenchmarkStrictVsRawDo(b *testing.B) {
	srv := startServer(b)
	ctx := context.Background()
	rdb := srv.RedisClient(b, 3, nil)
	lim := throttlekit.Rate{Limit: 1 << 40, Period: time.Hour}
	l := newLimiter(b, throttlekit.NewClient(rdb), throttlekit.LimiterOptions{Mode: throttlekit.ModeStrict, Rate: lim})
	defer l.Close()
	var strict, raw time.Duration
	b.ReportAllocs()
	for b.Loop() {
		t0 := time.Now()
		if _, err := rdb.Do(ctx, "THROTTLE.CHECK", "bench:raw", lim.Limit, int64(lim.Period/time.Millisecond)).Result(); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := l.Allow(ctx, "bench:strict"); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		raw += t1.Sub(t0)
		strict += t2.Sub(t1)
	}
	b.ReportMetric(float64(raw.Nanoseconds())/float64(b.N), "raw-ns/call")
	b.ReportMetric(float64(strict.Nanoseconds())/float64(b.N), "strict-ns/call")
	b.ReportMetric(float64(strict)/float64(raw), "strict/raw")
}

// BenchmarkClockRead is what the local path would pay per call to read the
// clock, and why it reads a copy refreshed by a ticker instead (see the
// package documentation).
func BenchmarkClockRead(b *testing.B) {
	start := time.Now()
	var sink int64
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			sink += time.Now().UnixNano()
		}
	})
	b.Run("time.Since", func(b *testing.B) {
		for b.Loop() {
			sink += int64(time.Since(start))
		}
	})
	_ = sink
}
