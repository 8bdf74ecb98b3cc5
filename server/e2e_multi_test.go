package server_test

// End-to-end tests of transactions and keyspace commands over real TCP:
// EXEC's atomicity across shards under 50 concurrent connections, SCAN over
// a large keyspace while keys come and go, and redis-cli --scan.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/testdeps"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
)

// startWithStore serves store on a free port until the test ends.
func startWithStore(t *testing.T, store *shard.Store) string {
	t.Helper()
	addr := testserver.FreeAddr(t)
	srv, err := server.New(server.Config{Addr: addr, Loops: 2, Version: "0.0.0-e2e",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	})
	// A deadline for a broken start only; nothing is timed.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if srv.Ready() {
			if c, err := net.Dial("tcp", addr); err == nil {
				_ = c.Close()
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("server on %s not ready", addr)
		}
	}
}

// txConn is a connection usable from any goroutine: errors are returned.
type txConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialTx(addr string) (*txConn, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &txConn{c: c, r: bufio.NewReader(c)}, nil
}

// pipeline sends the commands in one write and reads one reply each.
func (c *txConn) pipeline(cmds ...[]string) ([]any, error) {
	var b strings.Builder
	for _, a := range cmds {
		b.WriteString(encodeCommand(a...))
	}
	_ = c.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c.c, b.String()); err != nil {
		return nil, err
	}
	out := make([]any, len(cmds))
	for i := range out {
		v, err := readReply(c.r)
		if err != nil {
			return nil, err
		}
		if e, ok := v.(respErr); ok {
			return nil, fmt.Errorf("%q: %s", cmds[i], e)
		}
		out[i] = v
	}
	return out, nil
}

// otherShard returns a key that the store keeps in another shard than k:
// a Txn locked for k alone refuses it.
func otherShard(t *testing.T, s *shard.Store, k string) string {
	t.Helper()
	var tx shard.Txn
	for i := 0; i < 10000; i++ {
		cand := k + ":" + strconv.Itoa(i)
		tx.Begin(s)
		_ = tx.Add([]byte(k))
		_ = tx.Lock()
		_, _, err := tx.Get([]byte(cand), 0)
		tx.Unlock()
		if err == shard.ErrNotLocked {
			return cand
		}
	}
	t.Fatal("no key on another shard")
	return ""
}

