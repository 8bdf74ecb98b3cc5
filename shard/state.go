package shard

import (
	"encoding/binary"
	"unsafe"

	"github.com/throttlekit/throttlekit-server/engine"
)

// A state's two words are kept in one word of its entry, with the key's
// expiry (the wheel's deadline) standing in for the other when they are
// equal, and in a side word otherwise. The encoding is chosen on every
// write from the State and the expiry being stored, never from the kind,
// so every State reads back exactly; the mode is kept in two bits of the
// entry's kind byte that no kind may use (KindBits):
//
//	modeA     B == 0:        word = A                  (GCRA, ban, Redis GCRA)
//	modeB     A == expiry:   word = B, A = the expiry  (fixed window)
//	modeAX    B == expiry:   word = A, B = the expiry  (ban count)
//	modeWide  otherwise:     word = A, B in the side array (token, sliding)
//
// The checks run in that order, so a state that fits several modes takes
// the first.
const (
	modeA    = 0x00
	modeB    = 0x20
	modeAX   = 0x80
	modeWide = modeB | modeAX
	modeMask = modeWide
)

// KindBits is the mask of the engine.Kind bits the store may use: the
// store keeps its encoding of a state in the other two (0xA0) of the
// entry's kind byte. Every kind of engine and of the packages above it
// leaves them clear (TestKindBits lists them); Apply panics on a state of
// a kind that sets them, and Load refuses one.
const KindBits = engine.Kind(^uint8(modeMask))

// Side chunks hold the second word of the wide states of 1024 handles (the
// wheel's chunk of nodes), 8 KiB each.
const (
	sideShift = 10
	sideLen   = 1 << sideShift
	sideBytes = sideLen * 8
)

// sideChunk is the second words of the wide states of sideLen handles.
type sideChunk [sideLen]int64

// state decodes the state of handle h, whose entry is e and whose deadline
// (the key's expiry) is exp.
func (sh *shard) state(h uint32, e *entry, exp int64) engine.State {
	w := int64(binary.LittleEndian.Uint64(e.w[:]))
	st := engine.State{A: w, Kind: e.stateKind()}
	switch e.kind & modeMask {
	case modeA:
	case modeB:
		st.A, st.B = exp, w
	case modeAX:
		st.B = exp
	default:
		st.B = sh.mapped.side[h>>sideShift][h&(sideLen-1)]
	}
	return st
}

// setState encodes st into handle h's entry e, for a key whose expiry
// (the deadline the caller schedules next) is exp. A wide state writes its
// second word to the side array, allocating the side chunk of h's 1024
// handles the first time one of them needs it.
func (sh *shard) setState(h uint32, e *entry, st engine.State, exp int64) {
	if st.Kind&^KindBits != 0 {
		panic("shard: a state's kind uses the bits the store reserves (see KindBits)")
	}
	w, m := st.A, uint8(modeA)
	switch {
	case st.B == 0:
	case st.A == exp:
		w, m = st.B, modeB
	case st.B == exp:
		m = modeAX
	default:
		m = modeWide
		sh.sideOf(h)[h&(sideLen-1)] = st.B
	}
	binary.LittleEndian.PutUint64(e.w[:], uint64(w))
	e.kind = uint8(st.Kind) | m
}

// stateKind returns the Kind of e's state, without the encoding bits.
func (e *entry) stateKind() engine.Kind { return engine.Kind(e.kind &^ modeMask) }

// wide reports whether e keeps its state's second word in the side array.
func (e *entry) wide() bool { return e.kind&modeMask == modeWide }

// sideOf returns the side chunk of h, allocating it if h's 1024 handles
// have none yet: an anonymous mapping outside the Go heap, or heap memory
// where mapping fails. It stays until FlushAll or the Store's cleanup, as
// node chunks do.
func (sh *shard) sideOf(h uint32) *sideChunk {
	o := sh.mapped
	c := int(h >> sideShift)
	if c < len(o.side) && o.side[c] != nil {
		return o.side[c]
	}
	for len(o.side) <= c {
		o.side = append(o.side, nil)
	}
	b := mapBytes(sideBytes)
	if b != nil {
		o.sideMaps = append(o.sideMaps, b)
	} else {
		b = make([]byte, sideBytes)
	}
	o.side[c] = (*sideChunk)(unsafe.Pointer(unsafe.SliceData(b)))
	o.sideChunks++
	return o.side[c]
}
