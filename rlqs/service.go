package rlqs

import (
	"context"
	"errors"
	"io"
	"math"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/VictoriaMetrics/metrics"
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/policy"
)

// Leaser draws credits from, and gives them back to, the fixed window a
// counter key holds. Lease grants min(batch, remaining) credits of the
// window that holds now (ns since the epoch) under lim, a fixed-window
// limit, exactly as engine.Limit.Lease does (a batch of 0 grants nothing
// and reports what remains); Return gives back unused credits of the
// window named by resetAtMs (the Decision.ResetAt of its lease), exactly
// as engine.Return does, and reports how many it took back. Both must be
// safe for concurrent use. The core package's lease and return operations
// (THROTTLE.LEASE and THROTTLE.RETURN) satisfy it through an adapter.
type Leaser interface {
	Lease(key []byte, lim engine.Limit, now, batch int64) (engine.Decision, error)
	Return(key []byte, now, credits, resetAtMs int64) (int64, error)
}

// Syncer is a Leaser whose changes may have to be durable before an
// answer goes out (grpcfront.Limiter with sync persistence). The service
// calls Sync before it sends a response to a message whose handling
// leased or returned credits; an error ends the stream with Unavailable.
type Syncer interface {
	Sync(ctx context.Context) error
}

// Policies gives the policy set in force; *policy.Store implements it. The
// service calls Current once per usage report message.
type Policies interface {
	Current() *policy.Set
}

// Unknown says what the service answers for a bucket that no rule limits
// (an unknown domain, or a bucket id that matches no descriptor).
type Unknown uint8

// Answers for unknown buckets.
const (
	// UnknownAllow assigns ALLOW_ALL, as envoyproxy/ratelimit answers OK
	// for a descriptor that matches nothing. The default.
	UnknownAllow Unknown = iota
	// UnknownDeny assigns DENY_ALL.
	UnknownDeny
	// UnknownNoAssignment sends nothing: Envoy keeps applying the bucket's
	// no_assignment_behavior.
	UnknownNoAssignment
)

// Defaults of Options.
const (
	DefaultHeadroom     = 0.25
	DefaultBlanketTTL   = time.Minute
	DefaultAbandonAfter = 5 * time.Minute
	DefaultMaxBuckets   = 4096 // buckets one stream may subscribe to
	DefaultMaxEntries   = 32   // keys in one bucket id
)

// Options configures a Service.
type Options struct {
	// Policies, Leaser and Now are required. Now returns the time in ns
	// since the Unix epoch (the server passes its monotonic clock, tests a
	// manual one).
	Policies Policies
	Leaser   Leaser
	Now      func() int64
	// Headroom is the share added to the demand an Envoy reported for its
	// last interval when sizing its next lease; 0 means DefaultHeadroom,
	// a negative value none.
	Headroom float64
	// Unknown is the answer for buckets no rule limits.
	Unknown Unknown
	// BlanketTTL is the assignment_time_to_live of ALLOW_ALL and DENY_ALL
	// assignments (unlimited, requests_per_unit 0, shadow mode, unknown
	// buckets); they are sent again on every report, which extends them.
	// 0 means DefaultBlanketTTL.
	BlanketTTL time.Duration
	// AbandonAfter is how long a bucket may report no requests before the
	// service abandons it (abandon_action) and forgets it; 0 means
	// DefaultAbandonAfter, a negative value never.
	AbandonAfter time.Duration
	// HoldOnDisconnect keeps the credits of a stream that ends until its
	// window closes instead of returning them (see the package doc: use
	// it when an Envoy may keep enforcing its assignments after losing
	// its stream).
	HoldOnDisconnect bool
	// MaxBuckets bounds the buckets of one stream (more is
	// ResourceExhausted) and MaxEntries the keys of one bucket id (more is
	// InvalidArgument); 0 means the defaults.
	MaxBuckets, MaxEntries int
	// Alarm returns a channel that is closed once Now reaches at (ns since
	// the epoch), and a function that cancels it. A stream arms one for
	// the end of its buckets' window, to push fresh assignments when the
	// window rolls over (see the package doc). nil means a time.Timer of
	// at less Now, on the service's clock: if the clock was moved by hand,
	// the stream finds nothing due and arms again. Tests pass an alarm
	// driven by their injected clock.
	Alarm func(at int64) (fired <-chan struct{}, cancel func())
	// Metrics receives the service's statistics (see Stats) in Prometheus
	// form, named rlqs_*; nil creates a private set (see Service.Metrics).
	// Give each Service a set of its own.
	Metrics *metrics.Set
}

