package upstream

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
)

// TestCluster runs the scripts on a real 6-node Redis Cluster (3 masters,
// 3 replicas) started for the test.
func TestCluster(t *testing.T) {
	cl := clustertest.Start(t)
	c, err := Dial(cl.URL(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	cc := c.rdb.(*redis.ClusterClient)

	t.Run("Slots", func(t *testing.T) {
		// Slot agrees with the cluster's own CLUSTER KEYSLOT.
		keys := []string{"", "a", "foo", "123456789", "{user1000}.following", "{tenant}:x", "x{}y", "{}{a}", "a{b}{c}", "{", "}{x}"}
		for i := 0; i < 200; i++ {
			keys = append(keys, "k"+strconv.Itoa(i*7919), "{t"+strconv.Itoa(i)+"}:k")
		}
		for _, k := range keys {
			want, err := cc.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := Slot(k); int64(got) != want {
				t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
			}
		}
	})

	t.Run("Differential", func(t *testing.T) {
		// Each sequence keeps its keys under one hash tag (so MCHECK and
		// RESET over them run), and the sequences' tags fall on slots of
		// every master.
		var tl tally
		masters := map[string]bool{}
		for seq := uint64(0); seq < 9; seq++ {
			tag := "{c" + strconv.FormatUint(seq, 10) + "}:"
			shard, err := cc.MasterForKey(ctx, tag)
			if err != nil {
				t.Fatal(err)
			}
			masters[shard.Options().Addr] = true
			runSequenceKeys(t, c, 100+seq, 250, &tl, tag)
		}
		if len(masters) != 3 {
			t.Errorf("the sequences used %d masters, want all 3", len(masters))
		}
		for op := range tl.ops {
			if tl.ops[op][outAllowed] == 0 {
				t.Errorf("no admitted %s on the cluster", opNames[op])
			}
		}
	})

	t.Run("Admission", func(t *testing.T) {
		// Slots, reservations and bans keep their records on their user
		// key's slot: each script's keys share one slot, the cluster runs
		// it on that slot's master, and the results are limits.Local's.
		// The sequences' keys (no hash tag, and braces that are none)
		// fall on every master.
		tl := admTally{}
		masters := map[string]bool{}
		for seq := uint64(0); seq < 6; seq++ {
			prefix := "adm" + strconv.FormatUint(seq, 10) + ":"
			for i := 0; i < 3; i++ {
				shard, err := cc.MasterForKey(ctx, prefix+strconv.Itoa(i))
				if err != nil {
					t.Fatal(err)
				}
				masters[shard.Options().Addr] = true
			}
			runAdmissionSequence(t, c, 200+seq, 200, prefix, &tl)
		}
		if len(masters) != 3 {
			t.Errorf("the sequences used %d masters, want all 3", len(masters))
		}
		for _, k := range []string{"acquire=1", "release=1", "reserve=1", "settle-charge", "checkban=0", "banned>0"} {
			if tl[k] == 0 {
				t.Errorf("no %s outcome on the cluster", k)
			}
		}
	})

	t.Run("CrossSlot", func(t *testing.T) {
		a, b := "xa", "xb"
		if Slot(a) == Slot(b) {
			t.Fatal("test keys share a slot")
		}
		lim, _ := engine.NewLimit(engine.KindFixed, 10, 1e9, 0)
		at := c.At(1_795_000_000_000_000_000)
		_, err := at.MCheck(ctx, []Rule{{a, lim}, {b, lim}}, 1)
		if CodeOf(err) != CodeCrossSlot {
			t.Fatalf("MCheck over two slots: %v, want CodeCrossSlot", err)
		}
		if _, err := at.Reset(ctx, a, b); CodeOf(err) != CodeCrossSlot {
			t.Fatalf("Reset over two slots: %v, want CodeCrossSlot", err)
		}
		for _, k := range []string{a, b} {
			if n, _ := cc.Exists(ctx, k).Result(); n != 0 {
				t.Errorf("key %s exists after a refused call", k)
			}
		}
		// The same script sent anyway: the cluster's own CROSSSLOT reply
		// maps to the same code.
		err = classify(c.s.mcheck.Eval(ctx, cc, []string{a, b}, "1", "1", "fixed", 10, 1e9, 0, "fixed", 10, 1e9, 0).Err())
		if CodeOf(err) != CodeCrossSlot {
			t.Fatalf("cluster's reply to a cross-slot script: %v, want CodeCrossSlot", err)
		}
		// Keys under one tag go together.
		m, err := at.MCheck(ctx, []Rule{{"{t}:a", lim}, {"{t}:b", lim}}, 1)
		if err != nil || !m.Allowed {
			t.Fatalf("MCheck under one hash tag: %+v, %v", m, err)
		}
	})

	t.Run("Moved", func(t *testing.T) {
		// A cluster client whose slot map puts every slot on a master that
		// does not own the key's slot: the call goes there first, gets
		// MOVED and follows it.
		key := "moved-key"
		owner, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var wrong string
		for i := 0; i < 100; i++ {
			m, err := cc.MasterForKey(ctx, "m"+strconv.Itoa(i))
			if err != nil {
				t.Fatal(err)
			}
			if a := m.Options().Addr; a != owner.Options().Addr {
				wrong = a
				break
			}
		}
		if wrong == "" {
			t.Fatal("no master other than the key's owner found")
		}
		// The wrong node really answers MOVED for this key.
		direct := redis.NewClient(&redis.Options{Addr: wrong})
		defer direct.Close()
		_, err = direct.Get(ctx, key).Result()
		if addr, ok := redis.IsMovedError(err); !ok || addr != owner.Options().Addr {
			t.Fatalf("GET %s on %s: %v, want MOVED to %s", key, wrong, err, owner.Options().Addr)
		}
		skewed := redis.NewClusterClient(&redis.ClusterOptions{
			ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
				return []redis.ClusterSlot{{Start: 0, End: NumSlots - 1, Nodes: []redis.ClusterNode{{Addr: wrong}}}}, nil
			},
		})
		defer skewed.Close()
		sc := New(skewed)
		lim, _ := engine.NewLimit(engine.KindGCRA, 5, 1e9, 0)
		now := int64(1_795_000_000_000_000_000)
		m := newModel()
		for i := 0; i < 7; i++ {
			got, err := sc.At(now).Check(ctx, key, lim, 1)
			want, _ := m.check(key, lim, now, 1)
			if err != nil || got != want {
				t.Fatalf("check %d through a skewed slot map: %+v, %v; want %+v", i, got, err, want)
			}
		}
		if raw, _ := cc.Get(ctx, key).Result(); raw != m.raw(key) {
			t.Fatalf("key holds %q on the cluster, want %q", raw, m.raw(key))
		}
	})

	t.Run("Replicated", func(t *testing.T) {
		// A replica holds what its master's script stored.
		key := "{rep}:k"
		lim, _ := engine.NewLimit(engine.KindToken, 10, 1e9, 0)
		if _, err := c.At(1_795_000_000_000_000_000).Check(ctx, key, lim, 3); err != nil {
			t.Fatal(err)
		}
		master, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		want, err := master.Get(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n, err := master.Wait(ctx, 1, 0).Result(); err != nil || n < 1 {
			t.Fatalf("WAIT 1: %d, %v", n, err)
		}
		id, err := master.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		lines, err := master.ClusterSlaves(ctx, id).Result()
		if err != nil || len(lines) != 1 {
			t.Fatalf("CLUSTER REPLICAS of the master: %q, %v; want one replica", lines, err)
		}
		addr, _, _ := strings.Cut(strings.Fields(lines[0])[1], "@")
		ro := redis.NewClient(&redis.Options{Addr: addr, OnConnect: func(ctx context.Context, cn *redis.Conn) error {
			return cn.ReadOnly(ctx).Err()
		}})
		defer ro.Close()
		if got, err := ro.Get(ctx, key).Result(); err != nil || got != want {
			t.Fatalf("replica holds %q (%v), master %q", got, err, want)
		}
	})

	t.Run("NoScript", func(t *testing.T) {
		if err := c.Load(ctx); err != nil {
			t.Fatal(err)
		}
		// Load put every script on every master.
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			for _, s := range c.s.all() {
				ex, err := m.ScriptExists(ctx, s.Hash()).Result()
				if err != nil || !ex[0] {
					return fmt.Errorf("%s: script %s not loaded: %v", m.Options().Addr, s.Hash(), err)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		testNoScript(t, c, func() error {
			return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.ScriptFlush(ctx).Err() })
		}, func(sha string) (bool, error) {
			owner, err := cc.MasterForKey(ctx, "ns")
			if err != nil {
				return false, err
			}
			ex, err := owner.ScriptExists(ctx, sha).Result()
			return err == nil && ex[0], err
		})
	})

	t.Run("Pipe", func(t *testing.T) {
		// One pipeline over keys of every master: go-redis splits it by
		// node, and each key's calls keep their order.
		testPipe(t, c, "cp:")
		testPipeNoScript(t, c, "cpns:", func() error {
			return cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.ScriptFlush(ctx).Err() })
		})
	})

	t.Run("Stop", func(t *testing.T) {
		// The script stops every node: none accepts a connection after.
		cl.Stop(t)
		for _, a := range cl.Seeds {
			if conn, err := net.Dial("tcp", a); err == nil {
				_ = conn.Close()
				t.Errorf("node %s still accepts connections after stop", a)
			}
		}
	})
}

