package resp

import (
	"bytes"
	"encoding/binary"

	"github.com/tidwall/redcon"
)

// Bounds applied whatever the Limits say, as redis-server applies them.
const (
	// MaxHeaderLine is the longest a multibulk count or bulk length line
	// may grow without its CRLF before it is a protocol error rather than
	// a reason to keep buffering.
	MaxHeaderLine = 64 * 1024
	// MaxInline is the longest an inline command may grow without its LF.
	MaxInline = 64 * 1024
	// MaxUnauthArgs is the most arguments a client that must still
	// authenticate may announce.
	MaxUnauthArgs = 10
	// MaxUnauthBulkLen is the longest bulk a client that must still
	// authenticate may announce.
	MaxUnauthBulkLen = 16 * 1024
)

// Defaults that replace zero fields of Limits.
const (
	DefaultMaxArgs     = 1024 * 1024
	DefaultMaxBulkLen  = 512 * 1024 * 1024
	maxBulkLenCeiling  = 1 << 50 // keeps offset arithmetic far from overflow
	maxKeptArgs        = 4096    // argument slices grown past this are dropped
	minBytesPerBulkArg = 6       // "$0\r\n\r\n"
)

// Limits bound what one command may announce. A zero MaxArgs or MaxBulkLen
// takes DefaultMaxArgs or DefaultMaxBulkLen; a zero MaxQueryBuffer means no
// bound beyond those.
type Limits struct {
	// MaxArgs bounds the arguments of one command.
	MaxArgs int
	// MaxBulkLen bounds the bytes of one bulk argument.
	MaxBulkLen int64
	// MaxQueryBuffer bounds the bytes one incomplete command may need:
	// a frame whose announced lengths already add up to more, or that has
	// buffered more without completing, is ErrQueryBuffer.
	MaxQueryBuffer int64
	// Unauthenticated applies MaxUnauthArgs and MaxUnauthBulkLen.
	Unauthenticated bool
}

func (lim Limits) norm() Limits {
	if lim.MaxArgs <= 0 {
		lim.MaxArgs = DefaultMaxArgs
	}
	if lim.MaxBulkLen <= 0 {
		lim.MaxBulkLen = DefaultMaxBulkLen
	}
	if lim.MaxBulkLen > maxBulkLenCeiling {
		lim.MaxBulkLen = maxBulkLenCeiling
	}
	return lim
}

// Frame kinds of a Pending.
const (
	stateNone   uint8 = iota
	stateInline       // an inline line whose LF has not arrived
	stateCount        // a multibulk whose count line has not arrived
	stateBulks        // a multibulk whose count is known
)

// Pending is how far the parser got into a command that has not fully
// arrived. A connection keeps one (it is a few words, no pointers) and
// hands it to every Parser.Next call; the next call resumes where the last
// one stopped instead of rescanning the frame from its start, so a frame
// that arrives in k pieces costs O(frame + k), not O(frame * k).
//
// All offsets count from the first byte of the pending frame: the caller
// must pass the frame again from that byte, followed by what has arrived
// since. The zero value is a connection between commands.
type Pending struct {
	state    uint8
	haveSize bool  // size holds the length of the bulk that starts at pos
	argc     int   // announced arguments
	seen     int   // arguments validated
	pos      int   // offset of the next header, or of the data of bulk size
	size     int64 // length of the bulk whose header ended at pos
	scan     int   // bytes of the current line already searched for LF
	need     int64 // the frame is at least this long
	wait     int64 // nothing can be decided before the buffer holds this many bytes
}

// Active reports whether a frame has begun but not completed.
func (p *Pending) Active() bool { return p.state != stateNone }

// Need returns a lower bound on the length of the pending frame, counted
// from its first byte, as its headers announce it: a size hint for the
// buffer that collects it. It is 0 when no frame is pending.
func (p *Pending) Need() int64 { return p.need }

