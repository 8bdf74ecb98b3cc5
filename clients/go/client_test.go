package throttlekit_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
)

func TestClientCommands(t *testing.T) {
	srv := startServer(t)
	for _, proto := range []int{2, 3} {
		t.Run("resp"+string(rune('0'+proto)), func(t *testing.T) {
			ctx := context.Background()
			c := throttlekit.NewClient(srv.RedisClient(t, proto, nil))
			p := string(rune('0' + proto))
			lim := throttlekit.Rate{Limit: 3, Period: time.Minute}

			// Check: three pass, the fourth waits a third of the period.
			for i := int64(0); i < 3; i++ {
				d, err := c.Check(ctx, "k"+p, lim, 1)
				if err != nil {
					t.Fatal(err)
				}
				if !d.Allowed || d.Limit != 3 || d.Remaining != 2-i || d.RetryAfter != 0 {
					t.Fatalf("check %d: %+v", i, d)
				}
			}
			d, err := c.Check(ctx, "k"+p, lim, 1)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 20*time.Second {
				t.Fatalf("fourth check: %+v", d)
			}
			// Peek consumes nothing.
			pk, err := c.Peek(ctx, "k"+p, lim)
			if err != nil {
				t.Fatal(err)
			}
			if pk.Allowed || pk.Remaining != 0 {
				t.Fatalf("peek: %+v", pk)
			}
			// A cost above the limit can never pass.
			d, err = c.Check(ctx, "big"+p, throttlekit.Rate{Limit: 5, Period: time.Second}, 6)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed || d.RetryAfter >= 0 {
				t.Fatalf("cost above limit: %+v", d)
			}
			// Sliding window with a cost.
			d, err = c.Check(ctx, "sl"+p, throttlekit.Rate{Limit: 10, Period: time.Second, Algo: throttlekit.SlidingWindow}, 4)
			if err != nil || !d.Allowed || d.Remaining != 6 {
				t.Fatalf("sliding: %+v %v", d, err)
			}
			// Another algorithm on the same key: WRONGTYPE, typed.
			_, err = c.Check(ctx, "sl"+p, lim, 1)
			var se *throttlekit.ServerError
			if !errors.Is(err, throttlekit.ErrWrongType) || !errors.As(err, &se) || se.Code != "WRONGTYPE" {
				t.Fatalf("wrong type: %v", err)
			}
			// Lease and Return.
			g, err := c.Lease(ctx, "svc"+p, throttlekit.Rate{Limit: 1000, Period: 7 * 24 * time.Hour}, 50)
			if err != nil {
				t.Fatal(err)
			}
			if g.Credits != 50 || g.Remaining != 950 || g.ResetAt.UnixMilli()%(7*86_400_000) != 0 {
				t.Fatalf("lease: %+v", g)
			}
			n, err := c.Return(ctx, "svc"+p, 12, g.ResetAt)
			if err != nil || n != 12 {
				t.Fatalf("return: %d %v", n, err)
			}
			n, err = c.Return(ctx, "svc"+p, 12, time.UnixMilli(123))
			if err != nil || n != 0 {
				t.Fatalf("return to another window: %d %v", n, err)
			}
			// Reset counts keys that held state.
			n, err = c.Reset(ctx, "k"+p, "nosuch"+p)
			if err != nil || n != 1 {
				t.Fatalf("reset: %d %v", n, err)
			}
			// CL.THROTTLE as redis-cell answers it.
			cr, err := c.CellThrottle(ctx, "cell"+p, 15, 30, time.Minute, 1)
			if err != nil {
				t.Fatal(err)
			}
			if cr.Limited || cr.Limit != 16 || cr.Remaining != 15 || cr.RetryAfter >= 0 || cr.ResetAfter != 2*time.Second {
				t.Fatalf("cell: %+v", cr)
			}
			_, err = c.CellThrottle(ctx, "cell"+p, 15, 0, time.Minute, 1)
			if !errors.As(err, &se) || se.Code != "Cell" || !errors.Is(err, throttlekit.ErrInvalidArgument) {
				t.Fatalf("cell error: %v", err)
			}
		})
	}
}

