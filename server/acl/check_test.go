package acl

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func args(s ...string) [][]byte {
	out := make([][]byte, len(s))
	for i, a := range s {
		out[i] = []byte(a)
	}
	return out
}

func TestGlob(t *testing.T) {
	tests := []struct {
		pat, s string
		want   bool
	}{
		{"*", "abc", true},
		{"*", "", false}, // Redis: an empty subject matches only an empty pattern
		{"", "", true},
		{"", "a", false},
		{"a*", "a", true},
		{"a*b", "a", false},
		{"a*b", "axxb", true},
		{"a*b", "axxbc", false},
		{"*b*", "abc", true},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"[abc]x", "bx", true},
		{"[abc]x", "dx", false},
		{"[^abc]x", "dx", true},
		{"[^abc]x", "ax", false},
		{"[a-c]", "b", true},
		{"[c-a]", "b", true}, // reversed range
		{"[a-c]", "d", false},
		{"[\\]]", "]", true},
		{"\\*", "*", true},
		{"\\*", "a", false},
		{"[abc", "b", true}, // an open class runs to the end
		{"[abc", "bc", false},
		{"user:*:limit", "user:42:limit", true},
		{"user:*:limit", "user:42:limits", false},
		{"**a", "xa", true},
		{"a\\", "a\\", true},
		{"*a*a*a*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
	}
	for _, tc := range tests {
		if got := matchGlob(tc.pat, []byte(tc.s)); got != tc.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", tc.pat, tc.s, got, tc.want)
		}
	}
}

func TestKeyAccess(t *testing.T) {
	a := newTestACL(t)
	if err := a.SetUser("k", "on", "%R~r:*", "%W~w:*", "~rw:*", "%R~both", "%W~both"); err != nil {
		t.Fatal(err)
	}
	u := a.User("k")
	tests := []struct {
		key    string
		access KeyAccess
		want   bool
	}{
		{"r:1", KeyRead, true},
		{"r:1", KeyWrite, false},
		{"r:1", KeyReadWrite, false},
		{"r:1", 0, true},
		{"w:1", KeyWrite, true},
		{"w:1", KeyRead, false},
		{"rw:1", KeyReadWrite, true},
		{"rw:1", KeyRead, true},
		{"both", KeyReadWrite, true}, // %R~both %W~both merge into ~both
		{"other", 0, false},
		{"other", KeyRead, false},
	}
	for _, tc := range tests {
		if got := u.CanAccessKey([]byte(tc.key), tc.access); got != tc.want {
			t.Errorf("CanAccessKey(%q, %d) = %v, want %v", tc.key, tc.access, got, tc.want)
		}
	}
	if err := a.SetUser("all", "allkeys"); err != nil {
		t.Fatal(err)
	}
	if !a.User("all").CanAccessKey(nil, KeyReadWrite) {
		t.Fatal("allkeys must grant the empty key")
	}
}

