package limits

import (
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// Backend is the set of operations a front runs, whatever serves them.
// Local implements it over the in-process store; an upstream-backed
// implementation (package doc, "Where an upstream plugs in") implements
// the same methods with the same operation values, so a front that holds
// a Backend does not change when the backend does. The fronts define no
// interface of their own: they hold this one.
type Backend interface {
	// Single-key operations.
	Do(op *Op, now int64, sec *Section)
	Peek(key []byte, lim *engine.Limit, cost, now int64, sec *Section) (engine.Decision, error)
	Reset(key []byte, now int64, sec *Section) bool

	// Several operations as one unit (a transaction's).
	Exec(b *Batch, now int64, sec *Section) error

	// Admission beyond one limit.
	MCheck(m *MCheck, now int64, sec *Section) error
	Reserve(r *Reserve, now int64, sec *Section) error
	Settle(s *Settle, now int64, sec *Section) error
	CheckBan(cb *CheckBan, now int64, sec *Section) error
	Ban(b *BanCall, now int64, sec *Section) error
	Acquire(q *Acquire, now int64, sec *Section) error
	Slot(s *SlotCall, now int64, sec *Section) error

	// The keyspace and its statistics.
	Begin(sec *Section)
	Get(key []byte, now int64, sec *Section) (engine.State, bool)
	Lookup(key []byte, now int64, sec *Section) (engine.State, int64, bool)
	Scan(p *shard.ScanPage, cursor uint64, count int, now int64, sec *Section) (uint64, error)
	FlushAll(now int64, sec *Section)
	Len(sec *Section) int
	Stats() shard.Stats
	OffHeapBytes() int64
	Usage(key []byte, now int64) (shard.KeyUsage, bool)
	RecordStats() shard.Stats
}

var _ Backend = (*Local)(nil)
