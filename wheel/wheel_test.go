package wheel

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"
)

const tick = int64(1) << TickShift

// start is an arbitrary epoch time aligned to the top level, so a test knows
// which cascades happen.
const start = int64(1) << 60

// firstFire returns the smallest now at which a node with deadline when must
// fire: the end of its tick.
func firstFire(when int64) int64 { return (when>>TickShift + 1) << TickShift }

func TestFiresAtTheRightTick(t *testing.T) {
	tests := []struct {
		name string
		ttl  int64
	}{
		{"past", -5 * tick},
		{"now", 0},
		{"1ns", 1},
		{"one tick", tick},
		{"63 ticks", 63 * tick},
		{"64 ticks", 64 * tick},
		{"65 ticks", 65*tick + 7},
		{"level1 end", 4095 * tick},
		{"level2 start", 4096 * tick},
		{"level2 odd", 200_003 * tick},
		{"level3", 262_144*tick + 5},
		{"1 hour", 3600e9},
		{"1 day", 86400e9},
		{"level5", 1 << 31 * tick},
		{"beyond span", 3 * span * tick},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := New[int](start)
			h := w.Alloc()
			when := start + tc.ttl
			w.Schedule(h, when)
			due := max(firstFire(when), firstFire(start))
			// Advance in coarse strides up to just before due: nothing fires.
			now := start
			for stride := tick; now+stride < due; stride *= 3 {
				now += stride
				if n := w.Advance(now, func(uint32) { t.Fatalf("fired at %d, due %d", now, due) }); n != 0 {
					t.Fatalf("Advance(%d) fired %d", now, n)
				}
			}
			if n := w.Advance(due-1, func(uint32) { t.Fatal("fired 1ns early") }); n != 0 {
				t.Fatal("fired early")
			}
			var got []uint32
			if n := w.Advance(due, func(x uint32) { got = append(got, x) }); n != 1 || len(got) != 1 || got[0] != h {
				t.Fatalf("Advance(due) fired %v, want [%d]", got, h)
			}
			if w.Scheduled(h) {
				t.Fatal("fired node still scheduled")
			}
		})
	}
}

// TestModel drives a wheel and a naive model with random operations and
// checks that each Advance fires exactly the nodes whose tick has ended.
func TestModel(t *testing.T) {
	total := 0
	for seed := uint64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		w := New[int](start)
		model := map[uint32]int64{} // scheduled handle -> deadline
		// dueBy is the now by which a handle must have fired: the end of its
		// deadline's tick, or for a deadline already behind the cursor when
		// it was set, the end of the cursor's tick (see Schedule).
		dueBy := map[uint32]int64{}
		schedule := func(h uint32, when int64) {
			w.Schedule(h, when)
			model[h] = when
			dueBy[h] = max(firstFire(when), (w.Cursor()+1)<<TickShift)
		}
		var handles []uint32
		now := start
		ttl := func() int64 {
			switch r.IntN(4) {
			case 0:
				return r.Int64N(100 * tick)
			case 1:
				return r.Int64N(10_000 * tick)
			case 2:
				return r.Int64N(5_000_000 * tick)
			default:
				return r.Int64N(2*span*tick) - tick
			}
		}
		for step := 0; step < 4000; step++ {
			switch op := r.IntN(10); {
			case op < 4 || len(handles) == 0:
				h := w.Alloc()
				handles = append(handles, h)
				schedule(h, now+ttl())
			case op < 6:
				h := handles[r.IntN(len(handles))]
				when := now + ttl()
				if r.IntN(2) == 0 {
					if old, ok := model[h]; ok {
						switch r.IntN(3) {
						case 0: // small nudge either way, often the same slot
							when = old + r.Int64N(6*tick) - 3*tick
						case 1: // later, often another slot: the node stays where it is
							when = old + r.Int64N(200*tick)
						default: // earlier, after later moves left it in an early slot
							when = old - r.Int64N(200*tick)
						}
					}
				}
				schedule(h, when)
			case op < 7:
				i := r.IntN(len(handles))
				h := handles[i]
				w.Free(h)
				delete(model, h)
				delete(dueBy, h)
				handles[i] = handles[len(handles)-1]
				handles = handles[:len(handles)-1]
			default:
				var d int64
				switch r.IntN(3) {
				case 0:
					d = r.Int64N(3 * tick)
				case 1:
					d = r.Int64N(300 * tick)
				default:
					d = r.Int64N(3_000_000 * tick)
				}
				now += d
				fired := map[uint32]bool{}
				w.Advance(now, func(h uint32) {
					if fired[h] {
						t.Fatalf("seed %d: %d fired twice", seed, h)
					}
					fired[h] = true
					if when := model[h]; when > now || firstFire(when) > now {
						t.Fatalf("seed %d: %d fired early: when %d now %d", seed, h, when, now)
					}
				})
				for h, when := range model {
					if dueBy[h] <= now && !fired[h] {
						t.Fatalf("seed %d: %d (when %d) not fired by %d", seed, h, when, now)
					}
					if fired[h] {
						delete(model, h)
						delete(dueBy, h)
						total++
					}
				}
			}
		}
		if w.Live() != len(handles) {
			t.Fatalf("Live = %d, want %d", w.Live(), len(handles))
		}
	}
	if total < 1000 {
		t.Fatalf("only %d nodes fired over all seeds: the model test exercises too little", total)
	}
	t.Logf("%d nodes fired", total)
}

