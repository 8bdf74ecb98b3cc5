package persist

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"net/url"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/throttlekit/throttlekit-server/engine"
)

// Write methods of the Postgres backend (the write= URL parameter).
const (
	// WriteUnnest writes a batch with statements over unnest of typed
	// arrays (sent in the binary format): an UPDATE of the rows, found
	// through the SHA-256 of each key computed by the server, pipelined
	// with the DELETE of the tombstones: one round trip per batch. A batch
	// holding keys that have no row yet takes a second round trip, an
	// INSERT ... ON CONFLICT DO UPDATE (see writeUnnest).
	WriteUnnest = "unnest"
	// WriteCopy streams a batch with COPY into a session-local temporary
	// table, then upserts from it: four round trips per batch.
	WriteCopy = "copy"
)

type pgConfig struct {
	table     string
	method    string
	journal   bool
	foldEvery time.Duration
	pool      *pgxpool.Config
}

// DefaultFoldEvery is the period of the Postgres journal's fold when the
// URL gives none (fold=).
const DefaultFoldEvery = time.Second

// parsePostgresURL takes our parameters out of u and hands the rest to
// pgx: table, write (unnest or copy), journal (on or off; on by default:
// see the package doc) and fold (the journal's fold period, a duration;
// DefaultFoldEvery by default).
func parsePostgresURL(u *url.URL) (pgConfig, error) {
	q := u.Query()
	cfg := pgConfig{table: DefaultTable, method: WriteUnnest, journal: true, foldEvery: DefaultFoldEvery}
	if v := q.Get("table"); v != "" {
		cfg.table = v
	}
	if !validTable(cfg.table) {
		return cfg, badURL("bad table name %q: use 3-48 letters, digits or '_', not starting with a digit", cfg.table)
	}
	if v := q.Get("write"); v != "" {
		if v != WriteUnnest && v != WriteCopy {
			return cfg, badURL("unknown write method %q (unnest or copy)", v)
		}
		cfg.method = v
	}
	switch v := q.Get("journal"); v {
	case "", "on":
	case "off":
		cfg.journal = false
	default:
		return cfg, badURL("bad journal %q (on or off)", v)
	}
	if v := q.Get("fold"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, badURL("bad fold period %q (a positive duration such as 1s)", v)
		}
		cfg.foldEvery = d
	}
	for _, k := range []string{"table", "write", "journal", "fold"} {
		q.Del(k)
	}
	v := *u
	v.RawQuery = q.Encode()
	pc, err := pgxpool.ParseConfig(v.String())
	if err != nil {
		return cfg, badURL("bad postgres URL %s: %v", v.Redacted(), err)
	}
	if pc.MaxConns > 4 {
		pc.MaxConns = 4
	}
	cfg.pool = pc
	return cfg, nil
}

// lockKey is the advisory lock id of a table: the FNV-1a hash of a fixed
// prefix and the table name. Advisory locks are scoped to a database.
func lockKey(table string) int64 {
	h := fnv.New64a()
	h.Write([]byte("throttlekit-server/persist:"))
	h.Write([]byte(table))
	return int64(h.Sum64())
}

type postgres struct {
	table  string
	ident  string // quoted table name
	method string
	lockID int64
	pool   *pgxpool.Pool
	conf   *pgx.ConnConfig

	mu     sync.Mutex // guards the fields from conn to fold; serialises Write and the fold
	conn   *pgx.Conn  // the writer: holds the advisory lock for its whole life
	staged bool       // conn has the COPY staging table
	closed bool
	cols   pgColumns // a Write's parameters, reused

	upsertAfterMiss int // Writes left that upsert directly (see writeUnnest)

	journal   bool          // Writes append to the journal (journal=on)
	foldEvery time.Duration // period of the fold
	jbuf      []byte        // the encoded records of a journal append, reused
	fold      foldState

	updateSQL, upsertSQL, deleteSQL, stageSQL, mergeSQL, loadSQL, expireSQL string
	jInsertSQL, jReadSQL, jDeleteSQL                                        string
}

