package server

import (
	"bytes"

	"github.com/tidwall/redcon"
)

// Limits on header lines, as Redis applies them: a multibulk or bulk length
// line, or an inline command, longer than this without its terminator is a
// protocol error rather than a reason to keep buffering.
const (
	maxHeaderLine = 64 * 1024
	maxInline     = 64 * 1024

	// Unauthenticated clients may not announce more than this, as in Redis.
	maxUnauthArgs    = 10
	maxUnauthBulkLen = 16 * 1024
)

// protoError is a violation of the protocol: the server replies
// "-ERR Protocol error: <msg>" and closes the connection.
type protoError string

// Protocol errors, worded as Redis words them.
const (
	errMultibulkLen      protoError = "invalid multibulk length"
	errBulkLen           protoError = "invalid bulk length"
	errBigMultibulk      protoError = "too big mbulk count string"
	errBigBulkCount      protoError = "too big bulk count string"
	errBigInline         protoError = "too big inline request"
	errUnbalanced        protoError = "unbalanced quotes in request"
	errUnauthMultibulk   protoError = "unauthenticated multibulk length"
	errUnauthBulk        protoError = "unauthenticated bulk length"
	errTooManyInlineArgs protoError = "too many arguments in inline request"
)

// limits are the protocol bounds of one connection.
type limits struct {
	maxArgs    int
	maxBulkLen int64
	unauth     bool // connection must still authenticate: tighter bounds
}

// parseInt64 parses a decimal integer with an optional '-' sign. It rejects
// empty input, '+', spaces and overflow. It never allocates.
func parseInt64(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := false
	if b[0] == '-' {
		neg = true
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<63-d)/10 { // n*10+d would exceed 1<<63
			return 0, false
		}
		n = n*10 + d
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// headerLine returns the body of the "<c><digits>\r\n" line at the start of
// b (without the type byte and CRLF) and the length of the whole line. ok is
// false with perr empty when the line is not complete yet.
func headerLine(b []byte, tooBig protoError) (body []byte, n int, perr protoError) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if len(b) > maxHeaderLine {
			return nil, 0, tooBig
		}
		return nil, 0, ""
	}
	if i < 1 || b[i-1] != '\r' {
		return nil, -1, ""
	}
	return b[1 : i-1], i + 1, ""
}

// scanMultibulk validates the multibulk frame at the start of b (b[0] is
// '*') without trusting any length it has not checked. It returns the length
// of the complete frame and its argument count; n == 0 means the frame is
// not complete yet. A count <= 0 yields n > 0 and count <= 0: an empty
// command that Redis skips silently.
func scanMultibulk(b []byte, lim limits) (n, count int, perr protoError) {
	body, hn, perr := headerLine(b, errBigMultibulk)
	if perr != "" {
		return 0, 0, perr
	}
	if hn == 0 {
		return 0, 0, ""
	}
	if hn < 0 {
		return 0, 0, errMultibulkLen
	}
	c, ok := parseInt64(body)
	if !ok || c > int64(lim.maxArgs) {
		return 0, 0, errMultibulkLen
	}
	if lim.unauth && c > maxUnauthArgs {
		return 0, 0, errUnauthMultibulk
	}
	if c <= 0 {
		return hn, 0, ""
	}
	pos := hn
	for j := int64(0); j < c; j++ {
		if pos >= len(b) {
			return 0, 0, ""
		}
		if b[pos] != '$' {
			return 0, 0, protoError("expected '$', got '" + printable(b[pos]) + "'")
		}
		body, ln, perr := headerLine(b[pos:], errBigBulkCount)
		if perr != "" {
			return 0, 0, perr
		}
		if ln == 0 {
			return 0, 0, ""
		}
		if ln < 0 {
			return 0, 0, errBulkLen
		}
		size, ok := parseInt64(body)
		if !ok || size < 0 || size > lim.maxBulkLen {
			return 0, 0, errBulkLen
		}
		if lim.unauth && size > maxUnauthBulkLen {
			return 0, 0, errUnauthBulk
		}
		pos += ln
		if int64(len(b)-pos) < size+2 {
			return 0, 0, ""
		}
		end := pos + int(size)
		if b[end] != '\r' || b[end+1] != '\n' {
			return 0, 0, errBulkLen
		}
		pos = end + 2
	}
	return pos, int(c), ""
}

// printable returns c as a one-byte string, or a space for a control byte,
// so an error line never carries CR or LF.
func printable(c byte) string {
	if c < ' ' || c > '~' {
		return " "
	}
	return string(rune(c))
}

