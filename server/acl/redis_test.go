package acl

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/internal/testdeps"
)

// redisConn is a minimal RESP2 client for comparing replies with a real
// redis-server.
type redisConn struct {
	c    net.Conn
	r    *bufio.Reader
	sock string // the server's unix socket, for more connections (dial)
}

// redisErr is an error reply.
type redisErr string

func (c *redisConn) do(t *testing.T, args ...string) any {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.c, b.String()); err != nil {
		t.Fatal(err)
	}
	v, err := c.read()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (c *redisConn) read() (any, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch line[0] {
	case '+':
		return line[1:], nil
	case '-':
		return redisErr(line[1:]), nil
	case ':':
		return strconv.ParseInt(line[1:], 10, 64)
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			if out[i], err = c.read(); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("bad reply line %q", line)
}

// startRedis starts redis-server on a unix socket and returns a connection
// and its major*100+minor version. It waits for the server's "ready to
// accept connections" log line (7.0 and 7.2 word it differently), not for a
// fixed time.
func startRedis(t *testing.T) (*redisConn, int) {
	bin := testdeps.Require(t, "redis-server")[0]
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	cmd := exec.Command(bin, "--port", "0", "--unixsocket", sock, "--save", "", "--appendonly", "no",
		"--dir", dir, "--loglevel", "notice", "--logfile", "")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if strings.Contains(strings.ToLower(sc.Text()), "ready to accept connections") {
			ready = true
			break
		}
	}
	if !ready {
		t.Fatal("redis-server exited before it was ready")
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	c := (&redisConn{sock: sock}).dial(t)
	info, _ := c.do(t, "INFO", "server").(string)
	var major, minor int
	for _, l := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(l, "redis_version:"); ok {
			fmt.Sscanf(v, "%d.%d", &major, &minor)
		}
	}
	if major == 0 {
		t.Fatalf("no redis_version in INFO: %q", info)
	}
	return c, major*100 + minor
}

