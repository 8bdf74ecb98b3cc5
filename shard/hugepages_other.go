//go:build !linux

package shard

// mapRegion returns n zeroed bytes in an anonymous mapping of their own
// where the system has mappings, or nil.
func mapRegion(n int) []byte { return mapBytes(n) }

// unmapRegion releases a region mapRegion returned.
func unmapRegion(b []byte) { unmapBytes(b) }

// collapseRegion does nothing: huge pages are asked for only on Linux.
func collapseRegion([]byte) {}
