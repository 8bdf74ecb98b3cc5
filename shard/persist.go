package shard

import (
	"hash/maphash"

	"github.com/throttlekit/throttlekit-server/engine"
)

// flushRec is one visit gathered by Flush: key bytes at fbuf[off:off+n].
type flushRec struct {
	off, n uint32
	st     engine.State
	exp    int64
}

// markDirty records that h changed since the last Flush.
func (sh *shard) markDirty(h uint32, e *entry) {
	e.meta |= fDirty
	if e.meta&fListed == 0 {
		e.meta |= fListed
		sh.dirty = append(sh.dirty, h)
	}
}

// tomb records a deleted key for the next Flush, once tracking is on.
func (sh *shard) tomb(key []byte) {
	if sh.tracking {
		sh.tombs = append(sh.tombs, byte(len(key)), byte(len(key)>>8))
		sh.tombs = append(sh.tombs, key...)
	}
}

// Flush is the hook a durable backend uses to save the store. It calls fn
// for every key whose state changed since the previous Flush: fn gets the
// key, its state and its absolute expiry (ns since the epoch). A key deleted
// since the previous Flush (by Delete or by a transform returning ttl <= 0)
// is visited with the zero State and expireAt 0, before any later state of
// the same key; so is every unexpired key dropped by FlushAll. Keys that expired or were evicted are not reported: the
// backend drops expired keys by their expireAt, and an evicted key's saved
// state is still valid.
//
// The first Flush visits every key held and switches change tracking on;
// until then Apply records nothing, so a store never flushed pays nothing
// and holds no change log. After that, each change costs one flag test and,
// the first time a handle changes between two flushes, one append to the
// shard's change list (its capacity is reused, so nothing is allocated in
// the steady state).
//
// Flush gathers each shard under its lock into a buffer owned by the store
// and calls fn after releasing the lock, so fn may block without stalling
// the shard. key is valid only during the call to fn. A change made while
// Flush runs is reported by this Flush or the next. Flush calls do not
// overlap.
func (s *Store) Flush(fn func(key []byte, st engine.State, expireAt int64)) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	for i := range s.shards {
		sh := &s.shards[i]
		recs, buf := s.frecs[:0], s.fbuf[:0]
		add := func(key []byte, st engine.State, exp int64) {
			recs = append(recs, flushRec{off: uint32(len(buf)), n: uint32(len(key)), st: st, exp: exp})
			buf = append(buf, key...)
		}
		sh.mu.Lock()
		for p := 0; p < len(sh.tombs); {
			n := int(sh.tombs[p]) | int(sh.tombs[p+1])<<8
			add(sh.tombs[p+2:p+2+n], engine.State{}, 0)
			p += 2 + n
		}
		sh.tombs = sh.tombs[:0]
		visit := func(h uint32) {
			exp := sh.w.When(h)
			add(sh.keyOf(h), sh.state(h, sh.w.At(h), exp), exp)
		}
		if !sh.tracking {
			sh.tracking = true
			for h := uint32(0); h < sh.w.Cap(); h++ {
				if sh.w.Allocated(h) {
					visit(h)
				}
			}
		} else {
			for _, h := range sh.dirty {
				e := sh.w.At(h)
				f := e.meta
				e.meta &^= fDirty | fListed
				if f&fDirty != 0 && sh.w.Allocated(h) {
					visit(h)
				}
			}
		}
		sh.dirty = sh.dirty[:0]
		sh.mu.Unlock()
		for _, r := range recs {
			fn(buf[r.off:r.off+r.n:r.off+r.n], r.st, r.exp)
		}
		s.frecs, s.fbuf = recs, buf
	}
}

// Load is the hook a durable backend uses to restore the store at start: it
// sets key to st with absolute expiry expireAt (ns since the epoch), as if a
// transform had, but without marking the key changed for Flush. It skips
// (and returns false for) a zero state, an expiry at or before now, a key
// longer than MaxKeyLen, or a state whose kind uses bits outside KindBits
// (no kind the engine defines does). Loading into a full shard evicts like
// Apply (a full NoEvict shard refuses the key and Load reports false).
func (s *Store) Load(key []byte, st engine.State, expireAt, now int64) bool {
	if len(key) > MaxKeyLen || st == (engine.State{}) || st.Kind&^KindBits != 0 || expireAt <= now {
		return false
	}
	hash := maphash.Bytes(s.seed, key)
	sh := s.shardOf(hash)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.w.Due(now) {
		sh.advance(now)
	}
	_, h, ok := sh.find(key, hash)
	if !ok {
		if h, ok = sh.insert(key, hash, now); !ok {
			return false
		}
	}
	sh.setState(h, sh.w.At(h), st, expireAt)
	sh.w.Schedule(h, expireAt)
	return true
}
