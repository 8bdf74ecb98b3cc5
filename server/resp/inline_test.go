package resp

import (
	"bytes"
	"testing"
)

// splitInlineRef is SplitInline as it was before plain words took a fast
// path: the byte-by-byte state machine of sdssplitargs, every argument
// copied into scratch. FuzzSplitInline holds SplitInline to it.
func splitInlineRef(line []byte, args [][]byte, scratch *[]byte) (_ [][]byte, ok bool) {
	if cap(*scratch) < len(line) {
		*scratch = make([]byte, 0, len(line))
	}
	space := func(c byte) bool {
		return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
	}
	out := (*scratch)[:0]
	p := 0
	for {
		for p < len(line) && space(line[p]) {
			p++
		}
		if p >= len(line) {
			return args, true
		}
		start := len(out)
		inq, insq, done := false, false, false
		for !done {
			switch {
			case inq:
				if p >= len(line) {
					return args[:0], false
				}
				c := line[p]
				switch {
				case c == '\\' && p+3 < len(line) && line[p+1] == 'x':
					hi, ok1 := hexVal(line[p+2])
					lo, ok2 := hexVal(line[p+3])
					if ok1 && ok2 {
						out = append(out, hi<<4|lo)
						p += 3
					} else {
						out = append(out, 'x')
						p++
					}
				case c == '\\' && p+1 < len(line):
					p++
					switch line[p] {
					case 'n':
						out = append(out, '\n')
					case 'r':
						out = append(out, '\r')
					case 't':
						out = append(out, '\t')
					case 'b':
						out = append(out, '\b')
					case 'a':
						out = append(out, '\a')
					default:
						out = append(out, line[p])
					}
				case c == '"':
					if p+1 < len(line) && !space(line[p+1]) {
						return args[:0], false
					}
					done = true
				default:
					out = append(out, c)
				}
			case insq:
				if p >= len(line) {
					return args[:0], false
				}
				c := line[p]
				switch {
				case c == '\\' && p+1 < len(line) && line[p+1] == '\'':
					p++
					out = append(out, '\'')
				case c == '\'':
					if p+1 < len(line) && !space(line[p+1]) {
						return args[:0], false
					}
					done = true
				default:
					out = append(out, c)
				}
			default:
				if p >= len(line) {
					done = true
					continue
				}
				switch c := line[p]; {
				case space(c):
					done = true
				case c == '"':
					inq = true
				case c == '\'':
					insq = true
				default:
					out = append(out, c)
				}
			}
			if p < len(line) {
				p++
			}
		}
		args = append(args, out[start:len(out):len(out)])
	}
}

// FuzzSplitInline: SplitInline splits every line as the reference state
// machine does (same arguments, same refusals), every argument is capped
// at its length, and isSpace agrees with the six spaces of sdssplitargs.
func FuzzSplitInline(f *testing.F) {
	for _, s := range []string{
		"PING", "  SET k v ", `a "b c" 'd' e`, `ab"c d"`, `x"\x41\n" 'it\'s'`, `"unbalanced`, `'a'b`,
		"a\tb\vc\fd\re\nf", `"\xZZ" \ "\\"`, "w\x00\xff\x7f'q'",
	} {
		f.Add([]byte(s))
	}
	for c := range 256 {
		want := c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
		if isSpace(byte(c)) != want {
			f.Fatalf("isSpace(%#x) = %v", c, !want)
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var s1, s2 []byte
		got, ok := SplitInline(line, nil, &s1)
		want, wok := splitInlineRef(line, nil, &s2)
		if ok != wok || len(got) != len(want) {
			t.Fatalf("SplitInline(%q) = %q, %v; reference %q, %v", line, got, ok, want, wok)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) || cap(got[i]) != len(got[i]) {
				t.Fatalf("SplitInline(%q) argument %d = %q (cap %d); reference %q", line, i, got[i], cap(got[i]), want[i])
			}
		}
	})
}
