package server

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/server/acl"
)

// aclTestLoop is a test loop whose client is authenticated as a user
// confined to "tenant:a:*", with the THROTTLE commands allowed.
func aclTestLoop(t testing.TB) *testLoop {
	t.Helper()
	tl := newTestLoop(t, nil)
	a := tl.srv.ACL()
	if err := a.SetUser("tenant", "on", "nopass", "~tenant:a:*", "+@throttle", "+@connection"); err != nil {
		t.Fatal(err)
	}
	tl.cl.user = a.User("tenant")
	return tl
}

// TestACLCheckZeroAlloc asserts that the ACL check adds no allocation to
// an allowed command, for a user with key patterns as for the default user.
func TestACLCheckZeroAlloc(t *testing.T) {
	for _, restricted := range []bool{false, true} {
		tl := newTestLoop(t, nil)
		if restricted {
			tl = aclTestLoop(t)
		}
		var in []byte
		for i := 0; i < 64; i++ {
			in = append(in, cmd("THROTTLE.CHECK", fmt.Sprintf("tenant:a:%d", i), "1000000", "1s")...)
			in = append(in, cmd("THROTTLE.RESET", fmt.Sprintf("tenant:a:%d", i), fmt.Sprintf("tenant:a:x%d", i))...)
			in = append(in, "PING\r\n"...)
		}
		now := time.Now().UnixNano()
		tl.l.process(tl.cl, in, now)
		if got := tl.take(); len(got) == 0 || got[0] == '-' {
			t.Fatalf("restricted=%v: %q", restricted, got[:min(len(got), 200)])
		}
		allocs := testing.AllocsPerRun(20, func() {
			now += 1000
			tl.l.process(tl.cl, in, now)
			tl.l.out = tl.l.out[:0]
		})
		if allocs != 0 {
			t.Errorf("restricted=%v: %v allocations per batch, want 0", restricted, allocs)
		}
	}
}

// TestACLStaleUser checks that a changed user is picked up before the next
// command and a deleted one closes the connection.
func TestACLStaleUser(t *testing.T) {
	tl := aclTestLoop(t)
	if out, _ := tl.run(cmd("THROTTLE.CHECK", "tenant:b:1", "10", "1s")); out != "-"+acl.NoPermKeyReply+"\r\n" {
		t.Fatalf("before: %q", out)
	}
	if err := tl.srv.ACL().SetUser("tenant", "~tenant:b:*"); err != nil {
		t.Fatal(err)
	}
	if out, _ := tl.run(cmd("THROTTLE.CHECK", "tenant:b:1", "10", "1s")); out[0] != '*' {
		t.Fatalf("after SETUSER: %q", out)
	}
	if _, err := tl.srv.ACL().DelUser("tenant"); err != nil {
		t.Fatal(err)
	}
	if out, closed := tl.run("PING\r\n"); !closed || out != "" {
		t.Fatalf("after DELUSER: %q, closed %v", out, closed)
	}
}

// TestKeyRefs checks the key positions and access given to the ACL.
func TestKeyRefs(t *testing.T) {
	tests := []struct {
		line []string
		want []acl.KeyRef
	}{
		{[]string{"THROTTLE.CHECK", "k", "10", "1s"}, []acl.KeyRef{{Pos: 1, Access: acl.KeyWrite}}},
		{[]string{"THROTTLE.PEEK", "k", "10", "1s"}, []acl.KeyRef{{Pos: 1, Access: acl.KeyRead}}},
		{[]string{"THROTTLE.RESET", "a", "b", "c"}, []acl.KeyRef{{Pos: 1, Access: acl.KeyWrite}, {Pos: 2, Access: acl.KeyWrite}, {Pos: 3, Access: acl.KeyWrite}}},
		{[]string{"THROTTLE.MCHECK", "2", "a", "1", "1s", "gcra", "b", "1", "1s", "gcra", "COST", "1"},
			[]acl.KeyRef{{Pos: 2, Access: acl.KeyWrite}, {Pos: 6, Access: acl.KeyWrite}}},
		{[]string{"PING"}, nil},
		{[]string{"EXISTS", "a", "b"}, []acl.KeyRef{{Pos: 1, Access: acl.KeyRead}, {Pos: 2, Access: acl.KeyRead}}},
	}
	for _, tt := range tests {
		args := make([][]byte, len(tt.line))
		for i, a := range tt.line {
			args[i] = []byte(a)
		}
		got := keyRefs(nil, resolve(args), args)
		if fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("%v: %v, want %v", tt.line, got, tt.want)
		}
	}
}