// Wait returns how many bytes, counted from the frame's first byte, the
// caller must hold before calling Next again can change anything: one more
// than it held while a header line is incomplete, the end of the bulk being
// read otherwise. A malformed header is reported as soon as its line is
// complete, so Wait is never beyond what an error needs. It is 0 when no
// frame is pending.
func (p *Pending) Wait() int64 { return p.wait }

// Reset forgets the pending frame.
func (p *Pending) Reset() { *p = Pending{} }

// awaitLF records that b, the pending frame so far, holds no LF yet: the
// search resumes at its end once one more byte has arrived. Past max bytes
// the line is a protocol error with code.
func (p *Pending) awaitLF(b []byte, max int, code ErrorCode) error {
	if len(b) > max {
		return &Error{Code: code}
	}
	p.scan = len(b)
	p.need = int64(len(b)) + 1
	p.wait = p.need
	return nil
}

// Parser splits bytes into commands. It owns the slice of arguments it
// returns and the scratch space of unescaped inline arguments, reused by
// every call; one Parser may serve many connections (each with its own
// Pending) as long as one goroutine uses it. The zero value is ready.
type Parser struct {
	args    [][]byte
	scratch []byte
}

// Next reads the command at the start of b.
//
// It returns the number of bytes the command took (0: b holds only part of
// one; call again with b extended by what arrives next), its arguments and a
// protocol error. A blank inline line or a multibulk with a count of zero or
// less is a command of no arguments: skip it. The arguments alias b or the
// Parser's scratch and are valid until the next call or until b changes.
//
// pend carries progress through an incomplete frame between calls; nil
// parses b from scratch. After a complete command or an error pend is
// reset. If b is shorter than what pend says was already seen, pend is
// treated as stale and the frame is parsed again from its start.
//
// Multibulk headers are checked before any length is trusted: counts
// against MaxArgs, lengths against MaxBulkLen, no sign or leading zero on a
// bulk length, CRLF after each header and each bulk; violations are the
// Error codes, worded as redis-server words them. Steady state, Next does
// not allocate.
func (p *Parser) Next(b []byte, pend *Pending, lim Limits) (n int, args [][]byte, err error) {
	if cap(p.args) > maxKeptArgs {
		p.args = nil
	}
	if len(b) == 0 {
		return 0, p.args[:0], nil
	}
	lim = lim.norm()
	if b[0] == '*' && (pend == nil || pend.state == stateNone) {
		// The common case first: a whole frame, no state to set up.
		var end int
		if end, p.args = wholeFrame(b, lim, p.args); end > 0 {
			return end, p.args, nil
		}
	}
	var local Pending
	if pend == nil {
		pend = &local
	}
	if pend.state != stateNone && (len(b) < pend.pos || len(b) < pend.scan) {
		pend.Reset()
	}
	if pend.state == stateNone {
		if b[0] == '*' {
			pend.state = stateCount
			pend.scan = 1
		} else {
			pend.state = stateInline
		}
	}
	if pend.state == stateInline {
		n, args, err = p.inline(b, pend, lim)
	} else {
		n, args, err = p.multibulk(b, pend, lim)
	}
	if err != nil || n > 0 {
		pend.Reset()
		if args == nil {
			args = p.args[:0]
		}
		return n, args, err
	}
	if lim.MaxQueryBuffer > 0 && (pend.need > lim.MaxQueryBuffer || int64(len(b)) > lim.MaxQueryBuffer) {
		pend.Reset()
		return 0, p.args[:0], &Error{Code: ErrQueryBuffer}
	}
	return 0, p.args[:0], nil
}

