package upstream

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseURL: any string gives options or an error wrapping ErrURL, never
// a panic; a cluster URL gives one seed per comma-separated host.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"redis://h:1", "rediss://u:p@h:1/2", "redis-cluster://a:1,b:2", "rediss-cluster://u@a:1",
		"redis-cluster://", "redis-cluster://a:1,,", "::", "redis://[::1]:6379/0", "redis-cluster://[::1]:1,b:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, co, err := parseURL(s)
		switch {
		case err != nil:
			if !errors.Is(err, ErrURL) || o != nil || co != nil {
				t.Fatalf("%q: %v with options %v %v", s, err, o, co)
			}
		case co != nil:
			if o != nil || len(co.Addrs) == 0 {
				t.Fatalf("%q: cluster options %+v and %v", s, co, o)
			}
		case o == nil:
			t.Fatalf("%q: no options and no error", s)
		}
	})
}

// FuzzSlot: a slot is in range, and a key's slot is its hash tag's.
func FuzzSlot(f *testing.F) {
	for _, s := range []string{"", "a", "{a}", "{}", "a{b}c", "{{}}", "}{"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, k string) {
		s := Slot(k)
		if s < 0 || s >= NumSlots {
			t.Fatalf("Slot(%q) = %d", k, s)
		}
		if k != "" && !strings.ContainsAny(k, "{}") {
			if Slot("{"+k+"}"+k) != s || Slot("x{"+k+"}") != s {
				t.Fatalf("Slot of %q under a tag differs", k)
			}
		}
	})
}
