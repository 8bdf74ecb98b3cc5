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

// execSameAsMemory runs commandScript, gcraScript and admissionScript as
// transactions, one per stretch between ADVANCEs (with a PING and a
// command that fails at run time inside), against a server in memory and
// one over the upstream at url at the same instants, RESP2 and RESP3:
// EXEC's replies agree command for command. Each script's keys share one
// hash tag, so a cluster runs each transaction on one slot. A step of
// admissionScript naming a token or id ("@t1") captured in the stretch
// being gathered starts a new transaction, since the token is known only
// once EXEC answers.
func execSameAsMemory(t *testing.T, url string) {
	plain := func(cmds [][]string) []admStep {
		out := make([]admStep, len(cmds))
		for i, c := range cmds {
			out[i] = admStep{cmd: c}
		}
		return out
	}
	for _, proto := range []int{2, 3} {
		clk := newUpClock()
		mem := startServer(t, func(cfg *server.Config) { cfg.Clock = clk.now })
		up, _ := startUpstream(t, url, clk, upOpts{})
		mc, uc := goredis(t, mem.Addr, proto), goredis(t, up.Addr, proto)
		for _, sc := range []struct {
			name  string
			steps []admStep
		}{{"commands", plain(commandScript)}, {"gcra", plain(gcraScript)}, {"admission", admissionScript}} {
			prefix := "x" + strconv.Itoa(proto) + "{" + sc.name + "}:"
			memIDs, upIDs := map[string]string{}, map[string]string{}
			args := func(cmd []string, ids map[string]string) []string {
				c := append([]string(nil), cmd...)
				for j := range c {
					c[j] = strings.ReplaceAll(c[j], "$", prefix)
					if strings.HasPrefix(c[j], "@") {
						c[j] = ids[c[j][1:]]
					}
				}
				return c
			}
			var tx []admStep
			pending := map[string]bool{} // captures of tx, not known yet
			captures, txs := 0, 0
			run := func() {
				tx = append(tx, admStep{cmd: []string{"PING"}}, admStep{cmd: []string{"THROTTLE.CHECK", "${t}bad", "0", "1s"}})
				var mcmds, ucmds [][]string
				for _, st := range tx {
					mcmds, ucmds = append(mcmds, args(st.cmd, memIDs)), append(ucmds, args(st.cmd, upIDs))
				}
				want, got := txReplies(mc, mcmds), txReplies(uc, ucmds)
				if len(got) != len(tx) || len(want) != len(tx) {
					t.Fatalf("RESP%d %s: EXEC gave %d and %d replies for %d commands: %#v", proto, sc.name, len(got), len(want), len(tx), got)
				}
				for i, st := range tx {
					if st.capture == "" {
						continue
					}
					var wid, gid string
					want[i], wid = captured(want[i], st.capture)
					got[i], gid = captured(got[i], st.capture)
					if wid == "" || gid == "" {
						t.Fatalf("RESP%d %q: no token or id to capture: memory %#v, upstream %#v", proto, st.cmd, want[i], got[i])
					}
					memIDs[st.capture], upIDs[st.capture] = wid, gid
					captures++
				}
				if !reflect.DeepEqual(want, got) {
					t.Errorf("RESP%d EXEC of %q:\nupstream  %#v\nin memory %#v", proto, ucmds, got, want)
				}
				tx, pending = nil, map[string]bool{}
				txs++
			}
			for _, st := range sc.steps {
				if st.cmd[0] == "ADVANCE" {
					run()
					d, _ := time.ParseDuration(st.cmd[1])
					clk.ns.Add(int64(d))
					continue
				}
				for _, a := range st.cmd {
					if strings.HasPrefix(a, "@") && pending[a[1:]] {
						run()
						break
					}
				}
				if st.capture != "" {
					pending[st.capture] = true
				}
				tx = append(tx, st)
			}
			run()
			if sc.name == "admission" && captures != 8 {
				t.Fatalf("RESP%d: captured %d tokens and ids in %d transactions, want 8", proto, captures, txs)
			}
		}
	}
}

func TestUpstreamExecSameAsMemory(t *testing.T) {
	execSameAsMemory(t, "redis://"+clustertest.Server(t))
}

// TestUpstreamExecAdmission: a transaction holding admission commands and
// GCRA with a check runs as one script (one upstream round trip), every
// command answered as it is alone.
func TestUpstreamExecAdmission(t *testing.T) {
	clk := newUpClock()
	up, b := startUpstream(t, "redis://"+clustertest.Server(t), clk, upOpts{})
	c := goredis(t, up.Addr, 2)
	got := txReplies(c, [][]string{
		{"THROTTLE.CHECK", "r:k", "5", "1s"},
		{"THROTTLE.ACQUIRE", "r:slot", "2", "10s"},
		{"THROTTLE.CHECK", "r:k", "5", "1s", "BAN", "3", "1m"},
		{"GCRA", "r:g", "10", "5", "1"},
		{"THROTTLE.BANNED", "r:k"},
	})
	if len(got) != 5 || got[4] != int64(0) {
		t.Fatalf("EXEC: %#v", got)
	}
	for i, v := range got[:4] {
		if r, ok := v.([]any); !ok || r[0] != int64(1) && i != 3 || i == 3 && r[0] != int64(0) {
			t.Fatalf("EXEC reply %d: %#v (all %#v)", i, v, got)
		}
	}
	if s := (*b).UpstreamStats(); s.RoundTrips != 1 {
		t.Fatalf("the transaction made %d upstream round trips, want 1", s.RoundTrips)
	}
	if d := reply(c, "THROTTLE.PEEK", "r:k", "5", "1s"); !reflect.DeepEqual(d.([]any)[2], int64(3)) {
		t.Fatalf("after the transaction: %#v, want remaining 3", d)
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
// it held, none of the transaction took effect (checks, a reset, a slot, a
// GCRA admission, a ban); the same transaction then runs whole.
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
		{"THROTTLE.ACQUIRE", "{n}s", "1", "1m"},
		{"GCRA", "{n}g", "0", "1", "60"},
		{"THROTTLE.CHECK", "{n}x", "1", "1m", "COST", "2", "BAN", "1", "1m"},
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
	if v := reply(c, "THROTTLE.BANNED", "{n}x"); v != int64(0) {
		t.Fatalf("ban after the failed EXEC: %#v, want none", v)
	}
	// The slot (limit 1) and the GCRA budget (one a minute) are still
	// free: the failed EXEC took neither.
	got := txReplies(c, tx)
	first := func(v any) any {
		if r, ok := v.([]any); ok && len(r) > 0 {
			return r[0]
		}
		return v
	}
	if len(got) != 6 || got[2] != int64(1) || first(got[3]) != int64(1) || first(got[4]) != int64(0) || first(got[5]) != int64(0) {
		t.Fatalf("EXEC with the upstream back: %#v", got)
	}
	if v := reply(c, "THROTTLE.BANNED", "{n}x"); v != int64(60000) {
		t.Fatalf("ban after EXEC: %#v, want 60000", v)
	}
	if got := peek(); !reflect.DeepEqual(got, []any{int64(3), int64(1), int64(5)}) {
		t.Fatalf("remaining after EXEC: %v, want 3 1 5", got)
	}
}
