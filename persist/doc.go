// Package persist keeps the in-memory store durable in PostgreSQL or
// DynamoDB, so limits survive a restart.
//
// Two pieces: a Backend is a table of (key, state, expiry) rows with one
// writer; a Persister drives a shard.Store into it. The server wires them
// like this:
//
//	be, err := persist.Open(ctx, url, persist.Options{}) // fails if another server writes the table
//	p := persist.New(be, store, persist.Config{Mode: mode, Policy: policy, Interval: time.Second, Now: clk.Now})
//	ls, err := p.LoadAll(ctx, clk.Now())                   // before taking traffic
//	p.Start()
//	defer p.Close(ctx)                                     // final flush
//
// # Rows
//
// A row holds the key's bytes, the engine.State (Kind and the two int64s,
// stored exactly) and the absolute expiry in Unix nanoseconds. Postgres
// (pgx v5): one table (key bytea, kind smallint, a, b and expires_at
// bigint) created with CREATE TABLE IF NOT EXISTS. The key is unique
// through a unique index on sha256(key), not a primary key on the key
// itself: a btree entry holds at most about 2.7 KB and store keys go up to
// 64 KiB. The index entry is 32 bytes whatever the key; the price is a
// SHA-256 per written row, computed by the server and sent with the row.
//
// Rows reach that table through a journal (next section); a batch is
// written to it (by a fold, or by every write with journal=off) with one
// UPDATE ... FROM unnest of typed arrays (sent
// in the binary format) that finds each row by the hash of its key,
// pipelined with the DELETE of the tombstones: one round trip and one
// implicit transaction. When the UPDATE changes fewer rows than it was
// given, some keys have no row yet and the batch is written again with
// INSERT ... ON CONFLICT DO UPDATE, as are the next eight batches (new
// keys come in runs). Steady traffic changes rows that exist, and the plain
// UPDATE costs Postgres about a third less CPU than the INSERT, which
// computes the hash itself, checks the index, locks the row and then
// updates it. The writer session runs with enable_seqscan, enable_hashjoin
// and enable_mergejoin off: its plans are cached for the session's life,
// and a plan made while the table was small would otherwise scan the whole
// table for each batch once it has grown. DynamoDB
// (aws-sdk-go-v2): one on-demand table with a binary partition key (a
// prefix byte, then the key), numbers as decimal strings and a TTL
// attribute in whole seconds (a key longer than a partition key's 2047
// bytes is stored under its SHA-256 with the key in an attribute); the
// table is created when absent and its TTL
// switched on (an emulator that lacks UpdateTimeToLive is tolerated).
//
// # The Postgres journal
//
// Updating one row per changed key costs Postgres about 3.5 us of CPU per
// key, and in ModeSync every group commit (one every 1-5 ms under load)
// changes most of the hot keys again: nothing coalesces. So a Write does
// not touch the state table: it INSERTs one row into a second table,
// <table>_journal (id bigserial primary key, recs bytea, stored EXTERNAL:
// out of line, never compressed), whose recs hold every record of the
// batch in our own encoding (a version byte, then per record the key's
// length as a uvarint, the key, the kind byte and A, B and the expiry as
// zig-zag varints; tombstones included; about 30 bytes for a 16-byte
// key). That row is what makes the batch durable: one round trip, one row.
//
// The writer keeps in memory the latest record of every key appended
// since the last fold, one entry per distinct key. Every FoldEvery (1 s,
// the fold= URL parameter) or after 128Ki records, whichever comes first,
// it starts a fold: those records are written to the state table (the
// UPDATE/INSERT and DELETE above) a chunk at a time, each chunk in the
// same transaction and round trip as the next Writes' journal INSERTs, and
// the chunk that ends the fold also deletes the journal rows up to the
// last one the fold covers. A chunk is sized to end the fold within half
// a fold period (and within 64Ki more records), and is at least 64 keys,
// so a fold adds little to any one Write. Appends and folds run one after
// the other on the writer session, so a journal row with a larger id
// always holds states gathered later than anything folded before it. The
// state table then receives each hot key once per fold period instead of
// once per write. When nothing is appended for a fold period, the next
// Expire folds the whole journal; Close folds it too, leaving it empty.
//
// The journal holds the rows of at most about two fold periods (the one
// being folded and the one being gathered), and no more than about
// 2 x 128Ki records plus one batch under heavier load, while writes keep
// succeeding. Load reads, in one REPEATABLE READ snapshot, the journal in
// id order into a map (the last record of a key wins, a tombstone
// included), then the state table, passing on the keys the journal does
// not mention, then the map's records that are neither tombstones nor
// expired: one call per key, with its newest state. A writer that opens a
// table whose journal is not empty (after a crash) reads it into its
// in-memory fold state and folds it like its own rows. With journal=off
// every Write updates the state table directly, as described above; such
// a writer first folds any journal a previous run left.
//
// # Gathering changes
//
// The store tracks which keys changed since its last Flush (see
// shard.Store.Flush). A Persister gathers by calling Store.Flush, which
// copies the changed keys and states out under each shard's lock, and
// keeps one record per key: a newer state replaces an older one, a
// deletion is a tombstone that replaces the key's state. The records are a
// slice in the order keys were first gathered, their keys copied into one
// byte arena, with a map from key to record whose strings share the
// arena's bytes; all three keep their capacity from flush to flush, so
// gathering allocates nothing in the steady state.
//
// A flush gathers, then writes the records it holds in batches of
// Config.BatchSize, oldest first. The records of a batch are frozen while
// its Write runs: a later change of one of those keys is appended as a new
// record (the key counted once as dirty) instead of changing the one being
// written, so gathering never waits for a write. Before each batch after
// the first, the flush gathers again if an Interval has passed since the
// last gather: the records not yet written then carry their newest state,
// and the keys already written that changed again are appended. A flush
// ends when the records it held at its start are written; those appended
// during it are written by the next one, first. So a flush longer than the
// Interval (a backend slower than the traffic) turns into a continuous
// pass over the changed keys in the order they changed, each written with
// a state at most about one Interval old, and no key waits more than one
// such pass.
//
// Records are dropped only when their batch is written, so a failed write
// loses nothing and the Persister holds at most one record per distinct
// key changed during the outage (two for a key frozen in the failed
// write, merged when the flush ends): memory is bounded by the number of
// keys, not by the number of changes (per record: a 48-byte record, its
// since, the key's bytes, and a map entry). At the end of a flush that
// leaves records, they move to the front and their keys to a second arena,
// swapped with the first, so the bytes of written keys do not pile up.
// Failed writes are retried after a backoff that doubles from MinBackoff
// to MaxBackoff; when the backend answers again the next flush writes the
// whole backlog and the lag returns to 0, with no restart. Every write is
// an idempotent upsert or delete, so a batch written twice is harmless.
//
// LoadAll reads every row whose expiry is after now into the store
// (Store.Load, which does not mark keys changed) and then switches the
// store's tracking on with a Flush whose output it discards: what was just
// read is not written back.
//
// # Lag and dirty keys
//
// Stats.DirtyKeys counts the keys changed and not yet durable: still in
// the store, gathered and waiting, or in a write that has not returned.
// Stats.LagMs is the age of the oldest such change. The store keeps no
// count or time of its pending changes, so Stats gathers them first (an
// ordinary gather: it takes each shard's lock briefly, never waits for a
// write, and the records are written by the next flush). Each record
// carries a since: the start of the gather before the one that first saw
// the key, an instant after which its oldest pending change was made.
// Records are in gathering order, so the first one not written has the
// smallest since, and LagMs is now minus that since (0 with no record
// pending). It overstates the true age by at most the gap between two
// gathers, and it is a promise about durability: every change made before
// now - LagMs is durable. A crash at any instant loses only changes made
// in the LagMs before it.
//
// # Modes and what a crash loses
//
// ModeAsync flushes every Interval. A crash loses what LagMs shows at that
// instant. While the backend keeps up (a flush of the keys changed in one
// Interval takes less than an Interval), that is at most one Interval plus
// the duration of one flush. When it does not, flushes run back to back
// and the lag is bounded by the time one flush takes to write every key
// that changes during it (the number of hot keys over the backend's rows
// per second) plus one Interval and one batch; it does not grow beyond
// that, because a key waits for at most one pass. Stats.FlushSeconds
// (throttlekit_persist_flush_duration_seconds) shows that duration. A
// clean Close writes everything.
//
// ModeSync is group commit. After applying a batch of commands an event
// loop calls Commit, which returns a ticket and wakes the flusher without
// blocking; the loop holds those replies and releases them once Durable()
// (one atomic load, or the OnCommit callback) reaches the ticket. The
// flusher reads the latest ticket before it gathers, so one write covers
// every Commit made before it started; Commits that arrive during a write
// are served together by the next one. The cost is a round trip to the
// backend (plus the write) added to the latency of each changing command,
// shared by all commands that wait at the same time; nothing that was
// answered is lost in a crash.
//
// # Failure policy
//
// With FailOpen the server keeps answering from memory during an outage
// and the changes wait in the map. With FailClosed it should refuse
// changing commands with "-TRYAGAIN persistence unavailable" while
// Refusing() is true: from the first failed write until a write succeeds.
// In ModeSync with FailOpen, replies held for a ticket should be released
// when Healthy() turns false, or they would wait for the whole outage.
//
// # One writer per table
//
// Two servers writing one table would overwrite each other's limits.
// Postgres: Open takes pg_try_advisory_lock on a 64-bit hash of the table
// name on a dedicated connection, and that same connection does every
// write, so no write can happen without the lock. If the connection breaks
// (a server restart), the next write reconnects and takes the lock again
// first; while the old session still holds it the write fails with
// CodeInUse and is retried. Advisory locks are per database: the same
// table name in two schemas of one database shares a lock. DynamoDB: a
// lease item written with a conditional PutItem (no lease, our lease, or an
// expired one) carrying the owner id and an expiry, renewed every
// LeaseTTL/3; writes stop when the lease is lost or could not be renewed in
// time, and Close deletes it. After a crash the lease blocks a new writer
// with another Owner for up to LeaseTTL (30 s by default); a restart that
// passes the same Options.Owner takes it at once. A second opener gets an
// error matching ErrInUse: persist: table "x" is in use by another server.
//
// # Expired rows
//
// Load skips rows whose expiry has passed, so they never reach the store.
// They are removed in the background every ExpireEvery (1 min): on
// Postgres one DELETE ... WHERE expires_at <= now. There is deliberately no
// index on expires_at: every write changes that column, and an index on it
// would turn each upsert into a non-HOT update that also writes the index
// (the table has fillfactor 90 to leave room for HOT updates); the price is
// a sequential scan per ExpireEvery. On DynamoDB the table's TTL deletes
// items (within a day or two; Load skips them meanwhile); without TTL
// support, Expire scans and deletes.
//
// # Costs
//
// On Postgres a Write costs one round trip and one journal row per batch;
// a fold later applies the journal to the state table with one UPDATE ...
// FROM unnest per batch (INSERT ... ON CONFLICT for keys without a row),
// and with journal=off every Write does that itself. On DynamoDB a Write
// costs one BatchWriteItem per 25 records, up to parallel= calls in
// flight. Load streams one query in the binary format; each key still in
// the journal costs a map entry while loading. In ModeSync group commit
// turns waiting clients into larger batches. Against dynalite, the
// emulator the tests use, writes are bound by the emulator's
// single-threaded CPU; the real service's limit is its on-demand
// throughput and the latency of a call, which the parallel calls hide.
// The figures measured on the development machine, with the commands that
// reproduce them, are in bench/README.md ("Persistence: costs measured in
// package persist").
package persist
