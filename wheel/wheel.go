// Package wheel is a hierarchical timing wheel over integer handles, built
// for stores that keep millions of expiring records and must reclaim the due
// ones without looking at the rest.
//
// # Shape
//
// A Wheel[T] is also the slab that holds the caller's records: handle h names
// one node {when, next, prev, T}. The links live next to the record (the
// wheel is intrusive), so scheduling, rescheduling and cancelling never
// allocate, and a record and its timer share a cache line. Nodes live in
// fixed-size chunks of pointer-free structs: the garbage collector never
// scans them and growth never copies old nodes. A caller may supply chunk
// memory from outside the Go heap (SetChunkMemory), so that a large slab
// does not count toward the heap the collector paces itself by.
//
// Handles and links are 20-bit (MaxHandles, about a million handles a
// wheel), so the two links take 5 bytes, and the deadline is kept as 8
// little-endian bytes: a node is 13 bytes of deadline and links, then the
// record, with no alignment of its own. A record whose fields are bytes
// and byte arrays packs right after them with no padding: the 26 bytes of
// package shard's record make a 39-byte node. A record with 8-byte fields is placed at
// offset 16, after 3 bytes of padding. Reading the deadline or a link is
// one unaligned load.
//
// Time is cut into ticks of 1<<TickShift nanoseconds (about 1.05 ms). There
// are Levels levels of 64 slots; a slot of level l spans 64^l ticks, so the
// wheel covers 64^Levels ticks (about 2.3 years) ahead of its cursor; later
// deadlines are parked in the farthest slot and re-placed when it comes due.
// Each slot is a circular doubly linked list with a sentinel, and each level
// keeps a 64-bit occupancy bitmap.
//
// # Costs
//
//   - Schedule is O(1). A later deadline only updates the node: it stays in
//     the slot of an earlier deadline, which comes due first, and Advance
//     re-places it then. A rate-limit key's expiry moves later on every
//     admitted request, so the hot path never touches the neighbours in a
//     slot's list (with a million keys those are two cache misses). An
//     earlier deadline relinks the node at once when it falls in another
//     slot, so a node never waits in a slot that comes due after its
//     deadline.
//   - Advance jumps straight from one occupied slot to the next using the
//     bitmaps, so an idle hour costs a handful of bit operations, not 3.6
//     million ticks. Every node it visits is either due (fired), moved one
//     level down (cascaded) or, when its deadline moved later since it was
//     placed, re-placed by its deadline; a node cascades at most Levels-1
//     times per placement, and is re-placed at most once per slot it waited
//     in. Work is O(due + cascaded + re-placed), never O(nodes held), and a
//     re-placement is paid for by a Schedule that moved the deadline.
//   - A node fires at the first Advance whose now is past the end of the
//     node's tick: at most one tick late, never early.
//   - Memory is 13 bytes of links and deadline per node beside the record,
//     allocated 1024 nodes at a time. Freed handles are reused before new
//     ones, and chunks are kept at the high-water mark until Reset; Bytes
//     and AllocBytes report them, so a caller can bound its memory.
//
// The Wheel is not safe for concurrent use; the caller serialises access
// (shard holds one wheel per shard, under the shard lock).
package wheel

import (
	"encoding/binary"
	"math"
	"math/bits"
	"unsafe"
)

const (
	// TickShift sets the tick: 1<<TickShift nanoseconds.
	TickShift = 20
	// Levels is the number of levels of 64 slots.
	Levels = 6

	slotBits  = 6
	slots     = 1 << slotBits
	span      = int64(1) << (slotBits * Levels) // ticks covered ahead of the cursor
	chunkBits = 10
	chunkSize = 1 << chunkBits

	linkBits = 20
	linkMask = 1<<linkBits - 1

	// Nil is the absent handle.
	Nil      = uint32(linkMask)
	freeMark = Nil - 1
	headBase = Nil - 512 // link values >= headBase name slot sentinels
	// MaxHandles is the number of handles a Wheel can hand out.
	MaxHandles = int(headBase)
)

// node is one handle's deadline, links and record, all byte arrays, so a
// record of alignment 1 starts right after them at offset 13 and the node
// has no padding. The deadline is little-endian; the links are two 20-bit
// values in a 40-bit little-endian word, next in its low 20 bits and prev
// in its high 20.
type node[T any] struct {
	at  [8]byte
	lk  [5]byte
	val T
}

func (n *node[T]) when() int64     { return int64(binary.LittleEndian.Uint64(n.at[:])) }
func (n *node[T]) setWhen(v int64) { binary.LittleEndian.PutUint64(n.at[:], uint64(v)) }

