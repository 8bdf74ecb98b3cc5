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
	table  string
	method string
	pool   *pgxpool.Config
}

// parsePostgresURL takes our parameters (table, write) out of u and hands
// the rest to pgx.
func parsePostgresURL(u *url.URL) (pgConfig, error) {
	q := u.Query()
	cfg := pgConfig{table: DefaultTable, method: WriteUnnest}
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
	q.Del("table")
	q.Del("write")
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

	mu     sync.Mutex // guards conn, staged, closed, cols; serialises Write
	conn   *pgx.Conn  // the writer: holds the advisory lock for its whole life
	staged bool       // conn has the COPY staging table
	closed bool
	cols   pgColumns // a Write's parameters, reused

	upsertAfterMiss int // Writes left that upsert directly (see writeUnnest)

	updateSQL, upsertSQL, deleteSQL, stageSQL, mergeSQL, loadSQL, expireSQL string
}

func openPostgres(ctx context.Context, cfg pgConfig, _ Options) (*postgres, error) {
	id := pgx.Identifier{cfg.table}.Sanitize()
	p := &postgres{
		table:  cfg.table,
		ident:  id,
		method: cfg.method,
		lockID: lockKey(cfg.table),
		conf:   cfg.pool.ConnConfig.Copy(),
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
		loadSQL:   `SELECT key, kind, a, b, expires_at FROM ` + id + ` WHERE expires_at > $1`,
		expireSQL: `DELETE FROM ` + id + ` WHERE expires_at <= $1`,
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

// Write upserts and deletes recs in one transaction on the writer session,
// reconnecting (and re-taking the lock) first if the session was lost.
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
	if p.method == WriteCopy {
		err = p.writeCopy(ctx, recs)
	} else {
		err = p.writeUnnest(ctx, recs)
	}
	if err != nil {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Severity == "FATAL" || pe.Severity == "PANIC" {
			// Not a statement error: the session is gone or its state
			// unknown; start afresh (and re-take the lock) next time.
			p.conn.Close(context.Background())
			p.conn = nil
		}
		return backendErr("write", err)
	}
	return nil
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
// upsertAfterMiss batches, skipping the UPDATE.
func (p *postgres) writeUnnest(ctx context.Context, recs []Record) error {
	c := &p.cols
	c.fill(recs)
	defer c.reset()
	update := p.upsertAfterMiss == 0
	// One pipeline, one Sync: the statements run as one implicit
	// transaction in one round trip.
	var b pgx.Batch
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
	br := p.conn.SendBatch(ctx, &b)
	missed := false
	if len(c.keys) > 0 {
		tag, err := br.Exec()
		if err != nil {
			_ = br.Close()
			return err
		}
		missed = update && tag.RowsAffected() < int64(len(c.keys))
	}
	if err := br.Close(); err != nil {
		return err
	}
	if !update {
		p.upsertAfterMiss--
	}
	if !missed {
		return nil
	}
	p.upsertAfterMiss = upsertAfterMiss
	_, err := p.conn.Exec(ctx, p.upsertSQL, c.keys, c.kinds, c.as, c.bs, c.exps)
	return err
}

func (p *postgres) writeCopy(ctx context.Context, recs []Record) error {
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
	return tx.Commit(ctx)
}

// Load streams the unexpired rows with one query on the pool.
func (p *postgres) Load(ctx context.Context, now int64, fn func(key []byte, st engine.State, expireAt int64) error) error {
	if p.isClosed() {
		return &Error{Code: CodeClosed, Msg: "backend closed"}
	}
	rows, err := p.pool.Query(ctx, p.loadSQL, now)
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
		if err := fn(key, st, exp); err != nil {
			return err
		}
	}
	return backendErr("load", rows.Err())
}

// Expire deletes the rows expired by now with one statement (a sequential
// scan: see the package doc).
func (p *postgres) Expire(ctx context.Context, now int64) (int64, error) {
	if p.isClosed() {
		return 0, &Error{Code: CodeClosed, Msg: "backend closed"}
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

// Close releases the advisory lock, ends the writer session and closes the
// pool.
func (p *postgres) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	var err error
	if p.conn != nil {
		// Unlock first: the session's end releases the lock too, but the
		// server notices it after Close returns, and a new writer started
		// right away would find the table taken.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, _ = p.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, p.lockID)
		cancel()
		err = p.conn.Close(context.Background())
		p.conn = nil
	}
	p.pool.Close()
	return err
}
