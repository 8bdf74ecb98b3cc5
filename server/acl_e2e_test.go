package server_test

// End-to-end tests of access control over real TCP: tenants confined to
// their key patterns (go-redis and redis-cli), ACL files, deleted users,
// protected mode, and the limit on failed authentication.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttlekit-server/internal/testdeps"
	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
)

const noPermKey = "NOPERM this user has no permissions to access one of the keys used as arguments"

// setupTenants creates users tenanta and tenantb, each confined to its
// own key prefix, through the admin connection.
func setupTenants(t *testing.T, ctx context.Context, admin *redis.Client) {
	t.Helper()
	for _, tn := range []string{"a", "b"} {
		mustDo(t, ctx, admin, "ACL", "SETUSER", "tenant"+tn, "on", ">pw-"+tn, "~tenant:"+tn+":*",
			"+@throttle", "+@connection", "-@dangerous", "+acl|whoami")
	}
}

func TestACLTenantsGoRedis(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.RequirePass = "adminpw" })
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("resp%d", proto), func(t *testing.T) {
			admin := newClient(t, ts.Addr, proto, func(o *redis.Options) { o.Password = "adminpw" })
			mustDo(t, ctx, admin, "ACL", "LOG", "RESET")
			setupTenants(t, ctx, admin)
			a := newClient(t, ts.Addr, proto, func(o *redis.Options) { o.Username, o.Password = "tenanta", "pw-a" })

			if got := mustDo(t, ctx, a, "ACL", "WHOAMI"); got != "tenanta" {
				t.Fatalf("ACL WHOAMI = %v", got)
			}
			// Within its patterns: every command works.
			mustDo(t, ctx, a, "THROTTLE.CHECK", "tenant:a:x", "10", "1m")
			mustDo(t, ctx, a, "THROTTLE.PEEK", "tenant:a:x", "10", "1m")
			mustDo(t, ctx, a, "THROTTLE.LEASE", "tenant:a:lease", "100", "1m", "BATCH", "10")
			mustDo(t, ctx, a, "CL.THROTTLE", "tenant:a:cell", "10", "10", "60")
			if n := mustDo(t, ctx, a, "THROTTLE.RESET", "tenant:a:x"); n != int64(1) {
				t.Fatalf("THROTTLE.RESET tenant:a:x = %v, want 1", n)
			}

			// Tenant B's key, as B sees it, before A tries anything.
			b := newClient(t, ts.Addr, proto, func(o *redis.Options) { o.Username, o.Password = "tenantb", "pw-b" })
			mustDo(t, ctx, b, "THROTTLE.CHECK", "tenant:b:x", "10", "1m", "COST", "3")
			before := fmt.Sprint(mustDo(t, ctx, b, "THROTTLE.PEEK", "tenant:b:x", "10", "1m"))

			denied := [][]any{
				{"THROTTLE.CHECK", "tenant:b:x", "10", "1m"},
				{"THROTTLE.PEEK", "tenant:b:x", "10", "1m"},
				{"THROTTLE.LEASE", "tenant:b:x", "100", "1m", "BATCH", "10"},
				{"CL.THROTTLE", "tenant:b:x", "10", "10", "60"},
				{"THROTTLE.RESET", "tenant:b:x"},
				{"THROTTLE.RESET", "tenant:a:x", "tenant:b:x"},
			}
			for _, args := range denied {
				_, err := do(ctx, a, args...)
				if err == nil || err.Error() != noPermKey {
					t.Errorf("%v as tenanta: err %v, want %q", args, err, noPermKey)
				}
			}
			_, err := do(ctx, a, "FLUSHALL")
			if want := "NOPERM this user has no permissions to run the 'flushall' command"; err == nil || err.Error() != want {
				t.Errorf("FLUSHALL as tenanta: err %v, want %q", err, want)
			}
			if after := fmt.Sprint(mustDo(t, ctx, b, "THROTTLE.PEEK", "tenant:b:x", "10", "1m")); after != before {
				t.Errorf("tenant B's state changed by A's denied commands: %s, then %s", before, after)
			}

			// ACL LOG: the key denials (merged into entries by object) and
			// the command denial.
			entries := mustDo(t, ctx, admin, "ACL", "LOG").([]any)
			var keyCount, cmdCount int64
			for _, e := range entries {
				m := logEntry(t, e)
				if m["username"] != "tenanta" {
					t.Errorf("ACL LOG entry of %v", m["username"])
				}
				switch m["reason"] {
				case "key":
					if m["object"] != "tenant:b:x" || m["context"] != "toplevel" {
						t.Errorf("key entry %v", m)
					}
					keyCount += m["count"].(int64)
				case "command":
					if m["object"] != "flushall" {
						t.Errorf("command entry %v", m)
					}
					cmdCount += m["count"].(int64)
				}
			}
			if keyCount != int64(len(denied)) || cmdCount != 1 {
				t.Errorf("ACL LOG counts key=%d command=%d, want %d and 1: %v", keyCount, cmdCount, len(denied), entries)
			}
		})
	}
}