// TestSweepTouchesOnlyDue holds many far deadlines and a few near ones and
// counts the nodes each Advance visits.
func TestSweepTouchesOnlyDue(t *testing.T) {
	const far, near = 100_000, 100
	w := New[int](start)
	for i := 0; i < far; i++ {
		w.Schedule(w.Alloc(), start+3600e9+int64(i)*1e6) // an hour ahead, spread over 100 s
	}
	for i := 0; i < near; i++ {
		w.Schedule(w.Alloc(), start+int64(i%50)*tick) // within 50 ticks
	}
	fired0, casc0, _ := w.Work()
	if n := w.Advance(start+100*tick, func(uint32) {}); n != near {
		t.Fatalf("fired %d, want %d", n, near)
	}
	fired, casc, _ := w.Work()
	if fired-fired0 != near || casc-casc0 != 0 {
		t.Fatalf("work for %d due nodes among %d: fired %d cascaded %d; want %d and 0",
			near, far+near, fired-fired0, casc-casc0, near)
	}
	// An idle stretch of 50 minutes with nothing due touches nothing.
	if n := w.Advance(start+3000e9, func(uint32) {}); n != 0 {
		t.Fatalf("fired %d during idle stretch", n)
	}
	// Every far node is visited a bounded number of times until it fires.
	n := w.Advance(start+3600e9+200e9, func(uint32) {})
	fired2, casc2, _ := w.Work()
	if n != far || fired2-fired != far {
		t.Fatalf("fired %d, want %d", n, far)
	}
	if c := casc2 - casc; c > (Levels-1)*far {
		t.Fatalf("cascaded %d for %d nodes, more than %d levels each", c, far, Levels-1)
	}
	t.Logf("far nodes: %d fired, %d cascades (%.2f per node)", far, casc2-casc, float64(casc2-casc)/far)
}

// TestScheduleLaterStaysEarlierMoves: a deadline moved later leaves the
// node in its slot (Schedule links nothing), and the Advance that reaches
// that slot re-places it instead of firing it; it then fires at its last
// deadline, no earlier and at most a tick late. A deadline moved earlier
// into another slot relinks at once and fires then.
func TestScheduleLaterStaysEarlierMoves(t *testing.T) {
	w := New[int](start)
	h := w.Alloc()
	first := start + 30*tick // level 0: due at its own tick (a cascade would re-place it too)
	if !w.Schedule(h, first) {
		t.Fatal("first Schedule did not link")
	}
	when := first
	for i := 0; i < 1600; i++ { // creep forward by 1/8 tick per step, over 200 ticks
		when += tick / 8
		if w.Schedule(h, when) {
			t.Fatalf("step %d: a later deadline relinked the node", i)
		}
	}
	if w.When(h) != when || !w.Scheduled(h) {
		t.Fatalf("When = %d scheduled %v, want %d true", w.When(h), w.Scheduled(h), when)
	}
	_, _, relinked0 := w.Work()
	if n := w.Advance(firstFire(first), func(uint32) { t.Fatal("fired at its old deadline") }); n != 0 {
		t.Fatalf("fired %d at the old deadline", n)
	}
	if _, _, relinked := w.Work(); relinked == relinked0 {
		t.Fatal("passing the old deadline did not re-place the node")
	}
	if n := w.Advance(firstFire(when)-1, func(uint32) { t.Fatal("fired early") }); n != 0 {
		t.Fatal("fired early")
	}
	if n := w.Advance(firstFire(when), func(x uint32) {
		if x != h {
			t.Fatalf("fired %d, want %d", x, h)
		}
	}); n != 1 {
		t.Fatalf("fired %d at the new deadline, want 1", n)
	}

	// Earlier, into another slot: relinked now, fires at the new deadline.
	h2 := w.Alloc()
	base := firstFire(when)
	far := base + 5000*tick
	w.Schedule(h2, far)
	near := base + 10*tick
	if !w.Schedule(h2, near) {
		t.Fatal("an earlier deadline in another slot did not relink")
	}
	if n := w.Advance(firstFire(near)-1, func(uint32) { t.Fatal("fired early") }); n != 0 {
		t.Fatal("fired early")
	}
	if n := w.Advance(firstFire(near), func(uint32) {}); n != 1 {
		t.Fatalf("fired %d at the earlier deadline, want 1", n)
	}
}