// next is bits 0-19 of the link word, inside its first four bytes; prev is
// bits 20-39, inside its last four (bits 12-31 of lk[1:5]). Each accessor
// is one unaligned 4-byte load, and each setter one 4-byte
// read-modify-write that leaves the other link alone.
func (n *node[T]) next() uint32 { return binary.LittleEndian.Uint32(n.lk[0:4]) & linkMask }
func (n *node[T]) prev() uint32 { return binary.LittleEndian.Uint32(n.lk[1:5]) >> (linkBits - 8) }

func (n *node[T]) setNext(v uint32) {
	w := binary.LittleEndian.Uint32(n.lk[0:4])
	binary.LittleEndian.PutUint32(n.lk[0:4], w&^linkMask|v)
}

func (n *node[T]) setPrev(v uint32) {
	w := binary.LittleEndian.Uint32(n.lk[1:5])
	binary.LittleEndian.PutUint32(n.lk[1:5], w&(1<<(linkBits-8)-1)|v<<(linkBits-8))
}

func (n *node[T]) setLinks(next, prev uint32) {
	binary.LittleEndian.PutUint32(n.lk[0:4], next|prev<<linkBits)
	n.lk[4] = byte(prev >> (32 - linkBits))
}

type head struct{ next, prev uint32 }

// Wheel is a hierarchical timing wheel and a slab of records of type T,
// both addressed by uint32 handles. The zero Wheel is not usable; call New.
type Wheel[T any] struct {
	chunks [][]node[T]
	// mapChunk, when set, supplies node chunks from outside the Go heap
	// (see SetChunkMemory).
	mapChunk func(n int) []byte
	hw       uint32 // handles ever handed out (high-water mark)
	free     uint32 // head of the free list, threaded through next
	live     int
	cur      int64 // next tick to process: every tick < cur is done
	bitmap   [Levels]uint64
	heads    [Levels * slots]head

	fired, cascaded, relinked uint64
}

// New returns an empty wheel whose cursor starts at now (ns since the epoch).
// The store embeds its wheels and calls Init, so only this package's tests
// call New (deadcode lists it): it is the constructor of a wheel on its own.
func New[T any](now int64) *Wheel[T] {
	w := new(Wheel[T])
	w.Init(now)
	return w
}

// Init makes a zero Wheel (for example one embedded in another struct)
// ready for use, with its cursor at now. It must not be called on a wheel
// that holds handles.
func (w *Wheel[T]) Init(now int64) {
	w.free = Nil
	w.cur = now >> TickShift
	for i := range w.heads {
		w.heads[i] = head{headBase + uint32(i), headBase + uint32(i)}
	}
}

func (w *Wheel[T]) node(h uint32) *node[T] {
	return &w.chunks[h>>chunkBits][h&(chunkSize-1)]
}

// Alloc hands out an unused handle, unscheduled. The record keeps whatever
// the previous holder of the handle left in it; the caller initialises it.
// It panics after MaxHandles live handles.
func (w *Wheel[T]) Alloc() uint32 {
	var h uint32
	if w.free != Nil {
		h = w.free
		w.free = w.node(h).next()
	} else {
		if int(w.hw) >= MaxHandles {
			panic("wheel: out of handles")
		}
		h = w.hw
		w.hw++
		if int(h>>chunkBits) == len(w.chunks) {
			w.chunks = append(w.chunks, w.newChunk())
		}
	}
	n := w.node(h)
	n.setLinks(Nil, Nil)
	n.setWhen(0)
	w.live++
	return h
}

// SetChunkMemory makes the wheel ask mapChunk for the memory of each new
// node chunk: n bytes, zeroed and 8-byte aligned, typically an anonymous
// mapping outside the Go heap, or nil to take the chunk from the heap as
// usual. The wheel only stores nodes there; the caller owns the memory,
// keeps it while the wheel may use it and releases it after Reset (which
// drops every chunk) or once the wheel is unreachable. T must hold no
// pointers: the garbage collector does not see memory outside its heap.
// It costs nothing per Alloc; the hook runs once per chunk of 1024 nodes.
func (w *Wheel[T]) SetChunkMemory(mapChunk func(n int) []byte) { w.mapChunk = mapChunk }

// newChunk returns a zeroed chunk of chunkSize nodes, from mapChunk when it
// supplies one.
func (w *Wheel[T]) newChunk() []node[T] {
	if w.mapChunk != nil {
		n := chunkSize * int(unsafe.Sizeof(node[T]{}))
		if b := w.mapChunk(n); len(b) >= n && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%unsafe.Alignof(node[T]{}) == 0 {
			return unsafe.Slice((*node[T])(unsafe.Pointer(unsafe.SliceData(b))), chunkSize)
		}
	}
	return make([]node[T], chunkSize)
}

