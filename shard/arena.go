package shard

// arena holds the key bytes of one shard in chunks of at most 64 KiB, so a
// key is named by a 32-bit offset (chunk<<16 | position) and the garbage
// collector sees a few large pointer-free byte slices instead of millions
// of strings. The last chunk starts small and doubles up to 64 KiB, so a
// shard with few keys costs little.
//
// Deleted keys leave dead bytes behind; the shard rewrites its arena
// (compact) once dead bytes exceed both the live bytes and one chunk, so the
// arena never holds more than about twice the live key bytes and the copy
// is paid for by the deletions that made it necessary (O(1) amortised).
type arena struct {
	chunks [][]byte
	live   int // bytes of keys in use
	dead   int // bytes of deleted keys and chunk tails not yet reclaimed
}

const (
	chunkShift    = 16
	arenaChunk    = 1 << chunkShift
	firstChunkCap = 1 << 10
)

// put copies key into the arena and returns its offset.
func (a *arena) put(key []byte) uint32 {
	n := len(key)
	last := len(a.chunks) - 1
	if last < 0 || len(a.chunks[last])+n > arenaChunk {
		if last >= 0 {
			a.dead += arenaChunk - len(a.chunks[last]) // tail never used
		}
		a.chunks = append(a.chunks, make([]byte, 0, min(max(firstChunkCap, n), arenaChunk)))
		last++
	}
	c := a.chunks[last]
	if len(c)+n > cap(c) { // grow the last chunk; offsets stay valid
		nc := make([]byte, len(c), min(max(2*cap(c), len(c)+n), arenaChunk))
		copy(nc, c)
		c = nc
	}
	off := uint32(last)<<chunkShift | uint32(len(c))
	a.chunks[last] = append(c, key...)
	a.live += n
	return off
}

// get returns the n bytes at off.
func (a *arena) get(off uint32, n uint16) []byte {
	p := off & (arenaChunk - 1)
	return a.chunks[off>>chunkShift][p : p+uint32(n) : p+uint32(n)]
}

// release marks n bytes dead.
func (a *arena) release(n int) {
	a.live -= n
	a.dead += n
}

// needsCompaction reports whether dead bytes are worth a rewrite.
func (a *arena) needsCompaction() bool {
	return a.dead > arenaChunk && a.dead > a.live
}

// bytes returns the capacity the arena holds, for memory accounting.
func (a *arena) bytes() int {
	n := 0
	for _, c := range a.chunks {
		n += cap(c)
	}
	return n
}