func openPostgres(ctx context.Context, cfg pgConfig, _ Options) (*postgres, error) {
	id := pgx.Identifier{cfg.table}.Sanitize()
	jid := pgx.Identifier{cfg.table + "_journal"}.Sanitize()
	p := &postgres{
		table:     cfg.table,
		ident:     id,
		method:    cfg.method,
		journal:   cfg.journal,
		foldEvery: cfg.foldEvery,
		lockID:    lockKey(cfg.table),
		conf:      cfg.pool.ConnConfig.Copy(),
		// Most writes change rows that exist: a plain UPDATE costs
		// Postgres about a third less CPU than INSERT ... ON CONFLICT
		// (which checks the index, locks the row, then updates it), and
		// the hashes sent in $1 spare it a SHA-256 per row.
		updateSQL: `UPDATE ` + id + ` AS t SET kind = u.kind, a = u.a, b = u.b, expires_at = u.expires_at
FROM unnest($1::bytea[], $2::bytea[], $3::smallint[], $4::bigint[], $5::bigint[], $6::bigint[]) AS u (h, key, kind, a, b, expires_at)
WHERE sha256(t.key) = u.h AND t.key = u.key`,
		upsertSQL: `INSERT INTO ` + id + ` (key, kind, a, b, expires_at)
SELECT * FROM unnest($1::bytea[], $2::smallint[], $3::bigint[], $4::bigint[], $5::bigint[])
ON CONFLICT ((sha256(key))) DO UPDATE SET kind = EXCLUDED.kind, a = EXCLUDED.a, b = EXCLUDED.b, expires_at = EXCLUDED.expires_at`,
		deleteSQL: `DELETE FROM ` + id + ` WHERE sha256(key) = ANY($1::bytea[])`,
		stageSQL:  `CREATE TEMP TABLE IF NOT EXISTS throttlekit_stage (key bytea, kind smallint, a bigint, b bigint, expires_at bigint) ON COMMIT DELETE ROWS`,
		mergeSQL: `INSERT INTO ` + id + ` (key, kind, a, b, expires_at)
SELECT key, kind, a, b, expires_at FROM throttlekit_stage
ON CONFLICT ((sha256(key))) DO UPDATE SET kind = EXCLUDED.kind, a = EXCLUDED.a, b = EXCLUDED.b, expires_at = EXCLUDED.expires_at`,
		loadSQL:    `SELECT key, kind, a, b, expires_at FROM ` + id + ` WHERE expires_at > $1`,
		expireSQL:  `DELETE FROM ` + id + ` WHERE expires_at <= $1`,
		jInsertSQL: `INSERT INTO ` + jid + ` (recs) VALUES ($1) RETURNING id`,
		jReadSQL:   `SELECT id, recs FROM ` + jid + ` ORDER BY id`,
		jDeleteSQL: `DELETE FROM ` + jid + ` WHERE id <= $1`,
	}
	// The writer session only looks rows up by the hash of their key. Its
	// plans are cached for the session's life, and one made while the
	// table was small (or never analyzed) would scan the whole table for
	// every batch once it has grown (a hash join of the UPDATE with a
	// sequential scan, measured at 7 ms for 25 rows of 10k): allow
	// nothing but index lookups.
	if p.conf.RuntimeParams == nil {
		p.conf.RuntimeParams = map[string]string{}
	}
	for _, k := range []string{"enable_seqscan", "enable_hashjoin", "enable_mergejoin"} {
		p.conf.RuntimeParams[k] = "off"
	}
	p.mu.Lock()
	err := p.connectLocked(ctx)
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	_, err = p.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+id+` (
	key bytea NOT NULL,
	kind smallint NOT NULL,
	a bigint NOT NULL,
	b bigint NOT NULL,
	expires_at bigint NOT NULL
) WITH (fillfactor = 90)`)
	if err == nil {
		// The key is unique through its SHA-256: a btree entry is limited
		// to about 2.7 KB and keys go up to 64 KiB.
		_, err = p.conn.Exec(ctx, `CREATE UNIQUE INDEX IF NOT EXISTS `+
			pgx.Identifier{cfg.table + "_key_sha256"}.Sanitize()+` ON `+id+` (sha256(key))`)
	}
	if err == nil {
		// The journal exists whether or not it is used, so that rows left
		// by a run with journal=on are folded by one with journal=off.
		// Its records are compact already: EXTERNAL stores them out of
		// line without trying to compress them.
		_, err = p.conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+jid+` (id bigserial PRIMARY KEY, recs bytea NOT NULL)`)
	}
	if err == nil {
		_, err = p.conn.Exec(ctx, `ALTER TABLE `+jid+` ALTER COLUMN recs SET STORAGE EXTERNAL`)
	}
	if err == nil {
		p.mu.Lock()
		err = p.recoverJournalLocked(ctx)
		p.mu.Unlock()
	}
	if err != nil {
		p.conn.Close(context.Background())
		return nil, backendErr(fmt.Sprintf("create table %q", cfg.table), err)
	}
	p.pool, err = pgxpool.NewWithConfig(ctx, cfg.pool)
	if err != nil {
		p.conn.Close(context.Background())
		return nil, backendErr("connect", err)
	}
	return p, nil
}

