package persist_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/persist"
	"github.com/throttlekit/throttlekit-server/shard"
)

// testMixedWrites writes batches that mix keys with rows, keys without and
// tombstones, after enough batches of existing keys that the Postgres
// backend has gone back to updating first (see writeUnnest), and checks
// that every row ends as the last batch said.
func testMixedWrites(t *testing.T, b backend) {
	be := open(t, b.url(freshTable(t)))
	defer be.Close()
	r := rand.New(rand.NewPCG(5, 6))
	old := randomRecords(r, 200, t0)
	if err := be.Write(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	want := map[string]persist.Record{}
	for _, rec := range old {
		want[string(rec.Key)] = rec
	}
	for round := range 12 {
		batch := make([]persist.Record, 0, 60)
		for i := round * 10; i < round*10+40; i++ {
			rec := old[i%len(old)]
			rec.State.A += int64(round + 1)
			if i%7 == 0 {
				rec = persist.Record{Key: rec.Key} // tombstone
			}
			batch = append(batch, rec)
		}
		if round%4 == 3 { // keys never written before, among existing ones
			for i := range 20 {
				batch = append(batch, persist.Record{
					Key:      fmt.Appendf(nil, "new:%d:%d", round, i),
					State:    engine.State{A: int64(i), B: 1, Kind: engine.KindGCRA},
					ExpireAt: t0 + 3600e9,
				})
			}
		}
		if err := be.Write(context.Background(), batch); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, rec := range batch {
			if rec.Tombstone() {
				delete(want, string(rec.Key))
			} else {
				want[string(rec.Key)] = rec
			}
		}
	}
	got := loadMap(t, be, t0)
	if len(got) != len(want) {
		t.Fatalf("loaded %d keys, want %d", len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || g.State != w.State || g.ExpireAt != w.ExpireAt {
			t.Fatalf("key %q: got %+v (present %v), want %+v", k, g, ok, w)
		}
	}
}

// flakyBackend keeps rows in a map and fails the Writes it is told to.
type flakyBackend struct {
	mu     sync.Mutex
	rows   map[string]persist.Record
	writes int
	failAt map[int]bool // 1-based numbers of the Writes that fail
}

func (f *flakyBackend) Name() string { return "flaky" }

func (f *flakyBackend) Load(context.Context, int64, func([]byte, engine.State, int64) error) error {
	return nil
}

func (f *flakyBackend) Write(_ context.Context, recs []persist.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.writes++
	if f.failAt[f.writes] {
		return errors.New("injected failure")
	}
	seen := map[string]bool{}
	for _, r := range recs {
		if seen[string(r.Key)] {
			return fmt.Errorf("key %q twice in one Write", r.Key)
		}
		seen[string(r.Key)] = true
		if r.Tombstone() {
			delete(f.rows, string(r.Key))
		} else {
			f.rows[string(r.Key)] = persist.Record{Key: append([]byte(nil), r.Key...), State: r.State, ExpireAt: r.ExpireAt}
		}
	}
	return nil
}

func (f *flakyBackend) Expire(context.Context, int64) (int64, error) { return 0, nil }
func (f *flakyBackend) Close() error                                 { return nil }

// TestFlushFailsPartWay fails the second batch of a flush: the first
// batch stays written, the records left wait (coalesced with later
// changes, deletions included) and the next flush writes exactly those.
func TestFlushFailsPartWay(t *testing.T) {
	store := shard.New(shard.Config{Shards: 4, MaxKeys: 10000})
	be := &flakyBackend{rows: map[string]persist.Record{}, failAt: map[int]bool{2: true}}
	p := persist.New(be, store, persist.Config{BatchSize: 10, Now: func() int64 { return t0 }, ExpireEvery: -1})
	if _, err := p.LoadAll(context.Background(), t0); err != nil {
		t.Fatal(err)
	}
	l, err := engine.NewLimit(engine.KindFixed, 1000, 3600e9, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	apply := func(from, to int) {
		for i := from; i < to; i++ {
			k := fmt.Sprintf("key:%d", i)
			store.Apply([]byte(k), t0, &check{l: l, cost: 1})
			want[k]++
		}
	}
	apply(0, 35)
	if err := p.Flush(context.Background()); err == nil {
		t.Fatal("Flush succeeded through an injected failure")
	}
	if s := p.Stats(); s.DirtyKeys != 25 || s.RowsWritten != 10 {
		t.Fatalf("after the failure: %d dirty keys, %d rows written; want 25 and 10", s.DirtyKeys, s.RowsWritten)
	}
	apply(20, 50) // keys still waiting change again; new keys come
	store.Delete([]byte("key:30"), t0)
	delete(want, "key:30")
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The retry writes the 25 records left and the keys changed since, some
	// of them in the batch that was written: between 40 and 50 records.
	if s := p.Stats(); s.DirtyKeys != 0 || s.RowsDeleted != 1 || s.RowsWritten < 10+39 || s.RowsWritten > 10+49 {
		t.Fatalf("after the retry: stats %+v; want 0 dirty keys, 1 deletion, 49 to 59 rows written", s)
	}
	if len(be.rows) != len(want) {
		t.Fatalf("backend holds %d keys, want %d", len(be.rows), len(want))
	}
	for k, n := range want {
		d, err := l.Peek(be.rows[k].State, t0)
		if err != nil || d.Remaining != 1000-n {
			t.Fatalf("key %s: remaining %d (%v), want %d", k, d.Remaining, err, 1000-n)
		}
	}
}
