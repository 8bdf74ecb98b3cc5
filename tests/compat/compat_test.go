// Package compat drives a real throttlekit-server with the Redis clients
// users have — redis-py, ioredis 5 and 6, go-redis — through the features
// those clients build on: transactions (MULTI/EXEC/WATCH), keyspace
// commands and the connect handshake.
package compat

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/throttlekit/throttlekit-server/internal/testdeps"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

// python returns an interpreter that has redis-py (Debian's python3-redis).
func python(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import redis").Run() == nil {
			return p
		}
	}
	testdeps.Require(t, "python3-with-redis-py")
	return ""
}

// node returns the node binary, with tests/compat/node's packages installed.
func node(t *testing.T) string {
	t.Helper()
	bin := testdeps.Require(t, "node")[0]
	dir := filepath.Join(testserver.Root(t), "tests", "compat", "node")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ioredis")); err != nil {
		testdeps.Require(t, "tests/compat/node/node_modules (scripts/install-deps.sh runs npm ci there)")
	}
	return bin
}

// run executes a client script and decodes the JSON it prints.
func run(t *testing.T, name string, args ...string) map[string]any {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("%s %v: %v\nstdout: %s\nstderr: %s", name, args, err, out, ee.Stderr)
	} else if err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("%s %v printed %q: %v", name, args, out, err)
	}
	return m
}

// decision turns a THROTTLE decision as a client decoded it (a RESP2 array
// or a RESP3 map) into [allowed, limit, remaining].
func decision(t *testing.T, v any) [3]int64 {
	t.Helper()
	switch d := v.(type) {
	case []any:
		if len(d) == 5 {
			return [3]int64{num(t, d[0]), num(t, d[1]), num(t, d[2])}
		}
		if len(d) == 10 { // a RESP3 map flattened into an array of pairs
			m := map[string]any{}
			for i := 0; i < 10; i += 2 {
				m[d[i].(string)] = d[i+1]
			}
			return decision(t, m)
		}
	case map[string]any:
		return [3]int64{num(t, d["allowed"]), num(t, d["limit"]), num(t, d["remaining"])}
	}
	t.Fatalf("not a decision: %#v", v)
	return [3]int64{}
}

func num(t *testing.T, v any) int64 {
	t.Helper()
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("not a number: %#v", v)
	}
	return int64(f)
}

func TestRedisPy(t *testing.T) {
	py := python(t)
	srv := testserver.Start(t)
	script := filepath.Join(testserver.Root(t), "tests", "compat", "py", "compat.py")

	t.Run("pipeline is a transaction", func(t *testing.T) {
		m := run(t, py, script, srv.Port, "pipeline")
		ex := m["exec"].([]any)
		if len(ex) != 2 || decision(t, ex[0]) != [3]int64{1, 10, 9} || decision(t, ex[1]) != [3]int64{1, 10, 9} {
			t.Fatalf("exec = %v", ex)
		}
	})
	t.Run("a queued syntax error aborts and consumes nothing", func(t *testing.T) {
		m := run(t, py, script, srv.Port, "abort")
		// Redis answers the bad command with its error while queuing and
		// EXEC with EXECABORT; redis-py then raises the queuing error (its
		// ExecAbortError only when no command failed to queue), exactly as
		// it does against redis-server 7.
		e, _ := m["error"].(map[string]any)
		if e == nil || e["name"] != "ResponseError" ||
			!strings.Contains(e["message"].(string), "wrong number of arguments for 'throttle.check' command") {
			t.Fatalf("error = %v (exec %v)", m["error"], m["exec"])
		}
		if got := decision(t, m["peek"]); got != [3]int64{1, 10, 10} {
			t.Fatalf("PEEK after the aborted transaction = %v, want nothing consumed", got)
		}
	})
	t.Run("WATCH aborts when the key changed", func(t *testing.T) {
		m := run(t, py, script, srv.Port, "watch")
		e, _ := m["error"].(map[string]any)
		if e == nil || e["name"] != "WatchError" {
			t.Fatalf("error = %v (exec %v)", m["error"], m["exec"])
		}
		if got := decision(t, m["peek"]); got != [3]int64{1, 10, 8} {
			t.Fatalf("PEEK = %v, want the two checks outside the transaction only", got)
		}
	})
	t.Run("scan_iter, ttl, type, exists, delete", func(t *testing.T) {
		m := run(t, py, script, srv.Port, "scan")
		keys := m["keys"].([]any)
		if len(keys) != 25 {
			t.Fatalf("scan_iter(match='user:*') returned %d keys: %v", len(keys), keys)
		}
		for _, k := range keys {
			if !strings.HasPrefix(k.(string), "user:") {
				t.Fatalf("scan returned %q", k)
			}
		}
		if ttl := num(t, m["ttl"]); ttl <= 0 || ttl > 3600 {
			t.Fatalf("ttl = %d", ttl)
		}
		if m["type"] != "gcra" || num(t, m["exists"]) != 1 || num(t, m["deleted"]) != 1 {
			t.Fatalf("type/exists/deleted = %v %v %v", m["type"], m["exists"], m["deleted"])
		}
	})
}

