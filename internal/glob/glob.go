// Package glob matches keys and names against Redis's glob patterns, with
// the semantics of Redis's stringmatchlen, so that KEYS, SCAN MATCH, CONFIG
// GET, COMMAND LIST FILTERBY PATTERN and ACL key patterns select exactly what
// they select in Redis.
//
// Cost: O(len(pattern) x len(subject)) time at worst, no allocation, no
// recursion (one backtracking point for the last '*'), so a hostile pattern
// cannot blow the stack or take more than quadratic time.
package glob

// Match reports whether s matches the glob pattern p with the semantics
// of Redis's stringmatchlen (case-sensitive): '*' matches any run of bytes,
// '?' one byte, '[abc]', '[^abc]' and '[a-z]' one byte of a class (a class
// left open runs to the end of the pattern; ranges compare bytes as signed
// chars, as C does), and '\x' the byte x literally.
//
// One quirk is kept on purpose: an empty subject matches only the empty
// pattern (so "*" does not match ""), exactly as in Redis.
//
// The match is iterative with a single backtracking point for the last '*'
// seen, so it runs in O(len(p)*len(s)) time at worst, allocates nothing and
// cannot recurse deeply on hostile patterns.
func Match(p string, s []byte) bool {
	if len(s) == 0 {
		return len(p) == 0
	}
	pi, si := 0, 0
	starP, starS := -1, 0
	for si < len(s) {
		if pi < len(p) {
			if p[pi] == '*' {
				for pi < len(p) && p[pi] == '*' {
					pi++
				}
				if pi == len(p) {
					return true
				}
				starP, starS = pi, si
				continue
			}
			if next, ok := matchOne(p, pi, s[si]); ok {
				pi = next
				si++
				continue
			}
		}
		if starP < 0 {
			return false
		}
		starS++
		pi, si = starP, starS
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchOne matches the single-byte token of p starting at pi against c and
// returns the index just after the token. p[pi] is not '*'.
func matchOne(p string, pi int, c byte) (int, bool) {
	switch p[pi] {
	case '?':
		return pi + 1, true
	case '[':
		return matchClass(p, pi+1, c)
	case '\\':
		if pi+1 < len(p) {
			pi++
		}
	}
	return pi + 1, p[pi] == c
}

// matchClass matches c against the class body starting at p[i] (just after
// '[') and returns the index after the closing ']' (or len(p) when the class
// is left open).
func matchClass(p string, i int, c byte) (int, bool) {
	not := i < len(p) && p[i] == '^'
	if not {
		i++
	}
	match := false
	for i < len(p) {
		switch {
		case p[i] == '\\' && len(p)-i >= 2:
			i++
			if p[i] == c {
				match = true
			}
		case p[i] == ']':
			return i + 1, match != not
		case len(p)-i >= 3 && p[i+1] == '-':
			lo, hi := int(int8(p[i])), int(int8(p[i+2]))
			if lo > hi {
				lo, hi = hi, lo
			}
			if v := int(int8(c)); v >= lo && v <= hi {
				match = true
			}
			i += 2
		default:
			if p[i] == c {
				match = true
			}
		}
		i++
	}
	return len(p), match != not
}
