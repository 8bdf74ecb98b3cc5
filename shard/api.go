package shard

import "github.com/throttlekit/throttlekit-server/engine"

// Transform is a read-modify-write of one key's state. Store.Apply runs it
// atomically with respect to every other call on the same key.
//
// Apply receives the key's current state (the zero engine.State when the key
// is absent or expired) and returns the state to keep with its time to live
// in nanoseconds from now. A ttl <= 0 removes the key. Returning next == cur
// leaves the key untouched (not created, not marked dirty). Implementations
// record their own outputs (a Decision, an error) in their receiver, so a
// caller passes a pointer it owns and nothing is allocated. The Kind of a
// state to keep must be within KindBits (every engine kind is); Apply
// panics on one that is not.
type Transform interface {
	Apply(cur engine.State, now int64) (next engine.State, ttl int64)
}
