package limits

import (
	"errors"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// TestDoMatchesEngine: an Op gives the engine's decision and leaves the
// engine's state, for each single-key kind.
func TestDoMatchesEngine(t *testing.T) {
	c := newLocal(t)
	now := int64(1_700_000_000_000_000_000)
	lim := newLimit(t, engine.KindGCRA, 3, 1e9)
	key := []byte("k")
	var st engine.State
	for i := 0; i < 5; i++ {
		next, want, _, err := lim.Check(st, now, 1)
		if err != nil {
			t.Fatal(err)
		}
		op := Op{Kind: OpCheck, Key: key, Limit: lim, Cost: 1}
		c.Do(&op, now, nil)
		if op.Err != nil || op.Decision != want {
			t.Fatalf("check %d: %+v %v, want %+v", i, op.Decision, op.Err, want)
		}
		if got, _ := c.Get(key, now, nil); got != next {
			t.Fatalf("check %d: state %+v, want %+v", i, got, next)
		}
		st = next
	}
	// A peek consumes nothing and reports the denial the next check gets.
	d, err := c.Peek(key, &lim, 1, now, nil)
	if err != nil || d.Allowed != 0 {
		t.Fatalf("peek after the burst: %+v %v", d, err)
	}
	if got, _ := c.Get(key, now, nil); got != st {
		t.Fatal("peek changed the state")
	}
	// An engine error leaves the state as it was.
	tok := newLimit(t, engine.KindToken, 3, 1e9)
	op := Op{Kind: OpCheck, Key: key, Limit: tok, Cost: 1}
	c.Do(&op, now, nil)
	if !errors.Is(op.Err, engine.ErrWrongType) {
		t.Fatalf("check of another algorithm: %v", op.Err)
	}
	if got, _ := c.Get(key, now, nil); got != st {
		t.Fatal("a failed check changed the state")
	}
	if !c.Reset(key, now, nil) || c.Reset(key, now, nil) {
		t.Fatal("Reset should report the state once")
	}
}

// TestSectionRoutes: inside a Section, calls run on the section's locked
// shards (a call of its own would wait for them) and a key the section
// does not hold is reported to Misroute and read as absent.
func TestSectionRoutes(t *testing.T) {
	var misrouted []error
	c := NewLocal(shard.New(shard.Config{Shards: 16, MaxKeys: 1024}), Config{Misroute: func(err error) { misrouted = append(misrouted, err) }})
	now := int64(1_700_000_000_000_000_000)
	lim := newLimit(t, engine.KindFixed, 2, 1e9)
	var sec Section
	c.Begin(&sec)
	for _, k := range []string{"a", "b"} {
		if err := sec.Add([]byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sec.Lock(); err != nil {
		t.Fatal(err)
	}
	op := Op{Kind: OpCheck, Key: []byte("a"), Limit: lim, Cost: 1}
	c.Do(&op, now, &sec)
	m := MCheck{Keys: [][]byte{[]byte("a"), []byte("b")}, Limits: []engine.Limit{lim, lim}, Cost: 1}
	if err := c.MCheck(&m, now, &sec); err != nil || !m.Allowed {
		t.Fatalf("MCheck inside the section: %+v %v", m, err)
	}
	q := Acquire{Key: []byte("b"), Limit: 1, TTL: 1e9}
	if err := c.Acquire(&q, now, &sec); err != nil || !q.Acquired {
		t.Fatalf("Acquire inside the section: %+v %v", q, err)
	}
	if len(misrouted) != 0 {
		t.Fatalf("misrouted: %v", misrouted)
	}
	if _, ok := c.Get([]byte("undeclared-key-on-another-shard"), now, &sec); ok {
		t.Fatal("an undeclared key read as present")
	}
	sec.Unlock()
	if st, _ := c.Get([]byte("a"), now, nil); st.B != 2 {
		t.Fatalf("a used %d, want 2", st.B)
	}
	if len(misrouted) == 0 {
		// The key may share a shard with a or b; then the read is legal.
		t.Log("undeclared key shares a declared shard")
	}
}

// TestRecordsFull: a full record store refuses a reservation before
// charging and a slot before taking it, with ErrRecordsFull.
func TestRecordsFull(t *testing.T) {
	c := NewLocal(shard.New(shard.Config{Shards: 16, MaxKeys: 1024}), Config{MaxRecords: 1})
	now := int64(1_700_000_000_000_000_000)
	lim := newLimit(t, engine.KindFixed, 100, 1e9)
	r := Reserve{Key: []byte("r"), Limit: lim, Estimate: 5, TTL: 1e9}
	if err := c.Reserve(&r, now, nil); err != nil || r.Decision.Allowed != 1 {
		t.Fatalf("first reservation: %+v %v", r.Decision, err)
	}
	if err := c.Reserve(&r, now, nil); !errors.Is(err, ErrRecordsFull) {
		t.Fatalf("second reservation: %v, want ErrRecordsFull", err)
	}
	if st, _ := c.Get([]byte("r"), now, nil); st.B != 5 {
		t.Fatalf("used %d after a refused reservation, want 5", st.B)
	}
	q := Acquire{Key: []byte("s"), Limit: 3, TTL: 1e9}
	if err := c.Acquire(&q, now, nil); !errors.Is(err, ErrRecordsFull) || q.Acquired {
		t.Fatalf("acquire in a full store: %+v %v", q, err)
	}
	if n := c.RecordStats().Keys; n != 1 {
		t.Fatalf("%d records, want 1", n)
	}
	if err := c.Reserve(&Reserve{Key: make([]byte, MaxKeyLen+1), Limit: lim, TTL: 1e9}, now, nil); !errors.Is(err, ErrKeyTooLong) {
		t.Fatalf("long key: %v", err)
	}
}

// TestZeroAlloc: once keys and records exist, no operation allocates.
func TestZeroAlloc(t *testing.T) {
	if raceOn {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	c := newLocal(t)
	now := int64(1_700_000_000_000_000_000)
	lim := newLimit(t, engine.KindGCRA, 1_000_000, 1e9)
	fixed := newLimit(t, engine.KindFixed, 1_000_000, 1e9)
	ban, _ := engine.NewBan(3, lim.Period, 1e9)
	k1, k2 := []byte("za"), []byte("zb")
	op := Op{Kind: OpCheck, Key: k1, Limit: lim, Cost: 1}
	m := MCheck{Keys: [][]byte{k1, k2}, Limits: []engine.Limit{lim, lim}, Cost: 1}
	cb := CheckBan{Key: k1, Limit: lim, Cost: 1, Ban: ban}
	r := Reserve{Key: k2, Limit: fixed, Estimate: 2, TTL: 1e9}
	var s Settle
	q := Acquire{Key: k1, Limit: 4, TTL: 1e9}
	var sl SlotCall
	var bc BanCall
	run := func() {
		c.Do(&op, now, nil)
		_, _ = c.Peek(k1, &lim, 1, now, nil)
		_ = c.MCheck(&m, now, nil)
		_ = c.CheckBan(&cb, now, nil)
		_, _ = c.Banned(k1, now)
		_ = c.Reserve(&r, now, nil)
		s = Settle{Key: k2, ID: r.ID, Actual: 1}
		_ = c.Settle(&s, now, nil)
		_ = c.Acquire(&q, now, nil)
		_, _ = c.Refresh(k1, q.Token, 1e9, now, nil)
		_, _ = c.Release(k1, q.Token, now, nil)
		_ = c.Acquire(&q, now, nil)
		sl = SlotCall{Key: k1, Token: q.Token, TTL: 1e9}
		_ = c.Slot(&sl, now, nil) // refresh
		sl.TTL = 0
		_ = c.Slot(&sl, now, nil) // release
		bc = BanCall{Key: k1}
		_ = c.Ban(&bc, now, nil)
	}
	for range 100 {
		run()
	}
	if n := testing.AllocsPerRun(200, run); n > 0 {
		t.Fatalf("%v allocations per round of operations", n)
	}
}

// TestLocalCompletes: Local completes every operation before it returns
// (the package doc's seam: a front reads the results right after the call).
func TestLocalCompletes(t *testing.T) {
	c := newLocal(t)
	now := int64(1_700_000_000_000_000_000)
	lim := newLimit(t, engine.KindFixed, 1, 1e9)
	op := Op{Kind: OpLease, Key: []byte("l"), Limit: lim, Cost: 5}
	c.Do(&op, now, nil)
	if op.Err != nil || op.Decision.Allowed != 1 {
		t.Fatalf("lease: %+v %v", op.Decision, op.Err)
	}
	op = Op{Kind: OpReturn, Key: []byte("l"), Credits: 1, ResetAt: op.Decision.ResetAt}
	c.Do(&op, now, nil)
	if op.Err != nil || op.Accepted != 1 {
		t.Fatalf("return: accepted %d, %v", op.Accepted, op.Err)
	}
	cell, err := engine.NewCell(0, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	op = Op{Kind: OpCell, Key: []byte("c"), Cell: cell, Cost: 1}
	c.Do(&op, now, nil)
	if op.Err != nil || op.CellReply.Limited != 0 || op.CellReply.Limit != 1 {
		t.Fatalf("cell: %+v %v", op.CellReply, op.Err)
	}
}
