//go:build unix

package shard

import (
	"syscall"
	"unsafe"
)

// offHeapSlots is the smallest index table, in slots (4 KiB, a page), that
// lives in its own anonymous mapping outside the Go heap. A table is
// replaced whole when it grows; the old one is unmapped at once, so its
// pages go back to the system immediately instead of staying in the
// process as free heap pages until the scavenger returns them (a store
// whose shards grow their tables through the small lengths would
// otherwise leave megabytes of such pages behind; BenchmarkMemory's
// rss-B/key shows it). Smaller tables stay on the heap, so a store with a
// few keys a shard maps nothing.
const offHeapSlots = 1 << 10

// allocTable returns a zeroed table of n slots and whether it lives
// outside the Go heap. If the mapping fails the table comes from the heap.
func allocTable(n int) ([]uint32, bool) {
	if n < offHeapSlots {
		return make([]uint32, n), false
	}
	b := mapBytes(n * 4)
	if b == nil {
		return make([]uint32, n), false
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), n), true
}

// freeTable unmaps a table that allocTable placed outside the heap.
func freeTable(t []uint32) {
	unmapBytes(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(t))), len(t)*4))
}

// mapBytes returns n zeroed bytes in an anonymous private mapping of their
// own (page-aligned; pages not yet touched are not resident), or nil if the
// mapping fails.
func mapBytes(n int) []byte {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return nil
	}
	return b
}

// unmapBytes releases a mapping mapBytes returned.
func unmapBytes(b []byte) {
	// Munmap only fails for a range it did not map; nothing to release then.
	_ = syscall.Munmap(b)
}
