package persist_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/dynatest"
	"github.com/throttlekit/throttlekit-server/internal/pgtest"
	"github.com/throttlekit/throttlekit-server/persist"
	"github.com/throttlekit/throttlekit-server/shard"
)

// t0 is the tests' "now": a fixed instant, driven by hand.
const t0 = int64(1_800_000_000) * 1e9

// backend names a way to get a fresh table URL on a running server.
type backend struct {
	name string
	url  func(table string) string
}

var tableSeq atomic.Int64

func freshTable(t *testing.T) string {
	return fmt.Sprintf("t%d_%d", time.Now().UnixNano()%1e9, tableSeq.Add(1))
}

// TestPostgres runs the backend suite against a real PostgreSQL server.
func TestPostgres(t *testing.T) {
	srv := pgtest.Start(t)
	runSuite(t, backend{"postgres", func(table string) string { return srv.URL + "&table=" + table }})
	t.Run("copy", func(t *testing.T) {
		runSuite(t, backend{"postgres-copy", func(table string) string { return srv.URL + "&write=copy&table=" + table }})
	})
	t.Run("nojournal", func(t *testing.T) {
		runSuite(t, backend{"postgres-nojournal", func(table string) string { return srv.URL + "&journal=off&table=" + table }})
	})
}

// TestDynamo runs the backend suite against dynalite.
func TestDynamo(t *testing.T) {
	srv := dynatest.Start(t)
	runSuite(t, backend{"dynamodb", srv.URL})
}

