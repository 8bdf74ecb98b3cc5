package shard

import "sync"

// offHeap is one shard's memory outside the Go heap: its index table when
// allocTable mapped it, and its side chunks. (Node chunks come from the
// Store's chunkPool, shared by its shards.) The Store keeps these records
// in a list of their own, which its cleanup releases once the shards are
// unreachable.
type offHeap struct {
	table []uint32

	// side holds the side chunks of the shard's wide states by chunk of
	// 1024 handles, nil for a chunk none of whose handles has held one
	// (see sideOf); sideMaps are the ones mapped outside the heap, and
	// sideChunks counts them all.
	side       []*sideChunk
	sideMaps   [][]byte
	sideChunks int
}

// heapChunks is how many node chunks of a shard come from the Go heap
// before mapChunk maps the rest: a store with a few keys a shard (a test's,
// the server's small internal ones) makes no mappings at all.
const heapChunks = 1

// mapChunk is the shard wheel's source of node chunks (see
// wheel.Wheel.SetChunkMemory): past the first heapChunks, chunks of 1024
// nodes come from the Store's chunkPool, outside the Go heap, and are kept
// until FlushAll or the Store's cleanup. The collector paces itself by the
// live heap: with the chunks on the heap it let garbage grow by GOGC
// percent of every key's node before collecting, and the process kept
// those pages. nil makes the wheel use the heap (on systems without
// mappings, or when the mapping fails).
func (sh *shard) mapChunk(n int) []byte {
	if sh.w.Bytes() < heapChunks*sh.w.NodeBytes()*1024 {
		return nil
	}
	return sh.pool.chunk(n)
}

// chunkPool carves the node chunks of all of a Store's shards, one after
// another, from shared regions of hugeRegion bytes: anonymous mappings
// aligned to hugeRegion. Once every chunk of a region has been handed out,
// Sweep asks the system to back it with one transparent huge page (on
// Linux: MADV_COLLAPSE, or MADV_HUGEPAGE for the kernel's background
// collapsing where that is refused). With millions of keys a check
// touches a node at random; on 4 KiB pages nearly every such touch also
// misses the TLB and walks the page tables (in a virtual machine, both the
// guest's and the host's), while 2 MiB pages let the TLB cover tens of
// megabytes of nodes.
//
// Only full regions are collapsed, and the regions are shared, so huge
// pages cost almost no memory: the region being carved stays on 4 KiB
// pages, resident only as its chunks are touched, and a full region adds
// only the 20 KiB at its end that no whole chunk fits (1% with 39-byte
// nodes). Regions of a shard's own would each be resident whole, up to
// 2 MiB a shard. A chunk is carved under the pool's mutex, once per 1024
// new keys of a shard, under that shard's lock (shard locks are never
// taken under the pool's); a collapse copies one region (2 MiB) under the
// pool's mutex, in Sweep, outside every shard lock.
type chunkPool struct {
	mu      sync.Mutex
	regions [][]byte // mappings holding node chunks
	spare   []byte   // the part of the last region not yet handed out
	used    int64    // bytes of the chunks handed out
	full    [][]byte // regions all handed out and not yet collapsed
}

// hugeRegion is the size and alignment of the pool's regions: one
// transparent huge page on x86-64 and on arm64 with 4 KiB base pages.
const hugeRegion = 2 << 20

// chunk returns n zeroed bytes for a node chunk, or nil if no region can
// be mapped.
func (p *chunkPool) chunk(n int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.spare) < n {
		b := mapRegion((n + hugeRegion - 1) / hugeRegion * hugeRegion)
		if b == nil {
			return nil
		}
		if k := len(p.regions); k > 0 {
			p.full = append(p.full, p.regions[k-1])
		}
		p.regions = append(p.regions, b)
		p.spare = b
	}
	c := p.spare[:n:n]
	p.spare = p.spare[n:]
	p.used += int64(n)
	return c
}

// bytes returns the bytes of the chunks handed out, as the shards' Bytes
// count them (not the unused ends of the regions).
func (p *chunkPool) bytes() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used
}

// release unmaps every region; no shard may use a chunk of the pool any
// more (FlushAll, with every shard cleared, or the Store's cleanup).
func (p *chunkPool) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.regions {
		unmapRegion(r)
	}
	p.regions, p.spare, p.used, p.full = nil, nil, 0, nil
}

// collapse backs the full regions with huge pages (see collapseRegion),
// one region per hold of the mutex, and returns how many it asked for.
func (p *chunkPool) collapse() int {
	n := 0
	for {
		p.mu.Lock()
		k := len(p.full)
		if k == 0 {
			p.mu.Unlock()
			return n
		}
		r := p.full[k-1]
		p.full = p.full[:k-1]
		collapseRegion(r)
		p.mu.Unlock()
		n++
	}
}

// bytes returns the bytes o holds outside the heap: its table and the
// mapped side chunks.
func (o *offHeap) bytes() int64 {
	return int64(len(o.table))*4 + int64(len(o.sideMaps))*sideBytes
}

// release unmaps everything o holds; the shard must no longer use it.
func (o *offHeap) release() {
	if o.table != nil {
		freeTable(o.table)
		o.table = nil
	}
	for _, b := range o.sideMaps {
		unmapBytes(b)
	}
	o.side, o.sideMaps, o.sideChunks = nil, nil, 0
}

// storeOffHeap is what a Store holds outside the Go heap: its shards'
// records and its node chunk pool.
type storeOffHeap struct {
	shards []offHeap
	pool   *chunkPool
}

// releaseOffHeap unmaps a Store's off-heap memory once its shards are
// unreachable.
func releaseOffHeap(m storeOffHeap) {
	for i := range m.shards {
		m.shards[i].release()
	}
	m.pool.release()
}
