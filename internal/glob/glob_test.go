package glob

import "testing"

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

func FuzzMatch(f *testing.F) {
	f.Add("*a?[b-c]\\d", "xaybd")
	f.Add("[^", "a")
	f.Fuzz(func(t *testing.T, pat, s string) {
		Match(pat, []byte(s))
		if s != "" && !Match("*", []byte(s)) {
			t.Fatalf("* does not match %q", s)
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	key := []byte("tenant:a:user:123456")
	b.ReportAllocs()
	for b.Loop() {
		Match("tenant:a:*", key)
	}
}
