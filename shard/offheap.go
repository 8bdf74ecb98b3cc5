package shard

// offHeap is one shard's memory outside the Go heap: its index table when
// allocTable mapped it, and the node chunks mapChunk mapped for its wheel.
// The Store keeps these records in a list of their own, which its cleanup
// releases once the Store is unreachable.
type offHeap struct {
	table  []uint32
	chunks [][]byte
}

// heapChunks is how many node chunks of a shard come from the Go heap
// before mapChunk maps the rest: a store with a few keys a shard (a test's,
// the server's small internal ones) makes no mappings at all.
const heapChunks = 1

// mapChunk is the shard wheel's source of node chunks (see
// wheel.Wheel.SetChunkMemory): past the first heapChunks, each chunk of
// 1024 nodes (48 KiB, a whole number of pages) is an anonymous mapping
// outside the Go heap, kept until FlushAll or the Store's cleanup. The
// collector paces itself by the live heap: with the chunks on the heap it
// let garbage grow by GOGC percent of every key's node before collecting,
// and the process kept those pages. nil makes the wheel use the heap (on
// systems without mappings, or when the mapping fails).
func (sh *shard) mapChunk(n int) []byte {
	if sh.w.Bytes() < heapChunks*sh.w.NodeBytes()*1024 {
		return nil
	}
	b := mapBytes(n)
	if b != nil {
		sh.mapped.chunks = append(sh.mapped.chunks, b)
	}
	return b
}

// bytes returns the bytes o holds.
func (o *offHeap) bytes() int64 {
	n := int64(len(o.table)) * 4
	for _, c := range o.chunks {
		n += int64(len(c))
	}
	return n
}

// release unmaps everything o holds; the shard must no longer use it.
func (o *offHeap) release() {
	if o.table != nil {
		freeTable(o.table)
		o.table = nil
	}
	for _, c := range o.chunks {
		unmapBytes(c)
	}
	o.chunks = nil
}

// releaseOffHeap unmaps a Store's off-heap memory once it is unreachable.
func releaseOffHeap(mapped []offHeap) {
	for i := range mapped {
		mapped[i].release()
	}
}
