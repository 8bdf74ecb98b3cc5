package shard

// arena holds the key bytes of one shard in chunks of at most 64 KiB, so the
// garbage collector sees a few large pointer-free byte slices instead of
// millions of strings. A key is named by a 48-bit reference, chunk<<16 |
// position, kept in 6 bytes of its entry. The chunk index has 32 bits, and
// a shard can never need that many chunks: it holds fewer than 1<<24 keys
// of at most 64 KiB, and compaction keeps the arena within about twice the
// live bytes, so it never has more than about 1<<25 chunks. (A 32-bit
// reference, chunk<<16 | position in one uint32, would wrap after 4 GiB of
// keys in one shard.) The last chunk starts small and doubles up to 64
// KiB, so a shard with few long keys costs little.
//
// Deleted keys leave dead bytes behind; the shard rewrites its arena
// (compact) once dead bytes exceed both the live bytes and one chunk, so the
// arena never holds more than about twice the live key bytes and the copy
// is paid for by the deletions that made it necessary (O(1) amortised).
// Under a memory bound the shard also compacts earlier (see
// shard.reclaimArena).
type arena struct {
	chunks [][]byte
	live   int   // bytes of keys in use
	dead   int   // bytes of deleted keys and chunk tails not yet reclaimed
	freed  int   // bytes of deleted keys since the arena was written
	held   int64 // capacity of all chunks, kept up to date for memory accounting
}

const (
	chunkShift    = 16
	arenaChunk    = 1 << chunkShift
	firstChunkCap = 1 << 10
	refBytes      = 6 // bytes of an arena reference kept in an entry
)

// growth returns how many bytes of capacity put(n bytes) would add.
func (a *arena) growth(n int) int64 {
	last := len(a.chunks) - 1
	if last < 0 || len(a.chunks[last])+n > arenaChunk {
		return int64(min(max(firstChunkCap, n), arenaChunk))
	}
	c := a.chunks[last]
	if len(c)+n > cap(c) {
		return int64(min(max(2*cap(c), len(c)+n), arenaChunk) - cap(c))
	}
	return 0
}

// put copies key into the arena and returns its reference.
func (a *arena) put(key []byte) uint64 {
	n := len(key)
	last := len(a.chunks) - 1
	if last < 0 || len(a.chunks[last])+n > arenaChunk {
		if last >= 0 {
			a.dead += arenaChunk - len(a.chunks[last]) // tail never used
		}
		c := make([]byte, 0, min(max(firstChunkCap, n), arenaChunk))
		a.held += int64(cap(c))
		a.chunks = append(a.chunks, c)
		last++
	}
	c := a.chunks[last]
	if len(c)+n > cap(c) { // grow the last chunk; references stay valid
		nc := make([]byte, len(c), min(max(2*cap(c), len(c)+n), arenaChunk))
		copy(nc, c)
		a.held += int64(cap(nc) - cap(c))
		c = nc
	}
	ref := uint64(last)<<chunkShift | uint64(len(c))
	a.chunks[last] = append(c, key...)
	a.live += n
	return ref
}

// get returns the n bytes at ref.
func (a *arena) get(ref uint64, n uint16) []byte {
	p := uint32(ref & (arenaChunk - 1))
	return a.chunks[ref>>chunkShift][p : p+uint32(n) : p+uint32(n)]
}

// release marks n bytes dead.
func (a *arena) release(n int) {
	a.live -= n
	a.dead += n
	a.freed += n
}

// needsCompaction reports whether dead bytes are worth a rewrite.
func (a *arena) needsCompaction() bool {
	return a.dead > arenaChunk && a.dead > a.live
}

// bytes returns the capacity the arena holds, for memory accounting.
func (a *arena) bytes() int64 { return a.held }
