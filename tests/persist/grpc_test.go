package persisttests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/throttlekit/throttlekit-server/internal/pgtest"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/persist"
)

// grpcPolicies gives one unit back every 52 minutes (GCRA, ten thousand a
// year), as the crash tests' limit does, so a count read after a restart
// is exact in any test shorter than that.
const grpcPolicies = `
domain: api
descriptors:
  - key: user
    rate_limit: {algorithm: gcra, period: 8760h, requests_per_unit: 10000}
`

// rlsCall sends one ShouldRateLimit for user u with hits (0: a peek) and
// returns the response or the error.
func rlsCall(cc *grpc.ClientConn, u string, hits uint64) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return rlsv3.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "api",
		Descriptors: []*ratelimitv3.RateLimitDescriptor{{
			Entries:    []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: u}},
			HitsAddend: wrapperspb.UInt64(hits),
		}}}, grpc.WaitForReady(true))
}

// TestRLSSyncPostgres runs the program with --persist-mode sync, a
// background interval far longer than the test and --persist-fail closed
// on a real Postgres, and plays Envoy over gRPC:
//
//   - an RLS answer comes only once its change is durable: after three
//     answered requests the server is killed (SIGKILL: no final flush), and
//     the restarted server reports all their hits consumed;
//   - with Postgres stopped, a request is answered Unavailable (the status
//     Envoy's failure_mode_deny applies to), as a RESP change is answered
//     TRYAGAIN, an RLQS report that would lease credits ends its stream
//     with Unavailable, and once Postgres is back requests are answered
//     again.
func TestRLSSyncPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	url := pg.URL + "&table=grpc_sync"
	dir := t.TempDir()
	pol := filepath.Join(dir, "api.yaml")
	if err := os.WriteFile(pol, []byte(grpcPolicies), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(grpcAddr string) []string {
		return []string{"--persist", url, "--persist-mode", "sync", "--persist-interval", "1h", "--persist-fail", "closed",
			"--policies", pol, "--grpc-addr", grpcAddr}
	}
	dialRLS := func(addr string) *grpc.ClientConn {
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return cc
	}

	g1 := testserver.FreeAddr(t)
	srv := startServer(t, args(g1)...)
	cc := dialRLS(g1)
	for i := range 3 {
		r, err := rlsCall(cc, "u1", 5)
		if err != nil || r.GetOverallCode() != rlsv3.RateLimitResponse_OK {
			t.Fatalf("request %d: %v, %v", i, r, err)
		}
	}
	srv.Stop() // SIGKILL: only what was durable before the answers survives
	waitUnlocked(t, url, persist.Options{})

	g2 := testserver.FreeAddr(t)
	srv2 := startServer(t, args(g2)...)
	cc2 := dialRLS(g2)
	r, err := rlsCall(cc2, "u1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.GetStatuses()[0].GetLimitRemaining(); got != 10000-15 {
		t.Fatalf("after the kill and restart: %d remaining, want %d (the 15 hits answered before the kill)", got, 10000-15)
	}

	pg.Stop(t)
	deadline := time.Now().Add(90 * time.Second)
	var unavailable int
	for unavailable < 2 { // the change waiting for the failed write, then a refused one
		r, err := rlsCall(cc2, "u2", 1)
		switch {
		case status.Code(err) == codes.Unavailable:
			unavailable++
			t.Logf("with Postgres stopped: %v", err)
		case err != nil:
			t.Fatalf("with Postgres stopped: %v, want Unavailable", err)
		case time.Now().After(deadline):
			t.Fatalf("still answered %v 90s after Postgres stopped", r)
		}
	}
	if p, err := probe(srv2.Addr); err != nil || !strings.HasPrefix(p.err, "TRYAGAIN") {
		t.Errorf("RESP change with Postgres stopped: %+v, %v; want TRYAGAIN", p, err)
	}
	// RLQS: a report that would lease credits ends its stream Unavailable.
	qctx, qcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer qcancel()
	qs, err := rlqsv3.NewRateLimitQuotaServiceClient(cc2).StreamRateLimitQuotas(qctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := qs.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "api", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId: &rlqsv3.BucketId{Bucket: map[string]string{"user": "u3"}}, TimeElapsed: durationpb.New(0), NumRequestsAllowed: 1}}}); err != nil {
		t.Fatal(err)
	}
	if r, err := qs.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("RLQS report with Postgres stopped: %v, %v; want Unavailable", r, err)
	} else {
		t.Logf("RLQS with Postgres stopped: %v", err)
	}
	before, err := rlsCall(cc2, "u2", 0) // a peek changes nothing, so it answers
	if err != nil {
		t.Fatalf("peek with Postgres stopped: %v", err)
	}

	pg.Restart(t)
	waitFor(t, srv2.Addr, "healthy after Postgres returned", func(m map[string]string) bool { return m["persist_healthy"] == "1" })
	r, err = rlsCall(cc2, "u2", 1)
	if err != nil || r.GetOverallCode() != rlsv3.RateLimitResponse_OK {
		t.Fatalf("after Postgres returned: %v, %v", r, err)
	}
	if got, was := r.GetStatuses()[0].GetLimitRemaining(), before.GetStatuses()[0].GetLimitRemaining(); got != was-1 {
		t.Errorf("after Postgres returned: %d remaining, want %d (refused requests consume nothing)", got, was-1)
	}
}
