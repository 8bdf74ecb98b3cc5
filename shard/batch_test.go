package shard

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
)

// bstep is a transform whose outcome depends on the state it sees: it adds
// d to A, and removes the key once A passes 5. It records what it saw.
type bstep struct {
	d    int64
	ttl  int64
	seen engine.State
}

func (x *bstep) Apply(cur engine.State, now int64) (engine.State, int64) {
	x.seen = cur
	next := engine.State{A: cur.A + x.d, B: now, Kind: engine.KindGCRA}
	if next.A > 5 {
		return engine.State{}, 0
	}
	return next, x.ttl
}

// TestBatchMatchesApply runs random batches (repeated keys, new keys,
// expiring keys, deletions, over-long keys, keys across shards) on one
// store and the same operations one Apply at a time on another, and checks
// that every transform saw the same state and that the stores end equal:
// on stores of 8 shards, whose batches mark the shards to lock in a mask,
// and of 128, whose batches sort them, with the same keys per shard.
func TestBatchMatchesApply(t *testing.T) {
	for _, shards := range []int{8, 128} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			if shards <= maskShards == (shards == 128) {
				t.Fatalf("maskShards = %d: the cases no longer cover both ways of locking", maskShards)
			}
			testBatchMatchesApply(t, Config{Shards: shards, MaxKeys: 25 * shards})
		})
	}
}

func testBatchMatchesApply(t *testing.T, cfg Config) {
	r := rand.New(rand.NewPCG(7, 8))
	a, z := New(cfg), New(cfg)
	long := bytes.Repeat([]byte("L"), MaxKeyLen+1)
	var b Batch
	now := t0
	for round := 0; round < 2000; round++ {
		now += int64(r.IntN(3)) * 1e6
		n := 1 + r.IntN(20)
		keys := make([][]byte, n)
		sa, sz := make([]bstep, n), make([]bstep, n)
		b.Begin(a)
		for i := range n {
			if r.IntN(50) == 0 {
				keys[i] = long
			} else {
				keys[i] = []byte(fmt.Sprintf("k%d%s", r.IntN(300), bytes.Repeat([]byte("x"), r.IntN(30))))
			}
			sa[i] = bstep{d: int64(r.IntN(3)) - 1, ttl: int64(1+r.IntN(4)) * 1e6}
			sz[i] = sa[i]
			b.Add(keys[i], &sa[i])
		}
		if b.Len() != n {
			t.Fatalf("Len = %d, want %d", b.Len(), n)
		}
		b.Apply(now)
		for i := range n {
			z.Apply(keys[i], now, &sz[i])
			if sa[i].seen != sz[i].seen {
				t.Fatalf("round %d key %q: batch saw %+v, Apply saw %+v", round, keys[i], sa[i].seen, sz[i].seen)
			}
		}
		if b.Len() != 0 {
			t.Fatalf("Len after Apply = %d", b.Len())
		}
	}
	for i := range 300 {
		for _, pad := range []int{0, 5, 29} {
			k := []byte(fmt.Sprintf("k%d%s", i, bytes.Repeat([]byte("x"), pad)))
			ga, oka := a.Get(k, now)
			gz, okz := z.Get(k, now)
			if ga != gz || oka != okz {
				t.Fatalf("key %q: batch store %+v %v, Apply store %+v %v", k, ga, oka, gz, okz)
			}
		}
	}
	// Len counts expired keys not yet reclaimed, and which those are
	// depends on which shards' wheels the calls advanced (the stores hash
	// keys to shards with different seeds): sweep both first.
	a.Sweep(now)
	z.Sweep(now)
	if a.Len() != z.Len() {
		t.Fatalf("Len: batch store %d, Apply store %d", a.Len(), z.Len())
	}
}

// TestBatchZeroAlloc: a reused Batch of 16 existing keys allocates nothing.
func TestBatchZeroAlloc(t *testing.T) {
	s := New(Config{})
	var keys [16][]byte
	var ts [16]inc
	for i := range keys {
		keys[i] = key(i)
		ts[i].ttl = 1e9
		s.Apply(keys[i], t0, &ts[i])
	}
	var b Batch
	run := func() {
		b.Begin(s)
		for i := range keys {
			b.Add(keys[i], &ts[i])
		}
		b.Apply(t0)
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("a batch of 16 allocates %v times", n)
	}
}

// TestBatchConcurrent runs batches on several goroutines at once, beside a
// goroutine of Txns over the same keys, on stores of 8 shards (the batch
// locks through its mask) and of 128 (through its sorted list). Each
// transform adds one to its key, so the counts at the end show that no
// update was lost; a shard locked twice, or two lockers taking shards in
// different orders, would hang the test, and one not locked would be a
// data race under -race.
func TestBatchConcurrent(t *testing.T) {
	for _, shards := range []int{8, 128} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			s := New(Config{Shards: shards})
			const keys, workers, rounds = 48, 4, 300
			var wg sync.WaitGroup
			counts := make([][keys]int64, workers+1)
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r := rand.New(rand.NewPCG(uint64(w), 9))
					var b Batch
					for range rounds {
						b.Begin(s)
						n := 2 + r.IntN(20)
						ts := make([]inc, n)
						for i := range ts {
							k := r.IntN(keys)
							ts[i].ttl = 3600e9
							b.Add(key(k), &ts[i])
							counts[w][k]++
						}
						b.Apply(t0)
					}
				}()
			}
			wg.Add(1)
			go func() { // Txns over the same keys, in a different order each time
				defer wg.Done()
				r := rand.New(rand.NewPCG(99, 9))
				var tx Txn
				for range rounds {
					tx.Begin(s)
					ks := r.Perm(keys)[:1+r.IntN(8)]
					for _, k := range ks {
						if err := tx.Add(key(k)); err != nil {
							t.Error(err)
							return
						}
					}
					if err := tx.Lock(); err != nil {
						t.Error(err)
						return
					}
					for _, k := range ks {
						if err := tx.Apply(key(k), t0, &inc{ttl: 3600e9}); err != nil {
							t.Error(err)
						}
						counts[workers][k]++
					}
					tx.Unlock()
				}
			}()
			wg.Wait()
			for k := range keys {
				var want int64
				for w := range counts {
					want += counts[w][k]
				}
				if st, ok := s.Get(key(k), t0); want > 0 && (!ok || st.A != want) {
					t.Fatalf("key %d: A = %d (present %v), want %d increments", k, st.A, ok, want)
				}
			}
		})
	}
}
