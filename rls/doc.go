// Package rls is the Envoy rate limit service (RLS v3):
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit, with the
// gRPC health service beside it, answering from policies written in
// envoyproxy/ratelimit's configuration format (package policy) and counters
// kept by a Limiter. It is a drop-in for envoyproxy/ratelimit: same
// requests, same answers, same statistics names.
//
//	svc, err := rls.New(rls.Options{Policies: store, Limiter: lim, Now: clock.Now})
//	g := grpc.NewServer()
//	svc.Register(g)
//	g.Serve(listener)
//
// # One request
//
// The service takes the policy set once (Policies.Current), so a reload
// that lands during a request changes nothing in it, then follows
// envoyproxy/ratelimit's src/service/ratelimit.go:
//
//  1. Each descriptor finds its rule (policy.Set.Match), or, when it
//     carries Envoy's limit override and the domain is known, a fixed window
//     of the override's requests_per_unit and unit (unit_multiplier is
//     ignored, as there).
//  2. replaces: the names listed by the replaces of every matched rule of
//     the request, unlimited rules included, are collected first; then
//     every matched rule whose name is in that list is dropped, and its
//     descriptor is answered as if nothing matched (OK, no current_limit)
//     without touching its counter (README example 7).
//  3. unlimited: OK with limit_remaining 4294967295, no counter and no
//     statistics (README example 5; the code leaves unlimited rules out of
//     the statistics), even when another rule replaces it (it is set aside
//     before replaces apply).
//  4. Every other rule is checked with cost hits_addend: the descriptor's
//     own hits_addend when set (0 included), else the request's, where 0
//     means 1 (its GetHitsAddends). requests_per_unit 0 is over the limit
//     without a check (README example 3).
//  5. A descriptor over its limit is OVER_LIMIT, unless its rule has
//     shadow_mode: then its status is OK (with limit_remaining 0) and the
//     hits over the limit count as shadow_mode as well as over_limit
//     (README example 6).
//  6. overall_code is OVER_LIMIT if any descriptor that is not in quota
//     mode is, or if every quota-mode descriptor is (quota_mode, or
//     Options.QuotaMode for all); then the global shadow switch
//     (Options.ShadowMode, its SHADOW_MODE) turns an OVER_LIMIT overall
//     code into OK, counting ratelimit_service_global_shadow_mode, while
//     the statuses keep their codes.
//
// Statuses carry current_limit (requests_per_unit, unit, name; a period
// extension that is a whole number of a unit is that unit with
// unit_multiplier), limit_remaining (0 when over the limit) and
// duration_until_reset: for a fixed window the time to the end of the
// epoch-aligned window, as envoyproxy/ratelimit computes it (at ns rather
// than whole-second resolution); for gcra, token and sliding the time until
// the budget is full again.
//
// # Where it differs from envoyproxy/ratelimit
//
// Its fixed window counts with INCRBY, so a denied request still adds its
// hits to the counter; here a denied request consumes nothing (the engine
// never charges a request it refuses). Both deny every request once the
// window is spent; they differ after a large denied hits_addend, which
// there burns the rest of the window and here does not. The same rule
// explains hits_addend 0: there it answers OVER_LIMIT only once the counter
// has passed the limit; here it answers whether one more unit would pass
// (a peek). A descriptor with is_negative_hits (a refund, newer than
// envoyproxy/ratelimit) is InvalidArgument. An unknown domain counts
// ratelimit_service_domain_not_found (once per descriptor, as there)
// without a domain label, so a client cannot create series at will.
//
// # Response headers
//
// Options.RateLimitHeaders adds the IETF fields as clients/go/httplimit
// writes them, one list item per limited descriptor named by its rule's
// name (or path): RateLimit-Policy: "name";q=limit;w=window-seconds and
// RateLimit: "name";r=remaining;t=seconds-to-reset. Options.LimitHeaders
// adds envoyproxy/ratelimit's three headers (RateLimit-Limit,
// RateLimit-Remaining, RateLimit-Reset unless renamed, e.g. to the
// X-RateLimit-* names) for the descriptor it picks: the last one over the
// limit, else the one with the least remaining.
//
// Options.DynamicMetadata fills dynamic_metadata as its
// RESPONSE_DYNAMIC_METADATA does: the domain, the descriptors, hits_addend,
// and the merged metadata blocks of the rules whose descriptors passed.
//
// # Statistics
//
// Counters live in the service's metrics.Set, named as envoyproxy/ratelimit's
// Prometheus mapping names its stats:
// ratelimit_service_rate_limit_{total_hits,over_limit,near_limit,within_limit,shadow_mode}
// with labels domain and descriptor (the rule's statistics key,
// policy.Rule.MetricKey: "message_type_marketing.to_number"), split as
// its base limiter splits them: hits past the limit are over_limit, hits
// between NearLimitRatio of the limit and the limit near_limit.
// ratelimit_service_should_rate_limit_error{err_type=...} counts rejected
// requests (service_error) and Limiter failures (limiter_error; the call
// then fails with Unavailable, so Envoy applies its failure_mode_deny).
//
// # The Limiter seam
//
// Limiter is the one thing the service needs from the store: a synchronous
// check of cost units against a key under an engine.Limit. Synchronous is
// right here: gRPC runs each call on a goroutine of its own, so a Limiter
// that waits on an upstream (strict mode against a Redis Cluster) blocks
// only that call, never an event loop, and needs no callback plumbing. The
// product's Limiter is grpcfront.Limiter, which runs each check as an
// operation of the core (package limits) on the RESP server's Backend; the
// tests here use a real shard.Store and engine.
//
// # Costs
//
// Per descriptor: a policy match (a few map lookups, no allocation), a
// counter key written into a per-request buffer, one Limiter.Check, a read
// lock and a map lookup for the statistics, and the status message. Per
// request: a slice of entries and of results, the response and, when
// enabled, the header values. gRPC's own decoding and encoding dominate
// (see BenchmarkShouldRateLimit). detailed_metric and value_to_metric
// rules build their statistics key per request, and create a set of
// counters per distinct key, which envoyproxy/ratelimit does as well: keep
// them for low-cardinality values.
package rls