// logEntry decodes one ACL LOG entry (a RESP2 array or a RESP3 map).
func logEntry(t *testing.T, e any) map[string]any {
	t.Helper()
	m := map[string]any{}
	switch v := e.(type) {
	case []any:
		for i := 0; i+1 < len(v); i += 2 {
			m[v[i].(string)] = v[i+1]
		}
	case map[any]any:
		for k, x := range v {
			m[k.(string)] = x
		}
	case map[string]any:
		return v
	default:
		t.Fatalf("ACL LOG entry of type %T", e)
	}
	return m
}

func TestACLTenantsTransaction(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.RequirePass = "adminpw" })
	ctx := context.Background()
	admin := newClient(t, ts.Addr, 3, func(o *redis.Options) { o.Password = "adminpw" })
	setupTenants(t, ctx, admin)
	mustDo(t, ctx, admin, "ACL", "SETUSER", "tenanta", "+@transaction")
	c := dialRaw(t, ts.Addr)
	if r := c.do(t, "AUTH", "tenanta", "pw-a"); r != "OK" {
		t.Fatalf("AUTH = %v", r)
	}
	c.do(t, "MULTI")
	c.do(t, "THROTTLE.CHECK", "tenant:a:1", "10", "1m")
	if r := c.do(t, "THROTTLE.CHECK", "tenant:b:1", "10", "1m"); r != respErr(noPermKey) {
		t.Fatalf("queued denial = %v", r)
	}
	if r := c.do(t, "EXEC"); r != respErr("EXECABORT Transaction discarded because of previous errors.") {
		t.Fatalf("EXEC = %v", r)
	}
	if n := mustDo(t, ctx, admin, "EXISTS", "tenant:a:1", "tenant:b:1"); n != int64(0) {
		t.Fatalf("EXISTS after an aborted transaction = %v", n)
	}
	m := logEntry(t, mustDo(t, ctx, admin, "ACL", "LOG", "1").([]any)[0])
	if m["context"] != "multi" || m["object"] != "tenant:b:1" {
		t.Fatalf("ACL LOG entry %v", m)
	}
}

