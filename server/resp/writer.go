package resp

import (
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/redcon"
)

// The Append functions write one RESP value to the end of dst and return
// the extended slice, like append. They allocate nothing beyond growing dst.
// A resp3 argument picks the form of the connection's protocol: RESP3 (after
// HELLO 3) or RESP2.
//
// The RESP2 bulk strings, the null bulk, simple strings and OK are written
// by redcon's Append functions, whose bytes TestRedconWritersMatch compares
// with a reference writer; integers and array headers (the bulk of a
// decision reply), the RESP3 types and the two-part error line are written
// here, and compared with the same reference.

// AppendOK writes "+OK\r\n" (redcon.AppendOK).
func AppendOK(dst []byte) []byte { return redcon.AppendOK(dst) }

// AppendSimple writes a simple string, "+s\r\n", with CR and LF in s
// replaced by spaces. A string without CR or LF goes to redcon.AppendString;
// one with them is sanitized here, where that does not allocate (redcon
// builds a replaced copy of the string).
func AppendSimple(dst []byte, s string) []byte {
	if !strings.ContainsAny(s, "\r\n") {
		return redcon.AppendString(dst, s)
	}
	dst = append(dst, '+')
	dst = AppendSanitized(dst, s)
	return append(dst, '\r', '\n')
}

// AppendError writes the error line "-<code> <msg>\r\n" (just "-<code>\r\n"
// when msg is empty), with CR and LF replaced by spaces as redis-server does
// for every error line. code is the first word, e.g. "ERR" or "WRONGTYPE".
// It is written here rather than by redcon.AppendError, which takes the
// line as one string: joining code and msg for it would allocate.
func AppendError(dst []byte, code, msg string) []byte {
	dst = append(dst, '-')
	dst = AppendSanitized(dst, code)
	if msg != "" {
		dst = append(dst, ' ')
		dst = AppendSanitized(dst, msg)
	}
	return append(dst, '\r', '\n')
}

// AppendSanitized writes s with CR and LF replaced by spaces: the text of a
// simple string or error line, which may not contain them.
func AppendSanitized(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return dst
}

