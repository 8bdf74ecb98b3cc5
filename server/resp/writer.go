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

// appendHeader writes "<c><n>\r\n" for any int64. One and two digits
// are appended directly; up to 16 digits (all but the most extreme values)
// are converted eight at a time (swarDigits) and stored in words straight
// into dst's spare capacity; the rest goes through strconv.
func appendHeader(dst []byte, c byte, n int64) []byte {
	if uint64(n) < 10 { // lengths, counts and flags: most headers
		return append(dst, c, byte('0'+n), '\r', '\n')
	}
	if uint64(n) < 100 {
		return append(dst, c, digitPairs[2*n], digitPairs[2*n+1], '\r', '\n')
	}
	if n <= -1e16 || n >= 1e16 {
		dst = append(dst, c)
		dst = strconv.AppendInt(dst, n, 10)
		return append(dst, '\r', '\n')
	}
	// The layout: c, an optional '-', the digits above the last eight (if
	// any), the last eight, CRLF: at most 20 bytes. Each word store may
	// write zeros past the digits it holds; the next store overwrites them.
	k := len(dst)
	dst = slices.Grow(dst, 20)
	b := dst[k : k+20]
	b[0] = c
	i := 1
	u := uint64(n)
	if n < 0 {
		b[1] = '-'
		i = 2
		u = -u
	}
	lead, rest := u, uint64(0)
	if u >= 1e8 {
		lead = u / 1e8
		rest = swarDigits(uint32(u - lead*1e8))
	}
	d := swarDigits(uint32(lead))
	z := bits.TrailingZeros64(d) &^ 7 // the leading zeros, in bits (d != 0: lead > 0)
	binary.LittleEndian.PutUint64(b[i:], (d+asciiZeros)>>z)
	i += 8 - z>>3
	if u >= 1e8 {
		binary.LittleEndian.PutUint64(b[i:], rest+asciiZeros)
		i += 8
	}
	b[i], b[i+1] = '\r', '\n'
	return dst[:k+i+2]
}

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

// digitPairs holds "00".."99", the two digits of a two-digit number.
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"

// AppendInt writes the integer ":n\r\n", as redcon.AppendInt does
// (TestRedconWritersMatch), with this package's digit writer
// (appendHeader) rather than strconv's formatting into a buffer of its
// own: a decision reply is five integers, one of them a 13-digit time.
func AppendInt(dst []byte, n int64) []byte { return appendHeader(dst, ':', n) }

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
