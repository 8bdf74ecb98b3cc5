package server

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"
)

// step is one command of a scripted exchange and the reply expected; a
// want ending in "..." is a prefix of the reply.
type step struct {
	args []string
	want string
}

// stepsClock is the injected clock of runSteps, in Unix nanoseconds.
var stepsClock = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func runSteps(t *testing.T, tl *testLoop, steps []step) {
	t.Helper()
	for _, s := range steps {
		tl.l.process(tl.cl, []byte(cmd(s.args...)), stepsClock)
		got := tl.take()
		if p, ok := strings.CutSuffix(s.want, "..."); ok && strings.HasPrefix(got, p) {
			continue
		}
		if got != s.want {
			t.Errorf("%q:\n got %q\nwant %q", s.args, got, s.want)
		}
	}
}

func TestMultiExec(t *testing.T) {
	const (
		ok     = "+OK\r\n"
		queued = "+QUEUED\r\n"
		abort  = "-EXECABORT Transaction discarded because of previous errors.\r\n"
	)
	check := func(k string) []string { return []string{"THROTTLE.CHECK", k, "10", "1h"} }
	peek := func(k string) []string { return []string{"THROTTLE.PEEK", k, "10", "1h"} }
	cases := []struct {
		name  string
		steps []step
	}{
		{"empty", []step{{[]string{"MULTI"}, ok}, {[]string{"EXEC"}, "*0\r\n"}}},
		{"queued commands run at EXEC", []step{
			{[]string{"MULTI"}, ok},
			{check("a"), queued},
			{check("b"), queued},
			{[]string{"PING"}, queued},
			{[]string{"DBSIZE"}, queued},
			{[]string{"EXEC"}, "*4\r\n*5\r\n:1\r\n:10\r\n:9\r\n..."},
		}},
		{"errors", []step{
			{[]string{"EXEC"}, "-ERR EXEC without MULTI\r\n"},
			{[]string{"DISCARD"}, "-ERR DISCARD without MULTI\r\n"},
			{[]string{"MULTI"}, ok},
			{[]string{"MULTI"}, "-ERR MULTI calls can not be nested\r\n"},
			{[]string{"WATCH", "x"}, "-ERR WATCH inside MULTI is not allowed\r\n"},
			{[]string{"PING"}, queued},
			{[]string{"EXEC"}, "*1\r\n+PONG\r\n"},
		}},
		{"an unknown command aborts", []step{
			{[]string{"MULTI"}, ok},
			{check("c"), queued},
			{[]string{"NOSUCH", "x"}, "-ERR unknown command 'NOSUCH', with args beginning with: 'x' \r\n"},
			{[]string{"EXEC"}, abort},
			{[]string{"EXEC"}, "-ERR EXEC without MULTI\r\n"},
		}},
		{"an arity error aborts and consumes nothing", []step{
			{[]string{"MULTI"}, ok},
			{check("c"), queued},
			{[]string{"THROTTLE.CHECK", "c"}, "-ERR wrong number of arguments for 'throttle.check' command\r\n"},
			{[]string{"EXEC"}, abort},
		}},
		{"an unknown subcommand aborts", []step{
			{[]string{"MULTI"}, ok},
			{[]string{"CLIENT", "NOSUCH"}, "-ERR unknown subcommand 'NOSUCH'. Try CLIENT HELP.\r\n"},
			{[]string{"EXEC"}, abort},
		}},
		{"discard consumes nothing", []step{
			{[]string{"MULTI"}, ok},
			{check("c"), queued},
			{[]string{"DISCARD"}, ok},
			{[]string{"DISCARD"}, "-ERR DISCARD without MULTI\r\n"},
		}},
		{"runtime errors stay inside the array", []step{
			{[]string{"THROTTLE.CHECK", "w", "10", "1h", "ALGO", "token"}, "*5\r\n:1\r\n:10\r\n:9\r\n..."},
			{[]string{"MULTI"}, ok},
			{check("w"), queued},
			{[]string{"THROTTLE.CHECK", "w", "x", "1h"}, queued},
			{[]string{"TYPE", "w"}, queued},
			{[]string{"EXEC"}, "*3\r\n-WRONGTYPE Operation against a key holding the wrong kind of value\r\n" +
				"-ERR limit is not an integer or out of range\r\n+token\r\n"},
		}},
		{"reset ends the transaction", []step{
			{[]string{"MULTI"}, ok},
			{check("c"), queued},
			{[]string{"RESET"}, "+RESET\r\n"},
			{[]string{"EXEC"}, "-ERR EXEC without MULTI\r\n"},
		}},
		{"watch: unchanged key runs", []step{
			{[]string{"WATCH", "u", "v"}, ok},
			{[]string{"MULTI"}, ok},
			{[]string{"UNWATCH"}, queued},
			{check("u"), queued},
			{[]string{"EXEC"}, "*2\r\n+OK\r\n*5\r\n:1\r\n:10\r\n:9\r\n..."},
		}},
		{"watch: own change aborts", []step{
			{[]string{"WATCH", "u"}, ok},
			{check("u"), "*5\r\n:1\r\n:10\r\n:9\r\n..."},
			{[]string{"MULTI"}, ok},
			{check("u"), queued},
			{[]string{"EXEC"}, "*-1\r\n"},
			{[]string{"MULTI"}, ok}, // EXEC forgot the watch
			{[]string{"EXEC"}, "*0\r\n"},
		}},
		{"watch: delete and flush abort", []step{
			{check("u"), "*5\r\n:1\r\n:10\r\n:9\r\n..."},
			{[]string{"WATCH", "u"}, ok},
			{[]string{"DEL", "u"}, ":1\r\n"},
			{[]string{"MULTI"}, ok},
			{[]string{"EXEC"}, "*-1\r\n"},
			{check("u"), "*5\r\n:1\r\n:10\r\n:9\r\n..."},
			{[]string{"WATCH", "u"}, ok},
			{[]string{"FLUSHALL"}, ok},
			{[]string{"MULTI"}, ok},
			{[]string{"EXEC"}, "*-1\r\n"},
		}},
		{"unwatch and discard forget watches", []step{
			{[]string{"WATCH", "u"}, ok},
			{[]string{"UNWATCH"}, ok},
			{check("u"), "*5\r\n:1\r\n:10\r\n:9\r\n..."},
			{[]string{"MULTI"}, ok},
			{[]string{"EXEC"}, "*0\r\n"},
			{[]string{"WATCH", "u"}, ok},
			{[]string{"MULTI"}, ok},
			{[]string{"DISCARD"}, ok},
			{check("u"), "*5\r\n:1\r\n:10\r\n:8\r\n..."},
			{[]string{"MULTI"}, ok},
			{[]string{"EXEC"}, "*0\r\n"},
		}},
		{"a watched absent key that stays absent", []step{
			{[]string{"WATCH", "nosuch", "nosuch"}, ok},
			{[]string{"MULTI"}, ok},
			{peek("nosuch"), queued},
			{[]string{"EXEC"}, "*1\r\n*5\r\n:1\r\n:10\r\n:10\r\n..."},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runSteps(t, newTestLoop(t, nil), c.steps)
		})
	}
}

