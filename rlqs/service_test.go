package rlqs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/policy"
)

const protoPolicy = `
domain: edge
descriptors:
  - key: route
    value: limited
    rate_limit:
      unit: second
      requests_per_unit: 100
  - key: route
    value: open
    rate_limit:
      unlimited: true
  - key: route
    value: closed
    rate_limit:
      unit: second
      requests_per_unit: 0
  - key: route
    value: shadow
    shadow_mode: true
    rate_limit:
      unit: second
      requests_per_unit: 1
  - key: route
    value: smooth
    rate_limit:
      unit: minute
      requests_per_unit: 60
      algorithm: gcra
  - key: tenant
    descriptors:
      - key: route
        rate_limit:
          unit: second
          requests_per_unit: 10
`

func id(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// only returns the single action of a response.
func only(t *testing.T, r *rlqsv3.RateLimitQuotaResponse) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	t.Helper()
	if len(r.GetBucketAction()) != 1 {
		t.Fatalf("got %d actions, want 1: %v", len(r.GetBucketAction()), r)
	}
	return r.GetBucketAction()[0]
}

func blanketOf(t *testing.T, a *rlqsv3.RateLimitQuotaResponse_BucketAction) typev3.RateLimitStrategy_BlanketRule {
	t.Helper()
	s, ok := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetStrategy().(*typev3.RateLimitStrategy_BlanketRule_)
	if !ok {
		t.Fatalf("want a blanket rule, got %v", a)
	}
	return s.BlanketRule
}

func tokensOf(t *testing.T, a *rlqsv3.RateLimitQuotaResponse_BucketAction) uint32 {
	t.Helper()
	tb := a.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	if tb == nil {
		t.Fatalf("want a token bucket, got %v", a)
	}
	return tb.GetMaxTokens()
}

func TestBlanketRules(t *testing.T) {
	e := startEnv(t, protoPolicy, nil)
	s := e.open()
	cases := []struct {
		id   map[string]string
		want typev3.RateLimitStrategy_BlanketRule
	}{
		{id("route", "open"), typev3.RateLimitStrategy_ALLOW_ALL},
		{id("route", "closed"), typev3.RateLimitStrategy_DENY_ALL},
		{id("route", "shadow"), typev3.RateLimitStrategy_ALLOW_ALL},
		{id("route", "nowhere"), typev3.RateLimitStrategy_ALLOW_ALL}, // no rule: allowed, as envoyproxy/ratelimit
	}
	domain := "edge"
	for _, c := range cases {
		a := only(t, s.exchange(domain, usage(c.id, 1, 0)))
		domain = ""
		if got := blanketOf(t, a); got != c.want {
			t.Errorf("%v: %v, want %v", c.id, got, c.want)
		}
		if ttl := a.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration(); ttl != DefaultBlanketTTL {
			t.Errorf("%v: ttl %v, want %v", c.id, ttl, DefaultBlanketTTL)
		}
		if a.GetBucketId().GetBucket()["route"] != c.id["route"] {
			t.Errorf("action for %v, want %v", a.GetBucketId(), c.id)
		}
	}
	// Sent again on the next report: Envoy extends the same assignment.
	if got := blanketOf(t, only(t, s.exchange("", usage(id("route", "closed"), 0, 3)))); got != typev3.RateLimitStrategy_DENY_ALL {
		t.Errorf("closed, again: %v", got)
	}
	if st := e.svc.Stats(); st.Leased != 0 || st.Buckets != 0 || st.Blankets != int64(len(cases))+1 {
		t.Errorf("blanket buckets leased: %+v", st)
	}
}

func TestUnknownBucketAnswers(t *testing.T) {
	for _, c := range []struct {
		name string
		ans  Unknown
	}{{"deny", UnknownDeny}, {"none", UnknownNoAssignment}} {
		t.Run(c.name, func(t *testing.T) {
			e := startEnv(t, protoPolicy, func(o *Options) { o.Unknown = c.ans })
			s := e.open()
			if c.ans == UnknownDeny {
				if got := blanketOf(t, only(t, s.exchange("other-domain", usage(id("route", "limited"), 0, 1)))); got != typev3.RateLimitStrategy_DENY_ALL {
					t.Errorf("unknown domain: %v", got)
				}
				return
			}
			// No answer for the unknown bucket: the next response is the
			// one for the limited bucket's report.
			s.send("edge", usage(id("route", "nowhere"), 1, 0))
			a := only(t, s.exchange("", usage(id("route", "limited"), 0, 0)))
			if a.GetBucketId().GetBucket()["route"] != "limited" {
				t.Errorf("got an action for %v", a.GetBucketId())
			}
		})
	}
}

