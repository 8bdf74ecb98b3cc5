package shard_test

import (
	"fmt"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// hits counts requests per key for a minute; it records what it saw.
type hits struct{ seen int64 }

func (h *hits) Apply(cur engine.State, now int64) (engine.State, int64) {
	h.seen = cur.A
	return engine.State{A: cur.A + 1, B: now, Kind: engine.KindFixed}, 60e9
}

func Example() {
	s := shard.New(shard.Config{MaxKeys: 1000})
	now := int64(1_800_000_000e9)
	var h hits
	for i := 0; i < 3; i++ {
		s.Apply([]byte("user:42"), now, &h)
	}
	st, ok := s.Get([]byte("user:42"), now)
	fmt.Println(h.seen, st.A, ok)
	s.Apply([]byte("user:7"), now, &h)
	_, ok = s.Get([]byte("user:42"), now+60e9) // expired exactly at now+ttl, reclaimed by the read
	fmt.Println(ok, s.Len())
	fmt.Println(s.Sweep(now+61e9), s.Len()) // the sweep reclaims user:7
	// Output:
	// 2 3 true
	// false 1
	// 1 0
}

func ExampleStore_Scan() {
	s := shard.New(shard.Config{Shards: 4})
	now := int64(1_800_000_000e9)
	var h hits
	for _, k := range []string{"a", "b", "c", "d", "e"} {
		s.Apply([]byte(k), now, &h)
	}
	var page shard.ScanPage // reused by every call
	seen := map[string]bool{}
	cursor := uint64(0)
	for {
		next, err := s.Scan(&page, cursor, 2, now)
		if err != nil {
			panic(err)
		}
		for i := 0; i < page.Len(); i++ {
			seen[string(page.Key(i))] = true // a key may come twice: dedupe
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	fmt.Println(len(seen))
	// Output: 5
}

// setA stores a count in A.
type setA struct{ a int64 }

func (t *setA) Apply(cur engine.State, now int64) (engine.State, int64) {
	return engine.State{A: t.a, B: now, Kind: engine.KindFixed}, 60e9
}

func ExampleTxn() {
	s := shard.New(shard.Config{})
	now := int64(1_800_000_000e9)
	from, to := []byte("wallet:1"), []byte("wallet:2")
	s.Apply(from, now, &setA{10})
	s.Apply(to, now, &setA{1})

	var tx shard.Txn // reusable; one per goroutine
	tx.Begin(s)
	tx.Add(from)
	tx.Add(to)
	tx.Lock()
	a, _, _ := tx.Get(from, now)
	b, _, _ := tx.Get(to, now)
	if a.A >= 3 { // all or nothing: both keys change, or neither
		tx.Apply(from, now, &setA{a.A - 3})
		tx.Apply(to, now, &setA{b.A + 3})
	}
	// An operation on a key not added before Lock returns ErrNotLocked
	// unless the key happens to share a locked shard.
	tx.Unlock()

	x, _ := s.Get(from, now)
	y, _ := s.Get(to, now)
	fmt.Println(x.A, y.A)
	// Output: 7 4
}
