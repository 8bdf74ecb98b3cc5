package shard

import (
	"context"
	"encoding/binary"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"sync"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/wheel"
)

const (
	// DefaultMaxKeys is the key bound used when Config.MaxKeys is 0, or
	// Shards x MaxKeysPerShard when that is less (a store of 8 shards or
	// fewer).
	DefaultMaxKeys = 10_000_000

	// MaxKeyLen is the longest key the store keeps (the key length is a
	// 16-bit field of its entry). Apply runs a transform on a longer key
	// against the zero state and keeps nothing; Get, Lookup and Delete
	// report it absent; Load refuses it. Nothing is stored for it, so a
	// long key cannot disturb other keys. Callers should reject such keys
	// first.
	MaxKeyLen = 1<<16 - 1

	// MaxShards bounds Config.Shards.
	MaxShards = 1 << 16

	// ShardsPerProc is the number of shards per GOMAXPROCS used when
	// Config.Shards is 0 (see DefaultShards).
	ShardsPerProc = 16

	// MinShardBytes is the smallest share of Config.MaxMemory a shard is
	// given: New lowers the number of shards until each shard's share
	// is at least this, so that a small memory bound still leaves every
	// shard room for a chunk of entries and a table.
	MinShardBytes = 256 << 10

	// MaxKeysPerShard is the most keys one shard can index, about a
	// million (the wheel's links are 20-bit, and a table slot holds a
	// 20-bit handle). New raises the number of shards so that MaxKeys fits.
	MaxKeysPerShard = min(idxMask-1, wheel.MaxHandles)

	idxBits     = 20 // a table slot is tag<<20 | handle+1
	idxMask     = 1<<idxBits - 1
	maxPerShard = MaxKeysPerShard
	minTable    = 8 // table lengths are 4, 5, 6 or 7 times a power of two, from 8
)

// DefaultShards returns the number of shards New uses when Config.Shards
// is 0: ShardsPerProc x GOMAXPROCS, before rounding to a power of two and
// the bounds New applies.
func DefaultShards() int { return ShardsPerProc * runtime.GOMAXPROCS(0) }

// entry flags, in the high bits of entry.meta. Whether a handle holds a
// key is the wheel's Allocated.
const (
	fRef    = 1 << 5 // CLOCK reference bit: touched since the hand last passed
	fDirty  = 1 << 6 // changed since the last Flush
	fListed = 1 << 7 // handle is on the shard's dirty list (survives Free)

	lenMask   = 1<<5 - 1 // meta bits of an inline key's length
	arenaMark = lenMask  // meta length of a key kept in the arena
)

// inlineKey is the longest key kept inside its entry.
const inlineKey = 16

// arenaPrefix is where an arena key's first bytes start in entry.key, after
// its 48-bit arena reference and 16-bit length.
const arenaPrefix = refBytes + 2

// entry is one key's record, kept by the shard's wheel right after the
// key's deadline and 20-bit timer links: 26 bytes of bytes and byte arrays
// (alignment 1), so the wheel's node is 39 bytes with no padding. meta holds
// the length of an inline key in its low 5 bits (arenaMark for a key in the
// arena) and the flags in its high 3. A key of up to inlineKey bytes lives
// in key itself, so finding it costs no access beyond the node; a longer
// key lives in the shard arena, with its 48-bit arena reference in key[0:6],
// its length in key[6:8] and its first 8 bytes in key[8:16], so most
// mismatches are settled without touching the arena. kind is the state's
// engine.Kind with the state's encoding in its two reserved bits, and w the
// one state word the node keeps, at offset 31 (an unaligned load, like the
// deadline's): the other is the deadline itself or a word of the side
// array (see state.go).
type entry struct {
	meta uint8
	kind uint8
	key  [inlineKey]byte
	w    [8]byte
}

func (e *entry) keyLen() int {
	if n := e.meta & lenMask; n != arenaMark {
		return int(n)
	}
	return int(binary.LittleEndian.Uint16(e.key[refBytes:arenaPrefix]))
}

func (e *entry) arenaRef() uint64 {
	return uint64(binary.LittleEndian.Uint32(e.key[:4])) | uint64(binary.LittleEndian.Uint16(e.key[4:refBytes]))<<32
}

