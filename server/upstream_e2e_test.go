package server_test

// End-to-end tests of the server over an upstream (park.go, package
// upstream/tier): a real redis-server or a real 6-node Redis Cluster, the
// server in front of it, go-redis as the client. Every server runs at one
// injected instant, and the upstream scripts at the server's instant
// (tier.Config.ServerClock), so replies compare exactly with an in-memory
// server's and nothing depends on how long anything takes.

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/internal/testdeps"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/policy"
	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/upstream"
	"github.com/throttlekit/throttlekit-server/upstream/tier"
)

// upClock is an injected clock shared by the servers of a test.
type upClock struct{ ns atomic.Int64 }

func newUpClock() *upClock {
	c := &upClock{}
	c.ns.Store(1_800_000_000_123_000_000) // 2027, not on a second boundary
	return c
}

func (c *upClock) now() int64 { return c.ns.Load() }

// upOpts configures startUpstream.
type upOpts struct {
	mode     tier.Mode
	prefixes []tier.PrefixMode
	failOpen bool
	batch    int64
	sizer    throttlekit.Sizer // --upstream-batch auto when set
	// mutate, if set, changes the server's Config last.
	mutate   func(*server.Config)
	policies *policy.Store // --policies, for THROTTLE.* POLICY
	// upstreamClock runs the scripts at the upstream's TIME, as in
	// production, instead of the server's injected instant (benchmarks).
	upstreamClock bool
}

