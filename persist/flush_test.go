package persist_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/pgtest"
	"github.com/throttlekit/throttlekit-server/persist"
	"github.com/throttlekit/throttlekit-server/shard"
)

// TestLagAndDirtyKeys checks Stats.LagMs and Stats.DirtyKeys against a
// real PostgreSQL whose journal the test locks, so a flush's write waits
// for as long as the test wants, and an injected clock: changes still in
// the store, changes in a write in flight and changes made again while
// their write is in flight all count, each key once, and the lag is the
// age of the oldest of them.
func TestLagAndDirtyKeys(t *testing.T) {
	srv := pgtest.Start(t)
	table := "lag_" + freshTable(t)
	url := srv.URL + "&table=" + table
	store := shard.New(shard.Config{Shards: 4, MaxKeys: 1000})
	var now atomic.Int64
	now.Store(t0)
	p := persist.New(open(t, url), store, persist.Config{
		Interval: time.Hour, WriteTimeout: time.Minute, ExpireEvery: -1, Now: now.Load,
	})
	defer p.Close(context.Background()) //nolint:errcheck // closed again at the end
	if _, err := p.LoadAll(context.Background(), now.Load()); err != nil {
		t.Fatal(err)
	}
	l, err := engine.NewLimit(engine.KindFixed, 1000, 3600e9, 0)
	if err != nil {
		t.Fatal(err)
	}
	apply := func(keys ...string) {
		for _, k := range keys {
			store.Apply([]byte(k), now.Load(), &check{l: l, cost: 1})
		}
	}
	expect := func(what string, dirty, lagMs int64) {
		t.Helper()
		if s := p.Stats(); s.DirtyKeys != dirty || s.LagMs != lagMs {
			t.Fatalf("%s: %d dirty keys, lag %d ms; want %d and %d ms", what, s.DirtyKeys, s.LagMs, dirty, lagMs)
		}
	}
	expect("idle after the load", 0, 0)

	// Changes in the store, not gathered by any flush: dated at the last
	// gather (the load's, at t0).
	apply("a", "b")
	now.Add(2e9) // t0+2s
	expect("two keys in the store", 2, 2000)

	// A flush whose write waits on the locked journal.
	ctx := context.Background()
	jl := lockJournal(t, srv.URL, table)
	flushed := make(chan error, 1)
	go func() { flushed <- p.Flush(ctx) }()
	jl.waitBlocked(t)
	now.Add(3e9) // t0+5s
	expect("two keys in a write in flight", 2, 5000)
	apply("a", "c") // a again while its write is in flight, c new
	expect("a changed again, c new", 3, 5000)
	now.Add(1e9) // t0+6s
	apply("d")
	expect("d in the store", 4, 6000)

	jl.release(t)
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	// a (again), c and d were first seen by gathers after the one at t0+5s
	// (the Stats call that found the store empty).
	expect("after the write", 3, 1000)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	expect("after the next flush", 0, 0)
	now.Add(10e9)
	expect("idle", 0, 0)
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := loadMap(t, open(t, url), now.Load())
	for k, n := range map[string]int64{"a": 2, "b": 1, "c": 1, "d": 1} {
		d, err := l.Peek(got[k].State, now.Load())
		if err != nil || d.Remaining != 1000-n {
			t.Fatalf("key %s: remaining %d (%v), want %d", k, d.Remaining, err, 1000-n)
		}
	}
}

// journalLock holds a SHARE lock on a Postgres table's journal in an open
// transaction: every Write of its writer waits until release.
type journalLock struct {
	conn    *pgx.Conn
	tx      pgx.Tx
	journal string
}

func lockJournal(t *testing.T, url, table string) *journalLock {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := &journalLock{conn: conn, tx: tx, journal: pgx.Identifier{table + "_journal"}.Sanitize()}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+l.journal+" IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	return l
}