func (e *entry) setArenaRef(ref uint64) {
	binary.LittleEndian.PutUint32(e.key[:4], uint32(ref))
	binary.LittleEndian.PutUint16(e.key[4:refBytes], uint16(ref>>32))
}

// reference sets the CLOCK bit. It writes only when the bit is clear, once
// per pass of the hand, so repeated reads leave the entry's line clean.
func (e *entry) reference() {
	if e.meta&fRef == 0 {
		e.meta |= fRef
	}
}

// Config sets up a Store. Zero fields take defaults.
type Config struct {
	// Shards is the number of independently locked shards, rounded up to a
	// power of two and capped at MaxShards; 0 means DefaultShards(). It is
	// lowered so that every shard may hold at least one key and, with
	// MaxMemory, at least MinShardBytes; it is raised so that no shard
	// must index more than MaxKeysPerShard keys of an explicit MaxKeys.
	Shards int
	// MaxKeys bounds the keys held; 0 means DefaultMaxKeys, or as many as
	// the shards can index (Shards x MaxKeysPerShard) when that is less. Each shard
	// holds at most its share, MaxKeys/Shards (the remainder spread over the
	// first shards), so Len never exceeds MaxKeys.
	MaxKeys int
	// MaxMemory bounds the bytes the store holds for keys, like Redis's
	// maxmemory; 0 means no bound. It counts what the shards really hold:
	// entry chunks, index tables (those mapped outside the Go heap too)
	// and key arenas, as reported by Stats.Bytes. Each shard holds at most
	// its share, MaxMemory/Shards, and evicts with the same CLOCK hand as
	// MaxKeys before a new key would make it grow past the share. A shard
	// always keeps room for one key, so a bound below Shards x the size of
	// one entry chunk and one table is exceeded by that much. A side chunk
	// (8 KiB for 1024 handles, see the package doc) is counted ahead with
	// each new entry chunk once the shard holds one; until then, and for
	// entry chunks allocated before, the first two-word state written into
	// one of their handles adds its side chunk past the check, so a shard
	// may exceed its share by 8 KiB per 1024 such handles. The change
	// log kept for Flush between two flushes is not counted.
	MaxMemory int64
	// NoEvict makes a full shard refuse new keys instead of evicting, like
	// Redis's noeviction policy: Apply then leaves the key absent, and
	// TryApply reports the refusal. Keys already held are never dropped
	// before their expiry. For records whose loss would break a promise
	// (a held concurrency slot, a running ban), where refusing a new one
	// is the safe answer.
	NoEvict bool
	// OnGrow, when set, is called after a shard moved its index table to
	// the next length, with the time that took (every key of the shard is
	// re-inserted, under the shard's lock): the server's latency monitor
	// samples it. It runs under the shard lock and must not block.
	OnGrow func(d time.Duration)
}

// Stats is a snapshot of a Store's counters.
type Stats struct {
	Keys    int64 // keys held now, including expired keys not yet reclaimed
	Expired int64 // keys reclaimed after their TTL, cumulative
	Evicted int64 // live keys evicted by CLOCK to stay within MaxKeys or MaxMemory, cumulative
	Bytes   int64 // bytes held: entry chunks, index tables (on and off the heap) and key arenas
}

type shard struct {
	mu    sync.Mutex
	_     [56]byte // the lock word changes hands on every call: keep the read-mostly fields below off its cache line
	w     wheel.Wheel[entry]
	table []uint32
	// mapped is this shard's element of the Store's list of off-heap
	// memory: the table when allocTable placed it outside the Go heap, and
	// the node chunks mapChunk supplied. The list, not the shards, is what
	// the cleanup New attaches to the shards keeps, so the shards are
	// freed in the collection that finds them unreachable.
	mapped *offHeap
	pool   *chunkPool // the Store's, shared by its shards: node chunks past the first
	keys   arena
	seed   maphash.Seed
	count  int
	max    int
	// maxBytes is this shard's share of Config.MaxMemory, 0 for none.
	maxBytes int64
	noEvict  bool                // Config.NoEvict
	hand     uint32              // CLOCK hand over handles
	onGrow   func(time.Duration) // Config.OnGrow

	expired, evicted int64

	tracking bool     // Flush has run once: record changes
	dirty    []uint32 // handles changed since the last Flush
	tombs    []byte   // keys deleted since the last Flush: len (2 bytes LE) + bytes

	onFire func(h uint32)
	_      [64]byte // keep neighbouring shards' locks off this cache line
}

