package server

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/tidwall/match"

	"github.com/throttlekit/throttlekit-server/shard"
)

// testConn is the connection of a client whose loop a test drives
// directly: it keeps what the server writes or queues on it and records
// Close. Like tlsConn it implements only the gnet.Conn methods the command
// code calls on a client's conn; the embedded gnet.Conn is nil.
type testConn struct {
	gnet.Conn
	mu     sync.Mutex
	out    []byte
	closed bool
}

func (c *testConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.out = append(c.out, p...)
	return len(p), nil
}

func (c *testConn) AsyncWrite(p []byte, cb gnet.AsyncCallback) error {
	_, _ = c.Write(p)
	if cb != nil {
		return cb(c, nil)
	}
	return nil
}

func (c *testConn) OutboundBuffered() int { return 0 }

func (c *testConn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	return nil
}

// testLoop drives one loop's dispatcher over byte buffers, without sockets.
type testLoop struct {
	srv *Server
	l   *loop
	cl  *client
}

func newTestLoop(t testing.TB, mutate func(*Config)) *testLoop {
	t.Helper()
	cfg := Config{Addr: "127.0.0.1:0", MaxArgs: 1024, ProtoMaxBulkLen: 1 << 20, Version: "test"}
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg, shard.New(shard.Config{Shards: 4}))
	if err != nil {
		t.Fatal(err)
	}
	l := newLoop(s)
	return &testLoop{srv: s, l: l, cl: newClient(s, l, 1)}
}

// newClient returns a client of loop l with id, as a connection that just
// opened: the default user, authenticated unless it has a password.
func newClient(s *Server, l *loop, id int64) *client {
	cl := &client{id: id, loop: l, conn: &testConn{}, since: time.Now()}
	s.startConn(cl)
	return cl
}

// run feeds in as one batch and returns the replies and whether the
// connection would be closed.
func (tl *testLoop) run(in string) (string, bool) {
	n, closed := tl.l.process(tl.cl, []byte(in), time.Now().UnixNano())
	if !closed && n != len(in) {
		return "<incomplete>" + tl.take(), false
	}
	return tl.take(), closed
}

func (tl *testLoop) take() string {
	s := string(tl.l.out)
	tl.l.out = tl.l.out[:0]
	return s
}

// cmd encodes args as a multibulk.
func cmd(args ...string) string {
	var b strings.Builder
	b.WriteString("*")
	b.WriteString(itoa(len(args)))
	b.WriteString("\r\n")
	for _, a := range args {
		b.WriteString("$")
		b.WriteString(itoa(len(a)))
		b.WriteString("\r\n")
		b.WriteString(a)
		b.WriteString("\r\n")
	}
	return b.String()
}

func itoa(n int) string {
	return string(appendInt(nil, int64(n))[1 : len(appendInt(nil, int64(n)))-2])
}

