package throttlekit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
	"github.com/throttlekit/throttlekit-server/clients/go/httplimit"
)

// TestHTTPMiddlewareEndToEnd: the middleware in front of a leased limiter
// on the real server lets the limit through, then answers 429 with the
// rate-limit fields and a Retry-After no earlier than the window's end.
func TestHTTPMiddlewareEndToEnd(t *testing.T) {
	srv := startServer(t)
	lim := throttlekit.Rate{Limit: 3, Period: 7 * 24 * time.Hour}
	l := newLimiter(t, throttlekit.NewClient(srv.RedisClient(t, 3, nil)), throttlekit.LimiterOptions{
		Mode: throttlekit.ModeLeased, Rate: lim,
	})
	defer l.Close()
	h := httplimit.Handler(l, httplimit.Options{Name: "api", Window: lim.Period}, http.HandlerFunc(
		func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hello\n")) }))
	var codes []int
	var last *httptest.ResponseRecorder
	for range 4 {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = "192.0.2.10:1234"
		h.ServeHTTP(rec, req)
		codes = append(codes, rec.Code)
		last = rec
	}
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 200 || codes[3] != 429 {
		t.Fatalf("status codes %v, want 200 200 200 429", codes)
	}
	if p := last.Header().Get("RateLimit-Policy"); p != `"api";q=3;w=604800` {
		t.Fatalf("RateLimit-Policy %q", p)
	}
	if last.Header().Get("Retry-After") == "" || last.Header().Get("RateLimit") == "" {
		t.Fatalf("429 headers %v", last.Header())
	}
}