func TestClientArgumentErrors(t *testing.T) {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		rate throttlekit.Rate
		cost int64
	}{
		{"zero limit", throttlekit.Rate{Period: time.Second}, 1},
		{"sub-millisecond period", throttlekit.Rate{Limit: 1, Period: time.Microsecond}, 1},
		{"fractional millisecond", throttlekit.Rate{Limit: 1, Period: 1500 * time.Microsecond}, 1},
		{"negative burst", throttlekit.Rate{Limit: 1, Period: time.Second, Burst: -1}, 1},
		{"unknown algo", throttlekit.Rate{Limit: 1, Period: time.Second, Algo: "leaky"}, 1},
		{"negative cost", throttlekit.Rate{Limit: 1, Period: time.Second}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Check(ctx, "k", tc.rate, tc.cost)
			var ae *throttlekit.ArgError
			if !errors.As(err, &ae) || !errors.Is(err, throttlekit.ErrInvalidArgument) {
				t.Fatalf("got %v, want an *ArgError", err)
			}
		})
	}
	if _, err := c.Lease(ctx, "k", throttlekit.Rate{Limit: 1, Period: time.Second, Algo: throttlekit.GCRA}, 1); !errors.Is(err, throttlekit.ErrInvalidArgument) {
		t.Fatalf("lease with gcra: %v", err)
	}
	if _, err := c.Return(ctx, "k", -1, time.UnixMilli(1)); !errors.Is(err, throttlekit.ErrInvalidArgument) {
		t.Fatalf("negative return: %v", err)
	}
	for name, at := range map[string]time.Time{"zero": {}, "fractional": time.UnixMilli(1000).Add(time.Microsecond)} {
		var ae *throttlekit.ArgError
		if _, err := c.Return(ctx, "k", 1, at); !errors.As(err, &ae) || ae.Arg != "resetAt" {
			t.Fatalf("return to a %s reset time: %v", name, err)
		}
	}
	if _, err := c.CellThrottle(ctx, "k", 1, 1, 1500*time.Millisecond, 1); !errors.Is(err, throttlekit.ErrInvalidArgument) {
		t.Fatalf("cell period of a fraction of a second: %v", err)
	}
	if _, err := c.Reset(ctx); !errors.Is(err, throttlekit.ErrInvalidArgument) {
		t.Fatalf("reset of no keys: %v", err)
	}
}

func TestClientPipeline(t *testing.T) {
	srv := startServer(t)
	var sent atomic.Int64
	rdb := srv.RedisClient(t, 3, &sent)
	c := throttlekit.NewClient(rdb)
	ctx := context.Background()
	lim := throttlekit.Rate{Limit: 2, Period: time.Minute, Algo: throttlekit.FixedWindow}
	if err := rdb.Ping(ctx).Err(); err != nil { // connect: the handshake counts too
		t.Fatal(err)
	}
	base := sent.Load()
	p := rdb.Pipeline()
	var cmds []*throttlekit.DecisionCmd
	for range 3 {
		cmds = append(cmds, c.CheckCmd(ctx, p, "pipe", lim, 1))
	}
	peek := c.PeekCmd(ctx, p, "pipe", lim)
	lease := c.LeaseCmd(ctx, p, "pipe-lease", throttlekit.Rate{Limit: 10, Period: time.Minute}, 4)
	bad := c.CheckCmd(ctx, p, "pipe", throttlekit.Rate{}, 1)
	wrong := c.CheckCmd(ctx, p, "pipe", throttlekit.Rate{Limit: 2, Period: time.Minute}, 1)
	if _, err := p.Exec(ctx); err == nil {
		t.Fatal("Exec: want the WRONGTYPE error of the last command")
	}
	if n := sent.Load() - base; n != 6 {
		t.Fatalf("sent %d commands, want 6 (the invalid one is not queued)", n)
	}
	for i, want := range []bool{true, true, false} {
		d, err := cmds[i].Result()
		if err != nil || d.Allowed != want {
			t.Fatalf("check %d: %+v %v", i, d, err)
		}
	}
	if d, err := peek.Result(); err != nil || d.Allowed {
		t.Fatalf("peek: %+v %v", d, err)
	}
	g, err := lease.Result()
	if err != nil || g.Credits != 4 {
		t.Fatalf("lease: %+v %v", g, err)
	}
	rc := c.ReturnCmd(ctx, p, "pipe-lease", 4, g.ResetAt)
	cc := c.CellThrottleCmd(ctx, p, "pipe-cell", 15, 30, time.Minute, 1)
	rs := c.ResetCmd(ctx, p, "pipe", "pipe-none")
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := rc.Result(); err != nil || n != 4 {
		t.Fatalf("return: %d %v", n, err)
	}
	if r, err := cc.Result(); err != nil || r.Limited || r.Remaining != 15 {
		t.Fatalf("cell: %+v %v", r, err)
	}
	if n, err := rs.Result(); err != nil || n != 1 {
		t.Fatalf("reset: %d %v", n, err)
	}
	if _, err := c.ResetCmd(ctx, p).Result(); !errors.Is(err, throttlekit.ErrInvalidArgument) {
		t.Fatalf("reset of no keys: %v", err)
	}
	if _, err := bad.Result(); !errors.Is(err, throttlekit.ErrInvalidArgument) {
		t.Fatalf("invalid pipelined check: %v", err)
	}
	if _, err := wrong.Result(); !errors.Is(err, throttlekit.ErrWrongType) {
		t.Fatalf("wrong type in a pipeline: %v", err)
	}
}

