package upstream

import (
	"math/rand/v2"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/shard"
)

// fnTransform adapts a function to shard.Transform.
type fnTransform func(engine.State, int64) (engine.State, int64)

func (f fnTransform) Apply(cur engine.State, now int64) (engine.State, int64) { return f(cur, now) }

// TestModelMatchesStore checks the reference model of the differential
// tests against shard.Store itself: the same random operations on both,
// with a clock that never goes back (the store may reclaim an expired key
// at any later write, the model keeps it until one comes for that key; both
// read it as absent), must see the same state in every key after every
// operation and give the same replies. Redis's GCRA command runs through
// limits.Local (OpRateGCRA), as the in-memory server runs it.
func TestModelMatchesStore(t *testing.T) {
	g := gen{rand.New(rand.NewPCG(7, 7))}
	st := shard.New(shard.Config{Shards: 4})
	loc := limits.NewLocal(st, limits.Config{})
	m := newModel()
	keys := []string{"a", "b", "c", "d"}
	now := origins[0]
	for i := 0; i < 20000; i++ {
		now += g.r.Int64N(3e9)
		k := keys[g.r.IntN(len(keys))]
		switch g.r.IntN(6) {
		case 0, 1:
			l := g.limit(g.algo())
			cost := g.cost(l)
			want, werr := m.check(k, l, now, cost)
			var got engine.Decision
			var gerr error
			if l, err := engine.NewLimit(l.Algo, l.Limit, l.Period, l.Burst); err != nil {
				gerr = err
			} else {
				st.Apply([]byte(k), now, fnTransform(func(s engine.State, now int64) (engine.State, int64) {
					next, d, ttl, err := l.Check(s, now, cost)
					got, gerr = d, err
					if err != nil {
						return s, 0
					}
					return next, ttl
				}))
			}
			if got != want || gerr != werr {
				t.Fatalf("op %d check: store %+v %v, model %+v %v", i, got, gerr, want, werr)
			}
		case 2:
			limit, period, batch := g.pick(1, 10, 1000), g.pick(1e9, 60e9), g.pick(0, 1, 5, 100)
			want, _ := m.lease(k, limit, period, now, batch)
			l, _ := engine.NewLimit(engine.KindFixed, limit, period, 0)
			var got engine.Decision
			st.Apply([]byte(k), now, fnTransform(func(s engine.State, now int64) (engine.State, int64) {
				next, d, ttl, err := l.Lease(s, now, batch)
				got = d
				if err != nil {
					return s, 0
				}
				return next, ttl
			}))
			if got != want {
				t.Fatalf("op %d lease: store %+v, model %+v", i, got, want)
			}
		case 3:
			c := g.cell()
			q := g.quantity()
			want, werr := m.throttle(k, c, now, q)
			var got engine.CellReply
			var gerr error
			if c, err := engine.NewCell(c.MaxBurst, c.CountPerPeriod, c.PeriodSec); err != nil {
				gerr = err
			} else {
				st.Apply([]byte(k), now, fnTransform(func(s engine.State, now int64) (engine.State, int64) {
					next, r, ttl, err := c.Throttle(s, now, q)
					got, gerr = r, err
					if err != nil {
						return s, 0
					}
					return next, ttl
				}))
			}
			if got != want || gerr != werr {
				t.Fatalf("op %d cell: store %+v %v, model %+v %v", i, got, gerr, want, werr)
			}
		case 5:
			rg := g.rateGCRA()
			want, werr := m.rateGCRA(k, rg, now)
			op := limits.Op{Kind: limits.OpRateGCRA, Key: []byte(k), GCRA: rg}
			if rg.Burst < 1 || rg.Interval < 1 || rg.Tokens < 1 {
				op.Err = engine.ErrOutOfRange // refused before the store, by the client and the script
			} else {
				loc.Do(&op, now, nil)
			}
			if op.GCRAReply != want || op.Err != werr {
				t.Fatalf("op %d gcra: local %+v %v, model %+v %v", i, op.GCRAReply, op.Err, want, werr)
			}
		case 4:
			if g.r.IntN(4) == 0 {
				want := m.reset([]string{k}, now)
				got := int64(0)
				if st.Delete([]byte(k), now) {
					got = 1
				}
				if got != want {
					t.Fatalf("op %d reset: store %d, model %d", i, got, want)
				}
			}
		}
		for _, key := range keys {
			got, _ := st.Get([]byte(key), now)
			if want := m.get(key, now); got != want {
				t.Fatalf("op %d: key %s: store holds %+v, model %+v", i, key, got, want)
			}
		}
	}
}