func TestMultiExecRESP3(t *testing.T) {
	tl := newTestLoop(t, nil)
	tl.cl.resp3 = true
	runSteps(t, tl, []step{
		{[]string{"WATCH", "k"}, "+OK\r\n"},
		{[]string{"THROTTLE.CHECK", "k", "5", "1m"}, "%5\r\n$7\r\nallowed\r\n:1\r\n..."},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"PING"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "_\r\n"},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"PING"}, "+QUEUED\r\n"},
		{[]string{"TTL", "nosuch"}, "+QUEUED\r\n"},
		{[]string{"EXEC"}, "*2\r\n+PONG\r\n:-2\r\n"},
	})
}

// TestWatchExpiry: a watched key that expires before EXEC aborts it, as
// Redis treats an expired watched key; the clock is injected.
func TestWatchExpiry(t *testing.T) {
	tl := newTestLoop(t, nil)
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	at := func(ms int64, args ...string) string {
		tl.l.process(tl.cl, []byte(cmd(args...)), t0+ms*1_000_000)
		return tl.take()
	}
	at(0, "THROTTLE.CHECK", "e", "1", "1s")
	if got := at(0, "WATCH", "e"); got != "+OK\r\n" {
		t.Fatal(got)
	}
	at(0, "MULTI")
	at(0, "PING")
	if got := at(1500, "EXEC"); got != "*-1\r\n" {
		t.Fatalf("EXEC after the watched key expired = %q", got)
	}
	// Watching at 500 ms and executing before the expiry runs.
	at(500, "THROTTLE.CHECK", "f", "1", "1s")
	at(500, "WATCH", "f")
	at(600, "MULTI")
	at(600, "PTTL", "f")
	if got := at(700, "EXEC"); got != "*1\r\n:800\r\n" {
		t.Fatalf("EXEC = %q", got)
	}
}

