package shard

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
)

// TestKindBits checks that every kind a state may carry leaves the two
// bits the store keeps its encoding in clear: the engine's and the ones
// package limits defines for its internal records (0x50 + iota: listed
// here, since shard may not import limits).
func TestKindBits(t *testing.T) {
	kinds := []engine.Kind{
		engine.KindNone, engine.KindGCRA, engine.KindToken, engine.KindFixed,
		engine.KindSliding, engine.KindRateGCRA, engine.KindBanCount, engine.KindBanned,
		0x50, 0x51, 0x52, // limits: reservation, slot head, slot
	}
	for _, k := range kinds {
		if k&^KindBits != 0 {
			t.Errorf("kind %#x (%v) uses the reserved bits %#x", uint8(k), k, uint8(^KindBits))
		}
	}
	if got := uint8(^KindBits); got != modeMask || modeMask != 0xA0 {
		t.Errorf("reserved bits %#x, mode mask %#x, want 0xa0", got, modeMask)
	}
}

// roundTrip encodes st with expiry exp into handle h of sh and checks that
// it decodes to st exactly, in the mode the encoding rules choose.
func roundTrip(t *testing.T, sh *shard, h uint32, st engine.State, exp int64) {
	t.Helper()
	e := sh.w.At(h)
	sh.setState(h, e, st, exp)
	if got := sh.state(h, e, exp); got != st {
		t.Fatalf("state %+v, expiry %d: decoded %+v (mode %#x)", st, exp, got, e.kind&modeMask)
	}
	var want uint8
	switch {
	case st.B == 0:
		want = modeA
	case st.A == exp:
		want = modeB
	case st.B == exp:
		want = modeAX
	default:
		want = modeWide
	}
	if got := e.kind & modeMask; got != want {
		t.Fatalf("state %+v, expiry %d: mode %#x, want %#x", st, exp, got, want)
	}
}

// TestStateRoundTrip encodes random states with random and special
// expiries (equal to A, to B, to both, 0, negative, the largest) into the
// handles of a shard and checks that each decodes exactly.
func TestStateRoundTrip(t *testing.T) {
	s := New(Config{Shards: 1})
	sh := &s.shards[0]
	var hs []uint32
	for range 3000 {
		hs = append(hs, sh.w.Alloc())
	}
	r := rand.New(rand.NewPCG(21, 47))
	word := func() int64 {
		switch r.IntN(6) {
		case 0:
			return 0
		case 1:
			return math.MaxInt64
		case 2:
			return math.MinInt64
		case 3:
			return -r.Int64N(1 << 40)
		default:
			return r.Int64()
		}
	}
	for i := range 200_000 {
		st := engine.State{A: word(), B: word(), Kind: engine.Kind(r.IntN(256)) & KindBits}
		var exp int64
		switch r.IntN(7) {
		case 0:
			exp = st.A
		case 1:
			exp = st.B
		case 2:
			st.B = st.A
			exp = st.A
		case 3:
			exp = 0
		case 4:
			exp = math.MaxInt64
		default:
			exp = word()
		}
		roundTrip(t, sh, hs[i%len(hs)], st, exp)
	}
	// Every handle still reads what it last got after the others were
	// rewritten in other modes (the side words are per handle).
	for i, h := range hs {
		st := engine.State{A: int64(i), B: int64(-i - 1), Kind: engine.KindToken}
		sh.setState(h, sh.w.At(h), st, 7)
	}
	for i, h := range hs {
		want := engine.State{A: int64(i), B: int64(-i - 1), Kind: engine.KindToken}
		if got := sh.state(h, sh.w.At(h), 7); got != want {
			t.Fatalf("handle %d: %+v, want %+v", h, got, want)
		}
	}
}

