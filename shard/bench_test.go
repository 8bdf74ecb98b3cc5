package shard_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// benchT0 is the benchmark's start time, ns since the epoch.
const benchT0 = int64(1_800_000_000) * 1e9

// counter is the benchmark transform: engine-like work on State (count in
// A, last time in B) and a 60 s TTL, so expiry creeps forward as in a rate
// limiter.
type counter struct{}

func (*counter) Apply(cur engine.State, now int64) (engine.State, int64) {
	return engine.State{A: cur.A + 1, B: now, Kind: engine.KindGCRA}, 60e9
}

// check is the transform of THROTTLE.CHECK: one unit of cost against l.
type check struct{ l engine.Limit }

func (c *check) Apply(cur engine.State, now int64) (engine.State, int64) {
	next, _, ttl, err := c.l.Check(cur, now, 1)
	if err != nil {
		return cur, 0
	}
	return next, ttl
}

// algo is a benchmark workload: the transform each Apply runs. The zero
// algo is the counter; the others are checks of a limit of 100 per hour,
// so a key checked a few times stays live for the whole benchmark (a GCRA
// key's expiry is its theoretical arrival time, 36 s per check ahead).
type algo struct {
	name string
	l    engine.Limit
}

func (a algo) transform() shard.Transform {
	if a.l.Algo == engine.KindNone {
		return new(counter)
	}
	return &check{l: a.l}
}

// checkAlgos returns the THROTTLE.CHECK workloads: GCRA (the default
// algorithm, whose state is one word besides the expiry) and the token
// bucket (two words besides the expiry).
func checkAlgos() []algo {
	var out []algo
	for _, k := range []engine.Kind{engine.KindGCRA, engine.KindToken} {
		l, err := engine.NewLimit(k, 100, 3600e9, 0)
		if err != nil {
			panic(err)
		}
		out = append(out, algo{name: k.String(), l: l})
	}
	return out
}

// applier is what the benchmarks drive: the shard store or the baseline.
type applier interface {
	Apply(key []byte, now int64, t shard.Transform)
}

// keyLen is the benchmark key size: 16 bytes, as in the Redis comparison.
const keyLen = 16

// putKey writes the 16-byte key of index i ("rl:user:" + 8 hex digits).
func putKey(buf *[keyLen]byte, i uint32) []byte {
	const hexd = "0123456789abcdef"
	copy(buf[:], "rl:user:")
	for j := keyLen - 1; j >= 8; j-- {
		buf[j] = hexd[i&15]
		i >>= 4
	}
	return buf[:]
}

// populate applies a's check to n keys, then sweeps a shard.Store once.
func populate(s applier, n int, a algo) {
	var buf [keyLen]byte
	c := a.transform()
	for i := 0; i < n; i++ {
		s.Apply(putKey(&buf, uint32(i)), benchT0, c)
	}
	if st, ok := s.(*shard.Store); ok {
		st.Sweep(benchT0) // as a server's sweeper would: full node regions move to huge pages
	}
}

// samples returns a cyclic sequence of key indices in [0, n): uniform or
// Zipf (s = 1.1), precomputed so that drawing costs one load.
func samples(n int, dist string) []uint32 {
	const m = 1 << 20
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]uint32, m)
	var z *rand.Zipf
	if dist == "zipf" && n > 1 {
		z = rand.NewZipf(r, 1.1, 1, uint64(n-1))
	}
	for i := range out {
		switch {
		case n == 1:
		case z != nil:
			out[i] = uint32(z.Uint64())
		default:
			out[i] = uint32(r.IntN(n))
		}
	}
	return out
}

// runSerial applies b.N times on one goroutine and returns the elapsed time.
func runSerial(s applier, idx []uint32, n int, a algo) time.Duration {
	var buf [keyLen]byte
	c := a.transform()
	now := benchT0
	start := time.Now()
	for i := 0; i < n; i++ {
		now += 100
		s.Apply(putKey(&buf, idx[i&(len(idx)-1)]), now, c)
	}
	return time.Since(start)
}

// lineBuf is a key buffer alone on its cache lines. Each goroutine writes
// its key buffer on every call, and the buffer escapes to the heap (Apply is
// called through an interface): unpadded, the 16-byte buffers of two
// goroutines can share a line and add false sharing to what is measured.
type lineBuf struct {
	_   [64]byte
	key [keyLen]byte
	_   [64]byte
}

func runParallel(b *testing.B, s applier, idx []uint32, a algo) {
	var seq atomic.Uint32
	b.RunParallel(func(pb *testing.PB) {
		buf := new(lineBuf)
		c := a.transform()
		off := int(seq.Add(1)) * 7919
		now := benchT0
		for i := off; pb.Next(); i++ {
			now += 100
			s.Apply(putKey(&buf.key, idx[i&(len(idx)-1)]), now, c)
		}
	})
}