func TestIoredis(t *testing.T) {
	nodeBin := node(t)
	srv := testserver.Start(t)
	script := filepath.Join(testserver.Root(t), "tests", "compat", "node", "compat.js")
	for _, lib := range []string{"ioredis5", "ioredis"} {
		t.Run(lib+" multi", func(t *testing.T) {
			m := run(t, nodeBin, script, lib, srv.Port, "multi")
			ex, _ := m["exec"].([]any)
			if len(ex) != 2 {
				t.Fatalf("exec = %v (%v)", m["exec"], m["fatal"])
			}
			for i, pair := range ex {
				p := pair.([]any)
				if p[0] != nil {
					t.Fatalf("command %d failed: %v", i, p[0])
				}
				if got := decision(t, p[1]); got[0] != 1 || got[1] != 10 {
					t.Fatalf("command %d = %v", i, got)
				}
			}
		})
		t.Run(lib+" multi with a syntax error", func(t *testing.T) {
			m := run(t, nodeBin, script, lib, srv.Port, "abort")
			e, _ := m["error"].(map[string]any)
			if e == nil || !strings.Contains(e["message"].(string), "EXECABORT") {
				t.Fatalf("error = %v, exec = %v", m["error"], m["exec"])
			}
		})
		t.Run(lib+" ready check (INFO)", func(t *testing.T) {
			m := run(t, nodeBin, script, lib, srv.Port, "info")
			if info, _ := m["info"].(string); !strings.Contains(info, "loading:0") {
				t.Fatalf("INFO = %q", info)
			}
		})
	}
	// Two aborted transactions on io:c, one per library: nothing consumed.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	v, err := rdb.Do(context.Background(), "THROTTLE.PEEK", "io:c", 10, "1m").Result()
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := v.(map[any]any); !ok || m["remaining"] != int64(10) {
		t.Fatalf("PEEK io:c = %v, want remaining 10", v)
	}
}

func TestGoRedisTransactions(t *testing.T) {
	srv := testserver.Start(t)
	ctx := context.Background()
	for _, proto := range []int{2, 3} {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: proto})
		defer rdb.Close()
		key := "go:tx:" + string(rune('0'+proto))
		cmds, err := rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Do(ctx, "THROTTLE.CHECK", key, 3, "1h")
			p.Do(ctx, "THROTTLE.CHECK", key, 3, "1h")
			return nil
		})
		if err != nil || len(cmds) != 2 {
			t.Fatalf("RESP%d TxPipelined: %v %v", proto, cmds, err)
		}
		// WATCH: a change by another client between WATCH and EXEC aborts.
		other := redis.NewClient(&redis.Options{Addr: srv.Addr, Protocol: proto})
		defer other.Close()
		err = rdb.Watch(ctx, func(tx *redis.Tx) error {
			if err := other.Do(ctx, "THROTTLE.CHECK", key, 3, "1h").Err(); err != nil {
				return err
			}
			_, err := tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Do(ctx, "THROTTLE.CHECK", key, 3, "1h")
				return nil
			})
			return err
		}, key)
		if !errors.Is(err, redis.TxFailedErr) {
			t.Fatalf("RESP%d Watch after a concurrent change: err = %v, want TxFailedErr", proto, err)
		}
		res, err := rdb.Do(ctx, "THROTTLE.PEEK", key, 3, "1h").Slice()
		if err != nil {
			// RESP3 decodes a decision as a map.
			m, err2 := rdb.Do(ctx, "THROTTLE.PEEK", key, 3, "1h").Result()
			if err2 != nil {
				t.Fatal(err, err2)
			}
			if m.(map[any]any)["remaining"] != int64(0) {
				t.Fatalf("RESP%d PEEK = %v, want 3 consumed", proto, m)
			}
			continue
		}
		if res[2] != int64(0) {
			t.Fatalf("RESP%d PEEK = %v, want 3 consumed", proto, res)
		}
	}
}
