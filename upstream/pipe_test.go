package upstream

import (
	"context"
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
)

// pipeCalls returns a sequence of every kind of call over keys prefix+"a"
// .. prefix+"c", interleaved, at instants from t0 on.
func pipeCalls(prefix string) []Call {
	const t0 = 1_800_000_000_000_000_000
	fixed, _ := engine.NewLimit(engine.KindFixed, 5, int64(time.Second), 0)
	gcra, _ := engine.NewLimit(engine.KindGCRA, 3, int64(time.Second), 2)
	cell := engine.Cell{MaxBurst: 2, CountPerPeriod: 5, PeriodSec: 1}
	var calls []Call
	for i := 0; i < 12; i++ {
		at := int64(t0 + i*int(50*time.Millisecond))
		calls = append(calls,
			Call{Kind: CallCheck, Key: prefix + "a", Limit: fixed, N: 2, At: at},
			Call{Kind: CallPeek, Key: prefix + "a", Limit: fixed, N: 1, At: at},
			Call{Kind: CallCheck, Key: prefix + "b", Limit: gcra, N: 1, At: at},
			Call{Kind: CallCell, Key: prefix + "c", Cell: cell, N: 1, At: at},
			Call{Kind: CallLease, Key: prefix + "l", Limit: fixed, N: 2, At: at},
		)
		if i%4 == 3 {
			calls = append(calls,
				Call{Kind: CallReturn, Key: prefix + "l", N: 1, ResetAt: (t0+int64(time.Second))/1e6 + 1, At: at},
				Call{Kind: CallReset, Key: prefix + "b", At: at})
		}
	}
	return calls
}

// testPipe sends a sequence as one pipeline and the same sequence call by
// call on other keys: every result agrees, so the pipeline ran the calls
// in order per key.
func testPipe(t *testing.T, c *Client, prefix string) {
	t.Helper()
	ctx := context.Background()
	piped, single := pipeCalls(prefix+"p:"), pipeCalls(prefix+"s:")
	c.Pipe(ctx, piped)
	for i := range single {
		c.do(ctx, &single[i])
	}
	for i := range piped {
		p, s := piped[i], single[i]
		if p.Err != nil || s.Err != nil || p.Decision != s.Decision || p.CellReply != s.CellReply || p.Count != s.Count {
			t.Fatalf("call %d (kind %d): piped %+v %+v %d %v, single %+v %+v %d %v", i, p.Kind,
				p.Decision, p.CellReply, p.Count, p.Err, s.Decision, s.CellReply, s.Count, s.Err)
		}
	}
	// Sanity: the sequence both consumed and denied.
	if piped[0].Decision.Allowed != 1 || piped[10].Decision.Allowed != 0 {
		t.Fatalf("sequence admitted %+v then %+v", piped[0].Decision, piped[10].Decision)
	}
}

// testPipeNoScript flushes the script caches, then sends a pipeline whose
// every EVALSHA gets NOSCRIPT: the calls are sent again with EVAL, in
// order, and the scripts are cached again.
func testPipeNoScript(t *testing.T, c *Client, prefix string, flush func() error) {
	t.Helper()
	if err := flush(); err != nil {
		t.Fatal(err)
	}
	lim, _ := engine.NewLimit(engine.KindFixed, 100, int64(time.Minute), 0)
	calls := make([]Call, 10)
	for i := range calls {
		calls[i] = Call{Kind: CallCheck, Key: prefix + strconv.Itoa(i%3), Limit: lim, N: 1}
	}
	c.Pipe(context.Background(), calls)
	for i, cl := range calls {
		if want := int64(100 - 1 - i/3); cl.Err != nil || cl.Decision.Remaining != want {
			t.Fatalf("call %d after SCRIPT FLUSH: %+v %v, want remaining %d", i, cl.Decision, cl.Err, want)
		}
	}
}

