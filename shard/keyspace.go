package shard

import (
	"hash/maphash"

	"github.com/throttlekit/throttlekit-server/engine"
)

// Code identifies a store error. Codes are stable: callers may keep them in
// tables (a server maps each to its wire text) and they are never
// renumbered.
type Code uint8

// Error codes, one per condition the store rejects.
const (
	CodeBadCursor Code = iota + 1 // a Scan cursor whose shard index is out of range
	CodeNotLocked                 // a Txn operation on a key whose shard it did not lock
	CodeTxnState                  // a Txn method called out of order
	NumCodes                      // one past the largest code
)

// Error is a store error: a stable Code and a plain description. It carries
// no protocol text.
type Error struct {
	Code Code
	Text string
}

// Error returns the description, prefixed with "shard: ".
func (e *Error) Error() string { return "shard: " + e.Text }

// The errors the store returns. Each is a single value, so callers may
// compare with == as well as with errors.Is.
var (
	// ErrBadCursor is returned by Scan for a cursor no Scan of this store
	// handed out (its shard index is out of range).
	ErrBadCursor = &Error{CodeBadCursor, "invalid cursor"}
	// ErrNotLocked is returned by a Txn operation on a key whose shard the
	// transaction did not lock (the key was not added before Lock).
	ErrNotLocked = &Error{CodeNotLocked, "key not added before the transaction was locked"}
	// ErrTxnState is returned by a Txn method called out of order: Add
	// after Lock, an operation before Lock, Lock twice, or any call on a
	// Txn that Begin did not bind to a store.
	ErrTxnState = &Error{CodeTxnState, "transaction method called out of order"}
)

// DefaultScanCount is the COUNT hint Scan uses when given count <= 0, as
// Redis's SCAN does.
const DefaultScanCount = 10

// Lookup returns the state of key and its absolute expiry (ns since the
// epoch) if the key is held and not expired at now: what TTL, PTTL, TYPE and
// EXISTS need. Unlike Get it is an inspection: it does not set the key's
// CLOCK reference bit and does not reclaim an expired key (the key reads as
// absent all the same). It costs one shard lock and one lookup.
func (s *Store) Lookup(key []byte, now int64) (st engine.State, expireAt int64, ok bool) {
	if len(key) > MaxKeyLen {
		return engine.State{}, 0, false
	}
	hash := maphash.Bytes(s.seed, key)
	sh := s.shardOf(hash)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.lookup(key, hash, now)
}

// lookup is Lookup under the shard lock.
func (sh *shard) lookup(key []byte, hash uint64, now int64) (engine.State, int64, bool) {
	_, h, ok := sh.find(key, hash)
	if !ok {
		return engine.State{}, 0, false
	}
	exp := sh.w.When(h)
	if exp <= now {
		return engine.State{}, 0, false
	}
	return sh.state(h, sh.w.At(h), exp), exp, true
}

// ScanPage holds the keys one Scan call returns. It is caller-owned and
// reusable: Scan resets it and appends into its buffers, so a page reused
// across calls allocates nothing once its buffers have grown to the
// largest page. Keys are copies, valid until the next Scan into the page.
type ScanPage struct {
	buf   []byte
	ends  []int
	kinds []engine.Kind
}

// Reset empties the page, keeping its buffers.
func (p *ScanPage) Reset() {
	p.buf, p.ends, p.kinds = p.buf[:0], p.ends[:0], p.kinds[:0]
}

// Len returns the number of keys in the page.
func (p *ScanPage) Len() int { return len(p.ends) }

// Key returns the i-th key of the page.
func (p *ScanPage) Key(i int) []byte {
	start := 0
	if i > 0 {
		start = p.ends[i-1]
	}
	return p.buf[start:p.ends[i]:p.ends[i]]
}

// Kind returns the kind of state the i-th key held when it was scanned
// (for SCAN's TYPE filter).
func (p *ScanPage) Kind(i int) engine.Kind { return p.kinds[i] }

// Append adds a copy of key with its kind to the page: how a store fills
// the page it is given.
func (p *ScanPage) Append(key []byte, k engine.Kind) {
	p.buf = append(p.buf, key...)
	p.ends = append(p.ends, len(p.buf))
	p.kinds = append(p.kinds, k)
}

// hashSpace is one past the largest 32-bit hash boundary: a shard's scan
// is done when its boundary reaches it.
const hashSpace = 1 << 32

// Scan returns a page of keys into p and the cursor to pass to the next
// call, with the guarantees of Redis's SCAN: start with cursor 0; the scan
// is over when the returned cursor is 0; every key held and unexpired from
// the first call to the last is returned at least once, whatever inserts,
// deletes, expiries, evictions and table resizes happen in between; a key
// may be returned more than once (callers that care deduplicate); keys
// expired at now are never returned. count is a hint of how many keys to
// visit per call (DefaultScanCount when <= 0); a page may hold more, or
// fewer, or none while the scan is not over.
//
// The cursor is stateless, so a client may drop a scan at any time: its
// high 32 bits are a shard index, its low 32 bits a boundary in the low 32
// bits of the keys' hashes. Within a shard, a key's home slot is monotonic
// in those bits whatever the table's length (see homeOf), so the keys at
// or above a boundary are found by probing from the boundary's home slot;
// a page ends at an empty slot, which no probe sequence crosses, and the
// next boundary is the first hash value whose home lies past that slot. A
// page thus returns every key whose hash falls between two boundaries, and
// keys with equal hashes are never split across pages. A cursor of
// another Store, or of this one before a restart (the hash seed changes),
// is accepted but gives no guarantee; a shard index out of range is
// ErrBadCursor.
//
// Cost: one shard lock at a time, held while the page's slots are read;
// O(count) slots visited plus the run up to the next empty slot, and one
// hash of each visited key to place it against the boundary. Shards with
// no keys are skipped for the price of their lock; a call moves on to the
// next shard while it has visited fewer than count keys. Nothing is
// allocated per key beyond the page's buffers.
func (s *Store) Scan(p *ScanPage, cursor uint64, count int, now int64) (next uint64, err error) {
	return s.scan(p, cursor, count, now, true)
}

