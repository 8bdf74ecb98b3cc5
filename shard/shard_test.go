package shard

import (
	"bytes"
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
)

const t0 = int64(1_800_000_000) * 1e9

// inc is an engine-like transform: count in A, last time in B, fixed TTL.
type inc struct {
	ttl  int64
	seen engine.State
}

func (c *inc) Apply(cur engine.State, now int64) (engine.State, int64) {
	c.seen = cur
	return engine.State{A: cur.A + 1, B: now, Kind: engine.KindGCRA}, c.ttl
}

func key(i int) []byte { return []byte(fmt.Sprintf("flood:%08d", i)) }

// checkInvariants verifies the shard tables against the wheels: every live
// handle is found by its key and the counts agree.
func checkInvariants(t *testing.T, s *Store) {
	t.Helper()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		live, slots := 0, 0
		for h := uint32(0); h < sh.w.Cap(); h++ {
			if !sh.w.Allocated(h) {
				continue
			}
			live++
			k := sh.keyOf(h)
			if _, got, ok := sh.find(k, hashOf(s, k)); !ok || got != h {
				t.Fatalf("shard %d: key %q of handle %d not found (got %d, %v)", i, k, h, got, ok)
			}
		}
		for _, v := range sh.table {
			if v != 0 {
				slots++
			}
		}
		// Linear probing without tombstones: every slot from a key's home
		// to the key's slot is occupied, or find would stop short of it.
		for pos, v := range sh.table {
			if v == 0 {
				continue
			}
			for i := homeOf(hashOf(s, sh.keyOf(v&idxMask-1)), len(sh.table)); i != pos; i = (i + 1) % len(sh.table) {
				if sh.table[i] == 0 {
					t.Fatalf("shard %d: empty slot %d between the home and slot %d of handle %d", i, i, pos, v&idxMask-1)
				}
			}
		}
		if live != sh.count || slots != sh.count || sh.w.Live() != sh.count {
			t.Fatalf("shard %d: live %d slots %d wheel %d count %d", i, live, slots, sh.w.Live(), sh.count)
		}
		if sh.count > sh.max {
			t.Fatalf("shard %d: count %d > max %d", i, sh.count, sh.max)
		}
		sh.mu.Unlock()
	}
}

func TestNewShardCounts(t *testing.T) {
	tests := []struct {
		cfg        Config
		wantShards int
		wantMax    int
	}{
		{Config{Shards: 3, MaxKeys: 100}, 4, 100},
		{Config{Shards: 8, MaxKeys: 3}, 2, 3},
		{Config{Shards: 1, MaxKeys: 1}, 1, 1},
		{Config{Shards: 1, MaxKeys: 40_000_000}, 64, 40_000_000}, // raised: at most MaxKeysPerShard (about 1M) a shard
		{Config{Shards: 5}, 8, 8 * MaxKeysPerShard},              // no MaxKeys: the shards asked for, bounded by what they index
		{Config{Shards: 16}, 16, DefaultMaxKeys},
	}
	for _, tc := range tests {
		s := New(tc.cfg)
		total := 0
		for i := range s.shards {
			total += s.shards[i].max
			if s.shards[i].max < 1 {
				t.Errorf("%+v: shard %d may hold no key", tc.cfg, i)
			}
		}
		if len(s.shards) != tc.wantShards || total != tc.wantMax {
			t.Errorf("%+v: %d shards holding %d, want %d holding %d", tc.cfg, len(s.shards), total, tc.wantShards, tc.wantMax)
		}
	}
}

