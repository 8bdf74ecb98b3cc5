package throttlekit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
)

// serverClock is a Limiter Clock that moves with a server whose clock is
// frozen by DEBUG SET-CLOCK: Now is the server's frozen instant, and Sleep
// records the wait and moves the server's clock (DEBUG ADVANCE-CLOCK) and
// its own by it, at once. Nothing in the tests below waits on the wall
// clock.
type serverClock struct {
	admin *redis.Client

	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
	// onSleep, when set, runs at the start of each Sleep (e.g. to cancel
	// the context).
	onSleep func()
}

// freezeServer freezes srv's clock at an instant 10 s into a minute an
// hour or so from now (in the future, so that a context deadline on this
// clock is in the future on the wall clock too) and returns a clock that
// moves it.
func freezeServer(t *testing.T, srv *testServer) *serverClock {
	t.Helper()
	at := time.Now().Add(time.Hour).Truncate(time.Minute).Add(10 * time.Second)
	c := &serverClock{admin: srv.RedisClient(t, 3, nil), now: at}
	if err := c.admin.Do(context.Background(), "DEBUG", "SET-CLOCK", at.UnixMilli()).Err(); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *serverClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *serverClock) Sleep(ctx context.Context, d time.Duration) error {
	if c.onSleep != nil {
		c.onSleep()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	ms := (d + time.Millisecond - 1) / time.Millisecond
	if err := c.admin.Do(context.Background(), "DEBUG", "ADVANCE-CLOCK", int64(ms)).Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(ms * time.Millisecond)
	return nil
}

func (c *serverClock) slept() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// asked is the number of times a limiter asked the server for a decision.
func asked(l *throttlekit.Limiter) int64 {
	st := l.Stats()
	return st.Checks + st.Leases
}

// TestWaitSleepsRetryAfter: on a server whose clock moves only when Wait
// sleeps, each mode's Wait passes the first two units of a limit of 2 a
// minute at once, and the third after exactly one sleep of the denial's
// retry-after: no spin. ModeStrict and ModeCachedDeny ask the server once
// before the sleep and once after it, and sleep the server's retry-after
// to the millisecond (GCRA: 30 s). ModeLeased knows from its last lease
// that the window (fixed, 50 s left) is empty, so it asks only after the
// sleep, which is the window's rest plus at most its margin of a few
// milliseconds.
func TestWaitSleepsRetryAfter(t *testing.T) {
	srv := startServer(t, "--enable-debug-command", "yes")
	for _, tc := range []struct {
		mode       throttlekit.Mode
		algo       throttlekit.Algo
		want, slop time.Duration
		asks       int64
	}{
		{throttlekit.ModeStrict, throttlekit.GCRA, 30 * time.Second, 0, 2},
		{throttlekit.ModeCachedDeny, throttlekit.GCRA, 30 * time.Second, 0, 2},
		{throttlekit.ModeLeased, throttlekit.FixedWindow, 50 * time.Second, 5 * time.Millisecond, 1},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			clk := freezeServer(t, srv)
			rate := throttlekit.PerMinute(2)
			rate.Algo = tc.algo
			l := newLimiter(t, throttlekit.NewClient(srv.RedisClient(t, 3, nil)), throttlekit.LimiterOptions{
				Mode: tc.mode, Rate: rate, Clock: clk, Sizer: throttlekit.FixedSizer(1),
			})
			defer l.Close()
			ctx := context.Background()
			key := "wait:" + tc.mode.String()
			for i := range 2 {
				if d, err := l.Wait(ctx, key); err != nil || !d.Allowed {
					t.Fatalf("wait %d: %+v %v", i, d, err)
				}
			}
			if s := clk.slept(); len(s) != 0 {
				t.Fatalf("slept %v for units within the limit", s)
			}
			before := asked(l)
			d, err := l.Wait(ctx, key)
			if err != nil || !d.Allowed {
				t.Fatalf("third wait: %+v %v", d, err)
			}
			s := clk.slept()
			if len(s) != 1 || s[0] < tc.want || s[0] > tc.want+tc.slop {
				t.Fatalf("slept %v, want one sleep of %v (+%v)", s, tc.want, tc.slop)
			}
			if n := asked(l) - before; n != tc.asks {
				t.Fatalf("asked the server %d times for one sleep, want %d", n, tc.asks)
			}
		})
	}
}

