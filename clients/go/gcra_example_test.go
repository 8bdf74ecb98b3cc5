package throttlekit_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
)

func ExampleClient_GCRA() {
	c := throttlekit.NewClient(redis.NewClient(&redis.Options{Addr: serverAddr}))
	ctx := context.Background()
	// Bursts of up to 5 calls, then one a minute.
	lim := throttlekit.GCRALimit{MaxBurst: 4, TokensPerPeriod: 1, Period: time.Minute}
	for i := 0; i < 6; i++ {
		r, err := c.GCRA(ctx, "gcra:example", lim, 1)
		if err != nil {
			log.Fatal(err)
		}
		if r.Limited {
			fmt.Println("limited, retry in", r.RetryAfter)
			continue
		}
		fmt.Println("allowed,", r.Remaining, "of", r.Limit, "left")
	}
	// Output:
	// allowed, 4 of 5 left
	// allowed, 3 of 5 left
	// allowed, 2 of 5 left
	// allowed, 1 of 5 left
	// allowed, 0 of 5 left
	// limited, retry in 1m0s
}