// TestModel compares the store with a map under random applies, deletes,
// gets and time steps, across table growth, backward-shift deletion and
// arena compaction.
func TestModel(t *testing.T) {
	for _, shards := range []int{1, 4} {
		s := New(Config{Shards: shards, MaxKeys: 1 << 20})
		type rec struct {
			a   int64
			exp int64
		}
		model := map[string]rec{}
		r := rand.New(rand.NewPCG(uint64(shards), 1))
		now := t0
		for step := 0; step < 60_000; step++ {
			k := []byte(fmt.Sprintf("k%d-%s", r.IntN(3000), bytes.Repeat([]byte("x"), r.IntN(40))))
			switch op := r.IntN(10); {
			case op < 6:
				ttl := r.Int64N(5e9) + 1
				c := &inc{ttl: ttl}
				s.Apply(k, now, c)
				m, ok := model[string(k)]
				if !ok || m.exp <= now {
					m = rec{}
				}
				if c.seen.A != m.a {
					t.Fatalf("step %d: %q saw A=%d, model %d", step, k, c.seen.A, m.a)
				}
				model[string(k)] = rec{m.a + 1, now + ttl}
			case op < 7:
				got := s.Delete(k, now)
				m, ok := model[string(k)]
				if want := ok && m.exp > now; got != want {
					t.Fatalf("step %d: Delete(%q) = %v, want %v", step, k, got, want)
				}
				delete(model, string(k))
			case op < 9:
				st, ok := s.Get(k, now)
				m, mok := model[string(k)]
				want := mok && m.exp > now
				if ok != want || ok && st.A != m.a {
					t.Fatalf("step %d: Get(%q) = %+v,%v want A=%d,%v", step, k, st, ok, m.a, want)
				}
			default:
				now += r.Int64N(200e6)
				if r.IntN(4) == 0 {
					s.Sweep(now)
				}
			}
		}
		checkInvariants(t, s)
		s.Sweep(now + 10e9)
		if n := s.Len(); n != 0 {
			t.Fatalf("Len after sweeping past every TTL = %d", n)
		}
		checkInvariants(t, s)
	}
}

func hashOf(s *Store, k []byte) uint64 { return maphash.Bytes(s.seed, k) }

// TestTableLen checks the table growth steps: 4, 5, 6 and 7 times a power
// of two, so that right after a resize the table is at least 60% full.
func TestTableLen(t *testing.T) {
	want := []int{8, 10, 12, 14, 16, 20, 24, 28, 32, 40, 48, 56, 64, 80}
	n := 0
	for i, w := range want {
		if n = nextTableLen(n); n != w {
			t.Fatalf("step %d: length %d, want %d", i, n, w)
		}
	}
	for n := minTable; n < 1<<26; n = nextTableLen(n) {
		next := nextTableLen(n)
		if k := next >> (bits.Len(uint(next)) - 3); k < 4 || k > 7 || next%(next>>(bits.Len(uint(next))-3)) != 0 {
			t.Fatalf("length %d is not 4..7 times a power of two", next)
		}
		// A table grows when it would pass 3/4 full; then it holds
		// 3n/4+1 keys in next slots.
		if load := float64(3*n/4+1) / float64(next); load < 0.6 {
			t.Fatalf("growing %d -> %d leaves the table %.2f full", n, next, load)
		}
	}
	s := New(Config{Shards: 1})
	for i := 0; i < 100_000; i++ {
		s.Apply(key(i), t0, &inc{ttl: 3600e9})
	}
	if got := len(s.shards[0].table); got != 163840 { // 5<<15: 100k keys > 3/4 of 131072, <= 3/4 of 163840
		t.Fatalf("table for 100k keys has %d slots, want 163840", got)
	}
	checkInvariants(t, s)
}

// TestUnchangedApplyReferences checks that an Apply which leaves a live key
// unchanged (a denied request, a peek) still counts as a use for CLOCK.
func TestUnchangedApplyReferences(t *testing.T) {
	const maxKeys = 1024
	s := New(Config{Shards: 1, MaxKeys: maxKeys})
	hot := []byte("hot")
	s.Apply(hot, t0, &inc{ttl: 3600e9})
	for i := 0; i < 10*maxKeys; i++ {
		s.Apply(key(i), t0, &inc{ttl: 3600e9})
		if i%(maxKeys/4) == 0 {
			p := &peek{}
			s.Apply(hot, t0, p)
			if p.seen.A != 1 {
				t.Fatalf("hot key evicted after %d flood keys", i+1)
			}
		}
	}
	checkInvariants(t, s)
}

// peek is a transform that returns the state it is given.
type peek struct{ seen engine.State }

func (p *peek) Apply(cur engine.State, now int64) (engine.State, int64) {
	p.seen = cur
	return cur, 1
}

