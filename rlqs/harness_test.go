package rlqs

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/policy"
	"github.com/throttlekit/throttlekit-server/shard"
)

// storeLeaser is a Leaser backed by a real shard.Store running the
// engine, the way server/throttle.go's op runs THROTTLE.LEASE and
// THROTTLE.RETURN.
type storeLeaser struct {
	store *shard.Store
	ops   sync.Pool
}

type leaseOp struct {
	ret                   bool
	lim                   engine.Limit
	batch, credits, reset int64
	d                     engine.Decision
	accepted              int64
	err                   error
}

func (o *leaseOp) Apply(cur engine.State, now int64) (engine.State, int64) {
	var (
		next engine.State
		ttl  int64
		err  error
	)
	if o.ret {
		next, o.accepted, ttl, err = engine.Return(cur, now, o.credits, o.reset)
	} else {
		next, o.d, ttl, err = o.lim.Lease(cur, now, o.batch)
	}
	o.err = err
	if err != nil {
		return cur, 0
	}
	return next, ttl
}

func newStoreLeaser() *storeLeaser {
	return &storeLeaser{store: shard.New(shard.Config{MaxKeys: 1 << 16}), ops: sync.Pool{New: func() any { return new(leaseOp) }}}
}

func (l *storeLeaser) Lease(key []byte, lim engine.Limit, now, batch int64) (engine.Decision, error) {
	o := l.ops.Get().(*leaseOp)
	*o = leaseOp{lim: lim, batch: batch}
	l.store.Apply(key, now, o)
	d, err := o.d, o.err
	l.ops.Put(o)
	return d, err
}

func (l *storeLeaser) Return(key []byte, now, credits, resetAtMs int64) (int64, error) {
	o := l.ops.Get().(*leaseOp)
	*o = leaseOp{ret: true, credits: credits, reset: resetAtMs}
	l.store.Apply(key, now, o)
	n, err := o.accepted, o.err
	l.ops.Put(o)
	return n, err
}

// testClock is an injected clock: tests move it by hand.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) Now() int64       { return c.ns.Load() }
func (c *testClock) Advance(ns int64) { c.ns.Add(ns) }

// testAlarms is Options.Alarm driven by the test: an alarm fires when the
// test calls fire with an instant at or past it, or at once when armed for
// an instant the last fire has reached. Without fire nothing is pushed.
type testAlarms struct {
	mu      sync.Mutex
	reached int64
	armed   []testAlarm
}

type testAlarm struct {
	at int64
	ch chan struct{}
}

func (a *testAlarms) alarm(at int64) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.reached != 0 && at <= a.reached {
		close(ch)
		return ch, func() {}
	}
	a.armed = append(a.armed, testAlarm{at, ch})
	return ch, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		for i, x := range a.armed {
			if x.ch == ch {
				a.armed = append(a.armed[:i], a.armed[i+1:]...)
				return
			}
		}
	}
}

// fire fires every alarm armed for now or earlier.
func (a *testAlarms) fire(now int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reached = now
	kept := a.armed[:0]
	for _, x := range a.armed {
		if x.at <= now {
			close(x.ch)
		} else {
			kept = append(kept, x)
		}
	}
	a.armed = kept
}

// t0 is a multiple of a day, so fixed windows start at t0.
const t0 = int64(20000) * 86400 * 1e9

type env struct {
	t      testing.TB
	svc    *Service
	store  *policy.Store
	leaser *storeLeaser
	clock  *testClock
	alarms *testAlarms
	client rlqsv3.RateLimitQuotaServiceClient
}

// startEnv writes the policy file, opens a policy Store on it and serves
// the RLQS service on a loopback listener with a client connection.
func startEnv(t testing.TB, policyYAML string, mod func(*Options)) *env {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(policyYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := policy.Open(dir, policy.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, store: st, leaser: newStoreLeaser(), clock: &testClock{}, alarms: &testAlarms{}}
	e.clock.ns.Store(t0)
	opts := Options{Policies: st, Leaser: e.leaser, Now: e.clock.Now, Alarm: e.alarms.alarm}
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
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e.client = rlqsv3.NewRateLimitQuotaServiceClient(conn)
	return e
}

// stream is one Envoy's stream, driven by hand.
type testStream struct {
	t      testing.TB
	s      rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasClient
	cancel context.CancelFunc
}

func (e *env) open() *testStream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s, err := e.client.StreamRateLimitQuotas(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(cancel)
	return &testStream{t: e.t, s: s, cancel: cancel}
}

// usage is one bucket's report.
func usage(id map[string]string, allowed, denied uint64) *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage {
	return &rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
		BucketId:           &rlqsv3.BucketId{Bucket: id},
		TimeElapsed:        durationpb.New(0),
		NumRequestsAllowed: allowed,
		NumRequestsDenied:  denied,
	}
}

// exchange sends one message and returns the response.
func (ts *testStream) exchange(domain string, us ...*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage) *rlqsv3.RateLimitQuotaResponse {
	ts.t.Helper()
	ts.send(domain, us...)
	r, err := ts.s.Recv()
	if err != nil {
		ts.t.Fatalf("Recv: %v", err)
	}
	return r
}

// recv returns the next response (a push).
func (ts *testStream) recv() *rlqsv3.RateLimitQuotaResponse {
	ts.t.Helper()
	r, err := ts.s.Recv()
	if err != nil {
		ts.t.Fatalf("Recv: %v", err)
	}
	return r
}

func (ts *testStream) send(domain string, us ...*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage) {
	ts.t.Helper()
	if err := ts.s.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: domain, BucketQuotaUsages: us}); err != nil && err != io.EOF {
		ts.t.Fatalf("Send: %v", err)
	}
}

// close ends the stream as a disconnecting Envoy does.
func (ts *testStream) close() {
	_ = ts.s.CloseSend()
	ts.cancel()
}

// waitStreams waits until the service counts n open streams: the server
// notices a stream's end on its own goroutine.
func (e *env) waitStreams(n int64) {
	e.t.Helper()
	for i := 0; e.svc.Stats().Streams != n; i++ {
		if i > 1e6 {
			e.t.Fatalf("streams: %d, want %d", e.svc.Stats().Streams, n)
		}
		runtimeYield()
	}
}

func runtimeYield() { time.Sleep(50 * time.Microsecond) }
