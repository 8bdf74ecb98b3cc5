package server

import (
	"bytes"
	"errors"
	"path/filepath"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/policy"
)

// Named policies over RESP: THROTTLE.CHECK, PEEK and LEASE take
// "POLICY domain/name" in place of "limit period [ALGO a] [BURST n]", and
// THROTTLE.POLICIES lists what is loaded. The policies are those of the
// --policies file or directory (package policy, envoyproxy/ratelimit's
// format), the same Set the gRPC front answers Envoy from; name is a
// rate_limit's name in that domain (policy.Set.Lookup). The counter is the
// command's key, so a RESP client chooses what it counts (a user, an API
// key) and takes the limit from the central file. The policy set is read
// once per command (one atomic load), so a reload applies to the next
// command and never to half of one. With an upstream (--upstream), a
// rule's per-descriptor mode (strict, cached-deny, leased) decides how
// THROTTLE.CHECK with POLICY serves the key, before the
// --upstream-mode-prefix table; without one it is ignored.

// Backend returns the core the server runs every operation on, so that
// another front (the gRPC front) shares its counters.
func (s *Server) Backend() limits.Backend { return s.core }

// policyArg reports whether a limit-taking command names a policy:
// "key POLICY domain/name ...".
func policyArg(args [][]byte) bool { return len(args) >= 4 && equalFold(args[2], "policy") }

// policyRule resolves args[3], "domain/name", to its rule. It appends the
// error reply and returns nil when no policies are loaded, the argument is
// malformed, or the policy is unknown or ambiguous. Every such reply starts
// with "ERR unknown policy" or "ERR no policies", stable prefixes.
func (l *loop) policyRule(args [][]byte) *policy.Rule {
	if l.srv.cfg.Policies == nil {
		l.errorReply("ERR", "no policies loaded (start the server with --policies)")
		return nil
	}
	arg := args[3]
	i := bytes.IndexByte(arg, '/')
	if i <= 0 || i == len(arg)-1 {
		l.errQuoted("unknown policy ", arg, 128, ": POLICY takes domain/name")
		return nil
	}
	r, err := l.srv.cfg.Policies.Current().Lookup(string(arg[:i]), string(arg[i+1:]))
	switch {
	case errors.Is(err, policy.ErrAmbiguousName):
		l.errQuoted("unknown policy ", arg, 128, ": several rules of the domain share the name")
		return nil
	case err != nil:
		l.errQuoted("unknown policy ", arg, 128, "")
		return nil
	}
	return r
}

// policyCost parses the options after "POLICY domain/name" (args[4:]):
// only COST, since the policy fixes the algorithm, limit and burst.
func (l *loop) policyCost(args [][]byte) (int64, bool) {
	cost := int64(1)
	for i := 4; i < len(args); i += 2 {
		if !equalFold(args[i], "cost") {
			l.errQuoted("unknown option ", args[i], 64, " with POLICY: it takes only COST")
			return 0, false
		}
		if i+1 >= len(args) {
			l.errorReply("ERR", "syntax error: option without a value")
			return 0, false
		}
		var ok bool
		if cost, ok = l.intArg(args[i+1], "cost"); !ok {
			return 0, false
		}
	}
	return cost, true
}

// policyFixed answers a rule that keeps no counter: unlimited (always
// allowed; limit and remaining -1) or requests_per_unit 0 (always denied
// until the end of the rule's window).
func (l *loop) policyFixed(cl *client, r *policy.Rule, now int64, first string) {
	var d engine.Decision
	if r.Unlimited {
		d = engine.Decision{Allowed: 1, Limit: -1, Remaining: -1}
	} else {
		end := r.WindowEnd(now)
		d = engine.Decision{ResetAt: (end + 999_999) / 1_000_000, RetryAfter: (end - now + 999_999) / 1_000_000}
	}
	l.decision(cl, &d, first)
}

// policyCall checks the arguments common to THROTTLE.CHECK and PEEK with
// POLICY (the key, the policy, COST) and returns the rule and the cost; on
// bad input it replies with the error and returns ok false.
func (l *loop) policyCall(args [][]byte) (r *policy.Rule, cost int64, ok bool) {
	if !l.keyArg(args[1]) {
		return nil, 0, false
	}
	if r = l.policyRule(args); r == nil {
		return nil, 0, false
	}
	cost, ok = l.policyCost(args)
	return r, cost, ok
}

// THROTTLE.CHECK key POLICY domain/name [COST n], or THROTTLE.CHECK as
// before (throttleCheckAdmit).
func (l *loop) throttleCheckAny(cl *client, args [][]byte, now int64) result {
	if !policyArg(args) {
		return l.throttleCheckAdmit(cl, args, now)
	}
	r, cost, ok := l.policyCall(args)
	if !ok {
		return failed
	}
	if r.Unlimited || r.Block {
		if r.Block {
			l.ctr.denied++
		} else {
			l.ctr.allowed++
		}
		l.policyFixed(cl, r, now, "allowed")
		return replied
	}
	l.op.Kind, l.op.Key, l.op.Limit, l.op.Cost = limits.OpCheck, args[1], r.Limit, cost
	if l.deferOp(cl, now) {
		return replied // answered with the checks around it: batch.go
	}
	// The rule's mode is the upstream's hint (limits.Op.Mode); the
	// loop's Op is reused, so it is cleared for the next command.
	l.op.Mode = r.Mode.OpMode()
	op, ok := l.runOp(cl, now, checkReply)
	l.op.Mode = limits.ModeDefault
	if !ok {
		return replied // parked: park.go
	}
	return l.checkReply(cl, op)
}

