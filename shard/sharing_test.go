package shard

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
)

// LineRoundTrip returns the mean time for two goroutines to hand one cache
// line back and forth, each waiting for the other's store: two transfers
// between cores. It sets what sharing written memory between cores costs,
// and on a VM it changes with where the hypervisor runs the vCPUs, from
// one minute to the next. It needs GOMAXPROCS >= 2. Exported for the benchmarks of package
// shard_test.
func LineRoundTrip(n int) time.Duration {
	var x struct {
		_ [64]byte
		v atomic.Int64
		_ [64]byte
	}
	done := make(chan struct{})
	go func() {
		for i := int64(0); i < int64(n); i++ {
			for x.v.Load() != 2*i+1 {
			}
			x.v.Store(2*i + 2)
		}
		close(done)
	}()
	start := time.Now()
	for i := int64(0); i < int64(n); i++ {
		for x.v.Load() != 2*i {
		}
		x.v.Store(2*i + 1)
	}
	<-done
	return time.Since(start) / time.Duration(n)
}

// BenchmarkLineRoundTrip reports LineRoundTrip as its ns/op; run it with
// -cpu 2.
func BenchmarkLineRoundTrip(b *testing.B) {
	if runtime.GOMAXPROCS(0) < 2 {
		b.Skip("needs GOMAXPROCS >= 2")
	}
	LineRoundTrip(b.N)
}

// step is BenchmarkSharing's transform: a count in A, now in B, 60 s TTL.
type step struct{}

func (*step) Apply(cur engine.State, now int64) (engine.State, int64) {
	return engine.State{A: cur.A + 1, B: now, Kind: engine.KindGCRA}, 60e9
}

// BenchmarkSharing runs Apply in parallel on 1k keys (16 bytes, as in
// BenchmarkApply) and varies what the goroutines share, to show where the
// parallel cost of a small hot set comes from:
//
//   - shared: every goroutine draws from all keys (BenchmarkApply keys=1k);
//   - own-keys: goroutine g draws only keys i with i%P == g: no key is
//     shared, but shard locks and the 39-byte nodes' cache lines are;
//   - own-shards: goroutine g draws only keys of shards s with s%P == g:
//     the goroutines share the Store and read the same fields, but write
//     no common cache line;
//   - own-store: each goroutine has a Store of its own.
//
// The key sets are cut for the GOMAXPROCS the benchmark starts with, so
// with -cpu 1,2 one goroutine works one half of the keys and two work both
// halves. Keys are drawn uniformly by a per-goroutine xorshift generator.
// With two CPUs each result also reports the cache line round trip
// measured right after (rt-ns). Run with -cpu 1,2 and compare each case's
// scaling.
func BenchmarkSharing(b *testing.B) {
	const n = 1000
	keys := make([][]byte, n)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("rl:user:%08x", i))
	}
	procs := runtime.GOMAXPROCS(0)
	newStore := func() *Store {
		s := New(Config{MaxKeys: 2 * n})
		for _, k := range keys {
			s.Apply(k, t0, &inc{ttl: 60e9})
		}
		return s
	}
	shared := newStore()
	byKey := make([][][]byte, procs)
	byShard := make([][][]byte, procs)
	for i, k := range keys {
		byKey[i%procs] = append(byKey[i%procs], k)
		g := int(hashOf(shared, k)>>shared.shift) % procs
		byShard[g] = append(byShard[g], k)
	}
	own := make([]*Store, procs)
	for i := range own {
		own[i] = newStore()
	}
	cases := []struct {
		name string
		pick func(g int) (*Store, [][]byte)
	}{
		{"shared", func(int) (*Store, [][]byte) { return shared, keys }},
		{"own-keys", func(g int) (*Store, [][]byte) { return shared, byKey[g] }},
		{"own-shards", func(g int) (*Store, [][]byte) { return shared, byShard[g] }},
		{"own-store", func(g int) (*Store, [][]byte) { return own[g], keys }},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			var seq atomic.Int32
			b.RunParallel(func(pb *testing.PB) {
				g := int(seq.Add(1)-1) % procs
				s, ks := tc.pick(g)
				var c step // zero-size: nothing per goroutine to share a line
				r := uint32(2*g + 1)
				now := t0
				for pb.Next() {
					r ^= r << 13
					r ^= r >> 17
					r ^= r << 5
					now += 100
					s.Apply(ks[r%uint32(len(ks))], now, &c)
				}
			})
			b.StopTimer()
			if runtime.GOMAXPROCS(0) >= 2 {
				b.ReportMetric(float64(LineRoundTrip(20_000).Nanoseconds()), "rt-ns")
			}
		})
	}
}
