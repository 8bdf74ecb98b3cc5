package server

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseInt64(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"42", 42, true},
		{"-42", -42, true},
		{"9223372036854775807", 9223372036854775807, true},
		{"-9223372036854775808", -9223372036854775808, true},
		{"9223372036854775808", 0, false},
		{"-9223372036854775809", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"+1", 0, false},
		{"1a", 0, false},
		{" 1", 0, false},
		{"99999999999999999999999", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseInt64([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseInt64(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestParsePeriod(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1000", 1_000_000_000, true},
		{"250ms", 250_000_000, true},
		{"1s", 1_000_000_000, true},
		{"2m", 120_000_000_000, true},
		{"1h", 3_600_000_000_000, true},
		{"1d", 86_400_000_000_000, true},
		{"1D", 86_400_000_000_000, true},
		{"0", 0, true},
		{"-5s", -5_000_000_000, true},
		{"s", 0, false},
		{"ms", 0, false},
		{"1w", 0, false},
		{"1.5s", 0, false},
		{"9223372036854775807s", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := parsePeriod([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parsePeriod(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

var testLimits = limits{maxArgs: 1024, maxBulkLen: 1 << 20}

func TestReadCommand(t *testing.T) {
	tests := []struct {
		name string
		in   string
		lim  limits
		n    int      // bytes consumed; 0 = incomplete
		args []string // nil with n > 0: empty command
		perr string
	}{
		{name: "multibulk", in: "*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n", n: 22, args: []string{"PING", "hi"}},
		{name: "multibulk with tail", in: "*1\r\n$4\r\nPING\r\n*1\r\n", n: 14, args: []string{"PING"}},
		{name: "empty bulk", in: "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n", n: 20, args: []string{"ECHO", ""}},
		{name: "binary bulk", in: "*1\r\n$3\r\n\r\n\x00\r\n", n: 13, args: []string{"\r\n\x00"}},
		{name: "partial header", in: "*2\r", n: 0},
		{name: "partial bulk header", in: "*2\r\n$4", n: 0},
		{name: "partial bulk", in: "*2\r\n$4\r\nPI", n: 0},
		{name: "partial second arg", in: "*2\r\n$4\r\nPING\r\n", n: 0},
		{name: "missing final CRLF", in: "*1\r\n$4\r\nPING", n: 0},
		{name: "zero count", in: "*0\r\n", n: 4},
		{name: "null array", in: "*-1\r\n", n: 5},
		{name: "bad count", in: "*x\r\n", perr: "invalid multibulk length"},
		{name: "count over max args", in: "*1025\r\n", perr: "invalid multibulk length"},
		{name: "count overflow", in: "*99999999999999999999\r\n", perr: "invalid multibulk length"},
		{name: "LF without CR", in: "*1\n", perr: "invalid multibulk length"},
		{name: "expected dollar", in: "*1\r\n+PING\r\n", perr: "expected '$', got '+'"},
		{name: "negative bulk", in: "*1\r\n$-1\r\n", perr: "invalid bulk length"},
		{name: "negative bulk -2", in: "*1\r\n$-2\r\nab\r\n", perr: "invalid bulk length"},
		{name: "bulk over max", in: "*1\r\n$1048577\r\n", perr: "invalid bulk length"},
		{name: "bulk not a number", in: "*1\r\n$abc\r\n", perr: "invalid bulk length"},
		{name: "bulk empty length", in: "*1\r\n$\r\n", perr: "invalid bulk length"},
		{name: "bulk bad terminator", in: "*1\r\n$4\r\nPINGxx", perr: "invalid bulk length"},
		{name: "huge count line", in: "*" + strings.Repeat("1", 70000), perr: "too big mbulk count string"},
		{name: "huge bulk line", in: "*1\r\n$" + strings.Repeat("1", 70000), perr: "too big bulk count string"},
		{name: "unauth count", in: "*11\r\n", lim: limits{maxArgs: 1024, maxBulkLen: 1 << 20, unauth: true}, perr: "unauthenticated multibulk length"},
		{name: "unauth bulk", in: "*1\r\n$16385\r\n", lim: limits{maxArgs: 1024, maxBulkLen: 1 << 20, unauth: true}, perr: "unauthenticated bulk length"},
		{name: "inline", in: "PING\r\n", n: 6, args: []string{"PING"}},
		{name: "inline LF only", in: "ECHO  a   b\n", n: 12, args: []string{"ECHO", "a", "b"}},
		{name: "inline dollar", in: "$5 x\r\n", n: 6, args: []string{"$5", "x"}},
		{name: "inline quotes", in: "ECHO \"a b\" 'c d'\r\n", n: 18, args: []string{"ECHO", "a b", "c d"}},
		{name: "inline escapes", in: `ECHO "\x41\n\t\"" 'it\'s'` + "\r\n", n: 27, args: []string{"ECHO", "A\n\t\"", "it's"}},
		{name: "inline bad hex", in: `ECHO "\xZZ"` + "\n", n: 12, args: []string{"ECHO", "xZZ"}},
		{name: "inline blank", in: "\r\n", n: 2},
		{name: "inline spaces", in: "   \r\n", n: 5},
		{name: "inline partial", in: "PING", n: 0},
		{name: "inline unbalanced", in: "ECHO \"abc\r\n", perr: "unbalanced quotes in request"},
		{name: "inline unbalanced single", in: "ECHO 'abc\r\n", perr: "unbalanced quotes in request"},
		{name: "inline quote then text", in: "ECHO \"a\"b\r\n", perr: "unbalanced quotes in request"},
		{name: "inline too big", in: strings.Repeat("a", 70000), perr: "too big inline request"},
		{name: "inline too many args", in: "a b c\r\n", lim: limits{maxArgs: 2, maxBulkLen: 10}, perr: "too many arguments in inline request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := tt.lim
			if lim.maxArgs == 0 {
				lim = testLimits
			}
			var scratch []byte
			n, args, perr := readCommand([]byte(tt.in), nil, &scratch, lim)
			if string(perr) != tt.perr {
				t.Fatalf("perr = %q, want %q", perr, tt.perr)
			}
			if n != tt.n {
				t.Fatalf("n = %d, want %d", n, tt.n)
			}
			if len(args) != len(tt.args) {
				t.Fatalf("args = %q, want %q", args, tt.args)
			}
			for i := range args {
				if string(args[i]) != tt.args[i] {
					t.Fatalf("args[%d] = %q, want %q", i, args[i], tt.args[i])
				}
			}
		})
	}
}

// TestReadCommandSplits feeds a pipeline one byte at a time at every split
// point and checks that the same commands come out.
func TestReadCommandSplits(t *testing.T) {
	in := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n")
	want := [][]string{{"SET", "k", "hello"}, {"PING"}, {"QUIT"}}
	for split := 0; split <= len(in); split++ {
		var got [][]string
		buf := append([]byte(nil), in[:split]...)
		rest := in[split:]
		var scratch []byte
		for {
			n, args, perr := readCommand(buf, nil, &scratch, testLimits)
			if perr != "" {
				t.Fatalf("split %d: %s", split, perr)
			}
			if n == 0 {
				if len(rest) == 0 {
					break
				}
				buf = append(buf, rest[0])
				rest = rest[1:]
				continue
			}
			var s []string
			for _, a := range args {
				s = append(s, string(a))
			}
			got = append(got, s)
			buf = buf[n:]
		}
		if len(got) != len(want) {
			t.Fatalf("split %d: got %q", split, got)
		}
		for i := range want {
			if strings.Join(got[i], " ") != strings.Join(want[i], " ") {
				t.Fatalf("split %d: command %d = %q, want %q", split, i, got[i], want[i])
			}
		}
	}
}

func TestSplitInlineArgsStayValid(t *testing.T) {
	var scratch []byte
	line := []byte(`a "b c" 'd' e`)
	args, ok := splitInline(line, nil, &scratch)
	if !ok {
		t.Fatal("unbalanced")
	}
	got := string(bytes.Join(args, []byte("|")))
	if got != "a|b c|d|e" {
		t.Fatalf("args = %q", got)
	}
}