// testNoScript flushes the script cache and checks that a call still works
// (EVALSHA gets NOSCRIPT, the client sends EVAL) and leaves the script
// cached again on the node that owns key "ns".
func testNoScript(t *testing.T, c *Client, flush func() error, exists func(sha string) (bool, error)) {
	t.Helper()
	ctx := context.Background()
	sha := c.s.check.Hash()
	if _, err := c.Check(ctx, "ns", engine.Limit{Algo: engine.KindFixed, Limit: 3, Period: 1e9}, 1); err != nil {
		t.Fatal(err)
	}
	if ok, err := exists(sha); err != nil || !ok {
		t.Fatalf("check script not cached after a call: %v, %v", ok, err)
	}
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	if ok, err := exists(sha); err != nil || ok {
		t.Fatalf("check script still cached after SCRIPT FLUSH: %v, %v", ok, err)
	}
	d, err := c.Check(ctx, "ns", engine.Limit{Algo: engine.KindFixed, Limit: 3, Period: 1e9}, 0)
	if err != nil || d.Limit != 3 {
		t.Fatalf("check after SCRIPT FLUSH: %+v, %v", d, err)
	}
	if ok, err := exists(sha); err != nil || !ok {
		t.Fatalf("check script not cached again by the EVAL fallback: %v, %v", ok, err)
	}
}
