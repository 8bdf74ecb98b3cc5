package server

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/throttlekit/throttlekit-server/engine"
)

// The helpers below check one argument and, on bad input, append the error
// reply themselves, so a handler reads as a list of checks:
//
//	n, ok := l.intArg(args[2], "credits")
//	if !ok {
//		return false
//	}
//
// None of them allocates.

// keyArg reports whether key is within Config.MaxKeyLen; if not it replies
// "key is too long".
func (l *loop) keyArg(key []byte) bool {
	if len(key) > l.srv.cfg.MaxKeyLen {
		l.errorReply("ERR", "key is too long")
		return false
	}
	return true
}

// intArg parses a signed 64-bit integer argument; if it is not one it
// replies "<what> is not an integer or out of range".
func (l *loop) intArg(b []byte, what string) (int64, bool) {
	n, ok := parseInt64(b)
	if !ok {
		l.errorReply("ERR", what+" is not an integer or out of range")
	}
	return n, ok
}

// equalFold reports whether b equals the lower-case ASCII word s, ignoring case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// lowerASCII returns b as a lower-case string (it allocates; not for the hot path).
func lowerASCII(b []byte) string {
	out := make([]byte, len(b))
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return string(out)
}

// nameOK reports whether b has no spaces, control or non-ASCII bytes, as
// Redis requires of client names and library names.
func nameOK(b []byte) bool {
	for _, c := range b {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

// parseSimplePeriod is parsePeriod's fast path for the spellings clients
// send on every call: up to 18 digits with no sign, then "ms", "s", "m"
// or "h" in either case ("1s", "1000ms", "60M"). Anything else reports
// false and takes the general path, which accepts these too.
func parseSimplePeriod(b []byte) (int64, bool) {
	var n uint64
	i := 0
	for stop := min(len(b), 18); i < stop; i++ {
		d := uint64(b[i]) - '0'
		if d > 9 {
			break
		}
		n = n*10 + d
	}
	if i == 0 {
		return 0, false
	}
	// The unit, and the largest count of it an int64 of nanoseconds holds
	// (constants, so the range check is a comparison, not a division).
	var unit, most uint64
	switch len(b) - i {
	case 1:
		switch b[i] | 0x20 {
		case 's':
			unit, most = 1_000_000_000, math.MaxInt64/1_000_000_000
		case 'm':
			unit, most = 60*1_000_000_000, math.MaxInt64/(60*1_000_000_000)
		case 'h':
			unit, most = 3600*1_000_000_000, math.MaxInt64/(3600*1_000_000_000)
		default:
			return 0, false
		}
	case 2:
		if b[i]|0x20 != 'm' || b[i+1]|0x20 != 's' {
			return 0, false
		}
		unit, most = 1_000_000, math.MaxInt64/1_000_000
	default:
		return 0, false
	}
	if n > most {
		return 0, false
	}
	return int64(n * unit), true
}

// durationUnits are the units a period may carry, in nanoseconds. The
// config file's durations (Go's syntax) use the same units; "d" (a day) is
// added because day-long windows are common for quotas.
var durationUnits = [...]struct {
	name string
	ns   int64
}{
	{"ns", 1},
	{"us", 1_000},
	{"\u00b5s", 1_000}, // µs (micro sign), as Go's durations accept
	{"\u03bcs", 1_000}, // μs (Greek mu)
	{"ms", 1_000_000},
	{"s", 1_000_000_000},
	{"m", 60 * 1_000_000_000},
	{"h", 3600 * 1_000_000_000},
	{"d", 86400 * 1_000_000_000},
}

// parsePeriod parses a period into nanoseconds: a bare integer counts
// milliseconds ("1500"); otherwise it is a sequence of decimal numbers,
// each with a unit, as in the config file: "250ms", "1h30m", "1.5s", "1d".
// Units are ns, us (or µs), ms, s, m, h and d, in any case. A leading '+'
// is accepted and a leading '-' kept (the limit check then rejects the
// period). ok is false for anything else
// and for a value that does not fit an int64. It does not allocate.
func parsePeriod(b []byte) (int64, bool) {
	if ns, ok := parseSimplePeriod(b); ok {
		return ns, true
	}
	return parsePeriodAny(b)
}

// parsePeriodAny is parsePeriod without the fast path: every spelling.
func parsePeriodAny(b []byte) (int64, bool) {
	if n, ok := parseInt64(b); ok {
		if n > math.MaxInt64/1_000_000 || n < math.MinInt64/1_000_000 {
			return 0, false
		}
		return n * 1_000_000, true
	}
	neg := len(b) > 0 && b[0] == '-'
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var total uint64
	for len(b) > 0 {
		// The number: digits, optionally a fraction; at least one digit.
		var whole uint64
		i, digits := 0, 0
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if whole > (math.MaxInt64-9)/10 {
				return 0, false
			}
			whole = whole*10 + uint64(b[i]-'0')
			digits++
		}
		var frac, scale uint64 = 0, 1
		if i < len(b) && b[i] == '.' {
			for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
				digits++
				if scale < 1e18 { // further digits are below a nanosecond
					frac = frac*10 + uint64(b[i]-'0')
					scale *= 10
				}
			}
		}
		if digits == 0 {
			return 0, false
		}
		// The unit: the longest name that matches.
		j := i
		for j < len(b) && (b[j] < '0' || b[j] > '9') && b[j] != '.' {
			j++
		}
		unit := int64(0)
		for _, u := range durationUnits {
			if equalFold(b[i:j], u.name) {
				unit = u.ns
				break
			}
		}
		if unit == 0 {
			return 0, false
		}
		if whole > math.MaxInt64/uint64(unit) {
			return 0, false
		}
		v := whole * uint64(unit)
		if frac > 0 {
			// frac/scale of a unit, rounded down to the nanosecond.
			hi, lo := bits.Mul64(frac, uint64(unit))
			q, _ := bits.Div64(hi, lo, scale) // frac < scale: no overflow
			v += q
		}
		total += v
		if total > math.MaxInt64 {
			return 0, false
		}
		b = b[j:]
	}
	if neg {
		return -int64(total), true
	}
	return int64(total), true
}

