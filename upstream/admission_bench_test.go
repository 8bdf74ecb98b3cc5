package upstream

import (
	"context"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
)

// BenchmarkAdmission measures one call of each admission script through
// Client against a local redis-server, one connection at a time, beside
// a plain Check in the same run (the baseline): the ratio is what a
// slot, a ban check or a reservation costs over a check. Acquire+release
// and reserve+settle are two calls each.
func BenchmarkAdmission(b *testing.B) {
	c, err := Dial("redis://"+clustertest.Server(b), Options{PoolSize: 1})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Load(ctx); err != nil {
		b.Fatal(err)
	}
	lim, _ := engine.NewLimit(engine.KindGCRA, 1e6, 1e9, 0)
	ban, _ := engine.NewBan(5, lim.Period, 1e9)
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Check(ctx, "bench:c", lim, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("checkban", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.CheckBan(ctx, "bench:b", lim, 1, ban); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("acquire+release", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			g, err := c.Acquire(ctx, "bench:s", 16, 10e9)
			if err != nil || !g.Acquired {
				b.Fatal(g, err)
			}
			if ok, err := c.Release(ctx, "bench:s", g.Slot, g.Gen); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("reserve+settle", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d, r, err := c.Reserve(ctx, "bench:r", lim, 2, 10e9)
			if err != nil || d.Allowed != 1 {
				b.Fatal(d, err)
			}
			if ok, err := c.Settle(ctx, "bench:r", r, 1); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
}