func ttlOf(a *rlqsv3.RateLimitQuotaResponse_BucketAction) time.Duration {
	return a.GetQuotaAssignmentAction().GetAssignmentTimeToLive().AsDuration()
}

// TestLeaseReturnOnDisconnect walks one window: the first Envoy takes the
// whole window, the second is denied, the first reports 30 spent and keeps
// its assignment, then disconnects and its 70 unspent credits go to the
// second Envoy at its next report; the next window starts afresh.
func TestLeaseReturnOnDisconnect(t *testing.T) {
	e := startEnv(t, protoPolicy, nil)
	e.clock.Advance(250 * int64(time.Millisecond))
	a, b := e.open(), e.open()
	lim := id("route", "limited")

	first := only(t, a.exchange("edge", usage(lim, 0, 0)))
	if got := tokensOf(t, first); got != 100 {
		t.Errorf("alone: %d tokens, want the whole window (100)", got)
	}
	if ttl := ttlOf(first); ttl != 750*time.Millisecond {
		t.Errorf("ttl %v, want the rest of the window (750ms)", ttl)
	}
	tb := first.GetQuotaAssignmentAction().GetRateLimitStrategy().GetTokenBucket()
	if fill := tb.GetFillInterval().AsDuration(); fill <= time.Second || tb.GetTokensPerFill().GetValue() != 1 {
		t.Errorf("the bucket refills %d per %v: it could refill before the window ends", tb.GetTokensPerFill().GetValue(), fill)
	}
	if got := blanketOf(t, only(t, b.exchange("edge", usage(lim, 0, 0)))); got != typev3.RateLimitStrategy_DENY_ALL {
		t.Errorf("window spent: %v, want DENY_ALL", got)
	}
	again := only(t, a.exchange("", usage(lim, 30, 0)))
	if !proto.Equal(again.GetQuotaAssignmentAction().GetRateLimitStrategy(), first.GetQuotaAssignmentAction().GetRateLimitStrategy()) {
		t.Errorf("70 left for a demand of 38: want the same assignment again, got %v", again)
	}
	a.close()
	e.waitStreams(1)
	if st := e.svc.Stats(); st.Returned != 70 || st.Leased != 100 {
		t.Errorf("after the disconnect: %+v, want 100 leased and 70 returned", st)
	}
	var m strings.Builder
	e.svc.Metrics().WritePrometheus(&m)
	for _, line := range []string{"rlqs_streams 1", "rlqs_buckets 1", "rlqs_leased_credits_total 100", "rlqs_returned_credits_total 70",
		"rlqs_requests_allowed_total 30", "rlqs_assignments_total 1", "rlqs_blanket_assignments_total 1", "rlqs_reports_total 3"} {
		if !strings.Contains(m.String(), line+"\n") {
			t.Errorf("metric %q missing in:\n%s", line, m.String())
		}
	}
	// b's demand was 8 (denied): it gets 10 (8 and 25% headroom).
	if got := tokensOf(t, only(t, b.exchange("", usage(lim, 0, 8)))); got != 10 {
		t.Errorf("b after the return: %d tokens, want 10", got)
	}
	// Next window: a fresh lease sized by the demand, to the new window's end.
	e.clock.Advance(int64(time.Second))
	next := only(t, b.exchange("", usage(lim, 10, 30)))
	if got, ttl := tokensOf(t, next), ttlOf(next); got != 50 || ttl != 750*time.Millisecond {
		t.Errorf("next window: %d tokens for %v, want 50 for 750ms", got, ttl)
	}
}

func TestHoldOnDisconnect(t *testing.T) {
	e := startEnv(t, protoPolicy, func(o *Options) { o.HoldOnDisconnect = true })
	a, b := e.open(), e.open()
	lim := id("route", "limited")
	tokensOf(t, only(t, a.exchange("edge", usage(lim, 0, 0))))
	a.close()
	e.waitStreams(1)
	if got := blanketOf(t, only(t, b.exchange("edge", usage(lim, 0, 5)))); got != typev3.RateLimitStrategy_DENY_ALL {
		t.Errorf("held credits were handed out: %v", got)
	}
	if st := e.svc.Stats(); st.Returned != 0 {
		t.Errorf("returned %d", st.Returned)
	}
	e.clock.Advance(int64(time.Second))
	if got := tokensOf(t, only(t, b.exchange("", usage(lim, 0, 5)))); got != 7 {
		t.Errorf("next window: %d, want 7", got)
	}
}

