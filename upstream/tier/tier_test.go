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
