package limits

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

const (
	// DefaultMaxRecords is the internal store's record bound when
	// Config.MaxRecords is 0.
	DefaultMaxRecords = 1 << 20
	// DefaultMaxMemory is the internal store's byte bound when
	// Config.MaxMemory is 0.
	DefaultMaxMemory = 256 << 20
	// MaxMCheck bounds the limits of one MCheck.
	MaxMCheck = 64
	// MaxSlots bounds Acquire's limit.
	MaxSlots = 1024
	// MaxKeyLen is the longest user key the admission operations take:
	// the longest record key (tag + key + 25 bytes) must fit the store.
	MaxKeyLen = shard.MaxKeyLen - 32
)

// Kinds of internal records (the penalty box uses engine.KindBanCount and
// engine.KindBanned).
const (
	kindReservation engine.Kind = 0x50 + iota
	kindSlotHead
	kindSlot
)

// Record tags: the first byte of an internal record's key.
const (
	tagReservation = 'r'
	tagBan         = 'b'
	tagSlotHead    = 'h'
	tagSlot        = 's'
)

// admission is the state of the admission operations: the internal
// store, the sequence behind reservation ids and slot tokens, and a pool
// of per-call scratch. The store is made on first use.
type admission struct {
	maxRecords int
	maxMemory  int64

	once  sync.Once
	store *shard.Store
	seq   atomic.Int64
	pool  sync.Pool // *scratch
}

// internal returns the internal store, creating it on first use.
func (a *admission) internal() *shard.Store {
	a.once.Do(func() {
		a.store = shard.New(shard.Config{Shards: 64, MaxKeys: a.maxRecords, MaxMemory: a.maxMemory, NoEvict: true})
	})
	return a.store
}

// scratch is what one admission call needs: its own Section when the
// caller gave none, the record key and the per-limit arrays of MCheck.
type scratch struct {
	tx   shard.Txn
	t    *shard.Txn // what the call's user-store calls go through: &tx, or the caller's section
	set  setState
	ikey []byte // internal record key

	op   Op // Reserve's check
	mop  mcheckOp
	prev []engine.State // MCheck: each limit's state before it was consumed
}

func (a *admission) scratch() *scratch {
	if sc, ok := a.pool.Get().(*scratch); ok {
		return sc
	}
	return &scratch{}
}

func (a *admission) done(sc *scratch) {
	sc.tx.Unlock()
	sc.t = nil
	a.pool.Put(sc)
}

// lockKey locks key's shard of the user store in sc.tx and points sc.t at
// it. Given a section (EXEC's, which already holds the shards of every key
// the queued commands declare), sc.t is that section instead and nothing
// more is locked: the call then runs isolated with the rest of the
// transaction. sc.tx.Unlock is a no-op in that case, so callers unlock
// sc.tx either way.
func (c *Local) lockKey(sc *scratch, key []byte, sec *Section) {
	if sec != nil {
		sc.t = sec
		return
	}
	sc.tx.Begin(c.store)
	_ = sc.tx.Add(key) // cannot fail: begun and unlocked
	_ = sc.tx.Lock()
	sc.t = &sc.tx
}

// lockKeys is lockKey for several keys (MCheck).
func (c *Local) lockKeys(sc *scratch, keys [][]byte, sec *Section) {
	if sec != nil {
		sc.t = sec
		return
	}
	sc.tx.Begin(c.store)
	for _, k := range keys {
		_ = sc.tx.Add(k)
	}
	_ = sc.tx.Lock()
	sc.t = &sc.tx
}

// setState is a shard.Transform that writes a state computed beforehand.
type setState struct {
	next engine.State
	ttl  int64
}

// Apply returns the state and ttl set beforehand, whatever cur is.
func (t *setState) Apply(_ engine.State, _ int64) (engine.State, int64) { return t.next, t.ttl }

// recordKey writes tag, key and room for n suffix bytes into sc.ikey and
// returns the suffix.
func (sc *scratch) recordKey(tag byte, key []byte, n int) []byte {
	sc.ikey = append(append(append(sc.ikey[:0], tag), key...), make([]byte, n)...)
	return sc.ikey[len(sc.ikey)-n:]
}

// checkKey refuses a user key too long for a record key.
func checkKey(key []byte) error {
	if len(key) > MaxKeyLen {
		return ErrKeyTooLong
	}
	return nil
}

// msCeil converts a duration in ns to ms, rounded up; negatives give 0.
func msCeil(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	return ns/1e6 + min(ns%1e6, 1)
}

// addSat returns a+b for b >= 0, saturating at MaxInt64.
func addSat(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return 1<<63 - 1
}

// parseDotted parses len(out) non-negative decimal integers separated by
// '.', the shape of reservation ids and slot tokens. It does not allocate.
func parseDotted(b []byte, out []int64) bool {
	for i := range out {
		j := bytes.IndexByte(b, '.')
		if i == len(out)-1 {
			j = len(b)
		} else if j < 0 {
			return false
		}
		n, ok := parseUint(b[:j])
		if !ok {
			return false
		}
		out[i] = n
		if j < len(b) {
			j++
		}
		b = b[j:]
	}
	return true
}

// parseUint parses a non-empty run of decimal digits that fits an int64.
func parseUint(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (1<<63-1-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}
