package shard

import (
	"hash/maphash"
	"slices"

	"github.com/throttlekit/throttlekit-server/engine"
)

// Batch applies the transforms of several keys together, for a server that
// has read a pipeline of commands: with millions of keys an Apply is two
// dependent cache misses (table slot, then node) and little else, so
// applying keys one at a time leaves the memory system idle while each miss
// is waited for. A Batch first hashes every key and loads each key's home
// slot, then loads the node each slot names, and only then applies the
// transforms; the loads of one pass do not depend on each other, so the
// CPU overlaps their misses, and the apply pass finds its lines in cache.
//
//	var b shard.Batch // reused by one goroutine, e.g. one per event loop
//	b.Begin(store)
//	for i := range cmds {
//		b.Add(cmds[i].key, &cmds[i].check)
//	}
//	b.Apply(now) // every transform has run, in the order added
//
// Apply locks the shards of the added keys in ascending order (as Txn
// does), runs the passes, and unlocks, so a batch is atomic as a whole and
// each transform sees the state left by the ones added before it on the
// same key. The keys' bytes and the transforms must stay valid until Apply
// returns. A Batch is caller-owned and allocation-free once its slices have
// grown to the largest batch; the zero Batch is ready for Begin, and a
// Batch must not be used by two goroutines at once.
type Batch struct {
	s      *Store
	keys   [][]byte
	ts     []Transform
	hashes []uint64
	shards []uint32 // distinct shard indexes, ascending, once sorted
	sink   uint64   // keeps the touch loads from being optimised away
}

// Begin binds b to s and forgets the keys added before.
func (b *Batch) Begin(s *Store) {
	b.s = s
	clear(b.keys) // drop references to the previous batch's keys and transforms
	clear(b.ts)
	b.keys, b.ts = b.keys[:0], b.ts[:0]
	b.hashes, b.shards = b.hashes[:0], b.shards[:0]
}

// Len returns the number of keys added since Begin.
func (b *Batch) Len() int { return len(b.keys) }

// Add queues t for key. It hashes key at once; nothing is looked up or
// locked until Apply.
func (b *Batch) Add(key []byte, t Transform) {
	var hash uint64
	if len(key) <= MaxKeyLen {
		hash = maphash.Bytes(b.s.seed, key)
		b.shards = append(b.shards, uint32(hash>>b.s.shift))
	}
	b.keys = append(b.keys, key)
	b.ts = append(b.ts, t)
	b.hashes = append(b.hashes, hash)
}

// Apply runs every queued transform as Store.Apply would, in the order
// added, with the shards of all the keys locked for the whole batch, and
// empties the batch. Its cost is one lock per distinct shard and, per key,
// the single-key work with the two cache misses overlapped with the other
// keys' (see Batch). A batch of one key has nothing to overlap with, so it
// skips the passes ahead and runs as Store.Apply does.
func (b *Batch) Apply(now int64) {
	s := b.s
	if len(b.keys) == 1 {
		// One key (a client waiting for each reply): nothing to overlap its
		// misses with, so no passes ahead and no sort.
		if key := b.keys[0]; len(key) <= MaxKeyLen {
			sh := s.shardOf(b.hashes[0])
			sh.mu.Lock()
			sh.apply(key, b.hashes[0], now, b.ts[0])
			sh.mu.Unlock()
		} else {
			b.ts[0].Apply(engine.State{}, now)
		}
		b.Begin(s)
		return
	}
	slices.Sort(b.shards)
	b.shards = slices.Compact(b.shards)
	for _, i := range b.shards {
		s.shards[i].mu.Lock()
	}
	// Pass 1: each key's home slot. Pass 2: the node a slot with the key's
	// tag names (almost always the key's own). The loads are independent.
	var sink uint64
	for i, key := range b.keys {
		if len(key) > MaxKeyLen {
			continue
		}
		sh := s.shardOf(b.hashes[i])
		if t := sh.table; len(t) > 0 {
			sink += uint64(t[homeOf(b.hashes[i], len(t))])
		}
	}
	for i, key := range b.keys {
		if len(key) > MaxKeyLen {
			continue
		}
		if sh, h, ok := s.homeHandle(b.hashes[i]); ok {
			// A 39-byte node may straddle two lines: touch both ends.
			sink += uint64(sh.w.When(h)) + uint64(sh.w.At(h).w[7])
		}
	}
	// Pass 3: the side word of a wide state (token bucket, sliding window),
	// which only the node loaded by pass 2 says is there.
	for i, key := range b.keys {
		if len(key) > MaxKeyLen {
			continue
		}
		if sh, h, ok := s.homeHandle(b.hashes[i]); ok && sh.w.At(h).wide() {
			sink += uint64(sh.mapped.side[h>>sideShift][h&(sideLen-1)])
		}
	}
	b.sink = sink
	for i, key := range b.keys {
		if len(key) > MaxKeyLen {
			b.ts[i].Apply(engine.State{}, now)
			continue
		}
		hash := b.hashes[i]
		s.shardOf(hash).apply(key, hash, now, b.ts[i])
	}
	for i := len(b.shards) - 1; i >= 0; i-- {
		s.shards[b.shards[i]].mu.Unlock()
	}
	b.Begin(s)
}

// homeHandle returns the shard of hash and the handle its home slot names
// when the slot's tag is hash's: almost always the key's own node, which
// the passes of Apply load ahead (the apply pass finds the key for real).
func (s *Store) homeHandle(hash uint64) (*shard, uint32, bool) {
	sh := s.shardOf(hash)
	t := sh.table
	if len(t) == 0 {
		return sh, 0, false
	}
	v := t[homeOf(hash, len(t))]
	if v == 0 || v&^idxMask != tagOf(hash) {
		return sh, 0, false
	}
	return sh, v&idxMask - 1, true
}
