package server

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// BenchmarkDispatchLive is BenchmarkDispatch at a million live keys (16-byte
// names, 10 per hour, so none expires): pipelines of 16 THROTTLE.CHECK (or
// CL.THROTTLE) on keys drawn uniformly, as the live-key method of tkbench
// sends them, so that each command's key is a cache miss. One op is one
// command. -short uses 100k keys.
func BenchmarkDispatchLive(b *testing.B) {
	keys := 1_000_000
	if testing.Short() {
		keys = 100_000
	}
	name := func(i int) string { return fmt.Sprintf("lk%014d", i) }
	check := func(k string) string { return cmd("THROTTLE.CHECK", k, "10", "1h") }
	cell := func(k string) string { return cmd("CL.THROTTLE", k, "9", "10", "3600") }
	tl := newTestLoop(b, nil)
	now := time.Now().UnixNano()
	var warm []byte
	for i := range keys {
		warm = append(warm, check(name(i))...)
		if len(warm) > 1<<20 || i == keys-1 {
			tl.l.process(tl.cl, warm, now)
			tl.l.out, warm = tl.l.out[:0], warm[:0]
		}
	}
	if n := tl.l.srv.core.Len(nil); n != keys {
		b.Fatalf("%d keys live, want %d", n, keys)
	}
	for _, c := range []struct {
		name string
		enc  func(string) string
	}{{"throttle.check", check}, {"cl.throttle", cell}} {
		b.Run(fmt.Sprintf("%s/keys=%d/P=16", c.name, keys), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			pipes := make([][]byte, 4096)
			for i := range pipes {
				for range 16 {
					pipes[i] = append(pipes[i], c.enc(name(r.IntN(keys)))...)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for done, i := 0, 0; done < b.N; done, i = done+16, i+1 {
				in := pipes[i%len(pipes)]
				if n, closed := tl.l.process(tl.cl, in, now); n != len(in) || closed {
					b.Fatalf("consumed %d of %d, closed %v", n, len(in), closed)
				}
				tl.l.out = tl.l.out[:0]
			}
		})
		// paired alternates a pipeline on a loop that batches and one on
		// a loop of the same server that runs each check on its own (no
		// local backend for batches), timing each, so that the load of
		// other processes falls on both alike; one/batch is their ratio.
		b.Run(fmt.Sprintf("%s/keys=%d/P=16/paired", c.name, keys), func(b *testing.B) {
			r := rand.New(rand.NewPCG(3, 4))
			pipes := make([][]byte, 4096)
			for i := range pipes {
				for range 16 {
					pipes[i] = append(pipes[i], c.enc(name(r.IntN(keys)))...)
				}
			}
			one := newLoop(tl.srv)
			one.local = nil
			ocl := newClient(tl.srv, one, 2)
			var tOne, tBatch time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for done, i := 0, 0; done < b.N; done, i = done+32, i+2 {
				t0 := time.Now()
				tl.l.process(tl.cl, pipes[i%len(pipes)], now)
				t1 := time.Now()
				one.process(ocl, pipes[(i+1)%len(pipes)], now)
				t2 := time.Now()
				tBatch += t1.Sub(t0)
				tOne += t2.Sub(t1)
				tl.l.out, one.out = tl.l.out[:0], one.out[:0]
			}
			b.ReportMetric(float64(tOne)/float64(tBatch), "one/batch")
		})
	}
}
