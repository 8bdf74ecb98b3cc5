package engine

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

// kindNames are the names of the kinds, as commands (ALGO, TYPE) and
// configuration files spell them.
var kindNames = [...]string{
	KindNone:     "none",
	KindGCRA:     "gcra",
	KindToken:    "token",
	KindFixed:    "fixed",
	KindSliding:  "sliding",
	KindRateGCRA: "gcra-redis",
}

// String returns k's name as commands and configuration spell it: "gcra",
// "token", "fixed", "sliding", "gcra-redis" (Redis's GCRA command), "none"
// for no state, "unknown" for any other kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

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
