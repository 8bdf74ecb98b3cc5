package rls

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/VictoriaMetrics/metrics"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/policy"
)

// Limiter runs one check of cost units against the counter key under lim
// at time now (ns since the epoch) and returns the engine's decision. A
// cost of 0 is a peek. mode is the rule's per-descriptor mode, which an
// upstream backend honours (policy.Mode.OpMode) and a local one ignores.
// It must be safe for concurrent use. The core package's check operation
// satisfies it through an adapter (grpcfront.Limiter).
type Limiter interface {
	Check(key []byte, lim engine.Limit, mode policy.Mode, cost, now int64) (engine.Decision, error)
}

// Syncer is a Limiter whose changes may have to be durable before an
// answer goes out (grpcfront.Limiter with sync persistence). ShouldRateLimit
// calls Sync once per request, after its checks and before it answers,
// when a check counted hits; an error answers Unavailable, so Envoy's
// failure_mode_deny decides.
type Syncer interface {
	Sync(ctx context.Context) error
}

// Policies gives the policy set in force; *policy.Store implements it. The
// service calls Current once per request.
type Policies interface {
	Current() *policy.Set
}

// HeaderNames are the names of envoyproxy/ratelimit's three response
// headers (its LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER and
// LIMIT_RESET_HEADER); empty fields take its defaults.
type HeaderNames struct {
	Limit, Remaining, Reset string
}

// Defaults of Options.
const (
	DefaultNearLimitRatio = 0.8 // envoyproxy/ratelimit's NEAR_LIMIT_RATIO
	DefaultMaxDescriptors = 64  // descriptors in one request
	DefaultMaxEntries     = 32  // entries in one descriptor
)

// Options configures a Service.
type Options struct {
	// Policies and Limiter are required.
	Policies Policies
	Limiter  Limiter
	// Now returns the time in ns since the Unix epoch; required (the
	// server passes its monotonic clock, tests a manual one).
	Now func() int64
	// Metrics receives the service's counters; nil creates a private set
	// (see Service.Metrics).
	Metrics *metrics.Set
	// ShadowMode is the global shadow switch (envoyproxy/ratelimit's
	// SHADOW_MODE): an OVER_LIMIT overall code becomes OK.
	ShadowMode bool
	// QuotaMode treats every descriptor as quota_mode (its QUOTA_MODE).
	QuotaMode bool
	// NearLimitRatio is the share of a limit above which hits count as
	// near_limit; 0 means DefaultNearLimitRatio.
	NearLimitRatio float64
	// RateLimitHeaders adds the IETF RateLimit-Policy and RateLimit fields
	// (draft-ietf-httpapi-ratelimit-headers-10, as clients/go/httplimit
	// writes them), one list item per limited descriptor.
	RateLimitHeaders bool
	// LimitHeaders adds envoyproxy/ratelimit's three headers
	// (LIMIT_RESPONSE_HEADERS_ENABLED) for the descriptor closest to its
	// limit, named by LimitHeaderNames.
	LimitHeaders     bool
	LimitHeaderNames HeaderNames
	// DynamicMetadata fills the response's dynamic_metadata as
	// envoyproxy/ratelimit's RESPONSE_DYNAMIC_METADATA does (see
	// dynamicMetadata).
	DynamicMetadata bool
	// MaxDescriptors and MaxEntries bound one request; 0 means the
	// defaults. A larger request is InvalidArgument.
	MaxDescriptors, MaxEntries int
}

// Service is the Envoy RLS v3 service. Create it with New; it is safe for
// concurrent use.
type Service struct {
	rlsv3.UnimplementedRateLimitServiceServer

	opts    Options
	stats   *statsTable
	health  *health.Server
	headers HeaderNames
}

