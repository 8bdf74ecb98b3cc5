//go:build !unix

package shard

// allocTable returns a zeroed table of n slots from the Go heap (only unix
// systems place large tables outside it; see table_unix.go).
func allocTable(n int) ([]uint32, bool) { return make([]uint32, n), false }

// freeTable is a no-op: heap tables are left to the garbage collector.
func freeTable([]uint32) {}

// mapBytes returns nil: without mappings, node chunks stay on the heap.
func mapBytes(int) []byte { return nil }

// unmapBytes is a no-op (mapBytes maps nothing).
func unmapBytes([]byte) {}