// TestFlood pushes 10 x MaxKeys unique keys through the store in waves; a
// hot key touched between waves must survive, a key never touched again
// must not, and Len must stay bounded. Long keys (kept in the arena) also
// check that compaction keeps the arena within about twice the live bytes.
func TestFlood(t *testing.T) {
	tests := []struct {
		name   string
		suffix string
	}{
		{"inline keys", ""},
		{"arena keys", ":a-rather-long-tenant-and-route-name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const maxKeys = 4096
			s := New(Config{Shards: 4, MaxKeys: maxKeys})
			hot, cold := []byte("hot"+tc.suffix), []byte("cold"+tc.suffix)
			now := t0
			s.Apply(hot, now, &inc{ttl: 3600e9})
			s.Apply(cold, now, &inc{ttl: 3600e9})
			const wave = maxKeys / 4
			for i := 0; i < 10*maxKeys; i++ {
				s.Apply(append(key(i), tc.suffix...), now, &inc{ttl: 3600e9})
				if n := s.Len(); n > maxKeys {
					t.Fatalf("after %d keys Len = %d > %d", i+1, n, maxKeys)
				}
				if i%wave == wave-1 {
					if _, ok := s.Get(hot, now); !ok {
						t.Fatalf("hot key evicted after %d flood keys", i+1)
					}
					s.Apply(hot, now, &inc{ttl: 3600e9})
				}
			}
			st := s.Stats()
			if st.Keys != maxKeys || st.Evicted < 9*maxKeys || st.Expired != 0 {
				t.Fatalf("Stats = %+v, want Keys=%d Evicted>=%d Expired=0", st, maxKeys, 9*maxKeys)
			}
			if got, ok := s.Get(hot, now); !ok || got.A != 1+10*maxKeys/wave {
				t.Fatalf("hot key = %+v,%v", got, ok)
			}
			if _, ok := s.Get(cold, now); ok {
				t.Fatal("a key never touched again survived a flood of 10 x MaxKeys")
			}
			checkInvariants(t, s)
			for i := range s.shards {
				a := &s.shards[i].keys
				if a.dead > a.live+arenaChunk || a.bytes() > int64(2*a.live+2*arenaChunk) {
					t.Fatalf("shard %d: arena holds %d bytes, %d live, %d dead: not compacted", i, a.bytes(), a.live, a.dead)
				}
				if tc.suffix != "" && a.live == 0 {
					t.Fatalf("shard %d: long keys not in the arena", i)
				}
			}
		})
	}
}

func TestEvictionPrefersExpired(t *testing.T) {
	s := New(Config{Shards: 1, MaxKeys: 100})
	for i := 0; i < 100; i++ {
		ttl := int64(3600e9)
		if i%2 == 0 {
			ttl = 1e9
		}
		s.Apply(key(i), t0, &inc{ttl: ttl})
	}
	// Past the short TTLs but before any sweep: inserting 50 new keys must
	// reclaim the 50 expired ones, not evict live ones.
	for i := 100; i < 150; i++ {
		s.Apply(key(i), t0+2e9+int64(i), &inc{ttl: 3600e9})
	}
	st := s.Stats()
	if st.Evicted != 0 || st.Expired != 50 || st.Keys != 100 {
		t.Fatalf("Stats = %+v, want Evicted 0 Expired 50 Keys 100", st)
	}
}

func TestSweepReclaimsDueKeysOnly(t *testing.T) {
	s := New(Config{Shards: 4})
	for i := 0; i < 1000; i++ {
		ttl := int64(3600e9)
		if i < 300 {
			ttl = int64(1+i%10) * 1e8 // 0.1 .. 1 s
		}
		s.Apply(key(i), t0, &inc{ttl: ttl})
	}
	if n := s.Sweep(t0 + 50e6); n != 0 {
		t.Fatalf("Sweep before any TTL reclaimed %d", n)
	}
	got := s.Sweep(t0 + 2e9)
	if got != 300 || s.Len() != 700 || s.Stats().Expired != 300 {
		t.Fatalf("Sweep = %d, Len %d, Stats %+v; want 300 reclaimed, 700 left", got, s.Len(), s.Stats())
	}
	var fired, cascaded uint64
	for i := range s.shards {
		f, c, _ := s.shards[i].w.Work()
		fired += f
		cascaded += c
	}
	if fired != 300 || cascaded > 300*5 {
		t.Fatalf("wheel work: fired %d cascaded %d", fired, cascaded)
	}
	checkInvariants(t, s)
}

