package throttlekit_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
)

// serverAddr is the address of a throttlekit-server: make run listens on
// 127.0.0.1:6380. Under go test, TestMain starts a server of the
// repository's own on a free port and points serverAddr at it, and every
// example below runs against it and checks its output. Each example uses
// keys of its own, and periods long enough that no output depends on how
// fast it runs.
var serverAddr = "127.0.0.1:6380"

func ExampleClient_Check() {
	rdb := redis.NewClient(&redis.Options{Addr: serverAddr, ContextTimeoutEnabled: true})
	c := throttlekit.NewClient(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	d, err := c.Check(ctx, "user:42", throttlekit.PerMinute(100), 1)
	if err != nil {
		log.Fatal(err)
	}
	if !d.Allowed {
		fmt.Println("rate limited, retry in", d.RetryAfter)
		return
	}
	fmt.Println("allowed,", d.Remaining, "left")
	// Output: allowed, 99 left
}

func ExampleClient_Peek() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	d, err := c.Peek(context.Background(), "user:43", throttlekit.PerMinute(100))
	if err != nil {
		log.Fatal(err)
	}
	// Nothing was consumed: a key never checked has its whole budget.
	fmt.Println(d.Allowed, d.Remaining)
	// Output: true 100
}

func ExampleClient_Reset() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	ctx := context.Background()
	if _, err := c.Check(ctx, "user:44", throttlekit.PerDay(100), 1); err != nil {
		log.Fatal(err)
	}
	// user:45 holds no state: only user:44 is counted.
	n, err := c.Reset(ctx, "user:44", "user:45")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "of 2 keys forgotten")
	// Output: 1 of 2 keys forgotten
}

func ExampleClient_Lease() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	ctx := context.Background()
	g, err := c.Lease(ctx, "svc:a", throttlekit.PerSecond(1000), 50)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(g.Credits, "credits")
	// Spend up to g.Credits before g.ResetAt, then give back the rest (the
	// server takes them back only while that window is open).
	used := min(g.Credits, 20)
	if _, err := c.Return(ctx, "svc:a", g.Credits-used, g.ResetAt); err != nil {
		log.Fatal(err)
	}
	// Output: 50 credits
}

func ExampleClient_Return() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	// resetAt is the ResetAt of the Grant the credits came from.
	resetAt := time.UnixMilli(1795392000000)
	n, err := c.Return(context.Background(), "svc:b", 12, resetAt)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "credits taken back") // 0 once that window is over
	// Output: 0 credits taken back
}

func ExampleClient_CellThrottle() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	// A burst of 15 beyond the first request, 30 per 60 s, one unit.
	r, err := c.CellThrottle(context.Background(), "user123", 15, 30, time.Minute, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Limited, r.Remaining, r.ResetAfter)
	// Output: false 15 2s
}

func ExampleClient_CheckCmd() {
	rdb := redis.NewClient(&redis.Options{Addr: serverAddr})
	c := throttlekit.NewClient(rdb)
	ctx := context.Background()
	rate := throttlekit.PerSecond(10)
	p := rdb.Pipeline()
	cmds := []*throttlekit.DecisionCmd{
		c.CheckCmd(ctx, p, "a", rate, 1),
		c.CheckCmd(ctx, p, "b", rate, 1),
	}
	_, _ = p.Exec(ctx) // one round trip; each command's error is in its Result
	for _, cmd := range cmds {
		d, err := cmd.Result()
		fmt.Println(d.Allowed, err)
	}
	// Output:
	// true <nil>
	// true <nil>
}

func ExampleServerError() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	ctx := context.Background()
	rate := throttlekit.PerDay(10) // GCRA, the default
	if _, err := c.Check(ctx, "api:key", rate, 1); err != nil {
		log.Fatal(err)
	}
	rate.Algo = throttlekit.SlidingWindow
	_, err := c.Check(ctx, "api:key", rate, 1)
	switch {
	case errors.Is(err, throttlekit.ErrWrongType):
		fmt.Println("the key holds another algorithm's state")
	case errors.Is(err, throttlekit.ErrInvalidArgument):
		fmt.Println("bad arguments:", err)
	}
	// Output: the key holds another algorithm's state
}

