package main

import (
	"context"
	"testing"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/durationpb"
)

// TestEnvoyRLQSEndToEnd: the program serves RLQS beside RLS on --grpc-addr.
// An Envoy's usage report for a bucket of a policy rule gets a token-bucket
// assignment leased from that rule's counter, so RESP clients using the
// same policy see the leased credits as spent; the health service reports
// RLQS as serving.
func TestEnvoyRLQSEndToEnd(t *testing.T) {
	s := startEnvoyServer(t)
	cc := dialGRPC(t, s.grpcAddr, insecure.NewCredentials())
	ctx := context.Background()

	hr, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{
		Service: rlqsv3.RateLimitQuotaService_ServiceDesc.ServiceName})
	if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("RLQS health: %v, %v", hr, err)
	}

	// The policy file allows 2 per minute for plan=free; the clock is frozen.
	stream, err := rlqsv3.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Send(&rlqsv3.RateLimitQuotaUsageReports{Domain: "api",
		BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
			BucketId:           &rlqsv3.BucketId{Bucket: map[string]string{"plan": "free"}},
			TimeElapsed:        durationpb.New(0),
			NumRequestsAllowed: 1,
		}}})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetBucketAction()) != 1 {
		t.Fatalf("want one bucket action, got %v", resp)
	}
	tb := resp.GetBucketAction()[0].GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	granted := int64(tb.GetMaxTokens())
	if tb == nil || granted < 1 || granted > 2 {
		t.Fatalf("assignment %v: want a token bucket of 1 or 2 leased credits", resp.GetBucketAction()[0])
	}
	// The credits leased to the Envoy are spent for every other client of
	// the rule: an RLS request on the same descriptor (the same counter)
	// sees only what is left of the limit of 2.
	rr, err := rlsv3.NewRateLimitServiceClient(cc).ShouldRateLimit(ctx, freeRequest())
	if err != nil {
		t.Fatal(err)
	}
	wantCode := rlsv3.RateLimitResponse_OK
	if granted == 2 {
		wantCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if rr.OverallCode != wantCode || (wantCode == rlsv3.RateLimitResponse_OK && rr.Statuses[0].LimitRemaining != 0) {
		t.Errorf("RLS after an RLQS lease of %d of 2: %v, want %v with nothing left", granted, rr, wantCode)
	}
	if got := s.info(t, "grpc_requests"); got == "0" {
		t.Errorf("INFO grpc_requests is 0 after an RLQS stream")
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
}