// startUpstream starts a server whose backend is the upstream at url.
func startUpstream(t testing.TB, url string, clk *upClock, o upOpts) (*testServer, **tier.Backend) {
	t.Helper()
	c, err := upstream.Dial(url, upstream.Options{Timeout: 2 * time.Second, PoolSize: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var b *tier.Backend
	ts := startServer(t, func(cfg *server.Config) {
		cfg.Clock = clk.now
		if o.policies != nil {
			cfg.Policies = o.policies
		}
		cfg.Upstream = server.UpstreamConfig{
			New: func(local *limits.Local) (limits.Backend, error) {
				var err error
				b, err = tier.New(tier.Config{Client: c, Local: local, Mode: o.mode, Prefixes: o.prefixes,
					FailOpen: o.failOpen, Workers: 8, ServerClock: !o.upstreamClock, Batch: o.batch, Sizer: o.sizer})
				return b, err
			},
			Info: func() [][2]string { return b.InfoFields() },
		}
		if c.Cluster() {
			cfg.Upstream.SameSlot = func(keys [][]byte) bool {
				for _, k := range keys[1:] {
					if upstream.Slot(string(k)) != upstream.Slot(string(keys[0])) {
						return false
					}
				}
				return true
			}
		}
		if o.mutate != nil {
			o.mutate(cfg)
		}
	})
	t.Cleanup(func() { b.Close() })
	return ts, &b
}

func goredis(t *testing.T, addr string, proto int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: proto, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// reply runs one command and returns its reply or its error text.
func reply(c *redis.Client, args ...string) any {
	a := make([]any, len(args))
	for i, s := range args {
		a[i] = s
	}
	v, err := c.Do(context.Background(), a...).Result()
	if err != nil {
		return "error: " + err.Error()
	}
	return v
}

// sameAsMemory runs every command on an in-memory server and on one over
// the upstream (strict, or as opts says), at the same instants, and wants
// the same replies.
func sameAsMemory(t *testing.T, url string, cmds [][]string, opts ...upOpts) {
	var o upOpts
	if len(opts) > 0 {
		o = opts[0]
	}
	for _, proto := range []int{2, 3} {
		clk := newUpClock()
		mem := startServer(t, func(cfg *server.Config) { cfg.Clock = clk.now })
		up, _ := startUpstream(t, url, clk, o)
		mc, uc := goredis(t, mem.Addr, proto), goredis(t, up.Addr, proto)
		prefix := "p" + strconv.Itoa(proto) + ":"
		for i, cmd := range cmds {
			if cmd[0] == "ADVANCE" {
				d, _ := time.ParseDuration(cmd[1])
				clk.ns.Add(int64(d))
				continue
			}
			c := append([]string(nil), cmd...)
			for j := range c {
				c[j] = strings.ReplaceAll(c[j], "$", prefix)
			}
			want, got := reply(mc, c...), reply(uc, c...)
			if !reflect.DeepEqual(want, got) {
				t.Errorf("RESP%d command %d %q: upstream %#v, in memory %#v", proto, i, c, got, want)
			}
		}
	}
}

// commandScript exercises every THROTTLE.* command the upstream serves and
// CL.THROTTLE; "$" becomes a per-run prefix, {t} keeps multi-key calls on
// one slot.
var commandScript = [][]string{
	{"THROTTLE.CHECK", "${t}g", "3", "1s"},
	{"THROTTLE.CHECK", "${t}g", "3", "1s", "COST", "2"},
	{"THROTTLE.CHECK", "${t}g", "3", "1s"},
	{"THROTTLE.PEEK", "${t}g", "3", "1s"},
	{"THROTTLE.CHECK", "${t}tb", "5", "1s", "ALGO", "token", "BURST", "2"},
	{"THROTTLE.CHECK", "${t}tb", "5", "1s", "ALGO", "token", "BURST", "2", "COST", "2"},
	{"THROTTLE.CHECK", "${t}fx", "2", "1s", "ALGO", "fixed"},
	{"THROTTLE.CHECK", "${t}fx", "2", "1s", "ALGO", "fixed"},
	{"THROTTLE.CHECK", "${t}fx", "2", "1s", "ALGO", "fixed"},
	{"THROTTLE.CHECK", "${t}sl", "2", "1s", "ALGO", "sliding"},
	{"ADVANCE", "700ms"},
	{"THROTTLE.CHECK", "${t}g", "3", "1s"},
	{"THROTTLE.CHECK", "${t}fx", "2", "1s", "ALGO", "fixed"},
	{"THROTTLE.CHECK", "${t}sl", "2", "1s", "ALGO", "sliding", "COST", "2"},
	{"THROTTLE.PEEK", "${t}sl", "2", "1s", "ALGO", "sliding"},
	{"THROTTLE.MCHECK", "2", "${t}m1", "5", "1s", "fixed", "${t}m2", "1", "1s", "gcra"},
	{"THROTTLE.MCHECK", "2", "${t}m1", "5", "1s", "fixed", "${t}m2", "1", "1s", "gcra"},
	{"THROTTLE.PEEK", "${t}m1", "5", "1s", "ALGO", "fixed"},
	{"THROTTLE.LEASE", "${t}ls", "100", "1s", "BATCH", "30"},
	{"THROTTLE.LEASE", "${t}ls", "100", "1s", "BATCH", "80"},
	{"CL.THROTTLE", "${t}cell", "5", "10", "60"},
	{"CL.THROTTLE", "${t}cell", "5", "10", "60", "3"},
	{"CL.THROTTLE", "${t}cell", "5", "10", "60", "0"},
	{"THROTTLE.CHECK", "${t}g", "3", "1s", "ALGO", "fixed"},
	{"THROTTLE.CHECK", "${t}g", "0", "1s"},
	{"THROTTLE.CHECK", "${t}g", "3", "1s", "COST", "-1"},
	{"CL.THROTTLE", "${t}cell", "-1", "10", "60"},
	{"THROTTLE.RESET", "${t}g", "${t}fx", "${t}none"},
	{"THROTTLE.CHECK", "${t}g", "3", "1s"},
	{"DEL", "${t}tb"},
}

func TestUpstreamStrictSameRepliesAsMemory(t *testing.T) {
	t.Run("server", func(t *testing.T) {
		sameAsMemory(t, "redis://"+clustertest.Server(t), commandScript)
	})
	t.Run("cluster", func(t *testing.T) {
		cl := clustertest.Start(t)
		sameAsMemory(t, cl.URL(), commandScript)
		execSameAsMemory(t, cl.URL())
		sameAsMemory(t, cl.URL(), gcraScript)
		testCrossSlot(t, cl.URL())
		testSharedBudget(t, cl.URL())
		testCachedDeny(t, cl)
		testLeased(t, cl)
	})
}

// gcraScript exercises Redis's GCRA command: admissions, denials with
// their retry-after, TOKENS, a cost that never fits, the overflow errors,
// WRONGTYPE both ways, expiry after the burst is back, a reset.
var gcraScript = [][]string{
	{"GCRA", "$r", "2", "10", "1"},
	{"GCRA", "$r", "2", "10", "1", "TOKENS", "2"},
	{"GCRA", "$r", "2", "10", "1"},
	{"GCRA", "$r", "2", "10", "1"},
	{"ADVANCE", "150ms"},
	{"GCRA", "$r", "2", "10", "1"},
	{"GCRA", "$r", "2", "10", "1", "TOKENS", "4"},
	{"GCRA", "$r", "2", "10", "1", "tokens", "1"},
	{"ADVANCE", "2500ms"},
	{"GCRA", "$r", "2", "10", "1", "TOKENS", "3"},
	{"GCRA", "$slow", "0", "1", "90"},
	{"GCRA", "$slow", "0", "1", "90"},
	{"ADVANCE", "89999ms"},
	{"GCRA", "$slow", "0", "1", "90"},
	{"ADVANCE", "1ms"},
	{"GCRA", "$slow", "0", "1", "90"},
	{"GCRA", "$frac", "5", "3", "0.5"},
	{"GCRA", "$frac", "5", "3", "0.5", "TOKENS", "5"},
	{"GCRA", "$ovf", "1", "1", "99999999999", "TOKENS", "9223372036854775807"},
	{"GCRA", "$ovf", "9223372036854775807", "1", "99999999999"},
	{"THROTTLE.CHECK", "$r", "3", "1s"},
	{"CL.THROTTLE", "$cell", "5", "10", "60"},
	{"GCRA", "$cell", "5", "10", "60"},
	{"THROTTLE.RESET", "$r"},
	{"GCRA", "$r", "2", "10", "1"},
}

// TestUpstreamGCRASameAsMemory: Redis's GCRA command over an upstream
// (gcra.lua, strict in every mode, parked replies) answers as the
// in-memory server does at the same instants, errors included, in strict
// and in leased mode. (The leased run leaves out THROTTLE.CHECK, whose
// leased decisions report the upstream as of the last grant.)
func TestUpstreamGCRASameAsMemory(t *testing.T) {
	sameAsMemory(t, "redis://"+clustertest.Server(t), gcraScript)
	var noCheck [][]string
	for _, c := range gcraScript {
		if c[0] != "THROTTLE.CHECK" {
			noCheck = append(noCheck, c)
		}
	}
	sameAsMemory(t, "redis://"+clustertest.Server(t), noCheck, upOpts{mode: tier.ModeLeased})
}

// TestUpstreamPolicySameAsMemory: THROTTLE.CHECK, PEEK and LEASE with
// POLICY over an upstream (parked replies) answer as in memory, at the
// same instants, errors included.
func TestUpstreamPolicySameAsMemory(t *testing.T) {
	st, err := policy.Open(filepath.Join("testdata", "policies", "api.yaml"), policy.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	url := "redis://" + clustertest.Server(t)
	clk := newUpClock()
	mem := startServer(t, func(cfg *server.Config) { cfg.Clock = clk.now; cfg.Policies = st })
	up, _ := startUpstream(t, url, clk, upOpts{policies: st})
	mc, uc := goredis(t, mem.Addr, 3), goredis(t, up.Addr, 3)
	for i, c := range [][]string{
		{"THROTTLE.CHECK", "pk", "POLICY", "api/free"},
		{"THROTTLE.CHECK", "pk", "POLICY", "api/free", "COST", "2"},
		{"THROTTLE.CHECK", "pk", "POLICY", "api/free"},
		{"THROTTLE.PEEK", "pk", "POLICY", "api/free"},
		{"THROTTLE.PEEK", "pp", "POLICY", "api/pro", "COST", "2"},
		{"THROTTLE.CHECK", "pp", "POLICY", "api/pro", "COST", "2"},
		{"THROTTLE.CHECK", "pp", "POLICY", "api/pro"},
		{"THROTTLE.LEASE", "pl", "POLICY", "api/free", "BATCH", "2"},
		{"THROTTLE.LEASE", "pl", "POLICY", "api/free", "BATCH", "2"},
		{"THROTTLE.CHECK", "pi", "POLICY", "api/internal"},
		{"THROTTLE.CHECK", "pb", "POLICY", "api/banned"},
		{"THROTTLE.CHECK", "pk", "POLICY", "api/nosuch"},
		{"THROTTLE.CHECK", "pk", "POLICY", "api/free", "COST", "-1"},
	} {
		want, got := reply(mc, c...), reply(uc, c...)
		if !reflect.DeepEqual(want, got) {
			t.Errorf("command %d %q: upstream %#v, in memory %#v", i, c, got, want)
		}
	}
}

// testCrossSlot: MCHECK and EXEC over keys of different slots get Redis
// Cluster's CROSSSLOT error and change nothing.
func testCrossSlot(t *testing.T, url string) {
	clk := newUpClock()
	up, _ := startUpstream(t, url, clk, upOpts{})
	c := goredis(t, up.Addr, 2)
	a, b := "xa", "xb"
	for upstream.Slot(a) == upstream.Slot(b) {
		b += "b"
	}
	got := reply(c, "THROTTLE.MCHECK", "2", a, "5", "1s", "fixed", b, "5", "1s", "fixed")
	if got != "error: CROSSSLOT Keys in request don't hash to the same slot" {
		t.Fatalf("MCHECK over two slots: %#v", got)
	}
	for _, k := range []string{a, b} {
		if d := reply(c, "THROTTLE.PEEK", k, "5", "1s", "ALGO", "fixed"); !reflect.DeepEqual(d.([]any)[2], int64(5)) {
			t.Errorf("after the refused MCHECK %s: %#v, want remaining 5", k, d)
		}
	}
	ctx := context.Background()
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "THROTTLE.CHECK", a, "5", "1s")
		p.Do(ctx, "THROTTLE.CHECK", b, "5", "1s")
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("EXEC over two slots: %v", err)
	}
	if d := reply(c, "THROTTLE.PEEK", a, "5", "1s"); d.([]any)[2] != int64(5) {
		t.Errorf("after the refused EXEC %s: %#v", a, d)
	}
	// One slot: EXEC runs.
	cmds, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Do(ctx, "THROTTLE.CHECK", "{x}1", "5", "1s")
		p.Do(ctx, "THROTTLE.CHECK", "{x}2", "5", "1s")
		return nil
	})
	if err != nil || len(cmds) != 2 {
		t.Fatalf("EXEC on one slot: %v", err)
	}
}

