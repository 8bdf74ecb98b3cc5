package rls

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/policy"
	"github.com/throttlekit/throttlekit-server/shard"
)

// storeLimiter is a Limiter backed by a real shard.Store running the
// engine, the way server/throttle.go's op runs THROTTLE.CHECK.
type storeLimiter struct {
	store *shard.Store
	ops   sync.Pool
}

type checkOp struct {
	lim  engine.Limit
	cost int64
	d    engine.Decision
	err  error
}

func (o *checkOp) Apply(cur engine.State, now int64) (engine.State, int64) {
	next, d, ttl, err := o.lim.Check(cur, now, o.cost)
	o.d, o.err = d, err
	if err != nil {
		return cur, 0
	}
	return next, ttl
}

func newStoreLimiter() *storeLimiter {
	return &storeLimiter{store: shard.New(shard.Config{MaxKeys: 1 << 16}), ops: sync.Pool{New: func() any { return new(checkOp) }}}
}

func (l *storeLimiter) Check(key []byte, lim engine.Limit, _ policy.Mode, cost, now int64) (engine.Decision, error) {
	o := l.ops.Get().(*checkOp)
	o.lim, o.cost = lim, cost
	l.store.Apply(key, now, o)
	d, err := o.d, o.err
	l.ops.Put(o)
	return d, err
}

// testClock is an injected clock: tests move it by hand.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) Now() int64       { return c.ns.Load() }
func (c *testClock) Set(ns int64)     { c.ns.Store(ns) }
func (c *testClock) Advance(ns int64) { c.ns.Add(ns) }
func newClock(start int64) *testClock { c := &testClock{}; c.Set(start); return c }

// t0 is a round instant (a multiple of every unit up to a year is not
// possible; it is a multiple of a day), so fixed windows start at t0.
const t0 = int64(20000) * 86400 * 1e9

type env struct {
	t       testing.TB
	svc     *Service
	store   *policy.Store
	client  rlsv3.RateLimitServiceClient
	conn    *grpc.ClientConn
	clock   *testClock
	limiter *storeLimiter
	dir     string
}

// startEnv writes files into a fresh directory, opens a policy Store on
// it, and serves the RLS service on a loopback listener with a client
// connected, as Envoy would be.
func startEnv(t testing.TB, files map[string]string, mod func(*Options)) *env {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return startEnvDir(t, dir, mod)
}

func startEnvDir(t testing.TB, dir string, mod func(*Options)) *env {
	t.Helper()
	return startEnvStore(t, dir, policy.StoreOptions{}, mod)
}

func startEnvStore(t testing.TB, dir string, sopts policy.StoreOptions, mod func(*Options)) *env {
	t.Helper()
	st, err := policy.Open(dir, sopts)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: st, clock: newClock(t0), limiter: newStoreLimiter(), dir: dir}
	opts := Options{Policies: st, Limiter: e.limiter, Now: e.clock.Now}
	if mod != nil {
		mod(&opts)
	}
	if e.svc, err = New(opts); err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	e.svc.Register(g)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	e.conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.conn.Close() })
	e.client = rlsv3.NewRateLimitServiceClient(e.conn)
	return e
}

// desc builds a descriptor from key/value pairs.
func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func withHits(d *ratelimitv3.RateLimitDescriptor, n uint64) *ratelimitv3.RateLimitDescriptor {
	d.HitsAddend = wrapperspb.UInt64(n)
	return d
}

func (e *env) call(domain string, hits uint32, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	e.t.Helper()
	resp, err := e.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds, HitsAddend: hits})
	if err != nil {
		e.t.Fatalf("ShouldRateLimit(%s): %v", domain, err)
	}
	return resp
}

// codes returns the overall code and each status's code, as "OK" or "OVER".
func codesOf(r *rlsv3.RateLimitResponse) string {
	var b strings.Builder
	b.WriteString(short(r.OverallCode))
	for _, s := range r.Statuses {
		b.WriteByte(' ')
		b.WriteString(short(s.Code))
	}
	return b.String()
}

func short(c rlsv3.RateLimitResponse_Code) string {
	switch c {
	case rlsv3.RateLimitResponse_OK:
		return "OK"
	case rlsv3.RateLimitResponse_OVER_LIMIT:
		return "OVER"
	}
	return "UNKNOWN"
}

func (e *env) metrics() string {
	var b strings.Builder
	e.svc.Metrics().WritePrometheus(&b)
	return b.String()
}

func (e *env) wantMetric(line string) {
	e.t.Helper()
	if m := e.metrics(); !strings.Contains(m, line+"\n") {
		e.t.Errorf("metric %q missing in:\n%s", line, m)
	}
}

type ratelimitDesc = ratelimitv3.RateLimitDescriptor