// TestClientContext checks that a done context stops a call before it is
// sent and that a deadline bounds the wait for a reply from a peer that
// never answers (a listener that accepts and stays silent).
func TestClientContext(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ContextTimeoutEnabled: true, Protocol: 2, MaxRetries: -1, DisableIdentity: true})
	defer rdb.Close()
	c := throttlekit.NewClient(rdb)
	lim := throttlekit.Rate{Limit: 1, Period: time.Second}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Check(ctx, "k", lim, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = c.Check(ctx, "k", lim, 1)
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("deadline: %v", err)
	}
}

// TestRateConstructors: PerSecond, PerMinute, PerHour and PerDay are n
// units per their period with the server's default algorithm.
func TestRateConstructors(t *testing.T) {
	for _, tc := range []struct {
		got  throttlekit.Rate
		want throttlekit.Rate
	}{
		{throttlekit.PerSecond(5), throttlekit.Rate{Limit: 5, Period: time.Second}},
		{throttlekit.PerMinute(6), throttlekit.Rate{Limit: 6, Period: time.Minute}},
		{throttlekit.PerHour(7), throttlekit.Rate{Limit: 7, Period: time.Hour}},
		{throttlekit.PerDay(8), throttlekit.Rate{Limit: 8, Period: 24 * time.Hour}},
	} {
		if tc.got != tc.want {
			t.Errorf("got %+v, want %+v", tc.got, tc.want)
		}
	}
}

// TestAlgoNames: each Algo constant is the name the server's ALGO argument
// takes, as TYPE reports for a key checked with it.
func TestAlgoNames(t *testing.T) {
	srv := startServer(t)
	rdb := srv.RedisClient(t, 3, nil)
	c := throttlekit.NewClient(rdb)
	ctx := context.Background()
	for algo, name := range map[throttlekit.Algo]string{
		throttlekit.GCRA: "gcra", throttlekit.TokenBucket: "token",
		throttlekit.FixedWindow: "fixed", throttlekit.SlidingWindow: "sliding",
	} {
		rate := throttlekit.PerMinute(10)
		rate.Algo = algo
		key := "algo:" + name
		if d, err := c.Check(ctx, key, rate, 1); err != nil || !d.Allowed || d.Remaining != 9 {
			t.Fatalf("%s: %+v %v", name, d, err)
		}
		if typ, err := rdb.Type(ctx, key).Result(); err != nil || typ != name {
			t.Fatalf("%s: TYPE says %q (%v)", name, typ, err)
		}
	}
	// The empty Algo is the server's default, GCRA.
	if _, err := c.Check(ctx, "algo:default", throttlekit.PerMinute(10), 1); err != nil {
		t.Fatal(err)
	}
	if typ, err := rdb.Type(ctx, "algo:default").Result(); err != nil || typ != "gcra" {
		t.Fatalf("default algorithm: TYPE says %q (%v)", typ, err)
	}
}
