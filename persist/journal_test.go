package persist

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/pgtest"
)

func decodeAll(t testing.TB, buf []byte) []Record {
	t.Helper()
	var got []Record
	err := decodeJournal(buf, func(key []byte, st engine.State, exp int64) {
		got = append(got, Record{Key: bytes.Clone(key), State: st, ExpireAt: exp})
	})
	if err != nil {
		t.Fatalf("decodeJournal: %v", err)
	}
	return got
}

func TestJournalRoundTrip(t *testing.T) {
	big := bytes.Repeat([]byte{0xfe}, 64<<10)
	for _, tc := range []struct {
		name string
		recs []Record
	}{
		{"empty", nil},
		{"tombstone", []Record{{Key: []byte("gone")}}},
		{"empty key", []Record{{Key: []byte{}, State: engine.State{Kind: engine.KindGCRA, A: 1}, ExpireAt: 2}}},
		{"extremes", []Record{
			{Key: []byte("min"), State: engine.State{Kind: 255, A: math.MinInt64, B: math.MinInt64}, ExpireAt: math.MinInt64},
			{Key: []byte("max"), State: engine.State{Kind: 1, A: math.MaxInt64, B: math.MaxInt64}, ExpireAt: math.MaxInt64},
			{Key: []byte("gone")},
		}},
		{"64 KiB key", []Record{{Key: big, State: engine.State{Kind: engine.KindFixed, A: -3, B: 4}, ExpireAt: 1e18}, {Key: []byte("x")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			buf := appendJournal([]byte("prefix"), tc.recs)
			if !bytes.HasPrefix(buf, []byte("prefix")) {
				t.Fatal("appendJournal overwrote its destination")
			}
			got := decodeAll(t, buf[len("prefix"):])
			if len(got) != len(tc.recs) {
				t.Fatalf("decoded %d records, want %d", len(got), len(tc.recs))
			}
			for i := range got {
				w := tc.recs[i]
				if !bytes.Equal(got[i].Key, w.Key) || got[i].State != w.State || got[i].ExpireAt != w.ExpireAt {
					t.Errorf("record %d = %+v, want %+v", i, got[i], w)
				}
				if got[i].Tombstone() != w.Tombstone() {
					t.Errorf("record %d: tombstone %v, want %v", i, got[i].Tombstone(), w.Tombstone())
				}
			}
		})
	}
}

func TestJournalDecodeBad(t *testing.T) {
	good := appendJournal(nil, []Record{{Key: []byte("key"), State: engine.State{Kind: 1, A: 300, B: -300}, ExpireAt: 1 << 40}})
	bad := [][]byte{nil, {}, {0}, {2}, {journalV1, 5, 'a'}, {journalV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
	for i := 1; i < len(good); i++ {
		bad = append(bad, good[:i:i])
	}
	for _, b := range bad {
		if len(b) == 1 && b[0] == journalV1 {
			continue // a valid empty row
		}
		if err := decodeJournal(b, func([]byte, engine.State, int64) {}); err == nil {
			t.Errorf("decodeJournal(%x) = nil, want an error", b)
		}
	}
}

// FuzzJournalDecode checks that the decoder never panics and that the
// records of what it accepts encode and decode back to themselves.
func FuzzJournalDecode(f *testing.F) {
	f.Add(appendJournal(nil, nil))
	f.Add(appendJournal(nil, []Record{{Key: []byte("k"), State: engine.State{Kind: 3, A: 1, B: -1}, ExpireAt: 99}, {Key: []byte("t")}}))
	f.Fuzz(func(t *testing.T, buf []byte) {
		var recs []Record
		err := decodeJournal(buf, func(key []byte, st engine.State, exp int64) {
			recs = append(recs, Record{Key: bytes.Clone(key), State: st, ExpireAt: exp})
		})
		if err != nil {
			return
		}
		again := decodeAll(t, appendJournal(nil, recs))
		if len(again) != len(recs) {
			t.Fatalf("re-decoded %d records, want %d", len(again), len(recs))
		}
		for i := range recs {
			if !bytes.Equal(again[i].Key, recs[i].Key) || again[i].State != recs[i].State || again[i].ExpireAt != recs[i].ExpireAt {
				t.Fatalf("record %d changed: %+v then %+v", i, recs[i], again[i])
			}
		}
	})
}

var journalSeq atomic.Int64

// openJournal opens a fresh table that folds only when told to.
func openJournal(t *testing.T, srv *pgtest.Server) (*postgres, string) {
	t.Helper()
	table := fmt.Sprintf("j%d_%d", time.Now().UnixNano()%1e9, journalSeq.Add(1))
	url := srv.URL + "&fold=1000h&table=" + table
	return reopenJournal(t, url), url
}

func reopenJournal(t *testing.T, url string) *postgres {
	t.Helper()
	be, err := Open(context.Background(), url, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return be.(*postgres)
}

func loadAll(t *testing.T, be Backend, now int64) map[string]Record {
	t.Helper()
	got := map[string]Record{}
	err := be.Load(context.Background(), now, func(key []byte, st engine.State, exp int64) error {
		if _, dup := got[string(key)]; dup {
			t.Errorf("key %q loaded twice", key)
		}
		got[string(key)] = Record{Key: bytes.Clone(key), State: st, ExpireAt: exp}
		return nil
	})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return got
}

func journalRows(t *testing.T, p *postgres) int {
	t.Helper()
	var n int
	if err := p.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+p.table+`_journal`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func tableRows(t *testing.T, p *postgres) int {
	t.Helper()
	var n int
	if err := p.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+p.ident).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func same(t *testing.T, what string, got, want map[string]Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d keys, want %d", what, len(got), len(want))
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok || g.State != w.State || g.ExpireAt != w.ExpireAt {
			t.Errorf("%s: key %q = %+v (present %v), want %+v", what, k, g, ok, w)
		}
	}
}

// TestPostgresJournal writes batches through the journal with random
// repeats and tombstones and checks that the loaded states are the same
// before any fold, after a fold, after reopening, and after Close (which
// leaves the journal empty).
func TestPostgresJournal(t *testing.T) {
	srv := pgtest.Start(t)
	const now = int64(1e18)
	ctx := context.Background()

	t.Run("Replay", func(t *testing.T) {
		p, url := openJournal(t, srv)
		defer p.Close()
		r := rand.New(rand.NewPCG(1, 2))
		want := map[string]Record{}
		for batch := range 30 {
			seen := map[string]bool{}
			var recs []Record
			for range 40 {
				k := fmt.Sprintf("k%d", r.IntN(100))
				if seen[k] {
					continue
				}
				seen[k] = true
				rec := Record{Key: []byte(k), State: engine.State{Kind: engine.KindGCRA, A: int64(batch), B: r.Int64()}, ExpireAt: now + 1 + r.Int64N(1e12)}
				if r.IntN(5) == 0 {
					rec = Record{Key: []byte(k)}
				}
				recs = append(recs, rec)
				if rec.Tombstone() {
					delete(want, k)
				} else {
					want[k] = rec
				}
			}
			if err := p.Write(ctx, recs); err != nil {
				t.Fatal(err)
			}
			if batch == 14 {
				// Fold half way: the table then holds older states than
				// the journal rows that follow.
				p.mu.Lock()
				err := p.foldAllLocked(ctx)
				p.mu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
				if n := journalRows(t, p); n != 0 {
					t.Fatalf("%d journal rows after a fold", n)
				}
			}
		}
		if n := journalRows(t, p); n != 15 {
			t.Errorf("%d journal rows, want 15", n)
		}
		same(t, "load before the fold", loadAll(t, p, now), want)
		// A second writer cannot open the table; after Close the journal
		// is folded away and a new writer loads the same.
		if _, err := Open(ctx, url, Options{}); CodeOf(err) != CodeInUse {
			t.Fatalf("second Open: %v, want %s", err, CodeInUse)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		q := reopenJournal(t, url)
		defer q.Close()
		if n := journalRows(t, q); n != 0 {
			t.Errorf("%d journal rows after Close, want 0", n)
		}
		if n := tableRows(t, q); n != len(want) {
			t.Errorf("%d table rows after Close, want %d", n, len(want))
		}
		same(t, "load after Close", loadAll(t, q, now), want)
	})

	t.Run("JournalWins", func(t *testing.T) {
		p, url := openJournal(t, srv)
		st := func(a int64) engine.State { return engine.State{Kind: engine.KindFixed, A: a, B: 1} }
		first := []Record{
			{Key: []byte("deleted"), State: st(1), ExpireAt: now + 10},
			{Key: []byte("newer"), State: st(1), ExpireAt: now + 10},
			{Key: []byte("expired later"), State: st(1), ExpireAt: now + 10},
			{Key: []byte("kept"), State: st(1), ExpireAt: now + 10},
		}
		if err := p.Write(ctx, first); err != nil {
			t.Fatal(err)
		}
		p.mu.Lock()
		err := p.foldAllLocked(ctx)
		p.mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
		second := []Record{
			{Key: []byte("deleted")},
			{Key: []byte("newer"), State: st(2), ExpireAt: now + 20},
			{Key: []byte("expired later"), State: st(2), ExpireAt: now - 1},
			{Key: []byte("journal only"), State: st(3), ExpireAt: now + 30},
		}
		if err := p.Write(ctx, second); err != nil {
			t.Fatal(err)
		}
		want := map[string]Record{
			"newer":        {State: st(2), ExpireAt: now + 20},
			"kept":         {State: st(1), ExpireAt: now + 10},
			"journal only": {State: st(3), ExpireAt: now + 30},
		}
		same(t, "load", loadAll(t, p, now), want)
		// A crash: the session goes without folding. The next writer
		// finds the journal and loads the same, then folds it.
		p.mu.Lock()
		if _, err := p.conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, p.lockID); err != nil {
			t.Fatal(err)
		}
		p.conn.Close(ctx)
		p.conn = nil
		p.mu.Unlock()
		p.pool.Close()
		q := reopenJournal(t, url)
		same(t, "load after a crash", loadAll(t, q, now), want)
		if n := journalRows(t, q); n != 1 {
			t.Errorf("%d journal rows after a crash, want 1", n)
		}
		if err := q.Close(); err != nil {
			t.Fatal(err)
		}
		r := reopenJournal(t, url+"&journal=off")
		defer r.Close()
		if n := journalRows(t, r); n != 0 {
			t.Errorf("%d journal rows after Close, want 0", n)
		}
		same(t, "load after the fold", loadAll(t, r, now), want)
	})

	t.Run("FoldOnWrite", func(t *testing.T) {
		// A tiny fold period: a Write cuts when no fold is under way, and
		// the next Write finishes that fold (its period has passed), so the
		// journal never holds more than two rows.
		table := fmt.Sprintf("j%d_%d", time.Now().UnixNano()%1e9, journalSeq.Add(1))
		p := reopenJournal(t, srv.URL+"&fold=1ns&table="+table)
		defer p.Close()
		want := map[string]Record{}
		for round := range 4 {
			recs := make([]Record, 0, foldChunk*16)
			for i := range cap(recs) {
				rec := Record{Key: []byte(fmt.Sprintf("key-%d", i)), State: engine.State{Kind: engine.KindGCRA, A: int64(round), B: 7}, ExpireAt: now + 1}
				recs = append(recs, rec)
				want[string(rec.Key)] = rec
			}
			if err := p.Write(ctx, recs); err != nil {
				t.Fatal(err)
			}
			if n := journalRows(t, p); n > 2 {
				t.Errorf("round %d: %d journal rows, want at most 2", round, n)
			}
		}
		same(t, "load", loadAll(t, p, now), want)
	})

	t.Run("URL", func(t *testing.T) {
		for _, bad := range []string{"journal=maybe", "fold=0s", "fold=soon"} {
			if _, err := parseURL("postgres://h/db?" + bad); CodeOf(err) != CodeBadURL || !strings.Contains(err.Error(), strings.SplitN(bad, "=", 2)[1]) {
				t.Errorf("parseURL(%s) = %v, want a %s error naming the value", bad, err, CodeBadURL)
			}
		}
		got, err := parseURL("postgres://h/db?journal=off&fold=250ms")
		if err != nil {
			t.Fatal(err)
		}
		if c := got.pg; c.journal || c.foldEvery != 250*time.Millisecond || len(c.pool.ConnConfig.RuntimeParams) != 0 {
			t.Errorf("parseURL = journal %v fold %v params %v", c.journal, c.foldEvery, c.pool.ConnConfig.RuntimeParams)
		}
	})
}
