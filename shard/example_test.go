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