// multibulk validates "*<count>\r\n" followed by count
// "$<len>\r\n<data>\r\n", resuming where an earlier call stopped; once the
// whole frame is here and every header in it has passed, redcon slices it
// into arguments (frame).
func (p *Parser) multibulk(b []byte, st *Pending, lim Limits) (int, [][]byte, error) {
	if st.state == stateCount {
		i, c, ok := shortBulkHeader(b, 0)
		if !ok {
			i = indexLF(b, st.scan)
		}
		if i < 0 {
			return 0, nil, st.awaitLF(b, MaxHeaderLine, ErrBigMultibulk)
		}
		if !ok {
			if b[i-1] != '\r' {
				return 0, nil, &Error{Code: ErrMultibulkLen}
			}
			c, ok = parseLen(b[1 : i-1])
		}
		if !ok || c > int64(lim.MaxArgs) {
			return 0, nil, &Error{Code: ErrMultibulkLen}
		}
		if lim.Unauthenticated && c > MaxUnauthArgs {
			return 0, nil, &Error{Code: ErrUnauthMultibulk}
		}
		if c <= 0 {
			return i + 1, p.args[:0], nil
		}
		st.state = stateBulks
		st.argc = int(c)
		st.pos = i + 1
		st.scan = st.pos
		st.need = int64(st.pos) + int64(st.argc)*minBytesPerBulkArg
	}
	for st.seen < st.argc {
		if !st.haveSize {
			pos := st.pos
			if pos >= len(b) {
				st.wait = int64(len(b)) + 1
				return 0, nil, nil
			}
			if b[pos] != '$' {
				return 0, nil, &Error{Code: ErrExpectedDollar, Byte: b[pos]}
			}
			i, size, ok := shortBulkHeader(b, pos)
			if !ok {
				i = indexLF(b, max(st.scan, pos+1))
			}
			if i < 0 {
				if len(b)-pos > MaxHeaderLine {
					return 0, nil, &Error{Code: ErrBigBulkCount}
				}
				st.scan = len(b)
				st.wait = int64(len(b)) + 1
				return 0, nil, nil
			}
			if !ok {
				if b[i-1] != '\r' {
					return 0, nil, &Error{Code: ErrBulkLen}
				}
				size, ok = parseLen(b[pos+1 : i-1])
			}
			if !ok || size < 0 || size > lim.MaxBulkLen {
				return 0, nil, &Error{Code: ErrBulkLen}
			}
			if lim.Unauthenticated && size > MaxUnauthBulkLen {
				return 0, nil, &Error{Code: ErrUnauthBulk}
			}
			st.pos = i + 1
			st.size = size
			st.haveSize = true
			st.need = int64(st.pos) + size + 2 + int64(st.argc-st.seen-1)*minBytesPerBulkArg
		}
		if int64(len(b)-st.pos) < st.size+2 {
			st.wait = int64(st.pos) + st.size + 2
			return 0, nil, nil
		}
		end := st.pos + int(st.size)
		if b[end] != '\r' || b[end+1] != '\n' {
			return 0, nil, &Error{Code: ErrBulkLen}
		}
		st.pos = end + 2
		st.scan = st.pos
		st.seen++
		st.haveSize = false
	}
	args, ok := p.frame(b[:st.pos], st.argc)
	if !ok {
		return 0, nil, &Error{Code: ErrMultibulkLen}
	}
	return st.pos, args, nil
}

// frame slices a complete multibulk frame of argc arguments, every header
// of which multibulk has validated, with redcon.ReadNextCommand. Validation
// is what makes that safe: redcon 1.6.4 bounds no length (a bulk length
// near 1<<63 overflows its arithmetic) and indexes before the data on a
// negative bulk length ("*1\r\n$-99\r\n" panics), and it accepts "+5"
// and "05" where redis-server does not. On a validated frame it agrees
// with our reading byte for byte (FuzzRedconAgrees); ok is false only if
// it did not, which FuzzRedconAgrees says cannot happen.
//
// The Parser's argument slice is sized to argc before the call, so redcon
// appends into it without allocating. redcon slices arguments without a
// capacity bound; each is capped at its length here, so that an append to
// one cannot overwrite the bytes after it.
func (p *Parser) frame(frame []byte, argc int) ([][]byte, bool) {
	if cap(p.args) < argc {
		p.args = make([][]byte, 0, argc)
	}
	complete, args, _, rest, err := redcon.ReadNextCommand(frame, p.args)
	if !complete || err != nil || len(rest) != 0 || len(args) != argc {
		return nil, false
	}
	for i, a := range args {
		args[i] = a[:len(a):len(a)]
	}
	return args, true
}

