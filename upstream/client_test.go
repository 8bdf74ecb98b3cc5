package upstream

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
)

func TestSlotVectors(t *testing.T) {
	// CRC16/XMODEM's check value, and slots from the Redis Cluster spec.
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for _, c := range []struct {
		key  string
		slot int
	}{{"foo", 12182}, {"bar", 5061}, {"{user1000}.following", Slot("user1000")}, {"{}x", Slot("{}x")}, {"a{}{b}", Slot("a{}{b}")}} {
		if got := Slot(c.key); got != c.slot {
			t.Errorf("Slot(%q) = %d, want %d", c.key, got, c.slot)
		}
	}
	if Slot("{tenant}:a") != Slot("{tenant}:b") || Slot("{tenant}:a") != Slot("tenant") {
		t.Error("keys with one hash tag fall on different slots")
	}
	if Slot("{}x") != int(crc16("{}x")%NumSlots) || Slot("a{b") != int(crc16("a{b")%NumSlots) {
		t.Error("an empty or unclosed tag must hash the whole key")
	}
}

func TestParseURL(t *testing.T) {
	for _, c := range []struct {
		url     string
		addrs   []string // cluster seeds, or the single address
		cluster bool
		db      int
		user    string
		pass    string
		tls     bool
		bad     bool
	}{
		{url: "redis://127.0.0.1:6379", addrs: []string{"127.0.0.1:6379"}},
		{url: "redis://u:p@h:1/3", addrs: []string{"h:1"}, db: 3, user: "u", pass: "p"},
		{url: "rediss://h:2", addrs: []string{"h:2"}, tls: true},
		{url: "redis-cluster://a:1,b:2,c:3", addrs: []string{"a:1", "b:2", "c:3"}, cluster: true},
		{url: "rediss-cluster://u:p@a:1,b:2", addrs: []string{"a:1", "b:2"}, cluster: true, user: "u", pass: "p", tls: true},
		{url: "redis-cluster://a:1/2", bad: true},
		{url: "redis-cluster://a:1,b", bad: true},
		{url: "redis-cluster://a:1,,b:2", bad: true},
		{url: "redis-cluster://a:1?addr=b:2", bad: true},
		{url: "http://a:1", bad: true},
		{url: "redis://h:1/x", bad: true},
		{url: "::", bad: true},
	} {
		o, co, err := parseURL(c.url)
		if c.bad {
			if err == nil || !errors.Is(err, ErrURL) {
				t.Errorf("%s: err %v, want ErrURL", c.url, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.url, err)
			continue
		}
		if c.cluster {
			if co == nil || strings.Join(co.Addrs, ",") != strings.Join(c.addrs, ",") || co.Username != c.user ||
				co.Password != c.pass || (co.TLSConfig != nil) != c.tls {
				t.Errorf("%s: cluster options %+v", c.url, co)
			}
			continue
		}
		if o == nil || o.Addr != c.addrs[0] || o.DB != c.db || o.Username != c.user || o.Password != c.pass ||
			(o.TLSConfig != nil) != c.tls {
			t.Errorf("%s: options %+v", c.url, o)
		}
	}
}

// TestDialOptions: Timeout and PoolSize reach go-redis, with defaults.
func TestDialOptions(t *testing.T) {
	c, err := Dial("redis://127.0.0.1:1", Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := c.rdb.(*redis.Client).Options()
	if o.ReadTimeout != DefaultTimeout || o.DialTimeout != DefaultTimeout || o.PoolSize != DefaultPoolSize {
		t.Errorf("defaults: %+v", o)
	}
	_ = c.Close()
	c, err = Dial("redis-cluster://127.0.0.1:1,127.0.0.1:2", Options{Timeout: 3 * time.Second, PoolSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	co := c.rdb.(*redis.ClusterClient).Options()
	if co.ReadTimeout != 3*time.Second || co.WriteTimeout != 3*time.Second || co.PoolSize != 7 || !c.cluster {
		t.Errorf("options: %+v", co)
	}
	_ = c.Close()
}

// TestUnavailable: a call to an upstream that refuses connections fails
// with CodeUnavailable.
func TestUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	c, err := Dial("redis://"+addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Check(context.Background(), "k", engine.Limit{Algo: engine.KindGCRA, Limit: 1, Period: 1e9}, 1)
	if CodeOf(err) != CodeUnavailable {
		t.Fatalf("check on a closed port: %v, want CodeUnavailable", err)
	}
}

// TestTimeout: an upstream that accepts and never answers fails the call
// with CodeUnavailable once Options.Timeout passes.
func TestTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	c, err := Dial("redis://"+ln.Addr().String(), Options{Timeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Check(context.Background(), "k", engine.Limit{Algo: engine.KindGCRA, Limit: 1, Period: 1e9}, 1)
	var ne net.Error
	if CodeOf(err) != CodeUnavailable || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("check on a silent server: %v, want CodeUnavailable wrapping a timeout", err)
	}
}

// fakeRedisErr is a reply error as go-redis returns one.
type fakeRedisErr string

func (e fakeRedisErr) Error() string { return string(e) }
func (fakeRedisErr) RedisError()     {}

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err  error
		code Code
		is   error
	}{
		{fakeRedisErr("WRONGTYPE Operation against a key holding the wrong kind of value"), CodeWrongType, engine.ErrWrongType},
		{fakeRedisErr("TKERR 6 parameters out of range script: x"), CodeEngine, engine.ErrOutOfRange},
		{fakeRedisErr("TKERR 11 quantity out of range"), CodeEngine, engine.ErrQuantityRange},
		{fakeRedisErr("TKERR 99 what"), CodeScript, nil},
		{fakeRedisErr("TKERR"), CodeScript, nil},
		{fakeRedisErr("TKERR "), CodeScript, nil},
		{fakeRedisErr("TKERR 257 wraps to 1"), CodeScript, nil},
		{fakeRedisErr("CROSSSLOT Keys in request don't hash to the same slot"), CodeCrossSlot, ErrCrossSlot},
		{fakeRedisErr("CLUSTERDOWN The cluster is down"), CodeUnavailable, nil},
		{fakeRedisErr("TRYAGAIN Multiple keys request during rehashing of slot"), CodeUnavailable, nil},
		{fakeRedisErr("LOADING Redis is loading the dataset in memory"), CodeUnavailable, nil},
		{fakeRedisErr("MASTERDOWN Link with MASTER is down"), CodeUnavailable, nil},
		{fakeRedisErr("ERR Error running script"), CodeScript, nil},
		{context.DeadlineExceeded, CodeUnavailable, context.DeadlineExceeded},
		{redis.ErrClosed, CodeUnavailable, redis.ErrClosed},
		{redis.ErrPoolTimeout, CodeUnavailable, nil},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, CodeUnavailable, nil},
		{errors.New("redis: can't parse reply"), CodeScript, nil},
	} {
		err := classify(c.err)
		if CodeOf(err) != c.code || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("classify(%v) = %v, want code %s", c.err, err, c.code)
		}
	}
	if classify(nil) != nil {
		t.Error("classify(nil) != nil")
	}
}

