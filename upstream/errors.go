package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/engine"
)

// Code classifies an upstream error. Codes are stable: callers keep them in
// tables (a reply line, a metric label) and they are never renumbered.
type Code uint8

// Error codes.
const (
	// CodeUnavailable: no answer from the upstream: it could not be
	// reached, timed out, closed the connection, or said it cannot serve
	// now (CLUSTERDOWN, TRYAGAIN, LOADING, MASTERDOWN). The operation may or
	// may not have run.
	CodeUnavailable Code = iota + 1
	// CodeScript: the upstream ran the call and it failed in a way no valid
	// call produces (a script error, an unexpected reply).
	CodeScript
	// CodeWrongType: the key holds the state of another algorithm or a
	// value that is not a throttlekit state. Err is engine.ErrWrongType.
	CodeWrongType
	// CodeCrossSlot: the keys of one call map to different hash slots of a
	// Redis Cluster; nothing was sent.
	CodeCrossSlot
	// CodeEngine: the arguments were rejected as the engine rejects them;
	// Err is the engine's *engine.Error.
	CodeEngine
	// CodeArgs: a call the client refuses before sending it (no keys, a key
	// named twice).
	CodeArgs
)

var codeNames = [...]string{"", "unavailable", "script", "wrongtype", "crossslot", "engine", "args"}

// String returns the code's name ("unavailable", "script", ...).
func (c Code) String() string {
	if int(c) < len(codeNames) && c != 0 {
		return codeNames[c]
	}
	return "code(" + strconv.Itoa(int(c)) + ")"
}

// Error is an upstream error: a stable Code and the error it wraps.
type Error struct {
	Code Code
	Err  error
}

// Error returns "upstream <code>: <wrapped error>".
func (e *Error) Error() string { return "upstream " + e.Code.String() + ": " + e.Err.Error() }

// Unwrap returns the wrapped error, so errors.Is(err, engine.ErrWrongType)
// holds for CodeWrongType.
func (e *Error) Unwrap() error { return e.Err }

// ErrCrossSlot is the wrapped error of CodeCrossSlot, worded as Redis
// Cluster words it.
var ErrCrossSlot = errors.New("CROSSSLOT Keys in request don't hash to the same slot")

// CodeOf returns the Code of err, or 0 when err is not an *Error.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

// engineErr returns the engine's error value of code, the code the
// scripts send in their "TKERR <code> <text>" replies.
func engineErr(code engine.Code) (*engine.Error, bool) {
	for _, e := range [...]*engine.Error{engine.ErrWrongType, engine.ErrLimit, engine.ErrPeriod, engine.ErrBurst,
		engine.ErrAlgo, engine.ErrOutOfRange, engine.ErrNegativeCost, engine.ErrLeaseAlgo, engine.ErrZeroRate,
		engine.ErrNegativeRate, engine.ErrQuantityRange, engine.ErrGCRATokensOverflow, engine.ErrGCRABurstOverflow} {
		if e.Code == code {
			return e, true
		}
	}
	return nil, false
}

// unavailable lists the reply prefixes of a server that cannot serve now.
var unavailable = []string{"CLUSTERDOWN", "TRYAGAIN", "LOADING", "MASTERDOWN", "BUSY"}

// classify turns a go-redis error into an *Error.
func classify(err error) error {
	if err == nil {
		return nil
	}
	var re redis.Error
	if errors.As(err, &re) && !errors.Is(err, redis.ErrClosed) {
		msg := re.Error()
		switch {
		case strings.HasPrefix(msg, "WRONGTYPE"):
			return &Error{CodeWrongType, engine.ErrWrongType}
		case strings.HasPrefix(msg, "TKERR "):
			if f := strings.Fields(msg); len(f) > 1 {
				if n, err := strconv.Atoi(f[1]); err == nil && n > 0 && n < int(engine.NumCodes) {
					if e, ok := engineErr(engine.Code(n)); ok {
						return &Error{CodeEngine, e}
					}
				}
			}
			return &Error{CodeScript, err}
		case strings.HasPrefix(msg, "CROSSSLOT"):
			return &Error{CodeCrossSlot, ErrCrossSlot}
		}
		for _, p := range unavailable {
			if strings.HasPrefix(msg, p) {
				return &Error{CodeUnavailable, err}
			}
		}
		return &Error{CodeScript, err}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, redis.ErrPoolTimeout) || errors.Is(err, redis.ErrPoolExhausted) {
		return &Error{CodeUnavailable, err}
	}
	var oe *net.OpError
	if errors.As(err, &oe) {
		return &Error{CodeUnavailable, err}
	}
	return &Error{CodeScript, err}
}