// testSharedBudget: two servers over one upstream admit one budget.
func testSharedBudget(t *testing.T, url string) {
	clk := newUpClock()
	s1, _ := startUpstream(t, url, clk, upOpts{})
	s2, _ := startUpstream(t, url, clk, upOpts{})
	c1, c2 := goredis(t, s1.Addr, 2), goredis(t, s2.Addr, 3)
	allowed := 0
	for i := 0; i < 40; i++ {
		c := c1
		if i%2 == 1 {
			c = c2
		}
		v := reply(c, "THROTTLE.CHECK", "shared", "10", "1m", "ALGO", "fixed")
		switch r := v.(type) {
		case []any:
			allowed += int(r[0].(int64))
		case map[any]any:
			allowed += int(r["allowed"].(int64))
		default:
			t.Fatalf("reply %#v", v)
		}
	}
	if allowed != 10 {
		t.Fatalf("two servers admitted %d of a budget of 10", allowed)
	}
}

// scriptCalls returns the EVALSHA and EVAL calls every node of the
// cluster has counted (INFO commandstats).
func scriptCalls(t *testing.T, seeds []string) int64 {
	t.Helper()
	var n int64
	for _, s := range seeds {
		c := redis.NewClient(&redis.Options{Addr: s})
		info, err := c.Info(context.Background(), "commandstats").Result()
		_ = c.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if strings.HasPrefix(line, "cmdstat_evalsha:calls=") || strings.HasPrefix(line, "cmdstat_eval:calls=") {
				f := strings.TrimPrefix(strings.SplitN(line, ",", 2)[0], "cmdstat_evalsha:calls=")
				f = strings.TrimPrefix(f, "cmdstat_eval:calls=")
				v, _ := strconv.ParseInt(f, 10, 64)
				n += v
			}
		}
	}
	return n
}