// TestMultiQueueBounds: the queue refuses what passes MaxArgs or the
// query buffer limit, and the refusal aborts the transaction.
func TestMultiQueueBounds(t *testing.T) {
	tl := newTestLoop(t, func(c *Config) { c.MaxArgs = 8 })
	tl.run(cmd("MULTI"))
	for i := 0; i < 4; i++ {
		if got, _ := tl.run(cmd("PING", "x")); got != "+QUEUED\r\n" {
			t.Fatalf("PING %d = %q", i, got)
		}
	}
	if got, _ := tl.run(cmd("PING")); !strings.HasPrefix(got, "-ERR transaction queue is full") {
		t.Fatalf("ninth argument = %q", got)
	}
	if got, _ := tl.run(cmd("EXEC")); !strings.HasPrefix(got, "-EXECABORT") {
		t.Fatalf("EXEC = %q", got)
	}
	if got, _ := tl.run(cmd("WATCH", "1", "2", "3", "4", "5", "6", "7")); got != "+OK\r\n" {
		t.Fatal(got)
	}
	if got, _ := tl.run(cmd("WATCH", "8", "9")); !strings.HasPrefix(got, "-ERR too many watched keys") {
		t.Fatal(got)
	}

	// Bytes: 69 ECHOs of 1000 bytes fit in 70000, the 70th does not.
	tl = newTestLoop(t, func(c *Config) { c.QueryBufferLimit = 70000; c.ProtoMaxBulkLen = 1024 })
	tl.run(cmd("MULTI"))
	big := strings.Repeat("x", 1000)
	for i := 0; i < 69; i++ {
		if got, _ := tl.run(cmd("ECHO", big)); got != "+QUEUED\r\n" {
			t.Fatalf("ECHO %d = %q", i, got)
		}
	}
	if got, _ := tl.run(cmd("ECHO", big)); !strings.HasPrefix(got, "-ERR transaction queue is full") {
		t.Fatalf("70th ECHO = %q", got)
	}
	if got, _ := tl.run(cmd("EXEC")); !strings.HasPrefix(got, "-EXECABORT") {
		t.Fatalf("EXEC = %q", got)
	}
	// The next transaction starts empty.
	tl.run(cmd("MULTI"))
	tl.run(cmd("ECHO", big))
	if got, _ := tl.run(cmd("EXEC")); got != "*1\r\n$1000\r\n"+big+"\r\n" {
		t.Fatalf("EXEC = %q", got)
	}
}

// TestExecDeclaresEveryKey: every command with key positions, queued in a
// transaction, reaches the store only through keys EXEC locked (a missing
// key position would make the Txn refuse the call and log it).
func TestExecDeclaresEveryKey(t *testing.T) {
	for i := range commandTable {
		sp := &commandTable[i]
		if sp.firstKey == 0 {
			continue
		}
		var got []string
		args := make([][]byte, 12)
		for j := range args {
			args[j] = []byte{'a' + byte(j)}
		}
		forKeys(sp, args, func(k []byte) { got = append(got, string(k)) })
		if len(got) == 0 || got[0] != string(args[sp.firstKey]) {
			t.Errorf("%s: keys %v", sp.name, got)
		}
	}
	// A transaction over many keys on several shards: each command touches
	// its keys through the Txn without error.
	var logs strings.Builder
	tl := newTestLoop(t, nil)
	tl.srv.log = newTextLogger(&logs)
	tl.run(cmd("MULTI"))
	for _, c := range [][]string{
		{"THROTTLE.CHECK", "a", "10", "1h"}, {"THROTTLE.PEEK", "b", "10", "1h"},
		{"THROTTLE.LEASE", "c", "10", "1h", "BATCH", "2"}, {"THROTTLE.RETURN", "c", "1", "0"},
		{"CL.THROTTLE", "d", "5", "10", "60"}, {"THROTTLE.RESET", "e", "f", "a"},
		{"DEL", "g", "h"}, {"UNLINK", "i"}, {"EXISTS", "j", "k"}, {"TYPE", "l"}, {"TTL", "m"}, {"PTTL", "n"},
		{"DBSIZE"}, {"SCAN", "0"}, {"KEYS", "*"}, {"FLUSHALL"}, {"INFO", "keyspace"},
	} {
		if got, _ := tl.run(cmd(c...)); got != "+QUEUED\r\n" {
			t.Fatalf("%q: %q", c, got)
		}
	}
	out, _ := tl.run(cmd("EXEC"))
	if !strings.HasPrefix(out, "*17\r\n") || strings.Contains(out, "-ERR") {
		t.Fatalf("EXEC = %q", out)
	}
	if logs.Len() > 0 {
		t.Fatalf("log: %s", logs.String())
	}
}