// New checks opts and returns a Service.
func New(opts Options) (*Service, error) {
	if opts.Policies == nil || opts.Limiter == nil || opts.Now == nil {
		return nil, errors.New("rls: Policies, Limiter and Now are required")
	}
	if opts.NearLimitRatio == 0 {
		opts.NearLimitRatio = DefaultNearLimitRatio
	}
	if opts.NearLimitRatio < 0 || opts.NearLimitRatio > 1 {
		return nil, errors.New("rls: NearLimitRatio must be within [0, 1]")
	}
	if opts.MaxDescriptors <= 0 {
		opts.MaxDescriptors = DefaultMaxDescriptors
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	h := opts.LimitHeaderNames
	if h.Limit == "" {
		h.Limit = "RateLimit-Limit"
	}
	if h.Remaining == "" {
		h.Remaining = "RateLimit-Remaining"
	}
	if h.Reset == "" {
		h.Reset = "RateLimit-Reset"
	}
	s := &Service{opts: opts, stats: newStatsTable(opts.Metrics), health: health.NewServer(), headers: h}
	s.health.SetServingStatus(rlsv3.RateLimitService_ServiceDesc.ServiceName, healthpb.HealthCheckResponse_SERVING)
	return s, nil
}

// Register registers the RLS service and the gRPC health service on g.
func (s *Service) Register(g *grpc.Server) {
	rlsv3.RegisterRateLimitServiceServer(g, s)
	healthpb.RegisterHealthServer(g, s.health)
}

// Health returns the health server, so the caller can report NOT_SERVING
// while shutting down.
func (s *Service) Health() *health.Server { return s.health }

// Metrics returns the set holding the service's counters.
func (s *Service) Metrics() *metrics.Set { return s.opts.Metrics }

// result is the outcome of one descriptor.
type result struct {
	rule  *policy.Rule
	st    *rlsv3.RateLimitResponse_DescriptorStatus
	over  bool // over the limit before shadow mode
	quota bool
	reset int64 // ns until reset
}

// ShouldRateLimit answers one Envoy request. See the package doc for the
// rules it follows.
func (s *Service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if req.GetDomain() == "" {
		s.stats.serviceError.Inc()
		return nil, status.Error(codes.InvalidArgument, "rate limit domain must not be empty")
	}
	descs := req.GetDescriptors()
	if len(descs) == 0 {
		s.stats.serviceError.Inc()
		return nil, status.Error(codes.InvalidArgument, "rate limit descriptor list must not be empty")
	}
	if len(descs) > s.opts.MaxDescriptors {
		s.stats.serviceError.Inc()
		return nil, status.Errorf(codes.InvalidArgument, "%d descriptors, more than the %d allowed", len(descs), s.opts.MaxDescriptors)
	}
	n := 0
	for _, d := range descs {
		if len(d.GetEntries()) > s.opts.MaxEntries {
			s.stats.serviceError.Inc()
			return nil, status.Errorf(codes.InvalidArgument, "a descriptor has %d entries, more than the %d allowed", len(d.GetEntries()), s.opts.MaxEntries)
		}
		if d.GetIsNegativeHits() {
			s.stats.serviceError.Inc()
			return nil, status.Error(codes.InvalidArgument, "is_negative_hits is not supported")
		}
		n += len(d.GetEntries())
	}
	set := s.opts.Policies.Current()
	now := s.opts.Now()
	domain := req.GetDomain()
	if !set.HasDomain(domain) {
		s.stats.domainNotFound.Add(len(descs)) // per descriptor, as its GetLimit counts
	}

	// Entries of every descriptor, in one backing array.
	all := make([]policy.Entry, 0, n)
	entries := make([][]policy.Entry, len(descs))
	res := make([]result, len(descs))
	var replacing []string
	for i, d := range descs {
		start := len(all)
		for _, en := range d.GetEntries() {
			all = append(all, policy.Entry{Key: en.GetKey(), Value: en.GetValue()})
		}
		entries[i] = all[start:len(all):len(all)]
		r, err := s.rule(set, domain, d, entries[i])
		if err != nil {
			s.stats.serviceError.Inc()
			return nil, err
		}
		res[i].rule = r
		if r != nil {
			replacing = append(replacing, r.Replaces...)
		}
	}

	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(descs))}
	var key []byte
	failed, quotaFailed, quotaTotal := 0, 0, 0
	changed := false // a check counted hits: Sync before answering
	for i, d := range descs {
		r := &res[i]
		rule := r.rule
		if rule != nil && !rule.Unlimited && rule.Name != "" && contains(replacing, rule.Name) {
			// Replaced: as if nothing matched. An unlimited rule stays
			// unlimited even when replaced, as there (it is set aside
			// before replaces are applied).
			rule = nil
		}
		r.rule = rule
		switch {
		case rule == nil:
			r.st = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		case rule.Unlimited:
			r.st = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
		default:
			hits := hitsAddend(req, d)
			var err error
			key, err = s.check(r, rule, domain, entries[i], hits, now, key)
			if err != nil {
				s.stats.limiterError.Inc()
				return nil, status.Errorf(codes.Unavailable, "rate limit check failed: %v", err)
			}
			changed = changed || (hits > 0 && !rule.Block)
			r.quota = s.opts.QuotaMode || rule.QuotaMode
			if r.st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
				if r.quota {
					quotaFailed++
				} else {
					failed++
				}
			}
			if r.quota {
				quotaTotal++
			}
		}
		resp.Statuses[i] = r.st
	}
	if sy, ok := s.opts.Limiter.(Syncer); ok && changed {
		if err := sy.Sync(ctx); err != nil {
			s.stats.limiterError.Inc()
			return nil, status.Errorf(codes.Unavailable, "rate limit change not durable: %v", err)
		}
	}
	if failed > 0 || (quotaTotal > 0 && quotaTotal == quotaFailed) {
		resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	if s.opts.LimitHeaders {
		resp.ResponseHeadersToAdd = s.limitHeaders(res, resp.ResponseHeadersToAdd)
	}
	if s.opts.RateLimitHeaders {
		resp.ResponseHeadersToAdd = rateLimitHeaders(res, resp.ResponseHeadersToAdd)
	}
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT && s.opts.ShadowMode {
		resp.OverallCode = rlsv3.RateLimitResponse_OK
		s.stats.globalShadow.Inc()
	}
	if s.opts.DynamicMetadata {
		resp.DynamicMetadata = dynamicMetadata(req, res)
	}
	return resp, nil
}

