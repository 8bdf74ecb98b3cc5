package acl

import (
	"strings"
	"testing"
)

// FuzzSetUser applies arbitrary rules (split on spaces) to a user. SetUser
// must never panic; when it succeeds, the ACL LIST rules must load back into
// a fresh user with the same rendering and the same permissions, and a
// failure must leave the user unchanged.
func FuzzSetUser(f *testing.F) {
	for _, v := range readRuleVectors(f) {
		f.Add(strings.Join(v.rules, " "))
	}
	for _, s := range []string{"(~a ~b))", "%", "%R", "~* ~x", "+select|a|b", "(+get) (~x", "&* allchannels", "(() ~)", "+@READ -@read"} {
		f.Add(s)
	}
	a, err := New(testCommands)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if err := a.SetUser("f", "reset"); err != nil {
			t.Fatal(err)
		}
		before := a.User("f").Rules()
		if err := a.SetUser("f", strings.Split(in, " ")...); err != nil {
			if got := a.User("f").Rules(); got != before {
				t.Fatalf("failed SetUser changed the user: %q", got)
			}
			return
		}
		checkRoundTrip(t, a, "f")
		u := a.User("f")
		// Checks on arbitrary input never panic.
		for c := range testCommands {
			u.Check(c, -1, args("x", in), []KeyRef{{1, KeyRead}, {1, KeyWrite}})
			u.Check(c, 0, args("x", in, in), nil)
		}
		u.CanAccessKey([]byte(in), KeyReadWrite)
	})
}

// FuzzLoad feeds arbitrary ACL files to Load: no panic, and a file that
// loads saves to one that loads to the same users.
func FuzzLoad(f *testing.F) {
	f.Add("user a on >p ~x +get\nuser default on nopass ~* +@all\n")
	f.Add("user a (~x +get\n")
	f.Add("user\n\nfoo")
	f.Fuzz(func(t *testing.T, in string) {
		a, err := New(testCommands)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Load(strings.NewReader(in)); err != nil {
			return
		}
		var b strings.Builder
		if err := a.Save(&b); err != nil {
			t.Fatal(err)
		}
		a2, _ := New(testCommands)
		if err := a2.Load(strings.NewReader(b.String())); err != nil {
			t.Fatalf("saved file does not load: %v\n%s", err, b.String())
		}
		if strings.Join(a2.List(), "\n") != strings.Join(a.List(), "\n") {
			t.Fatalf("Save/Load changed users:\n%s", b.String())
		}
	})
}

// FuzzGlob checks the matcher never panics and agrees with itself on the
// trivial identities of glob patterns.
func FuzzGlob(f *testing.F) {
	f.Add("a*b?[c-d]\\", "axbyc")
	f.Fuzz(func(t *testing.T, pat, s string) {
		matchGlob(pat, []byte(s))
		if s != "" && !matchGlob("*", []byte(s)) {
			t.Fatal("* must match any non-empty string")
		}
		if !strings.ContainsAny(s, "*?[\\") && s != "" && !matchGlob(s, []byte(s)) {
			t.Fatalf("literal %q must match itself", s)
		}
	})
}