// scan is Scan; lock says whether to take each shard's lock (false: the
// caller holds them all, Txn.Scan).
func (s *Store) scan(p *ScanPage, cursor uint64, count int, now int64, lock bool) (next uint64, err error) {
	p.Reset()
	if count <= 0 {
		count = DefaultScanCount
	}
	si := cursor >> 32
	if si >= uint64(len(s.shards)) {
		return 0, ErrBadCursor
	}
	b := cursor & (hashSpace - 1)
	visited := 0
	for {
		sh := &s.shards[si]
		if lock {
			sh.mu.Lock()
		}
		end, v := sh.scan(p, b, count-visited, now)
		if lock {
			sh.mu.Unlock()
		}
		visited += v
		if end < hashSpace {
			return si<<32 | end, nil
		}
		si++
		if si == uint64(len(s.shards)) {
			return 0, nil
		}
		b = 0
		if visited >= count {
			return si << 32, nil
		}
	}
}

// scan appends to p the unexpired keys whose low 32 hash bits are at or
// above the boundary b, in table order from b's home slot, stopping at the
// first empty slot after want keys have been visited. It returns the
// boundary where the next page starts (hashSpace when the shard is done)
// and the number of keys visited.
func (sh *shard) scan(p *ScanPage, b uint64, want int, now int64) (end uint64, visited int) {
	if sh.count == 0 {
		return hashSpace, 0
	}
	t := sh.table
	n := len(t)
	for i := homeOf(b, n); i < n; i++ {
		v := t[i]
		if v == 0 {
			if visited >= want {
				// No probe sequence crosses the empty slot i: every key
				// homed before i sits before it, and the next page starts
				// at the first hash whose home is i.
				return (uint64(i)<<32 + uint64(n) - 1) / uint64(n), visited
			}
			continue
		}
		visited++
		sh.scanSlot(p, v, b, i, false, now)
	}
	// The last run may wrap: keys homed near the end of the table can sit
	// at its start, up to the first empty slot.
	for i := 0; i < n && t[i] != 0; i++ {
		visited++
		sh.scanSlot(p, t[i], b, i, true, now)
	}
	return hashSpace, visited
}

// scanSlot adds the key in slot value v at position i to p if it is
// unexpired, its hash is at or above b, and it is where the scan expects
// it: homed at or before i for the forward pass, homed after i (wrapped
// around the table's end) for the wrap pass.
func (sh *shard) scanSlot(p *ScanPage, v uint32, b uint64, i int, wrapped bool, now int64) {
	h := v&idxMask - 1
	if sh.w.When(h) <= now {
		return
	}
	key := sh.keyOf(h)
	hash := maphash.Bytes(sh.seed, key)
	if uint64(uint32(hash)) < b || (homeOf(hash, len(sh.table)) > i) != wrapped {
		return
	}
	p.Append(key, sh.w.At(h).stateKind())
}

// FlushAll drops every key, atomically: it locks every shard in ascending
// order (the order Txn uses), clears them, then unlocks them, so no other
// call observes some shards cleared and others not. It returns the number
// of keys that were unexpired at now. Memory is given back: entry chunks,
// tables and node chunks (mapped ones are unmapped at once) and arenas are
// released.
//
// With change tracking on (after the first Flush), every unexpired key
// dropped is recorded as a deletion, so the next Flush reports it with the
// zero State and expireAt 0 as it would a Delete, and a backend that
// applies Flush's records drops it too. The Flush contract is unchanged.
// The cost is a copy of each key into the shard's deletion log (its bytes
// plus 2) until the next Flush; expired keys are not recorded, since a
// backend drops them by their expireAt.
//
// Cost: O(keys held) under all the shard locks: every other call waits
// for it, as Redis's synchronous FLUSHALL blocks its server.
func (s *Store) FlushAll(now int64) int {
	for i := range s.shards {
		s.shards[i].mu.Lock()
	}
	n := s.clearAll(now)
	for i := range s.shards {
		s.shards[i].mu.Unlock()
	}
	return n
}

// clearAll clears every shard, whose locks the caller holds.
func (s *Store) clearAll(now int64) int {
	n := 0
	for i := range s.shards {
		n += s.shards[i].clear(now)
	}
	s.pool.release() // no shard holds a node chunk any more
	return n
}

// clear drops every key of the shard and returns how many were unexpired.
func (sh *shard) clear(now int64) int {
	n := 0
	for h := uint32(0); h < sh.w.Cap(); h++ {
		if !sh.w.Allocated(h) {
			continue
		}
		if sh.w.When(h) > now {
			n++
			sh.tomb(sh.keyOf(h))
		}
	}
	sh.table = nil
	sh.w.Reset()
	sh.mapped.release()
	sh.keys = arena{}
	sh.count = 0
	sh.hand = 0
	sh.dirty = sh.dirty[:0]
	return n
}
