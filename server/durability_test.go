package server_test

import (
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/server"
)

// fakeDurability is a server.Durability the test drives by hand: tickets
// count up from 1, durable and the refusal flag are set by the test, and
// every Commit is announced on commits.
type fakeDurability struct {
	hold     bool
	refusing atomic.Bool
	giveUp   atomic.Bool // Released answers true for any ticket (open policy, failing)
	ticket   atomic.Uint64
	durable  atomic.Uint64
	commits  chan uint64
}

func newFake(hold bool) *fakeDurability {
	return &fakeDurability{hold: hold, commits: make(chan uint64, 1024)}
}

func (f *fakeDurability) Refusing() bool { return f.refusing.Load() }
func (f *fakeDurability) Commit() (uint64, bool) {
	t := f.ticket.Add(1)
	f.commits <- t
	return t, f.hold
}
func (f *fakeDurability) Released(t uint64) bool { return f.giveUp.Load() || f.durable.Load() >= t }
func (f *fakeDurability) InfoFields() [][2]string {
	return [][2]string{{"persist_backend", "fake"}, {"persist_lag_ms", "0"}}
}

// nextCommit waits for the server's next Commit.
func (f *fakeDurability) nextCommit(t *testing.T) uint64 {
	t.Helper()
	select {
	case n := <-f.commits:
		return n
	case <-time.After(20 * time.Second):
		t.Fatal("no Commit within 20s")
		return 0
	}
}

// expectNothing checks that no reply is readable now. It waits briefly:
// a slow server can make it pass wrongly, never fail wrongly.
func expectNothing(t *testing.T, c *rawConn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	_, err := c.r.Peek(1)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a reply arrived before its change was durable (err %v)", err)
	}
	_ = c.SetReadDeadline(time.Time{})
}

func TestDurabilityLoading(t *testing.T) {
	ts := startServer(t, nil)
	ts.Srv.SetLoading(true)
	c := dialRaw(t, ts.Addr)
	cases := []struct {
		cmd  []string
		want string // prefix of the reply, "LOADING" for the error
	}{
		{[]string{"THROTTLE.CHECK", "k", "10", "1s"}, "LOADING Redis is loading the dataset in memory"},
		{[]string{"THROTTLE.PEEK", "k", "10", "1s"}, "LOADING"},
		{[]string{"DBSIZE"}, "LOADING"},
		{[]string{"PING"}, "PONG"},
		{[]string{"SELECT", "0"}, "OK"},
		{[]string{"CLIENT", "SETNAME", "x"}, "OK"},
	}
	for _, tc := range cases {
		got := c.do(t, tc.cmd...)
		var s string
		switch v := got.(type) {
		case respErr:
			s = string(v)
		case string:
			s = v
		}
		if !strings.HasPrefix(s, tc.want) {
			t.Errorf("%v while loading: got %v, want %q...", tc.cmd, got, tc.want)
		}
	}
	if info, _ := c.do(t, "INFO", "persistence").(string); !strings.Contains(info, "loading:1\r\n") {
		t.Errorf("INFO while loading lacks loading:1:\n%s", info)
	}
	ts.Srv.SetLoading(false)
	if info, _ := c.do(t, "INFO", "persistence").(string); !strings.Contains(info, "loading:0\r\n") {
		t.Errorf("INFO after loading lacks loading:0:\n%s", info)
	}
	if _, ok := c.do(t, "THROTTLE.CHECK", "k", "10", "1s").([]any); !ok {
		t.Errorf("THROTTLE.CHECK after loading is not a decision")
	}
}

func TestDurabilityTryAgain(t *testing.T) {
	f := newFake(false)
	ts := startServer(t, func(c *server.Config) { c.Durability = f })
	c := dialRaw(t, ts.Addr)
	f.refusing.Store(true)
	for _, cmd := range [][]string{
		{"THROTTLE.CHECK", "k", "10", "1m"},
		{"CL.THROTTLE", "k2", "5", "10", "60"},
		{"DEL", "k"},
	} {
		if got := c.do(t, cmd...); got != respErr("TRYAGAIN persistence unavailable") {
			t.Errorf("%v while refusing: got %v", cmd, got)
		}
	}
	// A transaction holding a change is refused as a whole at EXEC.
	if got := c.do(t, "MULTI"); got != "OK" {
		t.Fatalf("MULTI: %v", got)
	}
	if got := c.do(t, "PING"); got != "QUEUED" {
		t.Fatalf("PING in MULTI: %v", got)
	}
	if got := c.do(t, "THROTTLE.CHECK", "k", "10", "1m"); got != respErr("EXECABORT Transaction discarded because of previous errors.") &&
		got != respErr("TRYAGAIN persistence unavailable") {
		t.Fatalf("THROTTLE.CHECK in MULTI while refusing: %v", got)
	}
	if got := c.do(t, "EXEC"); !isErr(got) {
		t.Errorf("EXEC of a refused change: %v, want an error", got)
	}
	// A change queued before the refusals began is refused at EXEC.
	f.refusing.Store(false)
	if got := c.do(t, "MULTI"); got != "OK" {
		t.Fatalf("MULTI: %v", got)
	}
	if got := c.do(t, "THROTTLE.CHECK", "k", "10", "1m"); got != "QUEUED" {
		t.Fatalf("THROTTLE.CHECK in MULTI: %v", got)
	}
	f.refusing.Store(true)
	if got := c.do(t, "EXEC"); got != respErr("TRYAGAIN persistence unavailable") {
		t.Errorf("EXEC of a queued change while refusing: %v", got)
	}
	if got := c.do(t, "EXEC"); got != respErr("ERR EXEC without MULTI") {
		t.Errorf("EXEC after the refused one: %v, want the transaction ended", got)
	}
	// Reads still answer, and nothing was consumed.
	f.refusing.Store(false)
	peek, ok := c.do(t, "THROTTLE.PEEK", "k", "10", "1m").([]any)
	if !ok || len(peek) < 3 || peek[2] != int64(10) {
		t.Errorf("THROTTLE.PEEK after refusals: %v, want 10 remaining", peek)
	}
	if info, _ := c.do(t, "INFO", "persistence").(string); !strings.Contains(info, "persist_backend:fake\r\n") {
		t.Errorf("INFO persistence lacks the durability fields:\n%s", info)
	}
}

