package server_test

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/internal/testdeps"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/server"
)

// txReplies runs cmds as one MULTI/EXEC and returns each command's reply
// or error text, as reply does.
func txReplies(c *redis.Client, cmds [][]string) []any {
	ctx := context.Background()
	res, _ := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, cmd := range cmds {
			a := make([]any, len(cmd))
			for i, s := range cmd {
				a[i] = s
			}
			p.Do(ctx, a...)
		}
		return nil
	})
	out := make([]any, len(res))
	for i, r := range res {
		if v, err := r.(*redis.Cmd).Result(); err != nil {
			out[i] = "error: " + err.Error()
		} else {
			out[i] = v
		}
	}
	return out
}

// execSameAsMemory runs commandScript as transactions, one per stretch
// between ADVANCEs (with a PING and a command that fails at run time
// inside), against a server in memory and one over the upstream at url at
// the same instants: EXEC's replies agree command for command.
func execSameAsMemory(t *testing.T, url string) {
	for _, proto := range []int{2, 3} {
		clk := newUpClock()
		mem := startServer(t, func(cfg *server.Config) { cfg.Clock = clk.now })
		up, _ := startUpstream(t, url, clk, upOpts{})
		mc, uc := goredis(t, mem.Addr, proto), goredis(t, up.Addr, proto)
		prefix := "x" + strconv.Itoa(proto) + ":"
		var tx [][]string
		run := func() {
			tx = append(tx, []string{"PING"}, []string{"THROTTLE.CHECK", prefix + "{t}bad", "0", "1s"})
			want, got := txReplies(mc, tx), txReplies(uc, tx)
			if !reflect.DeepEqual(want, got) {
				t.Errorf("RESP%d EXEC of %q:\nupstream  %#v\nin memory %#v", proto, tx, got, want)
			}
			if len(got) != len(tx) {
				t.Fatalf("EXEC gave %d replies for %d commands: %#v", len(got), len(tx), got)
			}
			if _, ok := got[0].(string); ok { // a decision is an array (RESP2) or a map (RESP3)
				t.Fatalf("EXEC's first reply is no decision: %#v", got)
			}
			tx = nil
		}
		for _, cmd := range commandScript {
			if cmd[0] == "ADVANCE" {
				run()
				d, _ := time.ParseDuration(cmd[1])
				clk.ns.Add(int64(d))
				continue
			}
			c := append([]string(nil), cmd...)
			for j := range c {
				c[j] = strings.ReplaceAll(c[j], "$", prefix)
			}
			tx = append(tx, c)
		}
		run()
	}
}

func TestUpstreamExecSameAsMemory(t *testing.T) {
	execSameAsMemory(t, "redis://"+clustertest.Server(t))
}

// TestUpstreamExecRefused: a transaction holding a command the exec script
// cannot run is refused at EXEC with EXECABORT, and none of it runs.
func TestUpstreamExecRefused(t *testing.T) {
	clk := newUpClock()
	up, b := startUpstream(t, "redis://"+clustertest.Server(t), clk, upOpts{})
	c := goredis(t, up.Addr, 2)
	for _, refused := range [][]string{
		{"THROTTLE.ACQUIRE", "r:slot", "2", "10s"},
		{"THROTTLE.CHECK", "r:k", "5", "1s", "BAN", "3", "1m"},
		{"GCRA", "r:g", "10", "5", "1"},
	} {
		got := txReplies(c, [][]string{{"THROTTLE.CHECK", "r:k", "5", "1s"}, refused})
		want := "error: EXECABORT Transaction discarded because of: "
		if s, _ := got[0].(string); !strings.HasPrefix(s, want) || !strings.Contains(s, "cannot run in a transaction over an upstream") {
			t.Fatalf("EXEC with %q: %#v", refused, got)
		}
	}
	if s := (*b).UpstreamStats(); s.RoundTrips != 0 {
		t.Fatalf("refused transactions made %d upstream round trips", s.RoundTrips)
	}
	if d := reply(c, "THROTTLE.PEEK", "r:k", "5", "1s"); !reflect.DeepEqual(d.([]any)[2], int64(5)) {
		t.Fatalf("after the refused transactions: %#v, want remaining 5", d)
	}
}

// startRedisAOF starts a redis-server on addr that logs every write to an
// append-only file in dir (fsync always) and reloads it when started
// again on the same dir. It returns a function that kills it.
func startRedisAOF(t *testing.T, addr, dir string) func() {
	t.Helper()
	bin := testdeps.Require(t, "redis-server")[0]
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "yes",
		"--appendfsync", "always", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() { _ = cmd.Process.Kill(); <-exited }
	t.Cleanup(stop)
	for deadline := time.Now().Add(20 * time.Second); ; { // a bound on a broken start, not a timing
		if r := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1}); r.Ping(context.Background()).Err() == nil {
			_ = r.Close()
			return stop
		} else {
			_ = r.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not start on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestUpstreamExecNoPartialEffect: EXEC while the upstream is down answers
// -TRYAGAIN (failing closed) and, once the upstream is back with the state
// it held, none of the transaction took effect; the same transaction then
// runs whole.
func TestUpstreamExecNoPartialEffect(t *testing.T) {
	addr, dir := testserver.FreeAddr(t), t.TempDir()
	stop := startRedisAOF(t, addr, dir)
	clk := newUpClock()
	up, _ := startUpstream(t, "redis://"+addr, clk, upOpts{})
	c := goredis(t, up.Addr, 2)
	tx := [][]string{
		{"THROTTLE.CHECK", "{n}a", "5", "1m", "ALGO", "fixed"},
		{"THROTTLE.CHECK", "{n}b", "5", "1m", "ALGO", "fixed", "COST", "2"},
		{"THROTTLE.RESET", "{n}c"},
	}
	for _, cmd := range [][]string{tx[0], tx[1], {"THROTTLE.CHECK", "{n}c", "5", "1m", "ALGO", "fixed"}} {
		if v := reply(c, cmd...); fmt.Sprint(v)[:1] != "[" {
			t.Fatalf("%q: %#v", cmd, v)
		}
	}
	stop()
	if got := txReplies(c, tx); got[0] != "error: TRYAGAIN upstream unavailable" {
		t.Fatalf("EXEC with the upstream down: %#v", got)
	}
	startRedisAOF(t, addr, dir)
	peek := func() []any {
		var out []any
		for _, k := range []string{"{n}a", "{n}b", "{n}c"} {
			var v any
			for i := 0; i < 50; i++ { // the first calls may find pooled connections to the old process
				if v = reply(c, "THROTTLE.PEEK", k, "5", "1m", "ALGO", "fixed"); !strings.HasPrefix(fmt.Sprint(v), "error") {
					break
				}
			}
			r, ok := v.([]any)
			if !ok {
				t.Fatalf("peek %s: %#v", k, v)
			}
			out = append(out, r[2])
		}
		return out
	}
	if got := peek(); !reflect.DeepEqual(got, []any{int64(4), int64(3), int64(4)}) {
		t.Fatalf("remaining after the failed EXEC: %v, want 4 3 4 (as before it)", got)
	}
	got := txReplies(c, tx)
	if len(got) != 3 || got[2] != int64(1) {
		t.Fatalf("EXEC with the upstream back: %#v", got)
	}
	if got := peek(); !reflect.DeepEqual(got, []any{int64(3), int64(1), int64(5)}) {
		t.Fatalf("remaining after EXEC: %v, want 3 1 5", got)
	}
}
