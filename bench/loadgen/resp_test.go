package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReplyReaderSkip(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		kinds   []int  // expected kinds, one per reply
		lastErr string // expected LastError after all replies
	}{
		{"simple string", "+OK\r\n", []int{KindValue}, ""},
		{"error", "-ERR wrong number of arguments\r\n", []int{KindError}, "ERR wrong number of arguments"},
		{"integer", ":-42\r\n", []int{KindValue}, ""},
		{"bulk", "$5\r\nhello\r\n", []int{KindValue}, ""},
		{"empty bulk", "$0\r\n\r\n", []int{KindValue}, ""},
		{"null bulk", "$-1\r\n", []int{KindValue}, ""},
		{"null array", "*-1\r\n", []int{KindValue}, ""},
		{"throttle reply", "*5\r\n:1\r\n:100\r\n:99\r\n:1700000000000\r\n:0\r\n", []int{KindValue}, ""},
		{"nested array", "*2\r\n*2\r\n:1\r\n$1\r\na\r\n+x\r\n", []int{KindValue}, ""},
		{"error inside array is a value", "*1\r\n-ERR x\r\n", []int{KindValue}, ""},
		{"resp3 map", "%2\r\n+allowed\r\n:1\r\n+limit\r\n:10\r\n", []int{KindValue}, ""},
		{"resp3 scalars", "_\r\n,3.14\r\n#t\r\n(12345678901234567890\r\n", []int{KindValue, KindValue, KindValue, KindValue}, ""},
		{"resp3 verbatim and set", "=8\r\ntxt:abcd\r\n~2\r\n:1\r\n:2\r\n", []int{KindValue, KindValue}, ""},
		{"blob error", "!11\r\nERR bad one\r\n", []int{KindError}, "ERR bad one"},
		{"attribute before reply", "|1\r\n+ttl\r\n:3\r\n:7\r\n", []int{KindValue}, ""},
		{"push", ">2\r\n+message\r\n$2\r\nhi\r\n", []int{KindValue}, ""},
		{"pipeline of mixed", "+PONG\r\n-ERR a\r\n:1\r\n-WRONGTYPE b\r\n", []int{KindValue, KindError, KindValue, KindError}, "WRONGTYPE b"},
	}
	for _, tc := range tests {
		for _, oneByte := range []bool{false, true} {
			var src io.Reader = strings.NewReader(tc.in)
			if oneByte {
				src = iotest.OneByteReader(src)
			}
			rr := NewReplyReader(bufio.NewReaderSize(src, 16))
			for i, want := range tc.kinds {
				got, err := rr.Skip()
				if err != nil {
					t.Fatalf("%s (oneByte=%v): reply %d: %v", tc.name, oneByte, i, err)
				}
				if got != want {
					t.Errorf("%s (oneByte=%v): reply %d kind = %d, want %d", tc.name, oneByte, i, got, want)
				}
			}
			if _, err := rr.Skip(); err != io.EOF {
				t.Errorf("%s (oneByte=%v): after last reply err = %v, want io.EOF", tc.name, oneByte, err)
			}
			if rr.LastError != tc.lastErr {
				t.Errorf("%s: LastError = %q, want %q", tc.name, rr.LastError, tc.lastErr)
			}
		}
	}
}

func TestReplyReaderLongBulk(t *testing.T) {
	body := strings.Repeat("x", 1000)
	in := "$1000\r\n" + body + "\r\n:1\r\n"
	rr := NewReplyReader(bufio.NewReaderSize(strings.NewReader(in), 16))
	for i := 0; i < 2; i++ {
		if k, err := rr.Skip(); err != nil || k != KindValue {
			t.Fatalf("reply %d: kind %d err %v", i, k, err)
		}
	}
}

