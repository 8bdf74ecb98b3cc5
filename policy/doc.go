// Package policy loads rate-limit policies written in envoyproxy/ratelimit's
// configuration format, finds the rule for a request descriptor exactly as
// envoyproxy/ratelimit does, names the counter each rule uses, and reloads
// the files atomically when they change. It knows nothing of gRPC or RESP:
// the RLS front (package rls) and the RESP command THROTTLE.CHECK ... POLICY
// domain/name both read a Set from a Store.
//
//	st, err := policy.Open("/etc/throttlekit/policies", policy.StoreOptions{OnReload: logIt})
//	go st.Watch(ctx)
//	set := st.Current()                         // once per request
//	if r := set.Match("messaging", entries); r != nil {
//		key = r.AppendKey(key[:0], entries)     // the counter
//		... r.Limit (an engine.Limit), r.ShadowMode, r.Unlimited, r.Block ...
//	}
//
// # The format
//
// A file holds one domain and a tree of descriptors, each with a key, an
// optional value and an optional rate_limit block; every key of
// envoyproxy/ratelimit's format loads (domain, descriptors, key, value,
// rate_limit with unit, requests_per_unit, unlimited, name and replaces,
// shadow_mode, quota_mode, detailed_metric, value_to_metric,
// share_threshold, metadata). Units are second, minute, hour, day, week,
// month and year, case-insensitive; month and year are fixed windows of 30
// and 365 days aligned on the Unix epoch, exactly as envoyproxy/ratelimit's
// UnitToDivider (src/utils/utilities.go) makes them, not calendar months.
// requests_per_unit 0, or absent, blocks every request (its README, example
// 3). A directory loads every *.yaml and *.yml file in it (not below it;
// dot files are skipped); a domain defined twice is an error, as there
// without MERGE_DOMAIN_CONFIG.
//
// Extensions, all inside the same file:
//
//   - rate_limit.algorithm: gcra, token, fixed (the default, as in
//     envoyproxy/ratelimit) or sliding, the engine's four algorithms;
//   - rate_limit.burst: the bucket size of gcra and token (default
//     requests_per_unit); refused for fixed and sliding, as THROTTLE.CHECK
//     refuses BURST there;
//   - rate_limit.period: any duration ("90s", "1h30m", "2d") instead of unit;
//   - a descriptor's mode: strict, cached-deny or leased, how the rule is
//     enforced once an upstream cluster is configured; loaded and validated
//     here, passed with each check as the operation's hint
//     (Mode.OpMode, limits.Op.Mode) and applied by the upstream tier,
//     before its --upstream-mode-prefix table; ignored without an upstream.
//
// The loader is stricter than envoyproxy/ratelimit in one way: a key is
// accepted only where it belongs (unit inside rate_limit, shadow_mode on a
// descriptor), where envoyproxy/ratelimit accepts any known key anywhere and
// silently ignores misplaced ones. Every error names the file, the line of
// the offending YAML node and the descriptor path ("domain/key=value/key2"),
// and carries a stable Code.
//
// # Matching
//
// Match reproduces GetLimit of envoyproxy/ratelimit's
// src/config/config_impl.go, walking the tree once from the domain down,
// one level per entry of the request descriptor:
//
//  1. at each level the entry's key=value is tried first, then the
//     wildcard values of that level in file order (the first that matches
//     wins; each '*' matches any run of bytes, README example 9), then the
//     entry's key alone (a descriptor without a value matches any value,
//     examples 2 and 3);
//  2. there is no backtracking: once key=value matched, only its nested
//     descriptors are searched, never those of the key-only sibling;
//  3. a rule applies only if it sits at the depth of the last entry: a
//     request with more entries than the tree is deep, or fewer, has no
//     limit (example 4);
//  4. a descriptor without a rate_limit and without nested descriptors
//     matches but limits nothing (the README's "whitelisted").
//
// Key and value are compared separately, where envoyproxy/ratelimit
// compares the joined string "key_value"; the two differ only for keys and
// values containing '_' arranged to collide (there, key "a" value "b_c" and
// key "a_b" value "c" are one descriptor).
//
// What the service does with the rules of one request (replaces, unlimited,
// shadow mode, the global shadow switch, hits_addend) is package rls's job
// and is described there; Rule carries every flag it needs.
//
// # Counter keys
//
// A rule's counter for a request descriptor is
//
//	rls:<domain>:<key1>=<value1>:<key2>=<value2>...#<algorithm>:<window>
//
// for example rls:messaging:message_type=marketing:to_number=2061111111#fixed:24h0m0s.
// The values are the request's, so every distinct value of an any-value or
// wildcard descriptor gets its own counter (README examples 2 and 9), except
// at a level with share_threshold, whose value is replaced by the configured
// pattern so that every match shares one counter (example 11). '\', ':',
// '=' and '#' inside a domain, key or value are escaped with '\', so no
// descriptor can forge another's key. The "rls:" prefix keeps these keys
// apart from keys that clients name over RESP (a named policy used by
// THROTTLE.CHECK counts against the client's own key).
//
// The key depends on the domain, the request's entries, the algorithm and
// the window, and on nothing else, so a reload that leaves a rule alone
// leaves its counters alone, and so does a reload that only changes
// requests_per_unit or burst (the engine applies the new limit to the
// state the counter holds). A new window or algorithm starts a new counter:
// the old state would mean something else (a sliding window's state counts
// windows of the old length; another algorithm's state is of another kind).
// The old counter then expires on its own.
//
// # Reloading
//
// A Store holds the current Set behind an atomic.Pointer. Reload parses
// everything into a new Set and stores it in one atomic write, so a reader
// that takes Current once per request sees one whole set. An invalid
// change is rejected as a whole: the old Set stays, the failure counter
// (ratelimit_service_config_load_error) grows, LastError and OnReload give
// the reason. Watch uses fsnotify on the directory (a file is watched
// through its directory, which survives editors and Kubernetes replacing
// it by rename) and reloads on every event that concerns a YAML file or a
// ConfigMap's "..data" link.
//
// # Costs
//
// Match is a map lookup per level (two for a key=value level that misses
// and falls back to key-only) plus a scan of the level's wildcards when the
// exact value misses; it allocates nothing. AppendKey writes into the
// caller's buffer; MetricKey allocates only for rules with detailed_metric
// or value_to_metric, whose names depend on the request. Current is one
// atomic load. A reload parses every file again (linear in their size) on
// the watcher's goroutine and never blocks readers.
package policy
