package acl

import (
	"errors"
	"strings"
	"testing"
)

// TestRuleVectors applies every vector of testdata/rules.txt to a new user
// and checks the ACL LIST rendering or the error, that a failed SETUSER
// leaves the user unchanged, and that the rendering loads back to the same
// user (SetUser -> ACL LIST line -> SetUser).
func TestRuleVectors(t *testing.T) {
	for _, v := range readRuleVectors(t) {
		a := newTestACL(t)
		// A user that exists before the call, to check atomicity on errors.
		if err := a.SetUser("u", "on", ">before", "~before"); err != nil {
			t.Fatal(err)
		}
		before := a.User("u").Rules()
		err := a.SetUser("u", append([]string{"reset"}, v.rules...)...)
		if v.err != "" {
			if err == nil || err.Error() != v.err {
				t.Errorf("rules.txt:%d %q: error %v, want %q", v.line, v.rules, err, v.err)
			}
			if got := a.User("u").Rules(); got != before {
				t.Errorf("rules.txt:%d: failed SETUSER changed the user: %q -> %q", v.line, before, got)
			}
			continue
		}
		if err != nil {
			t.Errorf("rules.txt:%d %q: %v", v.line, v.rules, err)
			continue
		}
		got := a.User("u").Rules()
		if got != v.list {
			t.Errorf("rules.txt:%d %q:\n got %q\nwant %q", v.line, v.rules, got, v.list)
		}
		checkRoundTrip(t, a, "u")
	}
}

// checkRoundTrip feeds the ACL LIST rules of user name to a fresh user and
// checks the rendering and every permission bit are the same.
func checkRoundTrip(t *testing.T, a *ACL, name string) {
	t.Helper()
	u := a.User(name)
	line := u.Rules()
	if err := a.SetUser("rt", append([]string{"reset"}, strings.Split(line, " ")...)...); err != nil {
		t.Fatalf("round trip of %q: %v", line, err)
	}
	rt := a.User("rt")
	if got := rt.Rules(); got != line {
		t.Fatalf("round trip:\n got %q\nwant %q", got, line)
	}
	sameUser(t, u, rt)
}

// sameUser checks two users grant the same commands in every selector.
func sameUser(t *testing.T, u, v *User) {
	t.Helper()
	if len(u.sels) != len(v.sels) {
		t.Fatalf("selectors: %d vs %d", len(u.sels), len(v.sels))
	}
	for i := range u.sels {
		for id := range u.t.cmds {
			if a, b := u.sels[i].canRun(u.t, id, nil), v.sels[i].canRun(v.t, id, nil); a != b {
				t.Fatalf("selector %d command %s: %v vs %v", i, u.t.cmds[id].fullname, a, b)
			}
		}
	}
}

func TestDefaultUser(t *testing.T) {
	a := newTestACL(t)
	if got, want := a.List(), []string{"user default on nopass sanitize-payload ~* &* +@all"}; strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("List = %q, want %q", got, want)
	}
	u, authed := a.NewConnection()
	if u.Name() != "default" || !authed {
		t.Fatalf("NewConnection = %s, %v", u.Name(), authed)
	}
	a.SetRequirePass("secret")
	if got := a.User("default").Rules(); got != "on sanitize-payload #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~* &* +@all" {
		t.Fatalf("after requirepass: %q", got)
	}
	if _, authed := a.NewConnection(); authed {
		t.Fatal("requirepass: new connections must authenticate")
	}
	a.SetRequirePass("")
	if _, authed := a.NewConnection(); !authed {
		t.Fatal("requirepass '': default user should be nopass again")
	}
}