func TestAbandonIdleBucket(t *testing.T) {
	e := startEnv(t, protoPolicy, func(o *Options) { o.AbandonAfter = 500 * time.Millisecond })
	s, other := e.open(), e.open()
	lim := id("route", "limited")
	tokensOf(t, only(t, s.exchange("edge", usage(lim, 0, 0))))
	e.clock.Advance(250 * int64(time.Millisecond))
	tokensOf(t, only(t, s.exchange("", usage(lim, 0, 0))))
	e.clock.Advance(250 * int64(time.Millisecond))
	a := only(t, s.exchange("", usage(lim, 0, 0)))
	if a.GetAbandonAction() == nil || a.GetBucketId().GetBucket()["route"] != "limited" {
		t.Fatalf("idle for 500ms: want abandon_action, got %v", a)
	}
	st := e.svc.Stats()
	if st.Abandoned != 1 || st.Buckets != 0 || st.Returned != 100 {
		t.Errorf("after abandon: %+v, want 1 abandoned, 0 buckets, 100 returned", st)
	}
	if got := tokensOf(t, only(t, other.exchange("edge", usage(lim, 0, 0)))); got != 100 {
		t.Errorf("the abandoned credits: other got %d, want 100", got)
	}
	// Reporting it again subscribes again.
	if got := blanketOf(t, only(t, s.exchange("", usage(lim, 1, 0)))); got != typev3.RateLimitStrategy_DENY_ALL {
		t.Errorf("resubscribed: %v", got)
	}
}

// TestOtherAlgorithmsLeaseTheirOwnWindow: a gcra rule is leased from a
// fixed window of the same rate under a key of its own, so the RLS
// checks of the rule keep their gcra state.
func TestOtherAlgorithmsLeaseTheirOwnWindow(t *testing.T) {
	e := startEnv(t, protoPolicy, nil)
	s := e.open()
	a := only(t, s.exchange("edge", usage(id("route", "smooth"), 0, 0)))
	if got, ttl := tokensOf(t, a), ttlOf(a); got != 60 || ttl != time.Minute {
		t.Errorf("%d tokens for %v, want 60 for 1m", got, ttl)
	}
	set := e.store.Current()
	r := set.Match("edge", []policy.Entry{{Key: "route", Value: "smooth"}})
	key := r.AppendKey(nil, []policy.Entry{{Key: "route", Value: "smooth"}})
	if _, ok := e.leaser.store.Get(key, e.clock.Now()); ok {
		t.Errorf("the gcra counter %s was touched", key)
	}
	if st, ok := e.leaser.store.Get(append(key, leaseSuffix...), e.clock.Now()); !ok || st.Kind != engine.KindFixed || st.B != 60 {
		t.Errorf("lease counter: %+v %v, want a fixed window with 60 used", st, ok)
	}
}

// TestNestedDescriptorKeyOrder: a bucket id has no key order; the nested
// tenant/route descriptor is found although route sorts first.
func TestNestedDescriptorKeyOrder(t *testing.T) {
	e := startEnv(t, protoPolicy, nil)
	s := e.open()
	if got := tokensOf(t, only(t, s.exchange("edge", usage(id("tenant", "acme", "route", "x"), 0, 0)))); got != 10 {
		t.Errorf("tenant/route: %d tokens, want 10", got)
	}
	ordered := []policy.Entry{{Key: "tenant", Value: "acme"}, {Key: "route", Value: "x"}}
	key := e.store.Current().Match("edge", ordered).AppendKey(nil, ordered)
	if _, ok := e.leaser.store.Get(key, e.clock.Now()); !ok {
		t.Errorf("counter %s not used", key)
	}
}

