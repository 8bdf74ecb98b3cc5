//go:build unix

package shard

import "testing"

// TestOffHeapTable checks that a large table lives in its own mapping on
// unix (OffHeapBytes counts it, its predecessors are unmapped as it grows)
// and that the store works the same across the move off the heap.
func TestOffHeapTable(t *testing.T) {
	s := New(Config{Shards: 1})
	n := 0
	for ; len(s.shards[0].table) < offHeapSlots; n++ {
		s.Apply(key(n), t0, &inc{ttl: 3600e9})
	}
	if got := s.OffHeapBytes(); got != int64(len(s.shards[0].table))*4 {
		t.Fatalf("OffHeapBytes %d, table of %d slots", got, len(s.shards[0].table))
	}
	for ; n < 200_000; n++ {
		s.Apply(key(n), t0, &inc{ttl: 3600e9})
	}
	sh := &s.shards[0]
	if *sh.mapped == nil || &(*sh.mapped)[0] != &sh.table[0] {
		t.Fatal("the current table is not the one recorded as mapped")
	}
	if got := s.OffHeapBytes(); got != int64(len(sh.table))*4 {
		t.Fatalf("OffHeapBytes %d after growing, table of %d slots", got, len(sh.table))
	}
	for i := 0; i < n; i += 997 {
		if st, ok := s.Get(key(i), t0); !ok || st.A != 1 {
			t.Fatalf("key %d: %+v, %v after the table moved off the heap", i, st, ok)
		}
	}
	checkInvariants(t, s)
}