func TestPipe(t *testing.T) {
	addr := clustertest.Server(t)
	c, err := Dial("redis://"+addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := c.rdb.(*redis.Client)
	t.Run("SameAsCalls", func(t *testing.T) { testPipe(t, c, "pipe:") })
	t.Run("NoScript", func(t *testing.T) {
		testPipeNoScript(t, c, "pns:", func() error { return r.ScriptFlush(context.Background()).Err() })
	})
	t.Run("BadArgs", func(t *testing.T) {
		// A call the engine rejects fails alone, before it is sent; the
		// others run.
		lim, _ := engine.NewLimit(engine.KindFixed, 5, int64(time.Second), 0)
		calls := []Call{
			{Kind: CallCheck, Key: "bad:1", Limit: lim, N: 1},
			{Kind: CallCheck, Key: "bad:2", Limit: engine.Limit{Algo: engine.KindFixed, Limit: 0, Period: 1}, N: 1},
			{Kind: CallCell, Key: "bad:3", Cell: engine.Cell{MaxBurst: -1, CountPerPeriod: 1, PeriodSec: 1}, N: 1},
			{Kind: CallKind(99), Key: "bad:4"},
			{Kind: CallCheck, Key: "bad:1", Limit: lim, N: 1},
		}
		c.Pipe(context.Background(), calls)
		if calls[0].Err != nil || calls[4].Err != nil || calls[4].Decision.Remaining != 3 {
			t.Fatalf("good calls: %+v %v, %+v %v", calls[0].Decision, calls[0].Err, calls[4].Decision, calls[4].Err)
		}
		if CodeOf(calls[1].Err) != CodeEngine || CodeOf(calls[2].Err) != CodeEngine || CodeOf(calls[3].Err) != CodeArgs {
			t.Fatalf("bad calls: %v, %v, %v", calls[1].Err, calls[2].Err, calls[3].Err)
		}
		if n, err := r.Exists(context.Background(), "bad:2", "bad:3").Result(); err != nil || n != 0 {
			t.Fatalf("a rejected call wrote: %d %v", n, err)
		}
	})
}

// TestPipeUnavailable: a pipeline to an upstream that refuses connections
// fails every call with CodeUnavailable.
func TestPipeUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c, err := Dial("redis://"+addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	calls := pipeCalls("u:")
	c.Pipe(context.Background(), calls)
	for i, cl := range calls {
		if CodeOf(cl.Err) != CodeUnavailable {
			t.Fatalf("call %d: %v, want CodeUnavailable", i, cl.Err)
		}
	}
}

// TestWire: the arguments Wire gives, sent as EVALSHA, are the call: the
// reply is the one Pipe gives for the same call on another key.
func TestWire(t *testing.T) {
	addr := clustertest.Server(t)
	c, err := Dial("redis://"+addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	if err := c.Load(ctx); err != nil {
		t.Fatal(err)
	}
	r := c.rdb.(*redis.Client)
	for i, cl := range pipeCalls("w:") {
		w, err := c.Wire(&cl)
		if err != nil {
			t.Fatal(err)
		}
		args := []any{"EVALSHA"}
		for _, a := range w {
			args = append(args, a)
		}
		direct := Call{Kind: cl.Kind}
		result(&direct, r.Do(ctx, args...))
		cl.Key = "w2:" + cl.Key
		piped := []Call{cl}
		c.Pipe(ctx, piped)
		cl = piped[0]
		if direct.Err != nil || direct.Decision != cl.Decision || direct.CellReply != cl.CellReply || direct.Count != cl.Count {
			t.Fatalf("call %d: EVALSHA %v gave %+v, Pipe %+v", i, w, direct, cl)
		}
	}
}

// TestExec: a sequence run as one exec script gives, call for call, what
// the same calls give one by one (on other keys), including MCHECK and a
// call that fails alone; at injected instants the whole runs at the first
// call's.
func TestExec(t *testing.T) {
	addr := clustertest.Server(t)
	c, err := Dial("redis://"+addr, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	r := c.rdb.(*redis.Client)
	if err := r.Set(ctx, "ex:p:wrong", "not a state", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.Set(ctx, "ex:s:wrong", "not a state", 0).Err(); err != nil {
		t.Fatal(err)
	}
	seq := func(prefix string) []Call {
		calls := pipeCalls(prefix)
		at := calls[0].At
		for i := range calls {
			calls[i].At = at
		}
		fixed, _ := engine.NewLimit(engine.KindFixed, 5, int64(time.Second), 0)
		sliding, _ := engine.NewLimit(engine.KindSliding, 2, int64(time.Second), 0)
		return append(calls,
			Call{Kind: CallMCheck, Rules: []Rule{{prefix + "m1", fixed}, {prefix + "m2", sliding}}, N: 1, At: at},
			Call{Kind: CallMCheck, Rules: []Rule{{prefix + "m1", fixed}, {prefix + "m2", sliding}}, N: 2, At: at},
			Call{Kind: CallCheck, Key: prefix + "wrong", Limit: fixed, N: 1, At: at},
			Call{Kind: CallMCheck, Rules: []Rule{{prefix + "m1", fixed}, {prefix + "m2", sliding}}, N: 1, At: at},
		)
	}
	exec, single := seq("ex:p:"), seq("ex:s:")
	if err := c.Exec(ctx, exec); err != nil {
		t.Fatal(err)
	}
	for i := range single {
		if single[i].Kind == CallMCheck {
			single[i].MDecision, single[i].Err = c.At(single[i].At).MCheck(ctx, single[i].Rules, single[i].N)
			continue
		}
		c.do(ctx, &single[i])
	}
	for i := range exec {
		e, s := exec[i], single[i]
		if (e.Err == nil) != (s.Err == nil) || (e.Err != nil && e.Err.Error() != s.Err.Error()) ||
			e.Decision != s.Decision || e.CellReply != s.CellReply || e.Count != s.Count ||
			e.MDecision.Allowed != s.MDecision.Allowed || e.MDecision.RetryAfter != s.MDecision.RetryAfter ||
			len(e.MDecision.Decisions) != len(s.MDecision.Decisions) {
			t.Fatalf("call %d (kind %d): exec %+v %+v %d %+v %v, single %+v %+v %d %+v %v", i, e.Kind,
				e.Decision, e.CellReply, e.Count, e.MDecision, e.Err, s.Decision, s.CellReply, s.Count, s.MDecision, s.Err)
		}
		for j := range e.MDecision.Decisions {
			if e.MDecision.Decisions[j] != s.MDecision.Decisions[j] {
				t.Fatalf("call %d: mcheck decision %d: exec %+v, single %+v", i, j, e.MDecision.Decisions[j], s.MDecision.Decisions[j])
			}
		}
	}
	n := len(exec)
	if CodeOf(exec[n-2].Err) != CodeWrongType || !exec[n-4].MDecision.Allowed || exec[n-3].MDecision.Allowed {
		t.Fatalf("exec: WRONGTYPE item %v, mchecks %+v %+v", exec[n-2].Err, exec[n-4].MDecision, exec[n-3].MDecision)
	}
}

// TestExecAdmission: the admission calls and GCRA run inside one exec
// script give, call for call, what the Client methods give one by one (on
// other keys) at the same instant: slots taken, refreshed, released and
// stale, a ban started, read and lifted, a reservation made and settled
// once, and the errors refused before sending or raised by the script.
func TestExecAdmission(t *testing.T) {
	c, err := Dial("redis://"+clustertest.Server(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.draw = func() int64 { return 7 } // the same reservation id both ways
	ctx := context.Background()
	const at = 1_800_000_000_000_000_000
	fixed, _ := engine.NewLimit(engine.KindFixed, 5, int64(time.Second), 0)
	one, _ := engine.NewLimit(engine.KindFixed, 1, int64(time.Second), 0)
	ban := engine.Ban{Threshold: 1, Window: int64(time.Second), Duration: 5 * int64(time.Second)}
	tok := SlotGrant{Slot: 0, Gen: at} // a slot's generation is max(now, last+1)
	seq := func(p string) []Call {
		return []Call{
			{Kind: CallAcquire, Key: p + "s", N: 1, TTL: int64(10 * time.Second)},
			{Kind: CallAcquire, Key: p + "s", N: 1, TTL: int64(10 * time.Second)},
			{Kind: CallRefresh, Key: p + "s", Slot: tok, TTL: int64(20 * time.Second)},
			{Kind: CallRelease, Key: p + "s", Slot: tok},
			{Kind: CallRelease, Key: p + "s", Slot: tok},
			{Kind: CallRelease, Key: p + "s", Slot: SlotGrant{Slot: MaxSlots, Gen: 1}},
			{Kind: CallAcquire, Key: p + "s", N: 0, TTL: 1},
			{Kind: CallCheckBan, Key: p + "b", Limit: one, N: 2, Ban: ban},
			{Kind: CallBanned, Key: p + "b"},
			{Kind: CallUnban, Key: p + "b"},
			{Kind: CallBanned, Key: p + "b"},
			{Kind: CallReserve, Key: p + "r", Limit: fixed, N: 3, TTL: int64(10 * time.Second)},
			{Kind: CallSettle, Key: p + "r", Reservation: Reservation{Seq: 7, Limit: fixed}, N: 1},
			{Kind: CallSettle, Key: p + "r", Reservation: Reservation{Seq: 7, Limit: fixed}, N: 1},
			{Kind: CallCheck, Key: p + "r", Limit: fixed, N: 0},
			{Kind: CallGCRA, Key: p + "g", GCRA: engine.RateGCRA{Burst: 3, Interval: 1000, Tokens: 2}},
			{Kind: CallGCRA, Key: p + "g", GCRA: engine.RateGCRA{Burst: 3, Interval: 1000, Tokens: 2}},
			{Kind: CallCheckBan, Key: p + "wrong", Limit: one, N: 1, Ban: ban},
			{Kind: CallReserve, Key: p + "d", Limit: fixed, N: 1, TTL: int64(10 * time.Second)},
			{Kind: CallReserve, Key: p + "d", Limit: fixed, N: 1, TTL: int64(10 * time.Second)}, // id 7 in use
		}
	}
	for _, p := range []string{"xa:e:", "xa:s:"} {
		if err := c.rdb.Set(ctx, p+"wrong", "not a state", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	exec, single := seq("xa:e:"), seq("xa:s:")
	exec[0].At = at
	if err := c.At(at).Exec(ctx, exec); err != nil {
		t.Fatal(err)
	}
	a := c.At(at)
	for i := range single {
		s := &single[i]
		var ok bool
		switch s.Kind {
		case CallAcquire:
			s.Slot, s.Err = a.Acquire(ctx, s.Key, s.N, s.TTL)
		case CallRefresh:
			ok, s.Err = a.Refresh(ctx, s.Key, s.Slot.Slot, s.Slot.Gen, s.TTL)
		case CallRelease:
			ok, s.Err = a.Release(ctx, s.Key, s.Slot.Slot, s.Slot.Gen)
		case CallCheckBan:
			s.Decision, s.Err = a.CheckBan(ctx, s.Key, s.Limit, s.N, s.Ban)
		case CallBanned:
			s.Count, s.Err = a.Banned(ctx, s.Key)
		case CallUnban:
			ok, s.Err = a.Unban(ctx, s.Key)
		case CallReserve:
			s.Decision, s.Reservation, s.Err = a.Reserve(ctx, s.Key, s.Limit, s.N, s.TTL)
		case CallSettle:
			ok, s.Err = a.Settle(ctx, s.Key, s.Reservation, s.N)
		default:
			a.do(ctx, s)
		}
		if ok {
			s.Count = 1
		}
	}
	for i := range exec {
		e, s := exec[i], single[i]
		// Redis adds where a script raised an error outside pcall; the id
		// in use is the one error the transaction's item gets from pcall
		// that has no engine code to compare instead.
		sameErr := e.Err == nil && s.Err == nil || e.Err != nil && s.Err != nil &&
			(e.Err.Error() == s.Err.Error() || i == 19 && strings.HasPrefix(s.Err.Error(), e.Err.Error()))
		if !sameErr || e.Decision != s.Decision || e.Count != s.Count || e.Slot != s.Slot || e.GCRAReply != s.GCRAReply ||
			e.Reservation != s.Reservation {
			t.Fatalf("call %d (kind %d): exec %+v %d %+v %+v %+v %v, single %+v %d %+v %+v %+v %v", i, e.Kind,
				e.Decision, e.Count, e.Slot, e.GCRAReply, e.Reservation, e.Err,
				s.Decision, s.Count, s.Slot, s.GCRAReply, s.Reservation, s.Err)
		}
	}
	// The sequence took every path it names: a slot taken then refused,
	// refreshed, released once, a ban of 5 s lifted, a reservation settled
	// once with 2 units refunded, GCRA admitting then limiting.
	want := []int64{1, 0, 1, 1, 0, 0, 0, 0, 5000, 1, 0, 0, 1, 0}
	got := []int64{b2i(exec[0].Slot.Acquired), b2i(exec[1].Slot.Acquired), exec[2].Count, exec[3].Count,
		exec[4].Count, exec[5].Count, int64(CodeOf(exec[6].Err)) - int64(CodeArgs), exec[7].Decision.Allowed, exec[8].Count,
		exec[9].Count, exec[10].Count, exec[16].GCRAReply.Limited - 1, exec[12].Count, exec[13].Count}
	if !reflect.DeepEqual(got, want) || exec[14].Decision.Remaining != 4 || exec[15].GCRAReply.Limited != 0 ||
		CodeOf(exec[17].Err) != CodeWrongType || exec[18].Err != nil || exec[19].Err == nil ||
		!strings.Contains(exec[19].Err.Error(), "TKDUP") {
		t.Fatalf("exec outcomes %v, want %v; remaining %d after settling, GCRA %+v, wrong type %v, id in use %v %v",
			got, want, exec[14].Decision.Remaining, exec[15].GCRAReply, exec[17].Err, exec[18].Err, exec[19].Err)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