func TestACLTenantsRedisCLI(t *testing.T) {
	cli := testdeps.Require(t, "redis-cli")[0]
	ts := startServer(t, func(c *server.Config) { c.RequirePass = "adminpw" })
	ctx := context.Background()
	admin := newClient(t, ts.Addr, 2, func(o *redis.Options) { o.Password = "adminpw" })
	setupTenants(t, ctx, admin)
	host, port, _ := net.SplitHostPort(ts.Addr)
	run := func(args ...string) string {
		full := append([]string{"-h", host, "-p", port, "--user", "tenanta", "--pass", "pw-a", "--no-auth-warning"}, args...)
		out, err := exec.Command(cli, full...).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli %v: %v: %s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	if got := run("THROTTLE.CHECK", "tenant:a:cli", "10", "1m"); !strings.HasPrefix(got, "1\n10\n9") {
		t.Errorf("THROTTLE.CHECK own key via redis-cli: %q", got)
	}
	if got := run("THROTTLE.CHECK", "tenant:b:cli", "10", "1m"); got != noPermKey {
		t.Errorf("THROTTLE.CHECK B's key via redis-cli: %q, want %q", got, noPermKey)
	}
	if n := mustDo(t, ctx, admin, "EXISTS", "tenant:b:cli"); n != int64(0) {
		t.Errorf("denied key exists: %v", n)
	}

	// redis-cli --scan as the tenant lists the tenant's keys only.
	mustDo(t, ctx, admin, "ACL", "SETUSER", "tenanta", "+scan")
	want := []string{"tenant:a:cli"}
	for i := range 50 {
		for _, tn := range []string{"a", "b"} {
			k := fmt.Sprintf("tenant:%s:k%02d", tn, i)
			mustDo(t, ctx, admin, "THROTTLE.CHECK", k, "10", "1m")
			if tn == "a" {
				want = append(want, k)
			}
		}
	}
	slices.Sort(want)
	for _, pattern := range []string{"*", "tenant:*", "tenant:b:*"} {
		got := strings.Fields(run("--scan", "--pattern", pattern))
		slices.Sort(got)
		w := want
		if pattern == "tenant:b:*" {
			w = nil
		}
		if !slices.Equal(got, w) {
			t.Errorf("redis-cli --scan --pattern %s as tenanta:\n got %q\nwant %q", pattern, got, w)
		}
	}
}

func TestACLFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "users.acl")
	hash := "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8" // sha256("password")
	if err := os.WriteFile(path, []byte("user default on nopass ~* &* +@all\nuser carol on #"+hash+" ~c:* +@throttle\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, func(c *server.Config) { c.ACLFile = path })
	c := dialRaw(t, ts.Addr)
	if r := c.do(t, "AUTH", "carol", "password"); r != "OK" {
		t.Fatalf("AUTH carol from the file = %v", r)
	}
	if r := c.do(t, "AUTH", "default", "x"); r != "OK" {
		t.Fatalf("AUTH default (nopass) = %v", r)
	}
	if r := c.do(t, "ACL", "SETUSER", "dave", "on", ">dpw", "%R~d:*", "+throttle.peek"); r != "OK" {
		t.Fatalf("SETUSER = %v", r)
	}
	list := fmt.Sprint(c.do(t, "ACL", "LIST"))
	if r := c.do(t, "ACL", "SAVE"); r != "OK" {
		t.Fatalf("ACL SAVE = %v", r)
	}
	saved, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := "user carol on sanitize-payload #" + hash + " ~c:* resetchannels -@all +@throttle\n" +
		"user dave on sanitize-payload #" + sha256Hex("dpw") + " %R~d:* resetchannels -@all +throttle.peek\n" +
		"user default on nopass sanitize-payload ~* &* +@all\n"
	if string(saved) != want {
		t.Fatalf("saved file:\n%s\nwant:\n%s", saved, want)
	}
	// Reloading the saved file gives the same users.
	if r := c.do(t, "ACL", "LOAD"); r != "OK" {
		t.Fatalf("ACL LOAD = %v", r)
	}
	if got := fmt.Sprint(c.do(t, "ACL", "LIST")); got != list {
		t.Fatalf("ACL LIST after SAVE and LOAD:\n%s\nwant\n%s", got, list)
	}
	// A bad file changes nothing.
	if err := os.WriteFile(path, []byte("user erin on +nosuchcommand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, ok := c.do(t, "ACL", "LOAD").(respErr)
	if !ok || !strings.Contains(string(r), "Error in applying operation '+nosuchcommand'") ||
		!strings.HasSuffix(string(r), "no change to the previously active ACL rules was performed") {
		t.Fatalf("ACL LOAD of a bad file = %v", r)
	}
	if got := fmt.Sprint(c.do(t, "ACL", "LIST")); got != list {
		t.Fatalf("ACL LIST after a failed LOAD changed:\n%s", got)
	}
	// Without a file: Redis's error.
	ts2 := startServer(t, nil)
	c2 := dialRaw(t, ts2.Addr)
	if r := c2.do(t, "ACL", "SAVE"); !strings.HasPrefix(fmt.Sprint(r), "ERR This Redis instance is not configured to use an ACL file.") {
		t.Fatalf("ACL SAVE without aclfile = %v", r)
	}
	// A server does not start with a bad file.
	if _, err := server.New(server.Config{Addr: "127.0.0.1:0", ACLFile: path}, shard.New(shard.Config{})); err == nil {
		t.Fatal("server.New with a bad ACL file: no error")
	}
}

func TestACLUserChangedOrDeleted(t *testing.T) {
	ts := startServer(t, nil)
	admin := dialRaw(t, ts.Addr)
	admin.do(t, "ACL", "SETUSER", "carol", "on", ">cpw", "~*", "+@all")
	c := dialRaw(t, ts.Addr)
	if r := c.do(t, "AUTH", "carol", "cpw"); r != "OK" {
		t.Fatalf("AUTH = %v", r)
	}
	if r := c.do(t, "PING"); r != "PONG" {
		t.Fatalf("PING = %v", r)
	}
	admin.do(t, "ACL", "SETUSER", "carol", "-ping")
	if r := c.do(t, "PING"); r != respErr("NOPERM this user has no permissions to run the 'ping' command") {
		t.Fatalf("PING after -ping = %v", r)
	}
	if r := admin.do(t, "ACL", "DELUSER", "carol"); r != int64(1) {
		t.Fatalf("DELUSER = %v", r)
	}
	c.send(t, encodeCommand("ECHO", "x"))
	c.expectClosed(t)
	if r := admin.do(t, "PING"); r != "PONG" {
		t.Fatalf("admin PING = %v", r)
	}
}

// dialFrom connects to addr from the local IP src.
func dialFrom(t *testing.T, src, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, src, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &rawConn{Conn: c, r: newReader(c)}
}

func TestProtectedMode(t *testing.T) {
	const denied = "DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user."
	t.Run("refused", func(t *testing.T) {
		ts := startServer(t, func(c *server.Config) { c.ProtectedMode = true })
		c := dialFrom(t, "127.0.0.2", ts.Addr)
		c.send(t, encodeCommand("PING"))
		r, ok := c.read(t).(respErr)
		if !ok || !strings.HasPrefix(string(r), denied) {
			t.Fatalf("reply from 127.0.0.2 = %v", r)
		}
		c.expectClosed(t)
		local := dialFrom(t, "127.0.0.1", ts.Addr)
		if r := local.do(t, "PING"); r != "PONG" {
			t.Fatalf("PING from 127.0.0.1 = %v", r)
		}
	})
	t.Run("password", func(t *testing.T) {
		ts := startServer(t, func(c *server.Config) { c.ProtectedMode, c.RequirePass = true, "pw" })
		c := dialFrom(t, "127.0.0.2", ts.Addr)
		if r := c.do(t, "PING"); r != respErr("NOAUTH Authentication required.") {
			t.Fatalf("PING before AUTH = %v", r)
		}
		if r := c.do(t, "AUTH", "pw"); r != "OK" {
			t.Fatalf("AUTH = %v", r)
		}
		if r := c.do(t, "PING"); r != "PONG" {
			t.Fatalf("PING = %v", r)
		}
	})
	t.Run("off", func(t *testing.T) {
		ts := startServer(t, nil)
		c := dialFrom(t, "127.0.0.2", ts.Addr)
		if r := c.do(t, "PING"); r != "PONG" {
			t.Fatalf("PING with protected mode off = %v", r)
		}
	})
}

// TestAuthFailThrottle sends 10,000 wrong passwords from 127.0.0.3 while
// clients on 127.0.0.1 connect, authenticate and run commands; it asserts
// that the attacker is refused after its burst and that every other
// client succeeds, and logs the others' latency under attack beside the
// same clients' latency alone, measured first on the same server.
func TestAuthFailThrottle(t *testing.T) {
	const limit, attempts = 5, 10000
	ts := startServer(t, func(c *server.Config) {
		c.RequirePass, c.AuthFailLimit, c.AuthFailPeriod = "right", limit, time.Hour
	})
	// others runs 4 clients x 200 rounds of connect, AUTH, THROTTLE.CHECK
	// and returns each round's latency, sorted.
	others := func() []time.Duration {
		const workers, rounds = 4, 200
		lat := make([][]time.Duration, workers)
		errs := make(chan error, workers)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < rounds; i++ {
					start := time.Now()
					c, err := net.DialTimeout("tcp", ts.Addr, 5*time.Second)
					if err != nil {
						errs <- err
						return
					}
					rc := &rawConn{Conn: c, r: newReader(c)}
					rc.send(t, encodeCommand("AUTH", "right")+encodeCommand("THROTTLE.CHECK", fmt.Sprint("k", w), "1000000", "1s"))
					if r := rc.read(t); r != "OK" {
						errs <- fmt.Errorf("worker %d: AUTH = %v", w, r)
					}
					if _, ok := rc.read(t).([]any); !ok {
						errs <- fmt.Errorf("worker %d: THROTTLE.CHECK failed", w)
					}
					lat[w] = append(lat[w], time.Since(start))
					_ = c.Close()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		all := slices.Concat(lat...)
		slices.Sort(all)
		return all
	}
	alone := others()

	var wg sync.WaitGroup
	var wrongPass, throttled int
	wg.Add(1)
	go func() {
		defer wg.Done()
		var c *rawConn
		for i := 0; i < attempts; i++ {
			if c == nil {
				c = dialFrom(t, "127.0.0.3", ts.Addr)
			}
			c.send(t, encodeCommand("AUTH", "default", fmt.Sprint("guess", i)))
			r, _ := c.read(t).(respErr)
			switch {
			case strings.HasPrefix(string(r), "WRONGPASS"):
				wrongPass++
			case strings.HasPrefix(string(r), "ERR too many failed authentication attempts, retry in "):
				throttled++
				c.expectClosed(t)
				_ = c.Close()
				c = nil
			default:
				t.Errorf("attempt %d: reply %q", i, r)
				return
			}
		}
	}()
	attacked := others()
	wg.Wait()
	if wrongPass != limit || throttled != attempts-limit {
		t.Errorf("attacker got %d WRONGPASS and %d refusals, want %d and %d", wrongPass, throttled, limit, attempts-limit)
	}
	p := func(d []time.Duration, q int) time.Duration { return d[len(d)*q/100] }
	if len(alone) > 0 && len(attacked) > 0 {
		t.Logf("other clients, connect+AUTH+THROTTLE.CHECK: alone p50 %v p99 %v; beside the attacker p50 %v p99 %v (p99 ratio %.2f)",
			p(alone, 50), p(alone, 99), p(attacked, 50), p(attacked, 99), float64(p(attacked, 99))/float64(p(alone, 99)))
	}
}

func newReader(c net.Conn) *bufio.Reader { return bufio.NewReaderSize(c, 64<<10) }

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