func TestCategoryExpansion(t *testing.T) {
	a := newTestACL(t)
	type cmd struct{ c, s int }
	all := []cmd{{cGet, -1}, {cSet, -1}, {cDel, -1}, {cFlushall, -1}, {cSelect, -1}, {cKeys, -1},
		{cPing, -1}, {cConfig, 0}, {cConfig, 1}, {cConfig, 2}, {cClient, 0}, {cClient, 1}, {cThrottle, -1}}
	tests := []struct {
		rules []string
		allow []cmd
	}{
		{[]string{"+@read"}, []cmd{{cGet, -1}, {cKeys, -1}}},
		{[]string{"+@admin"}, []cmd{{cConfig, 0}, {cConfig, 1}, {cConfig, 2}, {cClient, 1}}},
		{[]string{"+@all", "-@dangerous"}, []cmd{{cGet, -1}, {cSet, -1}, {cDel, -1}, {cSelect, -1}, {cPing, -1}, {cClient, 0}, {cThrottle, -1}}},
		{[]string{"+config"}, []cmd{{cConfig, 0}, {cConfig, 1}, {cConfig, 2}}},
		{[]string{"+config", "-config|set"}, []cmd{{cConfig, 0}, {cConfig, 2}}},
		{[]string{"+config|get"}, []cmd{{cConfig, 0}}},
		{[]string{"+@connection", "-client"}, []cmd{{cSelect, -1}, {cPing, -1}}},
		{[]string{"+@throttle"}, []cmd{{cThrottle, -1}}},
		{[]string{"+@write", "-@string"}, []cmd{{cDel, -1}, {cFlushall, -1}, {cThrottle, -1}}},
		{[]string{"+@all", "-@all", "+ping"}, []cmd{{cPing, -1}}},
	}
	for _, tc := range tests {
		if err := a.SetUser("c", append([]string{"reset", "on"}, tc.rules...)...); err != nil {
			t.Fatal(err)
		}
		u := a.User("c")
		for _, c := range all {
			want := slices.Contains(tc.allow, c)
			if got := u.CanRun(c.c, c.s); got != want {
				t.Errorf("%q: CanRun(%s) = %v, want %v", tc.rules, u.CommandName(c.c, c.s), got, want)
			}
		}
		// AUTH is a no-auth command: never denied by command rules.
		if !u.CanRun(cAuth, -1) {
			t.Errorf("%q: AUTH denied", tc.rules)
		}
	}
}

func TestCheck(t *testing.T) {
	a := newTestACL(t)
	if err := a.SetUser("alice", "on", ">p", "~app:*", "%R~shared:*", "+get", "+set", "+select|0",
		"(~tmp:* +del)"); err != nil {
		t.Fatal(err)
	}
	u := a.User("alice")
	rw := []KeyRef{{Pos: 1, Access: KeyReadWrite}}
	r := []KeyRef{{Pos: 1, Access: KeyRead}}
	tests := []struct {
		cmd, sub int
		args     [][]byte
		keys     []KeyRef
		want     Verdict
		reply    string
	}{
		{cGet, -1, args("get", "app:1"), r, Verdict{}, ""},
		{cGet, -1, args("get", "shared:1"), r, Verdict{}, ""},
		{cSet, -1, args("set", "shared:1", "v"), rw, Verdict{DeniedKey, 1}, NoPermKeyReply},
		{cGet, -1, args("get", "other"), r, Verdict{DeniedKey, 1}, NoPermKeyReply},
		{cFlushall, -1, args("flushall"), nil, Verdict{DeniedCommand, 0}, "NOPERM this user has no permissions to run the 'flushall' command"},
		{cConfig, 0, args("config", "get", "x"), nil, Verdict{DeniedCommand, 0}, "NOPERM this user has no permissions to run the 'config|get' command"},
		{cSelect, -1, args("select", "0"), nil, Verdict{}, ""},
		{cSelect, -1, args("SELECT", "1"), nil, Verdict{DeniedCommand, 0}, "NOPERM this user has no permissions to run the 'select' command"},
		// The selector allows DEL on tmp:* only.
		{cDel, -1, args("del", "tmp:1"), rw, Verdict{}, ""},
		{cDel, -1, args("del", "tmp:1", "app:1"), []KeyRef{{1, KeyReadWrite}, {2, KeyReadWrite}}, Verdict{DeniedKey, 2}, NoPermKeyReply},
		// Root allows GET on app:*, the selector does not allow GET: the key denial wins.
		{cGet, -1, args("get", "tmp:1"), r, Verdict{DeniedKey, 1}, NoPermKeyReply},
		{99, -1, args("nosuch"), nil, Verdict{DeniedCommand, 0}, "NOPERM this user has no permissions to run the '' command"},
		{cGet, -1, args("get"), []KeyRef{{Pos: 5, Access: KeyRead}}, Verdict{DeniedKey, 5}, NoPermKeyReply},
		{cAuth, -1, args("auth", "x"), nil, Verdict{}, ""},
	}
	for _, tc := range tests {
		got := u.Check(tc.cmd, tc.sub, tc.args, tc.keys)
		if got != tc.want {
			t.Errorf("Check(%q) = %+v, want %+v", tc.args, got, tc.want)
		}
		if r := u.DenyReply(tc.cmd, tc.sub, got); r != tc.reply {
			t.Errorf("DenyReply(%q) = %q, want %q", tc.args, r, tc.reply)
		}
	}
	if u.CanRun(cSelect, -1) {
		t.Error("CanRun ignores first-arg rules and must deny SELECT")
	}
}

