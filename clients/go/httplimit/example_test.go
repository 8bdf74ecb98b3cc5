package httplimit_test

import (
	"log"
	"net/http"
	"net/netip"
	"time"

	"github.com/redis/go-redis/v9"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
	"github.com/throttlekit/throttlekit-server/clients/go/httplimit"
)

// A server limiting each client address to 100 requests a minute behind a
// load balancer in 10.0.0.0/8.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6380", ContextTimeoutEnabled: true})
	lim := throttlekit.Limit{Limit: 100, Period: time.Minute}
	limiter := throttlekit.NewLimiter(throttlekit.NewClient(rdb), throttlekit.LimiterOptions{
		Mode: throttlekit.ModeCachedDeny, Limit: lim,
	})
	defer limiter.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello\n")) })
	h := httplimit.Handler(limiter, httplimit.Options{
		Name:           "per-client",
		Window:         lim.Period,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		OnError:        func(r *http.Request, err error) { log.Print("rate limiter: ", err) },
	}, mux)
	log.Fatal(http.ListenAndServe(":8080", h))
}