// Stats are the service's counters since New.
type Stats struct {
	Streams     int64 // streams open now
	Buckets     int64 // limited (stream, bucket) subscriptions now
	Reports     int64 // bucket usage reports received
	Assignments int64 // token-bucket assignments sent (each backed by a fresh lease)
	Pushes      int64 // responses sent at a window's start, before any report in it
	Blankets    int64 // ALLOW_ALL / DENY_ALL assignments sent
	Abandoned   int64 // buckets abandoned
	Leased      int64 // credits leased
	Returned    int64 // credits given back (disconnects, abandons, reloads)
	Allowed     int64 // requests Envoys reported as allowed
	Denied      int64 // requests Envoys reported as denied
	Errors      int64 // streams ended by a bad message or a Leaser failure
}

// Service is the RLQS server. Create it with New; it is safe for
// concurrent use, with one goroutine per stream.
type Service struct {
	rlqsv3.UnimplementedRateLimitQuotaServiceServer

	opts Options

	mu     sync.Mutex
	active map[string]int64 // counter key -> streams subscribed to it

	streams, buckets, reports, assignments, blankets, abandoned, pushes atomic.Int64
	leased, returned, allowed, denied, errs                             atomic.Int64
}

// New checks opts and returns a Service.
func New(opts Options) (*Service, error) {
	if opts.Policies == nil || opts.Leaser == nil || opts.Now == nil {
		return nil, errors.New("rlqs: Policies, Leaser and Now are required")
	}
	switch {
	case opts.Headroom == 0:
		opts.Headroom = DefaultHeadroom
	case opts.Headroom < 0:
		opts.Headroom = 0
	}
	if opts.Unknown > UnknownNoAssignment {
		return nil, errors.New("rlqs: unknown Unknown answer")
	}
	if opts.BlanketTTL <= 0 {
		opts.BlanketTTL = DefaultBlanketTTL
	}
	if opts.AbandonAfter == 0 {
		opts.AbandonAfter = DefaultAbandonAfter
	}
	if opts.MaxBuckets <= 0 {
		opts.MaxBuckets = DefaultMaxBuckets
	}
	if opts.MaxEntries <= 0 {
		opts.MaxEntries = DefaultMaxEntries
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewSet()
	}
	if opts.Alarm == nil {
		now := opts.Now
		opts.Alarm = func(at int64) (<-chan struct{}, func()) {
			ch := make(chan struct{})
			t := time.AfterFunc(time.Duration(max(0, at-now())), func() { close(ch) })
			return ch, func() { t.Stop() }
		}
	}
	s := &Service{opts: opts, active: map[string]int64{}}
	for name, v := range map[string]*atomic.Int64{
		"rlqs_streams":                   &s.streams,
		"rlqs_buckets":                   &s.buckets,
		"rlqs_reports_total":             &s.reports,
		"rlqs_assignments_total":         &s.assignments,
		"rlqs_pushes_total":              &s.pushes,
		"rlqs_blanket_assignments_total": &s.blankets,
		"rlqs_abandoned_total":           &s.abandoned,
		"rlqs_leased_credits_total":      &s.leased,
		"rlqs_returned_credits_total":    &s.returned,
		"rlqs_requests_allowed_total":    &s.allowed,
		"rlqs_requests_denied_total":     &s.denied,
		"rlqs_stream_errors_total":       &s.errs,
	} {
		opts.Metrics.GetOrCreateGauge(name, func() float64 { return float64(v.Load()) })
	}
	return s, nil
}

// Metrics returns the set holding the service's statistics.
func (s *Service) Metrics() *metrics.Set { return s.opts.Metrics }

// Register registers the RLQS service on g.
func (s *Service) Register(g *grpc.Server) {
	rlqsv3.RegisterRateLimitQuotaServiceServer(g, s)
}

// Stats returns a snapshot of the service's counters.
func (s *Service) Stats() Stats {
	return Stats{
		Streams: s.streams.Load(), Buckets: s.buckets.Load(), Reports: s.reports.Load(),
		Assignments: s.assignments.Load(), Pushes: s.pushes.Load(), Blankets: s.blankets.Load(), Abandoned: s.abandoned.Load(),
		Leased: s.leased.Load(), Returned: s.returned.Load(), Allowed: s.allowed.Load(),
		Denied: s.denied.Load(), Errors: s.errs.Load(),
	}
}

