package resp

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzParse feeds random bytes to the parser three ways: all at once with
// no Pending, all at once through a Pending, and cut at fuzzer-chosen
// points and delivered piece by piece. All three must give the same
// commands and the same error; nothing may panic; every error must be a
// *Error whose reply is one clean line.
func FuzzParse(f *testing.F) {
	seeds := []string{
		"PING\r\n",
		"*1\r\n$4\r\nPING\r\n",
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\nPING\r\n*1\r\n$4\r\nQUIT\r\n",
		"*2\r\n$4\r\nECHO\r\n$3\r\nab",
		"*1\r\n$-1\r\n",
		"*-1\r\n*0\r\n\r\n",
		"*1\r\n$01\r\na\r\n",
		"*1\r\n$99999999999999999999\r\n",
		"ECHO \"a\\x41\\n\" 'b\\'c'\r\n",
		"ECHO \"unbalanced\r\n",
		"$5 x\r\n",
		"*1\r\n+PING\r\n",
	}
	for i, s := range seeds {
		f.Add([]byte(s), uint16(i*7+1), uint16(i*3+2), uint8(i))
	}
	f.Fuzz(func(t *testing.T, in []byte, cut1, cut2 uint16, flags uint8) {
		lim := Limits{MaxArgs: 64, MaxBulkLen: 4096, Unauthenticated: flags&1 != 0}
		if flags&2 != 0 {
			lim.MaxQueryBuffer = 512
		}
		stateless := feedStateless(in, lim)
		whole := feed(in, lim, []int{len(in)})
		if lim.MaxQueryBuffer == 0 && stateless != whole {
			t.Fatalf("stateless:\n%s\nwith Pending:\n%s", stateless, whole)
		}
		cuts := []int{int(cut1) % (len(in) + 1), int(cut2) % (len(in) + 1), len(in)}
		if cuts[1] < cuts[0] {
			cuts[0], cuts[1] = cuts[1], cuts[0]
		}
		if got := feed(in, lim, cuts); got != whole && lim.MaxQueryBuffer == 0 {
			t.Fatalf("cut at %v:\n%s\nwhole:\n%s", cuts, got, whole)
		}
		var p Parser
		var pend Pending
		for b := in; len(b) > 0; {
			n, _, err := p.Next(b, &pend, lim)
			if err != nil {
				var perr *Error
				if !errors.As(err, &perr) {
					t.Fatalf("error %v is not a *Error", err)
				}
				line := perr.AppendReply(nil)
				if bytes.ContainsAny(line[:len(line)-2], "\r\n") {
					t.Fatalf("reply %q is not one line", line)
				}
				break
			}
			if n < 0 || n > len(b) {
				t.Fatalf("consumed %d of %d", n, len(b))
			}
			if n == 0 {
				break
			}
			b = b[n:]
		}
	})
}

// feedStateless reads in with no Pending, as if each read reparsed from
// the start of the frame; it must agree with feed.
func feedStateless(in []byte, lim Limits) string {
	var p Parser
	pend := Pending{}
	var out bytes.Buffer
	b := in
	for len(b) > 0 {
		n, args, err := p.Next(b, nil, lim)
		if err != nil {
			out.WriteString("error: " + err.Error() + "\n")
			return out.String()
		}
		if n == 0 {
			break
		}
		describe(&out, n, args)
		b = b[n:]
	}
	if len(b) > 0 {
		// The bound on what the frame needs comes from a parse with a Pending.
		_, _, _ = p.Next(b, &pend, lim)
		out.WriteString(incomplete(len(b), pend.Need()))
	}
	return out.String()
}
