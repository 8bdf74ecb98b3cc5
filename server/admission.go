package server

// Admission beyond one limit: THROTTLE.MCHECK (all-or-nothing over several
// limits), THROTTLE.RESERVE/SETTLE (charge an estimate now, settle the
// actual cost later), the penalty box (THROTTLE.CHECK ... BAN,
// THROTTLE.BANNED, THROTTLE.UNBAN) and concurrency slots
// (THROTTLE.ACQUIRE/RELEASE/REFRESH).
//
// # Internal records
//
// Reservations, bans and slots are records the user never names: they live
// in a second shard.Store owned by the server (admission.store), created on
// first use, so SCAN, DBSIZE, THROTTLE.RESET
// and FLUSHALL of the user keyspace neither show nor touch them, and no user
// key can collide with one. A record's key is a one-byte tag, the user key
// and a fixed-length binary suffix, so two records of different user keys
// never share a key:
//
//	'r' key seq(8) algo(1) limit(8) period(8)   reservation: A = estimate, B = time charged
//	'b' key                                     penalty box: engine.KindBanCount / KindBanned
//	'h' key                                     slot header: A = slots spanned, B = latest expiry
//	's' key index(2)                            slot: A = holder's generation, B = refresh count
//
// Each record's expiry is its meaning: an unsettled reservation is settled
// at its estimate when its TTL passes (the estimate was charged at RESERVE,
// so expiry just drops the record), a ban ends, a slot whose holder
// vanished is free.
//
// # Bounds
//
// The internal store is bounded by Config.AdmissionMaxRecords records and
// Config.AdmissionMaxMemory bytes (settings admission-maxrecords and
// admission-maxmemory), and it never evicts (shard.Config.NoEvict):
// dropping a record early would free a held slot (in_flight above the
// limit), lift a ban, or lose a reservation's refund, each a broken
// promise, so a full store refuses new records instead. THROTTLE.ACQUIRE
// and THROTTLE.RESERVE then reply "-OOM admission records full" and
// acquire or charge nothing; a denial that would start or raise a ban
// count is still denied, but is not counted toward the ban. Records
// already held live to their expiry, so room comes back as slots are
// released, reservations settled and bans end. One record costs a 56-byte
// node, about 6 bytes of index and, for keys longer than the node's inline
// 20 bytes, the key in the arena; the byte bound counts all of it.
//
// # Locking
//
// Every command that reads and then writes records of a user key holds
// that key's shard lock of the user store (a shard.Txn) for the whole
// section, and takes internal-store locks only inside it, one at a time:
// the order is always user store first, internal store second, so nothing
// deadlocks, and two sections on one key never interleave. That is what
// makes a banned key never consume, SETTLE apply exactly once, and
// in_flight never exceed the limit.
//
// # MCHECK
//
// All keys' shards are locked in one ascending pass (shard.Txn); then each
// limit is checked and consumed in turn, one lookup each. At the first
// denial nothing more is consumed: the remaining limits are only
// evaluated, and the states already consumed are put back (with the ttl
// the engine gives the old state, the same instant it expired at). No
// other call sees the section, so to every observer it consumed from all
// limits or from none. The admitted path, the common one, thus costs one
// lookup per limit instead of a peek and a write. One side effect of a
// denial: a limit whose key did not exist is created and removed again,
// and in a full shard that creation may evict another key.
//
// # Costs
//
// MCHECK of n limits costs 2n hashes, a sort of n shard indexes, at most n
// shard locks, n engine checks and n stores (2n when denied). ACQUIRE
// reads O(span) slot records, span being the limit (or the larger span an
// earlier call with a larger limit left, until its slots expire); limits
// are bounded by maxSlots = 1024, so one key holds at most 1025 records of
// 56 bytes plus its key bytes each (about 60 KB for a 1024-slot key with a
// short name). RESERVE costs one check and one record; SETTLE one lookup,
// one delete and one store. Each call borrows its scratch (Txn, key
// buffer, per-limit arrays) from a pool, so nothing allocates per command
// once keys and records exist; a reservation's record key (26 bytes past
// the user key) is longer than the store keeps inline, so RESERVE and
// SETTLE use the internal store's key arena, whose growth costs tens of
// bytes per pair amortized.
//
// Expired records are reclaimed as the internal store's timing wheel
// advances on writes to their shard, or by eviction at the bound.

