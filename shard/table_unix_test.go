//go:build unix

package shard

import (
	"runtime"
	"testing"
	"unsafe"

	"github.com/throttlekit/throttlekit-server/engine"
)

// gcraOne stores a one-word state (B == 0, as GCRA's), so the store holds
// no side chunks and off-heap memory is tables and node chunks only.
var gcraOne = &put{st: engine.State{A: 1, Kind: engine.KindGCRA}, ttl: 3600e9}

// TestOffHeapTable checks that a large table lives in its own mapping on
// unix (OffHeapBytes counts it, its predecessors are unmapped as it grows)
// and that the store works the same across the move off the heap.
func TestOffHeapTable(t *testing.T) {
	s := New(Config{Shards: 1})
	n := 0
	for ; len(s.shards[0].table) < offHeapSlots; n++ {
		s.Apply(key(n), t0, gcraOne)
	}
	if got, want := s.OffHeapBytes(), int64(len(s.shards[0].table))*4+mappedChunkBytes(&s.shards[0]); got != want {
		t.Fatalf("OffHeapBytes %d, table of %d slots and mapped node chunks: %d", got, len(s.shards[0].table), want)
	}
	for ; n < 200_000; n++ {
		s.Apply(key(n), t0, gcraOne)
	}
	sh := &s.shards[0]
	if sh.mapped.table == nil || &sh.mapped.table[0] != &sh.table[0] {
		t.Fatal("the current table is not the one recorded as mapped")
	}
	if got, want := s.OffHeapBytes(), int64(len(sh.table))*4+mappedChunkBytes(sh); got != want {
		t.Fatalf("OffHeapBytes %d after growing, table of %d slots and mapped node chunks: %d", got, len(sh.table), want)
	}
	for i := 0; i < n; i += 997 {
		if st, ok := s.Get(key(i), t0); !ok || st.A != 1 {
			t.Fatalf("key %d: %+v, %v after the table moved off the heap", i, st, ok)
		}
	}
	checkInvariants(t, s)
}

// mappedChunkBytes returns the bytes of sh's node chunks past the first
// heapChunks: the ones mapChunk places outside the heap.
func mappedChunkBytes(sh *shard) int64 {
	return max(sh.w.Bytes()-heapChunks*1024*sh.w.NodeBytes(), 0)
}

// TestOffHeapChunks checks that a shard's first node chunk comes from the
// heap and the later ones from the Store's pool of 2 MiB regions, shared by
// its shards (OffHeapBytes counts the chunks handed out), that FlushAll
// unmaps them, and that the store works the same before, across and after.
func TestOffHeapChunks(t *testing.T) {
	s := New(Config{Shards: 2})
	chunk := 1024 * int64(s.shards[0].w.NodeBytes())
	perRegion := hugeRegion / chunk // 52 chunks of 39-byte nodes
	tables := func() int64 { return int64(len(s.shards[0].mapped.table)+len(s.shards[1].mapped.table)) * 4 }
	mappedChunks := func() int64 { return (mappedChunkBytes(&s.shards[0]) + mappedChunkBytes(&s.shards[1])) / chunk }
	n := 0
	fill := func(chunks int64) { // insert keys until the shards hold this many mapped chunks
		for mappedChunks() < chunks {
			s.Apply(key(n), t0, gcraOne)
			n++
		}
	}
	for round := 0; round < 2; round++ {
		for ; n < 1024; n++ { // about half a chunk a shard: all on the heap
			s.Apply(key(n), t0, gcraOne)
		}
		if got, want := s.OffHeapBytes(), tables(); got != want || len(s.pool.regions) != 0 {
			t.Fatalf("round %d: heap chunks only: OffHeapBytes %d, %d regions; want %d (the tables), none", round, got, len(s.pool.regions), want)
		}
		fill(perRegion) // both shards' chunks fill one region
		if got, want := len(s.pool.regions), 1; got != want || int64(len(s.pool.spare)) >= chunk {
			t.Fatalf("round %d: %d regions for %d chunks with %d bytes left, want %d, full", round, got, perRegion, len(s.pool.spare), want)
		}
		if mappedChunkBytes(&s.shards[0]) == 0 || mappedChunkBytes(&s.shards[1]) == 0 {
			t.Fatalf("round %d: one shard has no mapped chunk: the region is not shared", round)
		}
		fill(perRegion + 1) // the next chunk starts a second region
		if got, want := len(s.pool.regions), 2; got != want {
			t.Fatalf("round %d: %d regions, want %d", round, got, want)
		}
		if got, want := s.OffHeapBytes(), (perRegion+1)*chunk+tables(); got != want {
			t.Fatalf("round %d: OffHeapBytes %d, want %d (%d mapped chunks and the tables)", round, got, want, perRegion+1)
		}
		for _, r := range s.pool.regions {
			if p := uintptr(unsafe.Pointer(unsafe.SliceData(r))); p%hugeRegion != 0 || len(r) != hugeRegion {
				t.Fatalf("round %d: region at %#x of %d bytes, want aligned to and of %d", round, p, len(r), hugeRegion)
			}
		}
		for si := range s.shards {
			sh := &s.shards[si]
			for h := uint32(0); h < sh.w.Cap(); h += 97 {
				p := uintptr(unsafe.Pointer(sh.w.At(h)))
				in := false
				for _, c := range s.pool.regions {
					lo := uintptr(unsafe.Pointer(unsafe.SliceData(c)))
					in = in || (p >= lo && p < lo+uintptr(len(c)))
				}
				if in != (h >= 1024) {
					t.Fatalf("round %d: shard %d: node of handle %d in a region: %v", round, si, h, in)
				}
			}
		}
		for i := 0; i < n; i += 7 {
			if st, ok := s.Get(key(i), t0); !ok || st.A != 1 {
				t.Fatalf("round %d: key %d: %+v, %v", round, i, st, ok)
			}
		}
		checkInvariants(t, s)
		if got := s.FlushAll(t0); got != n {
			t.Fatalf("FlushAll dropped %d keys, want %d", got, n)
		}
		if got := s.OffHeapBytes(); got != 0 || len(s.pool.regions) != 0 {
			t.Fatalf("after FlushAll: OffHeapBytes %d, %d regions", got, len(s.pool.regions))
		}
		n = 0
	}
}

