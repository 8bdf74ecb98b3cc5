package limits

// Code identifies an error of this package. Codes are stable: fronts keep
// them in tables of wire text.
type Code uint8

// Error codes.
const (
	CodeRecordsFull Code = iota + 1 // the internal record store has no room
	CodeKeyTooLong                  // an admission key longer than MaxKeyLen
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