// bucketKind is what a bucket's rule makes of it.
type bucketKind uint8

const (
	kindUnknown bucketKind = iota // no rule
	kindAllow                     // unlimited or shadow mode
	kindDeny                      // requests_per_unit 0
	kindLimited                   // leased from a fixed window
)

// bucket is one bucket of one stream.
type bucket struct {
	id      *rlqsv3.BucketId
	canon   string         // the id as the stream's map key
	entries []policy.Entry // the id's pairs in the order its rule matched
	set     *policy.Set    // the set the rule came from
	kind    bucketKind
	rule    *policy.Rule // the rule it was resolved to (nil if none)
	key     string       // counter key (limited only)
	lim     engine.Limit // fixed-window limit of the key (limited only)

	// The current window, for a limited bucket.
	end     int64 // window end, ns (0: no lease yet)
	resetAt int64 // the window's Decision.ResetAt, ms, for Return
	held    int64 // credits leased for this stream in the window
	used    int64 // requests reported allowed in the window
	tokens  int64 // max_tokens of the active assignment (0: none)
	spent   int64 // requests reported allowed since that assignment
	gen     int64 // assignments sent, for the fill interval's parity

	lastUse int64 // last report with requests, ns
	want    int64 // the demand of its last report with requests, headroom added (0: none yet)
	pushed  int64 // when the active assignment was pushed, ns (0: it answered a report)
}

// spentSince is the part of a report's allowed requests spent from the
// active assignment. The first report after a push spans the window's
// start, and only the requests of its interval after the push spent the
// pushed tokens: spentSince takes that share of them, in proportion to
// time (counting every one would replace the assignment early and lose
// its unspent tokens). The window's used count takes them all, so what a
// disconnect returns is never more than what was left unspent.
func (s *Service) spentSince(b *bucket, allowed int64, u *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage, now int64) int64 {
	if b.pushed == 0 {
		return allowed
	}
	after := now - b.pushed
	b.pushed = 0
	el := u.GetTimeElapsed().AsDuration().Nanoseconds()
	if el <= 0 || after >= el {
		return allowed
	}
	return allowed * after / el
}

// stream is the state of one Envoy's stream.
type stream struct {
	domain  string
	buckets map[string]*bucket
	scratch []byte
	changed bool // credits were leased or returned since the last Sync
}

// received is one message (or the error ending the stream) read by a
// stream's reader goroutine.
type received struct {
	msg *rlqsv3.RateLimitQuotaUsageReports
	err error
}

