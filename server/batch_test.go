package server

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// batchPool is the commands TestPipelineMatchesOneAtATime draws from:
// checks that batch (the same keys again and again, two algorithms on one
// key, so WRONGTYPE errors land between good replies), checks that reply
// with an error before they run (bad numbers, arity, an unknown option),
// checks that do not batch (inline, BAN), and the commands that must see
// the checks' effect or change how replies look (PEEK, DEL, HELLO, CLIENT
// REPLY SKIP, MULTI/EXEC, AUTH as a user that may not touch some keys).
func batchPool(key string) []string {
	return []string{
		cmd("THROTTLE.CHECK", key, "3", "1s"),
		cmd("THROTTLE.CHECK", key, "3", "1s"),
		cmd("THROTTLE.CHECK", key, "5", "1s", "ALGO", "token"),
		cmd("THROTTLE.CHECK", key, "4", "1s", "ALGO", "fixed", "COST", "2"),
		cmd("THROTTLE.CHECK", key, "3", "1s", "COST", "-1"),
		cmd("THROTTLE.CHECK", key, "x", "1s"),
		cmd("THROTTLE.CHECK", key, "3"),
		cmd("THROTTLE.CHECK", key, "3", "1s", "NOPE", "1"),
		cmd("THROTTLE.CHECK", key, "2", "1s", "BAN", "2", "10s"),
		"THROTTLE.CHECK " + key + " 3 1s\r\n",
		cmd("CL.THROTTLE", key, "2", "3", "1"),
		cmd("CL.THROTTLE", key, "2", "3", "1", "2"),
		cmd("CL.THROTTLE", key, "2", "x", "1"),
		cmd("THROTTLE.PEEK", key, "3", "1s"),
		cmd("THROTTLE.LEASE", key, "10", "1s", "BATCH", "3"),
		cmd("DEL", key),
		cmd("PING"),
		cmd("NOSUCH", key),
		cmd("CLIENT", "REPLY", "SKIP"),
		cmd("HELLO", "3"),
		cmd("HELLO", "2"),
		cmd("MULTI"),
		cmd("EXEC"),
		cmd("AUTH", "limited", "x"),
		cmd("AUTH", "default", "x"),
	}
}

// TestPipelineMatchesOneAtATime: a pipeline of THROTTLE.CHECK and
// CL.THROTTLE commands, resolved as batches (batch.go), gives replies
// byte-identical to the same commands run one read at a time, counts the
// same calls, failures, rejections, errors and decisions, and feeds
// MONITOR the same lines in the same order.
func TestPipelineMatchesOneAtATime(t *testing.T) {
	newSide := func() (tl *testLoop, mon *testConn) {
		tl = statsLoop(t)
		if got, _ := tl.run(cmd("ACL", "SETUSER", "limited", "on", "nopass", "~a*", "+@all")); got != "+OK\r\n" {
			t.Fatalf("ACL SETUSER: %q", got)
		}
		m := newClient(tl.srv, tl.l, 2)
		tl.l.process(m, []byte(cmd("MONITOR")), 1)
		tl.take()
		return tl, m.conn.(*testConn)
	}
	piped, pipedMon := newSide()
	single, singleMon := newSide()
	var pool []string
	for _, k := range []string{"a1", "a2", "a3", "b1"} {
		pool = append(pool, batchPool(k)...)
	}
	r := rand.New(rand.NewPCG(21, 21))
	now := int64(1_700_000_000_000_000_000)
	batched := int64(0)
	for round := range 400 {
		now += int64(r.IntN(3)) * 300e6
		cmds := make([]string, 1+r.IntN(40))
		var in []byte
		for i := range cmds {
			c := pool[r.IntN(len(pool))]
			if r.IntN(3) > 0 { // mostly plain checks: long runs of them
				c = pool[r.IntN(4)*len(pool)/4+r.IntN(2)]
			}
			cmds[i] = c
			in = append(in, c...)
		}
		n, closed := piped.l.process(piped.cl, in, now)
		if n != len(in) || closed {
			t.Fatalf("round %d: consumed %d of %d, closed %v", round, n, len(in), closed)
		}
		batched += piped.l.cb.batched
		piped.l.cb.batched = 0
		var want []byte
		for _, c := range cmds {
			if n, closed := single.l.process(single.cl, []byte(c), now); n != len(c) || closed {
				t.Fatalf("round %d: %q consumed %d, closed %v", round, c, n, closed)
			}
			want = append(want, single.take()...)
		}
		if got := piped.take(); got != string(want) {
			t.Fatalf("round %d, commands %q:\npipelined:     %q\none at a time: %q", round, cmds, got, want)
		}
	}
	if batched == 0 {
		t.Fatal("no check was resolved in a batch")
	}
	a, z := &piped.l.ctr, &single.l.ctr
	if a.cmds != z.cmds || a.errs != z.errs || a.allowed != z.allowed || a.denied != z.denied {
		t.Fatalf("counters: pipelined cmds %v errs %v allowed %d denied %d, one at a time %v %v %d %d",
			a.cmds, a.errs, a.allowed, a.denied, z.cmds, z.errs, z.allowed, z.denied)
	}
	for i := range a.cmd {
		x, y := a.cmd[i], z.cmd[i]
		if x.calls != y.calls || x.failed != y.failed || x.rejected != y.rejected {
			t.Errorf("%s: pipelined %+v, one at a time %+v", statSpecs[i].name, x, y)
		}
	}
	if string(pipedMon.out) != string(singleMon.out) || len(pipedMon.out) == 0 {
		t.Fatalf("MONITOR lines differ or are missing (%d and %d bytes)", len(pipedMon.out), len(singleMon.out))
	}
	t.Logf("%d checks resolved in batches", batched)
}

// TestBatchedChecksSlowTimed: while the slow log times every command
// (slowlog-log-all, or the pipelines after a slow one), checks run one at
// a time and each is logged; otherwise a pipeline of them batches.
func TestBatchedChecksSlowTimed(t *testing.T) {
	var in string
	for i := range 8 {
		in += cmd("THROTTLE.CHECK", fmt.Sprint("k", i%3), "100", "1s")
	}
	tl := opsLoop(t, &stepClock{}, nil)
	tl.batch(t, in)
	if tl.l.cb.batched != 8 {
		t.Fatalf("%d of 8 checks batched with the slow log at its default", tl.l.cb.batched)
	}
	tl = opsLoop(t, &stepClock{}, func(c *Config) { c.SlowlogLogAll = true; c.SlowlogMaxLen = 100 })
	tl.batch(t, in)
	if tl.l.cb.batched != 0 {
		t.Fatalf("%d checks batched while timed one by one", tl.l.cb.batched)
	}
	if got := tl.batch(t, cmd("SLOWLOG", "LEN")); got != ":8\r\n" {
		t.Fatalf("SLOWLOG LEN after 8 timed checks: %q", got)
	}
}