// Store is a sharded in-memory map from key bytes to engine.State with
// per-key expiry and a key bound. It is safe for concurrent use; see the
// package doc for its design and costs.
type Store struct {
	seed   maphash.Seed
	shift  uint // shard index = hash >> shift
	shards []shard
	pool   *chunkPool // node chunks outside the heap, for every shard

	flushMu sync.Mutex // serialises Flush; guards the buffers below
	fbuf    []byte
	frecs   []flushRec
}

// New returns an empty Store configured by cfg.
func New(cfg Config) *Store {
	maxKeys := cfg.MaxKeys
	if maxKeys <= 0 {
		maxKeys = DefaultMaxKeys
	}
	n := cfg.Shards
	if n <= 0 {
		n = DefaultShards()
	}
	n = min(n, MaxShards)
	n = 1 << bits.Len(uint(n-1))
	for n > 1 && n > maxKeys {
		n >>= 1
	}
	for cfg.MaxMemory > 0 && n > 1 && cfg.MaxMemory/int64(n) < MinShardBytes {
		n >>= 1
	}
	if cfg.MaxKeys <= 0 {
		// No bound asked for: keep the shards and bound the keys by what
		// they can index, rather than multiply the shards asked for.
		maxKeys = min(maxKeys, n*maxPerShard)
	}
	for n < MaxShards && (maxKeys+n-1)/n > maxPerShard {
		n <<= 1
	}
	s := &Store{
		seed:   maphash.MakeSeed(),
		shift:  uint(64 - bits.TrailingZeros(uint(n))),
		shards: make([]shard, n),
	}
	mapped := make([]offHeap, n)
	s.pool = &chunkPool{}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.seed = s.seed
		sh.max = maxKeys / n
		if i < maxKeys%n {
			sh.max++
		}
		sh.max = min(sh.max, maxPerShard)
		if cfg.MaxMemory > 0 {
			sh.maxBytes = max(cfg.MaxMemory/int64(n), 1)
		}
		sh.noEvict = cfg.NoEvict
		sh.onGrow = cfg.OnGrow
		sh.w.Init(0)
		sh.onFire = sh.fire
		sh.mapped = &mapped[i]
		sh.pool = s.pool
		sh.w.SetChunkMemory(sh.mapChunk)
	}
	// The cleanup belongs to the shards, not to s: every use of off-heap
	// memory goes through a *shard, which keeps the shards reachable until
	// its lock is released, while a method of s may drop s itself as soon
	// as it has picked the shard (and the collector may then run the
	// cleanup under the shard's feet).
	runtime.AddCleanup(&s.shards[0], releaseOffHeap, storeOffHeap{mapped, s.pool})
	return s
}

func (s *Store) shardOf(hash uint64) *shard {
	return &s.shards[hash>>s.shift]
}

// Apply runs t on the state of key, atomically with respect to every other
// call on the same key. t sees the zero state when the key is absent or
// expired. If t returns its input unchanged nothing happens (an absent key
// is not created); a ttl <= 0 or a zero next state removes the key;
// otherwise the key holds next until now+ttl. Creating a key in a full
// shard first evicts one (see the package doc). Apply copies the key bytes
// it keeps and allocates nothing once the key exists.
func (s *Store) Apply(key []byte, now int64, t Transform) {
	s.TryApply(key, now, t)
}

// TryApply is Apply that reports whether the state t returned was stored:
// it is false only when t would create key in a full shard of a NoEvict
// store, and the key then stays absent. It costs what Apply costs.
func (s *Store) TryApply(key []byte, now int64, t Transform) bool {
	if len(key) > MaxKeyLen {
		t.Apply(engine.State{}, now)
		return true
	}
	hash := maphash.Bytes(s.seed, key)
	sh := s.shardOf(hash)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.apply(key, hash, now, t)
}