// TestTxnRouting: outside EXEC the loop's store calls go straight to the
// store; inside, through the Txn, and nothing is left locked afterwards.
func TestTxnRouting(t *testing.T) {
	tl := newTestLoop(t, nil)
	tl.run(cmd("MULTI"))
	tl.run(cmd("THROTTLE.CHECK", "a", "10", "1h"))
	tl.run(cmd("EXEC"))
	if tl.l.tx.locked {
		t.Fatal("Txn still marked locked after EXEC")
	}
	// Every shard is free again: a flush takes every lock.
	done := make(chan struct{})
	go func() { tl.srv.core.FlushAll(0, nil); close(done) }()
	<-done
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// TestRedisCompatTransactions: the replies of MULTI, EXEC, DISCARD, WATCH,
// UNWATCH and of the keyspace commands' errors equal redis-server's byte
// for byte, in RESP2 and RESP3. A step with ours set sends that command to
// us and its own to redis-server (a write to a watched key: SET there,
// THROTTLE.CHECK here) and compares nothing.
func TestRedisCompatTransactions(t *testing.T) {
	rc := startRedis(t)
	type st struct {
		args []string
		ours []string // if set: a side effect, not compared
	}
	touch := st{[]string{"SET", "k", "v"}, []string{"THROTTLE.CHECK", "k", "10", "1h"}}
	script := []st{
		{args: []string{"EXEC"}}, {args: []string{"DISCARD"}},
		{args: []string{"MULTI"}}, {args: []string{"MULTI"}}, {args: []string{"WATCH", "x"}},
		{args: []string{"PING"}}, {args: []string{"ECHO", "hi"}}, {args: []string{"EXEC"}},
		{args: []string{"MULTI"}}, {args: []string{"EXEC"}},
		{args: []string{"MULTI"}}, {args: []string{"FOO", "a", "b"}}, {args: []string{"PING"}}, {args: []string{"EXEC"}},
		{args: []string{"MULTI"}}, {args: []string{"PING", "a", "b"}}, {args: []string{"EXEC"}},
		{args: []string{"MULTI"}}, {args: []string{"CLIENT", "NOSUCH"}}, {args: []string{"EXEC"}},
		{args: []string{"MULTI"}}, {args: []string{"PING"}}, {args: []string{"DISCARD"}}, {args: []string{"DISCARD"}},
		{args: []string{"MULTI", "x"}}, {args: []string{"EXEC", "x"}}, {args: []string{"DISCARD", "x"}},
		{args: []string{"WATCH"}}, {args: []string{"UNWATCH", "x"}},
		// WATCH: a change aborts with the null array; UNWATCH forgets.
		{args: []string{"WATCH", "k", "k2"}}, touch, {args: []string{"MULTI"}}, {args: []string{"PING"}}, {args: []string{"EXEC"}},
		{args: []string{"WATCH", "k"}}, {args: []string{"UNWATCH"}}, touch, {args: []string{"MULTI"}}, {args: []string{"PING"}}, {args: []string{"EXEC"}},
		{args: []string{"WATCH", "k"}}, {args: []string{"MULTI"}}, {args: []string{"UNWATCH"}}, {args: []string{"EXEC"}},
		{args: []string{"WATCH", "k"}}, {args: []string{"FLUSHALL"}}, {args: []string{"MULTI"}}, {args: []string{"EXEC"}},
		{args: []string{"WATCH", "nosuch"}}, {args: []string{"MULTI"}}, {args: []string{"EXISTS", "nosuch"}}, {args: []string{"EXEC"}},
		// Keyspace commands on absent keys, inside and outside a transaction.
		{args: []string{"MULTI"}}, {args: []string{"TTL", "nosuch"}}, {args: []string{"PTTL", "nosuch"}},
		{args: []string{"TYPE", "nosuch"}}, {args: []string{"EXISTS", "nosuch", "nosuch"}}, {args: []string{"DEL", "nosuch"}},
		{args: []string{"UNLINK", "nosuch", "x"}}, {args: []string{"KEYS", "*"}}, {args: []string{"SCAN", "0"}},
		{args: []string{"DBSIZE"}}, {args: []string{"FLUSHDB"}}, {args: []string{"EXEC"}},
		// Keyspace errors.
		{args: []string{"SCAN", "x"}}, {args: []string{"SCAN", "0", "COUNT", "0"}}, {args: []string{"SCAN", "0", "COUNT", "-1"}},
		{args: []string{"SCAN", "0", "COUNT", "x"}}, {args: []string{"SCAN", "0", "FOO", "bar"}}, {args: []string{"SCAN", "0", "MATCH"}},
		{args: []string{"SCAN", "18446744073709551616"}}, {args: []string{"SCAN", "0", "MATCH", "a*", "COUNT", "5", "TYPE", "string"}},
		{args: []string{"SCAN"}}, {args: []string{"KEYS"}}, {args: []string{"KEYS", "a", "b"}}, {args: []string{"DEL"}},
		{args: []string{"UNLINK"}}, {args: []string{"EXISTS"}}, {args: []string{"TYPE"}}, {args: []string{"TYPE", "a", "b"}},
		{args: []string{"TTL"}}, {args: []string{"PTTL", "a", "b"}},
		{args: []string{"FLUSHALL", "FOO"}}, {args: []string{"FLUSHALL", "ASYNC", "x"}}, {args: []string{"FLUSHALL", "async"}},
		{args: []string{"FLUSHDB", "SYNC"}}, {args: []string{"FLUSHDB", "x"}},
		// RESET ends a transaction.
		{args: []string{"MULTI"}}, {args: []string{"PING"}}, {args: []string{"RESET"}}, {args: []string{"EXEC"}},
	}
	for _, proto := range []string{"2", "3"} {
		tl := newTestLoop(t, nil)
		tl.run(cmd("HELLO", proto))
		rc.do(t, "HELLO", proto)
		rc.do(t, "FLUSHALL")
		for _, s := range script {
			want := rc.do(t, s.args...)
			if s.ours != nil {
				tl.run(cmd(s.ours...))
				continue
			}
			if got, _ := tl.run(cmd(s.args...)); got != want {
				t.Errorf("RESP%s %q:\n got %q\nwant %q", proto, s.args, got, want)
			}
		}
	}
}

// BenchmarkExec: transactions of MULTI, two checks on two keys and EXEC;
// one op is one of those four commands, so a transaction costs 4 ops.
func BenchmarkExec(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = "user:" + strconv.Itoa(i)
	}
	b.Run("multi+2checks+exec", func(b *testing.B) {
		benchDispatch(b, func(i int) string {
			switch i % 4 {
			case 0:
				return cmd("MULTI")
			case 3:
				return cmd("EXEC")
			}
			return cmd("THROTTLE.CHECK", keys[i%len(keys)], "1000000", "1s")
		}, 256, false)
	})
}

