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