// AppendSanitizedBytes is AppendSanitized for bytes, cut to at most max
// bytes: for quoting a client's argument in an error line.
func AppendSanitizedBytes(dst []byte, b []byte, max int) []byte {
	if len(b) > max {
		b = b[:max]
	}
	for _, c := range b {
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return dst
}

// maxHeader is the longest "<c><n>\r\n" an int64 gives: the type byte, a
// sign, 19 digits and CRLF.
const maxHeader = 23

// The integer writers store into a window of dst's spare room: an array
// pointer into it (one bounds check to get it), indexed at offsets masked
// to the window's size. The caller has made sure that what it writes fits,
// so the masks change nothing, but they let the compiler drop the bounds
// checks of each store, which cost more than the digits themselves. The
// window is 8 bytes longer than the mask reaches, so a word stored at any
// masked offset fits too.

// headerWindow is the room appendHeader reserves: a header at an offset
// masked to 15 (it is at most 2 when the digits start) plus an 8-byte word.
const headerWindow = 32

// appendHeader writes "<c><n>\r\n" for any int64: a value from 0 to 9
// (lengths, counts and flags: most headers) directly, any other with one
// capacity check and putHeader.
func appendHeader(dst []byte, c byte, n int64) []byte {
	if uint64(n) < 10 {
		return append(dst, c, byte('0'+n), '\r', '\n')
	}
	k := len(dst)
	if cap(dst)-k < headerWindow {
		dst = slices.Grow(dst, headerWindow)
	}
	return dst[:k+putHeader((*[headerWindow]byte)(dst[k:k+headerWindow]), c, n)]
}

// putHeader writes "<c><n>\r\n" at the start of w and returns its length.
// Up to 16 digits (all but the most extreme values) are converted eight
// at a time (swarDigits) and stored in words; the rest goes through
// strconv, into w's own room. A word store may write zeros past the digits
// it holds; the next store overwrites them. Its callers write the values
// from 0 to 9 themselves, more cheaply.
func putHeader(w *[headerWindow]byte, c byte, n int64) int {
	u := uint64(n)
	w[0] = c
	i := 1
	if n < 0 {
		w[1] = '-'
		i = 2
		u = -u // math.MinInt64 gives its own magnitude as a uint64
	}
	switch {
	case u < 1e8:
		d := swarDigits(uint32(u))
		z := bits.TrailingZeros64(d) & 56 // the leading zeros, in bits (d != 0: u > 0)
		binary.LittleEndian.PutUint64(w[i:i+8], (d+asciiZeros)>>z)
		i = (i + 8 - z>>3) & 15
	case u < 1e16:
		hi := u / 1e8
		d := swarDigits(uint32(hi))
		z := bits.TrailingZeros64(d) & 56
		binary.LittleEndian.PutUint64(w[i:i+8], (d+asciiZeros)>>z)
		i = (i + 8 - z>>3) & 15
		binary.LittleEndian.PutUint64(w[i:i+8], swarDigits(uint32(u-hi*1e8))+asciiZeros)
		i += 8
	default:
		i = len(strconv.AppendUint(w[:i], u, 10))
	}
	binary.LittleEndian.PutUint16(w[i&31:], crlf)
	return i + 2
}

// crlf is "\r\n" as a little-endian 16-bit word.
const crlf = '\r' | '\n'<<8

// asciiZeros added to the digit values of swarDigits makes them text.
const asciiZeros = 0x3030303030303030

// swarDigits returns the eight decimal digits of x (below 1e8, leading
// zeros included) as byte values 0 to 9, the most significant in the
// lowest byte, so that a little-endian store writes them in order. It
// splits x into two four-digit halves, then each half into two pairs and
// each pair into two digits, all lanes at once in one 64-bit word ("SWAR"):
// a division by 100 or 10 of every lane is a multiplication by a
// reciprocal and a shift, exact in the ranges used (y*10486>>20 = y/100 for
// y < 43699, y*103>>10 = y/10 for y < 179), and the masks drop the bits
// a shift moves in from the next lane.
func swarDigits(x uint32) uint64 {
	hi, lo := x/10000, x%10000
	v := uint64(hi) | uint64(lo)<<32            // two lanes of 32 bits, each < 10000
	q := (v * 10486 >> 20) & 0x0000007f0000007f // each lane / 100
	v = q | (v-q*100)<<16                       // four lanes of 16 bits, each < 100
	q = (v * 103 >> 10) & 0x000f000f000f000f    // each lane / 10
	return q | (v-q*10)<<8                      // eight lanes of 8 bits, each < 10
}

// AppendInt writes the integer ":n\r\n", as redcon.AppendInt does
// (TestRedconWritersMatch), with this package's digit writer
// (appendHeader) rather than strconv's formatting into a buffer of its
// own: a decision reply is five integers, one of them a 13-digit time.
func AppendInt(dst []byte, n int64) []byte { return appendHeader(dst, ':', n) }

// AppendIntFields writes the start of a reply of n fields (n >= len(vals))
// whose first len(vals) fields are the integers vals, the field i named
// names[i]: in RESP3 a map header "%n" followed by each name, as a bulk
// string, and its integer; in RESP2 an array header "*n" followed by the
// integers alone, the names left out. The caller appends the other fields
// (in RESP3 a name and a value each). In RESP3 names must have an entry
// for each value. The bytes are those of AppendMap or AppendArray followed
// by AppendBulkString and AppendInt (TestAppendIntFieldsMatches); what
// differs is the cost: a reply that fits in fieldsWindow bytes (a decision
// reply does) is written with one capacity check and no call per value,
// which is most of the work of writing a decision reply.
func AppendIntFields(dst []byte, n int, resp3 bool, names []string, vals []int64) []byte {
	need := maxHeader * (1 + len(vals))
	if resp3 {
		for _, s := range names[:len(vals)] {
			if len(s) >= 100 {
				need = fieldsWindow + 1 // more than the fast path's two-digit lengths
				break
			}
			need += 5 + len(s) + 2
		}
	}
	if need > fieldsWindow || uint(n) >= 10 {
		return appendIntFieldsSlow(dst, n, resp3, names, vals)
	}
	k := len(dst)
	if cap(dst)-k < fieldsWindow+8 {
		dst = slices.Grow(dst, fieldsWindow+8)
	}
	w := (*[fieldsWindow + 8]byte)(dst[k : k+fieldsWindow+8])
	c := byte('*')
	if resp3 {
		c = '%'
	}
	binary.LittleEndian.PutUint32(w[:4], uint32(c)|uint32('0'+n)<<8|crlf<<16)
	i := 4
	const m = fieldsWindow - 1 // the offset mask: see the note on windows above headerWindow
	for j, v := range vals {
		if resp3 { // "$<len>\r\n<name>\r\n", len below 100
			s := names[j]
			if l := uint64(len(s)); l < 10 {
				binary.LittleEndian.PutUint32(w[i&m:], '$'|uint32('0'+l)<<8|crlf<<16)
				i += 4
			} else {
				binary.LittleEndian.PutUint64(w[i&m:], '$'|('0'+l/10)<<8|('0'+l%10)<<16|crlf<<24)
				i += 5
			}
			i += copy(w[i&m:], s)
			binary.LittleEndian.PutUint16(w[i&m:], crlf)
			i += 2
		}
		u := uint64(v)
		switch {
		case u < 10:
			binary.LittleEndian.PutUint32(w[i&m:], ':'|uint32('0'+u)<<8|crlf<<16)
			i += 4
			continue
		case u < 1e8:
			w[i&m] = ':'
			d := swarDigits(uint32(u))
			z := bits.TrailingZeros64(d) & 56 // the leading zeros, in bits (d != 0: u > 0)
			binary.LittleEndian.PutUint64(w[(i+1)&m:], (d+asciiZeros)>>z)
			i += 9 - z>>3
		case u < 1e16:
			w[i&m] = ':'
			hi := u / 1e8
			d := swarDigits(uint32(hi))
			z := bits.TrailingZeros64(d) & 56
			binary.LittleEndian.PutUint64(w[(i+1)&m:], (d+asciiZeros)>>z)
			i += 9 - z>>3
			binary.LittleEndian.PutUint64(w[i&m:], swarDigits(uint32(u-hi*1e8))+asciiZeros)
			i += 8
		default: // negative, or 17 digits and more: rare
			var h [headerWindow]byte
			l := putHeader(&h, ':', v)
			i += copy(w[i&m:], h[:l])
			continue
		}
		binary.LittleEndian.PutUint16(w[i&m:], crlf)
		i += 2
	}
	return dst[:k+i]
}

// fieldsWindow bounds the replies AppendIntFields writes on its fast path:
// a power of two, the mask of its offsets plus one.
const fieldsWindow = 256

// appendIntFieldsSlow is AppendIntFields for a reply that does not fit its
// fast path: value by value.
func appendIntFieldsSlow(dst []byte, n int, resp3 bool, names []string, vals []int64) []byte {
	if resp3 {
		dst = appendHeader(dst, '%', int64(n))
	} else {
		dst = appendHeader(dst, '*', int64(n))
	}
	for j, v := range vals {
		if resp3 {
			dst = AppendBulkString(dst, names[j])
		}
		dst = appendHeader(dst, ':', v)
	}
	return dst
}

// AppendBulk writes the bulk string "$<len>\r\n<b>\r\n" (redcon.AppendBulk).
func AppendBulk(dst []byte, b []byte) []byte { return redcon.AppendBulk(dst, b) }

// AppendBulkString is AppendBulk for a string (redcon.AppendBulkString).
func AppendBulkString(dst []byte, s string) []byte { return redcon.AppendBulkString(dst, s) }

// AppendArray writes the header of an array of n elements, "*<n>\r\n",
// as redcon.AppendArray does (TestRedconWritersMatch), with appendHeader;
// the caller appends the elements.
func AppendArray(dst []byte, n int) []byte { return appendHeader(dst, '*', int64(n)) }

// AppendNull writes the null of the protocol: "_\r\n" in RESP3, the null
// bulk string "$-1\r\n" (redcon.AppendNull) in RESP2, what a missing string
// reads as.
func AppendNull(dst []byte, resp3 bool) []byte {
	if resp3 {
		return append(dst, "_\r\n"...)
	}
	return redcon.AppendNull(dst)
}

// AppendNullArray writes the null of a missing array or entry: "_\r\n" in
// RESP3, the null array "*-1\r\n" in RESP2.
func AppendNullArray(dst []byte, resp3 bool) []byte {
	if resp3 {
		return append(dst, "_\r\n"...)
	}
	return append(dst, "*-1\r\n"...)
}

// AppendMap writes the header of a map of n key/value pairs: "%<n>\r\n" in
// RESP3, an array of 2n elements in RESP2 (keys and values alternating).
// The caller appends the 2n elements.
func AppendMap(dst []byte, n int, resp3 bool) []byte {
	if resp3 {
		return appendHeader(dst, '%', int64(n))
	}
	return redcon.AppendArray(dst, 2*n)
}

// AppendSet writes the header of a set of n elements: "~<n>\r\n" in RESP3,
// an array in RESP2.
func AppendSet(dst []byte, n int, resp3 bool) []byte {
	if resp3 {
		return appendHeader(dst, '~', int64(n))
	}
	return redcon.AppendArray(dst, n)
}

// AppendBool writes a boolean: "#t\r\n" or "#f\r\n" in RESP3, the integer 1
// or 0 in RESP2, as redis-server does. No command of the server replies a
// boolean yet, so only the tests call it (deadcode lists it); it stays so that
// the codec writes every RESP3 type its doc names.
func AppendBool(dst []byte, v bool, resp3 bool) []byte {
	switch {
	case resp3 && v:
		return append(dst, "#t\r\n"...)
	case resp3:
		return append(dst, "#f\r\n"...)
	case v:
		return redcon.AppendInt(dst, 1)
	}
	return redcon.AppendInt(dst, 0)
}

// AppendDouble writes a floating-point number: ",<f>\r\n" in RESP3, a bulk
// string of the same text in RESP2. The text is the shortest that reads
// back as f ("1.5", "1e+20"), or "inf", "-inf" or "nan".
func AppendDouble(dst []byte, f float64, resp3 bool) []byte {
	var buf [32]byte
	var txt []byte
	switch {
	case math.IsInf(f, 1):
		txt = append(buf[:0], "inf"...)
	case math.IsInf(f, -1):
		txt = append(buf[:0], "-inf"...)
	case math.IsNaN(f):
		txt = append(buf[:0], "nan"...)
	default:
		txt = strconv.AppendFloat(buf[:0], f, 'g', -1, 64)
	}
	if resp3 {
		dst = append(dst, ',')
		dst = append(dst, txt...)
		return append(dst, '\r', '\n')
	}
	return AppendBulk(dst, txt)
}

// AppendVerbatimString writes a verbatim string:
// "=<len>\r\n<format>:<text>\r\n" in RESP3, where format is three bytes
// such as "txt" or "mkd" and len counts the format and the colon; a plain
// bulk string of text in RESP2. A format that is not three bytes long is
// replaced by "txt".
func AppendVerbatimString(dst []byte, format, text string, resp3 bool) []byte {
	if !resp3 {
		return AppendBulkString(dst, text)
	}
	dst = appendVerbatimHeader(dst, format, len(text))
	dst = append(dst, text...)
	return append(dst, '\r', '\n')
}

func appendVerbatimHeader(dst []byte, format string, n int) []byte {
	if len(format) != 3 {
		format = "txt"
	}
	dst = appendHeader(dst, '=', int64(n)+4)
	dst = append(dst, format...)
	return append(dst, ':')
}