// wholeFrame is the fast path of multibulk: it validates a multibulk frame
// ("*" first) that is whole at the start of b and whose headers are all
// plain (see shortBulkHeader) and within lim, and slices its arguments
// into args[:0], in one pass with no state. It returns the frame's length
// and the arguments, each capped at its length, or 0 for anything else (a
// frame still arriving, a count of zero or less, a header to reject or to
// read the long way), which multibulk then reads from the start, reporting
// what redis-server reports: it accepts a subset of what multibulk
// accepts, and slices what it accepts as redcon does (FuzzRedconAgrees).
// args grows only for a count the bytes at hand could hold. The bulk
// headers are read in the loop itself (the same rule as shortBulkHeader),
// and the count line likewise, rather than by a call per header: a count
// of one digit, and a length of one or two (an argument below 100 bytes,
// which most are), from the header's first four bytes loaded as one
// word, longer ones one unsigned comparison per digit.
func wholeFrame(b []byte, lim Limits, args [][]byte) (end int, _ [][]byte) {
	args = args[:0]
	// The count "*<n>\r\n": 1 to 9 digits, the first not a zero (a count
	// of zero is left to multibulk), then CRLF.
	if len(b) < 4 || b[0] != '*' {
		return 0, args
	}
	h := binary.LittleEndian.Uint32(b[:4])
	c := uint64(byte(h>>8)) - '0'
	if c-1 > 8 {
		return 0, args
	}
	j := 2
	if h>>16 != crlf { // more than one digit
		for stop := min(len(b), 10); j < stop; j++ {
			d := uint64(b[j]) - '0'
			if d > 9 {
				break
			}
			c = c*10 + d
		}
		if j+1 >= len(b) || b[j] != '\r' || b[j+1] != '\n' {
			return 0, args
		}
	}
	maxArgs, maxLen := uint64(lim.MaxArgs), lim.MaxBulkLen
	if lim.Unauthenticated {
		maxArgs, maxLen = min(maxArgs, MaxUnauthArgs), min(maxLen, MaxUnauthBulkLen)
	}
	if c > maxArgs || c*minBytesPerBulkArg > uint64(len(b)) {
		return 0, args
	}
	if uint64(cap(args)) < c {
		args = make([][]byte, 0, c)
	}
	args = args[:c]
	pos := j + 2
	for k := range args {
		// The header "$<len>\r\n": 1 to 9 digits, no leading zero but
		// "0" itself, then CRLF. The shortest frame left, "$0\r\n\r\n",
		// needs pos+6 <= len(b), which also covers the first four bytes
		// read as one word and the one after them. One and two digits
		// (an argument below 100 bytes) are read from that word; longer
		// lengths digit by digit.
		if pos+minBytesPerBulkArg > len(b) {
			return 0, args[:0]
		}
		h := binary.LittleEndian.Uint32(b[pos : pos+4])
		size := uint64(byte(h>>8)) - '0'
		if byte(h) != '$' || size > 9 {
			return 0, args[:0]
		}
		var start int
		if d := uint64(byte(h>>16)) - '0'; h>>16 == crlf { // "$d\r\n"
			start = pos + 4
		} else if size != 0 && d <= 9 && byte(h>>24) == '\r' && b[pos+4] == '\n' { // "$dd\r\n"
			size, start = size*10+d, pos+5
		} else {
			j := pos + 2
			if size != 0 { // after a leading '0' the CR check below fails
				for stop := min(len(b), pos+10); j < stop; j++ {
					d := uint64(b[j]) - '0'
					if d > 9 {
						break
					}
					size = size*10 + d
				}
			}
			if j+2 > len(b) || binary.LittleEndian.Uint16(b[j:j+2]) != crlf {
				return 0, args[:0]
			}
			start = j + 2
		}
		// One length check for the data and its CRLF (start <= len(b)
		// and size <= maxLen <= 1<<50: the sum does not wrap), stated
		// on end, the offset of the data's CR.
		if size > uint64(maxLen) {
			return 0, args[:0]
		}
		end := start + int(size)
		if end+2 > len(b) || binary.LittleEndian.Uint16(b[end:end+2]) != crlf {
			return 0, args[:0]
		}
		args[k] = b[start:end:end]
		pos = end + 2
	}
	return pos, args
}

