package shard

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
)

// TestScanPages checks each page against its definition: a page from
// boundary b to the returned boundary end holds exactly the unexpired keys
// of the shard whose low 32 hash bits lie in [b, end), so keys with equal
// hashes are never split and consecutive pages leave no gap. The tables
// grow between pages.
func TestScanPages(t *testing.T) {
	for _, shards := range []int{1, 4} {
		s := New(Config{Shards: shards})
		r := rand.New(rand.NewPCG(uint64(shards), 3))
		next := 0
		add := func(n int) {
			for ; n > 0; n-- {
				ttl := int64(3600e9)
				if r.IntN(4) == 0 {
					ttl = 1e9
				}
				k := append(key(next), bytes.Repeat([]byte("x"), r.IntN(30))...)
				s.Apply(k, t0, &inc{ttl: ttl})
				next++
			}
		}
		add(500)
		now := t0 + 1e9
		var p ScanPage
		cursor := uint64(0)
		for calls := 0; ; calls++ {
			si, b := cursor>>32, cursor&(hashSpace-1)
			nextCursor, err := s.Scan(&p, cursor, 1+r.IntN(20), now)
			if err != nil {
				t.Fatal(err)
			}
			// The page covers shard si from b up to the next cursor's
			// boundary, or to the end of si (and maybe further shards).
			end := uint64(hashSpace)
			if nextCursor != 0 && nextCursor>>32 == si {
				end = nextCursor & (hashSpace - 1)
			}
			if end <= b {
				t.Fatalf("cursor %x -> %x does not advance", cursor, nextCursor)
			}
			got := map[string]int{}
			for i := 0; i < p.Len(); i++ {
				got[string(p.Key(i))]++
			}
			want := map[string]bool{}
			sh := &s.shards[si]
			for h := uint32(0); h < sh.w.Cap(); h++ {
				if !sh.w.Allocated(h) || sh.w.When(h) <= now {
					continue
				}
				k := sh.keyOf(h)
				if h32 := uint64(uint32(hashOf(s, k))); h32 >= b && h32 < end {
					want[string(k)] = true
				}
			}
			for k := range want {
				if got[k] != 1 {
					t.Fatalf("shard %d page [%x, %x): key %q returned %d times", si, b, end, k, got[k])
				}
			}
			if end < hashSpace && len(got) != len(want) {
				t.Fatalf("shard %d page [%x, %x): %d keys, want %d", si, b, end, len(got), len(want))
			}
			if cursor = nextCursor; cursor == 0 {
				break
			}
			add(40) // grows the tables several times over the scan
		}
		if next < 2000 {
			t.Fatalf("only %d keys created during the scan", next)
		}
		checkInvariants(t, s)
	}
}

func TestScanBadCursorAndAllocs(t *testing.T) {
	s := New(Config{Shards: 4})
	var p ScanPage
	if next, err := s.Scan(&p, 4<<32, 10, t0); !errors.Is(err, ErrBadCursor) || next != 0 {
		t.Fatalf("Scan with shard index 4 of 4 = %d, %v", next, err)
	}
	for i := 0; i < 1000; i++ {
		s.Apply(key(i), t0, &inc{ttl: 60e9})
	}
	full := func() {
		for c := uint64(0); ; {
			c, _ = s.Scan(&p, c, 10, t0)
			if c == 0 {
				return
			}
		}
	}
	full() // grows the page's buffers
	if a := testing.AllocsPerRun(20, full); a != 0 {
		t.Fatalf("a full scan with a reused page allocates %.1f times", a)
	}
}

func TestLookupDoesNotTouch(t *testing.T) {
	s := New(Config{Shards: 1})
	s.Apply([]byte("k"), t0, &inc{ttl: 1e9})
	_, h, _ := s.shards[0].find([]byte("k"), hashOf(s, []byte("k")))
	e := s.shards[0].w.At(h)
	e.meta &^= fRef
	if st, exp, ok := s.Lookup([]byte("k"), t0); !ok || st.A != 1 || exp != t0+1e9 {
		t.Fatalf("Lookup = %+v %d %v", st, exp, ok)
	}
	if e.meta&fRef != 0 {
		t.Fatal("Lookup set the CLOCK bit")
	}
	if _, _, ok := s.Lookup(bytes.Repeat([]byte("k"), MaxKeyLen+1), t0); ok {
		t.Fatal("Lookup of an over-long key found something")
	}
}