// connectLocked opens the writer connection and takes the table's advisory
// lock on it; the lock lives as long as the session.
func (p *postgres) connectLocked(ctx context.Context) error {
	if p.conn != nil {
		p.conn.Close(context.Background())
		p.conn = nil
	}
	conn, err := pgx.ConnectConfig(ctx, p.conf)
	if err != nil {
		return backendErr("connect", err)
	}
	var got bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, p.lockID).Scan(&got); err != nil {
		conn.Close(context.Background())
		return backendErr("advisory lock", err)
	}
	if !got {
		conn.Close(context.Background())
		return inUse(p.table)
	}
	p.conn, p.staged = conn, false
	return nil
}

// Name returns "postgres".
func (p *postgres) Name() string { return "postgres" }

// Write makes recs durable on the writer session, reconnecting (and
// re-taking the lock) first if the session was lost. With the journal it
// appends one journal row, in the same transaction as the chunk of the
// journal it folds into the table, if any (see foldState); without it, it
// upserts and deletes recs in one transaction.
func (p *postgres) Write(ctx context.Context, recs []Record) error {
	if len(recs) == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return &Error{Code: CodeClosed, Msg: "backend closed"}
	}
	if p.conn == nil || p.conn.IsClosed() {
		if err := p.connectLocked(ctx); err != nil {
			return err
		}
	}
	var err error
	if p.journal {
		err = p.appendLocked(ctx, recs)
	} else {
		err = p.writeRows(ctx, recs, 0)
	}
	if err != nil {
		p.dropBrokenLocked(err)
		return backendErr("write", err)
	}
	return nil
}

// writeRows upserts and deletes recs in the table in one transaction and,
// when foldTo > 0, deletes the journal rows up to id foldTo in the same
// transaction.
func (p *postgres) writeRows(ctx context.Context, recs []Record, foldTo int64) error {
	if p.method == WriteCopy {
		return p.writeCopy(ctx, recs, foldTo)
	}
	_, _, err := p.writeUnnest(ctx, recs, foldTo, nil)
	return err
}

