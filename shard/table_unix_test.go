//go:build unix

package shard

import (
	"os"
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
// heap and the later ones from mappings that hold the nodes, four chunks a
// mapping (OffHeapBytes counts the chunks handed out), that FlushAll
// unmaps them, and that the store works the same before, across and after.
func TestOffHeapChunks(t *testing.T) {
	s := New(Config{Shards: 1})
	sh := &s.shards[0]
	n := 0
	for ; n < 1024; n++ {
		s.Apply(key(n), t0, gcraOne)
	}
	if got, want := s.OffHeapBytes(), int64(len(sh.mapped.table))*4; got != want || len(sh.mapped.regions) != 0 {
		t.Fatalf("one chunk of keys: OffHeapBytes %d, %d mapped chunks; want %d (the table), none", got, len(sh.mapped.regions), want)
	}
	for round := 0; round < 2; round++ {
		for ; n < 5*1024; n++ {
			s.Apply(key(n), t0, gcraOne)
		}
		// Four chunks of 1024 39-byte nodes past the first fill one
		// mapping of 39 pages.
		if os.Getpagesize() == 4096 {
			if got, want := len(sh.mapped.regions), 1; got != want || len(sh.mapped.regions[0]) != 4*1024*39 || len(sh.mapped.spare) != 0 {
				t.Fatalf("round %d: %d mappings for 5 chunks of keys, want %d of 4 chunks, all handed out", round, got, want)
			}
		}
		if got, want := s.OffHeapBytes(), int64(4*1024*39+len(sh.table)*4); got != want || sh.mapped.table == nil {
			t.Fatalf("round %d: OffHeapBytes %d, want %d (4 chunks of 1024 39-byte nodes and the table)", round, got, want)
		}
		s.Apply(key(n), t0, gcraOne) // a fifth mapped chunk: a second mapping, one chunk of it counted
		n++
		if got, want := s.OffHeapBytes(), int64(5*1024*39+len(sh.table)*4); got != want || (os.Getpagesize() == 4096 && len(sh.mapped.regions) != 2) {
			t.Fatalf("round %d: OffHeapBytes %d, want %d with %d mappings", round, got, want, len(sh.mapped.regions))
		}
		for h := uint32(0); h < sh.w.Cap(); h += 97 {
			p := uintptr(unsafe.Pointer(sh.w.At(h)))
			in := false
			for _, c := range sh.mapped.regions {
				lo := uintptr(unsafe.Pointer(unsafe.SliceData(c)))
				in = in || (p >= lo && p < lo+uintptr(len(c)))
			}
			if in != (h >= 1024) {
				t.Fatalf("round %d: node of handle %d in a mapping: %v", round, h, in)
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
		if got := s.OffHeapBytes(); got != 0 || len(sh.mapped.regions) != 0 {
			t.Fatalf("after FlushAll: OffHeapBytes %d, %d mapped chunks", got, len(sh.mapped.regions))
		}
		n = 0
	}
}