// TestFlushAllTracking checks that with change tracking on, FlushAll's
// deletions reach the next Flush as tombstones, and that memory is given
// back.
func TestFlushAllTracking(t *testing.T) {
	s := New(Config{Shards: 4})
	long := func(i int) []byte { return append(key(i), ":a-key-kept-in-the-arena"...) }
	for i := 0; i < 300; i++ {
		s.Apply(long(i), t0, &inc{ttl: 60e9})
	}
	for i := 0; i < 20_000; i++ {
		s.Apply(key(i), t0, &inc{ttl: 60e9})
	}
	flushAll(s) // switches tracking on
	s.Apply(long(0), t0+1, &inc{ttl: 60e9})
	before := s.Stats().Bytes
	if n := s.FlushAll(t0 + 2); n != 20_300 {
		t.Fatalf("FlushAll = %d, want 20300", n)
	}
	if st := s.Stats(); st.Keys != 0 || st.Bytes != 0 || s.OffHeapBytes() != 0 {
		t.Fatalf("after FlushAll: %+v, off-heap %d (held %d before)", st, s.OffHeapBytes(), before)
	}
	got, _ := flushAll(s)
	if len(got) != 20_300 {
		t.Fatalf("Flush after FlushAll reported %d keys, want 20300 deletions", len(got))
	}
	for k, f := range got {
		if f.st != (engine.State{}) || f.exp != 0 {
			t.Fatalf("Flush after FlushAll reported %q as %+v, want a deletion", k, f)
		}
	}
	s.Apply(long(1), t0+3, &inc{ttl: 60e9})
	got, _ = flushAll(s)
	if len(got) != 1 || got[string(long(1))].st.A != 1 {
		t.Fatalf("Flush after re-creating one key: %v", got)
	}
	checkInvariants(t, s)
}

// TestArenaBeyond32Bits puts long keys past chunk 65536 of one shard's
// arena, where a 32-bit chunk<<16|position reference wraps (4 GiB of
// keys), without allocating those 4 GiB: the chunks before are empty
// placeholders.
func TestArenaBeyond32Bits(t *testing.T) {
	var a arena
	a.chunks = make([][]byte, 1<<16+1)
	k := bytes.Repeat([]byte("a"), 100)
	ref := a.put(k)
	if ref>>chunkShift != 1<<16 || !bytes.Equal(a.get(ref, 100), k) {
		t.Fatalf("reference %x does not name chunk %d", ref, 1<<16)
	}

	s := New(Config{Shards: 1})
	sh := &s.shards[0]
	sh.keys.chunks = make([][]byte, 1<<16-1)
	long := func(i int) []byte {
		return append(bytes.Repeat([]byte{byte('a' + i%26)}, 30_000), key(i)...)
	}
	const n = 40 // spans chunks 65535 to about 65555
	for i := 0; i < n; i++ {
		s.Apply(long(i), t0, &inc{ttl: 60e9})
		s.Apply(key(i), t0, &inc{ttl: 60e9})
	}
	if last := len(sh.keys.chunks) - 1; last <= 1<<16 {
		t.Fatalf("arena ends at chunk %d, not past 65536", last)
	}
	for i := 0; i < n; i++ {
		if st, ok := s.Get(long(i), t0); !ok || st.A != 1 {
			t.Fatalf("long key %d lost: %+v %v", i, st, ok)
		}
	}
	checkInvariants(t, s)
	for i := 0; i < n; i += 2 {
		s.Delete(long(i), t0) // leaves dead bytes; compaction rewrites the arena
	}
	for i := 1; i < n; i += 2 {
		if st, ok := s.Get(long(i), t0); !ok || st.A != 1 {
			t.Fatalf("long key %d lost after deletes: %+v %v", i, st, ok)
		}
	}
	checkInvariants(t, s)
}

// TestMaxMemory floods a memory-bounded store with short and long keys and
// checks that the bytes held stay within MaxMemory, that keys are evicted
// rather than refused, and that hot keys survive.
func TestMaxMemory(t *testing.T) {
	tests := []struct {
		name string
		pad  int // bytes added to each flood key
	}{
		{"inline keys", 0},
		{"arena keys", 100},
		{"mixed", -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const maxMemory = 2 << 20
			s := New(Config{Shards: 4, MaxMemory: maxMemory})
			if len(s.shards) != 4 {
				t.Fatalf("%d shards, want 4", len(s.shards))
			}
			hot := make([][]byte, 20)
			for i := range hot {
				hot[i] = []byte(fmt.Sprintf("hot:%d", i))
			}
			now := t0
			n := 300_000
			if testing.Short() || raceEnabled {
				n = 60_000
			}
			for i := 0; i < n; i++ {
				k := key(i)
				pad := tc.pad
				if pad < 0 {
					pad = i % 3 * 60
				}
				k = append(k, bytes.Repeat([]byte("p"), pad)...)
				s.Apply(k, now, &inc{ttl: 3600e9})
				if i%500 == 0 {
					for _, h := range hot {
						s.Apply(h, now, &inc{ttl: 3600e9})
					}
				}
				if i%10_000 == 0 {
					if b := s.Stats().Bytes; b > maxMemory {
						t.Fatalf("after %d keys the store holds %d bytes > %d", i+1, b, maxMemory)
					}
				}
			}
			st := s.Stats()
			if st.Bytes > maxMemory || st.Evicted == 0 || st.Keys < 1000 {
				t.Fatalf("Stats = %+v with MaxMemory %d", st, maxMemory)
			}
			for _, h := range hot {
				if got, ok := s.Get(h, now); !ok || got.A != int64(n/500) {
					t.Fatalf("hot key %s = %+v, %v", h, got, ok)
				}
			}
			checkInvariants(t, s)
			t.Logf("%d keys in %d bytes", st.Keys, st.Bytes)
		})
	}
}

