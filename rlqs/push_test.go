package rlqs

import (
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
)

const pushPolicy = `
domain: edge
descriptors:
  - key: route
    rate_limit:
      unit: second
      requests_per_unit: 100
`

// TestPushOnlyBusyBuckets: at a window's end the push carries a fresh
// assignment, leased from the new window and sized by the last reported
// demand, for a bucket whose last report carried requests, and nothing
// for one whose last report was empty; before the window's end nothing is
// due. The stream's handler and push are called directly, on the injected
// clock.
func TestPushOnlyBusyBuckets(t *testing.T) {
	e := startEnv(t, pushPolicy, nil)
	st := &stream{buckets: map[string]*bucket{}}
	msg := &rlqsv3.RateLimitQuotaUsageReports{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
		usage(map[string]string{"route": "busy"}, 8, 0),
		usage(map[string]string{"route": "idle"}, 0, 0),
	}}
	now := t0 + 300*int64(time.Millisecond)
	e.clock.ns.Store(now)
	if _, err := e.svc.handle(st, msg); err != nil {
		t.Fatal(err)
	}
	if at := st.nextEnd(); at != t0+int64(time.Second) {
		t.Fatalf("alarm at %d, want the window's end %d", at-t0, int64(time.Second))
	}
	if r := e.svc.push(st, t0+999*int64(time.Millisecond)); r != nil {
		t.Fatalf("push before the window's end: %v", r)
	}
	leased := e.svc.Stats().Leased
	r := e.svc.push(st, t0+int64(time.Second))
	if len(r.GetBucketAction()) != 1 || r.GetBucketAction()[0].GetBucketId().GetBucket()["route"] != "busy" {
		t.Fatalf("push at the window's end: %v, want one action, for the busy bucket", r)
	}
	q := r.GetBucketAction()[0].GetQuotaAssignmentAction()
	if got := q.GetRateLimitStrategy().GetTokenBucket().GetMaxTokens(); got != 10 { // 8 requests, 25% headroom
		t.Errorf("pushed max_tokens %d, want 10", got)
	}
	if ttl := q.GetAssignmentTimeToLive().AsDuration(); ttl != time.Second {
		t.Errorf("pushed assignment lives %v, want the new window's whole second", ttl)
	}
	if got := e.svc.Stats().Leased - leased; got != 10 {
		t.Errorf("push leased %d credits, want 10", got)
	}
	if at := st.nextEnd(); at != t0+2*int64(time.Second) {
		t.Errorf("next alarm at %d, want the new window's end", at-t0)
	}
}