func TestAllocFreeCancel(t *testing.T) {
	w := New[[2]int64](0)
	a, b := w.Alloc(), w.Alloc()
	if a == b || !w.Allocated(a) || !w.Allocated(b) || w.Live() != 2 {
		t.Fatal("Alloc did not hand out two live handles")
	}
	w.At(a)[0] = 42
	w.Schedule(a, 5*tick)
	w.Schedule(b, 5*tick)
	w.Cancel(b)
	if w.Scheduled(b) || !w.Scheduled(a) {
		t.Fatal("Cancel state wrong")
	}
	w.Free(a)
	if w.Allocated(a) || w.Live() != 1 {
		t.Fatal("Free did not release a")
	}
	if c := w.Alloc(); c != a || w.At(c)[0] != 42 || w.Scheduled(c) {
		t.Fatalf("Alloc after Free = %d, want reuse of %d, record kept, unscheduled", c, a)
	}
	if n := w.Advance(100*tick, func(uint32) {}); n != 0 {
		t.Fatalf("cancelled/freed nodes fired: %d", n)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("double Free did not panic")
		}
	}()
	w.Free(b)
	w.Free(b)
}

func TestManyHandlesAcrossChunks(t *testing.T) {
	w := New[uint64](start)
	const n = 5*chunkSize + 3
	for i := 0; i < n; i++ {
		h := w.Alloc()
		*w.At(h) = uint64(h) * 3
		w.Schedule(h, start+int64(h%300)*tick)
	}
	seen := 0
	w.Advance(start+400*tick, func(h uint32) {
		if *w.At(h) != uint64(h)*3 {
			t.Fatalf("record of %d corrupted", h)
		}
		seen++
		w.Free(h)
	})
	if seen != n || w.Live() != 0 {
		t.Fatalf("fired %d of %d, live %d", seen, n, w.Live())
	}
}

// BenchmarkSchedule measures rescheduling an existing handle: within its
// slot (the common case for a rate-limit key) and into another slot every
// time (unlink + link). Neither allocates.
func BenchmarkSchedule(b *testing.B) {
	for _, tc := range []struct {
		name string
		step int64
	}{{"same-slot", 1}, {"move", 64 * tick}} {
		b.Run(tc.name, func(b *testing.B) {
			w := New[[24]byte](start)
			hs := make([]uint32, 1024)
			for i := range hs {
				hs[i] = w.Alloc()
				w.Schedule(hs[i], start+100*tick)
			}
			b.ReportAllocs()
			b.ResetTimer()
			when := start + 100*tick
			for i := 0; i < b.N; i++ {
				when += tc.step
				if when > start+3000*tick {
					when = start + 100*tick
				}
				w.Schedule(hs[i&1023], when)
			}
		})
	}
}

// BenchmarkAdvance measures reclaiming due handles: each op schedules one
// handle one tick ahead and advances one tick, firing it.
func BenchmarkAdvance(b *testing.B) {
	w := New[[24]byte](start)
	h := w.Alloc()
	now := start
	fire := func(uint32) {}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w.Schedule(h, now)
		now += tick
		if w.Advance(now, fire) != 1 {
			b.Fatal("did not fire")
		}
	}
}

func TestResetAndBytes(t *testing.T) {
	w := New[[40]byte](0)
	if w.Bytes() != 0 || w.AllocBytes() == 0 {
		t.Fatalf("empty wheel: Bytes %d AllocBytes %d", w.Bytes(), w.AllocBytes())
	}
	perChunk := w.AllocBytes()
	if perChunk != chunkSize*53 {
		t.Fatalf("a chunk of 1024 nodes of 53 bytes costs %d", perChunk)
	}
	for i := 0; i < chunkSize; i++ {
		w.Schedule(w.Alloc(), int64(i)<<TickShift)
	}
	if w.Bytes() != perChunk || w.AllocBytes() != perChunk {
		t.Fatalf("full chunk: Bytes %d AllocBytes %d", w.Bytes(), w.AllocBytes())
	}
	w.Free(7)
	if w.AllocBytes() != 0 {
		t.Fatal("a freed handle is available but AllocBytes reports growth")
	}
	cur := w.Cursor()
	w.Reset()
	if w.Live() != 0 || w.Cap() != 0 || w.Bytes() != 0 || w.Cursor() != cur {
		t.Fatalf("after Reset: live %d cap %d bytes %d cursor %d (was %d)", w.Live(), w.Cap(), w.Bytes(), w.Cursor(), cur)
	}
	if n := w.Advance(int64(2*chunkSize)<<TickShift, func(uint32) { t.Fatal("a reset wheel fired") }); n != 0 {
		t.Fatalf("Advance after Reset fired %d", n)
	}
	h := w.Alloc()
	w.Schedule(h, w.Cursor()<<TickShift+1)
	if n := w.Advance((w.Cursor()+2)<<TickShift, func(uint32) {}); n != 1 {
		t.Fatalf("wheel unusable after Reset: fired %d", n)
	}
}

