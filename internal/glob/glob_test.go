package glob

import (
	"slices"
	"testing"
)

func TestMatch(t *testing.T) {
	cases := []struct {
		pat, s string
		want   bool
	}{
		{"*", "abc", true},
		{"*", "", false}, // as Redis: an empty subject matches only an empty pattern
		{"", "", true},
		{"user:*", "user:42", true},
		{"user:*", "users:42", false},
		{"user:?", "user:4", true},
		{"user:?", "user:42", false},
		{"user:[12]", "user:1", true},
		{"user:[12]", "user:3", false},
		{"user:[^12]", "user:3", true},
		{"user:[a-c]x", "user:bx", true},
		{"user:[c-a]x", "user:bx", true}, // reversed range, as Redis
		{`a\*b`, "a*b", true},
		{`a\*b`, "axb", false},
		{"a[", "a", false},
		{"*b*c", "abxxc", true},
		{"*b*c", "abxxd", false},
		{"h*llo", "hello", true},
		{"h*llo", "heeeello", true},
	}
	for _, c := range cases {
		if got := Match(c.pat, []byte(c.s)); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pat, c.s, got, c.want)
		}
	}
}

// FuzzMatch checks Match against redisMatch, a line-by-line port of Redis
// 7.0's recursive stringmatchlen. Its seed corpus, testdata/fuzz/FuzzMatch,
// covers each feature of Redis's globs: '*' (runs, leading, trailing,
// backtracking), '?', classes with ranges (reversed, bytes above 0x7f
// compared as signed chars), negation, escapes inside and outside classes,
// unterminated classes and escapes, and the empty subject.
func FuzzMatch(f *testing.F) {
	f.Add("*a?[b-c]\\d", "xaybd")
	f.Add("[^", "a")
	f.Fuzz(func(t *testing.T, pat, s string) {
		if len(pat) > 64 || len(s) > 256 {
			return // redisMatch backtracks like Redis: keep its cost bounded
		}
		got, want := Match(pat, []byte(s)), redisMatch(pat, s)
		if got != want {
			t.Fatalf("Match(%q, %q) = %v, Redis's stringmatchlen says %v", pat, s, got, want)
		}
		if s != "" && !Match("*", []byte(s)) {
			t.Fatalf("* does not match %q", s)
		}
	})
}

// TestMatchExhaustive compares Match with redisMatch on every pattern of up
// to four tokens over a small alphabet of glob syntax against every subject
// of up to three bytes over the bytes those tokens name.
func TestMatchExhaustive(t *testing.T) {
	tokens := []string{"a", "b", "*", "?", "[", "]", "^", "-", "\\", "\\*", "[a-b]", "[^a]", "[b-a]", "[\\]]", "\xe9"}
	subjectBytes := []string{"a", "b", "*", "[", "]", "-", "\\", "\xe9", "c"}
	var patterns []string
	var build func(prefix string, n int)
	build = func(prefix string, n int) {
		patterns = append(patterns, prefix)
		if n == 0 {
			return
		}
		for _, tok := range tokens {
			build(prefix+tok, n-1)
		}
	}
	build("", 3)
	subjects := []string{""}
	for range 3 {
		for _, s := range subjects {
			for _, b := range subjectBytes {
				if len(s) < 3 {
					subjects = append(subjects, s+b)
				}
			}
		}
	}
	slices.Sort(subjects)
	subjects = slices.Compact(subjects)
	matched := 0
	for _, p := range patterns {
		for _, s := range subjects {
			got, want := Match(p, []byte(s)), redisMatch(p, s)
			if got != want {
				t.Fatalf("Match(%q, %q) = %v, Redis's stringmatchlen says %v", p, s, got, want)
			}
			if got {
				matched++
			}
		}
	}
	t.Logf("%d patterns x %d subjects, %d matches", len(patterns), len(subjects), matched)
	if matched == 0 || matched == len(patterns)*len(subjects) {
		t.Fatal("the cases do not tell matching from not matching")
	}
}

// redisMatch is Redis 7.0's stringmatchlen (util.c, case-sensitive), ported
// line by line, recursion and all, as the reference Match must agree with.
// C's reads of the NUL after the pattern are the bounds checks here.
func redisMatch(pattern, str string) bool {
	skip := false
	return redisMatchImpl(pattern, str, &skip)
}

func redisMatchImpl(p, s string, skipLongerMatches *bool) bool {
	at := func(i int) byte { // p[i], or the C string's terminating NUL
		if i < len(p) {
			return p[i]
		}
		return 0
	}
	for len(p) > 0 && len(s) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 0 && at(1) == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for len(s) > 0 {
				if redisMatchImpl(p[1:], s, skipLongerMatches) {
					return true
				}
				if *skipLongerMatches {
					return false
				}
				s = s[1:]
			}
			*skipLongerMatches = true
			return false
		case '?':
			s = s[1:]
		case '[':
			p = p[1:]
			not := at(0) == '^'
			if not {
				p = p[1:]
			}
			match := false
			for {
				if at(0) == '\\' && len(p) >= 2 {
					p = p[1:]
					if p[0] == s[0] {
						match = true
					}
				} else if at(0) == ']' {
					break
				} else if len(p) == 0 {
					p = "\x00" // C steps back onto the last byte; the step below consumes it
					break
				} else if len(p) >= 3 && p[1] == '-' {
					start, end, c := int(int8(p[0])), int(int8(p[2])), int(int8(s[0]))
					if start > end {
						start, end = end, start
					}
					p = p[2:]
					if c >= start && c <= end {
						match = true
					}
				} else if p[0] == s[0] {
					match = true
				}
				p = p[1:]
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
			s = s[1:]
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
		if len(s) == 0 {
			for len(p) > 0 && p[0] == '*' {
				p = p[1:]
			}
			break
		}
	}
	return len(p) == 0 && len(s) == 0
}

func BenchmarkMatch(b *testing.B) {
	key := []byte("tenant:a:user:123456")
	b.ReportAllocs()
	for b.Loop() {
		Match("tenant:a:*", key)
	}
}