func TestMaxMemoryShardsAndFloor(t *testing.T) {
	s := New(Config{Shards: 64, MaxMemory: 1 << 20})
	if len(s.shards) != 4 {
		t.Fatalf("MaxMemory 1 MiB over 64 shards: %d shards, want 4 of 256 KiB", len(s.shards))
	}
	// A bound below one entry chunk still keeps one key per shard.
	s = New(Config{Shards: 1, MaxMemory: 1})
	for i := 0; i < 10; i++ {
		s.Apply(key(i), t0, &inc{ttl: 60e9})
		if _, ok := s.Get(key(i), t0); !ok || s.Len() != 1 {
			t.Fatalf("key %d: present %v, Len %d; want the newest key alone", i, ok, s.Len())
		}
	}
}

// TestFloodTenMillion pushes 10M unique keys through a store bounded at 1M
// keys (1M through 100k with -short) while a set of hot keys is touched on
// every round: Len stays bounded and no hot key is lost. Under the race
// detector it runs at a fiftieth of the size.
func TestFloodTenMillion(t *testing.T) {
	total, maxKeys := 10_000_000, 1_000_000
	switch {
	case raceEnabled:
		total, maxKeys = 200_000, 20_000
	case testing.Short():
		total, maxKeys = 1_000_000, 100_000
	}
	s := New(Config{MaxKeys: maxKeys})
	hot := make([][]byte, 1000)
	for i := range hot {
		hot[i] = []byte(fmt.Sprintf("hot:%04d", i))
	}
	round := maxKeys / 10
	var buf [16]byte
	var c inc
	c.ttl = 3600e9
	for i := 0; i < total; i++ {
		if i%round == 0 {
			for _, h := range hot {
				s.Apply(h, t0, &c)
			}
			if n := s.Len(); n > maxKeys {
				t.Fatalf("after %d keys Len = %d > %d", i, n, maxKeys)
			}
		}
		s.Apply(floodKey(&buf, uint32(i)), t0, &c)
	}
	for _, h := range hot {
		if st, ok := s.Get(h, t0); !ok || st.A != int64(total/round) {
			t.Fatalf("hot key %s = %+v, %v; want A=%d", h, st, ok, total/round)
		}
	}
	st := s.Stats()
	if st.Keys > int64(maxKeys) || st.Evicted < int64(total-maxKeys) {
		t.Fatalf("Stats = %+v", st)
	}
}

// floodKey writes the 16-byte key "flood:" + 10 hex digits of i.
func floodKey(buf *[16]byte, i uint32) []byte {
	const hexd = "0123456789abcdef"
	copy(buf[:], "flood:")
	for j := 15; j >= 6; j-- {
		buf[j] = hexd[i&15]
		i >>= 4
	}
	return buf[:]
}

