package shard

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// mapRegion returns n zeroed bytes (n a multiple of hugeRegion) in an
// anonymous private mapping aligned to hugeRegion, or nil if the mapping
// fails. It maps n+hugeRegion bytes and unmaps the unaligned head and
// tail.
func mapRegion(n int) []byte {
	raw, err := unix.MmapPtr(-1, 0, nil, uintptr(n+hugeRegion), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return nil
	}
	base := uintptr(raw)
	start := (base + hugeRegion - 1) &^ (hugeRegion - 1)
	if head := start - base; head > 0 {
		_ = unix.MunmapPtr(raw, head)
	}
	if tail := base + uintptr(n+hugeRegion) - (start + uintptr(n)); tail > 0 {
		_ = unix.MunmapPtr(unsafe.Add(raw, start+uintptr(n)-base), tail)
	}
	return unsafe.Slice((*byte)(unsafe.Add(raw, start-base)), n)
}

// collapseRegion asks the kernel to back r with transparent huge pages
// now (MADV_COLLAPSE, Linux 6.1 and later: it copies r's pages into huge
// pages and fails only if the kernel cannot, e.g. without free huge
// pages). Where that fails it marks r MADV_HUGEPAGE instead, so that the
// kernel's khugepaged collapses it in the background where the system's
// transparent_hugepage setting allows. Either way r keeps its contents.
func collapseRegion(r []byte) {
	if unix.Madvise(r, unix.MADV_COLLAPSE) != nil {
		_ = unix.Madvise(r, unix.MADV_HUGEPAGE)
	}
}

// unmapRegion releases a region mapRegion returned.
func unmapRegion(b []byte) {
	// Munmap only fails for a range it did not map; nothing to release then.
	_ = unix.MunmapPtr(unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(b)))
}
