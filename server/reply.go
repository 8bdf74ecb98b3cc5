package server

import "github.com/throttlekit/throttlekit-server/server/resp"

// The append helpers below write one RESP value into a caller's buffer; the
// writers themselves live in package resp (which also has sets, doubles,
// booleans and verbatim strings), which writes the RESP2 values with
// redcon's Append functions and the RESP3 types itself. None of them
// allocates beyond growing dst.

func appendOK(dst []byte) []byte { return resp.AppendOK(dst) }

// appendSimple writes "+s\r\n" with CR and LF in s replaced by spaces.
func appendSimple(dst []byte, s string) []byte { return resp.AppendSimple(dst, s) }

func appendInt(dst []byte, n int64) []byte { return resp.AppendInt(dst, n) }

func appendBulk(dst []byte, b []byte) []byte { return resp.AppendBulk(dst, b) }

func appendBulkString(dst []byte, s string) []byte { return resp.AppendBulkString(dst, s) }

func appendArray(dst []byte, n int) []byte { return resp.AppendArray(dst, n) }

// appendNull writes the null of the connection's protocol: "$-1" (RESP2 null
// bulk) or "_" (RESP3 null).
func appendNull(dst []byte, resp3 bool) []byte { return resp.AppendNull(dst, resp3) }

// appendNullArray writes the null of an absent array entry: "*-1" or "_".
func appendNullArray(dst []byte, resp3 bool) []byte { return resp.AppendNullArray(dst, resp3) }

// appendMap writes the header of a map of n pairs: "%n" in RESP3, an array
// of 2n elements in RESP2.
func appendMap(dst []byte, n int, resp3 bool) []byte { return resp.AppendMap(dst, n, resp3) }

// appendErrorLine writes "-<code> <msg>\r\n" with CR and LF in the text
// replaced by spaces, as Redis does for every error line.
func appendErrorLine(dst []byte, code, msg string) []byte { return resp.AppendError(dst, code, msg) }

// appendSanitizedBytes writes b with CR and LF replaced by spaces, cut to at
// most max bytes.
func appendSanitizedBytes(dst []byte, b []byte, max int) []byte {
	return resp.AppendSanitizedBytes(dst, b, max)
}
