package shard

import "os"

// offHeap is one shard's memory outside the Go heap: its index table when
// allocTable mapped it, and the mappings mapChunk carved node chunks from.
// The Store keeps these records in a list of their own, which its cleanup
// releases once the Store is unreachable.
type offHeap struct {
	table   []uint32
	regions [][]byte // mappings holding node chunks
	spare   []byte   // the part of the last region not yet handed out

	// side holds the side chunks of the shard's wide states by chunk of
	// 1024 handles, nil for a chunk none of whose handles has held one
	// (see sideOf); sideMaps are the ones mapped outside the heap, and
	// sideChunks counts them all.
	side       []*sideChunk
	sideMaps   [][]byte
	sideChunks int
}

// maxRegionChunks bounds the chunks carved from one mapping.
const maxRegionChunks = 16

// heapChunks is how many node chunks of a shard come from the Go heap
// before mapChunk maps the rest: a store with a few keys a shard (a test's,
// the server's small internal ones) makes no mappings at all.
const heapChunks = 1

// mapChunk is the shard wheel's source of node chunks (see
// wheel.Wheel.SetChunkMemory): past the first heapChunks, chunks of 1024
// nodes are carved one after another from anonymous mappings outside the
// Go heap, kept until FlushAll or the Store's cleanup. A chunk of 39-byte
// nodes is not a whole number of pages, so one mapping holds as many
// chunks as make it one (four with 4 KiB pages): no page is partly
// wasted, and the pages of chunks not yet handed out are never touched,
// so they are not resident. The collector paces itself by the live heap:
// with the chunks on the heap it let garbage grow by GOGC percent of every
// key's node before collecting, and the process kept those pages. nil
// makes the wheel use the heap (on systems without mappings, or when the
// mapping fails).
func (sh *shard) mapChunk(n int) []byte {
	if sh.w.Bytes() < heapChunks*sh.w.NodeBytes()*1024 {
		return nil
	}
	o := sh.mapped
	if len(o.spare) < n {
		page := os.Getpagesize()
		k := min(page/gcd(n, page), maxRegionChunks)
		b := mapBytes(k * n)
		if b == nil {
			return nil
		}
		o.regions = append(o.regions, b)
		o.spare = b
	}
	c := o.spare[:n:n]
	o.spare = o.spare[n:]
	return c
}

// gcd returns the greatest common divisor of a and b (both positive).
func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// bytes returns the bytes o holds outside the heap: its table, the node
// chunks handed out (the untouched rest of the last region is not
// resident) and the mapped side chunks.
func (o *offHeap) bytes() int64 {
	n := int64(len(o.table))*4 - int64(len(o.spare)) + int64(len(o.sideMaps))*sideBytes
	for _, r := range o.regions {
		n += int64(len(r))
	}
	return n
}

// release unmaps everything o holds; the shard must no longer use it.
func (o *offHeap) release() {
	if o.table != nil {
		freeTable(o.table)
		o.table = nil
	}
	for _, r := range o.regions {
		unmapBytes(r)
	}
	o.regions, o.spare = nil, nil
	for _, b := range o.sideMaps {
		unmapBytes(b)
	}
	o.side, o.sideMaps, o.sideChunks = nil, nil, 0
}

// releaseOffHeap unmaps a Store's off-heap memory once it is unreachable.
func releaseOffHeap(mapped []offHeap) {
	for i := range mapped {
		mapped[i].release()
	}
}