// Free cancels h and returns it to the free list. The record is left as is.
func (w *Wheel[T]) Free(h uint32) {
	n := w.node(h)
	if n.prev() == freeMark {
		panic("wheel: double free")
	}
	if n.next() != Nil {
		w.unlink(n)
	}
	n.setLinks(w.free, freeMark)
	w.free = h
	w.live--
}

// Allocated reports whether h is currently handed out.
func (w *Wheel[T]) Allocated(h uint32) bool {
	return h < w.hw && w.node(h).prev() != freeMark
}

// Reset frees every handle and drops the node chunks: heap chunks go back
// to the garbage collector, and the caller may release the memory
// SetChunkMemory supplied; the cursor and the Work counters are kept. It is O(1) apart
// from clearing the slot heads, and the wheel is empty afterwards.
func (w *Wheel[T]) Reset() {
	w.chunks = nil
	w.hw, w.free, w.live = 0, Nil, 0
	w.bitmap = [Levels]uint64{}
	for i := range w.heads {
		w.heads[i] = head{headBase + uint32(i), headBase + uint32(i)}
	}
}

// Bytes returns the memory the wheel's node chunks hold: chunks are
// allocated 1024 nodes at a time and kept until Reset, so this is the
// high-water mark of handles rounded up to a chunk, times the node size
// (13 bytes of links and deadline plus the record, rounded up to the
// record's alignment).
func (w *Wheel[T]) Bytes() int64 {
	return int64(len(w.chunks)) * chunkSize * int64(unsafe.Sizeof(node[T]{}))
}

// NodeBytes returns the size of one node: the record with its deadline and
// links, as chunks hold it.
func (w *Wheel[T]) NodeBytes() int64 { return int64(unsafe.Sizeof(node[T]{})) }

// AllocBytes returns the bytes the next Alloc adds to Bytes: zero when a
// freed handle or room in the last chunk is available, one chunk otherwise.
func (w *Wheel[T]) AllocBytes() int64 {
	if w.free != Nil || int(w.hw>>chunkBits) < len(w.chunks) {
		return 0
	}
	return chunkSize * int64(unsafe.Sizeof(node[T]{}))
}

// Cap returns the high-water mark of handles: every handle ever handed out
// is below it, so callers iterate 0..Cap()-1 (skipping free ones) to visit
// every record.
func (w *Wheel[T]) Cap() uint32 { return w.hw }

// Live returns the number of handles handed out and not freed.
func (w *Wheel[T]) Live() int { return w.live }

// At returns the record of h. Chunks never move, so the pointer stays valid
// as long as h is allocated.
func (w *Wheel[T]) At(h uint32) *T { return &w.node(h).val }

// When returns the deadline of h (ns), or 0 if it was never scheduled.
func (w *Wheel[T]) When(h uint32) int64 { return w.node(h).when() }

// Scheduled reports whether h is waiting in the wheel.
func (w *Wheel[T]) Scheduled(h uint32) bool { return w.node(h).next() != Nil }

// Cursor returns the first tick not yet processed by Advance.
func (w *Wheel[T]) Cursor() int64 { return w.cur }

// Due reports whether Advance(now) has any tick to process: a cheap test
// for callers that drive the wheel on every access.
func (w *Wheel[T]) Due(now int64) bool { return now>>TickShift > w.cur }

// Work returns cumulative counters: nodes fired, nodes cascaded to a lower
// level, and nodes relinked (by Schedule to an earlier slot, or re-placed
// by Advance after their deadline moved later).
func (w *Wheel[T]) Work() (fired, cascaded, relinked uint64) {
	return w.fired, w.cascaded, w.relinked
}

// slot returns the index in heads of the slot that holds deadline when
// relative to the current cursor.
func (w *Wheel[T]) slot(when int64) int {
	t := when >> TickShift
	d := t - w.cur
	if d < slots {
		if d < 0 {
			t = w.cur
		}
		return int(t & (slots - 1))
	}
	if d >= span {
		t, d = w.cur+span-1, span-1
	}
	l := (63 - bits.LeadingZeros64(uint64(d))) / slotBits
	return l*slots + int((t>>(slotBits*l))&(slots-1))
}

// setNext sets the next link of v, a node or a slot sentinel.
func (w *Wheel[T]) setNext(v, x uint32) {
	if v >= headBase {
		w.heads[v-headBase].next = x
		return
	}
	w.node(v).setNext(x)
}

// setPrev sets the prev link of v, a node or a slot sentinel.
func (w *Wheel[T]) setPrev(v, x uint32) {
	if v >= headBase {
		w.heads[v-headBase].prev = x
		return
	}
	w.node(v).setPrev(x)
}

func (w *Wheel[T]) link(s int, h uint32, n *node[T]) {
	hd := &w.heads[s]
	n.setLinks(hd.next, headBase+uint32(s))
	w.setPrev(hd.next, h)
	hd.next = h
	w.bitmap[s>>slotBits] |= 1 << (s & (slots - 1))
}