// limitCacheArgs and limitCacheArgLen bound what an argCache keeps: up
// to 8 arguments ("limit period" and three options with their values) of
// up to 16 bytes each. Longer argument lists, or longer arguments, are
// parsed every time.
const (
	limitCacheArgs   = 8
	limitCacheArgLen = 16
)

// argCache is a loop's memory of the last arguments after the key that a
// rate-limit command parsed without error, and of the value V (the limit)
// and cost they produced: limitCache for the "limit period [options]" of
// THROTTLE.CHECK and PEEK (limitArgs), cellCache for the "max_burst
// count_per_period period [quantity]" of CL.THROTTLE (clThrottle). Most
// clients send the same arguments on every call, so a match skips the
// integer and period parsing and the engine's constructor, which are pure
// functions of those bytes: the result is the one parsing would give
// (TestLimitCacheMatchesParsing, TestCellCacheMatchesParsing). The match
// is exact, byte for byte and argument for argument (a different spelling
// of the same limit is a miss, and parsed again); an argument list that
// fails is never kept.
//
// It is owned by one loop, so it needs no lock, and it holds a copy of the
// bytes, since arguments alias an input buffer that changes after the
// command. Each argument is kept as its length and two words: its first 8
// bytes (zero-padded when shorter) and, past 8 bytes, its last 8. With the
// length equal, those words hold every byte, so comparing an argument is a
// length and one or two word comparisons, with no call. Keeping an entry
// allocates nothing.
type argCache[V any] struct {
	argc int // arguments kept; 0: empty
	lens [limitCacheArgs]uint8
	lo   [limitCacheArgs]uint64
	hi   [limitCacheArgs]uint64
	val  V
	cost int64
}

// limitCache is the argCache of THROTTLE.CHECK and PEEK.
type limitCache = argCache[engine.Limit]

// cellCache is the argCache of CL.THROTTLE.
type cellCache = argCache[engine.Cell]

// match reports whether args are exactly the arguments kept.
func (c *argCache[V]) match(args [][]byte) bool {
	if len(args) != c.argc {
		return false
	}
	for i, a := range args {
		i &= limitCacheArgs - 1 // i < c.argc <= limitCacheArgs; spares a bounds check
		n := len(a)
		if n != int(c.lens[i]) {
			return false
		}
		if n <= 8 {
			if firstWord(a) != c.lo[i] {
				return false
			}
			continue
		}
		// 8 < n <= limitCacheArgLen: the first and the last 8 bytes.
		if binary.LittleEndian.Uint64(a) != c.lo[i] || binary.LittleEndian.Uint64(a[n-8:]) != c.hi[i] {
			return false
		}
	}
	return true
}

// keep remembers args and what they parsed to, replacing the entry; an
// argument list the cache cannot hold empties it instead.
func (c *argCache[V]) keep(args [][]byte, val V, cost int64) {
	c.argc = 0
	if len(args) > limitCacheArgs {
		return
	}
	for i, a := range args {
		n := len(a)
		if n > limitCacheArgLen {
			return
		}
		c.lens[i], c.lo[i], c.hi[i] = uint8(n), firstWord(a[:min(n, 8)]), 0
		if n > 8 {
			c.hi[i] = binary.LittleEndian.Uint64(a[n-8:])
		}
	}
	c.argc, c.val, c.cost = len(args), val, cost
}

// firstWord returns the first 8 bytes of b as a little-endian word, zero
// past the end of a shorter b: two overlapping loads, which agree on the
// bytes they share, rather than a loop.
func firstWord(b []byte) uint64 {
	switch n := len(b); {
	case n >= 8:
		return binary.LittleEndian.Uint64(b)
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<(8*(n-4))
	case n > 0:
		return uint64(b[0]) | uint64(b[n/2])<<(8*(n/2)) | uint64(b[n-1])<<(8*(n-1))
	}
	return 0
}
