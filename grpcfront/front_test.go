package grpcfront

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/policy"
	"github.com/throttlekit/throttlekit-server/shard"
)

// healthOnly registers the health service, as rls.Service.Register does.
type healthOnly struct{ h *health.Server }

func (s healthOnly) Register(g *grpc.Server) { healthpb.RegisterHealthServer(g, s.h) }

// TestFrontHealthAndStop: NOT_SERVING before Serve, SERVING while it
// serves (checked over the wire), NOT_SERVING once Stop begins, and Serve
// returns nil after Stop.
func TestFrontHealthAndStop(t *testing.T) {
	h := health.NewServer()
	f, err := New(Config{Addr: "127.0.0.1:0"}, h, []string{"svc"}, healthOnly{h})
	if err != nil {
		t.Fatal(err)
	}
	status := func(name string) healthpb.HealthCheckResponse_ServingStatus {
		r, err := h.Check(context.Background(), &healthpb.HealthCheckRequest{Service: name})
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}
	if st := status("svc"); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("before Serve: %v", st)
	}
	served := make(chan error, 1)
	go func() { served <- f.Serve() }()
	<-f.Ready()
	cc, err := grpc.NewClient(f.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	r, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{Service: "svc"})
	if err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("while serving: %v, %v", r, err)
	}
	if st := f.Stats(); st.Requests != 1 || st.Errors != 0 {
		t.Fatalf("Stats = %+v, want one request", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := f.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if st := status("svc"); st != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Fatalf("after Stop: %v", st)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v, want nil after Stop", err)
	}
}

// TestNewRefusesBadConfig: an empty or malformed address, a missing health
// server and unreadable TLS files are errors.
func TestNewRefusesBadConfig(t *testing.T) {
	h := health.NewServer()
	for _, tt := range []struct {
		cfg Config
		h   *health.Server
	}{
		{Config{}, h},
		{Config{Addr: "nohost"}, h},
		{Config{Addr: "127.0.0.1:0"}, nil},
		{Config{Addr: "127.0.0.1:0", TLS: &TLSConfig{CertFile: "/nonexistent.crt", KeyFile: "/nonexistent.key"}}, h},
	} {
		if _, err := New(tt.cfg, tt.h, nil); err == nil {
			t.Errorf("New(%+v) accepted", tt.cfg)
		}
	}
}

// TestLimiterRunsCoreOperations: the adapter's checks are the core's, on
// the same counters a RESP command uses; cost 0 peeks.
func TestLimiterRunsCoreOperations(t *testing.T) {
	core := limits.NewLocal(shard.New(shard.Config{}), limits.Config{})
	lim, err := engine.NewLimit(engine.KindFixed, 2, int64(time.Minute), 0)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(core)
	const now = int64(1_700_000_040_000_000_000)
	for i, want := range []int64{1, 1, 0} {
		d, err := l.Check([]byte("k"), lim, policy.ModeDefault, 1, now)
		if err != nil || d.Allowed != want {
			t.Fatalf("check %d = %+v, %v; want allowed %d", i+1, d, err, want)
		}
	}
	d, err := l.Check([]byte("k"), lim, policy.ModeDefault, 0, now)
	if err != nil || d.Allowed != 0 || d.Remaining != 0 {
		t.Fatalf("peek = %+v, %v; want denied, nothing left", d, err)
	}
	// The RESP front's operation sees the same counter.
	op := limits.Op{Kind: limits.OpCheck, Key: []byte("k"), Limit: lim, Cost: 1}
	core.Do(&op, now, nil)
	if op.Decision.Allowed != 0 {
		t.Fatalf("core check after the adapter's: %+v", op.Decision)
	}
	if _, err := l.Check([]byte("k"), lim, policy.ModeDefault, -5, now); err == nil {
		t.Fatal("a negative cost was accepted")
	}
}

// TestLimiterZeroAlloc: a check on an existing key allocates nothing
// (without the race detector, whose sync.Pool drops items at random).
func TestLimiterZeroAlloc(t *testing.T) {
	if raceOn {
		t.Skip("sync.Pool drops items under the race detector")
	}
	core := limits.NewLocal(shard.New(shard.Config{}), limits.Config{})
	lim, _ := engine.NewLimit(engine.KindGCRA, 1000, int64(time.Second), 0)
	l := NewLimiter(core)
	key := []byte("k")
	now := int64(1_700_000_040_000_000_000)
	l.Check(key, lim, policy.ModeDefault, 1, now)
	if n := testing.AllocsPerRun(100, func() { now += 1e6; l.Check(key, lim, policy.ModeDefault, 1, now) }); n != 0 {
		t.Fatalf("Check allocates %.1f times", n)
	}
}
