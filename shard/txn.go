package shard

import (
	"hash/maphash"
	"slices"

	"github.com/throttlekit/throttlekit-server/engine"
)

// Txn is an atomic section over several keys, for MULTI/EXEC and for
// all-or-nothing checks of several limits: it locks the shards of a set of
// keys, runs any number of Apply, Get, Lookup and Delete on those keys with
// no other call on them interleaving, then unlocks.
//
//	var tx shard.Txn // reused by one goroutine, e.g. one per event loop
//	tx.Begin(store)
//	tx.Add(k1)
//	tx.Add(k2)
//	tx.Lock()
//	a, _, _ := tx.Get(k1, now)
//	b, _, _ := tx.Get(k2, now)
//	if ok(a, b) { tx.Apply(k1, now, &t1); tx.Apply(k2, now, &t2) }
//	tx.Unlock()
//
// Lock takes each shard once, in ascending shard index, the one order in
// which any call holds more than one shard lock (FlushAll uses it too;
// every other call holds one at a time), so transactions never deadlock
// with each other or with single-key calls. An operation on a key that was
// not added before Lock returns ErrNotLocked instead of taking another
// lock. The section blocks every key of the locked shards, not only the
// declared ones, so keep it short and never wait inside it; and inside it
// use only the Txn's methods: a Store method on a locked shard would wait
// for the Txn's own lock.
//
// A Txn is caller-owned and reusable: its shard list keeps its capacity, so
// a transaction over k keys allocates nothing once the list has grown to k.
// Its cost is one hash per Add, a sort of the shard indexes and one lock
// per distinct shard at Lock, and a binary search per operation on top of
// the single-key cost. The zero Txn is ready for Begin; a Txn must not be
// used by two goroutines at once.
type Txn struct {
	s      *Store
	shards []uint32
	locked bool
	all    bool // AddAll: every shard, for the whole-keyspace calls
}

// Begin binds t to s and forgets the keys added before. It unlocks t first
// if it is still locked.
func (t *Txn) Begin(s *Store) {
	t.Unlock()
	t.s = s
	t.shards = t.shards[:0]
	t.all = false
}

// AddAll declares that the whole store will be used once t is locked:
// Lock then takes every shard, in the same ascending order, and the
// whole-keyspace calls (FlushAll, Scan, Len) become available. It returns
// ErrTxnState after Lock or before Begin.
func (t *Txn) AddAll() error {
	if t.s == nil || t.locked {
		return ErrTxnState
	}
	if !t.all {
		t.all = true
		for i := range t.s.shards {
			t.shards = append(t.shards, uint32(i))
		}
	}
	return nil
}

// Add declares that key will be used once t is locked. Keys longer than
// MaxKeyLen need no lock (the store keeps nothing for them). Add returns
// ErrTxnState after Lock or before Begin.
func (t *Txn) Add(key []byte) error {
	if t.s == nil || t.locked {
		return ErrTxnState
	}
	if len(key) <= MaxKeyLen {
		t.shards = append(t.shards, uint32(maphash.Bytes(t.s.seed, key)>>t.s.shift))
	}
	return nil
}

// Lock locks the shards of the added keys, each once, in ascending shard
// index. It returns ErrTxnState if t is already locked or was not begun.
func (t *Txn) Lock() error {
	if t.s == nil || t.locked {
		return ErrTxnState
	}
	slices.Sort(t.shards)
	t.shards = slices.Compact(t.shards)
	for _, i := range t.shards {
		t.s.shards[i].mu.Lock()
	}
	t.locked = true
	return nil
}

// Unlock releases the shards Lock took, in reverse order. The added keys
// are kept, so Lock may be called again for the same set. Unlock on an
// unlocked Txn does nothing.
func (t *Txn) Unlock() {
	if !t.locked {
		return
	}
	for i := len(t.shards) - 1; i >= 0; i-- {
		t.s.shards[t.shards[i]].mu.Unlock()
	}
	t.locked = false
}

// shardOf returns key's shard and hash if t holds its lock.
func (t *Txn) shardOf(key []byte) (*shard, uint64, error) {
	if !t.locked {
		return nil, 0, ErrTxnState
	}
	hash := maphash.Bytes(t.s.seed, key)
	i := uint32(hash >> t.s.shift)
	if _, ok := slices.BinarySearch(t.shards, i); !ok {
		return nil, 0, ErrNotLocked
	}
	return &t.s.shards[i], hash, nil
}

// Apply is Store.Apply on a key whose shard t holds.
func (t *Txn) Apply(key []byte, now int64, tr Transform) error {
	if len(key) > MaxKeyLen {
		if !t.locked {
			return ErrTxnState
		}
		tr.Apply(engine.State{}, now)
		return nil
	}
	sh, hash, err := t.shardOf(key)
	if err != nil {
		return err
	}
	sh.apply(key, hash, now, tr)
	return nil
}

// Get is Store.Get on a key whose shard t holds.
func (t *Txn) Get(key []byte, now int64) (engine.State, bool, error) {
	if len(key) > MaxKeyLen {
		return engine.State{}, false, t.stateErr()
	}
	sh, hash, err := t.shardOf(key)
	if err != nil {
		return engine.State{}, false, err
	}
	st, ok := sh.get(key, hash, now)
	return st, ok, nil
}

// Lookup is Store.Lookup on a key whose shard t holds.
func (t *Txn) Lookup(key []byte, now int64) (st engine.State, expireAt int64, ok bool, err error) {
	if len(key) > MaxKeyLen {
		return engine.State{}, 0, false, t.stateErr()
	}
	sh, hash, err := t.shardOf(key)
	if err != nil {
		return engine.State{}, 0, false, err
	}
	st, expireAt, ok = sh.lookup(key, hash, now)
	return st, expireAt, ok, nil
}

// Delete is Store.Delete on a key whose shard t holds.
func (t *Txn) Delete(key []byte, now int64) (bool, error) {
	if len(key) > MaxKeyLen {
		return false, t.stateErr()
	}
	sh, hash, err := t.shardOf(key)
	if err != nil {
		return false, err
	}
	return sh.delete(key, hash, now), nil
}

// FlushAll is Store.FlushAll inside t, which must hold every shard
// (AddAll); otherwise it returns ErrNotLocked and changes nothing.
func (t *Txn) FlushAll(now int64) (int, error) {
	if err := t.allErr(); err != nil {
		return 0, err
	}
	return t.s.clearAll(now), nil
}

// Scan is Store.Scan inside t, which must hold every shard (AddAll).
func (t *Txn) Scan(p *ScanPage, cursor uint64, count int, now int64) (uint64, error) {
	if err := t.allErr(); err != nil {
		p.Reset()
		return 0, err
	}
	return t.s.scan(p, cursor, count, now, false)
}

// Len is Store.Len inside t, which must hold every shard (AddAll).
func (t *Txn) Len() (int, error) {
	if err := t.allErr(); err != nil {
		return 0, err
	}
	n := 0
	for i := range t.s.shards {
		n += t.s.shards[i].count
	}
	return n, nil
}

// allErr says why t cannot run a whole-keyspace call, or nil.
func (t *Txn) allErr() error {
	if !t.locked {
		return ErrTxnState
	}
	if !t.all {
		return ErrNotLocked
	}
	return nil
}

func (t *Txn) stateErr() error {
	if !t.locked {
		return ErrTxnState
	}
	return nil
}
