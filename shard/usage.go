package shard

import "hash/maphash"

// KeyUsage is the memory one key holds in the store, in bytes.
type KeyUsage struct {
	Node  int64 // its record in the shard's entry chunks (entry and timer links)
	Slot  int64 // its share of the shard's index table: the table's bytes over the keys it holds, rounded up
	Arena int64 // its bytes in the shard's key arena (0 for a key of up to 16 bytes, kept in its record)
	Side  int64 // its word in the shard's side array: 8 for a state with two words besides its expiry (token bucket, sliding window), else 0
}

// Total returns Node + Slot + Arena + Side.
func (u KeyUsage) Total() int64 { return u.Node + u.Slot + u.Arena + u.Side }

// Usage returns what key holds at now, or false if it is absent or
// expired. It takes the key's shard lock and allocates nothing.
func (s *Store) Usage(key []byte, now int64) (KeyUsage, bool) {
	if len(key) > MaxKeyLen {
		return KeyUsage{}, false
	}
	hash := maphash.Bytes(s.seed, key)
	sh := s.shardOf(hash)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, h, ok := sh.find(key, hash)
	if !ok || sh.w.When(h) <= now {
		return KeyUsage{}, false
	}
	u := KeyUsage{Node: sh.w.NodeBytes()}
	if sh.count > 0 {
		tb := int64(len(sh.table)) * 4
		u.Slot = (tb + int64(sh.count) - 1) / int64(sh.count)
	}
	e := sh.w.At(h)
	if n := int64(e.keyLen()); n > inlineKey {
		u.Arena = n
	}
	if e.wide() {
		u.Side = 8
	}
	return u, true
}