func TestDispatchExact(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"ping", cmd("PING"), "+PONG\r\n"},
		{"ping lower", cmd("ping"), "+PONG\r\n"},
		{"ping msg", cmd("PING", "hi"), "$2\r\nhi\r\n"},
		{"ping too many", cmd("PING", "a", "b"), "-ERR wrong number of arguments for 'ping' command\r\n"},
		{"inline ping", "PING\r\n", "+PONG\r\n"},
		{"echo", cmd("ECHO", "x y"), "$3\r\nx y\r\n"},
		{"echo arity", cmd("ECHO"), "-ERR wrong number of arguments for 'echo' command\r\n"},
		{"unknown", cmd("FOO", "a", "b"), "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"},
		{"unknown no args", cmd("foo"), "-ERR unknown command 'foo', with args beginning with: \r\n"},
		{"unknown newline", cmd("a\r\nb", "c\nd"), "-ERR unknown command 'a  b', with args beginning with: 'c d' \r\n"},
		{"select 0", cmd("SELECT", "0"), "+OK\r\n"},
		{"select 1", cmd("SELECT", "1"), "-ERR DB index is out of range\r\n"},
		{"select x", cmd("SELECT", "x"), "-ERR value is not an integer or out of range\r\n"},
		{"auth no pass", cmd("AUTH", "x"), "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n"},
		{"auth default user", cmd("AUTH", "default", "x"), "+OK\r\n"},
		{"auth other user", cmd("AUTH", "bob", "x"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{"client setname", cmd("CLIENT", "SETNAME", "app"), "+OK\r\n"},
		{"client setname space", cmd("CLIENT", "SETNAME", "a b"), "-ERR Client names cannot contain spaces, newlines or special characters.\r\n"},
		{"client getname none", cmd("CLIENT", "GETNAME"), "$-1\r\n"},
		{"client id", cmd("CLIENT", "ID"), ":1\r\n"},
		{"client setinfo", cmd("CLIENT", "SETINFO", "LIB-NAME", "go-redis(,go1.26)"), "+OK\r\n"},
		{"client setinfo ver", cmd("CLIENT", "SETINFO", "lib-ver", "9.17.3"), "+OK\r\n"},
		{"client setinfo bad", cmd("CLIENT", "SETINFO", "foo", "x"), "-ERR Unrecognized option 'foo'\r\n"},
		{"client maint", cmd("CLIENT", "MAINT_NOTIFICATIONS", "on"), "-ERR unknown subcommand 'MAINT_NOTIFICATIONS'. Try CLIENT HELP.\r\n"},
		{"client arity", cmd("CLIENT"), "-ERR wrong number of arguments for 'client' command\r\n"},
		{"command count", cmd("COMMAND", "COUNT"), ":" + itoa(int(numCmds)) + "\r\n"},
		{"command bad", cmd("COMMAND", "nope"), "-ERR unknown subcommand 'nope'. Try COMMAND HELP.\r\n"},
		{"command info unknown", cmd("COMMAND", "INFO", "nope"), "*1\r\n$-1\r\n"},
		{"command docs unknown", cmd("COMMAND", "DOCS", "nope"), "*0\r\n"},
		{"dbsize", cmd("DBSIZE"), ":0\r\n"},
		{"reset", cmd("RESET"), "+RESET\r\n"},
		{"hello bad proto", cmd("HELLO", "4"), "-NOPROTO unsupported protocol version\r\n"},
		{"hello not int", cmd("HELLO", "x"), "-ERR Protocol version is not an integer or out of range\r\n"},
		{"hello bad option", cmd("HELLO", "3", "FOO"), "-ERR Syntax error in HELLO option 'FOO'\r\n"},
		{"config bad", cmd("CONFIG", "SET", "a", "b"), "-ERR unknown subcommand 'SET'. Try CONFIG HELP.\r\n"},
		{"config get without a hook", cmd("CONFIG", "GET", "maxclients"), "*0\r\n"},
		{"config get arity", cmd("CONFIG", "GET"), "-ERR wrong number of arguments for 'config|get' command\r\n"},
		{"reset arity", cmd("THROTTLE.RESET"), "-ERR wrong number of arguments for 'throttle.reset' command\r\n"},
		{"reset absent", cmd("THROTTLE.RESET", "a", "b"), ":0\r\n"},
		{"check arity", cmd("THROTTLE.CHECK", "k", "1"), "-ERR wrong number of arguments for 'throttle.check' command\r\n"},
		{"check limit", cmd("THROTTLE.CHECK", "k", "x", "1s"), "-ERR limit is not an integer or out of range\r\n"},
		{"check period", cmd("THROTTLE.CHECK", "k", "1", "1w"), "-ERR period is not a number of milliseconds or a duration such as 500ms, 1.5s, 1h30m or 1d, or out of range\r\n"},
		{"check option", cmd("THROTTLE.CHECK", "k", "1", "1s", "FOO", "1"), "-ERR unknown option 'FOO'\r\n"},
		{"check option value", cmd("THROTTLE.CHECK", "k", "1", "1s", "BURST"), "-ERR syntax error: option without a value\r\n"},
		{"check algo", cmd("THROTTLE.CHECK", "k", "1", "1s", "ALGO", "leaky"), "-ERR unknown algorithm: want gcra, token, fixed or sliding\r\n"},
		{"check burst", cmd("THROTTLE.CHECK", "k", "1", "1s", "BURST", "x"), "-ERR burst is not an integer or out of range\r\n"},
		{"check cost", cmd("THROTTLE.CHECK", "k", "1", "1s", "COST", "1.5"), "-ERR cost is not an integer or out of range\r\n"},
		{"peek cost", cmd("THROTTLE.PEEK", "k", "1", "1s", "COST", "x"), "-ERR cost is not an integer or out of range\r\n"},
		{"lease syntax", cmd("THROTTLE.LEASE", "k", "1", "1s", "BATCHES", "1"), "-ERR unknown option 'BATCHES' for THROTTLE.LEASE: it takes only BATCH, on a fixed window\r\n"},
		{"lease arity", cmd("THROTTLE.LEASE", "k", "1", "1s", "BATCH"), "-ERR wrong number of arguments for 'throttle.lease' command\r\n"},
		{"return credits", cmd("THROTTLE.RETURN", "k", "x", "1"), "-ERR credits is not an integer or out of range\r\n"},
		{"return negative", cmd("THROTTLE.RETURN", "k", "-1", "1"), "-ERR credits must not be negative\r\n"},
		{"cell usage", cmd("CL.THROTTLE", "k", "1", "2"), "-Cell error: Store error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]\r\n"},
		{"cell parse", cmd("CL.THROTTLE", "k", "1", "x", "60"), "-Cell error: Store error: Couldn't parse as integer: x\r\n"},
		{"cell parse float", cmd("CL.THROTTLE", "k", "1", "2", "60", "1.0"), "-Cell error: Store error: Couldn't parse as integer: 1.0\r\n"},
		{"empty multibulk", "*0\r\n", ""},
		{"blank inline", "\r\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := newTestLoop(t, nil)
			got, closed := tl.run(tt.in)
			if closed {
				t.Fatalf("connection closed after %q", tt.in)
			}
			if got != tt.want {
				t.Fatalf("reply\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestConfigGet: CONFIG GET answers from Config.ConfigGet alone, each name
// once however many patterns match it.
func TestConfigGet(t *testing.T) {
	settings := [][2]string{{"maxclients", "10000"}, {"timeout", "0"}, {"databases", "1"}}
	tl := newTestLoop(t, func(c *Config) {
		c.ConfigGet = func(pattern string) [][2]string {
			var out [][2]string
			for _, kv := range settings {
				if match.Match(kv[0], strings.ToLower(pattern)) {
					out = append(out, kv)
				}
			}
			return out
		}
	})
	for _, tt := range []struct{ in, want string }{
		{cmd("CONFIG", "GET", "maxclients"), "*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n"},
		{cmd("CONFIG", "GET", "nothing*"), "*0\r\n"},
		{cmd("CONFIG", "GET", "MAX*", "*clients"), "*2\r\n$10\r\nmaxclients\r\n$5\r\n10000\r\n"},
		{cmd("CONFIG", "GET", "t*", "d*"), "*4\r\n$7\r\ntimeout\r\n$1\r\n0\r\n$9\r\ndatabases\r\n$1\r\n1\r\n"},
	} {
		if got, _ := tl.run(tt.in); got != tt.want {
			t.Errorf("%q: got %q want %q", tt.in, got, tt.want)
		}
	}
	tl.run(cmd("HELLO", "3"))
	if got, _ := tl.run(cmd("CONFIG", "GET", "timeout")); got != "%1\r\n$7\r\ntimeout\r\n$1\r\n0\r\n" {
		t.Errorf("RESP3 CONFIG GET: %q", got)
	}
}

func TestProtocolErrorCloses(t *testing.T) {
	tests := []struct{ in, want string }{
		{"*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"*1\r\n:1\r\n", "-ERR Protocol error: expected '$', got ':'\r\n"},
		{"ECHO \"a\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n"},
		{"*1\r\n$2000000\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"*2000\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		// Commands before the violation are answered.
		{"PING\r\n*1\r\n$-5\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
	}
	for _, tt := range tests {
		tl := newTestLoop(t, nil)
		got, closed := tl.run(tt.in)
		if !closed || got != tt.want {
			t.Errorf("%q: got %q closed=%v; want %q closed", tt.in, got, closed, tt.want)
		}
	}
	tl := newTestLoop(t, nil)
	tl.run("*1\r\n$-1\r\n")
	tl.l.ctr.flush(&tl.l.pub)
	if n := tl.l.pub.errs[errKindProtocol].Load(); n != 1 {
		t.Errorf("protocol errors counted = %d, want 1", n)
	}
}

func TestQuit(t *testing.T) {
	tl := newTestLoop(t, nil)
	got, closed := tl.run(cmd("PING") + cmd("QUIT") + cmd("PING"))
	if !closed || got != "+PONG\r\n+OK\r\n" {
		t.Fatalf("got %q closed=%v", got, closed)
	}
}

func TestPartialFrameKept(t *testing.T) {
	tl := newTestLoop(t, nil)
	in := []byte(cmd("PING") + "*2\r\n$4\r\nECHO\r\n$3\r\nab")
	n, closed := tl.l.process(tl.cl, in, time.Now().UnixNano())
	if closed || n != len(cmd("PING")) {
		t.Fatalf("n = %d closed = %v", n, closed)
	}
	if got := tl.take(); got != "+PONG\r\n" {
		t.Fatalf("got %q", got)
	}
	rest := append(in[n:], "c\r\n"...)
	if got, _ := tl.run(string(rest)); got != "$3\r\nabc\r\n" {
		t.Fatalf("got %q", got)
	}
}

func TestAuthRequired(t *testing.T) {
	tl := newTestLoop(t, func(c *Config) { c.RequirePass = "s3cret" })
	steps := []struct{ in, want string }{
		{cmd("PING"), "-NOAUTH Authentication required.\r\n"},
		{cmd("THROTTLE.CHECK", "k", "1", "1s"), "-NOAUTH Authentication required.\r\n"},
		{cmd("HELLO", "3"), "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time\r\n"},
		{cmd("AUTH", "wrong"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{cmd("AUTH", "default", "wrong"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{cmd("AUTH", "s3cret"), "+OK\r\n"},
		{cmd("PING"), "+PONG\r\n"},
		{cmd("RESET"), "+RESET\r\n"},
		{cmd("PING"), "-NOAUTH Authentication required.\r\n"},
		{cmd("HELLO", "2", "AUTH", "default", "bad"), "-WRONGPASS invalid username-password pair or user is disabled.\r\n"},
		{cmd("AUTH", "default", "s3cret"), "+OK\r\n"},
		{cmd("PING"), "+PONG\r\n"},
	}
	for i, s := range steps {
		if got, _ := tl.run(s.in); got != s.want {
			t.Fatalf("step %d %q: got %q want %q", i, s.in, got, s.want)
		}
	}
	// Before authentication, a large multibulk is a protocol error.
	tl2 := newTestLoop(t, func(c *Config) { c.RequirePass = "x" })
	if got, closed := tl2.run("*20\r\n"); !closed || got != "-ERR Protocol error: unauthenticated multibulk length\r\n" {
		t.Fatalf("got %q closed=%v", got, closed)
	}
}

func TestHello(t *testing.T) {
	tl := newTestLoop(t, nil)
	got, _ := tl.run(cmd("HELLO", "3", "SETNAME", "me"))
	want := "%7\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.0\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n:1\r\n" +
		"$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n"
	if got != want {
		t.Fatalf("HELLO 3:\n got %q\nwant %q", got, want)
	}
	if !tl.cl.resp3 || tl.cl.name != "me" {
		t.Fatalf("resp3=%v name=%q", tl.cl.resp3, tl.cl.name)
	}
	if got, _ := tl.run(cmd("CLIENT", "GETNAME")); got != "$2\r\nme\r\n" {
		t.Fatalf("GETNAME = %q", got)
	}
	got, _ = tl.run(cmd("HELLO"))
	if !strings.HasPrefix(got, "%7\r\n") || !strings.Contains(got, "proto\r\n:3\r\n") {
		t.Fatalf("HELLO without version must keep RESP3: %q", got)
	}
	got, _ = tl.run(cmd("HELLO", "2"))
	if !strings.HasPrefix(got, "*14\r\n") || !strings.Contains(got, "proto\r\n:2\r\n") {
		t.Fatalf("HELLO 2: %q", got)
	}
	tl.run(cmd("HELLO", "3"))
	if got, _ := tl.run(cmd("RESET")); got != "+RESET\r\n" || tl.cl.resp3 || tl.cl.name != "" {
		t.Fatalf("RESET: %q resp3=%v name=%q", got, tl.cl.resp3, tl.cl.name)
	}
}

// parseInts decodes a flat RESP2 array of integers.
func parseInts(t *testing.T, s string) []int64 {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(s, "\r\n"), "\r\n")
	if len(lines) == 0 || lines[0][0] != '*' {
		t.Fatalf("not an array: %q", s)
	}
	var out []int64
	for _, ln := range lines[1:] {
		if ln[0] != ':' {
			t.Fatalf("not an integer %q in %q", ln, s)
		}
		n, ok := parseInt64([]byte(ln[1:]))
		if !ok {
			t.Fatalf("bad integer %q", ln)
		}
		out = append(out, n)
	}
	return out
}

func TestThrottleCheckCounts(t *testing.T) {
	for _, algo := range []string{"gcra", "token", "fixed", "sliding"} {
		t.Run(algo, func(t *testing.T) {
			tl := newTestLoop(t, nil)
			allowed := 0
			for i := 0; i < 5; i++ {
				got, _ := tl.run(cmd("THROTTLE.CHECK", "k", "3", "1h", "ALGO", algo))
				f := parseInts(t, got)
				if len(f) != 5 {
					t.Fatalf("reply %q: want 5 fields", got)
				}
				if f[1] != 3 {
					t.Fatalf("limit field = %d, want 3", f[1])
				}
				allowed += int(f[0])
				if f[0] == 0 && f[4] <= 0 {
					t.Fatalf("denied with retry_after %d", f[4])
				}
			}
			if allowed != 3 {
				t.Fatalf("allowed %d of 5 at limit 3", allowed)
			}
			other := "gcra"
			if algo == "gcra" {
				other = "fixed"
			}
			if got, _ := tl.run(cmd("THROTTLE.CHECK", "k", "3", "1h", "ALGO", other)); !strings.HasPrefix(got, "-WRONGTYPE ") {
				t.Fatalf("other algorithm on the key: %q, want WRONGTYPE", got)
			}
			if got, _ := tl.run(cmd("THROTTLE.RESET", "k", "absent")); got != ":1\r\n" {
				t.Fatalf("RESET = %q", got)
			}
			tl.l.ctr.flush(&tl.l.pub)
			st := tl.srv.Stats()
			_ = st
			if a, d := tl.l.pub.allowed.Load(), tl.l.pub.denied.Load(); a != 3 || d != 2 {
				t.Fatalf("allowed/denied counters = %d/%d, want 3/2", a, d)
			}
		})
	}
}

func TestThrottleResp3Map(t *testing.T) {
	tl := newTestLoop(t, nil)
	tl.run(cmd("HELLO", "3"))
	got, _ := tl.run(cmd("THROTTLE.CHECK", "k", "10", "1s"))
	for _, k := range []string{"%5\r\n", "$7\r\nallowed\r\n:1\r\n", "$5\r\nlimit\r\n:10\r\n", "$9\r\nremaining\r\n:9\r\n", "$11\r\nreset_at_ms\r\n", "$14\r\nretry_after_ms\r\n:0\r\n"} {
		if !strings.Contains(got, k) {
			t.Fatalf("RESP3 reply %q lacks %q", got, k)
		}
	}
	got, _ = tl.run(cmd("THROTTLE.LEASE", "l", "10", "1s", "BATCH", "4"))
	if !strings.HasPrefix(got, "%5\r\n$7\r\ngranted\r\n:4\r\n") {
		t.Fatalf("LEASE RESP3 reply %q", got)
	}
}

func TestPeekCreatesNothing(t *testing.T) {
	tl := newTestLoop(t, nil)
	got, _ := tl.run(cmd("THROTTLE.PEEK", "k", "5", "1s"))
	f := parseInts(t, got)
	if len(f) != 5 || f[0] != 1 || f[2] != 5 {
		t.Fatalf("PEEK on a fresh key = %v", f)
	}
	if n := tl.srv.core.Len(nil); n != 0 {
		t.Fatalf("PEEK created %d keys", n)
	}
	tl.run(cmd("THROTTLE.CHECK", "k", "5", "1s", "COST", "2"))
	f = parseInts(t, func() string { s, _ := tl.run(cmd("THROTTLE.PEEK", "k", "5", "1s")); return s }())
	if f[2] != 3 {
		t.Fatalf("PEEK after COST 2: remaining %d, want 3", f[2])
	}
}

func TestLeaseReturn(t *testing.T) {
	tl := newTestLoop(t, nil)
	got, _ := tl.run(cmd("THROTTLE.LEASE", "k", "10", "1h", "BATCH", "4"))
	f := parseInts(t, got)
	if f[0] != 4 || f[1] != 10 || f[2] != 6 {
		t.Fatalf("LEASE = %v, want granted 4 remaining 6", f)
	}
	got, _ = tl.run(cmd("THROTTLE.RETURN", "k", "3", itoa64(f[3])))
	if got != ":3\r\n" {
		t.Fatalf("RETURN = %q, want :3", got)
	}
	tl.l.ctr.flush(&tl.l.pub)
	st := tl.srv.Stats()
	if st.LeaseGranted != 0 { // the loop is not registered with the server
		t.Fatalf("unregistered loop folded: %+v", st)
	}
	if g, r := tl.l.pub.leaseGranted.Load(), tl.l.pub.leaseReturned.Load(); g != 4 || r != 3 {
		t.Fatalf("lease counters %d/%d, want 4/3", g, r)
	}
}

func itoa64(n int64) string { s := appendInt(nil, n); return string(s[1 : len(s)-2]) }

func TestInfo(t *testing.T) {
	tl := newTestLoop(t, nil)
	got, _ := tl.run(cmd("INFO"))
	if !strings.HasPrefix(got, "$") {
		t.Fatalf("INFO is not a bulk string: %q", got)
	}
	for _, want := range []string{"# Server\r\n", "redis_version:", "loading:0\r\n", "# Clients\r\n", "# Memory\r\n", "# Stats\r\n", "# Throttle\r\n", "# Keyspace\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("INFO lacks %q", want)
		}
	}
	got, _ = tl.run(cmd("INFO", "server"))
	if !strings.Contains(got, "# Server") || strings.Contains(got, "# Clients") {
		t.Errorf("INFO server: %q", got)
	}
	got, _ = tl.run(cmd("INFO", "nosuch"))
	if got != "$0\r\n\r\n" {
		t.Errorf("INFO nosuch = %q, want empty bulk", got)
	}
	tl.run(cmd("THROTTLE.CHECK", "k", "1", "1s"))
	got, _ = tl.run(cmd("INFO", "keyspace"))
	if !strings.Contains(got, "db0:keys=1,") {
		t.Errorf("INFO keyspace: %q", got)
	}
}

func TestCommandDocsAndInfo(t *testing.T) {
	tl := newTestLoop(t, nil)
	got, _ := tl.run(cmd("COMMAND", "INFO", "throttle.check"))
	if !strings.HasPrefix(got, "*1\r\n*10\r\n$14\r\nthrottle.check\r\n:-4\r\n") {
		t.Fatalf("COMMAND INFO: %q", got)
	}
	got, _ = tl.run(cmd("COMMAND", "DOCS", "PING"))
	if !strings.HasPrefix(got, "*2\r\n$4\r\nping\r\n*10\r\n$7\r\nsummary\r\n") {
		t.Fatalf("COMMAND DOCS: %q", got)
	}
	got, _ = tl.run(cmd("COMMAND"))
	if !strings.HasPrefix(got, "*"+itoa(int(numCmds))+"\r\n") {
		t.Fatalf("COMMAND: %.40q", got)
	}
}

func TestClientListAndInfo(t *testing.T) {
	tl := newTestLoop(t, nil)
	tl.srv.clients[tl.cl.id] = tl.cl
	tl.run(cmd("CLIENT", "SETNAME", "worker"))
	got, _ := tl.run(cmd("CLIENT", "LIST"))
	if !strings.Contains(got, "id=1 ") || !strings.Contains(got, "name=worker ") {
		t.Fatalf("CLIENT LIST: %q", got)
	}
	got, _ = tl.run(cmd("CLIENT", "INFO"))
	if !strings.Contains(got, "name=worker") {
		t.Fatalf("CLIENT INFO: %q", got)
	}
	got, _ = tl.run(cmd("CLIENT", "LIST", "ID", "99"))
	if got != "$0\r\n\r\n" {
		t.Fatalf("CLIENT LIST ID 99: %q", got)
	}
}

func TestTime(t *testing.T) {
	tl := newTestLoop(t, nil)
	got, _ := tl.run(cmd("TIME"))
	parts := strings.Split(got, "\r\n")
	if parts[0] != "*2" || len(parts) != 6 {
		t.Fatalf("TIME: %q", got)
	}
	sec, ok := parseInt64([]byte(parts[2]))
	if !ok || sec < time.Now().Unix()-5 {
		t.Fatalf("TIME seconds %q", parts[2])
	}
}

func TestStatsCommandsByName(t *testing.T) {
	tl := newTestLoop(t, nil)
	tl.srv.loops = append(tl.srv.loops, tl.l)
	tl.run(cmd("PING") + cmd("ping") + cmd("THROTTLE.CHECK", "k", "1", "1s") + cmd("THROTTLE.CHECK", "k", "1", "1s") + cmd("nope"))
	tl.l.ctr.flush(&tl.l.pub)
	st := tl.srv.Stats()
	if st.Commands["ping"] != 2 || st.Commands["throttle.check"] != 2 {
		t.Fatalf("Commands = %v", st.Commands)
	}
	if st.Allowed != 1 || st.Denied != 1 || st.Errors["ERR"] != 1 {
		t.Fatalf("Allowed %d Denied %d Errors %v", st.Allowed, st.Denied, st.Errors)
	}
	if len(st.LatencyCounts) != len(st.LatencyBounds)+1 {
		t.Fatalf("latency buckets %d for %d bounds", len(st.LatencyCounts), len(st.LatencyBounds))
	}
}