// roundTrip returns the cache line round trip between two cores measured
// now (shard.LineRoundTrip), or 0 with fewer than two CPUs.
func roundTrip() time.Duration {
	if runtime.GOMAXPROCS(0) < 2 {
		return 0
	}
	return shard.LineRoundTrip(20_000)
}

// reportRoundTrip reports the larger of the round trips measured before
// and after a parallel run (rt-ns). On a VM it depends on where the
// hypervisor runs the vCPUs; microseconds mean that the two goroutines did
// not both have a CPU (some other process was running) and the sample does
// not measure scaling.
func reportRoundTrip(b *testing.B, before time.Duration) {
	if rt := max(before, roundTrip()); rt > 0 {
		b.ReportMetric(float64(rt.Nanoseconds()), "rt-ns")
	}
}

// BenchmarkApply measures Apply on existing keys, serial and parallel, at 1,
// 1k, 1M and 10M keys with uniform and Zipf key choice. Every result also
// reports the plain map + sync.Mutex baseline measured in the same run on the
// same workload (map-ns/op) and the ratio map/shard (x-vs-map, > 1 means
// the shard store is faster). Run the parallel cases with -cpu 1,2 to see
// scaling; with two CPUs they also report the cache line round trip between
// the cores (rt-ns, see reportRoundTrip), which decides how a small, shared
// hot set scales and flags samples taken while another process had a CPU.
// The 10M case runs only when selected by -bench and not -short.
func BenchmarkApply(b *testing.B) {
	sizes := []struct {
		name string
		n    int
	}{{"1", 1}, {"1k", 1_000}, {"1M", 1_000_000}, {"10M", 10_000_000}}
	for _, sz := range sizes {
		for _, a := range append([]algo{{name: "counter"}}, checkAlgos()...) {
			b.Run("keys="+sz.name+"/algo="+a.name, func(b *testing.B) {
				benchApply(b, sz.n, a)
			})
		}
	}
}

func benchApply(b *testing.B, n int, a algo) {
	if n >= 10_000_000 && testing.Short() {
		b.Skip("10M keys skipped in -short mode")
	}
	st := shard.New(shard.Config{MaxKeys: 2 * n})
	base := newMapStore()
	populate(st, n, a)
	populate(base, n, a)
	for _, dist := range []string{"uniform", "zipf"} {
		idx := samples(n, dist)
		b.Run(dist+"/serial", func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			d := runSerial(st, idx, b.N, a)
			b.StopTimer()
			bd := runSerial(base, idx, b.N, a)
			reportRatio(b, d, bd)
		})
		b.Run(dist+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			rt := roundTrip()
			b.ResetTimer()
			start := time.Now()
			runParallel(b, st, idx, a)
			d := time.Since(start)
			b.StopTimer()
			start = time.Now()
			runParallel(b, base, idx, a)
			reportRatio(b, d, time.Since(start))
			reportRoundTrip(b, rt)
		})
	}
	runtime.KeepAlive(st)
	runtime.KeepAlive(base)
}

func reportRatio(b *testing.B, shardDur, mapDur time.Duration) {
	mapNs := float64(mapDur.Nanoseconds()) / float64(b.N)
	b.ReportMetric(mapNs, "map-ns/op")
	b.ReportMetric(float64(mapDur)/float64(max(shardDur, 1)), "x-vs-map")
}

// BenchmarkGet measures a read of an existing key at 1M keys, uniform.
func BenchmarkGet(b *testing.B) {
	const n = 1_000_000
	st := shard.New(shard.Config{MaxKeys: 2 * n})
	populate(st, n, algo{})
	idx := samples(n, "uniform")
	var buf [keyLen]byte
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st.Get(putKey(&buf, idx[i&(len(idx)-1)]), benchT0)
	}
}

// BenchmarkInsert measures creating new keys (each op a fresh key) into a
// store bounded at 1M keys, so that past 1M every insert also evicts.
func BenchmarkInsert(b *testing.B) {
	st := shard.New(shard.Config{MaxKeys: 1_000_000})
	var buf [keyLen]byte
	var c counter
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st.Apply(putKey(&buf, uint32(i)), benchT0, &c)
	}
}

