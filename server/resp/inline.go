package resp

// Inline commands: one line of space-separated words, as telnet users and
// redis-cli's inline mode send them, split the way redis-server splits them.

// inline reads one inline command line. Only the LF search resumes (the
// line is at most MaxInline bytes); the split runs once on the whole line.
func (p *Parser) inline(b []byte, st *Pending, lim Limits) (int, [][]byte, error) {
	args := p.args[:0]
	i := indexLF(b, st.scan)
	if i < 0 {
		return 0, args, st.awaitLF(b, MaxInline, ErrBigInline)
	}
	line := b[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	args, ok := SplitInline(line, args, &p.scratch)
	if cap(args) > cap(p.args) {
		p.args = args[:0]
	}
	if !ok {
		return 0, args[:0], &Error{Code: ErrUnbalanced}
	}
	if len(args) > lim.MaxArgs {
		return 0, args[:0], &Error{Code: ErrTooManyInlineArgs}
	}
	return i + 1, args, nil
}

// isSpace reports whether c is ' ', '\t', '\n', '\v', '\f' or '\r' (9 to
// 13): one comparison for the bytes above ' ', most of a line.
func isSpace(c byte) bool {
	return c <= ' ' && (c == ' ' || c-'\t' <= '\r'-'\t')
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// SplitInline splits an inline command line (without its line ending) into
// arguments the way redis-server does (sdssplitargs) and appends them to
// args: whitespace separates arguments; "double quotes" take the escapes
// \n \r \t \b \a \xHH and \<any>; 'single quotes' take \'; a closing quote
// must be followed by whitespace or the end of the line. ok is false for
// unbalanced quotes. A word without quotes (most words: "PING", "key") is
// its bytes as they are, and its argument aliases line; the bytes of any
// other go to *scratch, grown once to the line's length so that every
// argument stays valid until the next call. Each argument is capped at its
// length.
func SplitInline(line []byte, args [][]byte, scratch *[]byte) (_ [][]byte, ok bool) {
	if cap(*scratch) < len(line) {
		*scratch = make([]byte, 0, len(line))
	}
	out := (*scratch)[:0]
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p >= len(line) {
			return args, true
		}
		// A plain word ends at whitespace or the line's end with no quote
		// in it: nothing to unescape, so the argument is the word itself.
		q := p
		for q < len(line) && !isSpace(line[q]) && line[q] != '"' && line[q] != '\'' {
			q++
		}
		if q == len(line) || isSpace(line[q]) {
			args = append(args, line[p:q:q])
			p = q
			continue
		}
		start := len(out)
		inq, insq := false, false
		done := false
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
					if p+1 < len(line) && !isSpace(line[p+1]) {
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
					if p+1 < len(line) && !isSpace(line[p+1]) {
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
				case isSpace(c):
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