func (w *Wheel[T]) unlink(n *node[T]) {
	next, prev := n.next(), n.prev()
	w.setNext(prev, next)
	w.setPrev(next, prev)
	if prev >= headBase && next >= headBase { // slot now empty
		s := prev - headBase
		w.bitmap[s>>slotBits] &^= 1 << (s & (slots - 1))
	}
	n.setLinks(Nil, Nil)
}

// Schedule sets the deadline of h to when (ns) and reports whether the node
// was linked into a slot: always for a node not yet scheduled, never for a
// deadline at or after the one it had (the node stays where it is and
// Advance re-places it when that slot comes due), and for an earlier one
// when it falls in another slot. A deadline at or before the cursor fires
// at the next Advance past the current tick.
func (w *Wheel[T]) Schedule(h uint32, when int64) bool {
	n := w.node(h)
	if n.next() != Nil && when>>TickShift >= n.when()>>TickShift {
		// The node's slot comes due at or before its old deadline's tick,
		// so at or before the new one's: it may stay. No neighbour in the
		// slot's list is touched.
		n.setWhen(when)
		return false
	}
	s := w.slot(when)
	if n.next() != Nil {
		if w.slot(n.when()) == s {
			n.setWhen(when)
			return false
		}
		w.unlink(n)
	}
	n.setWhen(when)
	w.link(s, h, n)
	w.relinked++
	return true
}

// Cancel removes h from the wheel; its record and handle stay allocated.
func (w *Wheel[T]) Cancel(h uint32) {
	if n := w.node(h); n.next() != Nil {
		w.unlink(n)
	}
}

// nextEvent returns the first tick >= cur at which a slot must be processed,
// or math.MaxInt64 if the wheel is empty.
func (w *Wheel[T]) nextEvent() int64 {
	best := int64(math.MaxInt64)
	c := w.cur
	if bm := w.bitmap[0]; bm != 0 {
		best = c + int64(bits.TrailingZeros64(bits.RotateLeft64(bm, -int(c&(slots-1)))))
	}
	for l := 1; l < Levels; l++ {
		bm := w.bitmap[l]
		if bm == 0 {
			continue
		}
		sh := uint(slotBits * l)
		k := (c + (1 << sh) - 1) >> sh // first level-l boundary at or after c
		k += int64(bits.TrailingZeros64(bits.RotateLeft64(bm, -int(k&(slots-1)))))
		if t := k << sh; t < best {
			best = t
		}
	}
	return best
}

// detach empties slot s and returns the first node of its former list.
func (w *Wheel[T]) detach(s int) uint32 {
	hd := &w.heads[s]
	first := hd.next
	w.setNext(hd.prev, Nil) // terminate the list at its last node
	hd.next, hd.prev = headBase+uint32(s), headBase+uint32(s)
	w.bitmap[s>>slotBits] &^= 1 << (s & (slots - 1))
	return first
}

// Advance processes every tick that ended at or before now and calls fire
// for each node whose deadline fell in one of them, in tick order. Every
// fired node has when <= now and is unscheduled before fire runs. fire may
// Free or Schedule the handle it is given, and Alloc new ones, but must not
// Free, Schedule or Cancel any other scheduled handle. Advance returns the
// number of nodes fired.
func (w *Wheel[T]) Advance(now int64, fire func(h uint32)) int {
	target := now >> TickShift
	fired := 0
	for w.cur < target {
		t := w.nextEvent()
		if t >= target {
			break
		}
		w.cur = t
		for l := Levels - 1; l >= 1; l-- { // cascade, highest level first
			sh := uint(slotBits * l)
			if t&(1<<sh-1) != 0 {
				continue
			}
			s := l*slots + int((t>>sh)&(slots-1))
			if w.bitmap[l]&(1<<(s&(slots-1))) == 0 {
				continue
			}
			for h := w.detach(s); h != Nil; {
				n := w.node(h)
				next := n.next()
				w.link(w.slot(n.when()), h, n)
				w.cascaded++
				h = next
			}
		}
		s := int(t & (slots - 1))
		if w.bitmap[0]&(1<<s) != 0 {
			for h := w.detach(s); h != Nil; {
				n := w.node(h)
				next := n.next()
				if n.when()>>TickShift > t {
					// Its deadline moved later after it was placed here
					// (Schedule): place it by the deadline it has now.
					w.link(w.slot(n.when()), h, n)
					w.relinked++
				} else {
					n.setLinks(Nil, Nil)
					w.fired++
					fired++
					fire(h)
				}
				h = next
			}
		}
		w.cur = t + 1
	}
	if w.cur < target {
		w.cur = target
	}
	return fired
}
