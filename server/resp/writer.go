package resp

import (
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/tidwall/redcon"
)

// The Append functions write one RESP value to the end of dst and return
// the extended slice, like append. They allocate nothing beyond growing dst.
// A resp3 argument picks the form of the connection's protocol: RESP3 (after
// HELLO 3) or RESP2.
//
// The RESP2 values (integers, bulk strings, array headers, the null bulk,
// simple strings, OK) are written by redcon's Append functions, whose bytes
// TestRedconWritersMatch compares with a reference writer; the RESP3 types
// and the two-part error line are written here.

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

// appendHeader writes "<c><n>\r\n".
func appendHeader(dst []byte, c byte, n int64) []byte {
	if uint64(n) < 10 { // lengths, counts and flags: most headers
		return append(dst, c, byte('0'+n), '\r', '\n')
	}
	dst = append(dst, c)
	if n > 0 && n < 1e16 {
		dst = appendDigits(dst, uint64(n))
	} else {
		dst = strconv.AppendInt(dst, n, 10)
	}
	return append(dst, '\r', '\n')
}

// digitPairs holds "00".."99": appendDigits writes two digits per step.
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

// pow10[i] is 10^i, up to the largest appendDigits needs.
var pow10 = [...]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16}

// appendDigits writes n (below 1e16) in decimal straight into dst's spare
// capacity; strconv.AppendInt formats into a buffer of its own and copies.
func appendDigits(dst []byte, n uint64) []byte {
	// The width: log10 from the bit length (1233/4096 ~ log10(2)), then
	// one comparison to correct it.
	w := (bits.Len64(n) * 1233) >> 12
	if n >= pow10[w] {
		w++
	}
	start := len(dst)
	dst = append(dst, "0000000000000000"[:w]...)
	i := start + w
	for n >= 100 {
		q := n / 100
		r := (n - q*100) * 2
		i -= 2
		dst[i], dst[i+1] = digitPairs[r], digitPairs[r+1]
		n = q
	}
	if n >= 10 {
		r := n * 2
		dst[i-2], dst[i-1] = digitPairs[r], digitPairs[r+1]
	} else {
		dst[i-1] = byte('0' + n)
	}
	return dst
}

// AppendInt writes the integer ":n\r\n", as redcon.AppendInt does
// (TestRedconWritersMatch), with appendDigits' direct digits rather than
// strconv's formatting into a buffer of its own: a decision reply is five
// integers, one of them a 13-digit time.
func AppendInt(dst []byte, n int64) []byte { return appendHeader(dst, ':', n) }

// AppendBulk writes the bulk string "$<len>\r\n<b>\r\n" (redcon.AppendBulk).
func AppendBulk(dst []byte, b []byte) []byte { return redcon.AppendBulk(dst, b) }

// AppendBulkString is AppendBulk for a string (redcon.AppendBulkString).
func AppendBulkString(dst []byte, s string) []byte { return redcon.AppendBulkString(dst, s) }

// AppendArray writes the header of an array of n elements, "*<n>\r\n"
// (redcon.AppendArray); the caller appends the elements.
func AppendArray(dst []byte, n int) []byte { return redcon.AppendArray(dst, n) }

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