// TestNodeLinks checks the 20-bit link packing over the whole range of
// link values (handles, the free mark, slot sentinels and Nil) and the
// deadline's 8 bytes over extreme values, and that a record of byte fields
// packs into a 39-byte node of alignment 1.
func TestNodeLinks(t *testing.T) {
	vals := []uint32{0, 1, 255, 256, 1<<16 - 1, 1 << 16, uint32(MaxHandles) - 1, headBase, headBase + 511, freeMark, Nil}
	for _, next := range vals {
		for _, prev := range vals {
			var n node[[26]byte]
			n.val[0], n.val[25] = 0xAA, 0x55
			n.setLinks(next, prev)
			if n.next() != next || n.prev() != prev {
				t.Fatalf("setLinks(%#x, %#x): next %#x prev %#x", next, prev, n.next(), n.prev())
			}
			n.setNext(prev)
			n.setPrev(next)
			if n.next() != prev || n.prev() != next {
				t.Fatalf("setNext(%#x) setPrev(%#x): next %#x prev %#x", prev, next, n.next(), n.prev())
			}
			if n.val[0] != 0xAA || n.val[25] != 0x55 {
				t.Fatalf("links overwrote the record")
			}
			for _, when := range []int64{0, 1, -1, start + 12345, math.MaxInt64, math.MinInt64} {
				n.setWhen(when)
				if n.when() != when || n.next() != prev || n.prev() != next {
					t.Fatalf("setWhen(%d): when %d, links %#x %#x", when, n.when(), n.next(), n.prev())
				}
			}
		}
	}
	if MaxHandles > int(headBase) || headBase+Levels*slots > freeMark {
		t.Fatalf("handles (%d) and sentinels overlap the marks", MaxHandles)
	}
	if got := unsafe.Sizeof(node[[26]byte]{}); got != 39 {
		t.Errorf("node of a 26-byte record: %d bytes, want 39", got)
	}
	if got := unsafe.Alignof(node[[26]byte]{}); got != 1 {
		t.Errorf("node of a 26-byte record: alignment %d, want 1", got)
	}
	if got := unsafe.Sizeof(node[struct{ a, b int64 }]{}); got != 32 {
		t.Errorf("node of a 16-byte aligned record: %d bytes, want 32", got)
	}
}

// TestChunkMemory checks that a wheel with SetChunkMemory keeps its nodes
// in the memory the hook supplies, falls back to the heap when the hook
// returns nil or too little, and works the same either way.
func TestChunkMemory(t *testing.T) {
	w := New[[34]byte](start)
	var supplied [][]byte
	calls := 0
	w.SetChunkMemory(func(n int) []byte {
		calls++
		switch calls {
		case 2:
			return nil // heap
		case 3:
			return make([]byte, n-1) // too short: heap
		}
		b := make([]byte, n)
		supplied = append(supplied, b)
		return b
	})
	const n = 4*chunkSize + 5
	for i := 0; i < n; i++ {
		h := w.Alloc()
		w.At(h)[0] = byte(h)
		w.Schedule(h, start+int64(h%100)*tick)
	}
	if calls != 5 || len(supplied) != 3 {
		t.Fatalf("hook called %d times for 5 chunks, %d supplied", calls, len(supplied))
	}
	inside := func(h uint32) bool {
		p := uintptr(unsafe.Pointer(w.At(h)))
		for _, b := range supplied {
			lo := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
			if p >= lo && p < lo+uintptr(len(b)) {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		h    uint32
		want bool
	}{{0, true}, {chunkSize - 1, true}, {chunkSize, false}, {2*chunkSize + 1, false}, {3 * chunkSize, true}, {n - 1, true}} {
		if got := inside(c.h); got != c.want {
			t.Errorf("handle %d in supplied memory: %v, want %v", c.h, got, c.want)
		}
	}
	fired := 0
	w.Advance(start+200*tick, func(h uint32) {
		if w.At(h)[0] != byte(h) {
			t.Fatalf("record of %d corrupted", h)
		}
		fired++
		w.Free(h)
	})
	if fired != n || w.Live() != 0 || w.Bytes() != 5*chunkSize*w.NodeBytes() {
		t.Fatalf("fired %d of %d, live %d, bytes %d", fired, n, w.Live(), w.Bytes())
	}
}