// waitBlocked returns once a session waits for the lock.
func (l *journalLock) waitBlocked(t *testing.T) {
	t.Helper()
	waitFor(t, "a write to wait for the journal lock", func() bool {
		var n int
		err := l.conn.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = $1::regclass`, l.journal).Scan(&n)
		return err == nil && n > 0
	})
}

func (l *journalLock) release(t *testing.T) {
	t.Helper()
	if err := l.tx.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestDurableAfterTheWrite: in ModeSync a ticket becomes durable only once
// the write holding its changes has returned, not when it is gathered or
// sent: with the write held back by a lock, Durable stays below the
// ticket (a server would still hold the replies) and OnCommit is not
// called; once the lock goes, the ticket is durable and its change is in
// the table.
func TestDurableAfterTheWrite(t *testing.T) {
	srv := pgtest.Start(t)
	table := "durable_" + freshTable(t)
	url := srv.URL + "&table=" + table
	store := shard.New(shard.Config{Shards: 4, MaxKeys: 1000})
	var commits atomic.Int64
	p := persist.New(open(t, url), store, persist.Config{
		Mode: persist.ModeSync, Interval: time.Hour, WriteTimeout: time.Minute, ExpireEvery: -1,
		Now: func() int64 { return t0 }, OnCommit: func(uint64) { commits.Add(1) },
	})
	if _, err := p.LoadAll(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	p.Start()
	l, err := engine.NewLimit(engine.KindFixed, 1000, 3600e9, 0)
	if err != nil {
		t.Fatal(err)
	}
	jl := lockJournal(t, srv.URL, table)
	store.Apply([]byte("k"), t0, &check{l: l, cost: 1})
	ticket := p.Commit()
	jl.waitBlocked(t)
	if d := p.Durable(); d >= ticket {
		t.Fatalf("Durable() = %d >= ticket %d while its write waits", d, ticket)
	}
	if n := commits.Load(); n != 0 {
		t.Fatalf("OnCommit called %d times while the write waits", n)
	}
	if s := p.Stats(); s.DirtyKeys != 1 {
		t.Fatalf("%d dirty keys while the write waits, want 1", s.DirtyKeys)
	}
	jl.release(t)
	waitFor(t, "the ticket to become durable", func() bool { return p.Durable() >= ticket })
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := loadMap(t, open(t, url), t0)
	if d, err := l.Peek(got["k"].State, t0); err != nil || d.Remaining != 999 {
		t.Fatalf("key k: remaining %d (%v), want 999", d.Remaining, err)
	}
}

// distinctWrites is a Backend that checks that the keys of each Write are
// distinct before passing it on.
type distinctWrites struct {
	persist.Backend
	t *testing.T
}

func (d distinctWrites) Write(ctx context.Context, recs []persist.Record) error {
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		if seen[string(r.Key)] {
			d.t.Errorf("key %q twice in one Write", r.Key)
		}
		seen[string(r.Key)] = true
	}
	return d.Backend.Write(ctx, recs)
}

// TestFlushGathersBetweenBatches flushes in small batches with an
// Interval so short that the flush gathers again before every batch,
// while goroutines keep changing and deleting keys: whatever the
// interleaving, each Write holds distinct keys and, once the changes stop
// and the Persister is closed, the table holds exactly the store's state.
func TestFlushGathersBetweenBatches(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.URL + "&table=regather_" + freshTable(t)
	store := shard.New(shard.Config{Shards: 4, MaxKeys: 10000})
	p := persist.New(distinctWrites{open(t, url), t}, store, persist.Config{
		Interval: time.Nanosecond, BatchSize: 7, ExpireEvery: -1, Now: func() int64 { return t0 },
	})
	if _, err := p.LoadAll(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	l, err := engine.NewLimit(engine.KindFixed, 1_000_000, 3600e9, 0)
	if err != nil {
		t.Fatal(err)
	}
	const keys = 300
	// Flushes run back to back while two goroutines make a fixed number
	// of changes each, so the last changes land during flushes.
	var flushes sync.WaitGroup
	stop := make(chan struct{})
	flushes.Add(1)
	go func() {
		defer flushes.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := p.Flush(context.Background()); err != nil {
				t.Error(err)
				return
			}
			_ = p.Stats() // gathers too
		}
	}()
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 9))
			for range 20_000 {
				k := []byte(fmt.Sprintf("key:%d", r.IntN(keys)))
				if r.IntN(50) == 0 {
					store.Delete(k, t0)
				} else {
					store.Apply(k, t0, &check{l: l, cost: 1})
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	flushes.Wait()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := loadMap(t, open(t, url), t0)
	held := 0
	for i := range keys {
		k := fmt.Sprintf("key:%d", i)
		st, ok := store.Get([]byte(k), t0)
		if !ok {
			if _, in := got[k]; in {
				t.Errorf("key %s deleted from the store but in the table", k)
			}
			continue
		}
		held++
		if got[k].State != st {
			t.Errorf("key %s: table %+v, store %+v", k, got[k].State, st)
		}
	}
	if len(got) != held {
		t.Errorf("table holds %d keys, store %d", len(got), held)
	}
}