func ExampleNewLimiter() {
	rdb := redis.NewClient(&redis.Options{Addr: serverAddr, ContextTimeoutEnabled: true})
	l, err := throttlekit.NewLimiter(throttlekit.NewClient(rdb), throttlekit.LimiterOptions{
		Mode:     throttlekit.ModeLeased,
		Rate:     throttlekit.PerDay(100_000),
		LowWater: 10,
	})
	if err != nil {
		log.Fatal(err) // invalid options
	}
	defer l.Close()
	d, err := l.Allow(context.Background(), "svc:search")
	if err != nil {
		log.Print(err) // the decision follows FailOpen
	}
	fmt.Println(d.Allowed)
	// Output: true
}

func ExampleNewLimiter_invalid() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	// A leased limiter leases fixed windows only: the options are checked
	// once, before anything is started or sent.
	rate := throttlekit.PerMinute(100)
	rate.Algo = throttlekit.SlidingWindow
	_, err := throttlekit.NewLimiter(c, throttlekit.LimiterOptions{Mode: throttlekit.ModeLeased, Rate: rate})
	fmt.Println(errors.Is(err, throttlekit.ErrInvalidArgument), err)
	// Output: true throttlekit: algo of a leased limiter must be FixedWindow (or empty)
}

func ExampleLimiter_Allow() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	l, err := throttlekit.NewLimiter(c, throttlekit.LimiterOptions{
		Mode: throttlekit.ModeCachedDeny,
		Rate: throttlekit.PerHour(2),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	for range 3 {
		d, err := l.Allow(context.Background(), "user:47")
		if err != nil {
			log.Print(err)
		}
		fmt.Println(d.Allowed, d.Remaining)
	}
	// Output:
	// true 1
	// true 0
	// false 0
}

func ExampleLimiter_AllowN() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	l, err := throttlekit.NewLimiter(c, throttlekit.LimiterOptions{Rate: throttlekit.PerHour(10)})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	// An upload of 8 units, then one of 4: the second does not fit.
	for _, n := range []int64{8, 4} {
		d, err := l.AllowN(ctx, "uploads:7", n)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(n, d.Allowed, d.Remaining)
	}
	// Output:
	// 8 true 2
	// 4 false 2
}

func ExampleLimiter_Wait() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	// One unit every 5 ms, no burst beyond one: the second and third
	// calls each sleep for the server's retry-after before they pass.
	rate := throttlekit.PerSecond(200)
	rate.Burst = 1
	l, err := throttlekit.NewLimiter(c, throttlekit.LimiterOptions{Rate: rate})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 3 {
		if _, err := l.Wait(ctx, "jobs:poll"); err != nil {
			log.Fatal(err)
		}
		fmt.Println("job", i)
	}
	// Output:
	// job 0
	// job 1
	// job 2
}

func ExampleLimiter_WaitN() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	l, err := throttlekit.NewLimiter(c, throttlekit.LimiterOptions{Rate: throttlekit.PerHour(10)})
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := l.WaitN(ctx, "reports:9", 10); err != nil {
		log.Fatal(err)
	}
	// The next unit comes in 6 minutes, after the deadline: WaitN returns
	// at once rather than sleep into it.
	_, err = l.WaitN(ctx, "reports:9", 1)
	fmt.Println(errors.Is(err, throttlekit.ErrWouldExceedDeadline))
	// 11 units can never pass a limit of 10.
	_, err = l.WaitN(ctx, "reports:10", 11)
	fmt.Println(errors.Is(err, throttlekit.ErrNeverAllowed))
	// Output:
	// true
	// true
}

func ExampleClient_MCheck() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	// One request must pass the user's, the tenant's and the global limit;
	// it is charged to all three or to none.
	md, err := c.MCheck(context.Background(), []throttlekit.KeyLimit{
		{Key: "user:46", Rate: throttlekit.PerSecond(10)},
		{Key: "tenant:7", Rate: throttlekit.PerSecond(100)},
		{Key: "global", Rate: throttlekit.Rate{Limit: 5000, Period: time.Second, Algo: throttlekit.SlidingWindow}},
	}, 1)
	if err != nil {
		log.Fatal(err)
	}
	if !md.Allowed {
		for i, d := range md.Decisions {
			if !d.Allowed {
				fmt.Println("limit", i, "says no; retry in", md.RetryAfter)
			}
		}
		return
	}
	for _, d := range md.Decisions {
		fmt.Print(d.Remaining, " ")
	}
	fmt.Println("left")
	// Output: 9 99 4999 left
}

