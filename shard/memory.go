package shard

// bytes returns the memory the shard holds for keys: its entry chunks and
// side chunks, its index table (on or off the heap) and its key arena.
func (sh *shard) bytes() int64 {
	return sh.w.Bytes() + int64(sh.mapped.sideChunks)*sideBytes + int64(len(sh.table))*4 + sh.keys.bytes()
}

// growth returns the bytes that inserting one more key of n bytes would add
// to bytes: a new entry chunk when no handle is free (and its side chunk
// when the shard has held a wide state, which the new key may be), the next table when
// the current one would pass 3/4 full (less the table it replaces), and
// arena capacity for a key longer than inlineKey.
func (sh *shard) growth(n int) (g int64, arenaGrows bool) {
	g = sh.w.AllocBytes()
	if g > 0 && sh.mapped.sideChunks > 0 {
		g += sideBytes
	}
	if (sh.count+1)*4 > len(sh.table)*3 {
		g += int64(nextTableLen(len(sh.table))-len(sh.table)) * 4
	}
	if n > inlineKey {
		if a := sh.keys.growth(n); a > 0 {
			g += a
			arenaGrows = true
		}
	}
	return g, arenaGrows
}

// makeRoom evicts keys with the CLOCK hand until a new key of n bytes fits
// in the shard's share of Config.MaxMemory, or the shard is empty (a shard
// always takes one key). Entry chunks and tables are never given back, so
// an evicted key's handle and slot are what the new key reuses; the arena
// is append-only, so when it is what must grow, reclaimArena rewrites it
// once evictions have left enough dead bytes. A NoEvict shard evicts
// nothing: it reports false when the key does not fit.
func (sh *shard) makeRoom(n int, now int64) bool {
	for sh.count > 0 {
		g, arenaGrows := sh.growth(n)
		if sh.bytes()+g <= sh.maxBytes {
			return true
		}
		if arenaGrows && sh.reclaimArena() {
			continue
		}
		if sh.noEvict {
			return false
		}
		sh.evictOne(now)
	}
	return true
}

// reclaimArena compacts the arena under memory pressure once the bytes of
// keys deleted since it was last written are at least a quarter of the live
// ones (and at least one small chunk),
// earlier than the ordinary rule (dead bytes above the live ones), so a
// bounded shard does not evict half of its long keys before their bytes
// come back. Each rewrite costs O(handles + live key bytes) and is paid
// for by the evictions that left a quarter of the live bytes dead. It
// reports whether it compacted.
func (sh *shard) reclaimArena() bool {
	a := &sh.keys
	if a.freed < firstChunkCap || 4*a.freed < a.live {
		return false
	}
	sh.compact()
	return true
}
