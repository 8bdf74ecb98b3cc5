package shard

import (
	"hash/maphash"
	"math/bits"
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
	s       *Store
	entries []batchEntry
	// The shards to lock: a store of at most 64 shards marks them in mask,
	// whose bits come out in ascending order; a larger one lists them in
	// shards, sorted and made distinct by Apply.
	mask   uint64
	shards []uint32
	sink   uint64 // keeps the touch loads from being optimised away
}

// batchEntry is one added key: its transform, its hash (0 for a key longer
// than MaxKeyLen, which the store does not keep) and the node pass 2
// loaded for it, or noHandle.
type batchEntry struct {
	key  []byte
	t    Transform
	hash uint64
	h    uint32
}

// noHandle marks a key whose home slot named no node of its tag.
const noHandle = ^uint32(0)

// maskShards is the largest store whose shards a Batch marks in its mask.
const maskShards = 64

// Begin binds b to s and forgets the keys added before.
func (b *Batch) Begin(s *Store) {
	b.s = s
	clear(b.entries) // drop references to the previous batch's keys and transforms
	b.entries, b.shards = b.entries[:0], b.shards[:0]
	b.mask = 0
}

// Len returns the number of keys added since Begin.
func (b *Batch) Len() int { return len(b.entries) }

// Add queues t for key. It hashes key at once; nothing is looked up or
// locked until Apply.
func (b *Batch) Add(key []byte, t Transform) {
	var hash uint64
	if len(key) <= MaxKeyLen {
		hash = maphash.Bytes(b.s.seed, key)
		if i := uint32(hash >> b.s.shift); len(b.s.shards) <= maskShards {
			b.mask |= 1 << i
		} else {
			b.shards = append(b.shards, i)
		}
	}
	b.entries = append(b.entries, batchEntry{key: key, t: t, hash: hash})
}

// Apply runs every queued transform as Store.Apply would, in the order
// added, with the shards of all the keys locked for the whole batch, and
// empties the batch. Its cost is one lock per distinct shard and, per key,
// the single-key work with the two cache misses overlapped with the other
// keys' (see Batch). A batch of one key has nothing to overlap with, so it
// skips the passes ahead and runs as Store.Apply does.
func (b *Batch) Apply(now int64) {
	s := b.s
	if len(b.entries) == 1 {
		// One key (a client waiting for each reply): nothing to overlap its
		// misses with, so no passes ahead and no sort.
		if e := &b.entries[0]; len(e.key) <= MaxKeyLen {
			sh := s.shardOf(e.hash)
			sh.mu.Lock()
			sh.apply(e.key, e.hash, now, e.t)
			sh.mu.Unlock()
		} else {
			e.t.Apply(engine.State{}, now)
		}
		b.Begin(s)
		return
	}
	b.lock()
	// Pass 1: each key's home slot. Pass 2: the node a slot with the key's
	// tag names (almost always the key's own). The loads are independent.
	var sink uint64
	for i := range b.entries {
		e := &b.entries[i]
		if len(e.key) > MaxKeyLen {
			continue
		}
		sh := s.shardOf(e.hash)
		if t := sh.table; len(t) > 0 {
			sink += uint64(t[homeOf(e.hash, len(t))])
		}
	}
	for i := range b.entries {
		e := &b.entries[i]
		e.h = noHandle
		if len(e.key) > MaxKeyLen {
			continue
		}
		if sh, h, ok := s.homeHandle(e.hash); ok {
			// A 39-byte node may straddle two lines: touch both ends.
			sink += uint64(sh.w.When(h)) + uint64(sh.w.At(h).w[7])
			e.h = h
		}
	}
	// Pass 3: the side word of a wide state (token bucket, sliding window),
	// which only the node loaded by pass 2 says is there.
	for i := range b.entries {
		e := &b.entries[i]
		if e.h == noHandle {
			continue
		}
		if sh := s.shardOf(e.hash); sh.w.At(e.h).wide() {
			sink += uint64(sh.mapped.side[e.h>>sideShift][e.h&(sideLen-1)])
		}
	}
	b.sink = sink
	for i := range b.entries {
		e := &b.entries[i]
		if len(e.key) > MaxKeyLen {
			e.t.Apply(engine.State{}, now)
			continue
		}
		s.shardOf(e.hash).apply(e.key, e.hash, now, e.t)
	}
	b.unlock()
	b.Begin(s)
}

// lock locks the shards of the added keys, each once, in ascending order
// (as Txn does, so that two batches, or a batch and a Txn, cannot wait on
// each other).
func (b *Batch) lock() {
	sh := b.s.shards
	for m := b.mask; m != 0; m &= m - 1 {
		sh[bits.TrailingZeros64(m)].mu.Lock()
	}
	if len(b.shards) > 0 {
		slices.Sort(b.shards)
		b.shards = slices.Compact(b.shards)
		for _, i := range b.shards {
			sh[i].mu.Lock()
		}
	}
}

// unlock unlocks what lock locked.
func (b *Batch) unlock() {
	sh := b.s.shards
	for m := b.mask; m != 0; m &= m - 1 {
		sh[bits.TrailingZeros64(m)].mu.Unlock()
	}
	for _, i := range b.shards {
		sh[i].mu.Unlock()
	}
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
