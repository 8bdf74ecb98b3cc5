package tier

import (
	"sync"
	"testing"
	"time"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/internal/clustertest"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/shard"
	"github.com/throttlekit/throttlekit-server/upstream"
)

const t0 = 1_800_000_000_000_000_000

func newBackend(t *testing.T, url string, cfg Config) *Backend {
	t.Helper()
	c, err := upstream.Dial(url, upstream.Options{Timeout: time.Second, PoolSize: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cfg.Client, cfg.Local, cfg.ServerClock = c, limits.NewLocal(shard.New(shard.Config{}), limits.Config{}), true
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// do runs op at now and waits for it.
func do(b *Backend, op *limits.Op, now int64) *limits.Op {
	ch := make(chan *limits.Op, 1)
	op.Done = func(r *limits.Op) { ch <- r }
	b.Do(op, now, nil)
	if op.Err != limits.ErrPending {
		return op
	}
	return <-ch
}

func TestModeOf(t *testing.T) {
	b := &Backend{cfg: Config{Mode: ModeStrict, Prefixes: []PrefixMode{{"a", ModeCachedDeny}, {"ab", ModeLeased}}}}
	for key, want := range map[string]Mode{"x": ModeStrict, "a": ModeCachedDeny, "ac": ModeCachedDeny, "abc": ModeLeased} {
		if got := b.ModeOf([]byte(key)); got != want {
			t.Errorf("ModeOf(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestCachedDenyClock: a cached denial lasts until the instant the check
// was sent plus the retry-after less its rounding, never longer than the
// upstream's, and answers the retry-after the upstream would.
func TestCachedDenyClock(t *testing.T) {
	b := newBackend(t, "redis://"+clustertest.Server(t), Config{Mode: ModeCachedDeny})
	lim, _ := engine.NewLimit(engine.KindFixed, 2, int64(time.Second), 0)
	check := func(cost, now int64) *limits.Op {
		return do(b, &limits.Op{Kind: limits.OpCheck, Key: []byte("k"), Limit: lim, Cost: cost}, now)
	}
	if r := check(2, t0); r.Err != nil || r.Decision.Allowed != 1 {
		t.Fatalf("first: %+v", r)
	}
	r := check(1, t0+100)
	if r.Decision.Allowed != 0 || r.Decision.RetryAfter != 1000 {
		t.Fatalf("denial: %+v", r.Decision)
	}
	rt := b.UpstreamStats().RoundTrips
	if r := check(1, t0+int64(500*time.Millisecond)); r.Decision.Allowed != 0 || r.Decision.RetryAfter != 500 {
		t.Fatalf("cached: %+v", r.Decision)
	}
	if b.UpstreamStats().RoundTrips != rt {
		t.Fatal("a cached denial called the upstream")
	}
	// The window ends at t0+1s; the cache at t0+100ns+999ms, before it.
	b.denyMu.Lock()
	until := b.deny["k"].until
	b.denyMu.Unlock()
	if until != t0+100+int64(999*time.Millisecond) {
		t.Fatalf("cached until %d, want t0+100ns+999ms", until-t0)
	}
	if b.ReturnIdle(t0+100+int64(999*time.Millisecond), 0); len(b.deny) != 0 {
		t.Fatal("ReturnIdle kept an expired denial")
	}
	if r := check(1, t0+int64(time.Second)); r.Decision.Allowed != 1 {
		t.Fatalf("after the retry-after: %+v", r.Decision)
	}
	if b.UpstreamStats().RoundTrips != rt+1 {
		t.Fatal("the check after the retry-after did not call the upstream")
	}
}

// TestLaneOrder: operations of one lane run on the upstream in the order
// given, however many workers there are.
func TestLaneOrder(t *testing.T) {
	b := newBackend(t, "redis://"+clustertest.Server(t), Config{Workers: 8})
	lim, _ := engine.NewLimit(engine.KindFixed, 1000, int64(time.Minute), 0)
	const n = 200
	res := make([]*limits.Op, n)
	var wg sync.WaitGroup
	wg.Add(n)
	for i := 0; i < n; i++ {
		op := &limits.Op{Kind: limits.OpCheck, Key: []byte("lane"), Limit: lim, Cost: 1, Lane: 7}
		op.Done = func(r *limits.Op) { res[i] = r; wg.Done() }
		b.Do(op, t0, nil)
		if op.Err != limits.ErrPending {
			t.Fatalf("op %d not pending: %v", i, op.Err)
		}
	}
	wg.Wait()
	for i, r := range res {
		if r.Err != nil || r.Decision.Remaining != int64(1000-1-i) {
			t.Fatalf("op %d: %+v %v", i, r.Decision, r.Err)
		}
	}
}

// TestUnavailable: an upstream that refuses connections fails closed with
// ErrUnavailable, or open from the local store.
func TestUnavailable(t *testing.T) {
	url := "redis://" + testserver.FreeAddr(t)
	lim, _ := engine.NewLimit(engine.KindGCRA, 1, int64(time.Second), 0)
	for _, open := range []bool{false, true} {
		b := newBackend(t, url, Config{FailOpen: open})
		r := do(b, &limits.Op{Kind: limits.OpCheck, Key: []byte("k"), Limit: lim, Cost: 1}, t0)
		switch {
		case !open && r.Err != limits.ErrUnavailable:
			t.Fatalf("closed: %v", r.Err)
		case open && (r.Err != nil || r.Decision.Allowed != 1):
			t.Fatalf("open: %+v %v", r.Decision, r.Err)
		}
		m := &limits.MCheck{Keys: [][]byte{[]byte("m")}, Limits: []engine.Limit{lim}, Cost: 1}
		ch := make(chan *limits.MCheck, 1)
		m.Done = func(r *limits.MCheck) { ch <- r }
		if err := b.MCheck(m, t0, nil); err != limits.ErrPending {
			t.Fatalf("MCheck: %v", err)
		}
		if r := <-ch; open != (r.Err == nil) {
			t.Fatalf("open=%v MCheck: %v", open, r.Err)
		}
	}
}

// TestLeasedAutoBatch: with the Go client's AdaptiveSizer (--upstream-batch
// auto) a window spent in many small leases makes the next window's lease
// larger, and no window admits more than the limit.
func TestLeasedAutoBatch(t *testing.T) {
	b := newBackend(t, "redis://"+clustertest.Server(t), Config{Mode: ModeLeased, Sizer: &throttlekit.AdaptiveSizer{}})
	lim, _ := engine.NewLimit(engine.KindFixed, 100, int64(time.Second), 0)
	check := func(now int64) *limits.Op {
		return do(b, &limits.Op{Kind: limits.OpCheck, Key: []byte("auto"), Limit: lim, Cost: 1}, now)
	}
	allowed := 0
	for i := 0; i < 150; i++ {
		if r := check(t0); r.Err != nil {
			t.Fatal(r.Err)
		} else if r.Decision.Allowed == 1 {
			allowed++
		}
	}
	s := b.UpstreamStats()
	if allowed != 100 || s.Leased != 100 || s.Leases != 11 {
		t.Fatalf("window 1: %d admitted, %d credits in %d leases; want 100 in 10 leases of the initial batch sqrt(100) and one empty", allowed, s.Leased, s.Leases)
	}
	if r := check(t0 + int64(time.Second)); r.Decision.Allowed != 1 {
		t.Fatalf("window 2: %+v", r.Decision)
	}
	if got := b.UpstreamStats().Leased - s.Leased; got <= 10 {
		t.Fatalf("window 2's first lease took %d credits, want more than the initial 10", got)
	}
}

// TestModeOfOpHint: an operation's mode hint (limits.Op.Mode) comes
// before the prefix table and the default; ModeDefault leaves them.
func TestModeOfOpHint(t *testing.T) {
	b := &Backend{cfg: Config{Mode: ModeStrict, Prefixes: []PrefixMode{{"a", ModeLeased}}}}
	for _, c := range []struct {
		key  string
		hint limits.Mode
		want Mode
	}{
		{"x", limits.ModeDefault, ModeStrict},
		{"a1", limits.ModeDefault, ModeLeased},
		{"x", limits.ModeLeased, ModeLeased},
		{"x", limits.ModeCachedDeny, ModeCachedDeny},
		{"a1", limits.ModeStrict, ModeStrict},
	} {
		op := limits.Op{Kind: limits.OpCheck, Key: []byte(c.key), Mode: c.hint}
		if got := b.modeOf(&op); got != c.want {
			t.Errorf("modeOf(%q, hint %d) = %v, want %v", c.key, c.hint, got, c.want)
		}
	}
}

// queueOps holds b's only worker busy, queues n checks of key on one lane
// and then lets the worker go, so that it finds them all queued. It
// returns the completed operations in the order Done was called.
func queueOps(t *testing.T, b *Backend, key string, lim engine.Limit, n int) []*limits.Op {
	t.Helper()
	hold, held := make(chan struct{}), make(chan struct{})
	if !b.submit(1, func() { b.st.pending.Add(-1); close(held); <-hold }) {
		t.Fatal("queue full")
	}
	<-held // the worker runs it: what follows waits in the queue
	var (
		mu  sync.Mutex
		res []*limits.Op
		wg  sync.WaitGroup
	)
	wg.Add(n)
	for i := 0; i < n; i++ {
		op := &limits.Op{Kind: limits.OpCheck, Key: []byte(key), Limit: lim, Cost: 1, Lane: 1}
		op.Done = func(r *limits.Op) { mu.Lock(); res = append(res, r); mu.Unlock(); wg.Done() }
		b.Do(op, t0, nil)
		if op.Err != limits.ErrPending {
			t.Fatalf("op %d not pending: %v", i, op.Err)
		}
	}
	close(hold)
	wg.Wait()
	return res
}

// TestPipelined: a worker sends what is queued on its lanes as pipelines of
// at most Config.Pipeline operations, and completes them in order.
func TestPipelined(t *testing.T) {
	b := newBackend(t, "redis://"+clustertest.Server(t), Config{Workers: 1, Pipeline: 64})
	lim, _ := engine.NewLimit(engine.KindFixed, 1000, int64(time.Minute), 0)
	res := queueOps(t, b, "piped", lim, 150)
	for i, r := range res {
		if r.Err != nil || r.Decision.Remaining != int64(1000-1-i) {
			t.Fatalf("op %d: %+v %v", i, r.Decision, r.Err)
		}
	}
	if s := b.UpstreamStats(); s.RoundTrips != 3 || s.Calls != 150 || s.Allowed != 150 || s.Pending != 0 {
		t.Fatalf("150 queued checks: %d round trips, %d calls, %d allowed, %d pending; want 3 pipelines (64+64+22) of 150 calls",
			s.RoundTrips, s.Calls, s.Allowed, s.Pending)
	}
}

// TestPipelineFails: a pipeline that cannot reach the upstream applies the
// failure policy to each of its operations, in order.
func TestPipelineFails(t *testing.T) {
	url := "redis://" + testserver.FreeAddr(t)
	lim, _ := engine.NewLimit(engine.KindFixed, 3, int64(time.Minute), 0)
	for _, open := range []bool{false, true} {
		b := newBackend(t, url, Config{Workers: 1, FailOpen: open})
		res := queueOps(t, b, "down", lim, 5)
		for i, r := range res {
			switch {
			case !open && r.Err != limits.ErrUnavailable:
				t.Fatalf("closed, op %d: %v", i, r.Err)
			case open && (r.Err != nil || r.Decision.Remaining != max(3-1-int64(i), 0) || (r.Decision.Allowed == 1) != (i < 3)):
				t.Fatalf("open, op %d: %+v %v (want the local store's answers in order)", i, r.Decision, r.Err)
			}
		}
		if s := b.UpstreamStats(); s.RoundTrips != 1 || s.Errors[upstream.CodeUnavailable] != 5 {
			t.Fatalf("open=%v: %d round trips, %d unavailable; want 1 pipeline of 5 failed calls", open, s.RoundTrips, s.Errors[upstream.CodeUnavailable])
		}
		if open && b.UpstreamStats().FailOpen != 5 {
			t.Fatalf("fail-open answers %d, want 5", b.UpstreamStats().FailOpen)
		}
	}
}

// execBatch runs bt on b and waits for it.
func execBatch(t *testing.T, b limits.Backend, bt *limits.Batch, now int64) *limits.Batch {
	t.Helper()
	ch := make(chan *limits.Batch, 1)
	bt.Done = func(r *limits.Batch) { ch <- r }
	switch err := b.Exec(bt, now, nil); err {
	case limits.ErrPending:
		return <-ch
	case nil:
		return bt
	default:
		t.Fatalf("Exec: %v", err)
		return nil
	}
}

// TestExec: a batch run as one script on the upstream gives the local
// store's results at the same instant, item for item; an unreachable
// upstream fails it whole, closed, or runs it locally, open.
func TestExec(t *testing.T) {
	b := newBackend(t, "redis://"+clustertest.Server(t), Config{})
	local := limits.NewLocal(shard.New(shard.Config{}), limits.Config{})
	fixed, _ := engine.NewLimit(engine.KindFixed, 2, int64(time.Second), 0)
	gcra, _ := engine.NewLimit(engine.KindGCRA, 2, int64(time.Second), 0)
	batch := func() *limits.Batch {
		m := &limits.MCheck{Keys: [][]byte{[]byte("ea"), []byte("eb")}, Limits: []engine.Limit{fixed, fixed}, Cost: 1}
		return &limits.Batch{Items: []limits.BatchItem{
			{Op: limits.Op{Kind: limits.OpCheck, Key: []byte("ea"), Limit: fixed, Cost: 1}},
			{Op: limits.Op{Kind: limits.OpCheck, Key: []byte("ea"), Limit: gcra, Cost: 1}},
			{MCheck: m},
			{Op: limits.Op{Kind: limits.OpPeek, Key: []byte("ea"), Limit: fixed, Cost: 1}},
			{Op: limits.Op{Kind: limits.OpLease, Key: []byte("el"), Limit: fixed, Cost: 5}},
			{Op: limits.Op{Kind: limits.OpReset, Key: []byte("eb")}},
		}}
	}
	for round := 0; round < 2; round++ {
		now := t0 + int64(round)*int64(500*time.Millisecond)
		up, lo := execBatch(t, b, batch(), now), execBatch(t, local, batch(), now)
		if up.Err != nil {
			t.Fatal(up.Err)
		}
		for i := range up.Items {
			u, l := up.Items[i], lo.Items[i]
			if u.MCheck != nil {
				if u.MCheck.Err != l.MCheck.Err || u.MCheck.Allowed != l.MCheck.Allowed || len(u.MCheck.Decisions) != 2 ||
					u.MCheck.Decisions[0] != l.MCheck.Decisions[0] || u.MCheck.Decisions[1] != l.MCheck.Decisions[1] {
					t.Fatalf("round %d item %d: upstream %+v, local %+v", round, i, u.MCheck, l.MCheck)
				}
				continue
			}
			if u.Op.Err != l.Op.Err || u.Op.Decision != l.Op.Decision || u.Op.Accepted != l.Op.Accepted {
				t.Fatalf("round %d item %d: upstream %+v %d %v, local %+v %d %v", round, i,
					u.Op.Decision, u.Op.Accepted, u.Op.Err, l.Op.Decision, l.Op.Accepted, l.Op.Err)
			}
		}
		if up.Items[1].Op.Err != engine.ErrWrongType {
			t.Fatalf("check of another algorithm: %v", up.Items[1].Op.Err)
		}
	}
	if s := b.UpstreamStats(); s.RoundTrips != 2 {
		t.Fatalf("two batches took %d round trips", s.RoundTrips)
	}

	url := "redis://" + testserver.FreeAddr(t)
	for _, open := range []bool{false, true} {
		b := newBackend(t, url, Config{FailOpen: open})
		r := execBatch(t, b, batch(), t0)
		switch {
		case !open && r.Err != limits.ErrUnavailable:
			t.Fatalf("closed: %v", r.Err)
		case open && (r.Err != nil || r.Items[0].Op.Err != nil || r.Items[0].Op.Decision.Allowed != 1):
			t.Fatalf("open: %v %+v", r.Err, r.Items[0].Op)
		}
	}
	if err := b.Exec(&limits.Batch{Items: []limits.BatchItem{{Op: limits.Op{Kind: limits.OpKind(200)}}}}, t0, nil); err != limits.ErrUnsupported {
		t.Fatalf("item of an unknown kind: %v", err)
	}
}

// TestExecAdmission: the admission items and GCRA of a batch run in the
// one script and give the local store's results at the same instant
// (tokens and reservation ids aside: their numbers are drawn differently).
func TestExecAdmission(t *testing.T) {
	b := newBackend(t, "redis://"+clustertest.Server(t), Config{})
	local := limits.NewLocal(shard.New(shard.Config{}), limits.Config{})
	one, _ := engine.NewLimit(engine.KindFixed, 1, int64(time.Second), 0)
	fixed, _ := engine.NewLimit(engine.KindFixed, 5, int64(time.Second), 0)
	ban, _ := engine.NewBan(1, int64(time.Second), 5*int64(time.Second))
	g, _ := engine.NewRateGCRA(0, 2, 1, 1) // 2 per second, no burst
	batch := func() *limits.Batch {
		return &limits.Batch{Items: []limits.BatchItem{
			{Acquire: &limits.Acquire{Key: []byte("xs"), Limit: 1, TTL: int64(10 * time.Second)}},
			{Acquire: &limits.Acquire{Key: []byte("xs"), Limit: 1, TTL: int64(10 * time.Second)}},
			{CheckBan: &limits.CheckBan{Key: []byte("xb"), Limit: one, Cost: 2, Ban: ban}},
			{Ban: &limits.BanCall{Key: []byte("xb")}},
			{Reserve: &limits.Reserve{Key: []byte("xr"), Limit: fixed, Estimate: 3, TTL: int64(time.Minute)}},
			{Op: limits.Op{Kind: limits.OpRateGCRA, Key: []byte("xg"), GCRA: g}},
			{Op: limits.Op{Kind: limits.OpRateGCRA, Key: []byte("xg"), GCRA: g}},
			{Ban: &limits.BanCall{Key: []byte("xb"), Lift: true}},
		}}
	}
	up, lo := execBatch(t, b, batch(), t0), execBatch(t, local, batch(), t0)
	if up.Err != nil {
		t.Fatal(up.Err)
	}
	for i := range up.Items {
		u, l := up.Items[i], lo.Items[i]
		var same bool
		switch {
		case u.Acquire != nil:
			same = u.Acquire.Err == l.Acquire.Err && u.Acquire.Acquired == l.Acquire.Acquired &&
				u.Acquire.InFlight == l.Acquire.InFlight && u.Acquire.RetryAfter == l.Acquire.RetryAfter
		case u.CheckBan != nil:
			same = u.CheckBan.Err == l.CheckBan.Err && u.CheckBan.Decision == l.CheckBan.Decision
		case u.Ban != nil:
			same = u.Ban.Err == l.Ban.Err && u.Ban.Left == l.Ban.Left && u.Ban.Lifted == l.Ban.Lifted
		case u.Reserve != nil:
			same = u.Reserve.Err == l.Reserve.Err && u.Reserve.Decision == l.Reserve.Decision
		default:
			same = u.Op.Err == l.Op.Err && u.Op.GCRAReply == l.Op.GCRAReply
		}
		if !same {
			t.Fatalf("item %d: upstream %+v, local %+v", i, u, l)
		}
	}
	it := up.Items
	if !it[0].Acquire.Acquired || it[1].Acquire.Acquired || it[3].Ban.Left != 5000 || !it[7].Ban.Lifted ||
		it[4].Reserve.Decision.Remaining != 2 || it[5].Op.GCRAReply.Limited != 0 || it[6].Op.GCRAReply.Limited != 1 {
		t.Fatalf("the batch did not take the paths it names: %+v %+v %+v %+v %+v %+v %+v", it[0].Acquire, it[1].Acquire,
			it[3].Ban, it[7].Ban, it[4].Reserve.Decision, it[5].Op.GCRAReply, it[6].Op.GCRAReply)
	}
	// The settlement of the reservation, in a second batch, finds the
	// record the first one made.
	set := &limits.Settle{Key: []byte("xr"), ID: it[4].Reserve.ID, Actual: 1}
	if r := execBatch(t, b, &limits.Batch{Items: []limits.BatchItem{{Settle: set}}}, t0); r.Err != nil ||
		r.Items[0].Settle.Err != nil || !r.Items[0].Settle.Settled {
		t.Fatalf("settle: %v %+v", r.Err, r.Items[0].Settle)
	}
	if s := b.UpstreamStats(); s.RoundTrips != 2 {
		t.Fatalf("two batches took %d round trips", s.RoundTrips)
	}
}

// TestExecRunsStrict: inside a batch a leased key's check runs on the
// upstream like any other, spending no lease.
func TestExecRunsStrict(t *testing.T) {
	b := newBackend(t, "redis://"+clustertest.Server(t), Config{Mode: ModeLeased, Batch: 10})
	fixed, _ := engine.NewLimit(engine.KindFixed, 100, int64(time.Second), 0)
	r := execBatch(t, b, &limits.Batch{Items: []limits.BatchItem{
		{Op: limits.Op{Kind: limits.OpCheck, Key: []byte("lk"), Limit: fixed, Cost: 1}},
		{Op: limits.Op{Kind: limits.OpCheck, Key: []byte("lk"), Limit: fixed, Cost: 1}},
	}}, t0)
	if r.Err != nil || r.Items[1].Op.Err != nil || r.Items[1].Op.Decision.Remaining != 98 {
		t.Fatalf("batch: %v %+v", r.Err, r.Items[1].Op)
	}
	if s := b.UpstreamStats(); s.Leases != 0 || s.LeaseHits != 0 || s.RoundTrips != 1 {
		t.Fatalf("%d leases, %d lease hits, %d round trips; want the batch's one round trip only", s.Leases, s.LeaseHits, s.RoundTrips)
	}
}