func TestSingleServer(t *testing.T) {
	addr := clustertest.Server(t)
	c, err := Dial("redis://"+addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	r := c.rdb.(*redis.Client)

	t.Run("NoScript", func(t *testing.T) {
		testNoScript(t, c, func() error { return r.ScriptFlush(ctx).Err() }, func(sha string) (bool, error) {
			ex, err := r.ScriptExists(ctx, sha).Result()
			return err == nil && ex[0], err
		})
	})

	t.Run("ServerClock", func(t *testing.T) {
		// Without At the scripts read the server's TIME: the TAT a GCRA
		// check stores is TIME+T for a TIME read between the calls before
		// and after, and Redis expires the key at the stored expiry.
		key := "clock"
		lim, _ := engine.NewLimit(engine.KindGCRA, 10, 1e9, 0)
		before := serverNow(t, r)
		if _, err := c.Check(ctx, key, lim, 1); err != nil {
			t.Fatal(err)
		}
		after := serverNow(t, r)
		raw, err := r.Get(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		f := strings.Fields(raw)
		tat, _ := strconv.ParseInt(f[1], 10, 64)
		exp, _ := strconv.ParseInt(f[3], 10, 64)
		if f[0] != "1" || tat-1e8 < before || tat-1e8 > after || exp != tat {
			t.Fatalf("stored %q: want a GCRA TAT of TIME+100ms with TIME in [%d, %d], expiring at the TAT", raw, before, after)
		}
		pexp, err := r.PExpireTime(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if want := (exp + 999_999) / 1e6; pexp != time.Duration(want)*time.Millisecond {
			t.Fatalf("PEXPIRETIME %v, want %d ms (the stored expiry rounded up)", pexp, want)
		}
	})

	t.Run("DenialWritesNothing", func(t *testing.T) {
		// A denial that leaves the state as it is sends no SET or DEL.
		lim, _ := engine.NewLimit(engine.KindFixed, 2, 60e9, 0)
		at := c.At(1_795_000_000_000_000_000)
		for i := 0; i < 2; i++ {
			if d, err := at.Check(ctx, "deny", lim, 1); err != nil || d.Allowed != 1 {
				t.Fatalf("check %d: %+v, %v", i, d, err)
			}
		}
		if err := r.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if d, err := at.Check(ctx, "deny", lim, 1); err != nil || d.Allowed != 0 {
				t.Fatalf("denied check %d: %+v, %v", i, d, err)
			}
		}
		stats, err := r.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(stats, "cmdstat_get:calls=3") || strings.Contains(stats, "cmdstat_set:") ||
			strings.Contains(stats, "cmdstat_del:") {
			t.Fatalf("three denials: want 3 GETs and no SET or DEL, commandstats:\n%s", stats)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		// 16 goroutines sharing the Client check one fixed window of 100
		// 400 times: the script runs atomically, so exactly 100 pass.
		lim, _ := engine.NewLimit(engine.KindFixed, 100, 60e9, 0)
		at := c.At(1_795_000_000_000_000_000)
		var allowed atomic.Int64
		var wg sync.WaitGroup
		for g := 0; g < 16; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 25; i++ {
					d, err := at.Check(ctx, "conc", lim, 1)
					if err != nil {
						t.Error(err)
						return
					}
					allowed.Add(d.Allowed)
				}
			}()
		}
		wg.Wait()
		if n := allowed.Load(); n != 100 {
			t.Fatalf("%d admitted, want 100", n)
		}
	})

	t.Run("ForeignType", func(t *testing.T) {
		// A key that holds a Redis list, or a string that is no state, is
		// WRONGTYPE like a state of another algorithm.
		if err := r.RPush(ctx, "list", "x").Err(); err != nil {
			t.Fatal(err)
		}
		if err := r.Set(ctx, "str", "hello", 0).Err(); err != nil {
			t.Fatal(err)
		}
		lim, _ := engine.NewLimit(engine.KindFixed, 10, 1e9, 0)
		for _, k := range []string{"list", "str"} {
			_, err := c.Check(ctx, k, lim, 1)
			if CodeOf(err) != CodeWrongType || !errors.Is(err, engine.ErrWrongType) {
				t.Errorf("check on %s: %v, want CodeWrongType", k, err)
			}
			_, err = c.MCheck(ctx, []Rule{{"fresh-" + k, lim}, {k, lim}}, 1)
			if CodeOf(err) != CodeWrongType {
				t.Errorf("mcheck with %s: %v, want CodeWrongType", k, err)
			}
			if n, _ := r.Exists(ctx, "fresh-"+k).Result(); n != 0 {
				t.Errorf("mcheck that failed on %s left fresh-%s consumed", k, k)
			}
		}
	})

	t.Run("Args", func(t *testing.T) {
		lim, _ := engine.NewLimit(engine.KindFixed, 10, 1e9, 0)
		if _, err := c.MCheck(ctx, nil, 1); CodeOf(err) != CodeArgs {
			t.Errorf("MCheck without rules: %v", err)
		}
		if _, err := c.MCheck(ctx, []Rule{{"a", lim}, {"a", lim}}, 1); CodeOf(err) != CodeArgs {
			t.Errorf("MCheck naming a key twice: %v", err)
		}
		if _, err := c.Reset(ctx); CodeOf(err) != CodeArgs {
			t.Errorf("Reset without keys: %v", err)
		}
		if _, err := c.Check(ctx, "a", engine.Limit{Algo: engine.KindGCRA, Limit: 0, Period: 1}, 1); CodeOf(err) != CodeEngine ||
			!errors.Is(err, engine.ErrLimit) {
			t.Errorf("Check with limit 0: %v", err)
		}
		// Garbage straight to the script gets a clear error, not a crash.
		err := classify(c.run(ctx, c.s.check, []string{"a"}, "", "check", "gcra", "ten", 1e9, 0, 1).Err())
		if CodeOf(err) != CodeScript || !strings.Contains(err.Error(), "limit is not an integer") {
			t.Errorf("non-numeric limit: %v", err)
		}
		err = classify(c.run(ctx, c.s.check, []string{"a"}, "99999999999999999999", "check", "gcra", 1, 1e9, 0, 1).Err())
		if CodeOf(err) != CodeScript || !strings.Contains(err.Error(), "now is not an integer or out of range") {
			t.Errorf("now beyond int64: %v", err)
		}
		err = classify(c.run(ctx, c.s.check, []string{"a"}, "", "check", "leaky", 1, 1e9, 0, 1).Err())
		if CodeOf(err) != CodeEngine || !errors.Is(err, engine.ErrAlgo) {
			t.Errorf("unknown algorithm: %v", err)
		}
	})
}

// serverNow reads the server's TIME in ns.
func serverNow(t *testing.T, r *redis.Client) int64 {
	t.Helper()
	tm, err := r.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixNano()
}
