package engine

// This file fixes the contract other packages build on: the types and the
// signatures below are used by shard/ and server/. Internals may change
// freely; these names and meanings may not without updating every caller.

// Kind names the algorithm whose state a key holds. The zero Kind means
// "no state": a fresh or expired key.
type Kind uint8

// Algorithms. THROTTLE.LEASE/RETURN operate on KindFixed state, so leases
// and fixed-window checks on one key draw from the same budget.
const (
	KindNone    Kind = iota // no state
	KindGCRA                // generic cell rate algorithm (also CL.THROTTLE)
	KindToken               // token bucket
	KindFixed               // fixed window (and window-coupled leases)
	KindSliding             // sliding window, two-window weighted approximation
)

// State is one key's algorithm state: a small pointer-free value that a store
// keeps inline. The zero State means the key holds nothing. Time inside State
// is in the engine's internal unit (see the package doc).
type State struct {
	A, B int64
	Kind Kind
}

// Decision is the outcome of a check, lease or peek. All fields are integers.
type Decision struct {
	Allowed    int64 // 1 admitted, 0 denied; for a lease: credits granted
	Limit      int64 // the limit (burst for GCRA/token)
	Remaining  int64 // units still available now; never negative
	ResetAt    int64 // epoch ms at which the budget is full again
	RetryAfter int64 // ms until a retry can succeed; 0 if allowed; -1 if never at this limit
}

// Limit is a validated rate-limit configuration for one algorithm.
//
// Time arguments named now are nanoseconds since the Unix epoch; Period is in
// nanoseconds. NewLimit also caches Period/Limit; a Limit literal works as
// well and derives it on each call. To change a Limit, call NewLimit again
// rather than assigning its fields: GCRA keeps using the cached interval.
type Limit struct {
	Algo   Kind  // KindGCRA, KindToken, KindFixed or KindSliding
	Limit  int64 // units admitted per Period
	Period int64 // nanoseconds
	Burst  int64 // GCRA/token bucket capacity; 0 means Limit

	interval int64 // Period/Limit, cached by NewLimit (0: compute on use)
}

// The functions below complete the contract (implemented in this package):
//
//	func NewLimit(algo Kind, limit, period, burst int64) (Limit, error)
//	func (l *Limit) Check(s State, now, cost int64) (next State, d Decision, ttl int64, err error)
//	func (l *Limit) Peek(s State, now int64) (Decision, error)
//	func (l *Limit) Lease(s State, now, batch int64) (next State, d Decision, ttl int64, err error)
//	func Return(s State, now, credits, resetAtMs int64) (next State, accepted, ttl int64, err error)
//
//	type Cell struct{ MaxBurst, CountPerPeriod, PeriodSec int64; /* unexported cache */ }
//	func NewCell(maxBurst, countPerPeriod, periodSec int64) (Cell, error)
//	func (c *Cell) Throttle(s State, now, quantity int64) (next State, r CellReply, ttl int64, err error)
//	type CellReply struct{ Limited, Limit, Remaining, RetryAfter, ResetAfter int64 }
//
//	type Error struct{ Code, Msg string } // Error() == Code + " " + Msg, e.g. "ERR limit must be positive"
//	var ErrWrongType *Error             // "WRONGTYPE Operation against a key holding the wrong kind of value"
//
// ttl is the number of nanoseconds from now after which next is equivalent to
// the zero State (the budget is full again); ttl <= 0 means the key can be
// dropped now. A state of another Kind than the call's algorithm yields
// ErrWrongType and leaves the state untouched (next == s).
