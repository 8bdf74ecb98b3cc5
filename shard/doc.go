// Package shard is the embedded store behind every command: a map from key
// bytes to one engine.State, updated by Transforms that run atomically per
// key, with exact per-key expiry, bounds on keys and bytes, a keyspace API
// (Scan, Lookup, FlushAll), multi-key transactions (Txn) and hooks for a
// durable backend. Its job is to stay fast and small with tens of millions
// of keys and under a flood of new ones.
//
//	s := shard.New(shard.Config{MaxKeys: 1_000_000, MaxMemory: 256 << 20})
//	go s.RunSweeper(ctx, time.Second, clock)
//	s.Apply(key, now, &check) // check implements Transform and keeps its own outputs
//
// # Layout
//
// A Store is a power-of-two number of shards (ShardsPerProc x GOMAXPROCS by
// default); a key's shard is chosen by the top bits of its maphash (seeded
// per Store). Each shard has its own sync.Mutex and three pointer-free
// structures, so the garbage collector never traces individual keys:
//
//   - an open-addressing table of uint32 slots, linear probing, at most 3/4
//     full: a slot holds a 12-bit hash tag and a 20-bit handle, so a probe
//     rarely looks at an entry that is not the key; deletion shifts later
//     slots back (no tombstones). A key's home slot is the high half of the
//     table length times the low 32 bits of its hash, so the table may have
//     any length: it grows by a quarter to an eighth (lengths 4, 5, 6 or 7
//     times a power of two) and is never less than 60% full after a resize.
//     Tables of 4 KiB and more are anonymous mappings outside the Go heap,
//     unmapped as soon as they are replaced, so the garbage left by growing
//     in small steps never stays in the process;
//   - a wheel.Wheel[entry], which is both the shard's timing wheel and the
//     slab of its entries: one 39-byte node per key, allocated 1024 at a
//     time, holding the expiry (8 bytes), two 20-bit timer links (5
//     bytes), the key length and flags (1 byte), the state's kind and
//     encoding (1 byte), 16 bytes of key and one word of state (8 bytes),
//     with no alignment padding. Keys up to 16 bytes are stored right
//     there, so a lookup costs two cache misses (table slot, node) instead
//     of three. A shard's first chunk is on the Go heap, so the heap the
//     collector paces itself by does not grow with the keys; the later ones
//     are carved from 2 MiB regions outside it that all the Store's shards
//     share, and Sweep has each region backed by one transparent huge page
//     once it is full (see chunkPool): with millions of keys the node of a
//     random key then rarely misses the TLB as well as the cache;
//   - a side array for the states that need two words besides their
//     expiry (below): one 8-byte word per handle, in chunks of 1024
//     handles (8 KiB, an anonymous mapping), a chunk mapped only when the
//     first such state is written into one of its handles and kept, like
//     node chunks, until FlushAll;
//   - an arena of 64 KiB byte chunks for keys longer than 16 bytes (their
//     node keeps a 48-bit arena reference, the key's length and its first
//     8 bytes). Deleted keys leave dead bytes, and the arena is rewritten
//     once dead bytes exceed live bytes and one chunk: O(1) amortised per
//     deletion, at most about twice the live key bytes.
//
// A state is two words and a kind (engine.State), but a node keeps one
// word, because the other is most often the key's expiry or zero: GCRA's
// state is its theoretical arrival time, which is also its expiry, with B
// zero; a fixed window's end is its expiry; a ban count's window end is
// its expiry. Each write picks an encoding from the State and the expiry
// being stored, not from the kind, so every State reads back exactly:
// B == 0 keeps A; else A == expiry keeps B (A is read back from the
// deadline); else B == expiry keeps A; else the state is wide and keeps A
// in the node and B in the side array. The encoding takes the two bits of
// the kind byte that KindBits leaves out (0xA0), which no kind uses
// (TestKindBits). Apply, Get, Lookup, Flush and Load (and Txn and Batch
// through them) go through one encoding and one decoding, which take the
// deadline already loaded; Scan and Usage read the kind byte with the
// encoding masked off. So a GCRA or fixed-window key costs no access
// beyond its node and its store no side chunk at all (TestSideChunks,
// TestStateThroughStore); a token-bucket or sliding-window key costs the
// 8 bytes it did before, in the side array, plus one more memory access
// per check when its side word is not in cache (Batch prefetches slots and
// nodes, not side words).
//
// A shard indexes at most MaxKeysPerShard keys (about a million: the
// links and the slot's handle are 20-bit); New raises the shard count for
// a larger MaxKeys.
//
// # Memory per key
//
// The budget of a key of up to 16 bytes, at 1M such keys in 32 shards
// (BenchmarkMemory measures the sum and the process's resident bytes for
// GCRA and token-bucket keys; TestNodeSize pins the node, TestSideChunks
// the side array):
//
//	node        39 B   the wheel node above
//	chunk tail  0.6 B  node chunks of 1024, the last one part empty (1.6% at 31k keys a shard)
//	region tail 0.3 B  in the process: the 20 KiB of each full 2 MiB region that no chunk fits, resident once it is a huge page
//	slot        6.3 B  a 4-byte table slot at 64% load (5.3 to 6.7 B between resizes)
//	side word   0 B    GCRA, fixed window, bans; 8.1 B for token bucket and sliding window (8 B and the chunk tail)
//	arena       0 B    (a longer key: its bytes, plus up to as many dead bytes)
//	heap slack  0.5-1 B  in the process: free heap pages and garbage (untouched pages are not resident)
//
// Node, chunk tail, slot, side word and arena are what Stats.Bytes
// counts: 46 bytes a GCRA key, 54 a token-bucket key, and the process
// holds about 1 byte more, the region tails and the heap slack
// (BenchmarkMemory's rss-B/key, which sweeps once after loading as a
// server's sweeper does; a server loaded with 1M keys, see
// bench/README.md). With
// the node chunks on the Go heap the collector let garbage grow to GOGC
// percent of them before a collection, and the process kept 2.5 to 11 bytes
// a key more, depending on how the load arrived. The plain map + sync.Mutex baseline of the benchmarks
// costs more than twice as much and makes the collector trace every key
// (BenchmarkMemory reports both, with the collector's pause and cycle
// times).
//
// Going lower means narrowing what a node must hold exactly: one timer
// link instead of two (a singly linked wheel, whose nodes could leave a
// slot only when it comes due: 2 bytes, but a deleted key's node would be
// freed late and a deadline moved earlier would fire late), an expiry of 32
// bits (4 bytes, but rounded, so reads between the true and the rounded
// expiry would need the exact value from elsewhere), or a denser table.
// Sharing the state word with the expiry, above, narrowed the node by 8
// bytes without giving up either.
//
// # Batches
//
// With millions of keys an Apply waits on two dependent cache misses and
// does little else. Batch takes the keys of a read batch (the commands of
// one pipeline) and resolves them together: it hashes every key and loads
// each home slot, then loads the nodes those slots name, then runs the
// transforms under the batch's shard locks. The loads of one pass are
// independent, so the CPU overlaps the misses of different keys, and the
// apply pass finds its lines in cache (BenchmarkBatch compares it with one
// Apply per key in the same run). The side word of a wide state is
// loaded by a third pass, since only the node says whether there is one:
// its miss overlaps the other keys' side words but not their nodes, so a
// batch of token-bucket or sliding-window keys costs more than one of
// GCRA keys (bench/README.md has the figures).
//
// # Expiry
//
// A Transform returns a TTL; the key expires at now+ttl. Expiry is exact
// and lazy: a key whose expiry is at or before the caller's now reads as
// absent at once (Apply sees the zero state; Get, Lookup, Delete and Scan
// report it absent). Reclaiming memory is the wheel's job: each Apply first
// advances its shard's wheel to now (a single comparison when no tick has
// passed), and Sweep, or RunSweeper in the background, advances every
// shard. The wheel visits only due keys plus at most five cascades per key
// and a re-placement per slot a key waited in, so a sweep costs O(due
// keys). Moving a key's expiry later (every admitted check does) writes its
// node and nothing else: the node stays in its earlier slot and the wheel
// re-places it when that slot comes due. An earlier expiry relinks the node
// when it changes slot (see package wheel).
//
// # Eviction and bounds
//
// Each shard holds at most its share of MaxKeys and, when MaxMemory is set,
// of MaxMemory. Creating a key in a full shard runs a CLOCK hand over the
// shard's handles: an expired key is reclaimed at once, a key with its
// reference bit set gets the bit cleared and a second chance, the first
// unreferenced key is evicted. Apply and Get of an existing key set the bit
// (a store to a line already being written; nothing is reordered); a new
// key starts without it, so a flood of keys seen once evicts itself while a
// key used again between two passes of the hand survives.
//
// The byte bound counts what a shard really holds (Stats.Bytes): node
// chunks, its table and its arena. Node chunks and tables are kept at their
// high-water mark and reused, so the check runs only when a new key would
// make one of them grow, and an evicted key's node and slot are what the
// new key takes. The arena is append-only: when it is what must grow, a
// bounded shard rewrites it as soon as a quarter of its live bytes have
// been freed by evictions, instead of waiting for half. Both bounds cost
// nothing on the path of an existing key; an insert into a full shard pays
// for one eviction (a hash and a probe to find the victim's slot, and the
// backward shift that closes it).
//
// A key may be at most MaxKeyLen bytes. A longer key is never stored: Apply
// runs its transform on the zero state and keeps nothing, so it cannot
// disturb other keys; callers should reject it first.
//
// # Keyspace
//
// Scan walks the keys with a stateless cursor (a shard index and a 32-bit
// hash boundary) and Redis's SCAN guarantee: a key held for the whole scan
// is returned at least once however the tables grow and whatever is
// inserted, deleted, expired or evicted meanwhile. It works because a
// key's home slot is monotonic in the low 32 bits of its hash whatever the
// table length, and a page always ends at an empty slot, which no probe
// sequence crosses (see Scan). Lookup reads a state with its absolute
// expiry without touching the CLOCK bit, for TTL, TYPE and EXISTS.
// FlushAll drops everything atomically and, once change tracking is on,
// records a deletion per dropped key for the next Flush.
//
// # Transactions
//
// A Txn locks the shards of a declared set of keys, each once, in
// ascending shard index, runs any number of operations on those keys with
// nothing interleaving, and unlocks: MULTI/EXEC and all-or-nothing checks
// of several limits. Every call that holds more than one shard lock takes
// them in that order, so nothing deadlocks; an operation on an undeclared
// key is ErrNotLocked. AddAll declares the whole store instead: the Txn
// then holds every shard and also runs FlushAll, Scan and Len, for a
// transaction that reads or empties the keyspace (the whole store waits
// for it meanwhile). A Txn is caller-owned and allocation-free once its
// shard list has grown.
//
// # Durability hooks
//
// Flush reports keys changed since the previous Flush (the first reports
// all and switches change tracking on); Load restores saved state at start
// without marking it changed. See their docs for the exact contract.
//
// # Why a mutex per shard
//
// An uncontended Lock+Unlock is a small fraction of an Apply even when
// the keys fit in cache (BenchmarkMutexPair against BenchmarkApply at 1k
// keys), and a lock-free design would save at most one of its two locked
// instructions: the state plus expiry (25 bytes) does not fit a word Go can
// compare-and-swap without allocating a new value per update. With
// millions of keys an Apply is two dependent cache misses (table slot,
// node; BenchmarkDependentLoad measures one), and lock choice is noise next
// to memory layout. Sharding, not lock cleverness, gives parallelism:
// large key sets scale close to linearly with CPUs, while a tiny hot set
// written from every CPU is bound by the cache line round trip between
// cores whatever the lock (BenchmarkApply reports it as rt-ns). A mutex
// also keeps a Transform, whatever it computes, atomic without retries,
// lets reads update the CLOCK bit and reclaim expired keys, and lets a Txn
// hold several shards at once.
//
// # Pauses
//
// Three operations are O(keys in one shard) under that shard's lock:
// growing a shard's table (re-hashing its keys), rewriting its arena, and
// FlushAll (under every shard's lock). The first two are amortised O(1)
// per insert or delete, and only one shard stalls at a time, but a request
// can meet one (BenchmarkInsertPause reports the longest single Apply while
// inserting 10M keys). Resizing incrementally would remove that pause.
package shard