// FuzzStateRoundTrip checks the encoding of any state and expiry.
func FuzzStateRoundTrip(f *testing.F) {
	f.Add(int64(1), int64(0), uint8(engine.KindGCRA), int64(1))
	f.Add(int64(5), int64(3), uint8(engine.KindFixed), int64(5))
	f.Add(int64(5), int64(3), uint8(engine.KindBanCount), int64(3))
	f.Add(int64(5), int64(3), uint8(engine.KindToken), int64(9))
	f.Add(int64(-1), int64(-1), uint8(0xff), int64(-1))
	f.Add(int64(math.MaxInt64), int64(math.MinInt64), uint8(0x5f), int64(0))
	s := New(Config{Shards: 1})
	sh := &s.shards[0]
	h := sh.w.Alloc()
	f.Fuzz(func(t *testing.T, a, b int64, kind uint8, exp int64) {
		roundTrip(t, sh, h, engine.State{A: a, B: b, Kind: engine.Kind(kind) & KindBits}, exp)
	})
}

// TestStateThroughStore stores states of every mode through Apply and Load
// and reads them back through Get, Lookup, Scan and Flush, including one
// whose expiry saturates (a ttl past the largest time).
func TestStateThroughStore(t *testing.T) {
	type tc struct {
		st  engine.State
		ttl int64
	}
	cases := []tc{
		{engine.State{A: t0 + 5e9, Kind: engine.KindGCRA}, 5e9},                       // B == 0, A == expiry
		{engine.State{A: t0 + 9e9, B: 3, Kind: engine.KindFixed}, 9e9},                // A == expiry
		{engine.State{A: 4, B: t0 + 2e9, Kind: engine.KindBanCount}, 2e9},             // B == expiry
		{engine.State{A: 70, B: t0 - 1, Kind: engine.KindToken}, 3e9},                 // wide
		{engine.State{A: -8, B: -9, Kind: engine.KindSliding}, 3e9},                   // wide, negative
		{engine.State{A: math.MaxInt64, B: 1, Kind: engine.KindFixed}, math.MaxInt64}, // expiry saturates to A
		{engine.State{A: 1, B: 1, Kind: 0x52}, 1e9},                                   // a limits record kind
	}
	s := New(Config{Shards: 2})
	keys := make([][]byte, len(cases))
	for i, c := range cases {
		keys[i] = key(i)
		s.Apply(keys[i], t0, &put{st: c.st, ttl: c.ttl})
	}
	check := func(s *Store) {
		t.Helper()
		for i, c := range cases {
			wantExp := t0 + c.ttl
			if wantExp < t0 {
				wantExp = math.MaxInt64
			}
			if got, ok := s.Get(keys[i], t0); !ok || got != c.st {
				t.Errorf("case %d: Get = %+v %v, want %+v", i, got, ok, c.st)
			}
			if got, exp, ok := s.Lookup(keys[i], t0); !ok || got != c.st || exp != wantExp {
				t.Errorf("case %d: Lookup = %+v %d %v, want %+v %d", i, got, exp, ok, c.st, wantExp)
			}
		}
		var p ScanPage
		kinds := map[string]engine.Kind{}
		for c := uint64(0); ; {
			c, _ = s.Scan(&p, c, 100, t0)
			for j := range p.Len() {
				kinds[string(p.Key(j))] = p.Kind(j)
			}
			if c == 0 {
				break
			}
		}
		for i, c := range cases {
			if got := kinds[string(keys[i])]; got != c.st.Kind {
				t.Errorf("case %d: Scan kind %v, want %v", i, got, c.st.Kind)
			}
		}
	}
	check(s)
	// Flush into a fresh store through Load: the states and expiries
	// Flush reports are the ones stored.
	s2 := New(Config{Shards: 3})
	s.Flush(func(k []byte, st engine.State, exp int64) {
		if !s2.Load(k, st, exp, t0) {
			t.Errorf("Load of %q %+v %d refused", k, st, exp)
		}
	})
	check(s2)
	if s2.Load([]byte("bad"), engine.State{A: 1, Kind: 0x20}, t0+1, t0) {
		t.Error("Load took a kind that uses the reserved bits")
	}
}