func ExampleClient_Reserve() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	ctx := context.Background()
	tokens := throttlekit.PerMinute(100_000)
	// Charge the expected tokens of a model call up front...
	r, err := c.Reserve(ctx, "tenant:7:tokens", tokens, 2000, 5*time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	if !r.Allowed {
		fmt.Println("over budget, retry in", r.RetryAfter)
		return
	}
	fmt.Println("reserved 2000,", r.Remaining, "left")
	// ...and settle the real count once the reply is in.
	ok, err := c.Settle(ctx, "tenant:7:tokens", r.ID, 1350)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("settled at 1350:", ok)
	// Output:
	// reserved 2000, 98000 left
	// settled at 1350: true
}

func ExampleClient_Settle() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	// id is the ID of an admitted Reservation on the same key.
	id := "17.1.100000.60000000000"
	ok, err := c.Settle(context.Background(), "tenant:8:tokens", id, 2600)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ok) // false once the reservation expired or was settled
	// Output: false
}

func ExampleClient_CheckBan() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	ctx := context.Background()
	// Five failed logins an hour; ten denials within that hour lock the
	// address out for a day.
	rate := throttlekit.PerHour(5)
	ban := throttlekit.BanPolicy{Threshold: 10, Duration: 24 * time.Hour}
	var allowed, denied int
	for range 20 {
		d, err := c.CheckBan(ctx, "login:203.0.113.9", rate, 1, ban)
		if err != nil {
			log.Fatal(err)
		}
		if d.Allowed {
			allowed++
		} else {
			denied++
		}
	}
	left, err := c.Banned(ctx, "login:203.0.113.9")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(allowed, "allowed,", denied, "denied; banned for about", left.Round(time.Hour))
	// Output: 5 allowed, 15 denied; banned for about 24h0m0s
}

func ExampleClient_Banned() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	left, err := c.Banned(context.Background(), "login:198.51.100.4")
	if err != nil {
		log.Fatal(err)
	}
	if left > 0 {
		fmt.Println("banned for another", left)
	} else {
		fmt.Println("not banned")
	}
	// Output: not banned
}

func ExampleClient_Unban() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	lifted, err := c.Unban(context.Background(), "login:198.51.100.5")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(lifted) // false: that address was not banned
	// Output: false
}

func ExampleClient_Acquire() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	ctx := context.Background()
	// At most 4 exports run at once; a crashed worker's slot frees itself
	// after 30s.
	s, err := c.Acquire(ctx, "exports", 4, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if !s.Acquired {
		fmt.Println(s.InFlight, "running; a slot frees within", s.RetryAfter)
		return
	}
	defer func() {
		if _, err := c.Release(ctx, "exports", s.Token); err != nil {
			log.Print(err)
		}
	}()
	// ... run the export, calling Refresh before 30s pass if it runs long.
	fmt.Println("acquired;", s.InFlight, "of", s.Limit, "running")
	// Output: acquired; 1 of 4 running
}

func ExampleClient_Release() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	// token is the Token of an acquired Slot of the same key.
	released, err := c.Release(context.Background(), "imports", "3.1042")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(released) // false when already released or expired
	// Output: false
}

func ExampleClient_Refresh() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	token := "3.1042" // the Token of an acquired Slot of the same key
	// While long work runs, refresh its slot well before the ttl passes
	// (say at a third of it).
	held, err := c.Refresh(context.Background(), "reports", token, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if !held {
		fmt.Println("slot lost (released or expired): stop the work")
	}
	// Output: slot lost (released or expired): stop the work
}

func ExampleClient_MCheckCmd() {
	rdb := redis.NewClient(&redis.Options{Addr: serverAddr})
	c := throttlekit.NewClient(rdb)
	ctx := context.Background()
	rate := throttlekit.PerSecond(10)
	p := rdb.Pipeline()
	mc := c.MCheckCmd(ctx, p, []throttlekit.KeyLimit{{Key: "x", Rate: rate}, {Key: "y", Rate: rate}}, 1)
	sc := c.AcquireCmd(ctx, p, "jobs", 2, time.Minute)
	_, _ = p.Exec(ctx) // one round trip; each command's error is in its Result
	md, err := mc.Result()
	fmt.Println(md.Allowed, err)
	s, err := sc.Result()
	fmt.Println(s.Acquired, err)
	// Output:
	// true <nil>
	// true <nil>
}