// testCachedDeny: 10,000 checks of a denied key cost at most 2 upstream
// calls in cached-deny mode, and the key is admitted again once its
// retry-after has passed on the server's clock.
func testCachedDeny(t *testing.T, cl *clustertest.Cluster) {
	clk := newUpClock()
	up, b := startUpstream(t, cl.URL(), clk, upOpts{prefixes: []tier.PrefixMode{{Prefix: "cd:", Mode: tier.ModeCachedDeny}}})
	c := goredis(t, up.Addr, 2)
	if v := reply(c, "THROTTLE.CHECK", "cd:k", "1", "1s"); v.([]any)[0] != int64(1) {
		t.Fatalf("first check: %#v", v)
	}
	before := scriptCalls(t, cl.Seeds)
	var last any
	for i := 0; i < 10000; i++ {
		last = reply(c, "THROTTLE.CHECK", "cd:k", "1", "1s")
		if last.([]any)[0] != int64(0) {
			t.Fatalf("check %d of a denied key: %#v", i, last)
		}
	}
	calls := scriptCalls(t, cl.Seeds) - before
	if calls > 2 {
		t.Fatalf("10k checks of a denied key cost %d upstream script calls, want <= 2", calls)
	}
	t.Logf("cached-deny: 10000 denied checks, %d upstream script calls, %d answered locally", calls, (*b).UpstreamStats().CachedDenials)
	clk.ns.Add(int64(time.Second))
	if v := reply(c, "THROTTLE.CHECK", "cd:k", "1", "1s"); v.([]any)[0] != int64(1) {
		t.Fatalf("after the retry-after: %#v", v)
	}
	// A strict key is never cached.
	reply(c, "THROTTLE.CHECK", "st:k", "1", "1s")
	before = scriptCalls(t, cl.Seeds)
	for i := 0; i < 10; i++ {
		reply(c, "THROTTLE.CHECK", "st:k", "1", "1s")
	}
	if n := scriptCalls(t, cl.Seeds) - before; n != 10 {
		t.Fatalf("10 strict checks cost %d upstream calls, want 10", n)
	}
}