// TestScanEqualHashesSharePage finds keys whose low 32 hash bits collide
// (the bits the cursor's boundary is drawn in) and checks that a scan with
// COUNT 1 returns each colliding pair in one page, never split by a cursor.
func TestScanEqualHashesSharePage(t *testing.T) {
	s := New(Config{Shards: 1})
	byLow := map[uint32][]byte{}
	var pairs [][2][]byte
	for i := 0; len(pairs) < 3; i++ {
		if i == 2_000_000 {
			t.Fatal("no colliding pairs found")
		}
		k := []byte(fmt.Sprintf("c%d", i))
		low := uint32(hashOf(s, k))
		if other, ok := byLow[low]; ok {
			pairs = append(pairs, [2][]byte{other, k})
		}
		byLow[low] = k
	}
	for i := 0; i < 3000; i++ {
		s.Apply(key(i), t0, &inc{ttl: 60e9})
	}
	for _, p := range pairs {
		s.Apply(p[0], t0, &inc{ttl: 60e9})
		s.Apply(p[1], t0, &inc{ttl: 60e9})
	}
	page := map[string]int{}
	var p ScanPage
	cursor := uint64(0)
	for n := 0; ; n++ {
		next, err := s.Scan(&p, cursor, 1, t0)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < p.Len(); i++ {
			if _, dup := page[string(p.Key(i))]; dup {
				t.Fatalf("key %q returned twice without any change to the store", p.Key(i))
			}
			page[string(p.Key(i))] = n
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	if len(page) != 3000+2*len(pairs) {
		t.Fatalf("scan returned %d keys, want %d", len(page), 3000+2*len(pairs))
	}
	for _, pr := range pairs {
		a, b := page[string(pr[0])], page[string(pr[1])]
		if a != b {
			t.Fatalf("keys %q and %q share their low hash bits but came in pages %d and %d", pr[0], pr[1], a, b)
		}
	}
}

// FuzzScanCursor feeds Scan arbitrary cursors, as a client may send: it
// must return ErrBadCursor or a cursor that, followed, ends the scan.
func FuzzScanCursor(f *testing.F) {
	s := New(Config{Shards: 4})
	for i := 0; i < 500; i++ {
		s.Apply(key(i), t0, &inc{ttl: 60e9})
	}
	f.Add(uint64(0), 10)
	f.Add(uint64(3)<<32|0xffffffff, 1)
	f.Add(uint64(4)<<32, 0)
	f.Add(^uint64(0), -5)
	f.Fuzz(func(t *testing.T, cursor uint64, count int) {
		count %= 1000
		var p ScanPage
		for calls := 0; ; calls++ {
			next, err := s.Scan(&p, cursor, count, t0)
			if err != nil {
				if !errors.Is(err, ErrBadCursor) || cursor>>32 < 4 {
					t.Fatalf("Scan(%x) = %v", cursor, err)
				}
				return
			}
			if next == 0 {
				return
			}
			if next <= cursor || calls > 100_000 {
				t.Fatalf("cursor %x -> %x does not advance", cursor, next)
			}
			cursor = next
		}
	})
}

func TestNoEvictRefusesNewKeys(t *testing.T) {
	t.Run("maxkeys", func(t *testing.T) {
		s := New(Config{Shards: 1, MaxKeys: 100, NoEvict: true})
		for i := 0; i < 100; i++ {
			if !s.TryApply(key(i), t0, &inc{ttl: 3600e9}) {
				t.Fatalf("key %d refused below the bound", i)
			}
		}
		if s.TryApply(key(100), t0, &inc{ttl: 3600e9}) {
			t.Fatal("a 101st key was stored at MaxKeys 100")
		}
		s.Apply(key(101), t0, &inc{ttl: 3600e9}) // Apply refuses the same way
		if _, ok := s.Get(key(101), t0); ok {
			t.Fatal("Apply created a key in a full NoEvict shard")
		}
		if !s.TryApply(key(7), t0, &inc{ttl: 3600e9}) {
			t.Fatal("an existing key was refused an update in a full shard")
		}
		st := s.Stats()
		if st.Keys != 100 || st.Evicted != 0 {
			t.Fatalf("Stats = %+v, want 100 keys and no eviction", st)
		}
		for i := 0; i < 100; i++ {
			if _, ok := s.Get(key(i), t0); !ok {
				t.Fatalf("key %d lost in a full NoEvict shard", i)
			}
		}
		// Room comes back when a key is deleted or expires.
		s.Delete(key(0), t0)
		if !s.TryApply(key(100), t0, &inc{ttl: 1e9}) {
			t.Fatal("refused after a delete made room")
		}
		if !s.TryApply(key(102), t0+3601e9, &inc{ttl: 1e9}) {
			t.Fatal("refused after every key expired")
		}
		checkInvariants(t, s)
	})
	t.Run("maxmemory", func(t *testing.T) {
		const maxMemory = 1 << 20
		s := New(Config{Shards: 1, MaxMemory: maxMemory, NoEvict: true})
		pad := bytes.Repeat([]byte("p"), 200)
		stored := 0
		for i := 0; i < 20_000; i++ {
			if s.TryApply(append(key(i), pad...), t0, &inc{ttl: 3600e9}) {
				stored++
			}
		}
		st := s.Stats()
		if st.Bytes > maxMemory || st.Evicted != 0 || int(st.Keys) != stored || stored == 20_000 || stored < 1000 {
			t.Fatalf("Stats = %+v, %d stored, with MaxMemory %d", st, stored, maxMemory)
		}
		for i := 0; i < 20_000; i++ {
			_, ok := s.Get(append(key(i), pad...), t0)
			if ok != (i < stored) {
				t.Fatalf("key %d held = %v with %d stored: keys must be kept in order of arrival", i, ok, stored)
			}
		}
		checkInvariants(t, s)
	})
}