func TestApplyReclaimsLazily(t *testing.T) {
	s := New(Config{Shards: 1})
	for i := 0; i < 100; i++ {
		s.Apply(key(i), t0, &inc{ttl: 1e9})
	}
	s.Apply([]byte("other"), t0+3e9, &inc{ttl: 1e9}) // drives the wheel
	if n := s.Len(); n != 1 {
		t.Fatalf("Len = %d after an access past every TTL, want 1", n)
	}
}

func TestRunSweeper(t *testing.T) {
	s := New(Config{Shards: 2})
	for i := 0; i < 10; i++ {
		s.Apply(key(i), t0, &inc{ttl: 1e9})
	}
	var clock atomic.Int64
	clock.Store(t0 + 5e9)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.RunSweeper(ctx, time.Millisecond, clock.Load); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for s.Len() != 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	if n := s.Len(); n != 0 {
		t.Fatalf("sweeper left %d expired keys", n)
	}
}

func TestLongKeys(t *testing.T) {
	s := New(Config{Shards: 1})
	long := bytes.Repeat([]byte("k"), MaxKeyLen)
	s.Apply(long, t0, &inc{ttl: 1e9})
	if st, ok := s.Get(long, t0); !ok || st.A != 1 {
		t.Fatalf("key of MaxKeyLen bytes not kept: %+v %v", st, ok)
	}
	tooLong := append(long, 'x')
	c := &inc{ttl: 1e9}
	s.Apply(tooLong, t0, c)
	s.Apply(tooLong, t0, c)
	if c.seen.A != 0 {
		t.Fatal("a key longer than MaxKeyLen kept state")
	}
	if _, ok := s.Get(tooLong, t0); ok || s.Delete(tooLong, t0) || s.Len() != 1 {
		t.Fatal("a key longer than MaxKeyLen is visible")
	}
	s.Apply(nil, t0, &inc{ttl: 1e9})
	if st, ok := s.Get([]byte{}, t0); !ok || st.A != 1 {
		t.Fatal("the empty key is not kept")
	}
}

type flushed struct {
	st  engine.State
	exp int64
}

func flushAll(s *Store) (map[string]flushed, []string) {
	got := map[string]flushed{}
	var order []string
	s.Flush(func(k []byte, st engine.State, exp int64) {
		got[string(k)] = flushed{st, exp}
		order = append(order, string(k))
	})
	return got, order
}