// startRedisAt starts redis-server on addr (the test's own process, so the
// test can stop it) and returns its stop function.
func startRedisAt(t *testing.T, addr string) func() {
	t.Helper()
	bin := testdeps.Require(t, "redis-server")[0]
	_, port, _ := net.SplitHostPort(addr)
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() { _ = cmd.Process.Kill(); <-exited }
	t.Cleanup(stop)
	for deadline := time.Now().Add(20 * time.Second); ; { // a bound on a broken start, not a timing
		if cn, err := net.Dial("tcp", addr); err == nil {
			_ = cn.Close()
			return stop
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not start on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUpstreamFailure: while the upstream is down, closed answers
// -TRYAGAIN and open answers from local state (counted); both serve from
// the upstream again once it is back.
func TestUpstreamFailure(t *testing.T) {
	for _, open := range []bool{false, true} {
		t.Run(fmt.Sprintf("open=%v", open), func(t *testing.T) {
			addr := testserver.FreeAddr(t) // nothing listens yet
			clk := newUpClock()
			up, b := startUpstream(t, "redis://"+addr, clk, upOpts{failOpen: open})
			c := goredis(t, up.Addr, 2)
			for i := 0; i < 3; i++ {
				v := reply(c, "THROTTLE.CHECK", "f", "2", "1s")
				if !open {
					if v != "error: TRYAGAIN upstream unavailable" {
						t.Fatalf("closed, upstream down: %#v", v)
					}
					continue
				}
				want := int64(1)
				if i == 2 {
					want = 0 // local state enforces the limit meanwhile
				}
				if r, ok := v.([]any); !ok || r[0] != want {
					t.Fatalf("open, upstream down, check %d: %#v", i, v)
				}
			}
			st := (*b).UpstreamStats()
			if open && st.FailOpen != 3 || !open && st.FailOpen != 0 {
				t.Fatalf("fail-open answers %d", st.FailOpen)
			}
			if st.Errors[upstream.CodeUnavailable] < 3 {
				t.Fatalf("unavailable errors %d, want >= 3", st.Errors[upstream.CodeUnavailable])
			}
			stop := startRedisAt(t, addr)
			var v any
			for i := 0; i < 50; i++ { // go-redis redials at once; a few tries cover a pooled dead connection
				if v = reply(c, "THROTTLE.CHECK", "f", "2", "1s"); !strings.HasPrefix(fmt.Sprint(v), "error") {
					break
				}
			}
			if r, ok := v.([]any); !ok || r[0] != int64(1) || r[2] != int64(1) {
				t.Fatalf("upstream back: %#v", v)
			}
			stop()
			if v := reply(c, "THROTTLE.CHECK", "g", "2", "1s"); !open && v != "error: TRYAGAIN upstream unavailable" {
				t.Fatalf("closed, upstream stopped again: %#v", v)
			}
		})
	}
}

// TestUpstreamPipelineOrder: a pipeline mixing upstream commands and
// local ones (PING, ECHO) gets its replies in order.
func TestUpstreamPipelineOrder(t *testing.T) {
	url := "redis://" + clustertest.Server(t)
	up, _ := startUpstream(t, url, newUpClock(), upOpts{})
	c := goredis(t, up.Addr, 2)
	ctx := context.Background()
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < 200; i++ {
			p.Do(ctx, "THROTTLE.CHECK", "o"+strconv.Itoa(i%7), "1000", "1s", "ALGO", "fixed")
			p.Do(ctx, "ECHO", strconv.Itoa(i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ {
		d := cmds[2*i].(*redis.Cmd).Val().([]any)
		if want := int64(1000 - (i/7 + 1)); d[2] != want {
			t.Fatalf("reply %d: remaining %v, want %d", i, d[2], want)
		}
		if e := cmds[2*i+1].(*redis.Cmd).Val(); e != strconv.Itoa(i) {
			t.Fatalf("echo %d: %v", i, e)
		}
	}
}
