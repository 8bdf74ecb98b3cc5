package server

import (
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestExecAdmissionSameReplies: the admission commands give inside EXEC
// exactly the replies they give outside it, on two servers fed the same
// commands at the same instant, and leave nothing locked or logged.
func TestExecAdmissionSameReplies(t *testing.T) {
	cmds := [][]string{
		{"THROTTLE.MCHECK", "2", "a", "10", "1h", "gcra", "b", "5", "1m", "token"},
		{"THROTTLE.MCHECK", "2", "a", "10", "1h", "gcra", "b", "5", "1m", "token", "COST", "3"},
		{"THROTTLE.RESERVE", "r", "10", "1h", "COST", "4"},
		{"THROTTLE.ACQUIRE", "s", "2", "10s"},
		{"THROTTLE.ACQUIRE", "s", "2", "10s"},
		{"THROTTLE.ACQUIRE", "s", "2", "10s"},
		{"THROTTLE.CHECK", "p", "1", "1h", "BAN", "1", "1m"},
		{"THROTTLE.CHECK", "p", "1", "1h", "BAN", "1", "1m"},
		{"THROTTLE.BANNED", "p"},
		{"THROTTLE.UNBAN", "p"},
		{"THROTTLE.BANNED", "p"},
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixNano()
	direct := newTestLoop(t, nil)
	var want strings.Builder
	want.WriteString("*" + strconv.Itoa(len(cmds)) + "\r\n")
	for _, c := range cmds {
		want.WriteString(direct.at(now, c...))
	}
	var logs strings.Builder
	tx := newTestLoop(t, nil)
	tx.srv.log = newTextLogger(&logs)
	tx.at(now, "MULTI")
	for _, c := range cmds {
		if got := tx.at(now, c...); got != "+QUEUED\r\n" {
			t.Fatalf("%q: %q", c, got)
		}
	}
	if got := tx.at(now, "EXEC"); got != want.String() {
		t.Fatalf("EXEC = %q\nwant   %q", got, want.String())
	}
	if logs.Len() > 0 {
		t.Fatalf("log: %s", logs.String())
	}
	if tx.l.tx.locked {
		t.Fatal("Txn left locked")
	}
	// Every admission command in the table is routed through EXEC's Txn.
	for _, id := range []cmdID{cmdThrottleMCheck, cmdThrottleReserve, cmdThrottleSettle, cmdThrottleBanned,
		cmdThrottleUnban, cmdThrottleAcquire, cmdThrottleRelease, cmdThrottleRefresh} {
		if txnMode(id) != txnRouted {
			t.Errorf("%s runs with EXEC's Txn released", commandTable[id].name)
		}
	}
}

// TestExecIsolatesAdmission: a transaction PEEK, MCHECK, PEEK on one key
// sees no other client's change between its commands, while another event
// loop of the same server checks the same key as fast as it can. The
// invariant cannot fail when EXEC holds the key's lock across all three;
// with the lock released around MCHECK the other loop's checks land in
// between.
func TestExecIsolatesAdmission(t *testing.T) {
	tl := newTestLoop(t, nil)
	other := &testLoop{srv: tl.srv, l: newLoop(tl.srv)}
	other.cl = newClient(tl.srv, other.l, 2)
	ints := regexp.MustCompile(`:(-?\d+)\r\n`)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			other.run(cmd("THROTTLE.CHECK", "k", "1000000000", "1h"))
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	// Each round: PEEK, then 16 times MCHECK and PEEK; every PEEK must see
	// exactly the MCHECKs of the transaction since the first.
	const pairs = 16
	var b strings.Builder
	b.WriteString(cmd("MULTI") + cmd("THROTTLE.PEEK", "k", "1000000000", "1h"))
	for range pairs {
		b.WriteString(cmd("THROTTLE.MCHECK", "1", "k", "1000000000", "1h", "gcra"))
		b.WriteString(cmd("THROTTLE.PEEK", "k", "1000000000", "1h"))
	}
	b.WriteString(cmd("EXEC"))
	script := b.String()
	for i := 0; i < 500; i++ {
		out, _ := tl.run(script)
		m := ints.FindAllStringSubmatch(out, -1)
		if len(m) != 5+pairs*11 {
			t.Fatalf("reply %q: %d integers, want %d", out, len(m), 5+pairs*11)
		}
		first, _ := strconv.ParseInt(m[2][1], 10, 64)
		for p := 1; p <= pairs; p++ {
			peek, _ := strconv.ParseInt(m[5+11*(p-1)+6+2][1], 10, 64)
			if peek != first-int64(p) {
				t.Fatalf("round %d: remaining %d at the start, %d after %d MCHECKs: another client's check ran inside the transaction",
					i, first, peek, p)
			}
		}
	}
}

// TestExecIsolatesKeyspace: FLUSHALL, a check, DBSIZE and KEYS in one
// transaction see only the transaction's own key while another event loop
// of the same server keeps creating keys: EXEC holds every shard for a
// queue with a whole-keyspace command.
func TestExecIsolatesKeyspace(t *testing.T) {
	tl := newTestLoop(t, nil)
	other := &testLoop{srv: tl.srv, l: newLoop(tl.srv)}
	other.cl = newClient(tl.srv, other.l, 2)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			other.run(cmd("THROTTLE.CHECK", "o:"+strconv.Itoa(i), "10", "1h"))
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	script := cmd("MULTI") + cmd("FLUSHALL") + cmd("THROTTLE.CHECK", "mine", "10", "1h") + cmd("DBSIZE") +
		cmd("SCAN", "0", "COUNT", "1000000") + cmd("KEYS", "*") + cmd("DBSIZE") + cmd("EXEC")
	want := regexp.MustCompile(`^\+OK\r\n(\+QUEUED\r\n){6}\*6\r\n\+OK\r\n` + // MULTI, queued, FLUSHALL
		`\*5\r\n:1\r\n:10\r\n:9\r\n:\d+\r\n:0\r\n` + // the check, allowed
		`:1\r\n\*2\r\n\$1\r\n0\r\n\*1\r\n\$4\r\nmine\r\n\*1\r\n\$4\r\nmine\r\n:1\r\n$`) // DBSIZE, SCAN, KEYS, DBSIZE
	for i := 0; i < 300; i++ {
		if out, _ := tl.run(script); !want.MatchString(out) {
			t.Fatalf("round %d: another client's key is visible inside the transaction, or a reply is wrong: %q", i, out)
		}
	}
}
