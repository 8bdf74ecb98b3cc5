package limits

import (
	"errors"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// Config holds the bounds of a Local's internal record store and the hook
// it reports misrouted section calls to.
type Config struct {
	// MaxRecords and MaxMemory bound the internal record store of the
	// admission operations (held slots, open reservations, ban counts):
	// a full store refuses new records with ErrRecordsFull rather than
	// drop a held one. 0 means DefaultMaxRecords and DefaultMaxMemory.
	MaxRecords int
	MaxMemory  int64

	// Misroute, if set, is told of a call inside a Section on a key the
	// section does not hold (a front that declared the wrong keys). The
	// call then acts on an absent key instead of taking a lock out of
	// order.
	Misroute func(err error)
}

// Local is the local backend of every operation: the user store (a
// shard.Store the caller owns) and the internal record store of the
// admission operations. Its methods complete each operation before they
// return. It is safe for concurrent use.
type Local struct {
	store    *shard.Store
	adm      admission
	misroute func(error)
}

// NewLocal returns a Local over store.
func NewLocal(store *shard.Store, cfg Config) *Local {
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = DefaultMaxRecords
	}
	if cfg.MaxMemory <= 0 {
		cfg.MaxMemory = DefaultMaxMemory
	}
	return &Local{store: store, adm: admission{maxRecords: cfg.MaxRecords, maxMemory: cfg.MaxMemory}, misroute: cfg.Misroute}
}

// Section is an already-locked multi-key section: a shard.Txn of the
// user store whose shards are locked (EXEC holds one for the commands it
// runs). A call given a non-nil Section runs inside it and locks no user
// key itself; given nil, it locks what it needs and unlocks before it
// returns.
type Section = shard.Txn

// Begin binds sec to the user store, ready for Add, AddAll and Lock.
func (c *Local) Begin(sec *Section) { sec.Begin(c.store) }

// OpKind selects what an Op does.
type OpKind uint8

// The single-key operations an Op describes.
const (
	OpCheck    OpKind = iota // consume Cost units of Limit (THROTTLE.CHECK)
	OpLease                  // grant up to Cost credits of a fixed window (THROTTLE.LEASE)
	OpReturn                 // give Credits back to the window ending at ResetAt (THROTTLE.RETURN)
	OpCell                   // redis-cell's throttle of Cost units (CL.THROTTLE)
	OpPeek                   // what OpCheck would answer, consuming nothing (THROTTLE.PEEK, Backend.Peek)
	OpReset                  // forget the key; Accepted is 1 if it held state (THROTTLE.RESET, Backend.Reset)
	OpRateGCRA               // Redis's GCRA command: RateGCRA with its TOKENS inside
)

// Op is one single-key operation, described by value: its inputs and,
// once Do has completed it, its results. The caller owns it and reuses it
// (an event loop keeps one), so running it allocates nothing.
type Op struct {
	Kind OpKind
	Key  []byte

	Limit engine.Limit    // OpCheck, OpLease (a fixed window)
	Cell  engine.Cell     // OpCell
	GCRA  engine.RateGCRA // OpRateGCRA

	Cost             int64 // OpCheck: units; OpLease: batch; OpCell: quantity
	Credits, ResetAt int64 // OpReturn: credits, and the window's end in ms

	// Results.
	Decision  engine.Decision      // OpCheck, OpLease (Allowed is the credits granted)
	CellReply engine.CellReply     // OpCell
	GCRAReply engine.RateGCRAReply // OpRateGCRA
	Accepted  int64                // OpReturn: credits taken back; OpReset: 1 if the key held state
	Err       error                // an engine error; the state is then unchanged; ErrPending: not yet done

	// Done, if set, is called by a backend that left the Op pending (Err
	// ErrPending when Do returned) once it has completed it, from the
	// backend's own goroutine, with the completed value: a copy the
	// backend made, since it never writes the caller's value after Do
	// returns. Local never calls it.
	Done func(*Op)
	// Lane orders pending operations: a backend runs those of one lane
	// in the order they were given (a front gives each connection its
	// lane, so a pipeline runs in order).
	Lane uint64
	// Mode asks an upstream backend to serve this operation's counter in
	// a given mode (a policy's per-descriptor mode); ModeDefault leaves
	// the choice to the backend (its prefix table and default). Local has
	// no upstream and ignores it.
	Mode Mode
}

// Mode is how an operation's counter uses an upstream, when the front
// asks for one (Op.Mode): the modes of the scale-out tier, named as the
// policies file and the --upstream-mode flag spell them.
type Mode uint8

// The modes an Op may ask for.
const (
	ModeDefault    Mode = iota // the backend's own choice
	ModeStrict                 // every operation on the upstream
	ModeCachedDeny             // on the upstream, a denial remembered until its retry-after
	ModeLeased                 // fixed windows answered from leased credits
)

// transform is an Op as the shard.Transform the store runs; converting the
// pointer allocates nothing.
type transform Op

