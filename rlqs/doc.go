// Package rlqs is the Envoy Rate Limit Quota Service (RLQS):
// envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas.
// Every Envoy keeps one stream open, reports how many requests each of its
// buckets admitted and denied, and receives quota assignments. The service
// splits one global limit among any number of Envoys: each assignment is
// backed by a lease from the bucket's fixed window (engine.Limit.Lease)
// and expires at that window's end, so the Envoys together admit at most
// the limit per window.
//
//	svc, err := rlqs.New(rlqs.Options{Policies: store, Leaser: leaser, Now: clock.Now})
//	g := grpc.NewServer()
//	svc.Register(g)
//	g.Serve(listener)
//
// # Bucket ids and policies
//
// The first message of a stream names the domain; later messages may
// repeat it but not change it. A bucket id (a map of strings) becomes a
// request descriptor of that domain, matched through the same policy file
// as the RLS service (package policy). A map has no order, a descriptor
// does: the keys are tried in sorted order first, then, for ids of up to
// MaxPermutedKeys keys, in every other order, and the first order that a
// rule matches wins (so {route: x, tenant: acme} finds the nested
// descriptor tenant -> route). The rule decides the assignment:
//
//   - no rule (unknown domain, no matching descriptor): Options.Unknown,
//     by default ALLOW_ALL, as envoyproxy/ratelimit answers OK for a
//     descriptor that matches nothing; DENY_ALL, or no assignment at all
//     (Envoy keeps its no_assignment_behavior), on request;
//   - unlimited, or shadow_mode (Envoy has no shadow mode for a bucket):
//     ALLOW_ALL; requests_per_unit 0: DENY_ALL. Blanket assignments live
//     Options.BlanketTTL and are sent again on every report, which
//     extends them;
//   - any other rule: a token bucket leased from the rule's window. A
//     fixed-window rule leases from the counter its RLS checks and
//     THROTTLE.CHECK use (policy.Rule.AppendKey), so RLS requests and RLQS
//     assignments draw on one budget. A rule of another algorithm leases
//     from a fixed window of the same requests_per_unit and period kept
//     under that key plus "+lease", apart from its own state.
//
// A policy reload that leaves a bucket's key and limit alone keeps its
// lease; one that changes them starts again under the new rule at the next
// report. The old lease is not returned: the Envoy goes on spending its
// bucket until the new assignment reaches it.
//
// # Assignments
//
// Envoy's rate_limit_quota filter enforces token_bucket and blanket_rule
// assignments; it does not implement requests_per_time_unit (it lets every
// request through and logs a warning), so limited buckets get a token
// bucket. Envoy builds a new bucket, full with max_tokens, when an
// assignment's strategy differs from the active one, and keeps the
// active bucket (only extending its time to live) when it is the same; the
// bucket refills continuously at tokens_per_fill per fill_interval.
//
// The service sends max_tokens = the credits just leased, tokens_per_fill
// 1, fill_interval twice the window (plus 1 ms on every other fresh
// lease), and assignment_time_to_live = the time left in the window. The
// refill within one window is then less than one token, so a bucket admits
// at most max_tokens; the alternating fill_interval makes each fresh lease
// a different strategy, so Envoy installs a full bucket for it, while an
// assignment sent again without a new lease is identical, so Envoy keeps
// its partly spent bucket.
//
// On each report of a limited bucket, with demand = allowed + denied in
// the report:
//
//  1. If the window changed since the bucket's last lease, its counts
//     start again (the last assignment expired with the old window).
//  2. want = demand × (1 + Options.Headroom), rounded up; with no
//     assignment in the window and no demand reported yet, the fair share.
//  3. If the active assignment still has want tokens by the server's
//     count (max_tokens less the allowed requests reported since it was
//     sent), the same assignment is sent again.
//  4. Otherwise the service leases min(want, fair share), the fair share
//     being the larger of an equal part of the limit less what this
//     stream already holds in the window, and an equal part of what
//     remains, the parts counted over the streams subscribed to the
//     bucket's counter. Credits granted: a fresh assignment. None: the
//     active assignment again if there is one, else DENY_ALL until the
//     window's end.
//
// # Pushes at a window's start
//
// An Envoy reports on its own interval, so without help its assignment
// expires at the window's end and it denies until its first report in the
// next window. Instead, each stream keeps one alarm (Options.Alarm: a
// timer on the service's clock) for the earliest window end of its
// buckets; when it fires, every limited bucket whose window ended and
// whose last report carried requests gets a fresh assignment leased from
// the new window, sized by that report's demand (step 2, then step 4), in
// one response sent before any report of the window. A bucket whose last
// report was empty waits for its next report, so a window is not leased
// for an Envoy with nothing to admit. The first report after a push spans
// the window's start: its allowed requests all count as used in the new
// window (what a disconnect returns is never more than was left unspent),
// but only their share after the push, in proportion to time, counts as
// spent from the pushed assignment (step 3), so the assignment is not
// replaced early. A push is a lease like any other, so the bound below
// holds unchanged.
//
// # The bound, and what it assumes
//
// Every token an Envoy can spend in window W belongs to a bucket installed
// by an assignment whose max_tokens were leased from W's budget before the
// assignment was sent, and the assignment expires at W's end. Lease never
// grants more than the window has left, so the tokens of all assignments
// of W, over all Envoys, are at most the limit plus the credits given back
// in W; and credits are given back only when the server believes them
// unspent. Hence no window admits more than the limit, given that:
//
//   - Envoy's no_assignment_behavior and expired_assignment_behavior deny
//     (fallback_rate_limit with blanket_rule DENY_ALL): between a window's
//     end and the first assignment of the next, an Envoy that allows
//     everything admits requests no lease covers;
//   - the windows are those of the server's clock shifted by the delay of
//     the assignment: Envoy counts the time to live from when it receives
//     the assignment;
//   - an Envoy whose stream ended admits nothing more under its old
//     assignments, and its last report counted what it admitted. When a
//     stream ends the service returns (engine.Return) the credits the
//     stream leased in the current window less the requests it reported
//     as allowed, so the others get them at their next report; requests
//     admitted after the last report are not known to the server. That
//     holds for an Envoy that went away; where an Envoy may keep enforcing
//     a cached assignment after its stream broke, set
//     Options.HoldOnDisconnect: the credits then stay held until the
//     window closes, and the share flows to the others from the next
//     window, where the fair share counts one stream fewer. An abandoned
//     bucket's credits are returned too: it reported no request for
//     AbandonAfter, and Envoy erases it when the abandon_action arrives.
//
// TestEightEnvoysShareOneBucket shows it: eight simulated Envoys following
// these rules, four with demand far above their share and four below it,
// reporting at staggered offsets, against one bucket of 1000 per second
// for six windows. No window admits more than 1000 and no request spends
// tokens of an earlier window (the last two windows are calm, so buckets
// still hold tokens when their window ends); one Envoy disconnects in the
// third window and the seven others are assigned more than seven eighths
// of the limit in the next. At each window's start the Envoys whose last
// report carried requests receive a push, and each admits its first
// request of the window before its first report in it.
//
// # Abandoning buckets
//
// Envoy reports each of its buckets on every reporting interval. A bucket
// whose reports show no request for Options.AbandonAfter is answered with
// abandon_action: Envoy forgets it, the service forgets it and returns its
// unspent credits. A later report of the same id subscribes it again.
//
// # Errors
//
// A first message without a domain, a change of domain, a message without
// usages, a bucket id that is empty, has an empty key or more than
// MaxEntries keys, or a negative time_elapsed ends the stream with
// InvalidArgument; more than MaxBuckets buckets on one stream with
// ResourceExhausted; a rule whose rate makes no fixed window (another
// algorithm's rule, see above) with FailedPrecondition; a Leaser failure
// (a counter holding another algorithm's state) with Unavailable. The stream's
// credits are returned as on any other end.
//
// # Statistics
//
// Stats gives the counters, and Service.Metrics the same in Prometheus
// form: rlqs_streams and rlqs_buckets (open now), rlqs_reports_total,
// rlqs_assignments_total (token buckets, each a fresh lease),
// rlqs_blanket_assignments_total, rlqs_abandoned_total,
// rlqs_leased_credits_total, rlqs_returned_credits_total,
// rlqs_requests_allowed_total and rlqs_requests_denied_total (as the
// Envoys report them: their ratio is the share admitted) and
// rlqs_stream_errors_total.
//
// # Costs
//
// A replaced token bucket's unspent tokens are lost to the window: Envoy
// discards them, and the server cannot tell how many requests in flight
// took some. Step 3 replaces a bucket only once its count runs below one
// interval's demand, so the loss per replacement is at most about one
// reporting interval's demand; what a stream holds unspent comes back when
// it ends. A push adds one lease per active bucket and window, and with it
// one more replaced assignment, whose unspent tokens are lost: where
// demand is far above the limit that costs some utilisation, traded for
// admitting from the window's start (TestEightEnvoysShareOneBucket logs
// each window's utilisation). An idle bucket gets no push:
// between a window's start and its Envoy's first report it has no
// assignment and the Envoy denies (its expired assignment behaviour).
// Per stream, the alarm is armed again only when its earliest window end
// changes: one timer per window, plus a reader goroutine for the
// stream's messages.
// Per report of a bucket: the id's keys copied and sorted, a map
// lookup, and, for a fresh lease, two Leaser calls (a zero-batch lease to
// see what remains, then the lease) and a mutex for the stream count;
// the response's messages; gRPC's decoding and encoding dominate
// (BenchmarkReports). Per stream: a map of its buckets, bounded by
// MaxBuckets.
package rlqs
