package engine

// Code identifies an engine error. Codes are stable: a caller may keep them
// in tables (server/ maps each to its wire text) and they are never renumbered.
type Code uint8

// Error codes, one per condition the engine rejects.
const (
	CodeWrongType          Code = iota + 1 // the state belongs to another algorithm
	CodeLimit                              // limit is zero or negative
	CodePeriod                             // period is zero or negative
	CodeBurst                              // burst (or max_burst) is negative
	CodeAlgo                               // the algorithm is unknown
	CodeOutOfRange                         // parameters whose derived values do not fit in 64 bits
	CodeNegativeCost                       // a cost, batch or returned credit count is negative
	CodeLeaseAlgo                          // a lease asked of a limit that is not a fixed window
	CodeZeroRate                           // a rate of zero, or one whose interval truncates to 0 ns
	CodeNegativeRate                       // a negative count or period
	CodeQuantityRange                      // quantity times the interval overflows
	CodeGCRAPeriod                         // GCRA: period not in (0, 1e12) seconds
	CodeGCRATokensOverflow                 // GCRA: interval x TOKENS (or TAT + it) overflows
	CodeGCRABurstOverflow                  // GCRA: interval x (max_burst + 1) overflows
	NumCodes                               // one past the largest code
)

// Error is an engine error: a stable Code and a plain description of the
// arithmetic that failed. It carries no protocol text; server/ words each
// code for the wire.
type Error struct {
	Code Code
	Text string
}

// Error returns the description, prefixed with "engine: ".
func (e *Error) Error() string { return "engine: " + e.Text }

// The errors the engine returns. Each is a single value, so callers may
// compare with == as well as with errors.Is.
var (
	// ErrWrongType: a key holds the state of another algorithm.
	ErrWrongType = &Error{CodeWrongType, "state of another algorithm"}
	// ErrLimit: NewLimit got a limit <= 0 (or a Limit literal has one).
	ErrLimit = &Error{CodeLimit, "limit must be positive"}
	// ErrPeriod: NewLimit got a period <= 0.
	ErrPeriod = &Error{CodePeriod, "period must be positive"}
	// ErrBurst: NewLimit got a negative burst, or NewCell a negative max_burst.
	ErrBurst = &Error{CodeBurst, "burst must not be negative"}
	// ErrAlgo: the Kind is not one of the four algorithms.
	ErrAlgo = &Error{CodeAlgo, "unknown algorithm"}
	// ErrOutOfRange: the emission interval is below 1 ns, a derived product
	// overflows an int64, or a sliding-window limit exceeds 31 bits.
	ErrOutOfRange = &Error{CodeOutOfRange, "parameters out of range"}
	// ErrNegativeCost: a negative cost, batch or credit count.
	ErrNegativeCost = &Error{CodeNegativeCost, "cost must not be negative"}
	// ErrLeaseAlgo: Lease was called on a limit that is not a fixed window.
	ErrLeaseAlgo = &Error{CodeLeaseAlgo, "lease needs a fixed-window limit"}
	// ErrZeroRate: NewCell got a zero count or period, or a rate whose
	// emission interval truncates to 0 ns.
	ErrZeroRate = &Error{CodeZeroRate, "zero rate"}
	// ErrNegativeRate: NewCell got a negative count or period.
	ErrNegativeRate = &Error{CodeNegativeRate, "count and period must not be negative"}
	// ErrQuantityRange: Cell.Throttle's quantity times the interval overflows.
	ErrQuantityRange = &Error{CodeQuantityRange, "quantity out of range"}
	// ErrGCRAPeriod: NewRateGCRA got a period outside (0, 1e12) seconds.
	ErrGCRAPeriod = &Error{CodeGCRAPeriod, "period must be > 0 and < 1e12"}
	// ErrGCRATokensOverflow: the GCRA cost in microseconds, or the TAT it
	// moves, does not fit in 64 bits.
	ErrGCRATokensOverflow = &Error{CodeGCRATokensOverflow, "interval times tokens overflows"}
	// ErrGCRABurstOverflow: the GCRA tolerance in microseconds does not fit
	// in 64 bits.
	ErrGCRABurstOverflow = &Error{CodeGCRABurstOverflow, "interval times burst overflows"}
)
