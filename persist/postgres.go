package persist

import (
	"context"
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
	// WriteUnnest upserts a batch with one INSERT ... SELECT FROM
	// unnest($1::bytea[], ...) ON CONFLICT DO UPDATE, pipelined with the
	// DELETE of the tombstones: one round trip per batch.
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

	mu     sync.Mutex // guards conn, staged, closed; serialises Write
	conn   *pgx.Conn  // the writer: holds the advisory lock for its whole life
	staged bool       // conn has the COPY staging table
	closed bool

	upsertSQL, deleteSQL, stageSQL, mergeSQL, loadSQL, expireSQL string
}

func openPostgres(ctx context.Context, cfg pgConfig, _ Options) (*postgres, error) {
	id := pgx.Identifier{cfg.table}.Sanitize()
	p := &postgres{
		table:  cfg.table,
		ident:  id,
		method: cfg.method,
		lockID: lockKey(cfg.table),
		conf:   cfg.pool.ConnConfig.Copy(),
		upsertSQL: `INSERT INTO ` + id + ` (key, kind, a, b, expires_at)
SELECT * FROM unnest($1::bytea[], $2::smallint[], $3::bigint[], $4::bigint[], $5::bigint[])
ON CONFLICT ((sha256(key))) DO UPDATE SET kind = EXCLUDED.kind, a = EXCLUDED.a, b = EXCLUDED.b, expires_at = EXCLUDED.expires_at`,
		deleteSQL: `DELETE FROM ` + id + ` WHERE sha256(key) = ANY(ARRAY(SELECT sha256(k) FROM unnest($1::bytea[]) AS k))`,
		stageSQL:  `CREATE TEMP TABLE IF NOT EXISTS throttlekit_stage (key bytea, kind smallint, a bigint, b bigint, expires_at bigint) ON COMMIT DELETE ROWS`,
		mergeSQL: `INSERT INTO ` + id + ` (key, kind, a, b, expires_at)
SELECT key, kind, a, b, expires_at FROM throttlekit_stage
ON CONFLICT ((sha256(key))) DO UPDATE SET kind = EXCLUDED.kind, a = EXCLUDED.a, b = EXCLUDED.b, expires_at = EXCLUDED.expires_at`,
		loadSQL:   `SELECT key, kind, a, b, expires_at FROM ` + id + ` WHERE expires_at > $1`,
		expireSQL: `DELETE FROM ` + id + ` WHERE expires_at <= $1`,
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

// columns splits recs into upsert columns and tombstone keys.
func columns(recs []Record) (keys [][]byte, kinds []int16, as, bs, exps []int64, dels [][]byte) {
	n := 0
	for i := range recs {
		if !recs[i].Tombstone() {
			n++
		}
	}
	keys, kinds = make([][]byte, 0, n), make([]int16, 0, n)
	as, bs, exps = make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
	for i := range recs {
		r := &recs[i]
		if r.Tombstone() {
			dels = append(dels, r.Key)
			continue
		}
		keys = append(keys, r.Key)
		kinds = append(kinds, int16(r.State.Kind))
		as, bs, exps = append(as, r.State.A), append(bs, r.State.B), append(exps, r.ExpireAt)
	}
	return
}

func (p *postgres) writeUnnest(ctx context.Context, recs []Record) error {
	keys, kinds, as, bs, exps, dels := columns(recs)
	// One pipeline, one Sync: the statements run as one implicit
	// transaction in one round trip.
	var b pgx.Batch
	if len(keys) > 0 {
		b.Queue(p.upsertSQL, keys, kinds, as, bs, exps)
	}
	if len(dels) > 0 {
		b.Queue(p.deleteSQL, dels)
	}
	return p.conn.SendBatch(ctx, &b).Close()
}

func (p *postgres) writeCopy(ctx context.Context, recs []Record) error {
	if !p.staged {
		if _, err := p.conn.Exec(ctx, p.stageSQL); err != nil {
			return err
		}
		p.staged = true
	}
	keys, kinds, as, bs, exps, dels := columns(recs)
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