// TestSideChunks checks that side chunks exist only where wide states were
// written: a store of GCRA or fixed-window keys has none and holds 39
// bytes of node a key; a token store has one per 1024 handles, counted by
// Stats.Bytes, OffHeapBytes (where mappings exist) and Usage; FlushAll
// releases them.
func TestSideChunks(t *testing.T) {
	gcra, _ := engine.NewLimit(engine.KindGCRA, 100, 3600e9, 0)
	token, _ := engine.NewLimit(engine.KindToken, 100, 3600e9, 0)
	const n = 5000
	fill := func(l engine.Limit) *Store {
		s := New(Config{Shards: 1})
		for i := range n {
			s.Apply(key(i), t0, &checkOnce{l: l})
		}
		return s
	}
	fixed, _ := engine.NewLimit(engine.KindFixed, 100, 3600e9, 0)
	sf := fill(fixed)
	if sh := &sf.shards[0]; sh.mapped.sideChunks != 0 || len(sh.mapped.side) != 0 {
		t.Fatalf("fixed-window store: %d side chunks", sh.mapped.sideChunks)
	}
	sg := fill(gcra)
	sh := &sg.shards[0]
	if sh.mapped.sideChunks != 0 || len(sh.mapped.side) != 0 {
		t.Fatalf("GCRA store: %d side chunks", sh.mapped.sideChunks)
	}
	if got, want := sg.Stats().Bytes, sh.w.Bytes()+int64(len(sh.table))*4; got != want {
		t.Fatalf("GCRA store: Bytes %d, want %d (nodes and table)", got, want)
	}
	if u, ok := sg.Usage(key(1), t0); !ok || u.Side != 0 || u.Node != 39 {
		t.Fatalf("GCRA key: Usage %+v %v", u, ok)
	}

	st := fill(token)
	sh = &st.shards[0]
	chunks := (n + sideLen - 1) / sideLen
	if sh.mapped.sideChunks != chunks {
		t.Fatalf("token store: %d side chunks, want %d", sh.mapped.sideChunks, chunks)
	}
	if got, want := st.Stats().Bytes, sh.w.Bytes()+int64(chunks)*sideBytes+int64(len(sh.table))*4; got != want {
		t.Fatalf("token store: Bytes %d, want %d", got, want)
	}
	if got, want := st.OffHeapBytes()-sg.OffHeapBytes(), int64(len(sh.mapped.sideMaps))*sideBytes; got != want {
		t.Fatalf("token store: off-heap bytes beyond the GCRA store's %d, want %d", got, want)
	}
	if u, ok := st.Usage(key(1), t0); !ok || u.Side != 8 || u.Total() != u.Node+u.Slot+8 {
		t.Fatalf("token key: Usage %+v %v", u, ok)
	}
	if got := st.FlushAll(t0); got != n {
		t.Fatalf("FlushAll dropped %d, want %d", got, n)
	}
	if sh.mapped.sideChunks != 0 || sh.mapped.side != nil || sh.mapped.sideMaps != nil || st.Stats().Bytes != 0 {
		t.Fatalf("after FlushAll: %d side chunks, Bytes %d", sh.mapped.sideChunks, st.Stats().Bytes)
	}
	// A key switching to GCRA leaves its chunk's side chunk at high water,
	// and reads back exactly.
	st.Apply(key(0), t0, &checkOnce{l: token})
	st.Apply(key(0), t0, &put{st: engine.State{A: t0 + 1e9, Kind: engine.KindGCRA}, ttl: 1e9})
	if got, ok := st.Get(key(0), t0); !ok || got != (engine.State{A: t0 + 1e9, Kind: engine.KindGCRA}) || sh.mapped.sideChunks != 1 {
		t.Fatalf("after a switch to GCRA: %+v %v, %d side chunks", got, ok, sh.mapped.sideChunks)
	}
}

// checkOnce is a THROTTLE.CHECK of cost 1 against l.
type checkOnce struct{ l engine.Limit }

func (c *checkOnce) Apply(cur engine.State, now int64) (engine.State, int64) {
	next, _, ttl, err := c.l.Check(cur, now, 1)
	if err != nil {
		return cur, 0
	}
	return next, ttl
}

// TestApplyReservedKindPanics checks that a state of a kind using the
// reserved bits is refused loudly rather than stored wrong.
func TestApplyReservedKindPanics(t *testing.T) {
	s := New(Config{Shards: 1})
	defer func() {
		if recover() == nil {
			t.Fatal("Apply stored a kind that uses the reserved bits")
		}
	}()
	s.Apply([]byte("k"), t0, &put{st: engine.State{A: 1, Kind: 0x80}, ttl: 1e9})
}