func TestDryRun(t *testing.T) {
	a := newTestACL(t)
	if err := a.SetUser("bob", "on", "~k*", "+get"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		user string
		cmd  int
		args [][]byte
		want string
		err  string
	}{
		{"bob", cGet, args("get", "k1"), "", ""},
		{"bob", cGet, args("get", "x"), "This user has no permissions to access the 'x' key", ""},
		{"bob", cSet, args("set", "k1", "v"), "This user has no permissions to run the 'set' command", ""},
		{"nobody", cGet, args("get", "k"), "", "ERR User 'nobody' not found"},
	}
	for _, tc := range tests {
		got, err := a.DryRun(tc.user, tc.cmd, -1, tc.args, []KeyRef{{Pos: 1, Access: KeyRead}})
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("DryRun(%s, %q) = %q, %v; want %q, %q", tc.user, tc.args, got, err, tc.want, tc.err)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	a := newTestACL(t)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.SetUser("alice", "on", ">secret", ">other"))
	must(a.SetUser("off", "off", ">secret"))
	must(a.SetUser("np", "on", "nopass"))
	must(a.SetUser("hashed", "on", "#2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"))
	must(a.SetUser("empty", "on", ">"))
	tests := []struct {
		user, pass string
		ok         bool
	}{
		{"alice", "secret", true},
		{"alice", "other", true},
		{"alice", "secreT", false},
		{"alice", "Secret", false},
		{"alice", "secret ", false},
		{"alice", "secre", false},
		{"alice", "", false},
		{"off", "secret", false},
		{"np", "anything", true},
		{"np", "", true},
		{"hashed", "secret", true},
		{"hashed", "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b", false},
		{"empty", "", true},
		{"empty", "x", false},
		{"nobody", "secret", false},
		{"default", "whatever", true},
	}
	for _, tc := range tests {
		u, err := a.Authenticate([]byte(tc.user), []byte(tc.pass))
		if tc.ok != (err == nil) || (tc.ok && u.Name() != tc.user) {
			t.Errorf("Authenticate(%q, %q) = %v, %v", tc.user, tc.pass, u, err)
		}
		if !tc.ok && (!errors.Is(err, ErrWrongPass) || err.Error() != WrongPassReply) {
			t.Errorf("Authenticate(%q, %q) error %v, want %q", tc.user, tc.pass, err, WrongPassReply)
		}
	}
	must(a.SetUser("alice", "<secret"))
	if _, err := a.Authenticate([]byte("alice"), []byte("secret")); err == nil {
		t.Error("removed password still authenticates")
	}
	if ErrNoAuth.Error() != NoAuthReply || NoAuthReply != "NOAUTH Authentication required." {
		t.Error("NOAUTH wording")
	}
}