// TestWatchManyKeys: past watchScan keys WATCH indexes them; repeats are
// still watched once and a change to any of them aborts EXEC.
func TestWatchManyKeys(t *testing.T) {
	tl := newTestLoop(t, nil)
	args := []string{"WATCH"}
	for i := 0; i < 100; i++ {
		args = append(args, "w:"+strconv.Itoa(i), "w:"+strconv.Itoa(i/2))
	}
	runSteps(t, tl, []step{{args, "+OK\r\n"}, {args, "+OK\r\n"}})
	if n := len(tl.cl.multi.watched); n != 100 {
		t.Fatalf("%d keys watched, want 100", n)
	}
	runSteps(t, tl, []step{
		{[]string{"THROTTLE.CHECK", "w:77", "1", "1h"}, "*5\r\n:1\r\n..."},
		{[]string{"MULTI"}, "+OK\r\n"},
		{[]string{"EXEC"}, "*-1\r\n"},
		{args[:3], "+OK\r\n"},
	})
	if n := len(tl.cl.multi.watched); n != 1 || tl.cl.multi.index != nil {
		t.Fatalf("after EXEC and a new WATCH: %d keys watched, index %v", n, tl.cl.multi.index != nil)
	}
}

// FuzzMulti queues the commands of a script (separated by ';') between
// MULTI and EXEC and checks the transaction's shape: one reply per command
// sent, EXEC's array as long as the queue (or EXECABORT when a command was
// refused), nothing left locked, and the store usable afterwards.
func FuzzMulti(f *testing.F) {
	for _, seed := range []string{
		"THROTTLE.CHECK a 10 1s;THROTTLE.CHECK b 10 1s;PING",
		"THROTTLE.CHECK a 10 1s BAN 3 1m;THROTTLE.PEEK a 10 1s",
		"DEL a b;EXISTS a a;TYPE a;TTL a;PTTL b;UNLINK c",
		"SCAN 0 MATCH a* COUNT 3 TYPE gcra;KEYS *;DBSIZE;FLUSHALL ASYNC;INFO keyspace",
		"THROTTLE.LEASE k 10 1m BATCH 4;THROTTLE.RETURN k 3 0;CL.THROTTLE k 15 30 60",
		"THROTTLE.MCHECK 2 a 10 1s gcra b 10 1s gcra",
		"NOSUCH;PING",
		"UNWATCH;HELLO 3;ECHO x",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, script string) {
		var cmds [][]string
		for _, line := range strings.Split(script, ";") {
			if args := strings.Fields(line); len(args) > 0 && len(args) <= 32 {
				if runsInMultiName(args[0]) || strings.EqualFold(args[0], "client") || strings.EqualFold(args[0], "monitor") {
					return // those change the transaction or the connection itself
				}
				cmds = append(cmds, args)
			}
		}
		if len(cmds) == 0 || len(cmds) > 16 {
			return
		}
		tl := newTestLoop(t, nil)
		tl.run(cmd("THROTTLE.CHECK", "a", "10", "1s"))
		tl.run(cmd("MULTI"))
		refused := false
		for _, c := range cmds {
			got, _ := tl.run(cmd(c...))
			switch {
			case got == "+QUEUED\r\n":
			case strings.HasPrefix(got, "-"):
				refused = true
			default:
				t.Fatalf("%q while queuing: %q", c, got)
			}
		}
		out, _ := tl.run(cmd("EXEC"))
		if refused {
			if !strings.HasPrefix(out, "-EXECABORT") {
				t.Fatalf("EXEC after a refusal = %q", out)
			}
		} else {
			r := bufio.NewReader(strings.NewReader(out))
			line, _ := r.ReadString('\n')
			if line != "*"+strconv.Itoa(len(cmds))+"\r\n" {
				t.Fatalf("EXEC = %q, want %d replies", out, len(cmds))
			}
			for range cmds {
				var b bytes.Buffer
				if err := readValue(r, &b); err != nil {
					t.Fatalf("EXEC = %q: %v", out, err)
				}
			}
			if rest, _ := io.ReadAll(r); len(rest) != 0 {
				t.Fatalf("EXEC = %q: %q left over", out, rest)
			}
		}
		if tl.l.tx.locked {
			t.Fatal("Txn left locked")
		}
		if got, _ := tl.run(cmd("FLUSHALL")); got != "+OK\r\n" {
			t.Fatalf("FLUSHALL after EXEC = %q", got)
		}
	})
}

