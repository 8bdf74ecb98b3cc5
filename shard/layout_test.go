package shard

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/throttlekit/throttlekit-server/engine"
)

// TestNodeSize pins the per-key layout the package doc budgets: a 26-byte
// entry of alignment 1, so the wheel's node (8-byte deadline, two 20-bit
// links, entry) is 39 bytes, and Stats.Bytes counts node chunks of 1024 of
// them.
func TestNodeSize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got != 26 {
		t.Errorf("entry is %d bytes, want 26", got)
	}
	if got := unsafe.Alignof(entry{}); got != 1 {
		t.Errorf("entry alignment is %d, want 1", got)
	}
	s := New(Config{Shards: 1})
	s.Apply([]byte("k"), t0, &inc{ttl: 1e9})
	sh := &s.shards[0]
	if got, want := sh.w.Bytes(), int64(1024*39); got != want {
		t.Errorf("one node chunk holds %d bytes, want %d", got, want)
	}
}

// TestKeyLengths stores keys of every length around the inline bound
// (inline up to 16 bytes, in the arena past it) and a few long ones, keys
// that differ only in their last byte or only past the 8 bytes an arena
// key keeps in its node, and checks that each reads back its own state
// through Get, Lookup, Scan and Flush, and that deleting half keeps the
// other half intact through arena compaction.
func TestKeyLengths(t *testing.T) {
	s := New(Config{Shards: 2})
	var keys [][]byte
	for n := 0; n <= 40; n++ {
		keys = append(keys, bytes.Repeat([]byte("k"), n))
		if n > 0 {
			k := bytes.Repeat([]byte("k"), n)
			k[n-1] = 'z' // differs in the last byte only
			keys = append(keys, k)
		}
	}
	for _, n := range []int{300, 20_000, MaxKeyLen} {
		keys = append(keys, bytes.Repeat([]byte("L"), n))
		k := bytes.Repeat([]byte("L"), n)
		k[n/2] = 'M'
		keys = append(keys, k)
	}
	for i, k := range keys {
		st := engine.State{A: int64(i + 1), B: int64(-i), Kind: engine.Kind(i%200+1) & KindBits}
		s.Apply(k, t0, &put{st: st, ttl: 1e9})
	}
	check := func(from int, step int) {
		t.Helper()
		for i := from; i < len(keys); i += step {
			k := keys[i]
			want := engine.State{A: int64(i + 1), B: int64(-i), Kind: engine.Kind(i%200+1) & KindBits}
			if got, ok := s.Get(k, t0); !ok || got != want {
				t.Fatalf("key of %d bytes (#%d): Get = %+v %v, want %+v", len(k), i, got, ok, want)
			}
			if got, exp, ok := s.Lookup(k, t0); !ok || got != want || exp != t0+1e9 {
				t.Fatalf("key of %d bytes (#%d): Lookup = %+v %d %v", len(k), i, got, exp, ok)
			}
		}
	}
	check(0, 1)
	seen := map[string]int{}
	s.Flush(func(k []byte, st engine.State, exp int64) { seen[string(k)] = int(st.A) })
	if len(seen) != len(keys) {
		t.Fatalf("Flush reported %d keys, want %d", len(seen), len(keys))
	}
	for i, k := range keys {
		if seen[string(k)] != i+1 {
			t.Fatalf("Flush: key of %d bytes (#%d) has A %d", len(k), i, seen[string(k)])
		}
	}
	for i := 0; i < len(keys); i += 2 {
		if !s.Delete(keys[i], t0) {
			t.Fatalf("Delete of key #%d (%d bytes) found nothing", i, len(keys[i]))
		}
	}
	check(1, 2)
	var p ScanPage
	n := 0
	for c := uint64(0); ; {
		c, _ = s.Scan(&p, c, 7, t0)
		n += p.Len()
		if c == 0 {
			break
		}
	}
	if want := len(keys) / 2; n != want {
		t.Fatalf("Scan returned %d keys, want %d", n, want)
	}
}

// put is a transform that stores st with ttl.
type put struct {
	st  engine.State
	ttl int64
}

func (x *put) Apply(engine.State, int64) (engine.State, int64) { return x.st, x.ttl }
