package limits

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
)

// TestDoBatchMatchesDo runs random batches of every single-key kind (the
// same key several times in a batch, a key checked with two algorithms,
// peeks and resets between transforms, bad costs) through DoBatch on one
// Local and the same operations through Do one at a time on another, and
// compares every result and the final states.
func TestDoBatchMatchesDo(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 1))
	a, z := newLocal(t), newLocal(t)
	gcra := newLimit(t, engine.KindGCRA, 3, 1e9)
	token := newLimit(t, engine.KindToken, 4, 2e9)
	fixed := newLimit(t, engine.KindFixed, 5, 1e9)
	cell, err := engine.NewCell(2, 3, 1)
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, 12)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key:%d", i))
	}
	var b Batcher
	now := int64(1_700_000_000_000_000_000)
	for round := range 3000 {
		now += int64(r.IntN(4)) * 1e8
		n := 1 + r.IntN(24)
		ops := make([]Op, n)
		for i := range ops {
			op := &ops[i]
			op.Key = keys[r.IntN(len(keys))]
			op.Cost = int64(r.IntN(4))
			if r.IntN(40) == 0 {
				op.Cost = -1 // refused by the engine: the state stays
			}
			switch k := r.IntN(10); {
			case k < 4:
				op.Kind, op.Limit = OpCheck, []engine.Limit{gcra, token, fixed}[r.IntN(3)]
			case k < 6:
				op.Kind, op.Cell = OpCell, cell
			case k == 6:
				op.Kind, op.Limit = OpLease, fixed
				op.Cost = int64(1 + r.IntN(3))
			case k == 7:
				op.Kind, op.Credits, op.ResetAt = OpReturn, int64(r.IntN(3)), (now/1e9+1)*1000
			case k == 8:
				op.Kind, op.Limit = OpPeek, gcra
			default:
				op.Kind = OpReset
			}
		}
		one := append([]Op(nil), ops...)
		a.DoBatch(&b, ops, now)
		for i := range one {
			z.Do(&one[i], now, nil)
			if fmt.Sprint(ops[i]) != fmt.Sprint(one[i]) {
				t.Fatalf("round %d op %d: batch %+v, one at a time %+v", round, i, ops[i], one[i])
			}
		}
	}
	for _, k := range keys {
		sa, ea, oka := a.Lookup(k, now, nil)
		sz, ez, okz := z.Lookup(k, now, nil)
		if sa != sz || ea != ez || oka != okz {
			t.Fatalf("key %s: batch %+v %d %v, one at a time %+v %d %v", k, sa, ea, oka, sz, ez, okz)
		}
	}
}

// TestDoBatchZeroAlloc: a reused Batch of existing keys allocates nothing.
func TestDoBatchZeroAlloc(t *testing.T) {
	c := newLocal(t)
	now := int64(1_700_000_000_000_000_000)
	lim := newLimit(t, engine.KindGCRA, 1_000_000, 1e9)
	cell, err := engine.NewCell(1_000_000, 1_000_000, 1)
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]Op, 32)
	for i := range ops {
		ops[i] = Op{Kind: OpCheck, Key: []byte(fmt.Sprintf("k%d", i%20)), Limit: lim, Cost: 1}
		if i%3 == 0 {
			ops[i] = Op{Kind: OpCell, Key: []byte(fmt.Sprintf("c%d", i)), Cell: cell, Cost: 1}
		}
	}
	ops[7].Kind = OpPeek
	var b Batcher
	run := func() { c.DoBatch(&b, ops, now) }
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Fatalf("%v allocations per batch", n)
	}
	for i := range ops {
		if ops[i].Err != nil {
			t.Fatalf("op %d: %v", i, ops[i].Err)
		}
	}
}