// readCommand reads the next command from b. It returns the bytes consumed
// (0: need more input), the arguments (empty for a blank or empty command
// that gets no reply), and a protocol error. args alias b or scratch; they
// are valid until the next call.
//
// Multibulk frames are validated by scanMultibulk first and only then handed
// to redcon.ReadNextCommand, which does not bound lengths itself. Inline
// commands are split by splitInline, which follows Redis's rules (quotes,
// escapes, \xHH) and reports unbalanced quotes; redcon's inline reader would
// treat a leading '$' as another protocol.
func readCommand(b []byte, argsbuf [][]byte, scratch *[]byte, lim limits) (n int, args [][]byte, perr protoError) {
	if len(b) == 0 {
		return 0, argsbuf[:0], ""
	}
	if b[0] != '*' {
		return readInline(b, argsbuf, scratch, lim)
	}
	n, count, perr := scanMultibulk(b, lim)
	if perr != "" || n == 0 {
		return 0, argsbuf[:0], perr
	}
	if count <= 0 {
		return n, argsbuf[:0], ""
	}
	complete, args, _, _, err := redcon.ReadNextCommand(b[:n], argsbuf)
	if err != nil || !complete || len(args) != count {
		return 0, argsbuf[:0], errMultibulkLen
	}
	return n, args, ""
}

// readInline reads one inline command line.
func readInline(b []byte, argsbuf [][]byte, scratch *[]byte, lim limits) (n int, args [][]byte, perr protoError) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		if len(b) > maxInline {
			return 0, argsbuf[:0], errBigInline
		}
		return 0, argsbuf[:0], ""
	}
	line := b[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	args, ok := splitInline(line, argsbuf[:0], scratch)
	if !ok {
		return 0, argsbuf[:0], errUnbalanced
	}
	if len(args) > lim.maxArgs {
		return 0, argsbuf[:0], errTooManyInlineArgs
	}
	return i + 1, args, ""
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// splitInline splits an inline command line into arguments the way Redis
// does (sdssplitargs): whitespace separates arguments; "double quotes" take
// the escapes \n \r \t \b \a \xHH and \<any>; 'single quotes' take \'; a
// closing quote must be followed by whitespace or the end of the line. The
// unescaped bytes are written to *scratch, which is grown once to the line
// length so that earlier arguments stay valid.
func splitInline(line []byte, args [][]byte, scratch *[]byte) ([][]byte, bool) {
	if cap(*scratch) < len(line) {
		*scratch = make([]byte, 0, len(line))
	}
	out := (*scratch)[:0]
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p >= len(line) {
			return args, true
		}
		start := len(out)
		inq, insq := false, false
		done := false
		for !done {
			if inq {
				if p >= len(line) {
					return args[:0], false
				}
				c := line[p]
				switch {
				case c == '\\' && p+3 < len(line) && line[p+1] == 'x':
					hi, ok1 := hexVal(line[p+2])
					lo, ok2 := hexVal(line[p+3])
					if ok1 && ok2 {
						out = append(out, hi<<4|lo)
						p += 3
					} else {
						out = append(out, 'x')
						p++
					}
				case c == '\\' && p+1 < len(line):
					p++
					switch line[p] {
					case 'n':
						out = append(out, '\n')
					case 'r':
						out = append(out, '\r')
					case 't':
						out = append(out, '\t')
					case 'b':
						out = append(out, '\b')
					case 'a':
						out = append(out, '\a')
					default:
						out = append(out, line[p])
					}
				case c == '"':
					if p+1 < len(line) && !isSpace(line[p+1]) {
						return args[:0], false
					}
					done = true
				default:
					out = append(out, c)
				}
			} else if insq {
				if p >= len(line) {
					return args[:0], false
				}
				c := line[p]
				switch {
				case c == '\\' && p+1 < len(line) && line[p+1] == '\'':
					p++
					out = append(out, '\'')
				case c == '\'':
					if p+1 < len(line) && !isSpace(line[p+1]) {
						return args[:0], false
					}
					done = true
				default:
					out = append(out, c)
				}
			} else {
				if p >= len(line) {
					break
				}
				switch c := line[p]; {
				case isSpace(c):
					done = true
				case c == '"':
					inq = true
				case c == '\'':
					insq = true
				default:
					out = append(out, c)
				}
			}
			if p < len(line) {
				p++
			}
		}
		args = append(args, out[start:len(out):len(out)])
	}
}
