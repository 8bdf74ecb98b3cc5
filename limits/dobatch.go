package limits

import "github.com/throttlekit/throttlekit-server/shard"

// Batcher is the scratch space of Local.DoBatch: a shard.Batch whose slices
// grow to the largest batch run through it and are then reused. The caller
// owns it (an event loop keeps one) and must not use it from two
// goroutines at once; the zero value is ready.
type Batcher struct {
	sb shard.Batch
}

// DoBatch runs ops at now, in order, with the results in each Op as Do
// would leave them had it run them one after the other: an operation sees
// the effect of the ones before it on the same key. The transforming kinds
// (OpCheck, OpLease, OpReturn, OpCell, OpRateGCRA) go through one
// shard.Batch, which hashes every key and loads each key's table slot and
// node before applying any, so the cache misses of the keys overlap
// instead of being waited for one after the other (see shard.Batch). An
// OpPeek or OpReset in the run first applies the transforms queued before
// it, then runs on its own.
//
// The cost is Do's work per operation plus, per run of transforms, one
// lock per distinct shard, held for the whole run (see shard.Batch).
// Nothing allocates once b has grown to the largest batch
// (TestDoBatchZeroAlloc). The keys' bytes must stay valid until DoBatch
// returns. DoBatch runs outside any Section: a caller inside one (EXEC)
// runs its operations with Do.
func (c *Local) DoBatch(b *Batcher, ops []Op, now int64) {
	b.sb.Begin(c.store)
	for i := range ops {
		op := &ops[i]
		switch op.Kind {
		case OpPeek, OpReset:
			if b.sb.Len() > 0 {
				b.sb.Apply(now)
			}
			c.Do(op, now, nil)
		default:
			b.sb.Add(op.Key, (*transform)(op))
		}
	}
	if b.sb.Len() > 0 {
		b.sb.Apply(now)
	}
}