// Apply runs the engine on the key's state. On error the state is returned
// unchanged, which the store treats as "touch nothing".
func (o *transform) Apply(cur engine.State, now int64) (engine.State, int64) {
	var (
		next engine.State
		ttl  int64
		err  error
	)
	switch o.Kind {
	case OpCheck:
		next, o.Decision, ttl, err = o.Limit.Check(cur, now, o.Cost)
	case OpLease:
		next, o.Decision, ttl, err = o.Limit.Lease(cur, now, o.Cost)
	case OpReturn:
		next, o.Accepted, ttl, err = engine.Return(cur, now, o.Credits, o.ResetAt)
	case OpCell:
		next, o.CellReply, ttl, err = o.Cell.Throttle(cur, now, o.Cost)
	case OpRateGCRA:
		next, o.GCRAReply, ttl, err = o.GCRA.Apply(cur, now)
	}
	o.Err = err
	if err != nil {
		return cur, 0
	}
	return next, ttl
}

// Do runs op on its key at now (ns since the epoch): one lookup and one
// store under the key's shard lock, or inside sec. The results are in op
// when it returns.
func (c *Local) Do(op *Op, now int64, sec *Section) {
	switch op.Kind {
	case OpPeek:
		op.Decision, op.Err = c.Peek(op.Key, &op.Limit, op.Cost, now, sec)
		return
	case OpReset:
		op.Accepted, op.Err = 0, nil
		if c.Reset(op.Key, now, sec) {
			op.Accepted = 1
		}
		return
	}
	c.apply(op.Key, now, (*transform)(op), sec)
}

// Peek returns what a check of cost units against lim would answer,
// consuming nothing: allowed and retry_after are those of a request of
// cost units (a cost below 1 reads as 1), limit, remaining and reset_at
// describe the key as it is. A negative cost is refused as the check
// would refuse it.
func (c *Local) Peek(key []byte, lim *engine.Limit, cost, now int64, sec *Section) (engine.Decision, error) {
	st, _ := c.Get(key, now, sec)
	d, err := lim.Peek(st, now)
	if err == nil && cost > 1 {
		var dc engine.Decision
		_, dc, _, err = lim.Check(st, now, cost)
		d.Allowed, d.RetryAfter = dc.Allowed, dc.RetryAfter
	} else if err == nil && cost < 0 {
		_, _, _, err = lim.Check(st, now, cost)
	}
	return d, err
}

// apply is Store.Apply, or inside sec the Section's.
func (c *Local) apply(key []byte, now int64, t shard.Transform, sec *Section) {
	if sec == nil {
		c.store.Apply(key, now, t)
		return
	}
	if err := sec.Apply(key, now, t); err != nil {
		c.bug(err)
		t.Apply(engine.State{}, now)
	}
}

// Get returns key's state (the zero State if it holds none).
func (c *Local) Get(key []byte, now int64, sec *Section) (engine.State, bool) {
	if sec == nil {
		return c.store.Get(key, now)
	}
	st, ok, err := sec.Get(key, now)
	if err != nil {
		c.bug(err)
	}
	return st, ok
}

// Lookup returns key's state and the instant (ns) it expires at.
func (c *Local) Lookup(key []byte, now int64, sec *Section) (engine.State, int64, bool) {
	if sec == nil {
		return c.store.Lookup(key, now)
	}
	st, exp, ok, err := sec.Lookup(key, now)
	if err != nil {
		c.bug(err)
	}
	return st, exp, ok
}

// Reset forgets key's state and reports whether it held any
// (THROTTLE.RESET, DEL).
func (c *Local) Reset(key []byte, now int64, sec *Section) bool {
	if sec == nil {
		return c.store.Delete(key, now)
	}
	ok, err := sec.Delete(key, now)
	if err != nil {
		c.bug(err)
	}
	return ok
}

// Scan is shard.Store.Scan; inside sec, which must hold every shard
// (Section.AddAll), through it.
func (c *Local) Scan(p *shard.ScanPage, cursor uint64, count int, now int64, sec *Section) (uint64, error) {
	if sec == nil {
		return c.store.Scan(p, cursor, count, now)
	}
	next, err := sec.Scan(p, cursor, count, now)
	if errors.Is(err, shard.ErrNotLocked) || errors.Is(err, shard.ErrTxnState) {
		c.bug(err)
		return 0, nil
	}
	return next, err
}

// FlushAll forgets every key of the user store (not the internal records).
func (c *Local) FlushAll(now int64, sec *Section) {
	if sec == nil {
		c.store.FlushAll(now)
		return
	}
	if _, err := sec.FlushAll(now); err != nil {
		c.bug(err)
	}
}

// Len returns the number of keys of the user store.
func (c *Local) Len(sec *Section) int {
	if sec == nil {
		return c.store.Len()
	}
	n, err := sec.Len()
	if err != nil {
		c.bug(err)
	}
	return n
}

func (c *Local) bug(err error) {
	if c.misroute != nil {
		c.misroute(err)
	}
}

// Stats returns the user store's statistics (shard.Store.Stats).
func (c *Local) Stats() shard.Stats { return c.store.Stats() }

// OffHeapBytes returns the user store's bytes outside the Go heap.
func (c *Local) OffHeapBytes() int64 { return c.store.OffHeapBytes() }

// Usage returns the memory key holds in the user store (MEMORY USAGE), or
// false when it holds nothing at now.
func (c *Local) Usage(key []byte, now int64) (shard.KeyUsage, bool) { return c.store.Usage(key, now) }

// RecordStats returns the internal record store's statistics: Keys is the
// records held, Bytes what they cost.
func (c *Local) RecordStats() shard.Stats { return c.adm.internal().Stats() }
