package resp

import (
	"bytes"
	"strconv"
	"testing"
)

// TestWholeFrameLengths: for bulk lengths of every width the fast path
// reads (0 to 9 digits' worth up to 1e6 here), a whole frame is read by
// wholeFrame itself, with the arguments multibulk gives, and every
// truncation of it, or a frame whose data is one byte short or long, is
// left to the general path (0) rather than misread.
func TestWholeFrameLengths(t *testing.T) {
	lim := Limits{MaxArgs: 64, MaxBulkLen: 1 << 21}.norm()
	for _, size := range []int{0, 1, 2, 7, 9, 10, 11, 99, 100, 101, 999, 1000, 9999, 10000, 99999, 100000, 1000000} {
		data := bytes.Repeat([]byte{'x'}, size)
		frame := AppendArray(nil, 3)
		frame = AppendBulk(frame, []byte("SET"))
		frame = AppendBulk(frame, data)
		frame = AppendBulk(frame, []byte("1s"))
		end, args := wholeFrame(frame, lim, nil)
		if end != len(frame) || len(args) != 3 || !bytes.Equal(args[1], data) || string(args[2]) != "1s" {
			t.Fatalf("size %d: wholeFrame = %d of %d, %d args", size, end, len(frame), len(args))
		}
		var q Parser
		st := Pending{state: stateCount, scan: 1}
		if n, margs, err := q.multibulk(frame, &st, lim); err != nil || n != end || len(margs) != len(args) {
			t.Fatalf("size %d: multibulk %d, %d args, %v", size, n, len(margs), err)
		}
		for cut := 0; cut < len(frame); cut++ {
			if size > 1000 && cut > 32 && cut < len(frame)-32 {
				continue // the middle of a long argument: nothing new
			}
			if end, _ := wholeFrame(frame[:cut], lim, nil); end != 0 {
				t.Fatalf("size %d: the first %d bytes read as a frame of %d", size, cut, end)
			}
		}
		// The data one byte short or long of its header's length, as the
		// last argument of a frame with another after it in the buffer:
		// only the CRLF after the data tells.
		for _, n := range []int{size - 1, size + 1} {
			if n < 0 {
				continue
			}
			bad := AppendArray(nil, 2)
			bad = AppendBulk(bad, []byte("SET"))
			bad = append(bad, '$')
			bad = append(bad, strconv.Itoa(size)...)
			bad = append(bad, "\r\n"...)
			bad = append(bad, bytes.Repeat([]byte{'x'}, n)...)
			bad = append(bad, "\r\n*1\r\n$4\r\nPING\r\n"...)
			if end, _ := wholeFrame(bad, lim, nil); end != 0 {
				t.Fatalf("size %d: data of %d bytes read as a frame of %d", size, n, end)
			}
		}
	}
}
