package limits

// Code identifies an error of this package. Codes are stable: fronts keep
// them in tables of wire text.
type Code uint8

// Error codes.
const (
	CodeRecordsFull Code = iota + 1 // the internal record store has no room
	CodeKeyTooLong                  // an admission key longer than MaxKeyLen
	CodePending                     // the backend completes the operation later (Op.Done, MCheck.Done)
	CodeCrossSlot                   // the keys of one call map to different hash slots of the upstream
	CodeUnavailable                 // the upstream cannot be reached and the failure policy is closed
	CodeUpstream                    // the upstream failed in a way no valid call produces
	CodeUnsupported                 // the backend does not offer this operation
)

// Error is an error of this package: a stable Code and a plain
// description, no protocol text. Engine errors (*engine.Error) pass
// through the operations unchanged.
type Error struct {
	Code Code
	Text string
}

// Error returns the description, prefixed with "limits: ".
func (e *Error) Error() string { return "limits: " + e.Text }

var (
	// ErrRecordsFull: the internal record store refused a new record;
	// nothing was acquired or charged.
	ErrRecordsFull = &Error{CodeRecordsFull, "admission records full"}
	// ErrKeyTooLong: an admission operation's key is longer than MaxKeyLen.
	ErrKeyTooLong = &Error{CodeKeyTooLong, "key is too long"}
)

var (
	// ErrPending: the backend took the operation value and completes it
	// later from a goroutine of its own, calling the value's Done. The
	// value belongs to the backend until then. Local never returns it.
	ErrPending = &Error{CodePending, "operation pending"}
	// ErrCrossSlot: a call over several keys whose keys the upstream keeps
	// in different hash slots; nothing was sent, nothing changed.
	ErrCrossSlot = &Error{CodeCrossSlot, "keys in request don't hash to the same slot"}
	// ErrUnavailable: the upstream did not answer and the failure policy
	// is closed. The operation may or may not have run upstream.
	ErrUnavailable = &Error{CodeUnavailable, "upstream unavailable"}
	// ErrUpstream: the upstream answered with an error no valid call
	// produces (a script error, an unexpected reply).
	ErrUpstream = &Error{CodeUpstream, "upstream error"}
	// ErrUnsupported: the backend does not offer the operation (an
	// operation kind it does not know; every kind of this package runs on
	// both Local and the upstream tier).
	ErrUnsupported = &Error{CodeUnsupported, "operation not supported by this backend"}
)