func TestReplyReaderMalformed(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"unknown type", "?x\r\n", ErrBadType},
		{"bad length", "$abc\r\n", ErrBadLength},
		{"negative length", "$-2\r\n", ErrBadLength},
		{"negative map", "%-1\r\n", ErrBadLength},
		{"empty length", "*\r\n", ErrBadLength},
		{"LF without CR", "+OK\n", ErrBadLine},
		{"bulk without CRLF", "$2\r\nabXY", ErrBadLine},
		{"truncated bulk", "$5\r\nab", io.ErrUnexpectedEOF},
		{"truncated array", "*3\r\n:1\r\n", io.ErrUnexpectedEOF},
		{"too deep", strings.Repeat("*1\r\n", maxDepth+2) + ":1\r\n", ErrTooDeep},
	}
	for _, tc := range tests {
		rr := NewReplyReader(bufio.NewReaderSize(strings.NewReader(tc.in), 64))
		_, err := rr.Skip()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestCommandEncoding(t *testing.T) {
	tests := []struct {
		args   []string
		keyArg int
		prefix string
		idx    uint64
		want   string
	}{
		{[]string{"PING"}, -1, "", 7, "*1\r\n$4\r\nPING\r\n"},
		{[]string{"INCR", ""}, 1, "k:", 42, "*2\r\n$4\r\nINCR\r\n$4\r\nk:42\r\n"},
		{[]string{"THROTTLE.CHECK", "", "100", "1s"}, 1, "t:", 0,
			"*4\r\n$14\r\nTHROTTLE.CHECK\r\n$3\r\nt:0\r\n$3\r\n100\r\n$2\r\n1s\r\n"},
	}
	for _, tc := range tests {
		c := NewCommand(tc.args, tc.keyArg, tc.prefix)
		got, _ := c.Append(nil, nil, tc.idx)
		if string(got) != tc.want {
			t.Errorf("%v: got %q, want %q", tc.args, got, tc.want)
		}
		// What we encode must read back as one reply-shaped value.
		rr := NewReplyReader(bufio.NewReader(bytes.NewReader(got)))
		if k, err := rr.Skip(); err != nil || k != KindValue {
			t.Errorf("%v: re-read kind %d err %v", tc.args, k, err)
		}
	}
}

// TestMultiKeyCommand: every key argument carries the same index behind
// its own prefix, the other arguments stay as given, and appending
// allocates nothing once the buffers have grown.
func TestMultiKeyCommand(t *testing.T) {
	args := []string{"THROTTLE.MCHECK", "2", "", "1000", "1s", "gcra", "", "1000", "1s", "gcra"}
	tests := []struct {
		name string
		keys []KeyArg
		want string
	}{
		{"two keys", []KeyArg{{2, "m1:", 0}, {6, "m2:", 0}},
			"*10\r\n$15\r\nTHROTTLE.MCHECK\r\n$1\r\n2\r\n$5\r\nm1:42\r\n$4\r\n1000\r\n$2\r\n1s\r\n$4\r\ngcra\r\n" +
				"$5\r\nm2:42\r\n$4\r\n1000\r\n$2\r\n1s\r\n$4\r\ngcra\r\n"},
		{"given out of order", []KeyArg{{6, "b:", 0}, {2, "a:", 0}},
			"*10\r\n$15\r\nTHROTTLE.MCHECK\r\n$1\r\n2\r\n$4\r\na:42\r\n$4\r\n1000\r\n$2\r\n1s\r\n$4\r\ngcra\r\n" +
				"$4\r\nb:42\r\n$4\r\n1000\r\n$2\r\n1s\r\n$4\r\ngcra\r\n"},
		{"out of range ignored", []KeyArg{{2, "m1:", 0}, {10, "x:", 0}, {-1, "y:", 0}},
			"*10\r\n$15\r\nTHROTTLE.MCHECK\r\n$1\r\n2\r\n$5\r\nm1:42\r\n$4\r\n1000\r\n$2\r\n1s\r\n$4\r\ngcra\r\n" +
				"$0\r\n\r\n$4\r\n1000\r\n$2\r\n1s\r\n$4\r\ngcra\r\n"},
		{"same position twice", []KeyArg{{2, "m1:", 0}, {2, "m2:", 0}},
			"*10\r\n$15\r\nTHROTTLE.MCHECK\r\n$1\r\n2\r\n$5\r\nm1:42\r\n$4\r\n1000\r\n$2\r\n1s\r\n$4\r\ngcra\r\n" +
				"$0\r\n\r\n$4\r\n1000\r\n$2\r\n1s\r\n$4\r\ngcra\r\n"},
	}
	for _, tc := range tests {
		c := NewMultiKeyCommand(args, tc.keys...)
		got, _ := c.Append(nil, nil, 42)
		if string(got) != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
		rr := NewReplyReader(bufio.NewReader(bytes.NewReader(got)))
		if k, err := rr.Skip(); err != nil || k != KindValue {
			t.Errorf("%s: re-read kind %d err %v", tc.name, k, err)
		}
	}
	c := NewMultiKeyCommand(args, KeyArg{2, "m1:", 0}, KeyArg{6, "m2:", 0})
	buf, scratch := c.Append(nil, nil, 1<<40)
	if n := testing.AllocsPerRun(100, func() { buf, scratch = c.Append(buf[:0], scratch, 1<<40) }); n != 0 {
		t.Errorf("Append allocates %v times per command", n)
	}
	var zero Command
	if got, _ := zero.Append([]byte("x"), nil, 1); string(got) != "x" {
		t.Errorf("zero Command appended %q", got)
	}
}

func TestAppendIntEdges(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0"}, {7, "7"}, {-15, "-15"}, {1234567890123, "1234567890123"}} {
		if got := string(appendInt(nil, tc.n)); got != tc.want {
			t.Errorf("appendInt(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
}

func FuzzReplyReader(f *testing.F) {
	for _, s := range []string{"+OK\r\n", "*2\r\n:1\r\n$1\r\na\r\n", "%1\r\n+a\r\n:1\r\n", "$-1\r\n", "|1\r\n+a\r\n+b\r\n+c\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rr := NewReplyReader(bufio.NewReaderSize(bytes.NewReader(data), 16))
		for i := 0; i < 64; i++ {
			k, err := rr.Skip()
			if err != nil {
				return
			}
			if k != KindValue && k != KindError {
				t.Fatalf("unknown kind %d", k)
			}
		}
	})
}