func TestGetUserInfo(t *testing.T) {
	a := newTestACL(t)
	if err := a.SetUser("i", "on", ">pass", "%R~a:*", "~b", "&ch", "+@read", "-keys", "(%W~w +set)"); err != nil {
		t.Fatal(err)
	}
	in := a.User("i").Info()
	want := UserInfo{
		Flags:        []string{"on", "sanitize-payload"},
		Passwords:    []string{"d74ff0ee8da3b9806b18c877dbf29bbde50b5bd8e4dad7a3a725000feb82e8f1"},
		SelectorInfo: SelectorInfo{Commands: "-@all +@read -keys", Keys: "%R~a:* ~b", Channels: "&ch"},
		Selectors:    []SelectorInfo{{Commands: "-@all +set", Keys: "%W~w", Channels: ""}},
	}
	if !slices.Equal(in.Flags, want.Flags) || !slices.Equal(in.Passwords, want.Passwords) ||
		in.SelectorInfo != want.SelectorInfo || !slices.Equal(in.Selectors, want.Selectors) {
		t.Fatalf("Info =\n%+v\nwant\n%+v", in, want)
	}
	d := a.User("default").Info()
	if !slices.Equal(d.Flags, []string{"on", "nopass", "sanitize-payload"}) || d.Keys != "~*" || d.Channels != "&*" ||
		d.Commands != "+@all" || len(d.Passwords) != 0 || len(d.Selectors) != 0 {
		t.Fatalf("default Info = %+v", d)
	}
}

func TestCat(t *testing.T) {
	a := newTestACL(t)
	cats := a.Categories()
	if len(cats) != len(standardCategories)+1 || cats[0] != "keyspace" || cats[len(cats)-1] != "throttle" {
		t.Fatalf("Categories = %q", cats)
	}
	got, err := a.CategoryCommands("ADMIN")
	if err != nil || !slices.Equal(got, []string{"config|get", "config|set", "config|resetstat", "client|list"}) {
		t.Fatalf("CAT admin = %q, %v", got, err)
	}
	if _, err := a.CategoryCommands("nosuch"); err == nil || err.Error() != "ERR Unknown category 'nosuch'" {
		t.Fatalf("CAT nosuch: %v", err)
	}
	for _, name := range []string{"get", "CONFIG|GET", "client|list"} {
		c, s, ok := a.Lookup(name)
		if !ok || a.User("default").CommandName(c, s) != asciiLower(name) {
			t.Errorf("Lookup(%q) = %d, %d, %v", name, c, s, ok)
		}
	}
	if _, _, ok := a.Lookup("config|nosuch"); ok {
		t.Error("Lookup of an unknown subcommand succeeded")
	}
}

func TestGenPass(t *testing.T) {
	for _, bits := range []int{1, 4, 5, 255, 256, 4096} {
		p, err := GenPass(bits)
		if err != nil || len(p) != (bits+3)/4 {
			t.Fatalf("GenPass(%d) = %q, %v", bits, p, err)
		}
		for _, c := range p {
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				t.Fatalf("GenPass(%d) = %q: not lower-case hex", bits, p)
			}
		}
	}
	a, _ := GenPass(256)
	b, _ := GenPass(256)
	if a == b {
		t.Fatal("two 256-bit passwords are equal")
	}
	for _, bits := range []int{0, -1, 4097} {
		if _, err := GenPass(bits); !errors.Is(err, ErrGenPassBits) {
			t.Errorf("GenPass(%d): %v", bits, err)
		}
	}
	if ErrGenPassBits.Error() != "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096" {
		t.Error(ErrGenPassBits.Error())
	}
}

// TestAllKeys: AllKeys is true exactly when the root selector grants every
// key for reading and writing.
func TestAllKeys(t *testing.T) {
	a := newTestACL(t)
	for _, tc := range []struct {
		rules []string
		want  bool
	}{
		{[]string{"on", "nopass", "allkeys", "+@all"}, true},
		{[]string{"on", "nopass", "~*", "+@all"}, true},
		{[]string{"on", "nopass", "~a:*", "+@all"}, false},
		{[]string{"on", "nopass", "resetkeys", "+@all", "(~* +@all)"}, false}, // only a selector has them
		{[]string{"on", "nopass", "%R~*", "+@all"}, false},
	} {
		if err := a.SetUser("u", append([]string{"reset"}, tc.rules...)...); err != nil {
			t.Fatalf("%q: %v", tc.rules, err)
		}
		u := a.User("u")
		if got := u.AllKeys(); got != tc.want {
			t.Errorf("%q: AllKeys = %v, want %v", tc.rules, got, tc.want)
		}
	}
}