// dial opens another connection to c's server.
func (c *redisConn) dial(t *testing.T) *redisConn {
	t.Helper()
	nc, err := net.Dial("unix", c.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &redisConn{c: nc, r: bufio.NewReader(nc), sock: c.sock}
}

// TestAgainstRedis applies the rule vectors to a real redis-server and to
// this package and compares ACL LIST lines, SETUSER errors, ACL GETUSER
// replies, ACL DRYRUN messages, the authentication and NOPERM errors and
// the NOPERM of a queued command denied at EXEC. Where Redis 7.0 renders
// something as 7.2 does not (the order of command rules, marked "redis: 7.2"
// in rules.txt, and the default user's flags; see the package doc), a 7.0
// server is compared on the rest of the line and 7.2 or later on all of it.
func TestAgainstRedis(t *testing.T) {
	c, version := startRedis(t)
	t.Logf("redis-server version %d.%d", version/100, version%100)
	is72 := version >= 702
	a := newTestACL(t)
	compared, partial := 0, 0
	for _, v := range readRuleVectors(t) {
		rules := append([]string{"reset"}, v.rules...)
		reply := c.do(t, append([]string{"ACL", "SETUSER", "u"}, rules...)...)
		err := a.SetUser("u", rules...)
		if v.err != "" {
			re, ok := reply.(redisErr)
			if !ok || err == nil || string(re) != err.Error() {
				t.Errorf("rules.txt:%d %q: redis %v, ours %v", v.line, v.rules, reply, err)
			}
			continue
		}
		if reply != "OK" || err != nil {
			t.Errorf("rules.txt:%d %q: redis %v, ours %v", v.line, v.rules, reply, err)
			continue
		}
		got, want := a.User("u").Describe(), redisListLine(t, c, "u")
		var gotInfo, wantInfo any = infoAsReply(a.User("u").Info()), c.do(t, "ACL", "GETUSER", "u")
		if v.since == "7.2" && !is72 {
			got, want = withoutCommandRules(got), withoutCommandRules(want)
			gotInfo, wantInfo = withoutCommands(gotInfo), withoutCommands(wantInfo)
			partial++
		}
		if got != want {
			t.Errorf("rules.txt:%d %q:\n ours  %q\n redis %q", v.line, v.rules, got, want)
		}
		if got, want := fmt.Sprint(gotInfo), fmt.Sprint(wantInfo); got != want {
			t.Errorf("rules.txt:%d GETUSER:\n ours  %s\n redis %s", v.line, got, want)
		}
		compared++
	}
	t.Logf("%d vectors compared, %d of them without their command rules", compared, partial)
	if compared < 20 {
		t.Fatalf("only %d vectors compared", compared)
	}
	// Redis 7.0 leaves sanitize-payload out of the default user's line.
	got, want := a.User("default").Describe(), redisListLine(t, c, "default")
	if !is72 {
		got = strings.Replace(got, " sanitize-payload", "", 1)
	}
	if got != want {
		t.Errorf("default user: redis %q, ours %q", want, got)
	}
	if got := c.do(t, "AUTH", "nosuch", "pass"); got != redisErr(WrongPassReply) {
		t.Errorf("AUTH: redis %q, ours %q", got, WrongPassReply)
	}
	if got := c.do(t, "ACL", "CAT"); fmt.Sprint(got) != fmt.Sprint(stringsAsAny(standardCategories[:])) {
		t.Errorf("ACL CAT: redis %v", got)
	}
	// NOPERM and DRYRUN wording: Redis 7.0's. A 7.2 server's replies are
	// compared after rewording them as 7.0 (as70).
	bobRules := []string{"reset", "on", "nopass", "~k*", "+get", "+auth", "+set", "+multi", "+exec"}
	c.do(t, append([]string{"ACL", "SETUSER", "bob"}, bobRules...)...)
	if err := a.SetUser("bob", bobRules...); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cmd      []string
		id, sub  int
		keys     []KeyRef
		wantDeny bool
	}{
		{[]string{"get", "k1"}, cGet, -1, []KeyRef{{1, KeyRead}}, false},
		{[]string{"get", "x"}, cGet, -1, []KeyRef{{1, KeyRead}}, true},
		{[]string{"set", "x", "v"}, cSet, -1, []KeyRef{{1, KeyWrite}}, true},
		{[]string{"del", "k1"}, cDel, -1, []KeyRef{{1, KeyWrite}}, true},
		{[]string{"config", "get", "x"}, cConfig, 0, nil, true},
	} {
		want := as70(c.do(t, append([]string{"ACL", "DRYRUN", "bob"}, tc.cmd...)...))
		got, err := a.DryRun("bob", tc.id, tc.sub, args(tc.cmd...), tc.keys)
		if got == "" {
			got = "OK"
		}
		if err != nil || got != want || (got != "OK") != tc.wantDeny {
			t.Errorf("DRYRUN %q: ours %q %v, redis %q", tc.cmd, got, err, want)
		}
	}
	if got := c.do(t, "AUTH", "bob", "x"); got != "OK" {
		t.Fatal(got)
	}
	u := a.User("bob")
	for _, tc := range []struct {
		cmd     []string
		id, sub int
		keys    []KeyRef
	}{
		{[]string{"DEL", "k1"}, cDel, -1, []KeyRef{{1, KeyWrite}}},
		{[]string{"CONFIG", "GET", "x"}, cConfig, 0, nil},
		{[]string{"GET", "x"}, cGet, -1, []KeyRef{{1, KeyRead}}},
		{[]string{"SET", "x", "v"}, cSet, -1, []KeyRef{{1, KeyWrite}}},
	} {
		v := u.Check(tc.id, tc.sub, args(tc.cmd...), tc.keys)
		if got, want := as70(c.do(t, tc.cmd...)), redisErr(u.DenyReply(tc.id, tc.sub, v)); v.OK() || got != want {
			t.Errorf("NOPERM %q: redis %q, ours %q", tc.cmd, got, want)
		}
	}

	// Queued commands that their user may no longer run when EXEC runs them:
	// SET loses its command, GET k2 its key; GET k3 still runs.
	admin := c.dial(t)
	if got := c.do(t, "MULTI"); got != "OK" {
		t.Fatal(got)
	}
	for _, cmd := range [][]string{{"SET", "k1", "v"}, {"GET", "k2"}, {"GET", "k3"}} {
		if got := c.do(t, cmd...); got != "QUEUED" {
			t.Fatalf("%q in MULTI: %v", cmd, got)
		}
	}
	changed := []string{"resetkeys", "~k3", "-set"}
	if got := admin.do(t, append([]string{"ACL", "SETUSER", "bob"}, changed...)...); got != "OK" {
		t.Fatal(got)
	}
	if err := a.SetUser("bob", changed...); err != nil {
		t.Fatal(err)
	}
	u = a.User("bob")
	ours := []any{
		redisErr(ExecDenyReply(u.Check(cSet, -1, args("set", "k1", "v"), []KeyRef{{1, KeyWrite}}))),
		redisErr(ExecDenyReply(u.Check(cGet, -1, args("get", "k2"), []KeyRef{{1, KeyRead}}))),
		nil,
	}
	if ExecDenyReply(u.Check(cGet, -1, args("get", "k3"), []KeyRef{{1, KeyRead}})) != "" {
		t.Error("GET k3 denied after ~k3")
	}
	if got := c.do(t, "EXEC"); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", ours) {
		t.Errorf("EXEC after the user changed:\n redis %q\n ours  %q", got, ours)
	}
}

