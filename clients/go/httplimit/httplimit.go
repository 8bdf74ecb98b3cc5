// Package httplimit is net/http middleware that rate-limits requests with a
// throttlekit Limiter (or anything with its AllowN method) and tells clients
// where they stand with the RateLimit-Policy and RateLimit header fields of
// draft-ietf-httpapi-ratelimit-headers-10:
//
//	RateLimit-Policy: "default";q=100;w=60
//	RateLimit: "default";r=42;t=17
//
// q is the limit, w the window in seconds (when Options.Window is set), r
// the units remaining and t the seconds until the budget is full again. A
// denied request gets 429 Too Many Requests with Retry-After in whole
// seconds, rounded up so that it is never earlier than the server's
// retry-after; a request the limiter could not decide (a server error with
// FailOpen false) gets 503 Service Unavailable; with FailOpen true it
// passes.
//
// # Who is the client
//
// The default key is the client's address, from the connection unless the
// peer is a trusted proxy (Options.TrustedProxies). Then the forwarding
// header is read from the right, skipping trusted proxies, and the first
// address that is not one is the client: the rightmost untrusted hop, the
// last address anyone but a trusted proxy could have written. Entries to
// its left are ignored, so a client that sends its own X-Forwarded-For
// cannot pick its key. Only one header is read (X-Forwarded-For by default,
// or Forwarded): reading both would let a client supply the one the proxies
// do not append to. IPv6 clients are grouped by their /64 prefix, the
// block a single subscriber usually holds; IPv4-mapped IPv6 addresses count
// as IPv4.
//
// # Cost
//
// Per request: one AllowN (see the throttlekit package for what each mode
// costs), parsing of the peer address and, behind a trusted proxy, of the
// forwarding header, and a few small allocations for the key and the
// header values.
package httplimit

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	throttlekit "github.com/throttlekit/throttlekit-server/clients/go"
)

// Allower decides whether n units of key may pass. *throttlekit.Limiter
// implements it.
type Allower interface {
	AllowN(ctx context.Context, key string, n int64) (throttlekit.Decision, error)
}

// ProxyHeader names the forwarding header read behind trusted proxies.
type ProxyHeader uint8

const (
	// XForwardedFor reads X-Forwarded-For: comma-separated addresses.
	XForwardedFor ProxyHeader = iota
	// Forwarded reads the for= parameters of RFC 7239's Forwarded.
	Forwarded
)

// Options configures the middleware. The zero value limits by client
// address, one unit per request, under the policy name "default".
type Options struct {
	// Name is the policy name in the header fields; "default" if empty.
	// Characters outside printable ASCII are dropped.
	Name string
	// Window is the policy's window, sent as w= in whole seconds; 0 omits w.
	Window time.Duration
	// KeyFunc returns the key a request counts against; nil means
	// IPKey(TrustedProxies, Header). An error answers 400.
	KeyFunc func(*http.Request) (string, error)
	// CostFunc returns the units a request costs; nil means 1.
	CostFunc func(*http.Request) int64
	// TrustedProxies are the proxies whose forwarding header is believed
	// (the default KeyFunc).
	TrustedProxies []netip.Prefix
	// Header is the forwarding header to read (the default KeyFunc).
	Header ProxyHeader
	// OnError is told of every error (limiter or key), e.g. to log it.
	OnError func(*http.Request, error)
	// Now is the clock for t= (tests); nil means time.Now.
	Now func() time.Time
}

// New returns middleware that asks l about every request before next.
func New(l Allower, opts Options) func(http.Handler) http.Handler {
	m := &middleware{l: l, opts: opts, name: sfString(opts.Name)}
	if m.opts.KeyFunc == nil {
		m.opts.KeyFunc = IPKey(opts.TrustedProxies, opts.Header)
	}
	if m.opts.Now == nil {
		m.opts.Now = time.Now
	}
	m.policySuffix = ";w=" + strconv.FormatInt(ceilSeconds(opts.Window), 10)
	if opts.Window <= 0 {
		m.policySuffix = ""
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}
}

// Handler is New(l, opts)(next).
func Handler(l Allower, opts Options, next http.Handler) http.Handler { return New(l, opts)(next) }

type middleware struct {
	l            Allower
	opts         Options
	name         string // as an sf-string, quoted
	policySuffix string
}