// shortBulkHeader reads the header "$<len>\r\n" (or "*<count>\r\n": the
// byte at pos is not looked at) at b[pos] when it is
// whole and plain: 1 to 9 digits without a leading zero (or "0"), then
// CRLF. It returns the index of the LF and the length. Any other header,
// or one not yet complete, reports false and is left to the general path,
// which reads these the same way; this one only skips the search for the
// line end, the main cost of parsing short arguments.
func shortBulkHeader(b []byte, pos int) (lf int, size int64, ok bool) {
	j := pos + 1
	end := min(len(b), j+10)
	for ; j < end && b[j] >= '0' && b[j] <= '9'; j++ {
		size = size*10 + int64(b[j]-'0')
	}
	n := j - pos - 1
	if n == 0 || n > 9 || (n > 1 && b[pos+1] == '0') || j+1 >= len(b) || b[j] != '\r' || b[j+1] != '\n' {
		return 0, 0, false
	}
	return j + 1, size, true
}

// indexLF returns the offset of the first '\n' in b at or after from, or -1.
func indexLF(b []byte, from int) int {
	if from >= len(b) {
		return -1
	}
	i := bytes.IndexByte(b[from:], '\n')
	if i < 0 {
		return -1
	}
	return from + i
}

// parseLen parses a header length as redis-server does (string2ll): an
// optional '-', then "0" or a digit 1-9 followed by digits, within int64.
// "-0", "+1", "01", spaces and empty input are rejected.
func parseLen(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	d := b
	if neg {
		d = b[1:]
	}
	if len(d) == 0 || (d[0] == '0' && (len(d) > 1 || neg)) {
		return 0, false
	}
	return ParseInt64(b)
}

// ParseInt64 parses a decimal integer with an optional '-' sign. It rejects
// empty input, '+', spaces and overflow, and accepts leading zeros. It
// never allocates.
func ParseInt64(b []byte) (int64, bool) {
	if n := len(b); n >= 4 && n <= 8 {
		// 4 to 8 bytes (a limit such as "1000000"), a word at a time: two
		// overlapping 32-bit loads give the bytes zero-padded to 8, xor
		// with '0' maps digits to 0-9, adding 0x76 to each byte sets the
		// high bit of every byte above 9 (a byte that carries into the
		// next is itself flagged, so the carry does not matter), and three
		// multiply-and-add steps fold digit pairs, then pairs of pairs,
		// then the two halves: the same work for any length, with no
		// branch per digit. Anything but digits (a sign included) takes
		// the general path below. The shifts are masked so the compiler
		// adds no code for a shift past the word (none is).
		w := uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<(8*(n-4)&63)
		d := w ^ 0x3030303030303030>>(8*(8-n)&63)
		if ((d+0x7676767676767676)|d)&0x8080808080808080 == 0 {
			d <<= 8 * (8 - n) & 63 // leading zeros: the first digit is the lowest byte
			d = (d*10 + d>>8) & 0x00ff00ff00ff00ff
			d = (d*100 + d>>16) & 0x0000ffff0000ffff
			return int64((d*10000 + d>>32) & 0xffffffff), true
		}
	}
	if len(b) > 0 && len(b) <= 18 && b[0] != '-' {
		// Up to 18 digits cannot overflow: one unsigned comparison a digit.
		var n uint64
		for _, c := range b {
			d := uint64(c) - '0'
			if d > 9 {
				return 0, false
			}
			n = n*10 + d
		}
		return int64(n), true
	}
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	neg := false
	if b[0] == '-' {
		neg = true
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if n > (1<<63-d)/10 { // n*10+d would exceed 1<<63
			return 0, false
		}
		n = n*10 + d
	}
	if neg {
		if n > 1<<63 {
			return 0, false
		}
		return -int64(n), true
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}