// runsInMultiName is runsInMulti by name.
func runsInMultiName(name string) bool {
	id, ok := lookup([]byte(name))
	return ok && runsInMulti(id)
}

// TestExecRefusedUnauthenticated: EXEC refused for want of AUTH answers
// with EXECABORT keeping the NOAUTH code, as Redis does, counts the error
// as NOAUTH and the call as rejected.
func TestExecRefusedUnauthenticated(t *testing.T) {
	tl := newTestLoop(t, func(c *Config) { c.RequirePass = "pw" })
	if got, _ := tl.run(cmd("EXEC")); got != "-EXECABORT Transaction discarded because of: NOAUTH Authentication required.\r\n" {
		t.Fatalf("EXEC before AUTH: %q", got)
	}
	tl.l.ctr.flush(&tl.l.pub)
	st := Stats{Commands: map[string]int64{}, Errors: map[string]int64{}, LatencyCounts: make([]int64, numBuckets+1),
		CommandStats: map[string]CommandStat{}}
	tl.l.pub.fold(&st)
	if st.Errors["NOAUTH"] != 1 || st.CommandStats["exec"].Rejected != 1 || st.CommandStats["exec"].Failed != 0 {
		t.Fatalf("errors %v, exec %+v", st.Errors, st.CommandStats["exec"])
	}
}