// BenchmarkMemory reports the heap cost per key (bytes/key, and
// overhead-B/key beyond the 16 key bytes) of the shard store and of the map
// baseline at 1M and 10M keys, and the garbage collector's cost with those
// keys live: the p99 stop-the-world pause over 20 forced collections
// (gc-pause-p99-us) and the mean duration of a full collection
// (gc-cycle-ms), which grows with the pointers the collector must trace.
// Where /proc/self/statm exists it also reports the process's resident
// memory per key after the populate and a collection (rss-B/key): that
// includes what the Go heap keeps beyond its live bytes (garbage of the
// populate, freed pages not yet returned), at the test binary's GOGC.
// Each store is filled with one THROTTLE.CHECK per key, GCRA and token
// bucket (see checkAlgos): their states differ in size (see the package
// doc's Memory per key). b.N is ignored: each case builds its store once.
func BenchmarkMemory(b *testing.B) {
	for _, n := range []int{1_000_000, 10_000_000} {
		for _, kind := range []string{"shard", "map"} {
			for _, a := range checkAlgos() {
				b.Run(fmt.Sprintf("keys=%dM/store=%s/algo=%s", n/1_000_000, kind, a.name), func(b *testing.B) {
					if n >= 10_000_000 && testing.Short() {
						b.Skip("10M keys skipped in -short mode")
					}
					heap := func() uint64 {
						runtime.GC()
						var ms runtime.MemStats
						runtime.ReadMemStats(&ms)
						return ms.HeapAlloc
					}
					before := heap()
					rss0 := residentBytes()
					var s applier
					if kind == "shard" {
						s = shard.New(shard.Config{MaxKeys: 2 * n})
					} else {
						s = newMapStore()
					}
					populate(s, n, a)
					after := heap()
					if st, ok := s.(*shard.Store); ok {
						after += uint64(st.OffHeapBytes()) // large index tables and node chunks are mapped outside the heap
					}
					perKey := float64(after-before) / float64(n)
					rss1 := residentBytes()

					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					firstGC := ms.NumGC
					const cycles = 20
					start := time.Now()
					for i := 0; i < cycles; i++ {
						runtime.GC()
					}
					cycle := time.Since(start) / cycles
					runtime.ReadMemStats(&ms)
					var pauses []float64
					for g := firstGC + 1; g <= ms.NumGC; g++ {
						pauses = append(pauses, float64(ms.PauseNs[(g+255)%256]))
					}
					slices.Sort(pauses)
					p99 := pauses[(len(pauses)*99+99)/100-1]
					runtime.KeepAlive(s)

					b.ReportMetric(perKey, "bytes/key")
					b.ReportMetric(perKey-keyLen, "overhead-B/key")
					if rss0 > 0 && rss1 > 0 {
						b.ReportMetric(float64(rss1-rss0)/float64(n), "rss-B/key")
					}
					b.ReportMetric(p99/1e3, "gc-pause-p99-us")
					b.ReportMetric(float64(cycle.Microseconds())/1e3, "gc-cycle-ms")
					b.ReportMetric(0, "ns/op")
				})
			}
		}
	}
}

// residentBytes returns the process's resident memory from
// /proc/self/statm, or 0 where that file does not exist.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return 0
	}
	return pages * int64(os.Getpagesize())
}

// BenchmarkMutexPair measures one uncontended sync.Mutex Lock+Unlock, the
// fixed cost the shard lock adds to every Apply (see the package doc).
func BenchmarkMutexPair(b *testing.B) {
	var mu sync.Mutex
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		mu.Lock()
		//lint:ignore SA2001 the empty critical section is what is measured
		mu.Unlock()
	}
}

// BenchmarkDependentLoad measures the latency of one dependent random load
// in a 64 MiB array (pointer chasing): the unit cost of a cache miss that
// bounds Apply on large key sets on this machine.
func BenchmarkDependentLoad(b *testing.B) {
	const n = 64 << 20 / 4
	a := make([]uint32, n)
	perm := rand.New(rand.NewPCG(3, 4)).Perm(n)
	for i := 0; i < n; i++ {
		a[perm[i]] = uint32(perm[(i+1)%n])
	}
	p := uint32(0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p = a[p]
	}
	runtime.KeepAlive(p)
}