func isErr(v any) bool { _, ok := v.(respErr); return ok }

func TestDurabilityHoldUntilDurable(t *testing.T) {
	f := newFake(true)
	ts := startServer(t, func(c *server.Config) { c.Durability = f })
	c := dialRaw(t, ts.Addr)
	other := dialRaw(t, ts.Addr)

	// A batch with a change: its replies (the change's and the PING after
	// it) wait for the ticket.
	c.send(t, encodeCommand("THROTTLE.CHECK", "k", "10", "1m")+encodeCommand("PING"))
	ticket := f.nextCommit(t)
	expectNothing(t, c)
	// A later read-only batch of the same connection queues behind them.
	c.send(t, encodeCommand("ECHO", "after"))
	// Another connection without changes is answered at once.
	if got := other.do(t, "PING"); got != "PONG" {
		t.Fatalf("PING on another connection: %v", got)
	}
	expectNothing(t, c)

	f.durable.Store(ticket)
	ts.Srv.NotifyDurable()
	if _, ok := c.read(t).([]any); !ok {
		t.Fatal("first held reply is not the decision")
	}
	if got := c.read(t); got != "PONG" {
		t.Fatalf("second held reply: %v, want PONG", got)
	}
	if got := c.read(t); got != "after" {
		t.Fatalf("third reply: %v, want after", got)
	}
	// Once released, a read-only batch is answered at once.
	if got := c.do(t, "PING"); got != "PONG" {
		t.Fatalf("PING after release: %v", got)
	}
}

func TestDurabilityGiveUpReleases(t *testing.T) {
	f := newFake(true)
	ts := startServer(t, func(c *server.Config) { c.Durability = f })
	c := dialRaw(t, ts.Addr)
	c.send(t, encodeCommand("THROTTLE.CHECK", "k", "10", "1m"))
	f.nextCommit(t)
	expectNothing(t, c)
	f.giveUp.Store(true) // open policy, backend failing
	ts.Srv.NotifyDurable()
	if _, ok := c.read(t).([]any); !ok {
		t.Fatal("held reply is not the decision")
	}
}

func TestDurabilityAsyncDoesNotHold(t *testing.T) {
	f := newFake(false)
	ts := startServer(t, func(c *server.Config) { c.Durability = f })
	c := dialRaw(t, ts.Addr)
	if _, ok := c.do(t, "THROTTLE.CHECK", "k", "10", "1m").([]any); !ok {
		t.Fatal("THROTTLE.CHECK is not a decision")
	}
	f.nextCommit(t)
}

func TestDurabilityQuitAfterHeld(t *testing.T) {
	f := newFake(true)
	ts := startServer(t, func(c *server.Config) { c.Durability = f })
	c := dialRaw(t, ts.Addr)
	c.send(t, encodeCommand("THROTTLE.CHECK", "k", "10", "1m")+encodeCommand("QUIT"))
	ticket := f.nextCommit(t)
	expectNothing(t, c)
	f.durable.Store(ticket)
	ts.Srv.NotifyDurable()
	if _, ok := c.read(t).([]any); !ok {
		t.Fatal("held reply is not the decision")
	}
	if got := c.read(t); got != "OK" {
		t.Fatalf("QUIT: %v", got)
	}
	c.expectClosed(t)
}

// Each batch's replies go once that batch is durable, before later
// batches of the same connection are.
func TestDurabilityReleasesPerBatch(t *testing.T) {
	f := newFake(true)
	ts := startServer(t, func(c *server.Config) { c.Durability = f })
	c := dialRaw(t, ts.Addr)
	c.send(t, encodeCommand("THROTTLE.CHECK", "a", "10", "1m"))
	t1 := f.nextCommit(t)
	c.send(t, encodeCommand("THROTTLE.CHECK", "b", "10", "1m")+encodeCommand("ECHO", "second"))
	t2 := f.nextCommit(t)
	if t2 <= t1 {
		t.Fatalf("tickets %d then %d", t1, t2)
	}
	f.durable.Store(t1)
	ts.Srv.NotifyDurable()
	if _, ok := c.read(t).([]any); !ok {
		t.Fatal("first batch's reply is not the decision")
	}
	expectNothing(t, c)
	f.durable.Store(t2)
	ts.Srv.NotifyDurable()
	if _, ok := c.read(t).([]any); !ok {
		t.Fatal("second batch's first reply is not the decision")
	}
	if got := c.read(t); got != "second" {
		t.Fatalf("second batch's last reply: %v", got)
	}
}
