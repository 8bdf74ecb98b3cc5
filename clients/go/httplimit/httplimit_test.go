package httplimit_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
	"github.com/throttlekit/throttlekit-server/clients/go/httplimit"
)

// scripted is an Allower that answers with a fixed decision and error and
// records the keys and costs it was asked about. The middleware's own logic
// is what these tests examine; the limiter is tested against the real
// server in the parent package.
type scripted struct {
	d     throttlekit.Decision
	err   error
	keys  []string
	costs []int64
}

func (s *scripted) AllowN(_ context.Context, key string, cost int64) (throttlekit.Decision, error) {
	s.keys = append(s.keys, key)
	s.costs = append(s.costs, cost)
	return s.d, s.err
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ok(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

func TestResponses(t *testing.T) {
	for _, tc := range []struct {
		name       string
		d          throttlekit.Decision
		err        error
		window     time.Duration
		status     int
		policy     string
		rl         string
		retryAfter string
		body       string
	}{
		{
			name:   "allowed",
			d:      throttlekit.Decision{Allowed: true, Limit: 100, Remaining: 42, ResetAt: t0.Add(16200 * time.Millisecond)},
			window: time.Minute, status: 200,
			policy: `"api";q=100;w=60`, rl: `"api";r=42;t=17`,
		},
		{
			name:   "allowed without window",
			d:      throttlekit.Decision{Allowed: true, Limit: 10, Remaining: 0, ResetAt: t0.Add(time.Second)},
			status: 200, policy: `"api";q=10`, rl: `"api";r=0;t=1`,
		},
		{
			name:   "denied, retry rounded up",
			d:      throttlekit.Decision{Limit: 100, Remaining: 0, ResetAt: t0.Add(30 * time.Second), RetryAfter: 1500 * time.Millisecond},
			window: time.Minute, status: 429,
			policy: `"api";q=100;w=60`, rl: `"api";r=0;t=30`, retryAfter: "2", body: "rate limit exceeded, retry in 2 s\n",
		},
		{
			name:   "denied, whole seconds stay",
			d:      throttlekit.Decision{Limit: 5, ResetAt: t0.Add(2 * time.Second), RetryAfter: 2 * time.Second},
			status: 429, policy: `"api";q=5`, rl: `"api";r=0;t=2`, retryAfter: "2", body: "rate limit exceeded, retry in 2 s\n",
		},
		{
			name:   "denied, a millisecond is a second",
			d:      throttlekit.Decision{Limit: 5, ResetAt: t0.Add(time.Millisecond), RetryAfter: time.Millisecond},
			status: 429, policy: `"api";q=5`, rl: `"api";r=0;t=1`, retryAfter: "1", body: "rate limit exceeded, retry in 1 s\n",
		},
		{
			name:   "never at this limit",
			d:      throttlekit.Decision{Limit: 5, Remaining: 5, ResetAt: t0, RetryAfter: -1},
			status: 429, policy: `"api";q=5`, rl: `"api";r=5;t=0`, body: "request exceeds the rate limit\n",
		},
		{
			name:   "fail closed",
			d:      throttlekit.Decision{Limit: 5},
			err:    errors.New("connection refused"),
			status: 503, body: "rate limiter unavailable\n",
		},
		{
			name:   "fail open",
			d:      throttlekit.Decision{Allowed: true, Limit: 5},
			err:    errors.New("connection refused"),
			status: 200,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scripted{d: tc.d, err: tc.err}
			var reported error
			h := httplimit.Handler(s, httplimit.Options{
				Name: "api", Window: tc.window, Now: func() time.Time { return t0 },
				OnError: func(_ *http.Request, err error) { reported = err },
			}, http.HandlerFunc(ok))
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = "198.51.100.7:5555"
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status {
				t.Fatalf("status %d, want %d", rec.Code, tc.status)
			}
			hd := rec.Header()
			for name, want := range map[string]string{"RateLimit-Policy": tc.policy, "RateLimit": tc.rl, "Retry-After": tc.retryAfter} {
				if got := hd.Get(name); got != want {
					t.Errorf("%s: %q, want %q", name, got, want)
				}
			}
			if tc.body != "" && rec.Body.String() != tc.body {
				t.Errorf("body %q, want %q", rec.Body.String(), tc.body)
			}
			if tc.err != nil && reported != tc.err {
				t.Errorf("OnError got %v", reported)
			}
			if len(s.keys) != 1 || s.keys[0] != "ip:198.51.100.7" || s.costs[0] != 1 {
				t.Errorf("asked about %v %v", s.keys, s.costs)
			}
		})
	}
}

// TestRetryAfterNeverEarly: for any positive retry-after the header's
// whole seconds are at least it and less than a second more.
func TestRetryAfterNeverEarly(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		ra := time.Duration(1 + r.Int64N(int64(90*time.Second)))
		s := &scripted{d: throttlekit.Decision{Limit: 1, ResetAt: t0.Add(ra), RetryAfter: ra}}
		h := httplimit.Handler(s, httplimit.Options{Now: func() time.Time { return t0 }}, http.HandlerFunc(ok))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
		secs, err := strconv.ParseInt(rec.Header().Get("Retry-After"), 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(secs) * time.Second; got < ra || got >= ra+time.Second {
			t.Fatalf("retry-after %v sent as %d s", ra, secs)
		}
	}
}

func TestKeyAndCostFuncs(t *testing.T) {
	s := &scripted{d: throttlekit.Decision{Allowed: true, Limit: 1}}
	h := httplimit.Handler(s, httplimit.Options{
		KeyFunc: func(r *http.Request) (string, error) {
			k := r.Header.Get("X-API-Key")
			if k == "" {
				return "", errors.New("no API key")
			}
			return "key:" + k, nil
		},
		CostFunc: func(r *http.Request) int64 { return int64(len(r.URL.Path)) },
	}, http.HandlerFunc(ok))
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/abc", nil)
	req.Header.Set("X-API-Key", "k1")
	h.ServeHTTP(rec, req)
	if rec.Code != 200 || s.keys[0] != "key:k1" || s.costs[0] != 4 {
		t.Fatalf("%d %v %v", rec.Code, s.keys, s.costs)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != 400 || len(s.keys) != 1 {
		t.Fatalf("no key: status %d, asked %d times", rec.Code, len(s.keys))
	}
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestClientIP(t *testing.T) {
	trusted := prefixes("10.0.0.0/8", "fd00::/8")
	for _, tc := range []struct {
		name    string
		remote  string
		header  httplimit.ProxyHeader
		values  []string
		trusted []netip.Prefix
		want    string
	}{
		{"direct", "203.0.113.9:1234", 0, nil, trusted, "ip:203.0.113.9"},
		{"spoofed XFF from an untrusted peer", "203.0.113.9:1234", 0, []string{"1.2.3.4"}, trusted, "ip:203.0.113.9"},
		{"no trusted proxies", "10.0.0.1:80", 0, []string{"1.2.3.4"}, nil, "ip:10.0.0.1"},
		{"one trusted proxy", "10.0.0.1:80", 0, []string{"198.51.100.1"}, trusted, "ip:198.51.100.1"},
		{"spoofed prefix ignored", "10.0.0.1:80", 0, []string{"6.6.6.6, 198.51.100.1"}, trusted, "ip:198.51.100.1"},
		{"chain of trusted proxies", "10.0.0.1:80", 0, []string{"6.6.6.6, 198.51.100.1, 10.1.1.1", "10.2.2.2"}, trusted, "ip:198.51.100.1"},
		{"all trusted: leftmost", "10.0.0.1:80", 0, []string{"10.9.9.9, 10.1.1.1"}, trusted, "ip:10.9.9.9"},
		{"garbage stops the walk", "10.0.0.1:80", 0, []string{"6.6.6.6, garbage, 10.1.1.1"}, trusted, "ip:10.1.1.1"},
		{"empty header", "10.0.0.1:80", 0, nil, trusted, "ip:10.0.0.1"},
		{"XFF with a port", "10.0.0.1:80", 0, []string{"198.51.100.1:4444"}, trusted, "ip:198.51.100.1"},
		{"IPv6 grouped by /64", "[2001:db8:1:2:3:4:5:6]:443", 0, nil, trusted, "ip:2001:db8:1:2::/64"},
		{"IPv6 behind an IPv6 proxy", "[fd00::1]:443", 0, []string{"2001:db8:aa:bb::99"}, trusted, "ip:2001:db8:aa:bb::/64"},
		{"IPv4-mapped is IPv4", "[::ffff:198.51.100.3]:80", 0, nil, trusted, "ip:198.51.100.3"},
		{"Forwarded", "10.0.0.1:80", httplimit.Forwarded, []string{`for=6.6.6.6, for=198.51.100.1;proto=https;by=10.0.0.1`}, trusted, "ip:198.51.100.1"},
		{"Forwarded quoted IPv6 with port", "10.0.0.1:80", httplimit.Forwarded, []string{`for="[2001:db8:cafe::17]:4711"`}, trusted, "ip:2001:db8:cafe::/64"},
		{"Forwarded obfuscated stops", "10.0.0.1:80", httplimit.Forwarded, []string{`for=6.6.6.6, for=_hidden, for=10.3.3.3`}, trusted, "ip:10.3.3.3"},
		{"Forwarded ignores XFF", "10.0.0.1:80", httplimit.Forwarded, nil, trusted, "ip:10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest("GET", "/", nil)
			req.RemoteAddr = tc.remote
			name := "X-Forwarded-For"
			if tc.header == httplimit.Forwarded {
				name = "Forwarded"
			}
			for _, v := range tc.values {
				req.Header.Add(name, v)
			}
			if tc.name == "Forwarded ignores XFF" {
				req.Header.Add("X-Forwarded-For", "6.6.6.6")
			}
			got, err := httplimit.IPKey(tc.trusted, tc.header)(req)
			if err != nil || got != tc.want {
				t.Fatalf("key %q (%v), want %q", got, err, tc.want)
			}
		})
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "@unix"
	if _, err := httplimit.ClientIP(req, nil, 0); !errors.Is(err, httplimit.ErrNoClientAddress) {
		t.Fatalf("no address: %v", err)
	}
}

// TestClientIPProperty: whatever a client prepends to X-Forwarded-For, the
// key is the address the first trusted proxy saw.
func TestClientIPProperty(t *testing.T) {
	trusted := prefixes("10.0.0.0/8")
	r := rand.New(rand.NewPCG(3, 4))
	randAddr := func(trustedOne bool) string {
		if trustedOne {
			return netip.AddrFrom4([4]byte{10, byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}).String()
		}
		return netip.AddrFrom4([4]byte{byte(11 + r.IntN(200)), byte(r.IntN(256)), byte(r.IntN(256)), byte(r.IntN(256))}).String()
	}
	for range 5000 {
		var spoof []string
		for range r.IntN(4) {
			spoof = append(spoof, randAddr(r.IntN(2) == 0)) // anything, even trusted-looking
		}
		client := randAddr(false)
		chain := append(spoof, client)
		for range r.IntN(3) {
			chain = append(chain, randAddr(true)) // proxies between the first and the last
		}
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = randAddr(true) + ":443"
		req.Header.Set("X-Forwarded-For", strings.Join(chain, ", "))
		got, err := httplimit.ClientIP(req, trusted, httplimit.XForwardedFor)
		if err != nil || got.String() != client {
			t.Fatalf("chain %v via %s: got %v (%v), want %s", chain, req.RemoteAddr, got, err, client)
		}
	}
}

func FuzzClientIP(f *testing.F) {
	f.Add("10.0.0.1:80", "1.2.3.4, 10.1.1.1", `for="[2001:db8::1]:80";proto=https, for=1.2.3.4`)
	f.Add("[fd00::1]:1", "", `for="\"quoted\""`)
	f.Add("10.0.0.1:80", ",,,", `;;,"`)
	trusted := prefixes("10.0.0.0/8", "fd00::/8")
	f.Fuzz(func(t *testing.T, remote, xff, fwd string) {
		req := httptest.NewRequest("GET", "/", nil)
		req.RemoteAddr = remote
		req.Header.Set("X-Forwarded-For", xff)
		req.Header.Set("Forwarded", fwd)
		for _, h := range []httplimit.ProxyHeader{httplimit.XForwardedFor, httplimit.Forwarded} {
			a, err := httplimit.ClientIP(req, trusted, h)
			if err != nil {
				continue
			}
			if !a.IsValid() {
				t.Fatalf("invalid address without an error")
			}
			_ = httplimit.GroupKey(a)
		}
	})
}