// BenchmarkInsertPause inserts 10M fresh keys and reports the longest single
// Apply (max-insert-us): a shard grows its table in one step, re-inserting
// its keys under its lock, and this is the pause a request can meet then.
// b.N is ignored.
func BenchmarkInsertPause(b *testing.B) {
	if testing.Short() {
		b.Skip("10M keys skipped in -short mode")
	}
	const n = 10_000_000
	st := shard.New(shard.Config{MaxKeys: n})
	var buf [keyLen]byte
	var c counter
	var worst time.Duration
	for i := 0; i < n; i++ {
		k := putKey(&buf, uint32(i))
		t := time.Now()
		st.Apply(k, benchT0, &c)
		if d := time.Since(t); d > worst {
			worst = d
		}
	}
	b.ReportMetric(float64(worst.Microseconds()), "max-insert-us")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkScan measures a whole Scan of 1M keys with COUNT 100 and a
// reused page; it reports the cost per key returned (ns/key).
func BenchmarkScan(b *testing.B) {
	const n = 1_000_000
	st := shard.New(shard.Config{MaxKeys: 2 * n})
	populate(st, n, algo{})
	var p shard.ScanPage
	b.ReportAllocs()
	b.ResetTimer()
	keys := 0
	for i := 0; i < b.N; i++ {
		for c := uint64(0); ; {
			c, _ = st.Scan(&p, c, 100, benchT0)
			keys += p.Len()
			if c == 0 {
				break
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(keys), "ns/key")
}

// BenchmarkTxn measures a transaction over two existing keys of 1M (two
// Gets and two Applies under both shard locks), for comparison with four
// single-key calls.
func BenchmarkTxn(b *testing.B) {
	const n = 1_000_000
	st := shard.New(shard.Config{MaxKeys: 2 * n})
	populate(st, n, algo{})
	idx := samples(n, "uniform")
	var k1, k2 [keyLen]byte
	var c counter
	var tx shard.Txn
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		a := putKey(&k1, idx[(2*i)&(len(idx)-1)])
		z := putKey(&k2, idx[(2*i+1)&(len(idx)-1)])
		tx.Begin(st)
		tx.Add(a)
		tx.Add(z)
		tx.Lock()
		tx.Get(a, benchT0)
		tx.Get(z, benchT0)
		tx.Apply(a, benchT0, &c)
		tx.Apply(z, benchT0, &c)
		tx.Unlock()
	}
}

// BenchmarkInsertMaxMemory is BenchmarkInsert with the store bounded by
// bytes (64 MiB, about 1M keys of 16 bytes) instead of keys, so that past
// the bound every insert evicts by the byte check.
func BenchmarkInsertMaxMemory(b *testing.B) {
	st := shard.New(shard.Config{MaxMemory: 64 << 20})
	var buf [keyLen]byte
	var c counter
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		st.Apply(putKey(&buf, uint32(i)), benchT0, &c)
	}
	b.StopTimer()
	s := st.Stats()
	b.ReportMetric(float64(s.Bytes)/float64(max(s.Keys, 1)), "bytes/key")
}

// BenchmarkBatch compares applying keys one at a time with shard.Batch at
// 1M live keys (uniform random choice, a THROTTLE.CHECK of GCRA and of the
// token bucket against a limit that keeps every key live): one is Apply per key, batch16 is a Batch of
// 16 keys per Apply, the pipeline depth of the Redis comparisons. Both
// report ns per key. paired alternates 16 single Applies and one batch of
// 16 other keys in the same loop and reports both costs (one-ns/key,
// batch-ns/key) and their ratio (x-one), so that load from other processes
// hits both alike.
func BenchmarkBatch(b *testing.B) {
	for _, a := range checkAlgos() {
		b.Run("keys=1M/algo="+a.name, func(b *testing.B) { benchBatch(b, a) })
	}
}

func benchBatch(b *testing.B, a algo) {
	const n, depth = 1_000_000, 16
	st := shard.New(shard.Config{MaxKeys: 2 * n})
	populate(st, n, a)
	idx := samples(n, "uniform")
	var bufs [depth][keyLen]byte
	var cs [depth]shard.Transform
	for k := range cs {
		cs[k] = a.transform()
	}
	var bt shard.Batch
	now := benchT0
	one := func(i int) {
		for k := 0; k < depth; k++ {
			now += 100
			st.Apply(putKey(&bufs[k], idx[(i+k)&(len(idx)-1)]), now, cs[k])
		}
	}
	batch := func(i int) {
		now += 100
		bt.Begin(st)
		for k := 0; k < depth; k++ {
			bt.Add(putKey(&bufs[k], idx[(i+k)&(len(idx)-1)]), cs[k])
		}
		bt.Apply(now)
	}
	b.Run("one", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i += depth {
			one(i)
		}
	})
	b.Run("batch16", func(b *testing.B) {
		b.ReportAllocs()
		batch(0) // grow the batch's slices
		b.ResetTimer()
		for i := 0; i < b.N; i += depth {
			batch(i)
		}
	})
	b.Run("paired", func(b *testing.B) {
		b.ReportAllocs()
		var tOne, tBatch time.Duration
		for i := 0; i < b.N; i += 2 * depth {
			t0 := time.Now()
			one(i)
			t1 := time.Now()
			batch(i + depth)
			tBatch += time.Since(t1)
			tOne += t1.Sub(t0)
		}
		keys := float64(max(b.N/2, 1))
		b.ReportMetric(float64(tOne.Nanoseconds())/keys, "one-ns/key")
		b.ReportMetric(float64(tBatch.Nanoseconds())/keys, "batch-ns/key")
		b.ReportMetric(float64(tOne)/float64(max(tBatch, 1)), "x-one")
	})
	runtime.KeepAlive(st)
}