// TestExecAtomicAcrossShards: 50 connections race transactions that check
// two keys on different shards against a limit of 100. Exactly 100 see
// both allowed and none sees one allowed and the other denied; a reader
// peeking both keys in a transaction never sees their counts differ.
func TestExecAtomicAcrossShards(t *testing.T) {
	store := shard.New(shard.Config{})
	addr := startWithStore(t, store)
	k1 := "tx:k1"
	k2 := otherShard(t, store, k1)
	// 100 per 1000 hours: no unit comes back while the test runs, however
	// slow the machine.
	check := func(k string) []string { return []string{"THROTTLE.CHECK", k, "100", "1000h"} }
	peek := func(k string) []string { return []string{"THROTTLE.PEEK", k, "100", "1000h"} }

	const conns, perConn = 50, 4
	var (
		wg                sync.WaitGroup
		mu                sync.Mutex
		both, mixed, none int
		errs              []error
		stop              = make(chan struct{})
		peeks, diffs      int
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	// The reader.
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		c, err := dialTx(addr)
		if err != nil {
			fail(err)
			return
		}
		defer c.c.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			r, err := c.pipeline([]string{"MULTI"}, peek(k1), peek(k2), []string{"EXEC"})
			if err != nil {
				fail(err)
				return
			}
			ex := r[3].([]any)
			a, err1 := toDecision(ex[0], 2)
			b, err2 := toDecision(ex[1], 2)
			if err1 != nil || err2 != nil {
				fail(fmt.Errorf("peek replies %v: %v %v", ex, err1, err2))
				return
			}
			mu.Lock()
			peeks++
			if a.Remaining != b.Remaining {
				diffs++
			}
			mu.Unlock()
		}
	}()
	for i := 0; i < conns; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialTx(addr)
			if err != nil {
				fail(err)
				return
			}
			defer c.c.Close()
			for j := 0; j < perConn; j++ {
				r, err := c.pipeline([]string{"MULTI"}, check(k1), check(k2), []string{"EXEC"})
				if err != nil {
					fail(err)
					return
				}
				ex, ok := r[3].([]any)
				if !ok || len(ex) != 2 {
					fail(fmt.Errorf("EXEC = %#v", r[3]))
					return
				}
				a, err1 := toDecision(ex[0], 2)
				b, err2 := toDecision(ex[1], 2)
				if err1 != nil || err2 != nil {
					fail(fmt.Errorf("check replies %v: %v %v", ex, err1, err2))
					return
				}
				mu.Lock()
				switch {
				case a.Allowed == 1 && b.Allowed == 1:
					both++
				case a.Allowed == 0 && b.Allowed == 0:
					none++
				default:
					mixed++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-readerDone
	for _, err := range errs {
		t.Error(err)
	}
	if both != 100 || mixed != 0 || none != conns*perConn-100 {
		t.Errorf("both allowed %d, mixed %d, both denied %d; want 100, 0, %d", both, mixed, none, conns*perConn-100)
	}
	if diffs != 0 || peeks == 0 {
		t.Errorf("the reader saw the two counts differ %d times in %d transactions", diffs, peeks)
	}
}

// hourState is a Transform that gives a key GCRA state for an hour.
type hourState struct{}

func (hourState) Apply(_ engine.State, now int64) (engine.State, int64) {
	return engine.State{A: now + int64(time.Hour), Kind: engine.KindGCRA}, int64(time.Hour)
}

// TestScanUnderChurn: SCAN over a large keyspace (1M keys, 200k with
// -short) while other connections insert short-lived keys and delete them
// returns every key that existed throughout.
func TestScanUnderChurn(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 200_000
	}
	store := shard.New(shard.Config{})
	now := time.Now().UnixNano()
	key := make([]byte, 0, 32)
	for i := 0; i < n; i++ {
		key = strconv.AppendInt(append(key[:0], "stable:"...), int64(i), 10)
		store.Apply(key, now, hourState{})
	}
	addr := startWithStore(t, store)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var churnErr error
	var errMu sync.Mutex
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialTx(addr)
			if err != nil {
				errMu.Lock()
				churnErr = err
				errMu.Unlock()
				return
			}
			defer c.c.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				// A batch of keys that live 1 ms, and deletes of earlier ones:
				// inserts grow the tables, expiries and deletes empty slots.
				var cmds [][]string
				for j := 0; j < 50; j++ {
					k := fmt.Sprintf("churn:%d:%d:%d", w, i, j)
					cmds = append(cmds, []string{"THROTTLE.CHECK", k, "1", "1ms"})
					if i > 0 {
						cmds = append(cmds, []string{"DEL", fmt.Sprintf("churn:%d:%d:%d", w, i-1, j)})
					}
				}
				if _, err := c.pipeline(cmds...); err != nil {
					errMu.Lock()
					churnErr = err
					errMu.Unlock()
					return
				}
			}
		}()
	}

	c, err := dialTx(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.c.Close()
	seen := make([]bool, n)
	cursor := "0"
	pages := 0
	for {
		r, err := c.pipeline([]string{"SCAN", cursor, "COUNT", "1000"})
		if err != nil {
			t.Fatal(err)
		}
		page := r[0].([]any)
		cursor = page[0].(string)
		for _, k := range page[1].([]any) {
			s := k.(string)
			if i, ok := strings.CutPrefix(s, "stable:"); ok {
				idx, _ := strconv.Atoi(i)
				seen[idx] = true
			}
		}
		pages++
		if cursor == "0" {
			break
		}
	}
	close(stop)
	wg.Wait()
	if churnErr != nil {
		t.Fatal(churnErr)
	}
	missing := 0
	for i, ok := range seen {
		if !ok {
			if missing < 5 {
				t.Errorf("stable:%d was held throughout but not returned", i)
			}
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d keys missing after %d pages", missing, n, pages)
	}
}

// TestRedisCliScan: redis-cli --scan --pattern walks our cursor to the end.
func TestRedisCliScan(t *testing.T) {
	cli := testdeps.Require(t, "redis-cli")[0]
	store := shard.New(shard.Config{})
	addr := startWithStore(t, store)
	c, err := dialTx(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.c.Close()
	var cmds [][]string
	var want []string
	for i := 0; i < 300; i++ {
		cmds = append(cmds, []string{"THROTTLE.CHECK", fmt.Sprintf("user:%d", i), "10", "1h"})
		want = append(want, fmt.Sprintf("user:%d", i))
		cmds = append(cmds, []string{"THROTTLE.CHECK", fmt.Sprintf("other:%d", i), "10", "1h"})
	}
	if _, err := c.pipeline(cmds...); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command(cli, "-h", host, "-p", port, "--scan", "--pattern", "user:*").Output()
	if err != nil {
		t.Fatalf("redis-cli --scan: %v", err)
	}
	got := strings.Fields(string(out))
	slices.Sort(got)
	got = slices.Compact(got) // SCAN may return a key twice
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("redis-cli --scan --pattern 'user:*' returned %d keys, want %d: %v", len(got), len(want), got[:min(len(got), 10)])
	}
}