// TestUnrestricted: Unrestricted is true exactly when the root selector has
// every command and every key, it follows every kind of change (SETUSER
// rules, reset, requirepass, ACL LOAD), and whenever it is true Check
// allows every command and subcommand of the table on any key.
func TestUnrestricted(t *testing.T) {
	a := newTestACL(t)
	if !a.User(DefaultUser).Unrestricted() {
		t.Fatal("the default user at start is not unrestricted")
	}
	for _, tc := range []struct {
		rules []string
		want  bool
	}{
		{[]string{"on", "nopass", "allkeys", "+@all"}, true},
		{[]string{"on", "nopass", "~*", "allcommands"}, true},
		{[]string{"off", "~*", "+@all"}, true}, // on/off is authentication, not permission
		{[]string{"on", "nopass", "~*", "+@all", "-get"}, false},
		{[]string{"on", "nopass", "~*", "+@all", "-get", "+get"}, false}, // a rule removed something: the full check decides
		{[]string{"on", "nopass", "~*", "+@all", "-get", "+@all"}, true},
		{[]string{"on", "nopass", "~*", "+@all", "-@dangerous"}, false},
		{[]string{"on", "nopass", "~*", "+@read"}, false},
		{[]string{"on", "nopass", "~a:*", "+@all"}, false},
		{[]string{"on", "nopass", "%R~*", "+@all"}, false},
		{[]string{"on", "nopass", "~*", "+@all", "resetkeys"}, false},
		{[]string{"on", "nopass", "+@all", "(~* +@all)"}, false}, // only a selector has them
		{[]string{"on", "nopass", "~*", "+@all", "reset"}, false},
	} {
		if err := a.SetUser("u", append([]string{"reset"}, tc.rules...)...); err != nil {
			t.Fatalf("%q: %v", tc.rules, err)
		}
		u := a.User("u")
		if got := u.Unrestricted(); got != tc.want {
			t.Errorf("%q: Unrestricted = %v, want %v", tc.rules, got, tc.want)
		}
		allowed := true
		for cmd, c := range testCommands {
			subs := []int{-1}
			for s := range c.Subcommands {
				subs = append(subs, s)
			}
			for _, sub := range subs {
				keys := []KeyRef{{Pos: 1, Access: KeyReadWrite}}
				if !u.Check(cmd, sub, args(c.Name, "some:key", "x"), keys).OK() {
					allowed = false
				}
			}
		}
		if u.Unrestricted() && !allowed {
			t.Errorf("%q: Unrestricted, but Check denies a command", tc.rules)
		}
		if tc.want != allowed && tc.want {
			t.Errorf("%q: Check allows everything = %v, want %v", tc.rules, allowed, tc.want)
		}
	}
	// requirepass keeps the permissions; a stale copy keeps its own flag.
	if err := a.SetUser(DefaultUser, "-get"); err != nil {
		t.Fatal(err)
	}
	if a.User(DefaultUser).Unrestricted() {
		t.Error("default user after -get: Unrestricted")
	}
	if err := a.SetUser(DefaultUser, "+@all"); err != nil {
		t.Fatal(err)
	}
	old := a.User(DefaultUser)
	a.SetRequirePass("secret")
	if u := a.User(DefaultUser); !u.Unrestricted() || !old.Stale() {
		t.Errorf("after requirepass: Unrestricted %v, old version stale %v; want true, true", u.Unrestricted(), old.Stale())
	}
	// ACL LOAD builds its users through the same rules.
	if err := a.Load(strings.NewReader("user default on nopass ~* &* +@all\nuser bob on nopass ~b:* +@all\n")); err != nil {
		t.Fatal(err)
	}
	if !a.User(DefaultUser).Unrestricted() || a.User("bob").Unrestricted() {
		t.Errorf("after LOAD: default %v, bob %v; want true, false", a.User(DefaultUser).Unrestricted(), a.User("bob").Unrestricted())
	}
}