func (m *middleware) report(err error, r *http.Request) {
	if m.opts.OnError != nil {
		m.opts.OnError(r, err)
	}
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key, err := m.opts.KeyFunc(r)
	if err != nil {
		m.report(err, r)
		http.Error(w, "cannot identify the client", http.StatusBadRequest)
		return
	}
	cost := int64(1)
	if m.opts.CostFunc != nil {
		cost = m.opts.CostFunc(r)
	}
	d, err := m.l.AllowN(r.Context(), key, cost)
	if err != nil {
		m.report(err, r)
		if d.Allowed {
			next.ServeHTTP(w, r) // fail open: no figures to report
			return
		}
		http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
		return
	}
	h := w.Header()
	h.Set("RateLimit-Policy", m.name+";q="+strconv.FormatInt(d.Limit, 10)+m.policySuffix)
	reset := max(0, ceilSeconds(d.ResetAt.Sub(m.opts.Now())))
	h.Set("RateLimit", m.name+";r="+strconv.FormatInt(max(d.Remaining, 0), 10)+";t="+strconv.FormatInt(reset, 10))
	if d.Allowed {
		next.ServeHTTP(w, r)
		return
	}
	if d.RetryAfter < 0 {
		// Never at this limit: retrying cannot help, so no Retry-After.
		http.Error(w, "request exceeds the rate limit", http.StatusTooManyRequests)
		return
	}
	secs := max(1, ceilSeconds(d.RetryAfter))
	h.Set("Retry-After", strconv.FormatInt(secs, 10))
	http.Error(w, "rate limit exceeded, retry in "+strconv.FormatInt(secs, 10)+" s", http.StatusTooManyRequests)
}

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}

// sfString renders name as a structured-field string (RFC 8941): quoted,
// with \ and " escaped, printable ASCII only.
func sfString(name string) string {
	if name == "" {
		name = "default"
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < 0x20 || c > 0x7e {
			continue
		}
		if c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

// ErrNoClientAddress is returned when a request's RemoteAddr holds no IP
// address.
var ErrNoClientAddress = errors.New("httplimit: no client address in the request")

// IPKey returns the default KeyFunc: "ip:" and the client address of
// ClientIP, an IPv6 address as its /64 prefix.
func IPKey(trusted []netip.Prefix, header ProxyHeader) func(*http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		a, err := ClientIP(r, trusted, header)
		if err != nil {
			return "", err
		}
		return "ip:" + GroupKey(a), nil
	}
}

// GroupKey is the text of a client address for a key: an IPv4 address as
// it is, an IPv6 address as its /64 prefix ("2001:db8:1:2::/64").
func GroupKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	return netip.PrefixFrom(a.WithZone(""), 64).Masked().String()
}

// ClientIP returns the client's address: the peer of the connection,
// unless the peer is in trusted; then the rightmost address of the
// forwarding header that is not in trusted (or the leftmost if all are).
// An entry that is not an address stops the walk: the hop that wrote it is
// the client.
func ClientIP(r *http.Request, trusted []netip.Prefix, header ProxyHeader) (netip.Addr, error) {
	peer, err := parseHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, ErrNoClientAddress
	}
	if !isTrusted(peer, trusted) {
		return peer, nil
	}
	var hops []string
	switch header {
	case Forwarded:
		hops = forwardedFor(r.Header.Values("Forwarded"))
	default:
		for _, v := range r.Header.Values("X-Forwarded-For") {
			for _, h := range strings.Split(v, ",") {
				hops = append(hops, strings.TrimSpace(h))
			}
		}
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := parseHostPort(hops[i])
		if err != nil {
			return client, nil
		}
		client = a
		if !isTrusted(a, trusted) {
			return a, nil
		}
	}
	return client, nil
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHostPort parses "ip", "ip:port", "[ipv6]" or "[ipv6]:port".
func parseHostPort(s string) (netip.Addr, error) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap().WithZone(""), nil
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap().WithZone(""), nil
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return a.Unmap().WithZone(""), nil
		}
	}
	host, _, err := net.SplitHostPort(s)
	if err != nil {
		return netip.Addr{}, err
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}, err
	}
	return a.Unmap().WithZone(""), nil
}

// forwardedFor returns the for= values of Forwarded header lines, in
// order, unquoted ("" for an element without one, which stops the walk).
func forwardedFor(lines []string) []string {
	var out []string
	for _, line := range lines {
		for _, elem := range splitQuoted(line, ',') {
			val := ""
			for _, pair := range splitQuoted(elem, ';') {
				k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
				if ok && strings.EqualFold(strings.TrimSpace(k), "for") {
					val = strings.TrimSpace(v)
					if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
						val = strings.ReplaceAll(val[1:len(val)-1], `\`, "")
					}
				}
			}
			out = append(out, val)
		}
	}
	return out
}

// splitQuoted splits s at sep outside double quotes.
func splitQuoted(s string, sep byte) []string {
	var out []string
	quoted, start := false, 0
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quoted:
			i++
		case s[i] == '"':
			quoted = !quoted
		case s[i] == sep && !quoted:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