// StreamRateLimitQuotas serves one Envoy: it reads usage reports until the
// stream ends, answering each message that needs it with one response,
// and gives back the stream's unused credits when it ends. See the package
// doc for the rules.
//
// One goroutine reads the messages; the stream's own goroutine handles
// them, and between them waits for the alarm of its buckets' window end,
// when it pushes fresh assignments (push), so it alone touches the
// stream's state and sends.
func (s *Service) StreamRateLimitQuotas(srv rlqsv3.RateLimitQuotaService_StreamRateLimitQuotasServer) error {
	s.streams.Add(1)
	st := &stream{buckets: map[string]*bucket{}}
	msgs := make(chan received)
	done := make(chan struct{})
	defer func() {
		close(done)
		s.release(st, s.opts.Now())
		s.streams.Add(-1)
	}()
	go func() {
		for {
			m, err := srv.Recv()
			select {
			case msgs <- received{m, err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var (
		armed  int64 // the instant the alarm is set for (0: none)
		fired  <-chan struct{}
		cancel = func() {}
	)
	defer func() { cancel() }()
	for {
		if at := st.nextEnd(); at != armed {
			cancel()
			fired, cancel, armed = nil, func() {}, at
			if at != 0 {
				fired, cancel = s.opts.Alarm(at)
			}
		}
		var resp *rlqsv3.RateLimitQuotaResponse
		select {
		case r := <-msgs:
			if r.err == io.EOF {
				return nil
			}
			if r.err != nil {
				return r.err
			}
			var err error
			if resp, err = s.handle(st, r.msg); err != nil {
				s.errs.Add(1)
				return err
			}
		case <-fired:
			armed = 0 // arm again, for the next window end
			if resp = s.push(st, s.opts.Now()); resp != nil {
				s.pushes.Add(1)
			}
		}
		if resp == nil {
			continue
		}
		if sy, ok := s.opts.Leaser.(Syncer); ok && st.changed {
			if err := sy.Sync(srv.Context()); err != nil {
				s.errs.Add(1)
				return status.Errorf(codes.Unavailable, "quota change not durable: %v", err)
			}
		}
		st.changed = false
		if err := srv.Send(resp); err != nil {
			return err
		}
	}
}

// nextEnd returns the earliest window end of the stream's buckets that
// would get a push (pushable), or 0.
func (st *stream) nextEnd() int64 {
	var at int64
	for _, b := range st.buckets {
		if pushable(b) && (at == 0 || b.end < at) {
			at = b.end
		}
	}
	return at
}

// pushable reports whether b gets fresh assignments at its window's end:
// a limited bucket with a lease in the window whose last report carried
// requests. An idle bucket waits for its next report, so windows are not
// leased for an Envoy with nothing to admit.
func pushable(b *bucket) bool { return b.kind == kindLimited && b.end != 0 && b.want > 0 }

// push is the window's start for a stream: each pushable bucket whose
// window has ended gets an assignment leased from the new window, sized by
// its last reported demand, so its Envoy admits from the window's first
// request instead of waiting for its next report. It returns nil when no
// bucket is due (an alarm ahead of a clock moved by hand).
func (s *Service) push(st *stream, now int64) *rlqsv3.RateLimitQuotaResponse {
	var actions []*rlqsv3.RateLimitQuotaResponse_BucketAction
	for _, b := range st.buckets {
		if !pushable(b) || now < b.end {
			continue
		}
		b.end, b.resetAt, b.held, b.used, b.tokens, b.spent = 0, 0, 0, 0, 0, 0
		a, err := s.assign(st, b, b.want, now)
		b.pushed = now
		if err != nil {
			// The Leaser failed: the bucket waits for its next report,
			// which reports the failure.
			b.want = 0
			continue
		}
		actions = append(actions, a)
	}
	if len(actions) == 0 {
		return nil
	}
	return &rlqsv3.RateLimitQuotaResponse{BucketAction: actions}
}

// handle processes one message and returns the response to send (nil if
// none).
func (s *Service) handle(st *stream, msg *rlqsv3.RateLimitQuotaUsageReports) (*rlqsv3.RateLimitQuotaResponse, error) {
	if d := msg.GetDomain(); st.domain == "" {
		if d == "" {
			return nil, status.Error(codes.InvalidArgument, "the first usage report must name the domain")
		}
		st.domain = d
	} else if d != "" && d != st.domain {
		return nil, status.Errorf(codes.InvalidArgument, "domain %q differs from the stream's %q; open a new stream", d, st.domain)
	}
	usages := msg.GetBucketQuotaUsages()
	if len(usages) == 0 {
		return nil, status.Error(codes.InvalidArgument, "bucket_quota_usages must not be empty")
	}
	now := s.opts.Now()
	set := s.opts.Policies.Current()
	var actions []*rlqsv3.RateLimitQuotaResponse_BucketAction
	for _, u := range usages {
		if u.GetTimeElapsed() != nil && (u.GetTimeElapsed().CheckValid() != nil || u.GetTimeElapsed().AsDuration() < 0) {
			return nil, status.Error(codes.InvalidArgument, "time_elapsed must be a valid, non-negative duration")
		}
		b, err := s.bucketOf(st, set, u.GetBucketId(), now)
		if err != nil {
			return nil, err
		}
		if s.idle(b, u, now) {
			actions = append(actions, s.abandon(st, b, now))
			st.changed = true
			continue
		}
		a, err := s.report(st, b, u, now)
		if err != nil {
			return nil, err
		}
		if a != nil {
			actions = append(actions, a)
		}
	}
	if len(actions) == 0 {
		return nil, nil
	}
	return &rlqsv3.RateLimitQuotaResponse{BucketAction: actions}, nil
}

// bucketOf finds or creates the stream's bucket for id, resolving its rule
// in set; a bucket whose rule changed with a reload is resolved again.
func (s *Service) bucketOf(st *stream, set *policy.Set, id *rlqsv3.BucketId, now int64) (*bucket, error) {
	m := id.GetBucket()
	if len(m) == 0 {
		return nil, status.Error(codes.InvalidArgument, "bucket_id must have at least one key")
	}
	if len(m) > s.opts.MaxEntries {
		return nil, status.Errorf(codes.InvalidArgument, "bucket_id has %d keys, more than the %d allowed", len(m), s.opts.MaxEntries)
	}
	entries := make([]policy.Entry, 0, len(m))
	for k, v := range m {
		if k == "" {
			return nil, status.Error(codes.InvalidArgument, "bucket_id has an empty key")
		}
		entries = append(entries, policy.Entry{Key: k, Value: v})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Key < entries[j].Key })
	st.scratch = appendCanonical(st.scratch[:0], entries)
	b := st.buckets[string(st.scratch)]
	if b != nil && b.set == set {
		return b, nil
	}
	rule, ordered := match(set, st.domain, entries)
	kind, key, lim, err := spec(rule, ordered)
	if err != nil {
		return nil, err
	}
	if b != nil && b.kind == kind && b.key == key && b.lim == lim {
		b.set, b.rule = set, rule // a reload that left the limit alone keeps the lease
		return b, nil
	}
	if b == nil {
		if len(st.buckets) >= s.opts.MaxBuckets {
			return nil, status.Errorf(codes.ResourceExhausted, "more than %d buckets on one stream", s.opts.MaxBuckets)
		}
		b = &bucket{id: id, canon: string(st.scratch), lastUse: now}
		st.buckets[b.canon] = b
	} else {
		// The limit changed: start again under the new one. The old
		// lease stays spent until its window ends, since the Envoy goes
		// on spending its bucket until the new assignment reaches it.
		s.unsubscribe(b)
	}
	*b = bucket{id: b.id, canon: b.canon, entries: ordered, lastUse: b.lastUse, set: set, rule: rule, kind: kind, key: key, lim: lim}
	if kind == kindLimited {
		s.mu.Lock()
		s.active[key]++
		s.mu.Unlock()
		s.buckets.Add(1)
	}
	return b, nil
}

// MaxPermutedKeys is the largest bucket id whose key orders are all tried
// against the policy tree; a larger id is matched in sorted key order
// only.
const MaxPermutedKeys = 5

// match finds the rule of a bucket id. A bucket id is a map, so its keys
// have no order, while a descriptor's entries do: match tries the keys in
// sorted order first and then every other order in lexicographic order of
// the permutations, and takes the first that a rule matches. It returns
// the entries in the order that matched (sorted if none did).
func match(set *policy.Set, domain string, sorted []policy.Entry) (*policy.Rule, []policy.Entry) {
	if r := set.Match(domain, sorted); r != nil || len(sorted) < 2 || len(sorted) > MaxPermutedKeys {
		return r, sorted
	}
	perm := append([]policy.Entry(nil), sorted...)
	for nextPermutation(perm) {
		if r := set.Match(domain, perm); r != nil {
			return r, perm
		}
	}
	return nil, sorted
}

// nextPermutation rearranges p into the next permutation in lexicographic
// order of keys and reports false after the last one.
func nextPermutation(p []policy.Entry) bool {
	i := len(p) - 2
	for i >= 0 && p[i].Key >= p[i+1].Key {
		i--
	}
	if i < 0 {
		return false
	}
	j := len(p) - 1
	for p[j].Key <= p[i].Key {
		j--
	}
	p[i], p[j] = p[j], p[i]
	for l, r := i+1, len(p)-1; l < r; l, r = l+1, r-1 {
		p[l], p[r] = p[r], p[l]
	}
	return true
}

// appendCanonical writes the sorted pairs as a map key: each string
// length-prefixed, so no two ids share one.
func appendCanonical(dst []byte, entries []policy.Entry) []byte {
	for _, e := range entries {
		dst = strconv.AppendInt(dst, int64(len(e.Key)), 10)
		dst = append(dst, ':')
		dst = append(dst, e.Key...)
		dst = strconv.AppendInt(dst, int64(len(e.Value)), 10)
		dst = append(dst, ':')
		dst = append(dst, e.Value...)
	}
	return dst
}

// leaseSuffix marks the fixed-window counter RLQS keeps for a rule of
// another algorithm, apart from the counter the rule's own checks use.
const leaseSuffix = "+lease"

// spec is what rule makes of a bucket with entries: its kind and, for a
// limited bucket, its counter key and fixed-window limit.
func spec(rule *policy.Rule, entries []policy.Entry) (bucketKind, string, engine.Limit, error) {
	switch {
	case rule == nil:
		return kindUnknown, "", engine.Limit{}, nil
	case rule.Unlimited || rule.ShadowMode:
		return kindAllow, "", engine.Limit{}, nil
	case rule.Block:
		return kindDeny, "", engine.Limit{}, nil
	}
	key := rule.AppendKey(nil, entries)
	lim := rule.Limit
	if rule.Algorithm != engine.KindFixed {
		var err error
		if lim, err = engine.NewLimit(engine.KindFixed, int64(rule.RequestsPerUnit), int64(rule.Period), 0); err != nil {
			return 0, "", lim, status.Errorf(codes.FailedPrecondition, "rule %s: %v", rule, err)
		}
		key = append(key, leaseSuffix...)
	}
	return kindLimited, string(key), lim, nil
}

// report applies one bucket usage report and returns the action to send.
func (s *Service) report(st *stream, b *bucket, u *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage, now int64) (*rlqsv3.RateLimitQuotaResponse_BucketAction, error) {
	allowed := int64(min(u.GetNumRequestsAllowed(), math.MaxInt32))
	denied := int64(min(u.GetNumRequestsDenied(), math.MaxInt32))
	s.reports.Add(1)
	s.allowed.Add(allowed)
	s.denied.Add(denied)
	if allowed+denied > 0 {
		b.lastUse = now
	}
	switch b.kind {
	case kindUnknown:
		switch s.opts.Unknown {
		case UnknownDeny:
			return s.blanket(b, typev3.RateLimitStrategy_DENY_ALL, int64(s.opts.BlanketTTL)), nil
		case UnknownNoAssignment:
			return nil, nil
		}
		return s.blanket(b, typev3.RateLimitStrategy_ALLOW_ALL, int64(s.opts.BlanketTTL)), nil
	case kindAllow:
		return s.blanket(b, typev3.RateLimitStrategy_ALLOW_ALL, int64(s.opts.BlanketTTL)), nil
	case kindDeny:
		return s.blanket(b, typev3.RateLimitStrategy_DENY_ALL, int64(s.opts.BlanketTTL)), nil
	}

	if now >= b.end {
		// A new window: the last assignment expired at the old window's
		// end, and the reported requests belong to the old window.
		b.end, b.resetAt, b.held, b.used, b.tokens, b.spent = 0, 0, 0, 0, 0, 0
	} else {
		b.used += allowed
		b.spent += s.spentSince(b, allowed, u, now)
	}
	want := int64(math.Ceil(float64(allowed+denied) * (1 + s.opts.Headroom)))
	b.want = 0
	if allowed+denied > 0 {
		b.want = min(want, math.MaxUint32)
	}
	switch {
	case allowed+denied == 0 && b.tokens == 0:
		want = math.MaxUint32 // nothing known yet: the fair share
	case want < 1:
		want = 1
	}
	if b.tokens > 0 && b.tokens-b.spent >= want {
		return s.tokenBucket(b, now), nil // enough left: the same assignment again
	}
	return s.assign(st, b, want, now)
}

// assign leases a fresh assignment of up to want credits for b from the
// window that holds now, and returns it (or DENY_ALL until the window's
// end when nothing is left, or what is left of the active one).
func (s *Service) assign(st *stream, b *bucket, want, now int64) (*rlqsv3.RateLimitQuotaResponse_BucketAction, error) {
	// Size a fresh lease: the demand, capped by a fair share of the
	// window: an equal part of the limit less what this stream holds, or
	// an equal part of what remains, whichever is larger.
	s.mu.Lock()
	n := max(s.active[b.key], 1)
	s.mu.Unlock()
	peek, err := s.opts.Leaser.Lease([]byte(b.key), b.lim, now, 0)
	if err != nil {
		return nil, status.Errorf(codes.Unavailable, "lease failed: %v", err)
	}
	share := max((b.lim.Limit+n-1)/n-b.held, (peek.Remaining+n-1)/n)
	batch := min(want, share, math.MaxUint32)
	var d engine.Decision
	if batch > 0 {
		if d, err = s.opts.Leaser.Lease([]byte(b.key), b.lim, now, batch); err != nil {
			return nil, status.Errorf(codes.Unavailable, "lease failed: %v", err)
		}
	} else {
		d = peek
	}
	if b.end == 0 {
		b.end, b.resetAt = b.rule.WindowEnd(now), d.ResetAt
	}
	if d.Allowed == 0 {
		if b.tokens > 0 {
			return s.tokenBucket(b, now), nil // keep what is left of it
		}
		return s.blanket(b, typev3.RateLimitStrategy_DENY_ALL, b.end-now), nil
	}
	st.changed = true
	s.leased.Add(d.Allowed)
	b.held += d.Allowed
	b.tokens, b.spent = d.Allowed, 0
	b.gen++
	s.assignments.Add(1)
	return s.tokenBucket(b, now), nil
}

// tokenBucket is the bucket's active assignment: a token bucket holding
// b.tokens that expires at the window's end and cannot refill a single
// token before then (see the package doc).
func (s *Service) tokenBucket(b *bucket, now int64) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	fill := 2*int64(b.lim.Period) + (b.gen%2)*int64(time.Millisecond)
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId: b.id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(time.Duration(b.end - now)),
				RateLimitStrategy: &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_TokenBucket{
					TokenBucket: &typev3.TokenBucket{
						MaxTokens:     uint32(b.tokens),
						TokensPerFill: wrapperspb.UInt32(1),
						FillInterval:  durationpb.New(time.Duration(fill)),
					},
				}},
			},
		},
	}
}