// TestWaitErrors: the ways WaitN gives up, each at once and without a
// sleep the context or the rate cannot allow.
func TestWaitErrors(t *testing.T) {
	srv := startServer(t, "--enable-debug-command", "yes")
	setup := func(t *testing.T, mode throttlekit.Mode) (*throttlekit.Limiter, *serverClock) {
		clk := freezeServer(t, srv)
		rate := throttlekit.PerMinute(2)
		if mode == throttlekit.ModeLeased {
			rate.Algo = throttlekit.FixedWindow
		}
		l := newLimiter(t, throttlekit.NewClient(srv.RedisClient(t, 3, nil)), throttlekit.LimiterOptions{Mode: mode, Rate: rate, Clock: clk})
		t.Cleanup(func() { l.Close() })
		return l, clk
	}
	for _, mode := range []throttlekit.Mode{throttlekit.ModeStrict, throttlekit.ModeCachedDeny, throttlekit.ModeLeased} {
		t.Run(mode.String(), func(t *testing.T) {
			k := func(name string) string { return mode.String() + ":" + name }
			t.Run(k("never"), func(t *testing.T) {
				l, clk := setup(t, mode)
				d, err := l.WaitN(context.Background(), k("never"), 3)
				if !errors.Is(err, throttlekit.ErrNeverAllowed) || d.Allowed || d.RetryAfter != -1 || len(clk.slept()) != 0 {
					t.Fatalf("n above the limit: %+v %v, slept %v", d, err, clk.slept())
				}
			})
			t.Run("deadline", func(t *testing.T) {
				l, clk := setup(t, mode)
				if _, err := l.WaitN(context.Background(), k("dl"), 2); err != nil {
					t.Fatal(err)
				}
				// The next unit comes 30 s (GCRA) or 50 s (fixed) later on
				// the server's clock: a deadline 10 s away on the limiter's
				// clock is too soon, one 70 s away is not.
				ctx, cancel := context.WithDeadline(context.Background(), clk.Now().Add(10*time.Second))
				defer cancel()
				before := asked(l)
				d, err := l.Wait(ctx, k("dl"))
				if !errors.Is(err, throttlekit.ErrWouldExceedDeadline) || d.Allowed || d.RetryAfter < 30*time.Second || len(clk.slept()) != 0 {
					t.Fatalf("deadline before the retry-after: %+v %v, slept %v", d, err, clk.slept())
				}
				if n := asked(l) - before; n > 1 {
					t.Fatalf("asked the server %d times, want at most 1", n)
				}
				ctx, cancel = context.WithDeadline(context.Background(), clk.Now().Add(70*time.Second))
				defer cancel()
				if d, err := l.Wait(ctx, k("dl")); err != nil || !d.Allowed || len(clk.slept()) != 1 {
					t.Fatalf("deadline after the retry-after: %+v %v, slept %v", d, err, clk.slept())
				}
			})
			t.Run("cancelled while sleeping", func(t *testing.T) {
				l, clk := setup(t, mode)
				if _, err := l.WaitN(context.Background(), k("cancel"), 2); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				clk.onSleep = cancel
				d, err := l.Wait(ctx, k("cancel"))
				if !errors.Is(err, context.Canceled) || d.Allowed || d.RetryAfter <= 0 {
					t.Fatalf("cancelled: %+v %v", d, err)
				}
			})
			t.Run("done before", func(t *testing.T) {
				l, _ := setup(t, mode)
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				before := asked(l)
				if d, err := l.Wait(ctx, k("done")); !errors.Is(err, context.Canceled) || d.Allowed {
					t.Fatalf("done context: %+v %v", d, err)
				}
				if n := asked(l) - before; n != 0 {
					t.Fatalf("asked the server %d times with a done context", n)
				}
			})
		})
	}
}

// TestWaitServerDown: when the server cannot be asked, WaitN returns at
// once with the error and AllowN's decision, which follows FailOpen.
func TestWaitServerDown(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: freePort(t), MaxRetries: -1, DialTimeout: time.Second, DialerRetries: 1})
	defer rdb.Close()
	c := throttlekit.NewClient(rdb)
	for _, mode := range []throttlekit.Mode{throttlekit.ModeStrict, throttlekit.ModeCachedDeny, throttlekit.ModeLeased} {
		for _, open := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/open=%v", mode, open), func(t *testing.T) {
				l := newLimiter(t, c, throttlekit.LimiterOptions{Mode: mode, Rate: throttlekit.PerSecond(10), FailOpen: open})
				defer l.Close()
				d, err := l.Wait(context.Background(), "k")
				if err == nil || errors.Is(err, throttlekit.ErrNeverAllowed) || d.Allowed != open {
					t.Fatalf("%+v %v", d, err)
				}
			})
		}
	}
}

// TestWaitClose: Close ends a Wait sleeping on the process clock; the Wait
// returns ErrClosed (whether Close came before its first question, during
// its sleep or in between).
func TestWaitClose(t *testing.T) {
	srv := startServer(t)
	l := newLimiter(t, throttlekit.NewClient(srv.RedisClient(t, 3, nil)), throttlekit.LimiterOptions{Rate: throttlekit.PerDay(1)})
	if _, err := l.Allow(context.Background(), "closing"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Wait(context.Background(), "closing") // a day to wait
		done <- err
	}()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, throttlekit.ErrClosed) {
		t.Fatalf("Wait after Close: %v", err)
	}
}
