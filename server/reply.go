package server

import (
	"strconv"

	"github.com/tidwall/redcon"
)

// The append helpers below write one RESP value into a caller's buffer. The
// RESP2 forms come from redcon; RESP3-only types (map, null) are written
// here. None of them allocates beyond growing dst.

func appendOK(dst []byte) []byte { return append(dst, "+OK\r\n"...) }

func appendSimple(dst []byte, s string) []byte { return redcon.AppendString(dst, s) }

func appendInt(dst []byte, n int64) []byte { return redcon.AppendInt(dst, n) }

func appendBulk(dst []byte, b []byte) []byte { return redcon.AppendBulk(dst, b) }

func appendBulkString(dst []byte, s string) []byte { return redcon.AppendBulkString(dst, s) }

func appendArray(dst []byte, n int) []byte { return redcon.AppendArray(dst, n) }

// appendNull writes the null of the connection's protocol: "$-1" (RESP2 null
// bulk) or "_" (RESP3 null).
func appendNull(dst []byte, resp3 bool) []byte {
	if resp3 {
		return append(dst, "_\r\n"...)
	}
	return append(dst, "$-1\r\n"...)
}

// appendNullArray writes the null of an absent array entry: "*-1" or "_".
func appendNullArray(dst []byte, resp3 bool) []byte {
	if resp3 {
		return append(dst, "_\r\n"...)
	}
	return append(dst, "*-1\r\n"...)
}

// appendMap writes the header of a map of n pairs: "%n" in RESP3, an array
// of 2n elements in RESP2.
func appendMap(dst []byte, n int, resp3 bool) []byte {
	if resp3 {
		dst = append(dst, '%')
		dst = strconv.AppendInt(dst, int64(n), 10)
		return append(dst, '\r', '\n')
	}
	return redcon.AppendArray(dst, 2*n)
}

// appendErrorLine writes "-<code> <msg>\r\n" with CR and LF in the text
// replaced by spaces, as Redis does for every error line.
func appendErrorLine(dst []byte, code, msg string) []byte {
	dst = append(dst, '-')
	dst = appendSanitized(dst, code)
	if msg != "" {
		dst = append(dst, ' ')
		dst = appendSanitized(dst, msg)
	}
	return append(dst, '\r', '\n')
}

func appendSanitized(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		dst = append(dst, c)
	}
	return dst
}

// appendSanitizedBytes is appendSanitized for bytes, cut to at most max bytes.
func appendSanitizedBytes(dst []byte, b []byte, max int) []byte {
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