func TestInvalidRequests(t *testing.T) {
	e := startEnv(t, protoPolicy, func(o *Options) { o.MaxBuckets = 2; o.MaxEntries = 2 })
	lim := id("route", "limited")
	cases := []struct {
		name string
		msgs []*rlqsv3.RateLimitQuotaUsageReports
		code codes.Code
	}{
		{"no domain", []*rlqsv3.RateLimitQuotaUsageReports{{BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(lim, 0, 0)}}}, codes.InvalidArgument},
		{"no usages", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "edge"}}, codes.InvalidArgument},
		{"no bucket id", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{}}}}, codes.InvalidArgument},
		{"empty key", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(id("", "x"), 0, 0)}}}, codes.InvalidArgument},
		{"too many keys", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(id("a", "1", "b", "2", "c", "3"), 0, 0)}}}, codes.InvalidArgument},
		{"negative elapsed", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{BucketId: &rlqsv3.BucketId{Bucket: lim}, TimeElapsed: durationpb.New(-time.Second)}}}}, codes.InvalidArgument},
		{"domain change", []*rlqsv3.RateLimitQuotaUsageReports{
			{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(lim, 0, 0)}},
			{Domain: "other", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{usage(lim, 0, 0)}},
		}, codes.InvalidArgument},
		{"too many buckets", []*rlqsv3.RateLimitQuotaUsageReports{{Domain: "edge", BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{
			usage(id("route", "a"), 0, 0), usage(id("route", "b"), 0, 0), usage(id("route", "c"), 0, 0)}}}, codes.ResourceExhausted},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := e.open()
			for _, m := range c.msgs {
				if err := s.s.Send(m); err != nil {
					break
				}
			}
			var err error
			for err == nil {
				_, err = s.s.Recv()
			}
			if status.Code(err) != c.code {
				t.Errorf("got %v, want %v", err, c.code)
			}
		})
	}
	e.waitStreams(0)
	st := e.svc.Stats()
	if st.Errors != int64(len(cases)) || st.Buckets != 0 {
		t.Errorf("stats %+v: want %d errors and no bucket left", st, len(cases))
	}
	// The domain-change stream leased 100 and gave them back when it failed.
	if st.Leased != st.Returned {
		t.Errorf("leased %d, returned %d", st.Leased, st.Returned)
	}
}

// TestReloadKeepsLease: a reload that leaves the limit alone keeps the
// bucket's lease; one that changes it starts again under the new limit,
// leaving the old lease spent.
func TestReloadKeepsLease(t *testing.T) {
	e := startEnv(t, protoPolicy, nil)
	s := e.open()
	lim := id("route", "limited")
	first := only(t, s.exchange("edge", usage(lim, 0, 0)))
	writeReload(t, e, protoPolicy+"\n# touched\n")
	again := only(t, s.exchange("", usage(lim, 10, 0)))
	if !proto.Equal(first.GetQuotaAssignmentAction().GetRateLimitStrategy(), again.GetQuotaAssignmentAction().GetRateLimitStrategy()) {
		t.Errorf("unchanged limit: assignment changed to %v", again)
	}
	writeReload(t, e, strings.Replace(protoPolicy, "requests_per_unit: 100", "requests_per_unit: 200", 1))
	if got := tokensOf(t, only(t, s.exchange("", usage(lim, 10, 0)))); got != 13 {
		t.Errorf("new limit: %d tokens, want 13 (a demand of 10 and headroom)", got)
	}
	if st := e.svc.Stats(); st.Returned != 0 || st.Leased != 113 || st.Buckets != 1 {
		t.Errorf("%+v: want 113 leased, nothing returned (the old bucket may still be spent), 1 bucket", st)
	}
}

func writeReload(t *testing.T, e *env, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.store.Path(), "p.yaml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Reload(); err != nil {
		t.Fatal(err)
	}
}

// TestLeaserFailure: a counter holding another algorithm's state (here a
// token bucket written by a check under another limit) cannot be leased
// from; the stream ends with Unavailable.
func TestLeaserFailure(t *testing.T) {
	e := startEnv(t, protoPolicy, nil)
	entries := []policy.Entry{{Key: "route", Value: "limited"}}
	key := e.store.Current().Match("edge", entries).AppendKey(nil, entries)
	tok, err := engine.NewLimit(engine.KindToken, 10, int64(time.Second), 0)
	if err != nil {
		t.Fatal(err)
	}
	e.leaser.store.Apply(key, e.clock.Now(), &checkOp{lim: tok, cost: 1})
	s := e.open()
	s.send("edge", usage(id("route", "limited"), 0, 0))
	if _, err := s.s.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("got %v, want Unavailable", err)
	}
}

// checkOp writes a check's state, as THROTTLE.CHECK does.
type checkOp struct {
	lim  engine.Limit
	cost int64
}

func (o *checkOp) Apply(cur engine.State, now int64) (engine.State, int64) {
	next, _, ttl, err := o.lim.Check(cur, now, o.cost)
	if err != nil {
		return cur, 0
	}
	return next, ttl
}