// apply is the body of Apply, run under the shard lock; Txn calls it for
// the keys of its locked shards. It returns false only when a NoEvict
// shard had no room for a new key.
func (sh *shard) apply(key []byte, hash uint64, now int64, t Transform) bool {
	if sh.w.Due(now) {
		sh.advance(now)
	}
	pos, h, ok := sh.find(key, hash)
	var cur engine.State
	if ok {
		if exp := sh.w.When(h); exp > now {
			e := sh.w.At(h)
			cur = sh.state(h, e, exp)
			e.reference()
		}
	}
	next, ttl := t.Apply(cur, now)
	if next == cur {
		return true
	}
	if ttl <= 0 || next == (engine.State{}) {
		if ok {
			sh.tomb(key)
			sh.removeAt(pos, h)
		}
		return true
	}
	exp := now + ttl
	if exp < now {
		exp = math.MaxInt64
	}
	if !ok {
		if h, ok = sh.insert(key, hash, now); !ok {
			return false
		}
	}
	e := sh.w.At(h)
	sh.setState(h, e, next, exp)
	sh.w.Schedule(h, exp)
	if sh.tracking {
		sh.markDirty(h, e)
	}
	return true
}

// Get returns the state of key if it is held and not expired at now. It
// never creates a key; it sets the key's CLOCK reference bit and reclaims
// the key if it finds it expired.
func (s *Store) Get(key []byte, now int64) (engine.State, bool) {
	if len(key) > MaxKeyLen {
		return engine.State{}, false
	}
	hash := maphash.Bytes(s.seed, key)
	sh := s.shardOf(hash)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.get(key, hash, now)
}

// get is Get under the shard lock.
func (sh *shard) get(key []byte, hash uint64, now int64) (engine.State, bool) {
	pos, h, ok := sh.find(key, hash)
	if !ok {
		return engine.State{}, false
	}
	exp := sh.w.When(h)
	if exp <= now {
		sh.expired++
		sh.removeAt(pos, h)
		return engine.State{}, false
	}
	e := sh.w.At(h)
	e.reference()
	return sh.state(h, e, exp), true
}

// Delete removes key and reports whether it held state that was live at
// now.
func (s *Store) Delete(key []byte, now int64) bool {
	if len(key) > MaxKeyLen {
		return false
	}
	hash := maphash.Bytes(s.seed, key)
	sh := s.shardOf(hash)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.delete(key, hash, now)
}

// delete is Delete under the shard lock.
func (sh *shard) delete(key []byte, hash uint64, now int64) bool {
	pos, h, ok := sh.find(key, hash)
	if !ok {
		return false
	}
	live := sh.w.When(h) > now
	sh.tomb(key)
	sh.removeAt(pos, h)
	return live
}

// Len returns the number of keys held, including expired keys not yet
// reclaimed. It locks each shard in turn.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.count
		sh.mu.Unlock()
	}
	return n
}

// OffHeapBytes returns the bytes of index tables and node chunks held
// outside the Go heap (large tables and every node chunk after a shard's
// first are separate mappings, see allocTable and mapChunk); heap
// statistics do not include them.
func (s *Store) OffHeapBytes() int64 {
	n := s.pool.bytes()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.mapped.bytes()
		sh.mu.Unlock()
	}
	return n
}

// Sweep reclaims the keys whose expiry tick ended at or before now and
// returns how many. Its cost is proportional to the keys due (plus a few
// timer cascades), not to the keys held; each shard is locked in turn.
// Then, outside the shard locks, it asks for huge pages behind the node
// regions filled since the last Sweep (a copy of 2 MiB each, see
// chunkPool).
func (s *Store) Sweep(now int64) int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		if sh.w.Due(now) {
			n += sh.advance(now)
		}
		sh.mu.Unlock()
	}
	s.pool.collapse()
	return n
}

// RunSweeper calls Sweep(clock()) every interval until ctx is done, then
// returns. Run it in its own goroutine; like any goroutine it does not keep
// the process alive, and cancelling ctx stops its ticker. Keys are also
// reclaimed lazily by Apply on their shard, so the sweeper only bounds how
// long idle shards keep expired keys.
func (s *Store) RunSweeper(ctx context.Context, interval time.Duration, clock func() int64) {
	if interval <= 0 {
		interval = time.Second
	}
	tk := time.NewTicker(interval)
	defer tk.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tk.C:
			s.Sweep(clock())
		}
	}
}

