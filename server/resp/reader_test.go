package resp

import (
	"bytes"
	"errors"
	"strconv"
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
		{"007", 7, true},
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
		{"999999999999999999", 999999999999999999, true},
		{"000000000000000000", 0, true},
		{"00000000000000000009", 9, true},
		{"12345678901234567a", 0, false},
		{"1/", 0, false},
		{":", 0, false},
	}
	for _, tt := range tests {
		got, ok := ParseInt64([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseInt64(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	// Every width on both sides of the fast path (up to 18 digits, no
	// sign) agrees with strconv, which differs only in accepting '+' and
	// inputs longer than 20 bytes (leading zeros), which ParseInt64 refuses.
	for w := 1; w <= 20; w++ {
		for _, fill := range []byte{'0', '1', '9'} {
			for _, last := range []byte{'0', '7', '9', '/', ':', 'x'} {
				for _, sign := range []string{"", "-"} {
					in := sign + strings.Repeat(string(fill), w-1) + string(last)
					if len(in) > 20 {
						continue
					}
					got, ok := ParseInt64([]byte(in))
					want, err := strconv.ParseInt(in, 10, 64)
					if ok != (err == nil) || got != want && ok {
						t.Errorf("ParseInt64(%q) = %d, %v; strconv %d, %v", in, got, ok, want, err)
					}
				}
			}
		}
	}
}

func TestParseLen(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"1", 1, true},
		{"-1", -1, true},
		{"1048576", 1048576, true},
		{"01", 0, false},
		{"-0", 0, false},
		{"-01", 0, false},
		{"00", 0, false},
		{"+1", 0, false},
		{"", 0, false},
		{"-", 0, false},
		{"1 ", 0, false},
		{"9223372036854775808", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseLen([]byte(tt.in))
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseLen(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

var testLimits = Limits{MaxArgs: 1024, MaxBulkLen: 1 << 20}

// TestNext covers the cases that do not fit testdata/parse: inputs too long
// to write out, and the codes of the errors.
func TestNext(t *testing.T) {
	tests := []struct {
		name string
		in   string
		lim  Limits
		n    int      // bytes consumed; 0 = incomplete or error
		args []string // nil with n > 0: empty command
		code ErrorCode
	}{
		{name: "multibulk", in: "*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n", n: 22, args: []string{"PING", "hi"}},
		{name: "partial", in: "*2\r\n$4\r\nPING\r\n", n: 0},
		{name: "huge count line", in: "*" + strings.Repeat("1", 70000), code: ErrBigMultibulk},
		{name: "long count line in bounds", in: "*" + strings.Repeat("1", 60000), n: 0},
		{name: "huge bulk line", in: "*1\r\n$" + strings.Repeat("1", 70000), code: ErrBigBulkCount},
		{name: "inline too big", in: strings.Repeat("a", 70000), code: ErrBigInline},
		{name: "inline long in bounds", in: strings.Repeat("a", 60000), n: 0},
		{name: "expected dollar", in: "*1\r\n:1\r\n", code: ErrExpectedDollar},
		{name: "unauth count", in: "*11\r\n", lim: Limits{MaxArgs: 1024, MaxBulkLen: 1 << 20, Unauthenticated: true}, code: ErrUnauthMultibulk},
		{name: "unauth bulk", in: "*1\r\n$16385\r\n", lim: Limits{MaxArgs: 1024, MaxBulkLen: 1 << 20, Unauthenticated: true}, code: ErrUnauthBulk},
		{name: "unauth inline", in: "a b c d e f g h i j k l\r\n", lim: Limits{Unauthenticated: true}, n: 25,
			args: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"}},
		{name: "zero limits take defaults", in: "*1\r\n$" + strconv.Itoa(DefaultMaxBulkLen) + "\r\n", lim: Limits{}, n: 0},
		{name: "over default bulk", in: "*1\r\n$" + strconv.Itoa(DefaultMaxBulkLen+1) + "\r\n", lim: Limits{}, code: ErrBulkLen},
		{name: "huge bulk limit clamped", in: "*1\r\n$9223372036854775807\r\n", lim: Limits{MaxBulkLen: 1<<63 - 1}, code: ErrBulkLen},
		{name: "query bound", in: "*1\r\n$100\r\n", lim: Limits{MaxQueryBuffer: 64}, code: ErrQueryBuffer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := tt.lim
			if lim == (Limits{}) && tt.name != "zero limits take defaults" && tt.name != "over default bulk" {
				lim = testLimits
			}
			var p Parser
			n, args, err := p.Next([]byte(tt.in), nil, lim)
			var perr *Error
			if tt.code != 0 {
				if !errors.As(err, &perr) || perr.Code != tt.code {
					t.Fatalf("err = %v, want code %d", err, tt.code)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
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

// TestNextSplits feeds a pipeline one byte at a time after every split
// point, with and without a Pending, and checks the same commands come out.
func TestNextSplits(t *testing.T) {
	in := []byte("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n")
	want := "SET k hello|PING|QUIT"
	for _, withPending := range []bool{false, true} {
		for split := 0; split <= len(in); split++ {
			var (
				got  []string
				p    Parser
				pend Pending
			)
			pp := &pend
			if !withPending {
				pp = nil
			}
			buf := append([]byte(nil), in[:split]...)
			rest := in[split:]
			for {
				n, args, err := p.Next(buf, pp, testLimits)
				if err != nil {
					t.Fatalf("split %d: %v", split, err)
				}
				if n == 0 {
					if len(rest) == 0 {
						break
					}
					buf = append(buf, rest[0])
					rest = rest[1:]
					continue
				}
				got = append(got, string(bytes.Join(args, []byte(" "))))
				buf = buf[n:]
			}
			if s := strings.Join(got, "|"); s != want {
				t.Fatalf("pending %v split %d: got %q, want %q", withPending, split, s, want)
			}
		}
	}
}

// TestPendingResumes checks that a frame fed in pieces is validated once:
// after each piece the Pending records every argument that arrived whole,
// the next call starts there, and the arguments of the completed frame are
// the ones sent.
func TestPendingResumes(t *testing.T) {
	const argc = 10000
	frame := []byte("*" + strconv.Itoa(argc) + "\r\n")
	for i := range argc {
		a := strconv.Itoa(i)
		frame = append(frame, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	var (
		p    Parser
		pend Pending
	)
	const piece = 1000
	for avail := piece; avail < len(frame); avail += piece {
		n, _, err := p.Next(frame[:avail], &pend, testLimits.with(argc))
		if err != nil || n != 0 {
			t.Fatalf("at %d: n=%d err=%v", avail, n, err)
		}
		if pend.pos > avail || avail-pend.pos > 20 {
			t.Fatalf("at %d bytes the parser stopped at %d", avail, pend.pos)
		}
		if pend.Need() <= int64(avail) {
			t.Fatalf("at %d bytes Need() = %d", avail, pend.Need())
		}
	}
	n, args, err := p.Next(frame, &pend, testLimits.with(argc))
	if err != nil || n != len(frame) || len(args) != argc {
		t.Fatalf("n=%d of %d, %d args, err=%v", n, len(frame), len(args), err)
	}
	for i, a := range args {
		if string(a) != strconv.Itoa(i) {
			t.Fatalf("args[%d] = %q", i, a)
		}
	}
	if pend.Active() || pend.Need() != 0 {
		t.Fatalf("pending after the frame: %+v", pend)
	}
}

func (lim Limits) with(maxArgs int) Limits { lim.MaxArgs = maxArgs; return lim }

// TestStalePending: a caller that passes fewer bytes than the Pending has
// seen gets its input parsed from the start.
func TestStalePending(t *testing.T) {
	var (
		p    Parser
		pend Pending
	)
	if n, _, _ := p.Next([]byte("*2\r\n$4\r\nECHO\r\n$3\r\nab"), &pend, testLimits); n != 0 {
		t.Fatalf("n = %d", n)
	}
	n, args, err := p.Next([]byte("PING\r\n"), &pend, testLimits)
	if err != nil || n != 6 || len(args) != 1 || string(args[0]) != "PING" {
		t.Fatalf("n=%d args=%q err=%v", n, args, err)
	}
	// The same after an inline line whose end had not arrived.
	if n, _, _ := p.Next([]byte("ECHO aaaaaaaaaaaa"), &pend, testLimits); n != 0 {
		t.Fatalf("n = %d", n)
	}
	n, args, err = p.Next([]byte("PING\r\n"), &pend, testLimits)
	if err != nil || n != 6 || len(args) != 1 || string(args[0]) != "PING" {
		t.Fatalf("after inline: n=%d args=%q err=%v", n, args, err)
	}
}

func TestSplitInlineArgsStayValid(t *testing.T) {
	var scratch []byte
	line := []byte(`a "b c" 'd' e`)
	args, ok := SplitInline(line, nil, &scratch)
	if !ok {
		t.Fatal("unbalanced")
	}
	got := string(bytes.Join(args, []byte("|")))
	if got != "a|b c|d|e" {
		t.Fatalf("args = %q", got)
	}
}

// TestNextZeroAlloc: reading a pipeline, whole or resumed, allocates
// nothing once the Parser's slices have grown.
func TestNextZeroAlloc(t *testing.T) {
	var in []byte
	for range 32 {
		in = append(in, "*4\r\n$14\r\nTHROTTLE.CHECK\r\n$6\r\nuser:1\r\n$3\r\n100\r\n$2\r\n1s\r\n"...)
		in = append(in, "PING\r\n"...)
	}
	var (
		p    Parser
		pend Pending
	)
	run := func() {
		for b := in; len(b) > 0; {
			// Every frame first arrives cut short, then whole.
			if n, _, _ := p.Next(b[:len(b)/2], &pend, testLimits); n == len(b) {
				panic("cut frame completed")
			}
			n, _, err := p.Next(b, &pend, testLimits)
			if err != nil || n == 0 {
				panic("pipeline did not parse")
			}
			b = b[n:]
		}
	}
	run()
	if a := testing.AllocsPerRun(20, run); a != 0 {
		t.Fatalf("%v allocations per pipeline, want 0", a)
	}
}

func TestErrorMessages(t *testing.T) {
	for c := ErrMultibulkLen; c <= ErrQueryBuffer; c++ {
		e := &Error{Code: c, Byte: 'x'}
		if m := e.Message(); m == "" || m == "unknown error" || strings.ContainsAny(m, "\r\n") {
			t.Errorf("code %d: message %q", c, m)
		}
		if got, want := string(e.AppendReply(nil)), "-ERR "+e.Error()+"\r\n"; got != want {
			t.Errorf("code %d: reply %q, want %q", c, got, want)
		}
	}
	if m := (&Error{Code: 200}).Message(); m != "unknown error" {
		t.Errorf("unknown code: %q", m)
	}
}

// TestWaitNeverBeyondAnError: a caller that waits for Wait() bytes before
// calling Next again must still see a malformed frame's error as soon as
// its bytes are all there, whatever pieces they arrive in.
func TestWaitNeverBeyondAnError(t *testing.T) {
	for _, in := range []string{
		"*1\r\n$-5\r\n",
		"*1\r\n$-1\r\n",
		"*1\r\n$x\r\n",
		"*1\r\nX",
		"*2\r\n$1\r\na\r\n$-3\r\n",
		"*2\r\n$1\r\na\r\nQ",
		"*1\r\n$1\r\nab\r\n",
		"*x\r\n",
	} {
		var (
			p    Parser
			pend Pending
		)
		b := []byte(in)
		var err error
		for avail := 1; avail <= len(b); avail++ {
			if pend.Active() && int64(avail) < pend.Wait() {
				continue // what a waiting caller does
			}
			var n int
			n, _, err = p.Next(b[:avail], &pend, testLimits)
			if err != nil || n != 0 {
				break
			}
			if w := pend.Wait(); w > int64(len(b)) && avail == len(b) {
				t.Fatalf("%q: all %d bytes there, Wait() = %d", in, len(b), w)
			}
		}
		if err == nil {
			t.Errorf("%q fed in pieces: no error", in)
		}
	}
}

// TestParseInt64Words compares ParseInt64's word-at-a-time path (4 to 8
// bytes) with strconv: for every length it takes, every byte value at
// every position of a run of digits (so each non-digit, the sign and the
// bytes next to '0' and '9' are refused or left to the general path
// wherever they sit), and random digit strings.
func TestParseInt64Words(t *testing.T) {
	check := func(in []byte) {
		t.Helper()
		got, ok := ParseInt64(in)
		want, err := strconv.ParseInt(string(in), 10, 64)
		if in[0] == '+' {
			want, err = 0, strconv.ErrSyntax // strconv takes a '+', ParseInt64 does not
		}
		if ok != (err == nil) || ok && got != want {
			t.Fatalf("ParseInt64(%q) = %d, %v; strconv %d, %v", in, got, ok, want, err)
		}
	}
	for n := 4; n <= 8; n++ {
		for _, fill := range []byte{'0', '5', '9'} {
			in := bytes.Repeat([]byte{fill}, n)
			for i := 0; i < n; i++ {
				for c := 0; c < 256; c++ {
					in[i] = byte(c)
					check(in)
				}
				in[i] = fill
			}
		}
	}
	rng := uint64(21)
	for i := 0; i < 200_000; i++ {
		rng = rng*6364136223846793005 + 1442695040888963407
		n := 4 + int(rng>>60)%5
		in := make([]byte, n)
		for j := range in {
			in[j] = '0' + byte(rng>>(8*j)%10)
		}
		check(in)
	}
}
