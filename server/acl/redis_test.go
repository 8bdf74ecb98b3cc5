package acl

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/internal/testdeps"
)

// redisConn is a minimal RESP2 client for comparing replies with a real
// redis-server.
type redisConn struct {
	c net.Conn
	r *bufio.Reader
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
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &redisConn{c: nc, r: bufio.NewReader(nc)}
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

// TestAgainstRedis applies the rule vectors to a real redis-server and to
// this package and compares ACL LIST lines, SETUSER errors, ACL GETUSER
// replies, ACL DRYRUN messages and the authentication and NOPERM errors.
// Renderings that Redis 7.0 computes differently from 7.2 are compared only
// with 7.2 or later.
func TestAgainstRedis(t *testing.T) {
	c, version := startRedis(t)
	t.Logf("redis-server version %d.%d", version/100, version%100)
	is72 := version >= 702
	a := newTestACL(t)
	compared := 0
	for _, v := range readRuleVectors(t) {
		if v.since == "7.2" && !is72 {
			continue
		}
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
		want := redisListLine(t, c, "u")
		if got := a.User("u").Describe(); got != want {
			t.Errorf("rules.txt:%d %q:\n ours  %q\n redis %q", v.line, v.rules, got, want)
		}
		if got, want := fmt.Sprint(infoAsReply(a.User("u").Info())), fmt.Sprint(c.do(t, "ACL", "GETUSER", "u")); got != want {
			t.Errorf("rules.txt:%d GETUSER:\n ours  %s\n redis %s", v.line, got, want)
		}
		compared++
	}
	if compared < 20 {
		t.Fatalf("only %d vectors compared", compared)
	}
	// Redis 7.0 leaves sanitize-payload out of the default user's line.
	if got := redisListLine(t, c, "default"); is72 && got != a.User("default").Describe() {
		t.Errorf("default user: redis %q, ours %q", got, a.User("default").Describe())
	}
	if got := c.do(t, "AUTH", "nosuch", "pass"); got != redisErr(WrongPassReply) {
		t.Errorf("AUTH: redis %q, ours %q", got, WrongPassReply)
	}
	if got := c.do(t, "ACL", "CAT"); fmt.Sprint(got) != fmt.Sprint(stringsAsAny(StandardCategories())) {
		t.Errorf("ACL CAT: redis %v", got)
	}
	if !is72 {
		t.Logf("redis %d.%d: NOPERM and DRYRUN wording differ before 7.2; not compared", version/100, version%100)
		return
	}
	// NOPERM and DRYRUN wording.
	for _, r := range [][]string{{"ACL", "SETUSER", "bob", "reset", "on", "nopass", "~k*", "+get", "+auth"}} {
		c.do(t, r...)
		_ = a.SetUser("bob", r[3:]...)
	}
	for _, tc := range []struct {
		cmd  []string
		id   int
		keys []KeyRef
	}{
		{[]string{"get", "k1"}, cGet, []KeyRef{{1, KeyRead}}},
		{[]string{"get", "x"}, cGet, []KeyRef{{1, KeyRead}}},
		{[]string{"set", "k1", "v"}, cSet, []KeyRef{{1, KeyWrite}}},
	} {
		want := c.do(t, append([]string{"ACL", "DRYRUN", "bob"}, tc.cmd...)...)
		got, err := a.DryRun("bob", tc.id, -1, args(tc.cmd...), tc.keys)
		if got == "" {
			got = "OK"
		}
		if err != nil || got != want {
			t.Errorf("DRYRUN %q: ours %q %v, redis %q", tc.cmd, got, err, want)
		}
	}
	if got := c.do(t, "AUTH", "bob", "x"); got != "OK" {
		t.Fatal(got)
	}
	u := a.User("bob")
	if got, want := c.do(t, "SET", "k1", "v"), redisErr(u.DenyReply(cSet, -1, u.Check(cSet, -1, args("set", "k1", "v"), nil))); got != want {
		t.Errorf("NOPERM command: redis %q, ours %q", got, want)
	}
	if got := c.do(t, "GET", "x"); got != redisErr(NoPermKeyReply) {
		t.Errorf("NOPERM key: redis %q, ours %q", got, NoPermKeyReply)
	}
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
// vocabulary avoids the documented
// differences. Only Redis 7.2 or later renders command rules as 7.2 does.
func TestAgainstRedisRandomRules(t *testing.T) {
	c, version := startRedis(t)
	if version < 702 {
		t.Skipf("redis-server %d.%d renders command rules differently from 7.2", version/100, version%100)
	}
	vocab := []string{"on", "off", "nopass", "resetpass", ">p1", ">p2", "<p1", "~a:*", "%R~b:*", "%W~b:*",
		"~c", "resetkeys", "allkeys", "&ch", "allchannels", "resetchannels", "+get", "-get", "+@read",
		"-@write", "+@all", "-@all", "+config", "-config|set", "+config|get", "+select|0", "+@dangerous",
		"-@string", "reset", "(~x +set)", "(%R~y -@all +@read)", "clearselectors", "skip-sanitize-payload",
		"sanitize-payload", "bogus", "+nosuch", "+client|list", "-client", "+@connection", "allcommands"}
	a := newTestACL(t)
	rng := rand.New(rand.NewPCG(1, 2))
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
		if got, want := a.User("r").Describe(), redisListLine(t, c, "r"); got != want {
			t.Fatalf("case %d %q:\n ours  %q\n redis %q", i, rules, got, want)
		}
		for _, dr := range dryRuns {
			want := c.do(t, append([]string{"ACL", "DRYRUN", "r"}, dr.args...)...)
			got, err := a.DryRun("r", dr.cmd, dr.sub, args(dr.args...), dr.keys)
			if got == "" {
				got = "OK"
			}
			if err != nil || got != want {
				t.Fatalf("case %d %q: DRYRUN %q: ours %q %v, redis %q", i, rules, dr.args, got, err, want)
			}
		}
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
