package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/throttlekit/throttlekit-server/config"
	"github.com/throttlekit/throttlekit-server/internal/lockedbuf"
)

// freeAddr returns a loopback address with a free port.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// writePolicies writes a policy file by renaming a complete file into
// place, as the policy package's Watch asks.
func writePolicies(t testing.TB, path, text string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err := os.WriteFile(tmp, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

const apiPolicies = `domain: api
descriptors:
  - key: plan
    value: free
    rate_limit:
      name: free
      unit: minute
      requests_per_unit: %d
`

func policiesText(n string) string { return strings.Replace(apiPolicies, "%d", n, 1) }

// envoyServer is the program run with --grpc-addr and --policies.
type envoyServer struct {
	addr, grpcAddr, metricsAddr, policies string
	stderr                                *lockedbuf.Buffer
	rdb                                   *redis.Client
	cancel                                context.CancelFunc
	done                                  chan int
}

// startEnvoyServer runs the program with a policy file, a gRPC listener and
// DEBUG allowed from loopback (so the test freezes the clock that RESP and
// gRPC share), and waits until RESP answers.
func startEnvoyServer(t *testing.T, extra ...string) *envoyServer {
	t.Helper()
	dir := t.TempDir()
	s := &envoyServer{addr: freeAddr(t), grpcAddr: freeAddr(t), metricsAddr: freeAddr(t),
		policies: filepath.Join(dir, "api.yaml"), stderr: new(lockedbuf.Buffer), done: make(chan int, 1)}
	writePolicies(t, s.policies, policiesText("2"))
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	args := append([]string{"--addr", s.addr, "--metrics-addr", s.metricsAddr, "--loops", "1",
		"--grpc-addr", s.grpcAddr, "--policies", s.policies, "--enable-debug-command", "local"}, extra...)
	go func() { s.done <- runContext(ctx, args, func(string) string { return "" }, io.Discard, s.stderr) }()
	s.rdb = redis.NewClient(&redis.Options{Addr: s.addr})
	t.Cleanup(func() {
		s.rdb.Close()
		cancel()
		<-s.done
	})
	deadline := time.Now().Add(10 * time.Second)
	for s.rdb.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("server not up; stderr:\n%s", s.stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// One instant for the whole test: a fixed window never rolls over.
	if err := s.rdb.Do(context.Background(), "DEBUG", "SET-CLOCK", "1700000040000").Err(); err != nil {
		t.Fatal(err)
	}
	return s
}

// info returns a field of INFO grpc.
func (s *envoyServer) info(t *testing.T, field string) string {
	t.Helper()
	text, err := s.rdb.Info(context.Background(), "grpc").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + field + `:(.*)\r$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("INFO grpc has no %s:\n%s", field, text)
	}
	return m[1]
}

// waitInfo waits until INFO grpc's field reads want: the reload event,
// counted by the policy store, not a guess at how long a reload takes.
func (s *envoyServer) waitInfo(t *testing.T, field, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.info(t, field) != want {
		if time.Now().After(deadline) {
			t.Fatalf("INFO grpc %s = %q, want %q; stderr:\n%s", field, s.info(t, field), want, s.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func freeRequest() *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "plan", Value: "free"}}}}}
}

func dialGRPC(t testing.TB, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// TestEnvoyRLSEndToEnd plays Envoy against the program: a go-control-plane
// RLS client over loopback, the health service, hot reload of the policy
// file (a valid change applies, an invalid one is rejected and counted),
// THROTTLE.CHECK POLICY and THROTTLE.POLICIES with go-redis and redis-cli,
// INFO grpc and /metrics.
func TestEnvoyRLSEndToEnd(t *testing.T) {
	s := startEnvoyServer(t)
	ctx := context.Background()
	cc := dialGRPC(t, s.grpcAddr, insecure.NewCredentials())

	for _, svc := range []string{"", rlsv3.RateLimitService_ServiceDesc.ServiceName} {
		h, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health %q = %v, %v; want SERVING", svc, h, err)
		}
	}

	rl := rlsv3.NewRateLimitServiceClient(cc)
	check := func() *rlsv3.RateLimitResponse {
		t.Helper()
		resp, err := rl.ShouldRateLimit(ctx, freeRequest())
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if got := check(); got.OverallCode != want || got.Statuses[0].CurrentLimit.RequestsPerUnit != 2 {
			t.Fatalf("request %d: %v, want %v under a limit of 2", i+1, got, want)
		}
	}
	if _, err := rl.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "api"}); err == nil {
		t.Fatal("a request without descriptors was accepted")
	}

	// A valid change applies; the counter of the unchanged key stays, so
	// the third request of the window is now within the new limit of 5.
	writePolicies(t, s.policies, policiesText("5"))
	s.waitInfo(t, "policies_loads", "2")
	if got := check(); got.OverallCode != rlsv3.RateLimitResponse_OK || got.Statuses[0].CurrentLimit.RequestsPerUnit != 5 {
		t.Fatalf("after the reload: %v, want OK under a limit of 5", got)
	}
	// An invalid change is rejected with a logged reason and a metric; the
	// loaded set stays.
	writePolicies(t, s.policies, "domain: api\ndescriptors:\n  - key: plan\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	s.waitInfo(t, "policies_load_errors", "1")
	if got := s.info(t, "policies_last_reload"); got != "error" {
		t.Fatalf("policies_last_reload = %q, want error", got)
	}
	if got := check(); got.Statuses[0].CurrentLimit.RequestsPerUnit != 5 {
		t.Fatalf("after an invalid change: %v, want the limit of 5 kept", got)
	}
	if !strings.Contains(s.stderr.String(), "policies: change rejected") {
		t.Fatalf("the rejected change was not logged:\n%s", s.stderr.String())
	}

	// The same policy over RESP, on the RESP key's own counter.
	for i, want := range []int64{1, 1, 1, 1, 1, 0} {
		// go-redis speaks RESP3: the reply is a map.
		res, err := s.rdb.Do(ctx, "THROTTLE.CHECK", "user:1", "POLICY", "api/free").Result()
		m, _ := res.(map[any]any)
		if err != nil || m["allowed"] != want || m["limit"] != int64(5) {
			t.Fatalf("THROTTLE.CHECK POLICY #%d = %v, %v; want allowed %d of 5", i+1, res, err, want)
		}
	}
	err := s.rdb.Do(ctx, "THROTTLE.CHECK", "user:1", "POLICY", "api/nosuch").Err()
	if err == nil || err.Error() != "ERR unknown policy 'api/nosuch'" {
		t.Fatalf("unknown policy: %v", err)
	}
	list, err := s.rdb.Do(ctx, "THROTTLE.POLICIES").Slice()
	if err != nil || len(list) != 1 {
		t.Fatalf("THROTTLE.POLICIES = %v, %v; want one rule", list, err)
	}
	if m, ok := list[0].(map[any]any); !ok || m["name"] != "free" || m["limit"] != int64(5) || m["algorithm"] != "fixed" {
		t.Fatalf("THROTTLE.POLICIES[0] = %#v", list[0])
	}

	// redis-cli, as a script would run it (not a terminal: one value a
	// line).
	if _, err := exec.LookPath("redis-cli"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-cli not found")
		}
		t.Log("redis-cli not found; skipping its part")
	} else {
		host, port, _ := net.SplitHostPort(s.addr)
		out, err := exec.Command("redis-cli", "-h", host, "-p", port, "THROTTLE.CHECK", "user:2", "POLICY", "api/free", "COST", "5").CombinedOutput()
		if err != nil || string(out) != "1\n5\n0\n1700000100000\n0\n" {
			t.Fatalf("redis-cli THROTTLE.CHECK POLICY: %q, %v", out, err)
		}
		out, _ = exec.Command("redis-cli", "-h", host, "-p", port, "THROTTLE.CHECK", "user:2", "POLICY", "nosuch/free").CombinedOutput()
		if !strings.HasPrefix(string(out), "ERR unknown policy 'nosuch/free'\n") {
			t.Fatalf("redis-cli unknown policy: %q", out)
		}
	}

	// INFO grpc and /metrics.
	if got := s.info(t, "grpc_requests"); got != "8" {
		t.Fatalf("grpc_requests = %s, want 8 (2 health checks, 5 rate limit checks, one refused)", got)
	}
	if got := s.info(t, "grpc_errors"); got != "1" {
		t.Fatalf("grpc_errors = %s, want 1", got)
	}
	_, body := httpGet(t, s.metricsAddr, "/metrics") // e2e_metrics_test.go
	for _, want := range []string{
		`ratelimit_service_rate_limit_total_hits{domain="api",descriptor="plan_free"} 5`,
		`ratelimit_service_rate_limit_over_limit{domain="api",descriptor="plan_free"} 1`,
		`ratelimit_service_config_load_success 2`,
		`ratelimit_service_config_load_error 1`,
		`throttlekit_grpc_requests_total 8`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// Shutdown: the program stops the gRPC front and exits 0.
	s.cancel()
	if st := <-s.done; st != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", st, s.stderr.String())
	}
	s.done <- 0 // for Cleanup
}

// TestEnvoyRLSOverTLS serves gRPC over TLS with the tls-* certificate
// settings; a client that trusts the certificate checks health and rate
// limits, and a plaintext client is refused.
func TestEnvoyRLSOverTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeSelfSigned(t, certFile, keyFile, "grpc")
	s := startEnvoyServer(t, "--grpc-tls", "yes", "--tls-cert-file", certFile, "--tls-key-file", keyFile, "--tls-auth-clients", "no")
	ctx := context.Background()
	cc := dialGRPC(t, s.grpcAddr, credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}))
	h, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health over TLS = %v, %v", h, err)
	}
	resp, err := rlsv3.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, freeRequest())
	if err != nil || resp.OverallCode != rlsv3.RateLimitResponse_OK {
		t.Fatalf("ShouldRateLimit over TLS = %v, %v", resp, err)
	}
	plain := dialGRPC(t, s.grpcAddr, insecure.NewCredentials())
	if _, err := healthpb.NewHealthClient(plain).Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
		t.Fatal("a plaintext client was served by the TLS listener")
	}
	if got := s.info(t, "grpc_tls"); got != "1" {
		t.Fatalf("grpc_tls = %q", got)
	}

	// SIGHUP reloads the certificate: connections made after it see the
	// new one.
	serverCN := func() string {
		c, err := tls.Dial("tcp", s.grpcAddr, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName
	}
	if cn := serverCN(); cn != "grpc" {
		t.Fatalf("certificate %q, want grpc", cn)
	}
	writeSelfSigned(t, certFile, keyFile, "grpc-renewed")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for serverCN() != "grpc-renewed" {
		if time.Now().After(deadline) {
			t.Fatal("after SIGHUP the gRPC certificate did not change")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestInvalidPoliciesStopTheStart: an invalid policy file at start is a
// configuration error (exit 2, the reason on stderr).
func TestInvalidPoliciesStopTheStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	writePolicies(t, path, "domain: api\ndescriptors:\n  - key: plan\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	var stderr bytes.Buffer
	st := runContext(context.Background(), []string{"--addr", freeAddr(t), "--metrics-addr", "", "--policies", path},
		func(string) string { return "" }, io.Discard, &stderr)
	if st != 2 || !strings.Contains(stderr.String(), "bad.yaml") {
		t.Fatalf("exit %d, stderr %q; want 2 naming the file", st, stderr.String())
	}
}

// TestRLSOptionsFromSettings: the rls-* settings reach the RLS service's
// options, and grpc-tls the front's TLS, through the settings table.
func TestRLSOptionsFromSettings(t *testing.T) {
	c := config.Default()
	c.GRPCAddr, c.Policies, c.RLSShadowMode, c.RLSMaxDescriptors, c.RLSMaxEntries = "127.0.0.1:8081", "p.yaml", "yes", 8, 4
	c.GRPCTLS, c.TLSCertFile, c.TLSKeyFile, c.TLSAuthClients, c.TLSProtocols = "yes", "c.crt", "c.key", "no", "TLSv1.3"
	for headers, want := range map[string][2]bool{"none": {false, false}, "ietf": {true, false}, "envoy": {false, true}, "both": {true, true}} {
		c.RLSResponseHeaders = headers
		w, err := c.Wire()
		if err != nil {
			t.Fatal(err)
		}
		if w.RLS.RateLimitHeaders != want[0] || w.RLS.LimitHeaders != want[1] {
			t.Errorf("rls-response-headers %s: ietf %v, envoy %v; want %v", headers, w.RLS.RateLimitHeaders, w.RLS.LimitHeaders, want)
		}
		if !w.RLS.ShadowMode || w.RLS.MaxDescriptors != 8 || w.RLS.MaxEntries != 4 || w.Policies != "p.yaml" || w.GRPC.Addr != "127.0.0.1:8081" {
			t.Errorf("wired %+v, policies %q, grpc %+v", w.RLS, w.Policies, w.GRPC)
		}
		if w.GRPC.TLS == nil || w.GRPC.TLS.CertFile != "c.crt" || w.GRPC.TLS.MinVersion != tls.VersionTLS13 || w.GRPC.TLS.ClientAuth != tls.NoClientCert {
			t.Errorf("gRPC TLS %+v", w.GRPC.TLS)
		}
	}
}

// TestGRPCAddressInUseStops: a gRPC address that cannot be listened on
// stops the program with status 1 and the reason.
func TestGRPCAddressInUseStops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	path := filepath.Join(t.TempDir(), "api.yaml")
	writePolicies(t, path, policiesText("2"))
	var stderr bytes.Buffer
	st := runContext(context.Background(), []string{"--addr", freeAddr(t), "--metrics-addr", "", "--loops", "1",
		"--grpc-addr", ln.Addr().String(), "--policies", path}, func(string) string { return "" }, io.Discard, &stderr)
	if st != 1 || !strings.Contains(stderr.String(), "address already in use") {
		t.Fatalf("exit %d, stderr %q; want 1 and the listen error", st, stderr.String())
	}
}