// blanket is an ALLOW_ALL or DENY_ALL assignment living ttl ns.
func (s *Service) blanket(b *bucket, rule typev3.RateLimitStrategy_BlanketRule, ttl int64) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	s.blankets.Add(1)
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId: b.id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction_{
			QuotaAssignmentAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_QuotaAssignmentAction{
				AssignmentTimeToLive: durationpb.New(time.Duration(ttl)),
				RateLimitStrategy:    &typev3.RateLimitStrategy{Strategy: &typev3.RateLimitStrategy_BlanketRule_{BlanketRule: rule}},
			},
		},
	}
}

// idle reports whether the bucket has reported no requests for
// AbandonAfter, this report included.
func (s *Service) idle(b *bucket, u *rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage, now int64) bool {
	return s.opts.AbandonAfter > 0 && u.GetNumRequestsAllowed() == 0 && u.GetNumRequestsDenied() == 0 &&
		now-b.lastUse >= int64(s.opts.AbandonAfter)
}

// abandon forgets an idle bucket, gives back its credits and returns the
// abandon action that tells Envoy to forget it too.
func (s *Service) abandon(st *stream, b *bucket, now int64) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	s.releaseBucket(b, now)
	delete(st.buckets, b.canon)
	s.abandoned.Add(1)
	return &rlqsv3.RateLimitQuotaResponse_BucketAction{
		BucketId: b.id,
		BucketAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction_{
			AbandonAction: &rlqsv3.RateLimitQuotaResponse_BucketAction_AbandonAction{},
		},
	}
}

// release forgets every bucket of an ending stream.
func (s *Service) release(st *stream, now int64) {
	for k, b := range st.buckets {
		if !s.opts.HoldOnDisconnect {
			s.releaseBucket(b, now)
		} else {
			s.unsubscribe(b)
		}
		delete(st.buckets, k)
	}
}

// releaseBucket gives back the bucket's credits of the current window that
// its Envoy has not reported as spent, and unsubscribes it.
func (s *Service) releaseBucket(b *bucket, now int64) {
	if b.kind == kindLimited && now < b.end {
		if unused := b.held - b.used; unused > 0 {
			if n, err := s.opts.Leaser.Return([]byte(b.key), now, unused, b.resetAt); err == nil {
				s.returned.Add(n)
			}
		}
	}
	s.unsubscribe(b)
}

// unsubscribe removes a limited bucket from its key's stream count.
func (s *Service) unsubscribe(b *bucket) {
	if b.kind != kindLimited {
		return
	}
	s.mu.Lock()
	if s.active[b.key]--; s.active[b.key] <= 0 {
		delete(s.active, b.key)
	}
	s.mu.Unlock()
	s.buckets.Add(-1)
	b.kind = kindUnknown
}