func runSuite(t *testing.T, b backend) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, backend)
	}{
		{"RoundTrip", testRoundTrip},
		{"Tombstones", testTombstones},
		{"Expiry", testExpiry},
		{"SameDecisions", testSameDecisions},
		{"ConcurrentApplies", testConcurrentApplies},
		{"OneWriter", testOneWriter},
		{"CommitEpochs", testCommitEpochs},
		{"MixedWrites", testMixedWrites},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

func open(t *testing.T, url string) persist.Backend {
	t.Helper()
	be, err := persist.Open(context.Background(), url, persist.Options{})
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	return be
}

// loadMap reads a whole table as of now.
func loadMap(t *testing.T, be persist.Backend, now int64) map[string]persist.Record {
	t.Helper()
	got := map[string]persist.Record{}
	err := be.Load(context.Background(), now, func(key []byte, st engine.State, exp int64) error {
		k := string(key)
		if _, dup := got[k]; dup {
			return fmt.Errorf("key %q loaded twice", k)
		}
		got[k] = persist.Record{Key: []byte(k), State: st, ExpireAt: exp}
		return nil
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return got
}

var extremes = []int64{math.MinInt64, math.MinInt64 + 1, -1, 0, 1, math.MaxInt64 - 1, math.MaxInt64}

// randomRecords returns n records with distinct random keys (binary, some
// empty-ish and some long) and random states including extreme integers.
func randomRecords(r *rand.Rand, n int, now int64) []persist.Record {
	seen := map[string]bool{}
	recs := make([]persist.Record, 0, n)
	for len(recs) < n {
		var k []byte
		switch r.IntN(5) {
		case 4:
			// Long keys, up to the store's limit: beyond a btree entry
			// and a DynamoDB partition key.
			n := 2040 + r.IntN(16) // around DynamoDB's 2048
			switch r.IntN(3) {
			case 0:
				n = 2000 + r.IntN(shard.MaxKeyLen-2000+1)
			case 1:
				n = 2700 + r.IntN(200) // around a btree entry's limit
			}
			k = make([]byte, n)
		case 0:
			k = make([]byte, 1+r.IntN(4)) // short, may contain zero bytes
		case 1:
			k = make([]byte, 200+r.IntN(800))
		default:
			k = make([]byte, 5+r.IntN(30))
		}
		for i := range k {
			k[i] = byte(r.Uint32())
		}
		if seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		pick := func() int64 {
			if r.IntN(3) == 0 {
				return extremes[r.IntN(len(extremes))]
			}
			return int64(r.Uint64())
		}
		st := engine.State{A: pick(), B: pick(), Kind: engine.Kind(1 + r.IntN(4))}
		exp := now + 1 + r.Int64N(1e15)
		if r.IntN(10) == 0 {
			exp = math.MaxInt64
		}
		recs = append(recs, persist.Record{Key: k, State: st, ExpireAt: exp})
	}
	return recs
}

func testRoundTrip(t *testing.T, b backend) {
	be := open(t, b.url(freshTable(t)))
	defer be.Close()
	r := rand.New(rand.NewPCG(1, 2))
	recs := randomRecords(r, 500, t0)
	if err := be.Write(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	// Overwrite a third with new states: newest wins.
	for i := 0; i < len(recs); i += 3 {
		recs[i].State = engine.State{A: math.MaxInt64, B: math.MinInt64, Kind: engine.KindSliding}
		recs[i].ExpireAt = min(recs[i].ExpireAt, math.MaxInt64-1) + 1
	}
	if err := be.Write(context.Background(), recs[:len(recs):len(recs)]); err != nil {
		t.Fatal(err)
	}
	got := loadMap(t, be, t0)
	if len(got) != len(recs) {
		t.Fatalf("loaded %d keys, wrote %d", len(got), len(recs))
	}
	for _, w := range recs {
		g, ok := got[string(w.Key)]
		if !ok || g.State != w.State || g.ExpireAt != w.ExpireAt {
			t.Fatalf("key %x: got %+v (present %v), want %+v", w.Key, g, ok, w)
		}
	}
}

func testTombstones(t *testing.T, b backend) {
	be := open(t, b.url(freshTable(t)))
	defer be.Close()
	recs := randomRecords(rand.New(rand.NewPCG(3, 4)), 100, t0)
	if err := be.Write(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	var batch []persist.Record
	for i := range recs {
		if i%2 == 0 {
			batch = append(batch, persist.Record{Key: recs[i].Key}) // tombstone
		}
	}
	// A tombstone for a key never written is fine.
	batch = append(batch, persist.Record{Key: []byte("never-written")})
	if err := be.Write(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	got := loadMap(t, be, t0)
	for i, w := range recs {
		_, ok := got[string(w.Key)]
		if ok != (i%2 == 1) {
			t.Fatalf("key %d present=%v after tombstones on even keys", i, ok)
		}
	}
}

func testExpiry(t *testing.T, b backend) {
	url := b.url(freshTable(t))
	if strings.HasPrefix(b.name, "postgres") {
		// Fold the journal on every write: Expire removes table rows.
		url += "&fold=1ns"
	}
	be := open(t, url)
	defer be.Close()
	st := engine.State{A: 7, B: 8, Kind: engine.KindFixed}
	recs := []persist.Record{
		{Key: []byte("past"), State: st, ExpireAt: t0 - 1},
		{Key: []byte("now"), State: st, ExpireAt: t0},
		{Key: []byte("next-ns"), State: st, ExpireAt: t0 + 1},
		{Key: []byte("far"), State: st, ExpireAt: t0 + 3600e9},
	}
	if err := be.Write(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	got := loadMap(t, be, t0)
	if len(got) != 2 || got["next-ns"].ExpireAt != t0+1 || got["far"].ExpireAt != t0+3600e9 {
		t.Fatalf("load at t0 = %v, want next-ns and far only", got)
	}
	n, err := be.Expire(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 && !(b.name == "dynamodb" && n == 0) {
		t.Fatalf("Expire removed %d rows, want 2", n)
	}
	if n == 2 {
		// The expired rows are gone, not just filtered.
		if got := loadMap(t, be, math.MinInt64); len(got) != 2 {
			t.Fatalf("after Expire %d rows remain, want 2", len(got))
		}
	}
	// Through a Persister and its background expiry.
	store := shard.New(shard.Config{Shards: 4, MaxKeys: 1000})
	var now atomic.Int64
	now.Store(t0 + 2)
	p := persist.New(be, store, persist.Config{Now: now.Load, ExpireEvery: time.Millisecond, Interval: time.Hour})
	p.Start()
	defer p.Close(context.Background())
	waitFor(t, "background expiry", func() bool { return p.Stats().RowsExpired >= 1 })
	if got := loadMap(t, be, math.MinInt64); len(got) != 1 || got["far"].ExpireAt == 0 {
		t.Fatalf("after background expiry at t0+2: %v, want far only", got)
	}
	if ls, err := p.LoadAll(context.Background(), now.Load()); err != nil || ls.Keys != 1 {
		t.Fatalf("LoadAll = %+v, %v; want 1 key", ls, err)
	}
}

// waitFor polls cond with a deadline generous enough for a loaded CI box;
// nothing depends on how long it takes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// check is a Transform running one engine check and keeping its outcome.
type check struct {
	l    engine.Limit
	cost int64
	d    engine.Decision
	err  error
}

func (c *check) Apply(cur engine.State, now int64) (engine.State, int64) {
	next, d, ttl, err := c.l.Check(cur, now, c.cost)
	c.d, c.err = d, err
	if err != nil {
		return cur, 1
	}
	return next, ttl
}

func limits(t *testing.T) []engine.Limit {
	t.Helper()
	var ls []engine.Limit
	for _, a := range []engine.Kind{engine.KindGCRA, engine.KindToken, engine.KindFixed, engine.KindSliding} {
		l, err := engine.NewLimit(a, 10, 10e9, 0)
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	return ls
}

// testSameDecisions: keys saved and loaded answer exactly like the same
// keys kept in memory, for every algorithm, over a run of checks.
func testSameDecisions(t *testing.T, b backend) {
	url := b.url(freshTable(t))
	ls := limits(t)
	mem := shard.New(shard.Config{Shards: 4, MaxKeys: 1000})
	saved := shard.New(shard.Config{Shards: 4, MaxKeys: 1000})
	r := rand.New(rand.NewPCG(5, 6))
	now := t0
	key := func(i int) []byte { return []byte(fmt.Sprintf("algo%d:user%d", i%len(ls), i)) }
	run := func(stores []*shard.Store, steps int) {
		for range steps {
			now += r.Int64N(2e9)
			i := r.IntN(40)
			cost := r.Int64N(4)
			var ds []engine.Decision
			for _, s := range stores {
				c := &check{l: ls[i%len(ls)], cost: cost}
				s.Apply(key(i), now, c)
				if c.err != nil {
					t.Fatal(c.err)
				}
				ds = append(ds, c.d)
			}
			if len(ds) == 2 && ds[0] != ds[1] {
				t.Fatalf("key %s at %d cost %d: memory %+v, saved and loaded %+v", key(i), now, cost, ds[0], ds[1])
			}
		}
	}
	run([]*shard.Store{mem, saved}, 300)
	be := open(t, url)
	p := persist.New(be, saved, persist.Config{Now: func() int64 { return now }})
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	loaded := shard.New(shard.Config{Shards: 4, MaxKeys: 1000})
	be = open(t, url)
	p = persist.New(be, loaded, persist.Config{Now: func() int64 { return now }})
	if _, err := p.LoadAll(context.Background(), now); err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	run([]*shard.Store{mem, loaded}, 600)
}

// testConcurrentApplies: 200 concurrent checks of cost 1 on one fixed
// window count 200 after a save and a load.
func testConcurrentApplies(t *testing.T, b backend) {
	url := b.url(freshTable(t))
	l, err := engine.NewLimit(engine.KindFixed, 1000, 3600e9, 0)
	if err != nil {
		t.Fatal(err)
	}
	store := shard.New(shard.Config{Shards: 8, MaxKeys: 1000})
	be := open(t, url)
	p := persist.New(be, store, persist.Config{Now: func() int64 { return t0 }})
	p.Start()
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &check{l: l, cost: 1}
			store.Apply([]byte("shared"), t0, c)
			p.Commit()
		}()
	}
	wg.Wait()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	loaded := shard.New(shard.Config{Shards: 8, MaxKeys: 1000})
	be = open(t, url)
	p = persist.New(be, loaded, persist.Config{})
	if ls, err := p.LoadAll(context.Background(), t0); err != nil || ls.Keys != 1 {
		t.Fatalf("LoadAll = %+v, %v", ls, err)
	}
	defer p.Close(context.Background())
	st, _ := loaded.Get([]byte("shared"), t0)
	d, err := l.Peek(st, t0)
	if err != nil {
		t.Fatal(err)
	}
	if d.Remaining != 800 {
		t.Fatalf("after 200 concurrent checks, save and load: remaining %d, want 800", d.Remaining)
	}
}

func testOneWriter(t *testing.T, b backend) {
	table := freshTable(t)
	first := open(t, b.url(table))
	_, err := persist.Open(context.Background(), b.url(table), persist.Options{})
	if err == nil {
		t.Fatal("a second writer opened the same table")
	}
	want := fmt.Sprintf("persist: table %q is in use by another server", table)
	if !errors.Is(err, persist.ErrInUse) || persist.CodeOf(err) != persist.CodeInUse || err.Error() != want {
		t.Fatalf("second Open: %v (code %q), want %q", err, persist.CodeOf(err), want)
	}
	// Another table is free.
	other := open(t, b.url(table+"_b"))
	other.Close()
	// Once the first writer closes, the table is free again.
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	second := open(t, b.url(table))
	second.Close()
}

// TestDynamoLeaseExpiry: a writer that stops renewing (a crashed server)
// loses the table once its lease expires; another server takes it over and
// the old one can no longer write. Time is driven by hand.
func TestDynamoLeaseExpiry(t *testing.T) {
	srv := dynatest.Start(t)
	url := srv.URL(freshTable(t))
	var now atomic.Int64
	now.Store(t0)
	opts := persist.Options{Owner: "first", LeaseTTL: time.Hour, Now: now.Load}
	first, err := persist.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	rec := []persist.Record{{Key: []byte("k"), State: engine.State{A: 1, Kind: engine.KindFixed}, ExpireAt: t0 + 7200e9}}
	if err := first.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	opts.Owner = "second"
	if _, err := persist.Open(context.Background(), url, opts); !errors.Is(err, persist.ErrInUse) {
		t.Fatalf("Open during the lease: %v, want ErrInUse", err)
	}
	now.Add(int64(time.Hour) + 1)
	if err := first.Write(context.Background(), rec); persist.CodeOf(err) != persist.CodeBackend {
		t.Fatalf("Write after the lease expired: %v, want a %s error", err, persist.CodeBackend)
	}
	second, err := persist.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("Open after the lease expired: %v", err)
	}
	defer second.Close()
	if err := second.Write(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	// The same owner re-takes its own lease at once (a restart that keeps
	// its Owner).
	again, err := persist.Open(context.Background(), url, opts)
	if err != nil {
		t.Fatalf("Open by the lease's owner: %v", err)
	}
	again.Close()
}

// testCommitEpochs: a ticket from Commit becomes durable without any call
// but Commit, and what it covers is in the table.
func testCommitEpochs(t *testing.T, b backend) {
	url := b.url(freshTable(t))
	store := shard.New(shard.Config{Shards: 4, MaxKeys: 1000})
	var commits, flushes atomic.Int64
	be := open(t, url)
	p := persist.New(be, store, persist.Config{Mode: persist.ModeSync, Interval: time.Hour, Now: func() int64 { return t0 },
		OnCommit: func(uint64) { commits.Add(1) }, OnFlushed: func(time.Duration) { flushes.Add(1) }})
	p.Start()
	l := limits(t)[0]
	var ticket uint64
	for i := range 50 {
		store.Apply([]byte(fmt.Sprintf("k%d", i)), t0, &check{l: l, cost: 1})
		ticket = p.Commit()
	}
	waitFor(t, "durable ticket", func() bool { return p.Durable() >= ticket })
	if commits.Load() == 0 {
		t.Fatal("OnCommit never called")
	}
	if flushes.Load() == 0 {
		t.Fatal("OnFlushed never called")
	}
	s := p.Stats()
	if s.Mode != "sync" || s.RowsWritten != 50 || s.DirtyKeys != 0 || s.LagMs != 0 || !s.Healthy || s.Requested != ticket {
		t.Fatalf("stats %+v", s)
	}
	if s.Flushes > 50 {
		t.Fatalf("%d flushes for 50 commits", s.Flushes)
	}
	store.Delete([]byte("k7"), t0)
	ticket = p.Commit()
	waitFor(t, "durable delete", func() bool { return p.Durable() >= ticket })
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	be = open(t, url)
	defer be.Close()
	got := loadMap(t, be, t0)
	if _, ok := got["k7"]; len(got) != 49 || ok {
		t.Fatalf("loaded %d keys (k7 present %v), want 49 without k7", len(got), ok)
	}
}

// TestPostgresOutage stops PostgreSQL under a running Persister: writes
// fail, changes wait coalesced per key, and after a restart the Persister
// catches up by itself and a load sees everything.
func TestPostgresOutage(t *testing.T) {
	srv := pgtest.Start(t)
	url := srv.URL + "&table=outage"
	store := shard.New(shard.Config{Shards: 4, MaxKeys: 10000})
	be := open(t, url)
	var now atomic.Int64
	now.Store(t0)
	p := persist.New(be, store, persist.Config{
		Policy: persist.FailClosed, Interval: 5 * time.Millisecond,
		MinBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond, WriteTimeout: 5 * time.Second,
		Now: now.Load, ExpireEvery: -1,
	})
	l, err := engine.NewLimit(engine.KindFixed, 1_000_000, 3600e9, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{} // key -> checks
	apply := func(keys, rounds int) {
		for range rounds {
			for i := range keys {
				k := fmt.Sprintf("key:%d", i)
				store.Apply([]byte(k), now.Load(), &check{l: l, cost: 1})
				want[k]++
			}
		}
	}
	apply(100, 1)
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Stop(t)
	apply(300, 5) // 300 keys, each changed 5 times
	if err := p.Flush(context.Background()); err == nil {
		t.Fatal("Flush succeeded with PostgreSQL stopped")
	} else if persist.CodeOf(err) != persist.CodeBackend {
		t.Fatalf("Flush error %v has code %q, want %q", err, persist.CodeOf(err), persist.CodeBackend)
	}
	now.Add(3e9)
	s := p.Stats()
	if s.Healthy || !p.Refusing() || s.DirtyKeys != 300 || s.LagMs < 3000 || s.Errors == 0 {
		t.Fatalf("during the outage: stats %+v, refusing %v; want unhealthy, 300 dirty keys, lag >= 3000 ms", s, p.Refusing())
	}
	p.Start() // the background flusher retries with backoff
	apply(300, 2)
	if p.Stats().DirtyKeys > 300 {
		t.Fatalf("dirty keys %d > distinct keys 300", p.Stats().DirtyKeys)
	}
	srv.Restart(t)
	waitFor(t, "catch-up after restart", func() bool {
		s := p.Stats()
		return s.Healthy && s.DirtyKeys == 0 && s.LagMs == 0
	})
	if p.Refusing() {
		t.Fatal("still refusing after catch-up")
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	be = open(t, url)
	defer be.Close()
	got := loadMap(t, be, now.Load())
	if len(got) != len(want) {
		t.Fatalf("loaded %d keys, want %d", len(got), len(want))
	}
	for k, n := range want {
		d, err := l.Peek(got[k].State, now.Load())
		if err != nil || d.Remaining != 1_000_000-n {
			t.Fatalf("key %s: remaining %d (%v), want %d", k, d.Remaining, err, 1_000_000-n)
		}
	}
}

func TestOpenBadURL(t *testing.T) {
	for _, u := range []string{
		"",
		"redis://localhost",
		"postgres://localhost/db?table=1bad",
		"postgres://localhost/db?table=a-b",
		"postgres://localhost/db?write=bulk",
		"dynamodb://bad-name?region=x",
		"dynamodb://tbl?endpoint=ftp://x",
		"dynamodb://tbl?segments=0",
		"dynamodb://tbl?parallel=100",
		"dynamodb://tbl?colour=blue",
		"::",
		"dynamodb://ab?region=x",
		"postgres://h/db?table=" + strings.Repeat("x", 49),
	} {
		_, err := persist.Open(context.Background(), u, persist.Options{})
		if persist.CodeOf(err) != persist.CodeBadURL || !strings.HasPrefix(err.Error(), "persist: ") {
			t.Errorf("Open(%q) = %v, want a %s error", u, err, persist.CodeBadURL)
		}
	}
}

func TestParseModePolicy(t *testing.T) {
	for _, tc := range []struct {
		in   string
		mode persist.Mode
		ok   bool
	}{{"async", persist.ModeAsync, true}, {"sync", persist.ModeSync, true}, {"SYNC", 0, false}, {"", 0, false}} {
		m, err := persist.ParseMode(tc.in)
		if (err == nil) != tc.ok || m != tc.mode || (tc.ok && m.String() != tc.in) {
			t.Errorf("ParseMode(%q) = %v, %v", tc.in, m, err)
		}
	}
	for _, tc := range []struct {
		in string
		p  persist.Policy
		ok bool
	}{{"open", persist.FailOpen, true}, {"closed", persist.FailClosed, true}, {"close", 0, false}} {
		p, err := persist.ParsePolicy(tc.in)
		if (err == nil) != tc.ok || p != tc.p || (tc.ok && p.String() != tc.in) {
			t.Errorf("ParsePolicy(%q) = %v, %v", tc.in, p, err)
		}
	}
}