// rule finds the rule of one descriptor: Envoy's limit override if the
// descriptor carries one and the domain is known (as envoyproxy/ratelimit
// applies it), else the configured match.
func (s *Service) rule(set *policy.Set, domain string, d *ratelimitv3.RateLimitDescriptor, entries []policy.Entry) (*policy.Rule, error) {
	if o := d.GetLimit(); o != nil && set.HasDomain(domain) {
		u, ok := overrideUnits[o.GetUnit()]
		if !ok {
			return nil, status.Errorf(codes.InvalidArgument, "limit override with unit %v", o.GetUnit())
		}
		r, err := policy.Override(domain, entries, o.GetRequestsPerUnit(), u)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "limit override: %v", err)
		}
		return r, nil
	}
	return set.Match(domain, entries), nil
}

var overrideUnits = map[typev3.RateLimitUnit]policy.Unit{
	typev3.RateLimitUnit_SECOND: policy.UnitSecond,
	typev3.RateLimitUnit_MINUTE: policy.UnitMinute,
	typev3.RateLimitUnit_HOUR:   policy.UnitHour,
	typev3.RateLimitUnit_DAY:    policy.UnitDay,
	typev3.RateLimitUnit_MONTH:  policy.UnitMonth,
	typev3.RateLimitUnit_YEAR:   policy.UnitYear,
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hitsAddend is envoyproxy/ratelimit's GetHitsAddends: the descriptor's
// hits_addend when set (0 included: check without counting), else the
// request's, where 0 means 1.
func hitsAddend(req *rlsv3.RateLimitRequest, d *ratelimitv3.RateLimitDescriptor) int64 {
	if h := d.GetHitsAddend(); h != nil {
		return int64(min(h.GetValue(), math.MaxInt64))
	}
	return int64(max(1, req.GetHitsAddend()))
}

// check runs one limited descriptor, fills r.st and r.over and counts the
// statistics. key is a scratch buffer, returned for reuse.
func (s *Service) check(r *result, rule *policy.Rule, domain string, entries []policy.Entry, hits, now int64, key []byte) ([]byte, error) {
	st := s.stats.get(domain, rule, entries)
	st.totalHits.Add(int(hits))
	lim := currentLimit(rule)
	var remaining, limit, before int64
	if rule.Block {
		r.over = true
		r.reset = rule.WindowEnd(now) - now
	} else {
		key = rule.AppendKey(key[:0], entries)
		d, err := s.opts.Limiter.Check(key, rule.Limit, rule.Mode, hits, now)
		if err != nil {
			return key, err
		}
		r.over = d.Allowed == 0
		limit = d.Limit
		remaining = d.Remaining
		if rule.Algorithm == engine.KindFixed {
			r.reset = rule.WindowEnd(now) - now
		} else {
			r.reset = max(0, d.ResetAt*1e6-now)
		}
		if r.over {
			before = limit - remaining
		} else {
			before = limit - remaining - hits
		}
	}
	r.st = &rlsv3.RateLimitResponse_DescriptorStatus{
		Code:               rlsv3.RateLimitResponse_OK,
		CurrentLimit:       lim,
		DurationUntilReset: durationpb.New(time.Duration(r.reset)),
	}
	s.count(st, r.over, rule.ShadowMode, limit, before, hits)
	if r.over {
		r.st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		if rule.ShadowMode {
			r.st.Code = rlsv3.RateLimitResponse_OK
		}
	} else {
		r.st.LimitRemaining = uint32(min(remaining, math.MaxUint32))
	}
	return key, nil
}

// count adds a descriptor's hits to its statistics the way
// envoyproxy/ratelimit's base limiter does (src/limiter/base_limiter.go):
// before and after are the units used before and after the hits, limit the
// threshold. Hits past the threshold are over_limit, those between the
// near-limit threshold and the limit near_limit, and a shadow-mode rule
// counts its over_limit hits again as shadow_mode.
func (s *Service) count(st *ruleStats, over, shadow bool, limit, before, hits int64) {
	near := int64(math.Floor(float64(limit) * s.opts.NearLimitRatio))
	if over {
		overHits := hits
		if before < limit {
			overHits = hits - (limit - before) // after - limit, without overflowing
			st.nearLimit.Add(int(limit - max(near, before)))
		}
		st.overLimit.Add(int(overHits))
		if shadow {
			st.shadowMode.Add(int(overHits))
		}
		return
	}
	st.withinLimit.Add(int(hits))
	after := before + hits // admitted, so at most limit
	if after > near {
		if before >= near {
			st.nearLimit.Add(int(hits))
		} else {
			st.nearLimit.Add(int(after - near))
		}
	}
}

// currentLimit is the status's current_limit: requests_per_unit, the unit
// (with unit_multiplier for a period that is a multiple of one) and name.
func currentLimit(r *policy.Rule) *rlsv3.RateLimitResponse_RateLimit {
	u, mult := r.UnitMultiple()
	l := &rlsv3.RateLimitResponse_RateLimit{Name: r.Name, RequestsPerUnit: r.RequestsPerUnit, Unit: protoUnits[u]}
	if mult > 1 {
		l.UnitMultiplier = wrapperspb.UInt32(mult)
	}
	return l
}

var protoUnits = [...]rlsv3.RateLimitResponse_RateLimit_Unit{
	policy.UnitNone:   rlsv3.RateLimitResponse_RateLimit_UNKNOWN,
	policy.UnitSecond: rlsv3.RateLimitResponse_RateLimit_SECOND,
	policy.UnitMinute: rlsv3.RateLimitResponse_RateLimit_MINUTE,
	policy.UnitHour:   rlsv3.RateLimitResponse_RateLimit_HOUR,
	policy.UnitDay:    rlsv3.RateLimitResponse_RateLimit_DAY,
	policy.UnitWeek:   rlsv3.RateLimitResponse_RateLimit_WEEK,
	policy.UnitMonth:  rlsv3.RateLimitResponse_RateLimit_MONTH,
	policy.UnitYear:   rlsv3.RateLimitResponse_RateLimit_YEAR,
}

// ceilSeconds rounds ns up to whole seconds.
func ceilSeconds(ns int64) int64 {
	if ns <= 0 {
		return 0
	}
	return (ns + 1e9 - 1) / 1e9
}

// limitHeaders appends envoyproxy/ratelimit's three headers for the
// descriptor it picks (src/service/ratelimit.go): the last over-limit
// descriptor if any, else the limited one with the least remaining (the
// first of equals).
func (s *Service) limitHeaders(res []result, h []*corev3.HeaderValue) []*corev3.HeaderValue {
	var pick *result
	minRemaining := uint32(math.MaxUint32)
	for i := range res {
		r := &res[i]
		if r.st.CurrentLimit == nil {
			continue
		}
		if r.st.LimitRemaining < minRemaining {
			pick, minRemaining = r, r.st.LimitRemaining
		}
		if r.st.Code == rlsv3.RateLimitResponse_OVER_LIMIT && !r.quota {
			pick, minRemaining = r, 0
		}
	}
	if pick == nil {
		return h
	}
	return append(h,
		&corev3.HeaderValue{Key: s.headers.Limit, Value: strconv.FormatUint(uint64(pick.st.CurrentLimit.RequestsPerUnit), 10)},
		&corev3.HeaderValue{Key: s.headers.Remaining, Value: strconv.FormatUint(uint64(pick.st.LimitRemaining), 10)},
		&corev3.HeaderValue{Key: s.headers.Reset, Value: strconv.FormatInt(ceilSeconds(pick.reset), 10)},
	)
}

// rateLimitHeaders appends the IETF fields: RateLimit-Policy lists each
// limited descriptor as "name";q=limit;w=window-seconds and RateLimit as
// "name";r=remaining;t=seconds-to-reset, in request order; name is the
// rule's name, or its path when it has none.
func rateLimitHeaders(res []result, h []*corev3.HeaderValue) []*corev3.HeaderValue {
	var pol, cur strings.Builder
	for i := range res {
		r := &res[i]
		if r.st.CurrentLimit == nil || r.rule == nil {
			continue
		}
		if pol.Len() > 0 {
			pol.WriteString(", ")
			cur.WriteString(", ")
		}
		name := r.rule.Name
		if name == "" {
			name = r.rule.Path
		}
		sf := sfString(name)
		pol.WriteString(sf)
		pol.WriteString(";q=")
		pol.WriteString(strconv.FormatUint(uint64(r.rule.RequestsPerUnit), 10))
		pol.WriteString(";w=")
		pol.WriteString(strconv.FormatInt(ceilSeconds(int64(r.rule.Period)), 10))
		cur.WriteString(sf)
		cur.WriteString(";r=")
		cur.WriteString(strconv.FormatUint(uint64(r.st.LimitRemaining), 10))
		cur.WriteString(";t=")
		cur.WriteString(strconv.FormatInt(ceilSeconds(r.reset), 10))
	}
	if pol.Len() == 0 {
		return h
	}
	return append(h,
		&corev3.HeaderValue{Key: "RateLimit-Policy", Value: pol.String()},
		&corev3.HeaderValue{Key: "RateLimit", Value: cur.String()},
	)
}

// sfString renders s as an RFC 8941 string: quoted, '\' and '"' escaped,
// bytes outside printable ASCII dropped (as clients/go/httplimit does).
func sfString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
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

// dynamicMetadata builds the response's dynamic_metadata as
// envoyproxy/ratelimit does (src/service/ratelimit.go, ratelimitToMetadata):
// "domain"; "descriptors", each with "entries" ("key=value" strings) and,
// when set, "limit" (the override as text) and "hitsAddend"; the request's
// "hitsAddend" when not 0; and "metadata", the metadata blocks of the rules
// of every descriptor not over its limit, merged (nested mappings merge,
// otherwise the first descriptor's value stays).
func dynamicMetadata(req *rlsv3.RateLimitRequest, res []result) *structpb.Struct {
	fields := map[string]*structpb.Value{"domain": structpb.NewStringValue(req.GetDomain())}
	var descs []*structpb.Value
	for _, d := range req.GetDescriptors() {
		var entries []*structpb.Value
		for _, en := range d.GetEntries() {
			entries = append(entries, structpb.NewStringValue(en.GetKey()+"="+en.GetValue()))
		}
		df := map[string]*structpb.Value{"entries": structpb.NewListValue(&structpb.ListValue{Values: entries})}
		if d.GetLimit() != nil {
			df["limit"] = structpb.NewStringValue(d.GetLimit().String())
		}
		if h := d.GetHitsAddend(); h != nil {
			df["hitsAddend"] = structpb.NewNumberValue(float64(h.GetValue()))
		}
		descs = append(descs, structpb.NewStructValue(&structpb.Struct{Fields: df}))
	}
	fields["descriptors"] = structpb.NewListValue(&structpb.ListValue{Values: descs})
	if h := req.GetHitsAddend(); h != 0 {
		fields["hitsAddend"] = structpb.NewNumberValue(float64(h))
	}
	merged := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for i := range res {
		r := &res[i]
		if r.rule == nil || r.rule.Unlimited || r.rule.Metadata == nil || r.st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			continue
		}
		if m, err := structpb.NewStruct(r.rule.Metadata); err == nil { // the loader admits only what converts
			mergeStruct(merged, m)
		}
	}
	if len(merged.Fields) > 0 {
		fields["metadata"] = structpb.NewStructValue(merged)
	}
	return &structpb.Struct{Fields: fields}
}

func mergeStruct(dst, src *structpb.Struct) {
	for k, v := range src.GetFields() {
		cur, ok := dst.Fields[k]
		if !ok {
			dst.Fields[k] = v
			continue
		}
		if a, b := cur.GetStructValue(), v.GetStructValue(); a != nil && b != nil {
			mergeStruct(a, b)
		}
	}
}