// as70 rewords a Redis 7.2 NOPERM error or ACL DRYRUN message as Redis 7.0
// words it (7.2 names the user, 7.0 says "this user"); other replies are
// returned as they are.
func as70(reply any) any {
	switch r := reply.(type) {
	case redisErr:
		if r == "NOPERM No permissions to access a key" {
			return redisErr(NoPermKeyReply)
		}
		if m := userNamedRE.FindStringSubmatch(string(r)); m != nil && strings.HasPrefix(string(r), "NOPERM ") {
			return redisErr("NOPERM this user" + m[1])
		}
	case string:
		if m := userNamedRE.FindStringSubmatch(r); m != nil {
			return "This user" + m[1]
		}
	}
	return reply
}

// userNamedRE matches 7.2's "User <name> has no permissions ..." and captures
// what follows the name.
var userNamedRE = regexp.MustCompile(`^(?:NOPERM )?User [^ ]+( has no permissions to .*)$`)

// withoutCommandRules removes the command rules ("+get", "-@all", ...) from
// an ACL LIST line, in its selectors too.
func withoutCommandRules(line string) string {
	return strings.ReplaceAll(commandRuleRE.ReplaceAllString(line, ""), " )", ")")
}

var commandRuleRE = regexp.MustCompile(` [+-][^ ()]*`)

// withoutCommands blanks the "commands" fields of an ACL GETUSER reply (in
// RESP2 form), its selectors' too.
func withoutCommands(v any) any {
	l, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]any, len(l))
	for i := range l {
		switch {
		case i > 0 && l[i-1] == "commands":
			out[i] = ""
		default:
			out[i] = withoutCommands(l[i])
		}
	}
	return out
}

// redisListLine returns the ACL LIST line of one user.
func redisListLine(t *testing.T, c *redisConn, name string) string {
	list, _ := c.do(t, "ACL", "LIST").([]any)
	for _, l := range list {
		if s, _ := l.(string); strings.HasPrefix(s, "user "+name+" ") {
			return s
		}
	}
	t.Fatalf("no ACL LIST line for %s: %v", name, list)
	return ""
}

// infoAsReply renders UserInfo as Redis's RESP2 ACL GETUSER reply.
func infoAsReply(in UserInfo) []any {
	sel := func(s SelectorInfo) []any {
		return []any{"commands", s.Commands, "keys", s.Keys, "channels", s.Channels}
	}
	out := []any{"flags", stringsAsAny(in.Flags), "passwords", stringsAsAny(in.Passwords)}
	out = append(out, sel(in.SelectorInfo)...)
	sels := make([]any, len(in.Selectors))
	for i, s := range in.Selectors {
		sels[i] = sel(s)
	}
	return append(out, "selectors", sels)
}

func stringsAsAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// TestAgainstRedisRandomRules applies deterministic pseudo-random rule
// sequences to redis-server and to this package and compares the outcome
// (the ACL LIST line or the error, and ACL DRYRUN of a few commands). The
// vocabulary avoids the documented differences. Only Redis 7.2 or later
// renders command rules as this package does: with 7.0 the ACL LIST line is
// compared without them, and ACL DRYRUN, which is compared in full (as 7.0
// words it), checks what they allow.
func TestAgainstRedisRandomRules(t *testing.T) {
	c, version := startRedis(t)
	is72 := version >= 702
	vocab := []string{"on", "off", "nopass", "resetpass", ">p1", ">p2", "<p1", "~a:*", "%R~b:*", "%W~b:*",
		"~c", "resetkeys", "allkeys", "&ch", "allchannels", "resetchannels", "+get", "-get", "+@read",
		"-@write", "+@all", "-@all", "+config", "-config|set", "+config|get", "+select|0", "+@dangerous",
		"-@string", "reset", "(~x +set)", "(%R~y -@all +@read)", "clearselectors", "skip-sanitize-payload",
		"sanitize-payload", "bogus", "+nosuch", "+client|list", "-client", "+@connection", "allcommands"}
	a := newTestACL(t)
	rng := rand.New(rand.NewPCG(1, 2))
	denied := 0
	for i := range 500 {
		rules := []string{"reset"}
		for range 1 + rng.IntN(8) {
			rules = append(rules, vocab[rng.IntN(len(vocab))])
		}
		reply := c.do(t, append([]string{"ACL", "SETUSER", "r"}, rules...)...)
		err := a.SetUser("r", rules...)
		if re, ok := reply.(redisErr); ok {
			if err == nil || err.Error() != string(re) {
				t.Fatalf("case %d %q: redis %q, ours %v", i, rules, re, err)
			}
		} else if err != nil {
			t.Fatalf("case %d %q: redis %v, ours %v", i, rules, reply, err)
		}
		got, want := a.User("r").Describe(), redisListLine(t, c, "r")
		if !is72 {
			got, want = withoutCommandRules(got), withoutCommandRules(want)
		}
		if got != want {
			t.Fatalf("case %d %q:\n ours  %q\n redis %q", i, rules, got, want)
		}
		for _, dr := range dryRuns {
			want := as70(c.do(t, append([]string{"ACL", "DRYRUN", "r"}, dr.args...)...))
			got, err := a.DryRun("r", dr.cmd, dr.sub, args(dr.args...), dr.keys)
			if got == "" {
				got = "OK"
			}
			if err != nil || got != want {
				t.Fatalf("case %d %q: DRYRUN %q: ours %q %v, redis %q", i, rules, dr.args, got, err, want)
			}
			if got != "OK" {
				denied++
			}
		}
	}
	if n := 500 * len(dryRuns); denied < n/10 || denied > n*9/10 {
		t.Fatalf("%d of %d DRYRUNs denied: the vocabulary no longer tells allowed from denied", denied, n)
	}
}

// dryRuns are commands checked with ACL DRYRUN after each random rule set,
// with the key access Redis's key specs give them.
var dryRuns = []struct {
	args     []string
	cmd, sub int
	keys     []KeyRef
}{
	{[]string{"get", "a:1"}, cGet, -1, []KeyRef{{1, KeyRead}}},
	{[]string{"get", "b:1"}, cGet, -1, []KeyRef{{1, KeyRead}}},
	{[]string{"get", "y"}, cGet, -1, []KeyRef{{1, KeyRead}}},
	{[]string{"set", "b:1", "v"}, cSet, -1, []KeyRef{{1, KeyWrite}}},
	{[]string{"set", "x", "v"}, cSet, -1, []KeyRef{{1, KeyWrite}}},
	{[]string{"set", "c", "v"}, cSet, -1, []KeyRef{{1, KeyWrite}}},
	{[]string{"config", "get", "maxmemory"}, cConfig, 0, nil},
	{[]string{"config", "set", "maxmemory", "0"}, cConfig, 1, nil},
	{[]string{"select", "0"}, cSelect, -1, nil},
	{[]string{"select", "1"}, cSelect, -1, nil},
	{[]string{"client", "list"}, cClient, 1, nil},
	{[]string{"ping"}, cPing, -1, nil},
}

// TestAs70 checks the rewording of Redis 7.2's replies that the comparisons
// with a 7.2 server rely on (the installed server may be 7.0, which needs none).
func TestAs70(t *testing.T) {
	for _, tc := range []struct{ in, want any }{
		{redisErr("NOPERM User bob has no permissions to run the 'config|get' command"), redisErr("NOPERM this user has no permissions to run the 'config|get' command")},
		{redisErr("NOPERM No permissions to access a key"), redisErr(NoPermKeyReply)},
		{"User bob has no permissions to access the 'x' key", "This user has no permissions to access the 'x' key"},
		{"User bob has no permissions to run the 'set' command", "This user has no permissions to run the 'set' command"},
		{"OK", "OK"},
		{redisErr("NOPERM this user has no permissions to run the 'set' command"), redisErr("NOPERM this user has no permissions to run the 'set' command")},
		{redisErr("ERR User bob has no permissions to x"), redisErr("ERR User bob has no permissions to x")},
	} {
		if got := as70(tc.in); got != tc.want {
			t.Errorf("as70(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
