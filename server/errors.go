package server

import (
	"errors"
	"strings"

	"github.com/throttlekit/throttlekit-server/engine"
)

// engineWire words an engine error for the wire: the error code (the first
// word of the reply line) and the message, once for the THROTTLE.* commands
// and once for CL.THROTTLE, whose errors read as redis-cell's do.
type engineWire struct {
	code, msg string // THROTTLE.*
	cell      string // CL.THROTTLE, after "Cell error: Store error: "
}

// engineErrors is the one table from engine error codes to wire text.
var engineErrors = [engine.NumCodes]engineWire{
	engine.CodeWrongType:     {"WRONGTYPE", "Operation against a key holding the wrong kind of value", ""},
	engine.CodeLimit:         {"ERR", "limit must be positive", ""},
	engine.CodePeriod:        {"ERR", "period must be positive", ""},
	engine.CodeBurst:         {"ERR", "burst must not be negative", "max_burst must not be negative"},
	engine.CodeAlgo:          {"ERR", "unknown algorithm", ""},
	engine.CodeOutOfRange:    {"ERR", "limit, period or burst out of range", "arguments out of range"},
	engine.CodeNegativeCost:  {"ERR", "cost must not be negative", ""},
	engine.CodeLeaseAlgo:     {"ERR", "lease needs a fixed-window limit", ""},
	engine.CodeZeroRate:      {"ERR", "zero rate", "Zero rates are not supported"},
	engine.CodeNegativeRate:  {"ERR", "count and period must not be negative", "count and period must not be negative"},
	engine.CodeQuantityRange: {"ERR", "quantity out of range", "quantity out of range"},
	// GCRA (cmd_gcra.go), worded as Redis words them.
	engine.CodeGCRAPeriod:         {"ERR", "period must be > 0 and < 1e12", ""},
	engine.CodeGCRATokensOverflow: {"ERR", gcraOverflow + "TOKENS would cause an overflow", ""},
	engine.CodeGCRABurstOverflow:  {"ERR", gcraOverflow + "max_burst would cause an overflow", ""},
}

// cellPrefix starts the message of every CL.THROTTLE error; with the code
// "Cell" the line reads "-Cell error: Store error: ...", as redis-cell's.
const cellPrefix = "error: Store error: "

// engineWireText returns the code and message of err's reply line. cell
// selects CL.THROTTLE's wording; WRONGTYPE reads the same for both. An error
// the table does not know is "ERR" and its text.
func engineWireText(err error, cell bool) (code, msg string) {
	var ee *engine.Error
	if errors.As(err, &ee) && ee.Code < engine.NumCodes {
		w := &engineErrors[ee.Code]
		switch {
		case w.code == "":
		case cell && w.cell != "":
			return "Cell", cellPrefix + w.cell
		default:
			return w.code, w.msg
		}
	}
	return "ERR", err.Error()
}

// engineError appends err as an error reply worded for the THROTTLE.* commands.
func (l *loop) engineError(err error) {
	l.errorReply(engineWireText(err, false))
}

// cellEngineError appends err as an error reply worded for CL.THROTTLE.
func (l *loop) cellEngineError(err error) {
	l.errorReply(engineWireText(err, true))
}

// cellError appends an error worded as redis-cell words it.
func (l *loop) cellError(msg string) {
	l.errorReply("Cell", cellPrefix+msg)
}

// errorReply appends an error reply and counts it by code.
func (l *loop) errorReply(code, msg string) {
	l.out = appendErrorLine(l.out, code, msg)
	l.ctr.errs[errKindOf(code)]++
}

func (l *loop) errArity(name string) { l.errorReply("ERR", arityMsg(name)) }

// arityMsg is the message of the error to a command given the wrong number
// of arguments.
func arityMsg(name string) string { return "wrong number of arguments for '" + name + "' command" }

func (l *loop) errNotInt() { l.errorReply("ERR", "value is not an integer or out of range") }

func (l *loop) errSyntax() { l.errorReply("ERR", "syntax error") }

// errQuoted appends "-ERR <before>'<word>'<after>" with word cut to max bytes
// and CR/LF blanked, as Redis quotes a client's word in an error.
func (l *loop) errQuoted(before string, word []byte, max int, after string) {
	l.out = append(l.out, "-ERR "...)
	l.out = append(l.out, before...)
	l.out = append(l.out, '\'')
	l.out = appendSanitizedBytes(l.out, word, max)
	l.out = append(l.out, '\'')
	l.out = append(l.out, after...)
	l.out = append(l.out, '\r', '\n')
	l.ctr.errs[errKindERR]++
}

func (l *loop) errUnknownSub(cmd string, sub []byte) {
	l.errQuoted("unknown subcommand ", sub, 128, ". Try "+strings.ToUpper(cmd)+" HELP.")
}

// errUnknownCommand writes Redis's reply to an unknown command.
func (l *loop) errUnknownCommand(args [][]byte) {
	l.out = append(l.out, "-ERR unknown command '"...)
	l.out = appendSanitizedBytes(l.out, args[0], 128)
	l.out = append(l.out, "', with args beginning with: "...)
	used := 0
	for _, a := range args[1:] {
		if used >= 128 {
			break
		}
		room := 128 - used
		start := len(l.out)
		l.out = append(l.out, '\'')
		l.out = appendSanitizedBytes(l.out, a, room)
		l.out = append(l.out, '\'', ' ')
		used += len(l.out) - start
	}
	l.out = append(l.out, '\r', '\n')
	l.ctr.errs[errKindERR]++
}
