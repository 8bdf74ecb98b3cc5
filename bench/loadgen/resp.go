package loadgen

import (
	"bufio"
	"errors"
	"fmt"
	"io"
)

// Reply kinds reported by ReplyReader.Skip.
const (
	KindValue = iota // any non-error reply
	KindError        // a simple error ('-') or blob error ('!') at the top level
)

// Errors returned by ReplyReader for malformed input. They are stable values
// so callers can test for them with errors.Is.
var (
	ErrBadType   = errors.New("loadgen: unknown RESP type byte")
	ErrBadLength = errors.New("loadgen: invalid RESP length")
	ErrBadLine   = errors.New("loadgen: RESP line not terminated by CRLF")
	ErrTooDeep   = errors.New("loadgen: RESP aggregate nested too deeply")
)

// maxDepth bounds the nesting of aggregates, so that hostile input cannot
// exhaust the stack.
const maxDepth = 64

// maxLine bounds a simple line (64 KiB, as Redis's inline limit).
const maxLine = 64 << 10

// maxBulk bounds a bulk length (512 MiB, Redis's proto-max-bulk-len default).
const maxBulk = 512 << 20

// ReplyReader reads RESP2 and RESP3 replies from a buffered stream without
// allocating for replies that fit in the buffer. It decodes only what a load
// generator needs: where a reply ends and whether it is an error. The text of
// the last top-level error is kept in LastError.
type ReplyReader struct {
	r    *bufio.Reader
	long []byte // holds a line longer than the buffer
	// LastError is the text of the most recent top-level error reply
	// (without the leading '-' and the trailing CRLF).
	LastError string
}

// NewReplyReader returns a ReplyReader that reads from r.
func NewReplyReader(r *bufio.Reader) *ReplyReader { return &ReplyReader{r: r} }

// Skip reads one complete reply and reports whether it was an error
// (KindError) or anything else (KindValue). Attributes ('|') that precede a
// reply are consumed with it; push messages ('>') count as one reply.
func (rr *ReplyReader) Skip() (int, error) {
	for {
		t, err := rr.r.ReadByte()
		if err != nil {
			return 0, err
		}
		switch t {
		case '-', '!':
			var line []byte
			if t == '-' {
				line, err = rr.line()
			} else {
				line, err = rr.blob()
			}
			if err != nil {
				return 0, err
			}
			rr.LastError = string(line)
			return KindError, nil
		case '|':
			// An attribute map is metadata about the next reply.
			if err := rr.aggregate(t, 1); err != nil {
				return 0, err
			}
			continue
		default:
			if err := rr.value(t, 1); err != nil {
				return 0, err
			}
			return KindValue, nil
		}
	}
}

// value consumes the body of a reply whose type byte t was already read.
func (rr *ReplyReader) value(t byte, depth int) error {
	switch t {
	case '+', '-', ':', ',', '#', '(', '_':
		_, err := rr.line()
		return err
	case '$', '=', '!':
		_, err := rr.blob()
		return err
	case '*', '%', '~', '>', '|':
		return rr.aggregate(t, depth)
	default:
		return fmt.Errorf("%w %q", ErrBadType, t)
	}
}

// aggregate consumes the elements of an array, set, push, map or attribute.
func (rr *ReplyReader) aggregate(t byte, depth int) error {
	if depth > maxDepth {
		return ErrTooDeep
	}
	n, err := rr.length()
	if err != nil {
		return err
	}
	if n < 0 {
		if n == -1 && t == '*' {
			return nil // RESP2 null array
		}
		return ErrBadLength
	}
	if t == '%' || t == '|' {
		n *= 2
	}
	for i := int64(0); i < n; i++ {
		et, err := rr.r.ReadByte()
		if err != nil {
			return noEOF(err)
		}
		if et == '|' {
			if err := rr.aggregate(et, depth+1); err != nil {
				return err
			}
			i--
			continue
		}
		if err := rr.value(et, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// blob consumes a length-prefixed string and returns its bytes, valid until
// the next read.
func (rr *ReplyReader) blob() ([]byte, error) {
	n, err := rr.length()
	if err != nil {
		return nil, err
	}
	if n == -1 {
		return nil, nil // RESP2 null bulk
	}
	if n < 0 || n > maxBulk {
		return nil, ErrBadLength
	}
	var last []byte
	need := int(n) + 2
	for need > 0 {
		chunk := need
		if chunk > rr.r.Size() {
			chunk = rr.r.Size()
		}
		b, err := rr.r.Peek(chunk)
		if err != nil {
			return nil, noEOF(err)
		}
		last = b
		if _, err := rr.r.Discard(chunk); err != nil {
			return nil, noEOF(err)
		}
		need -= chunk
	}
	if len(last) < 2 || last[len(last)-2] != '\r' || last[len(last)-1] != '\n' {
		return nil, ErrBadLine
	}
	if int(n)+2 <= rr.r.Size() {
		return last[:n], nil
	}
	return nil, nil // too long to hand back whole; only its end was checked
}

// length reads a decimal line such as "16\r\n".
func (rr *ReplyReader) length() (int64, error) {
	line, err := rr.line()
	if err != nil {
		return 0, err
	}
	if len(line) == 0 || len(line) > 19 {
		return 0, ErrBadLength
	}
	neg := false
	if line[0] == '-' {
		neg = true
		line = line[1:]
		if len(line) == 0 {
			return 0, ErrBadLength
		}
	}
	var n int64
	for _, c := range line {
		if c < '0' || c > '9' {
			return 0, ErrBadLength
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

// line reads up to CRLF and returns the line without it, valid until the
// next read.
func (rr *ReplyReader) line() ([]byte, error) {
	b, err := rr.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		// A line longer than the buffer: gather it (rare; error texts).
		rr.long = append(rr.long[:0], b...)
		for errors.Is(err, bufio.ErrBufferFull) {
			if len(rr.long) > maxLine {
				return nil, ErrBadLine
			}
			b, err = rr.r.ReadSlice('\n')
			rr.long = append(rr.long, b...)
		}
		b = rr.long
	}
	if err != nil {
		return nil, noEOF(err)
	}
	if len(b) < 2 || b[len(b)-2] != '\r' {
		return nil, ErrBadLine
	}
	return b[:len(b)-2], nil
}

// noEOF turns an EOF inside a reply into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendCommand appends args as a RESP array of bulk strings to dst.
func AppendCommand(dst []byte, args ...[]byte) []byte {
	dst = append(dst, '*')
	dst = appendInt(dst, int64(len(args)))
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = AppendBulk(dst, a)
	}
	return dst
}

// AppendArrayHeader appends "*n\r\n" to dst.
func AppendArrayHeader(dst []byte, n int) []byte {
	dst = append(dst, '*')
	dst = appendInt(dst, int64(n))
	return append(dst, '\r', '\n')
}

// AppendBulk appends one bulk string to dst.
func AppendBulk(dst, b []byte) []byte {
	dst = append(dst, '$')
	dst = appendInt(dst, int64(len(b)))
	dst = append(dst, '\r', '\n')
	dst = append(dst, b...)
	return append(dst, '\r', '\n')
}

// appendInt appends the decimal form of n.
func appendInt(dst []byte, n int64) []byte {
	if n == 0 {
		return append(dst, '0')
	}
	if n < 0 {
		dst = append(dst, '-')
		n = -n
	}
	var tmp [20]byte
	i := len(tmp)
	for n > 0 {
		i--
		tmp[i] = byte('0' + n%10)
		n /= 10
	}
	return append(dst, tmp[i:]...)
}