// Stats returns a snapshot of the store's counters.
func (s *Store) Stats() Stats {
	var st Stats
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Keys += int64(sh.count)
		st.Expired += sh.expired
		st.Evicted += sh.evicted
		st.Bytes += sh.bytes()
		sh.mu.Unlock()
	}
	return st
}

// advance drives the shard's wheel to now, reclaiming due keys.
func (sh *shard) advance(now int64) int {
	return sh.w.Advance(now, sh.onFire)
}

// fire is the wheel callback for a due key.
func (sh *shard) fire(h uint32) {
	sh.expired++
	sh.removeHandle(h)
}

func tagOf(hash uint64) uint32 { return uint32(hash>>32) << idxBits }

// homeOf returns the first slot a key with this hash may occupy in a table
// of n slots: the high half of n times the hash's low 32 bits. A multiply
// instead of a mask lets n be any size, so the table grows in steps of an
// eighth to a quarter rather than doubling (see nextTableLen).
func homeOf(hash uint64, n int) int { return int(uint64(uint32(hash)) * uint64(n) >> 32) }

// nextSlot returns the slot after i in a table of n slots, wrapping to 0:
// the linear probing step.
func nextSlot(i, n int) int {
	if i++; i == n {
		return 0
	}
	return i
}

// nextTableLen returns the table length after n: lengths run through 4, 5,
// 6 and 7 times a power of two (8, 10, 12, 14, 16, 20, ...), so a table
// just past a resize is at least 60% full at the 3/4 load bound and the
// table costs 5.3 to 6.7 bytes per key, where doubling costs 5.3 to 8.
func nextTableLen(n int) int {
	if n < minTable {
		return minTable
	}
	return n + 1<<(bits.Len(uint(n))-3)
}

// find looks key up. On a hit it returns the key's table position and
// handle; on a miss ok is false.
func (sh *shard) find(key []byte, hash uint64) (pos int, h uint32, ok bool) {
	if sh.count == 0 {
		return 0, 0, false
	}
	t := sh.table
	tag := tagOf(hash)
	for i := homeOf(hash, len(t)); ; i = nextSlot(i, len(t)) {
		v := t[i]
		if v == 0 {
			return i, 0, false
		}
		if v&^idxMask == tag {
			h := v&idxMask - 1
			if e := sh.w.At(h); e.keyLen() == len(key) && sh.keyEqual(e, key) {
				return i, h, true
			}
		}
	}
}

// insert adds key (known absent), evicting first if the shard is full, and
// returns its handle with a zero state, unscheduled. A full NoEvict shard
// adds nothing and returns false.
func (sh *shard) insert(key []byte, hash uint64, now int64) (uint32, bool) {
	if sh.count >= sh.max {
		if sh.noEvict {
			return 0, false
		}
		sh.evictOne(now)
	}
	if sh.maxBytes > 0 && !sh.makeRoom(len(key), now) {
		return 0, false
	}
	if (sh.count+1)*4 > len(sh.table)*3 {
		if sh.onGrow != nil {
			start := time.Now()
			sh.grow()
			sh.onGrow(time.Since(start))
		} else {
			sh.grow()
		}
	}
	i := sh.freeSlot(sh.table, hash)
	h := sh.w.Alloc()
	e := sh.w.At(h)
	if len(key) <= inlineKey {
		*e = entry{meta: uint8(len(key)) | e.meta&fListed}
		copy(e.key[:], key)
	} else {
		*e = entry{meta: arenaMark | e.meta&fListed}
		e.setArenaRef(sh.keys.put(key))
		binary.LittleEndian.PutUint16(e.key[refBytes:arenaPrefix], uint16(len(key)))
		copy(e.key[arenaPrefix:], key)
	}
	sh.table[i] = tagOf(hash) | (h + 1)
	sh.count++
	return h, true
}

// keyEqual reports whether e holds key; len(key) == e.keyLen().
func (sh *shard) keyEqual(e *entry, key []byte) bool {
	if len(key) <= inlineKey {
		return string(e.key[:len(key)]) == string(key)
	}
	return string(e.key[arenaPrefix:]) == string(key[:inlineKey-arenaPrefix]) &&
		string(sh.keys.get(e.arenaRef(), uint16(len(key)))) == string(key)
}