// released reports whether p's regions have been unmapped, as the Store's
// cleanup does.
func released(p *chunkPool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.regions == nil
}

// mappedStore returns a Store of one shard whose table and newest nodes
// live outside the heap, and the key of such a node.
func mappedStore(t *testing.T) (*Store, []byte) {
	s := New(Config{Shards: 1})
	n := 0
	for ; len(s.shards[0].table) < offHeapSlots || len(s.pool.regions) == 0; n++ {
		s.Apply(key(n), t0, gcraOne)
	}
	if s.shards[0].mapped.table == nil {
		t.Fatal("the table did not move off the heap")
	}
	return s, key(n - 1)
}

// TestOffHeapReleasedWhenUnreachable checks that a Store's off-heap memory
// is unmapped once the Store can no longer be reached.
func TestOffHeapReleasedWhenUnreachable(t *testing.T) {
	s, _ := mappedStore(t)
	p := s.pool
	s = nil
	for i := 0; !released(p); i++ {
		if i == 100 {
			t.Fatal("100 collections after the Store became unreachable, its regions are still mapped")
		}
		runtime.GC()
		runtime.Gosched()
	}
}

// gcDuring is a transform that collects garbage, and lets cleanups run,
// while the store is using the node it applies to; it fails the test if
// the store's memory was released meanwhile.
type gcDuring struct {
	t    *testing.T
	pool *chunkPool
}

func (g gcDuring) Apply(cur engine.State, now int64) (engine.State, int64) {
	for range 20 {
		runtime.GC()
		runtime.Gosched()
		if released(g.pool) {
			// Leave before the store writes to the unmapped node.
			g.t.Fatal("the Store's memory was unmapped while Apply was using it")
		}
	}
	return engine.State{A: cur.A + 1, Kind: engine.KindGCRA}, 3600e9
}

// TestOffHeapOutlivesApply checks that the cleanup waits for the calls in
// progress: a Store used for the last time by an Apply is unreachable from
// the caller during that Apply, yet its memory must stay mapped until the
// Apply returns (every access to it goes through a shard, and the cleanup
// belongs to the shards, not to the Store value).
func TestOffHeapOutlivesApply(t *testing.T) {
	for _, last := range []string{"Apply", "Batch"} {
		t.Run(last, func(t *testing.T) {
			s, k := mappedStore(t)
			g := gcDuring{t, s.pool}
			if last == "Apply" {
				s.Apply(k, t0, g) // the last use of s
				return
			}
			var b Batch
			b.Begin(s)
			b.Add(k, g)
			b.Add(key(0), gcraOne)
			b.Apply(t0) // the last use of s
		})
	}
}