// THROTTLE.PEEK key POLICY domain/name [COST n], or THROTTLE.PEEK as
// before.
func (l *loop) throttlePeekAny(cl *client, args [][]byte, now int64) result {
	if !policyArg(args) {
		return l.throttlePeek(cl, args, now)
	}
	r, cost, ok := l.policyCall(args)
	if !ok {
		return failed
	}
	if r.Unlimited || r.Block {
		l.policyFixed(cl, r, now, "allowed")
		return replied
	}
	if l.srv.upstream { // park.go
		l.op.Kind, l.op.Key, l.op.Limit, l.op.Cost = limits.OpPeek, args[1], r.Limit, cost
		if op, ok := l.upstreamOp(cl, now, peekReply); ok {
			peekReply(l, cl, op)
		}
		return replied
	}
	d, err := l.srv.core.Peek(args[1], &r.Limit, cost, now, l.sec())
	if err != nil {
		l.engineError(err)
		return failed
	}
	l.decision(cl, &d, "allowed")
	return replied
}

// THROTTLE.LEASE key POLICY domain/name BATCH n, or THROTTLE.LEASE as
// before. A lease draws on a fixed window, so the policy's algorithm must
// be fixed (envoyproxy/ratelimit's, the format's default).
func (l *loop) throttleLeaseAny(cl *client, args [][]byte, now int64) result {
	if !policyArg(args) {
		return l.throttleLease(cl, args, now)
	}
	if !l.keyArg(args[1]) {
		return failed
	}
	r := l.policyRule(args)
	if r == nil {
		return failed
	}
	if len(args) != 6 || !equalFold(args[4], "batch") {
		l.errorReply("ERR", "syntax error: THROTTLE.LEASE key POLICY domain/name BATCH n")
		return failed
	}
	batch, ok := l.intArg(args[5], "batch")
	if !ok {
		return failed
	}
	if batch <= 0 {
		l.errorReply("ERR", "batch must be positive")
		return failed
	}
	if r.Unlimited || r.Block || r.Algorithm != engine.KindFixed {
		l.errQuoted("policy ", args[3], 128, " is not a fixed window: THROTTLE.LEASE needs one")
		return failed
	}
	l.op.Kind, l.op.Key, l.op.Limit, l.op.Cost = limits.OpLease, args[1], r.Limit, batch
	op, ok := l.runOp(cl, now, leaseReply)
	if !ok {
		return replied // parked: park.go
	}
	return l.leaseReply(cl, op)
}

// policyFields is the number of fields of one THROTTLE.POLICIES entry.
const policyFields = 11

// THROTTLE.POLICIES [domain]: every loaded rule (of one domain, if given),
// sorted by domain and descriptor path; each a map in RESP3 (a flat
// field/value array in RESP2) of domain, name ("" for a rule without one:
// Envoy can use it, POLICY cannot name it), path (the descriptor path, as
// the statistics name it), algorithm, limit (requests_per_unit), period_ms,
// burst (0: the limit), unlimited, blocked and shadow_mode (0 or 1), and
// file (the name of the file it came from: files of a policy directory are
// not nested, so the name is enough, and the reply does not depend on
// where the files are mounted). Without --policies the reply is an empty array.
func (l *loop) throttlePolicies(cl *client, args [][]byte, _ int64) result {
	if len(args) > 2 {
		l.errorReply("ERR", "wrong number of arguments for 'throttle.policies' command")
		return failed
	}
	var rules []*policy.Rule
	if p := l.srv.cfg.Policies; p != nil {
		for _, r := range p.Current().Rules() {
			if len(args) < 2 || string(args[1]) == r.Domain {
				rules = append(rules, r)
			}
		}
	}
	l.out = appendArray(l.out, len(rules))
	b := func(v bool) int64 {
		if v {
			return 1
		}
		return 0
	}
	for _, r := range rules {
		l.out = appendMap(l.out, policyFields, cl.resp3)
		l.out = appendBulkString(l.out, "domain")
		l.out = appendBulkString(l.out, r.Domain)
		l.out = appendBulkString(l.out, "name")
		l.out = appendBulkString(l.out, r.Name)
		l.out = appendBulkString(l.out, "path")
		l.out = appendBulkString(l.out, r.Path)
		l.out = appendBulkString(l.out, "algorithm")
		l.out = appendBulkString(l.out, r.Algorithm.String())
		l.out = appendBulkString(l.out, "limit")
		l.out = appendInt(l.out, int64(r.RequestsPerUnit))
		l.out = appendBulkString(l.out, "period_ms")
		l.out = appendInt(l.out, r.Period.Milliseconds())
		l.out = appendBulkString(l.out, "burst")
		l.out = appendInt(l.out, r.Burst)
		l.out = appendBulkString(l.out, "unlimited")
		l.out = appendInt(l.out, b(r.Unlimited))
		l.out = appendBulkString(l.out, "blocked")
		l.out = appendInt(l.out, b(r.Block))
		l.out = appendBulkString(l.out, "shadow_mode")
		l.out = appendInt(l.out, b(r.ShadowMode))
		l.out = appendBulkString(l.out, "file")
		l.out = appendBulkString(l.out, filepath.Base(r.File))
	}
	return replied
}

// writeGRPCInfo writes INFO's grpc section: the lines Config.GRPCInfo
// gives (whether the gRPC listener is on, its address, requests and
// errors, the policies loaded and the last reload's status), or
// grpc_enabled:0 and policies_loaded:0 without it.
func (s *Server) writeGRPCInfo(kv func(string, any)) {
	if s.cfg.GRPCInfo == nil {
		kv("grpc_enabled", 0)
		kv("policies_loaded", 0)
		return
	}
	for _, p := range s.cfg.GRPCInfo() {
		kv(p[0], p[1])
	}
}
