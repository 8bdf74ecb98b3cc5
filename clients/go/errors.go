package throttlekit

import (
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Sentinel errors. Match them with errors.Is: a *ServerError whose code is
// WRONGTYPE is ErrWrongType; a *ServerError with code ERR and an *ArgError
// are both ErrInvalidArgument.
var (
	// ErrWrongType reports that a key holds the state of another algorithm.
	ErrWrongType = errors.New("throttlekit: key holds another algorithm's state")
	// ErrInvalidArgument reports an argument the client or the server rejected.
	ErrInvalidArgument = errors.New("throttlekit: invalid argument")
	// ErrClosed is returned by a Limiter after Close.
	ErrClosed = errors.New("throttlekit: limiter closed")
	// ErrUnexpectedReply reports a reply whose shape is not the documented one.
	ErrUnexpectedReply = errors.New("throttlekit: unexpected reply")
	// ErrNeverAllowed is returned by Limiter.WaitN for a cost that can never
	// pass at the limiter's rate (the server's retry-after of -1).
	ErrNeverAllowed = errors.New("throttlekit: cost can never pass at this rate")
	// ErrWouldExceedDeadline is returned by Limiter.WaitN when the context's
	// deadline comes before the wait would end.
	ErrWouldExceedDeadline = errors.New("throttlekit: wait would exceed the context deadline")
)

// ServerError is an error reply from the server. Code is its first word, a
// stable code: "ERR", "WRONGTYPE", "NOAUTH", "Cell" (CL.THROTTLE's errors,
// worded as redis-cell words them) and so on; Msg is the rest.
type ServerError struct {
	Code string
	Msg  string
}

// Error returns the reply as the server sent it: Code + " " + Msg.
func (e *ServerError) Error() string { return e.Code + " " + e.Msg }

// Is makes errors.Is(err, ErrWrongType) and errors.Is(err,
// ErrInvalidArgument) work on server replies.
func (e *ServerError) Is(target error) bool {
	switch target {
	case ErrWrongType:
		return e.Code == "WRONGTYPE"
	case ErrInvalidArgument:
		return e.Code == "ERR" || e.Code == "Cell"
	}
	return false
}

// ArgError is an argument the client rejected before sending anything.
// errors.Is(err, ErrInvalidArgument) is true for it.
type ArgError struct {
	Arg string // the argument's name, e.g. "period"
	Msg string
}

// Error returns "throttlekit: <arg> <msg>".
func (e *ArgError) Error() string { return "throttlekit: " + e.Arg + " " + e.Msg }

// Is reports whether target is ErrInvalidArgument.
func (e *ArgError) Is(target error) bool { return target == ErrInvalidArgument }

// serverError turns a go-redis error reply into a *ServerError and leaves
// every other error (network, context) as it is.
func serverError(err error) error {
	if err == nil {
		return nil
	}
	var re redis.Error
	if !errors.As(err, &re) {
		return err
	}
	s := re.Error()
	code, msg, _ := strings.Cut(s, " ")
	return &ServerError{Code: code, Msg: msg}
}