func TestClientIP(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:6379": "127.0.0.1", "[::1]:6379": "::1", "": "", "host": "host",
	} {
		if got := string(clientIP(addr)); got != want {
			t.Errorf("clientIP(%q) = %q, want %q", addr, got, want)
		}
	}
}

// BenchmarkDispatchACL is BenchmarkDispatch's THROTTLE.CHECK as a user
// confined to a key pattern: one glob match per command on top of the
// default user's bit test.
func BenchmarkDispatchACL(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant:a:%d", i)
	}
	for _, restricted := range []bool{false, true} {
		b.Run(fmt.Sprintf("throttle.check/restricted=%v", restricted), func(b *testing.B) {
			tl := newTestLoop(b, nil)
			if restricted {
				tl = aclTestLoop(b)
			}
			var in []byte
			const batch = 256
			for i := 0; i < batch; i++ {
				in = append(in, cmd("THROTTLE.CHECK", keys[i%len(keys)], "1000000", "1s")...)
			}
			now := time.Now().UnixNano()
			tl.l.process(tl.cl, in, now)
			tl.l.out = tl.l.out[:0]
			b.ReportAllocs()
			b.ResetTimer()
			for done := 0; done < b.N; done += batch {
				now += 1000
				tl.l.process(tl.cl, in, now)
				tl.l.out = tl.l.out[:0]
			}
		})
	}
}

// TestPermittedAndMayRead checks the hooks EXEC and SCAN/KEYS use.
func TestPermittedAndMayRead(t *testing.T) {
	tl := aclTestLoop(t)
	line := func(words ...string) [][]byte {
		args := make([][]byte, len(words))
		for i, w := range words {
			args[i] = []byte(w)
		}
		return args
	}
	own := line("THROTTLE.CHECK", "tenant:a:1", "10", "1s")
	other := line("THROTTLE.CHECK", "tenant:b:1", "10", "1s")
	if !tl.l.permitted(tl.cl, resolve(own), own, acl.ContextMulti, 0) || tl.take() != "" {
		t.Fatal("own key refused")
	}
	if tl.l.permitted(tl.cl, resolve(other), other, acl.ContextMulti, 0) {
		t.Fatal("other tenant's key permitted")
	}
	if got, want := tl.take(), "-NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. "+
		"This command is no longer allowed for the following reason: no permission to touch the specified keys\r\n"; got != want {
		t.Fatalf("reply %q", got)
	}
	e := tl.srv.ACL().Log().Entries(1, time.Unix(0, 0))
	if len(e) != 1 || e[0].Context != acl.ContextMulti || e[0].Object != "tenant:b:1" || e[0].Username != "tenant" {
		t.Fatalf("ACL LOG %+v", e)
	}
	if !tl.cl.mayRead([]byte("tenant:a:x")) || tl.cl.mayRead([]byte("tenant:b:x")) {
		t.Fatal("mayRead does not follow the key patterns")
	}
	if tl.cl.userName() != "tenant" {
		t.Fatalf("userName %q", tl.cl.userName())
	}
}

// clientInfoRE matches the client-info value of an ACL LOG entry.
var clientInfoRE = regexp.MustCompile(`(client-info\r\n)\$\d+\r\n[^\r]*`)