// dropBrokenLocked closes the writer session after an error that was not
// a statement's own, so that the next write starts afresh.
func (p *postgres) dropBrokenLocked(err error) {
	if p.conn == nil {
		return
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Severity == "FATAL" || pe.Severity == "PANIC" {
		// Not a statement error: the session is gone or its state
		// unknown; start afresh (and re-take the lock) next time.
		p.conn.Close(context.Background())
		p.conn = nil
	}
}

// pgColumns holds one Write's parameters as column arrays. Its slices are
// reused from Write to Write, so a steady stream of batches allocates
// nothing here; hash is the arena of the SHA-256 digests, 32 bytes a row.
type pgColumns struct {
	hashes, keys [][]byte
	kinds        []int16
	as, bs, exps []int64
	dels         [][]byte // SHA-256 of each tombstone's key
	hash         []byte
}

// fill splits recs into upsert columns and tombstone hashes.
func (c *pgColumns) fill(recs []Record) {
	c.hashes, c.keys, c.kinds = c.hashes[:0], c.keys[:0], c.kinds[:0]
	c.as, c.bs, c.exps, c.dels = c.as[:0], c.bs[:0], c.exps[:0], c.dels[:0]
	if need := len(recs) * sha256.Size; cap(c.hash) < need {
		c.hash = make([]byte, need)
	}
	c.hash = c.hash[:len(recs)*sha256.Size]
	for i := range recs {
		r := &recs[i]
		h := c.hash[i*sha256.Size : (i+1)*sha256.Size : (i+1)*sha256.Size]
		sum := sha256.Sum256(r.Key)
		copy(h, sum[:])
		if r.Tombstone() {
			c.dels = append(c.dels, h)
			continue
		}
		c.hashes = append(c.hashes, h)
		c.keys = append(c.keys, r.Key)
		c.kinds = append(c.kinds, int16(r.State.Kind))
		c.as, c.bs, c.exps = append(c.as, r.State.A), append(c.bs, r.State.B), append(c.exps, r.ExpireAt)
	}
}

// reset drops the references to the caller's keys and, after an
// unusually large batch, the buffers themselves.
func (c *pgColumns) reset() {
	clear(c.keys)
	if cap(c.keys) > 1<<16 {
		*c = pgColumns{}
	}
}

// upsertAfterMiss is the number of Writes that upsert directly after one
// whose UPDATE missed a key: new keys tend to come in runs.
const upsertAfterMiss = 8

// writeUnnest updates the rows of a batch, found by their keys' hashes,
// and deletes its tombstones in one round trip. If the UPDATE found fewer
// rows than it was given, some keys have none yet: the batch is then
// written again with INSERT ... ON CONFLICT DO UPDATE, a second round trip
// (rewriting a row with the same values is harmless), and so are the next
// upsertAfterMiss batches, skipping the UPDATE. When foldTo > 0 the
// batch is the last of a fold: it is upserted directly, with the DELETE of
// the journal rows up to foldTo in the same round trip and transaction.
// When jrow is not nil, the INSERT of the journal row jrow comes first in
// the same transaction; Write then returns its id and whether it was
// committed (it may be while the second round trip fails).
func (p *postgres) writeUnnest(ctx context.Context, recs []Record, foldTo int64, jrow []byte) (id int64, appended bool, err error) {
	c := &p.cols
	c.fill(recs)
	defer c.reset()
	update := p.upsertAfterMiss == 0 && foldTo == 0
	// One pipeline, one Sync: the statements run as one implicit
	// transaction in one round trip.
	var b pgx.Batch
	if jrow != nil {
		b.Queue(p.jInsertSQL, jrow)
	}
	if len(c.keys) > 0 {
		if update {
			b.Queue(p.updateSQL, c.hashes, c.keys, c.kinds, c.as, c.bs, c.exps)
		} else {
			b.Queue(p.upsertSQL, c.keys, c.kinds, c.as, c.bs, c.exps)
		}
	}
	if len(c.dels) > 0 {
		b.Queue(p.deleteSQL, c.dels)
	}
	if foldTo > 0 {
		b.Queue(p.jDeleteSQL, foldTo)
	}
	br := p.conn.SendBatch(ctx, &b)
	if jrow != nil {
		if err := br.QueryRow().Scan(&id); err != nil {
			_ = br.Close()
			return 0, false, err
		}
	}
	missed := false
	if len(c.keys) > 0 {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return 0, false, err
		}
		missed = update && tag.RowsAffected() < int64(len(c.keys))
	}
	if err := br.Close(); err != nil {
		return 0, false, err
	}
	appended = jrow != nil
	if !update && p.upsertAfterMiss > 0 {
		p.upsertAfterMiss--
	}
	if !missed {
		return id, appended, nil
	}
	p.upsertAfterMiss = upsertAfterMiss
	_, err = p.conn.Exec(ctx, p.upsertSQL, c.keys, c.kinds, c.as, c.bs, c.exps)
	return id, appended, err
}

// writeCopy writes recs through the COPY staging table in one transaction,
// with the DELETE of the journal rows up to foldTo when foldTo > 0.
func (p *postgres) writeCopy(ctx context.Context, recs []Record, foldTo int64) error {
	if !p.staged {
		if _, err := p.conn.Exec(ctx, p.stageSQL); err != nil {
			return err
		}
		p.staged = true
	}
	c := &p.cols
	c.fill(recs)
	defer c.reset()
	keys, kinds, as, bs, exps, dels := c.keys, c.kinds, c.as, c.bs, c.exps, c.dels
	tx, err := p.conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // after Commit it is a no-op
	if len(keys) > 0 {
		i := 0
		src := pgx.CopyFromFunc(func() ([]any, error) {
			if i == len(keys) {
				return nil, nil
			}
			row := []any{keys[i], kinds[i], as[i], bs[i], exps[i]}
			i++
			return row, nil
		})
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"throttlekit_stage"}, []string{"key", "kind", "a", "b", "expires_at"}, src); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, p.mergeSQL); err != nil {
			return err
		}
	}
	if len(dels) > 0 {
		if _, err := tx.Exec(ctx, p.deleteSQL, dels); err != nil {
			return err
		}
	}
	if foldTo > 0 {
		if _, err := tx.Exec(ctx, p.jDeleteSQL, foldTo); err != nil {
			return err
		}
	}
	return tx.Commit(ctx)
}

