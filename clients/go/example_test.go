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

// The examples below need a server on 127.0.0.1:6380 (make run), so they
// are compiled but not run by go test.

func ExampleClient_Check() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	c := throttlekit.NewClient(rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	d, err := c.Check(ctx, "user:42", throttlekit.Limit{Limit: 100, Period: time.Minute}, 1)
	if err != nil {
		log.Fatal(err)
	}
	if !d.Allowed {
		fmt.Println("rate limited, retry in", d.RetryAfter)
	}
}

func ExampleClient_Peek() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	d, err := c.Peek(context.Background(), "user:42", throttlekit.Limit{Limit: 100, Period: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(d.Remaining, "left until", d.ResetAt)
}

func ExampleClient_Reset() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	n, err := c.Reset(context.Background(), "user:42", "user:43")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "keys forgotten")
}

func ExampleClient_Lease() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	ctx := context.Background()
	g, err := c.Lease(ctx, "svc:a", throttlekit.Limit{Limit: 1000, Period: time.Second}, 50)
	if err != nil {
		log.Fatal(err)
	}
	// Spend up to g.Credits before g.ResetAt(), then give back the rest.
	used := min(g.Credits, 20)
	if _, err := c.Return(ctx, "svc:a", g.Credits-used, g.ResetAtMs); err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_Return() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	// resetAtMs is the ResetAtMs of the Grant the credits came from.
	var resetAtMs int64 = 1795392000000
	n, err := c.Return(context.Background(), "svc:b", 12, resetAtMs)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "credits taken back") // 0 once that window is over
}

func ExampleClient_CellThrottle() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	r, err := c.CellThrottle(context.Background(), "user123", 15, 30, 60, 1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Limited, r.Remaining, r.ResetAfter)
}

func ExampleClient_CheckCmd() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"})
	c := throttlekit.NewClient(rdb)
	ctx := context.Background()
	lim := throttlekit.Limit{Limit: 10, Period: time.Second}
	p := rdb.Pipeline()
	cmds := []*throttlekit.DecisionCmd{
		c.CheckCmd(ctx, p, "a", lim, 1),
		c.CheckCmd(ctx, p, "b", lim, 1),
	}
	_, _ = p.Exec(ctx) // one round trip; each command's error is in its Result
	for _, cmd := range cmds {
		d, err := cmd.Result()
		fmt.Println(d.Allowed, err)
	}
}

func ExampleServerError() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	_, err := c.Check(context.Background(), "api:key", throttlekit.Limit{Limit: 10, Period: time.Second}, 1)
	switch {
	case errors.Is(err, throttlekit.ErrWrongType):
		fmt.Println("the key holds another algorithm's state")
	case errors.Is(err, throttlekit.ErrInvalidArgument):
		fmt.Println("bad arguments:", err)
	}
}

func ExampleNewLimiter() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	l := throttlekit.NewLimiter(throttlekit.NewClient(rdb), throttlekit.LimiterOptions{
		Mode:     throttlekit.ModeLeased,
		Limit:    throttlekit.Limit{Limit: 1000, Period: time.Second},
		LowWater: 10,
	})
	defer l.Close()
	d, err := l.Allow(context.Background(), "svc:search", 1)
	if err != nil {
		log.Print(err) // the decision follows FailOpen
	}
	fmt.Println(d.Allowed)
}

func ExampleClient_MCheck() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	// One request must pass the user's, the tenant's and the global limit;
	// it is charged to all three or to none.
	md, err := c.MCheck(context.Background(), []throttlekit.KeyLimit{
		{Key: "user:42", Limit: throttlekit.Limit{Limit: 10, Period: time.Second}},
		{Key: "tenant:7", Limit: throttlekit.Limit{Limit: 100, Period: time.Second}},
		{Key: "global", Limit: throttlekit.Limit{Limit: 5000, Period: time.Second, Algo: "sliding"}},
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
	}
}

func ExampleClient_Reserve() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	ctx := context.Background()
	lim := throttlekit.Limit{Limit: 100_000, Period: time.Minute} // tokens per minute
	// Charge the expected tokens of a model call up front...
	r, err := c.Reserve(ctx, "tenant:7:tokens", lim, 2000, 5*time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	if !r.Allowed {
		fmt.Println("over budget, retry in", r.RetryAfter)
		return
	}
	// ...and settle the real count once the reply is in.
	if _, err := c.Settle(ctx, "tenant:7:tokens", r.ID, 1350); err != nil {
		log.Fatal(err)
	}
}

func ExampleClient_Settle() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	// id is the ID of an admitted Reservation on the same key.
	id := "17.1.100000.60000000000"
	ok, err := c.Settle(context.Background(), "tenant:7:tokens", id, 2600)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ok) // false once the reservation expired or was settled
}

func ExampleClient_CheckBan() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	// Five failed logins a minute; ten denials within that minute lock the
	// address out for an hour.
	d, err := c.CheckBan(context.Background(), "login:203.0.113.9",
		throttlekit.Limit{Limit: 5, Period: time.Minute}, 1,
		throttlekit.BanPolicy{Threshold: 10, Duration: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	if !d.Allowed {
		fmt.Println("try again in", d.RetryAfter)
	}
}

func ExampleClient_Banned() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	left, err := c.Banned(context.Background(), "login:203.0.113.9")
	if err != nil {
		log.Fatal(err)
	}
	if left > 0 {
		fmt.Println("banned for another", left)
	}
}

func ExampleClient_Unban() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	lifted, err := c.Unban(context.Background(), "login:203.0.113.9")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(lifted)
}

func ExampleClient_Acquire() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
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
}

func ExampleClient_Release() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	// token is the Token of an acquired Slot of the same key.
	released, err := c.Release(context.Background(), "exports", "3.1042")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(released) // false when already released or expired
}

func ExampleClient_Refresh() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"}))
	token := "3.1042" // the Token of an acquired Slot of the same key
	// While long work runs, refresh its slot well before the ttl passes
	// (say at a third of it).
	held, err := c.Refresh(context.Background(), "exports", token, 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	if !held {
		fmt.Println("slot lost (released or expired): stop the work")
	}
}

func ExampleClient_MCheckCmd() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380"})
	c := throttlekit.NewClient(rdb)
	ctx := context.Background()
	lim := throttlekit.Limit{Limit: 10, Period: time.Second}
	p := rdb.Pipeline()
	mc := c.MCheckCmd(ctx, p, []throttlekit.KeyLimit{{Key: "a", Limit: lim}, {Key: "b", Limit: lim}}, 1)
	sc := c.AcquireCmd(ctx, p, "jobs", 2, time.Minute)
	_, _ = p.Exec(ctx) // one round trip; each command's error is in its Result
	md, err := mc.Result()
	fmt.Println(md.Allowed, err)
	s, err := sc.Result()
	fmt.Println(s.Acquired, err)
}