func TestSetUserErrors(t *testing.T) {
	a := newTestACL(t)
	tests := []struct {
		name  string
		rules []string
		want  error
		text  string
	}{
		{"bad name", []string{"on"}, ErrBadUsername, "ERR Usernames can't contain spaces or null characters"},
		{"u", []string{"bogus"}, ErrSyntax, ""},
		{"u", []string{"+nosuch"}, ErrUnknownName, ""},
		{"u", []string{"(~a", "+get"}, ErrUnmatchedParen, "ERR Unmatched parenthesis in acl selector starting at '(~a'."},
		{"u", []string{"%"}, ErrSyntax, ""},
		{"u", []string{"(~a ~b))"}, ErrSyntax, ""},
		{"u", []string{"+select|a b"}, ErrSyntax, ""},
	}
	for _, tc := range tests {
		err := a.SetUser(tc.name, tc.rules...)
		if !errors.Is(err, tc.want) {
			t.Errorf("SetUser(%q, %q) = %v, want %v", tc.name, tc.rules, err, tc.want)
		}
		if tc.text != "" && (err == nil || err.Error() != tc.text) {
			t.Errorf("SetUser(%q, %q) = %v, want %q", tc.name, tc.rules, err, tc.text)
		}
	}
	if len(a.Users()) != 1 {
		t.Fatalf("failed SETUSERs created users: %q", a.Users())
	}
}

func TestDelUser(t *testing.T) {
	a := newTestACL(t)
	for _, n := range []string{"b", "a", "c"} {
		if err := a.SetUser(n, "on"); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(a.Users(), ","); got != "a,b,c,default" {
		t.Fatalf("Users = %s", got)
	}
	if _, err := a.DelUser("a", "default"); !errors.Is(err, ErrDefaultUser) || err.Error() != "ERR The 'default' user cannot be removed" {
		t.Fatalf("DelUser default: %v", err)
	}
	old := a.User("a")
	n, err := a.DelUser("a", "nosuch", "b")
	if err != nil || n != 2 {
		t.Fatalf("DelUser = %d, %v", n, err)
	}
	if !old.Stale() {
		t.Fatal("deleted user not stale")
	}
	if _, ok := a.Refresh(old); ok {
		t.Fatal("Refresh of a deleted user succeeded")
	}
	if got := strings.Join(a.Users(), ","); got != "c,default" {
		t.Fatalf("Users = %s", got)
	}
}

func TestStaleAndRefresh(t *testing.T) {
	a := newTestACL(t)
	if err := a.SetUser("alice", "on", "+get"); err != nil {
		t.Fatal(err)
	}
	u := a.User("alice")
	g := a.Generation()
	if err := a.SetUser("alice", "+set"); err != nil {
		t.Fatal(err)
	}
	if !u.Stale() || a.Generation() == g {
		t.Fatal("replaced user not stale / generation not bumped")
	}
	if u.CanRun(cSet, -1) {
		t.Fatal("an old snapshot must not change")
	}
	nu, ok := a.Refresh(u)
	if !ok || !nu.CanRun(cSet, -1) || nu.Stale() {
		t.Fatal("Refresh did not return the new user")
	}
	// A failed SETUSER publishes nothing.
	g = a.Generation()
	_ = a.SetUser("alice", "bogus")
	if nu.Stale() || a.Generation() != g {
		t.Fatal("failed SETUSER published a change")
	}
}

func TestNewTableErrors(t *testing.T) {
	bad := [][]Command{
		{{Name: ""}},
		{{Name: "a|b"}},
		{{Name: "a b"}},
		{{Name: "get"}, {Name: "GET"}},
		{{Name: "c", Subcommands: []Command{{Name: "s", Subcommands: []Command{{Name: "x"}}}}}},
		{{Name: "c", Categories: []string{"all"}}},
	}
	for _, cmds := range bad {
		if _, err := New(cmds); !errors.Is(err, ErrTable) {
			t.Errorf("New(%+v) = %v, want ErrTable", cmds, err)
		}
	}
	many := make([]string, 50)
	for i := range many {
		many[i] = "cat" + strings.Repeat("x", i)
	}
	if _, err := New([]Command{{Name: "x", Categories: many}}); !errors.Is(err, ErrTable) {
		t.Errorf("71 categories: %v", err)
	}
}
