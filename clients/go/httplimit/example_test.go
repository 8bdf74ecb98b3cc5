package httplimit_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"

	"github.com/redis/go-redis/v9"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
	"github.com/throttlekit/throttlekit-server/clients/go/httplimit"
)

// serverAddr is the address of a throttlekit-server: make run listens on
// 127.0.0.1:6380. Under go test, TestMain starts a server of the
// repository's own on a free port and points serverAddr at it.
var serverAddr = "127.0.0.1:6380"

// Each client address may make 2 requests a minute, behind a load balancer
// in 10.0.0.0/8. In a program, pass h to http.ListenAndServe.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: serverAddr, ContextTimeoutEnabled: true})
	rate := throttlekit.PerMinute(2)
	limiter, err := throttlekit.NewLimiter(throttlekit.NewClient(rdb), throttlekit.LimiterOptions{
		Mode: throttlekit.ModeCachedDeny, Rate: rate,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello\n")) })
	h := httplimit.Handler(limiter, httplimit.Options{
		Name:           "per-client",
		Window:         rate.Period,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		OnError:        func(r *http.Request, err error) { log.Print("rate limiter: ", err) },
	}, mux)

	// Three requests of one client through the load balancer.
	for range 3 {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "10.1.2.3:40000"
		req.Header.Set("X-Forwarded-For", "203.0.113.50")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Header().Get("Retry-After") != "")
	}
	// Output:
	// 200 "per-client";q=2;w=60 false
	// 200 "per-client";q=2;w=60 false
	// 429 "per-client";q=2;w=60 true
}