import (
	"bytes"
	"sync"
	"sync/atomic"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

const (
	// DefaultAdmissionMaxRecords is the internal store's record bound when
	// Config.AdmissionMaxRecords is 0.
	DefaultAdmissionMaxRecords = 1 << 20
	// DefaultAdmissionMaxMemory is the internal store's byte bound when
	// Config.AdmissionMaxMemory is 0.
	DefaultAdmissionMaxMemory = 256 << 20
	// maxMCheck bounds the limits of one THROTTLE.MCHECK.
	maxMCheck = 64
	// maxSlots bounds THROTTLE.ACQUIRE's limit.
	maxSlots = 1024
	// maxAdmKey is the longest user key the admission commands take: the
	// longest record key (tag + key + 25 bytes) must fit the store.
	maxAdmKey = shard.MaxKeyLen - 32
)

// Kinds of internal records (the penalty box uses engine.KindBanCount and
// engine.KindBanned).
const (
	kindReservation engine.Kind = 0x50 + iota
	kindSlotHead
	kindSlot
)

// admission is the server's state for the admission commands: the internal
// store, the sequence behind reservation ids and slot tokens, and a pool
// of per-call scratch. The zero value is ready: the store is made on first
// use.
type admission struct {
	maxRecords int   // Config.AdmissionMaxRecords, set by New
	maxMemory  int64 // Config.AdmissionMaxMemory, set by New

	once  sync.Once
	store *shard.Store
	seq   atomic.Int64
	pool  sync.Pool // *admScratch
}

// internal returns the internal store, creating it on first use.
func (a *admission) internal() *shard.Store {
	a.once.Do(func() {
		a.store = shard.New(shard.Config{Shards: 64, MaxKeys: a.maxRecords, MaxMemory: a.maxMemory, NoEvict: true})
	})
	return a.store
}

// errAdmissionFull is the reply when the internal store refuses a new record.
func (l *loop) errAdmissionFull() {
	l.errorReply("OOM", "admission records full (admission-maxrecords, admission-maxmemory): nothing was acquired or charged")
}

// admScratch is what one admission command needs beyond the loop's op.
type admScratch struct {
	tx   shard.Txn
	t    *shard.Txn // what the command's user-store calls go through: &tx, or EXEC's (lockKey)
	set  setState
	ikey []byte   // internal record key
	args [][]byte // THROTTLE.CHECK arguments without BAN
	idb  []byte   // reservation id or slot token being written

	mop  mcheckOp
	lims []engine.Limit
	keys [][]byte
	prev []engine.State // MCHECK: each limit's state before it was consumed
	ds   []engine.Decision
}

func (a *admission) scratch() *admScratch {
	if sc, ok := a.pool.Get().(*admScratch); ok {
		return sc
	}
	return &admScratch{}
}

func (a *admission) done(sc *admScratch) {
	sc.tx.Unlock()
	sc.t = nil
	clear(sc.keys) // drop references to argument bytes
	sc.keys = sc.keys[:0]
	a.pool.Put(sc)
}

// lockKey locks key's shard of the user store in sc.tx and points sc.t at
// it. Inside EXEC, whose Txn already holds the shards of every key the
// queued commands declare, sc.t is that Txn instead and nothing more is
// locked: the command then runs isolated with the rest of the transaction.
// sc.tx.Unlock is a no-op in that case, so callers unlock sc.tx either way.
func (l *loop) lockKey(sc *admScratch, key []byte) {
	if l.tx.locked {
		sc.t = &l.tx.txn
		return
	}
	sc.tx.Begin(l.store)
	_ = sc.tx.Add(key) // cannot fail: begun and unlocked
	_ = sc.tx.Lock()
	sc.t = &sc.tx
}

// lockKeys is lockKey for several keys (THROTTLE.MCHECK).
func (l *loop) lockKeys(sc *admScratch, keys [][]byte) {
	if l.tx.locked {
		sc.t = &l.tx.txn
		return
	}
	sc.tx.Begin(l.store)
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
func (sc *admScratch) recordKey(tag byte, key []byte, n int) []byte {
	sc.ikey = append(append(append(sc.ikey[:0], tag), key...), make([]byte, n)...)
	return sc.ikey[len(sc.ikey)-n:]
}

// admKeyArg checks a user key of an admission command.
func (l *loop) admKeyArg(key []byte) bool {
	if len(key) > maxAdmKey || len(key) > l.srv.cfg.MaxKeyLen {
		l.errorReply("ERR", "key is too long")
		return false
	}
	return true
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

// parseDotted parses len(out) non-negative integers separated by '.', the
// shape of reservation ids and slot tokens. It does not allocate.
func parseDotted(b []byte, out []int64) bool {
	for i := range out {
		j := bytes.IndexByte(b, '.')
		if i == len(out)-1 {
			j = len(b)
		} else if j < 0 {
			return false
		}
		n, ok := parseInt64(b[:j])
		if !ok || n < 0 || j == 0 || b[0] == '-' || b[0] == '+' {
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

// decisionWith appends d as THROTTLE.CHECK's reply with a sixth field, a
// bulk string or (nil extra) a null: a 6-element array in RESP2, a map in
// RESP3.
func (l *loop) decisionWith(cl *client, d *engine.Decision, name string, extra []byte) {
	l.decisionFields(cl, d, "allowed", 6)
	if cl.resp3 {
		l.out = appendBulkString(l.out, name)
	}
	if extra == nil {
		l.out = appendNull(l.out, cl.resp3)
	} else {
		l.out = appendBulk(l.out, extra)
	}
}

// durationArg parses a positive duration argument (a bare integer counts
// milliseconds); on bad input it replies "<what> must be a positive duration".
func (l *loop) durationArg(b []byte, what string) (int64, bool) {
	d, ok := parsePeriod(b)
	if !ok || d <= 0 {
		l.errorReply("ERR", what+" must be a positive duration such as 1500, 250ms or 2s")
		return 0, false
	}
	return d, true
}