// keyOf returns the key held by h, valid until the key is removed or the
// arena is compacted.
func (sh *shard) keyOf(h uint32) []byte {
	e := sh.w.At(h)
	if n := e.meta & lenMask; n != arenaMark {
		return e.key[:n:n]
	}
	return sh.keys.get(e.arenaRef(), uint16(e.keyLen()))
}

// freeSlot returns the first empty slot of t at or after hash's home.
func (sh *shard) freeSlot(t []uint32, hash uint64) int {
	i := homeOf(hash, len(t))
	for t[i] != 0 {
		i = nextSlot(i, len(t))
	}
	return i
}

// grow moves the table to the next length (see nextTableLen) and re-inserts
// every live handle.
func (sh *shard) grow() {
	nt, off := allocTable(nextTableLen(len(sh.table)))
	for h := uint32(0); h < sh.w.Cap(); h++ {
		if !sh.w.Allocated(h) {
			continue
		}
		hash := maphash.Bytes(sh.seed, sh.keyOf(h))
		nt[sh.freeSlot(nt, hash)] = tagOf(hash) | (h + 1)
	}
	if sh.mapped.table != nil {
		freeTable(sh.mapped.table)
		sh.mapped.table = nil
	}
	sh.table = nt
	if off {
		sh.mapped.table = nt
	}
}

// removeHandle removes the key held by h.
func (sh *shard) removeHandle(h uint32) {
	t := sh.table
	i := homeOf(maphash.Bytes(sh.seed, sh.keyOf(h)), len(t))
	for t[i]&idxMask != h+1 {
		i = nextSlot(i, len(t))
	}
	sh.removeAt(i, h)
}

// removeAt removes the key at table position pos with handle h, closing the
// gap by backward shifting (no tombstones in the table), and compacts the
// arena when its dead bytes call for it. It touches no wheel links but h's,
// so the wheel's fire callback may use it.
func (sh *shard) removeAt(pos int, h uint32) {
	e := sh.w.At(h)
	if e.meta&lenMask == arenaMark {
		sh.keys.release(e.keyLen())
	}
	e.meta &= fListed
	sh.w.Free(h)
	sh.count--

	t := sh.table
	i := pos
	t[i] = 0
	for j := nextSlot(i, len(t)); t[j] != 0; j = nextSlot(j, len(t)) {
		v := t[j]
		home := homeOf(maphash.Bytes(sh.seed, sh.keyOf(v&idxMask-1)), len(t))
		// v may fill the hole at i unless its home lies cyclically in (i, j].
		if (i <= j && (home <= i || home > j)) || (i > j && home <= i && home > j) {
			t[i] = v
			t[j] = 0
			i = j
		}
	}
	sh.maybeCompact()
}

// maybeCompact rewrites the arena once dead bytes outweigh live ones.
func (sh *shard) maybeCompact() {
	if sh.keys.needsCompaction() {
		sh.compact()
	}
}

// compact rewrites the arena with only the live keys: O(handles + live
// key bytes).
func (sh *shard) compact() {
	var na arena
	for h := uint32(0); h < sh.w.Cap(); h++ {
		e := sh.w.At(h)
		if !sh.w.Allocated(h) || e.meta&lenMask != arenaMark {
			continue
		}
		e.setArenaRef(na.put(sh.keys.get(e.arenaRef(), uint16(e.keyLen()))))
	}
	sh.keys = na
}

// evictOne frees one handle in a full shard: the CLOCK hand skips (and
// clears) referenced keys and takes the first unreferenced or expired one.
// The hand passes each key at most twice, O(1) amortised.
func (sh *shard) evictOne(now int64) {
	for {
		if sh.hand >= sh.w.Cap() {
			sh.hand = 0
		}
		h := sh.hand
		sh.hand++
		if !sh.w.Allocated(h) {
			continue
		}
		e := sh.w.At(h)
		if sh.w.When(h) <= now {
			sh.expired++
		} else if e.meta&fRef != 0 {
			e.meta &^= fRef
			continue
		} else {
			sh.evicted++
		}
		sh.removeHandle(h)
		return
	}
}
