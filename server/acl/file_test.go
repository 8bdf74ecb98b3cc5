package acl

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSaveLoadRoundTrip(t *testing.T) {
	a := newTestACL(t)
	for _, v := range readRuleVectors(t) {
		if v.err != "" {
			continue
		}
		name := "u" + strings.Repeat("x", v.line%7) + string(rune('a'+v.line%26))
		if err := a.SetUser(name, append([]string{"reset"}, v.rules...)...); err != nil {
			t.Fatal(err)
		}
	}
	a.SetRequirePass("secret")
	var buf bytes.Buffer
	if err := a.Save(&buf); err != nil {
		t.Fatal(err)
	}
	b := newTestACL(t)
	if err := b.Load(&buf); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(b.List(), "\n"), strings.Join(a.List(), "\n"); got != want {
		t.Fatalf("after Save/Load:\n%s\nwant\n%s", got, want)
	}
	for _, n := range a.Users() {
		sameUser(t, a.User(n), b.User(n))
	}
}

func TestLoadFileAndDefaultUser(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.acl")
	content := "user alice on #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~app:* +@read\r\n\n   \nuser bob off \n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	a := newTestACL(t)
	a.SetRequirePass("old")
	oldDefault := a.User("default")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := a.Load(f); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"user alice on sanitize-payload #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~app:* resetchannels -@all +@read",
		"user bob off sanitize-payload resetchannels -@all",
		// No default line: a fresh default user, as Redis (requirepass is lost).
		"user default on nopass sanitize-payload ~* &* +@all",
	}
	if got := strings.Join(a.List(), "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("List after Load:\n%s", got)
	}
	if !oldDefault.Stale() {
		t.Fatal("the previous default user must be stale after Load")
	}
	if _, err := a.Authenticate([]byte("alice"), []byte("secret")); err != nil {
		t.Fatal(err)
	}
}

func TestLoadBadFileIsAtomic(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"not user", "user a on\nfoo bar\n",
			"ERR users.acl:2 should start with user keyword followed by the username. "},
		{"user only", "user\n",
			"ERR users.acl:1 should start with user keyword followed by the username. "},
		{"comment", "# comment\n",
			"ERR users.acl:1 should start with user keyword followed by the username. "},
		{"duplicate", "user a on\nuser a off\n",
			"ERR WARNING: Duplicate user 'a' found on line 2. "},
		{"unknown command", "user a on +nosuch +get +other\n",
			"ERR users.acl:1: Error in applying operation '+nosuch': Unknown command or category name in ACL. " +
				"users.acl:1: Error in applying operation '+other': Unknown command or category name in ACL. "},
		{"syntax", "user a on\nuser b bogus ~x allkeys ~y\n",
			"ERR users.acl:2: Syntax error. "},
		{"paren", "user a on (~x +get\n",
			"ERR users.acl:1: Unmatched parenthesis in selector definition."},
		{"name", "user a\tb on\n",
			"ERR 'users.acl:1: username 'a\tb' contains invalid characters. "},
	}
	for _, tc := range tests {
		a := newTestACL(t)
		if err := a.SetUser("keep", "on", ">p", "+get"); err != nil {
			t.Fatal(err)
		}
		before := strings.Join(a.List(), "\n")
		keep := a.User("keep")
		err := a.Load(strings.NewReader(tc.file))
		want := tc.want + "WARNING: ACL errors detected, no change to the previously active ACL rules was performed"
		if !errors.Is(err, ErrLoad) || err.Error() != want {
			t.Errorf("%s: Load error\n%v\nwant\n%s", tc.name, err, want)
		}
		if got := strings.Join(a.List(), "\n"); got != before || keep.Stale() {
			t.Errorf("%s: a bad file changed the users:\n%s", tc.name, got)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestSaveError(t *testing.T) {
	if err := newTestACL(t).Save(failingWriter{}); err == nil {
		t.Fatal("Save ignored a write error")
	}
}