// TestACLLogReply checks the shape of ACL LOG entries (Redis 7.2's ten
// fields) in both protocols, at an injected clock; the client-info value
// (the CLIENT LIST line) is replaced by a placeholder.
func TestACLLogReply(t *testing.T) {
	const t0 = int64(1_700_000_000_000) // ms
	for _, proto := range []int{2, 3} {
		tl := aclTestLoop(t)
		tl.cl.resp3 = proto == 3
		tl.l.process(tl.cl, []byte(cmd("THROTTLE.CHECK", "tenant:b:1", "10", "1s")), t0*1e6)
		tl.l.process(tl.cl, []byte(cmd("THROTTLE.PEEK", "tenant:b:1", "10", "1s")), (t0+500)*1e6)
		tl.l.process(tl.cl, []byte(cmd("FLUSHALL")), (t0+1000)*1e6)
		tl.take()
		tl.cl.user = tl.srv.ACL().User(acl.DefaultUser)
		tl.l.process(tl.cl, []byte(cmd("ACL", "LOG")), (t0+3000)*1e6)
		got := clientInfoRE.ReplaceAllString(tl.take(), "${1}<line>")
		bulk := func(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }
		double := func(s string) string {
			if proto == 3 {
				return "," + s + "\r\n"
			}
			return bulk(s)
		}
		head := "*20\r\n"
		if proto == 3 {
			head = "%10\r\n"
		}
		entry := func(count int, reason, object, age string, id, created, updated int64) string {
			return head + bulk("count") + fmt.Sprintf(":%d\r\n", count) + bulk("reason") + bulk(reason) +
				bulk("context") + bulk("toplevel") + bulk("object") + bulk(object) + bulk("username") + bulk("tenant") +
				bulk("age-seconds") + double(age) + "$11\r\nclient-info\r\n<line>\r\n" +
				bulk("entry-id") + fmt.Sprintf(":%d\r\n", id) + bulk("timestamp-created") + fmt.Sprintf(":%d\r\n", created) +
				bulk("timestamp-last-updated") + fmt.Sprintf(":%d\r\n", updated)
		}
		want := "*2\r\n" + entry(1, "command", "flushall", "2", 1, t0+1000, t0+1000) +
			entry(2, "key", "tenant:b:1", "2.5", 0, t0, t0+500)
		if got != want {
			t.Errorf("RESP%d ACL LOG:\n got %q\nwant %q", proto, got, want)
		}
	}
}

// TestAuthFailLimit drives the failed-AUTH limit at an injected clock: 3
// failures per 3 s, so after the burst one attempt a second.
func TestAuthFailLimit(t *testing.T) {
	tl := newTestLoop(t, func(c *Config) {
		c.RequirePass, c.AuthFailLimit, c.AuthFailPeriod = "right", 3, 3*time.Second
	})
	tl.cl.addr = "10.0.0.1:5000"
	const t0 = int64(1_700_000_000_000_000_000)
	at := func(ms int64, args ...string) (string, bool) {
		_, closed := tl.l.process(tl.cl, []byte(cmd(args...)), t0+ms*int64(time.Millisecond))
		return tl.take(), closed
	}
	wrong := "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
	for i := 0; i < 3; i++ {
		if out, closed := at(0, "AUTH", "guess"); out != wrong || closed {
			t.Fatalf("attempt %d: %q closed=%v", i, out, closed)
		}
	}
	if out, closed := at(0, "AUTH", "right"); out != "-ERR too many failed authentication attempts, retry in 1000 ms\r\n" || !closed {
		t.Fatalf("over the limit: %q closed=%v", out, closed)
	}
	if out, closed := at(0, "HELLO", "3", "AUTH", "default", "right"); out[0] != '-' || !closed {
		t.Fatalf("HELLO AUTH over the limit: %q closed=%v", out, closed)
	}
	// Another address is not affected.
	other := newClient(tl.srv, tl.l, 2)
	other.addr = "10.0.0.2:5000"
	if tl.l.process(other, []byte(cmd("AUTH", "right")), t0); tl.take() != "+OK\r\n" {
		t.Fatal("another address refused")
	}
	if out, _ := at(999, "AUTH", "right"); out[0] != '-' {
		t.Fatalf("at 999 ms: %q", out)
	}
	if out, closed := at(1000, "AUTH", "right"); out != "+OK\r\n" || closed {
		t.Fatalf("at 1000 ms: %q closed=%v", out, closed)
	}
	// A negative limit turns the limit off.
	off := newTestLoop(t, func(c *Config) { c.RequirePass, c.AuthFailLimit = "right", -1 })
	for i := 0; i < 100; i++ {
		if out, closed := off.run(cmd("AUTH", "guess")); out != wrong || closed {
			t.Fatalf("limit off, attempt %d: %q", i, out)
		}
	}
}