// Load reads the journal into a map (the last record of each key wins),
// then streams the table's unexpired rows, passing on those of keys the
// journal does not mention, then the journal's records that are neither
// tombstones nor expired: each key once, with its newest state. Both
// queries run in one read-only REPEATABLE READ transaction on the pool,
// so they see the same moment.
func (p *postgres) Load(ctx context.Context, now int64, fn func(key []byte, st engine.State, expireAt int64) error) error {
	if p.isClosed() {
		return &Error{Code: CodeClosed, Msg: "backend closed"}
	}
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return backendErr("load", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read-only: nothing to keep
	var j foldState
	jrows, err := tx.Query(ctx, p.jReadSQL)
	if err != nil {
		return backendErr("load journal", err)
	}
	var id int64
	var buf []byte
	for jrows.Next() {
		if err := jrows.Scan(&id, &buf); err != nil {
			jrows.Close()
			return backendErr("load journal", err)
		}
		if err := decodeJournal(buf, j.add); err != nil {
			jrows.Close()
			return backendErr("load journal", fmt.Errorf("row %d: %w", id, err))
		}
	}
	jrows.Close()
	if err := jrows.Err(); err != nil {
		return backendErr("load journal", err)
	}
	if err := p.loadTable(ctx, tx, now, j.index, fn); err != nil {
		return err
	}
	for i := range j.next {
		r := &j.next[i]
		if r.Tombstone() || r.ExpireAt <= now {
			continue
		}
		if err := fn(r.Key, r.State, r.ExpireAt); err != nil {
			return err
		}
	}
	return nil
}

// loadTable streams the table's rows that expire after now to fn, except
// those of the keys in skip.
func (p *postgres) loadTable(ctx context.Context, tx pgx.Tx, now int64, skip map[string]int32, fn func(key []byte, st engine.State, expireAt int64) error) error {
	rows, err := tx.Query(ctx, p.loadSQL, now)
	if err != nil {
		return backendErr("load", err)
	}
	defer rows.Close()
	fast := true
	for _, fd := range rows.FieldDescriptions() {
		fast = fast && fd.Format == pgx.BinaryFormatCode
	}
	var key []byte
	var kind int16
	var st engine.State
	var exp int64
	for rows.Next() {
		if fast {
			// Binary wire format: bytea raw, int2/int8 big-endian. Reading
			// it directly saves an allocation per key over Scan.
			v := rows.RawValues()
			if len(v) != 5 || len(v[1]) != 2 || len(v[2]) != 8 || len(v[3]) != 8 || len(v[4]) != 8 {
				return backendErr("load", errors.New("unexpected row shape"))
			}
			key = v[0]
			kind = int16(binary.BigEndian.Uint16(v[1]))
			st.A = int64(binary.BigEndian.Uint64(v[2]))
			st.B = int64(binary.BigEndian.Uint64(v[3]))
			exp = int64(binary.BigEndian.Uint64(v[4]))
		} else if err := rows.Scan(&key, &kind, &st.A, &st.B, &exp); err != nil {
			return backendErr("load", err)
		}
		if kind < 0 || kind > 255 {
			return backendErr("load", fmt.Errorf("row with kind %d", kind))
		}
		st.Kind = engine.Kind(kind)
		if _, ok := skip[string(key)]; ok {
			continue
		}
		if err := fn(key, st, exp); err != nil {
			return err
		}
	}
	return backendErr("load", rows.Err())
}

// Expire deletes the rows expired by now with one statement (a sequential
// scan: see the package doc). When nothing was appended to the journal for
// a fold period, it first folds the journal, so an idle writer's journal
// empties too and its expired records reach the table.
func (p *postgres) Expire(ctx context.Context, now int64) (int64, error) {
	if p.isClosed() {
		return 0, &Error{Code: CodeClosed, Msg: "backend closed"}
	}
	if err := p.foldIdle(ctx); err != nil {
		return 0, backendErr("fold journal", err)
	}
	tag, err := p.pool.Exec(ctx, p.expireSQL, now)
	if err != nil {
		return 0, backendErr("expire", err)
	}
	return tag.RowsAffected(), nil
}

func (p *postgres) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Close folds the whole journal into the table (reconnecting if the
// session was lost), releases the advisory lock, ends the writer session
// and closes the pool. A fold that fails leaves the journal for the next
// writer to fold; Close returns its error.
func (p *postgres) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var err error
	if p.fold.pending() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if p.conn == nil || p.conn.IsClosed() {
			err = p.connectLocked(ctx)
		}
		if err == nil {
			if err = p.foldAllLocked(ctx); err != nil {
				p.dropBrokenLocked(err)
			}
		}
		cancel()
		err = backendErr("fold journal", err)
	}
	if p.conn != nil {
		// Unlock first: the session's end releases the lock too, but the
		// server notices it after Close returns, and a new writer started
		// right away would find the table taken.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _ = p.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, p.lockID)
		cancel()
		if cerr := p.conn.Close(context.Background()); err == nil {
			err = cerr
		}
		p.conn = nil
	}
	p.pool.Close()
	return err
}