func TestFlushAndLoad(t *testing.T) {
	s := New(Config{Shards: 4})
	for i := 0; i < 100; i++ {
		s.Apply(key(i), t0, &inc{ttl: 10e9})
	}
	first, _ := flushAll(s)
	if len(first) != 100 {
		t.Fatalf("first Flush visited %d keys, want all 100", len(first))
	}
	if f := first[string(key(7))]; f.st.A != 1 || f.exp != t0+10e9 || f.st.Kind != engine.KindGCRA {
		t.Fatalf("first Flush of key 7 = %+v", f)
	}
	if again, _ := flushAll(s); len(again) != 0 {
		t.Fatalf("Flush with no changes visited %d keys", len(again))
	}
	// Change 3 keys (one twice), delete one, peek one, create one.
	s.Apply(key(1), t0+1, &inc{ttl: 10e9})
	s.Apply(key(2), t0+1, &inc{ttl: 10e9})
	s.Apply(key(2), t0+2, &inc{ttl: 10e9})
	s.Delete(key(3), t0+1)
	s.Get(key(4), t0+1)
	s.Apply([]byte("new"), t0+1, &inc{ttl: 10e9})
	got, _ := flushAll(s)
	want := map[string]flushed{
		string(key(1)): {engine.State{A: 2, B: t0 + 1, Kind: engine.KindGCRA}, t0 + 1 + 10e9},
		string(key(2)): {engine.State{A: 3, B: t0 + 2, Kind: engine.KindGCRA}, t0 + 2 + 10e9},
		string(key(3)): {engine.State{}, 0},
		"new":          {engine.State{A: 1, B: t0 + 1, Kind: engine.KindGCRA}, t0 + 1 + 10e9},
	}
	if len(got) != len(want) {
		t.Fatalf("Flush visited %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("Flush %q = %+v, want %+v", k, got[k], w)
		}
	}
	// Deleted then re-created: the tombstone comes first.
	s.Delete(key(5), t0+3)
	s.Apply(key(5), t0+3, &inc{ttl: 10e9})
	got, order := flushAll(s)
	if len(order) != 2 || order[0] != string(key(5)) || order[1] != string(key(5)) || got[string(key(5))].st.A != 1 {
		t.Fatalf("delete+create flushed %v %+v", order, got)
	}
	// Churn between flushes must not duplicate handles on the dirty list.
	for round := 0; round < 5; round++ {
		for i := 0; i < 100; i++ {
			s.Delete(key(i), t0+4)
			s.Apply(key(i), t0+4, &inc{ttl: 10e9})
		}
	}
	for i := range s.shards {
		if d := len(s.shards[i].dirty); d > s.shards[i].count {
			t.Fatalf("shard %d: dirty list %d longer than its %d keys", i, d, s.shards[i].count)
		}
	}
	flushAll(s)

	// Restore everything into a fresh store and compare.
	src := New(Config{Shards: 2})
	for i := 0; i < 50; i++ {
		for j := 0; j <= i%3; j++ {
			src.Apply(key(i), t0, &inc{ttl: int64(i+1) * 1e9})
		}
	}
	all, _ := flushAll(src)
	dst := New(Config{Shards: 8})
	for k, f := range all {
		if !dst.Load([]byte(k), f.st, f.exp, t0+5e8) {
			t.Fatalf("Load(%q) refused", k)
		}
	}
	if dst.Load([]byte("old"), engine.State{A: 1, Kind: engine.KindGCRA}, t0, t0+1) {
		t.Fatal("Load of an expired state accepted")
	}
	for i := 0; i < 50; i++ {
		a, aok := src.Get(key(i), t0+5e8)
		b, bok := dst.Get(key(i), t0+5e8)
		if a != b || aok != bok || !aok {
			t.Fatalf("key %d: source %+v,%v restored %+v,%v", i, a, aok, b, bok)
		}
	}
	if first, _ := flushAll(dst); len(first) != 50 {
		t.Fatalf("first Flush of the restored store visited %d, want 50", len(first))
	}
	if again, _ := flushAll(dst); len(again) != 0 {
		t.Fatalf("loaded keys reported as changed: %d", len(again))
	}
	// Restored keys expire at their saved time.
	if _, ok := dst.Get(key(0), t0+1e9); ok {
		t.Fatal("restored key 0 outlived its expiry")
	}
	checkInvariants(t, dst)
}

// TestDeleteCompactsArena deletes long keys without any eviction or expiry
// and checks that the arena gives the bytes back.
func TestDeleteCompactsArena(t *testing.T) {
	s := New(Config{Shards: 1})
	long := func(i int) []byte { return append(key(i), bytes.Repeat([]byte("-"), 100)...) }
	const n = 5000
	for i := 0; i < n; i++ {
		s.Apply(long(i), t0, &inc{ttl: 3600e9})
	}
	a := &s.shards[0].keys
	full := a.bytes()
	for i := 0; i < n-10; i++ {
		if !s.Delete(long(i), t0) {
			t.Fatalf("Delete(%d) = false", i)
		}
	}
	if a.live != 10*len(long(0)) || a.bytes() > full/4 {
		t.Fatalf("after deleting all but 10 keys the arena holds %d bytes (%d live, was %d)", a.bytes(), a.live, full)
	}
	for i := n - 10; i < n; i++ {
		if st, ok := s.Get(long(i), t0); !ok || st.A != 1 {
			t.Fatalf("key %d lost by compaction: %+v %v", i, st, ok)
		}
	}
	checkInvariants(t, s)
}
