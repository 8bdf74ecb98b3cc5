package resp

// ErrorCode identifies a protocol violation. The codes are stable: a caller
// may switch on them, count them or map them to metrics; new codes are only
// ever added at the end.
type ErrorCode uint8

// Protocol error codes. Each has one fixed message, worded as redis-server
// words it (see Error.Message).
const (
	// ErrMultibulkLen: a multibulk count that is not a number, is longer
	// than 20 bytes, overflows, exceeds Limits.MaxArgs, or whose line does
	// not end in CRLF.
	ErrMultibulkLen ErrorCode = iota + 1
	// ErrBulkLen: a bulk length that is not a non-negative number, exceeds
	// Limits.MaxBulkLen, whose line does not end in CRLF, or whose data is
	// not followed by CRLF.
	ErrBulkLen
	// ErrBigMultibulk: no CRLF within MaxHeaderLine bytes of a '*'.
	ErrBigMultibulk
	// ErrBigBulkCount: no CRLF within MaxHeaderLine bytes of a '$'.
	ErrBigBulkCount
	// ErrBigInline: no LF within MaxInline bytes of an inline command.
	ErrBigInline
	// ErrUnbalanced: an inline command with an unclosed quote, or a closing
	// quote followed by something other than a space.
	ErrUnbalanced
	// ErrUnauthMultibulk: an unauthenticated client announced more than
	// MaxUnauthArgs arguments.
	ErrUnauthMultibulk
	// ErrUnauthBulk: an unauthenticated client announced a bulk longer
	// than MaxUnauthBulkLen bytes.
	ErrUnauthBulk
	// ErrTooManyInlineArgs: an inline command with more than
	// Limits.MaxArgs arguments.
	ErrTooManyInlineArgs
	// ErrExpectedDollar: a byte other than '$' where a bulk header must
	// start. Error.Byte holds it.
	ErrExpectedDollar
	// ErrQueryBuffer: the command being received needs more than
	// Limits.MaxQueryBuffer bytes, or has already buffered more.
	ErrQueryBuffer
)

var messages = [...]string{
	ErrMultibulkLen:      "invalid multibulk length",
	ErrBulkLen:           "invalid bulk length",
	ErrBigMultibulk:      "too big mbulk count string",
	ErrBigBulkCount:      "too big bulk count string",
	ErrBigInline:         "too big inline request",
	ErrUnbalanced:        "unbalanced quotes in request",
	ErrUnauthMultibulk:   "unauthenticated multibulk length",
	ErrUnauthBulk:        "unauthenticated bulk length",
	ErrTooManyInlineArgs: "too many arguments in inline request",
	ErrExpectedDollar:    "expected '$', got ' '",
	ErrQueryBuffer:       "client reached max query buffer length",
}

// Error is a violation of the protocol. A server answers it with
// "-ERR " + Error() and closes the connection, as redis-server does.
type Error struct {
	Code ErrorCode
	// Byte is the offending byte of ErrExpectedDollar; zero otherwise.
	Byte byte
}

// Message returns the text of the error without the "Protocol error: "
// prefix, e.g. "invalid bulk length". A control or non-ASCII byte of
// ErrExpectedDollar is shown as a space, so the text never holds CR or LF.
func (e *Error) Message() string {
	if e.Code == ErrExpectedDollar {
		c := e.Byte
		if c < ' ' || c > '~' {
			c = ' '
		}
		return "expected '$', got '" + string(rune(c)) + "'"
	}
	if int(e.Code) < len(messages) && messages[e.Code] != "" {
		return messages[e.Code]
	}
	return "unknown error"
}

// Error returns "Protocol error: " followed by Message.
func (e *Error) Error() string { return "Protocol error: " + e.Message() }

// AppendReply writes the whole reply line, "-ERR Protocol error: ...\r\n",
// to dst.
func (e *Error) AppendReply(dst []byte) []byte {
	dst = append(dst, "-ERR Protocol error: "...)
	return append(append(dst, e.Message()...), '\r', '\n')
}
