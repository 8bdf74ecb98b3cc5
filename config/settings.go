package config

import (
	"crypto/tls"
	"fmt"
	"math"
	"net"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttlekit-server/grpcfront"
	"github.com/throttlekit/throttlekit-server/rls"
	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
	"github.com/throttlekit/throttlekit-server/telemetry"
)

// Defaults that no other package owns: the address of the RESP listener, the
// output-buffer limit (the server treats 0 as unlimited) and the sweep
// interval (the store sweeps at whatever interval it is given).
const (
	DefaultAddr                    = "127.0.0.1:6380"
	DefaultClientOutputBufferLimit = 128 * 1024 * 1024
	DefaultSweepInterval           = 100 * time.Millisecond

	// DefaultPersistInterval is the period of persistence flushes: in async
	// mode the bound on what a crash loses, in sync mode (where each
	// changing batch asks for its own write) only a background sweep.
	DefaultPersistInterval = 100 * time.Millisecond

	// EnvPrefix starts the name of every environment variable read by Load.
	EnvPrefix = "THROTTLEKIT_"
)

// Bounds enforced by validation that the packages using the values do not
// export. Shards are bounded by shard.MaxShards.
const (
	MinProtoMaxBulkLen = 1024 // a bulk must at least hold a key
	MaxLoops           = 1024 // event loops

	// MinClientQueryBufferLimit is the smallest client-query-buffer-limit,
	// as Redis's 1mb.
	MinClientQueryBufferLimit = 1024 * 1024
)

// settings is the table of every setting: flags, environment variables, the
// configuration file, --help, Validate and CONFIG GET all read it, so adding
// a setting is one entry here and the Config field it fills. Order is the
// order of --help.
var settings = []setting{
	{name: "addr", doc: "TCP address (host:port) for RESP clients",
		value: addrValue(func(c *Config) *string { return &c.Addr }, DefaultAddr, false),
		wire:  func(c *Config, w *Wiring) error { w.Server.Addr = c.Addr; return nil }},
	{name: "loops", doc: fmt.Sprintf("event loops, 1..%d; the default is GOMAXPROCS", MaxLoops),
		value: intValue(func(c *Config) *int { return &c.Loops }, func() int { return runtime.GOMAXPROCS(0) }, 1, MaxLoops),
		wire:  func(c *Config, w *Wiring) error { w.Server.Loops = c.Loops; return nil }},
	{name: "shards", doc: fmt.Sprintf("store shards, 0..%d; 0 = chosen from the number of CPUs", shard.MaxShards),
		value: intValue(func(c *Config) *int { return &c.Shards }, fixed(0), 0, shard.MaxShards),
		wire:  func(c *Config, w *Wiring) error { w.Store.Shards = c.Shards; return nil }},
	{name: "maxkeys", doc: fmt.Sprintf("most keys the store holds before evicting; 0 = the store's default (%d)", shard.DefaultMaxKeys),
		value: intValue(func(c *Config) *int { return &c.MaxKeys }, fixed(0), 0, math.MaxInt32),
		wire:  func(c *Config, w *Wiring) error { w.Store.MaxKeys = c.MaxKeys; return nil }},
	{name: "maxclients", doc: "most client connections open at once",
		value: intValue(func(c *Config) *int { return &c.MaxClients }, fixed(server.DefaultMaxClients), 1, math.MaxInt32),
		wire:  func(c *Config, w *Wiring) error { w.Server.MaxClients = c.MaxClients; return nil }},
	{name: "proto-max-bulk-len", doc: "largest bulk string a client may send (size: 512mb, 64kb, bytes)",
		value: sizeValue(func(c *Config) *int64 { return &c.ProtoMaxBulkLen }, server.DefaultProtoMaxBulkLen, MinProtoMaxBulkLen),
		wire:  func(c *Config, w *Wiring) error { w.Server.ProtoMaxBulkLen = c.ProtoMaxBulkLen; return nil }},
	{name: "max-args", doc: "most arguments in one command",
		value: intValue(func(c *Config) *int { return &c.MaxArgs }, fixed(server.DefaultMaxArgs), 1, math.MaxInt32),
		wire:  func(c *Config, w *Wiring) error { w.Server.MaxArgs = c.MaxArgs; return nil }},
	{name: "timeout", doc: "close a client idle this long (seconds or a duration such as 5m); 0 = never",
		value: durationValue(func(c *Config) *time.Duration { return &c.Timeout }, 0, 0, true),
		wire:  func(c *Config, w *Wiring) error { w.Server.IdleTimeout = c.Timeout; return nil }},
	{name: "client-output-buffer-limit", doc: "close a client whose unsent replies exceed this size; 0 = unlimited",
		value: sizeValue(func(c *Config) *int64 { return &c.ClientOutputBufferLimit }, DefaultClientOutputBufferLimit, 0),
		wire:  func(c *Config, w *Wiring) error { w.Server.OutputBufferLimit = c.ClientOutputBufferLimit; return nil }},
	{name: "slowlog-log-slower-than", doc: "log commands that take at least this many microseconds in SLOWLOG; 0 = every command, negative = off",
		value: intValue(func(c *Config) *int { return &c.SlowlogLogSlowerThan }, fixed(int(server.DefaultSlowlogLogSlowerThan/time.Microsecond)), math.MinInt32, math.MaxInt32),
		wire: func(c *Config, w *Wiring) error {
			w.Server.SlowlogLogSlowerThan = slowlogThreshold(c.SlowlogLogSlowerThan)
			w.Server.SlowlogLogAll = c.SlowlogLogSlowerThan == 0
			return nil
		}},
	{name: "slowlog-max-len", doc: "most entries SLOWLOG keeps; 0 = none",
		value: intValue(func(c *Config) *int { return &c.SlowlogMaxLen }, fixed(server.DefaultSlowlogMaxLen), 0, math.MaxInt32),
		wire:  func(c *Config, w *Wiring) error { w.Server.SlowlogMaxLen = serverCount(c.SlowlogMaxLen); return nil }},
	{name: "latency-monitor-threshold", doc: "sample LATENCY events (slow commands, expiry sweeps, persistence flushes) that take at least this many milliseconds; 0 = off",
		value: intValue(func(c *Config) *int { return &c.LatencyMonitorThreshold }, fixed(0), 0, math.MaxInt32),
		wire: func(c *Config, w *Wiring) error {
			w.Server.LatencyMonitorThreshold = time.Duration(c.LatencyMonitorThreshold) * time.Millisecond
			return nil
		}},
	{name: "sweep-interval", doc: "how often expired keys are reclaimed (seconds or a duration such as 100ms)",
		value: durationValue(func(c *Config) *time.Duration { return &c.SweepInterval }, DefaultSweepInterval, time.Millisecond, false)},
	{name: "requirepass", doc: "password clients must give with AUTH or HELLO; empty = none", secret: true,
		value: stringValue(func(c *Config) *string { return &c.RequirePass }, ""),
		wire:  func(c *Config, w *Wiring) error { w.Server.RequirePass = c.RequirePass; return nil }},
	{name: "aclfile", doc: `users in Redis's ACL file format, loaded at start and by ACL LOAD, written by ACL SAVE; "" = none`,
		value: stringValue(func(c *Config) *string { return &c.ACLFile }, ""),
		wire:  func(c *Config, w *Wiring) error { w.Server.ACLFile = c.ACLFile; return nil }},
	{name: "acllog-max-len", doc: "most entries ACL LOG keeps; 0 = none",
		value: intValue(func(c *Config) *int { return &c.ACLLogMaxLen }, fixed(server.DefaultACLLogMaxLen), 0, math.MaxInt32),
		wire:  func(c *Config, w *Wiring) error { w.Server.ACLLogMaxLen = serverCount(c.ACLLogMaxLen); return nil }},
	{name: "protected-mode", doc: "yes: while the default user has no password, refuse clients not on 127.0.0.1 or ::1",
		value: enumValue(func(c *Config) *string { return &c.ProtectedMode }, "yes", "yes", "no"),
		wire:  func(c *Config, w *Wiring) error { w.Server.ProtectedMode = c.ProtectedMode == "yes"; return nil }},
	{name: "enable-debug-command", doc: "who may run DEBUG (SET-CLOCK, ADVANCE-CLOCK: test tools that move the server's clock): no, local (clients on 127.0.0.1 or ::1) or yes",
		value: enumValue(func(c *Config) *string { return &c.EnableDebugCommand }, "no", "no", "local", "yes"),
		wire: func(c *Config, w *Wiring) (err error) {
			w.Server.EnableDebugCommand, err = server.ParseDebugCommand(c.EnableDebugCommand)
			return err
		}},
	{name: "auth-fail-limit", doc: "failed AUTH attempts one client IP may make per auth-fail-period before its attempts are refused; 0 = unlimited",
		value: intValue(func(c *Config) *int { return &c.AuthFailLimit }, fixed(server.DefaultAuthFailLimit), 0, math.MaxInt32),
		wire:  func(c *Config, w *Wiring) error { w.Server.AuthFailLimit = serverCount(c.AuthFailLimit); return nil }},
	{name: "auth-fail-period", doc: "the period of auth-fail-limit (seconds or a duration such as 1m)",
		value: durationValue(func(c *Config) *time.Duration { return &c.AuthFailPeriod }, server.DefaultAuthFailPeriod, time.Millisecond, true),
		wire:  func(c *Config, w *Wiring) error { w.Server.AuthFailPeriod = c.AuthFailPeriod; return nil }},
	{name: "maxmemory", doc: "bytes the store may hold for keys before evicting (size: 1gb, 512mb); 0 = no limit but maxkeys",
		value: sizeValue(func(c *Config) *int64 { return &c.MaxMemory }, 0, 0),
		wire: func(c *Config, w *Wiring) error {
			w.Server.MaxMemory, w.Store.MaxMemory = c.MaxMemory, c.MaxMemory
			return nil
		}},
	{name: "max-key-len", doc: fmt.Sprintf("longest key in bytes, 1..%d; a command naming a longer key is refused", shard.MaxKeyLen),
		value: intValue(func(c *Config) *int { return &c.MaxKeyLen }, fixed(shard.MaxKeyLen), 1, shard.MaxKeyLen),
		wire:  func(c *Config, w *Wiring) error { w.Server.MaxKeyLen = c.MaxKeyLen; return nil }},
	{name: "admission-maxrecords", doc: "most records of held slots, open reservations and ban counts; when full, THROTTLE.ACQUIRE and THROTTLE.RESERVE get -OOM (nothing held is dropped)",
		value: intValue(func(c *Config) *int { return &c.AdmissionMaxRecords }, fixed(server.DefaultAdmissionMaxRecords), 1, math.MaxInt32),
		wire:  func(c *Config, w *Wiring) error { w.Server.AdmissionMaxRecords = c.AdmissionMaxRecords; return nil }},
	{name: "admission-maxmemory", doc: "bytes those records may hold (size: 256mb, 1gb); when full, as admission-maxrecords",
		value: sizeValue(func(c *Config) *int64 { return &c.AdmissionMaxMemory }, server.DefaultAdmissionMaxMemory, 64*1024),
		wire:  func(c *Config, w *Wiring) error { w.Server.AdmissionMaxMemory = c.AdmissionMaxMemory; return nil }},
	{name: "client-query-buffer-limit", doc: "largest incomplete command one client may send (size: 64mb, 1gb)",
		value: sizeValue(func(c *Config) *int64 { return &c.ClientQueryBufferLimit }, server.DefaultQueryBufferLimit, MinClientQueryBufferLimit),
		wire:  func(c *Config, w *Wiring) error { w.Server.QueryBufferLimit = c.ClientQueryBufferLimit; return nil }},
	{name: "shutdown-timeout", doc: "how long a shutdown waits for clients to read the replies already queued for them, then closes them (seconds or a duration such as 500ms); 0 = at once",
		value: durationValue(func(c *Config) *time.Duration { return &c.ShutdownTimeout }, server.DefaultShutdownTimeout, 0, false)},
	{name: "tls-port", doc: "port of the TLS listener, on the host of addr; 0 = no TLS",
		value: intValue(func(c *Config) *int { return &c.TLSPort }, fixed(0), 0, 65535),
		wire:  wireTLS},
	{name: "tls-cert-file", doc: "PEM certificate (chain) of the TLS listener; reloaded on SIGHUP",
		value: stringValue(func(c *Config) *string { return &c.TLSCertFile }, "")},
	{name: "tls-key-file", doc: "PEM private key of tls-cert-file; reloaded on SIGHUP",
		value: stringValue(func(c *Config) *string { return &c.TLSKeyFile }, "")},
	{name: "tls-ca-cert-file", doc: "PEM CA certificates that sign client certificates; reloaded on SIGHUP",
		value: stringValue(func(c *Config) *string { return &c.TLSCACertFile }, "")},
	{name: "tls-auth-clients", doc: "yes: TLS clients must present a certificate signed by tls-ca-cert-file; optional: checked when given; no: not asked",
		value: enumValue(func(c *Config) *string { return &c.TLSAuthClients }, "yes", "yes", "no", "optional")},
	{name: "tls-protocols", doc: `TLS versions accepted, separated by spaces: TLSv1, TLSv1.1, TLSv1.2, TLSv1.3`,
		value: checkedString(func(c *Config) *string { return &c.TLSProtocols }, "TLSv1.2 TLSv1.3",
			func(v string) error { _, _, err := server.ParseTLSProtocols(v); return err })},
	// The gRPC front (package grpcfront) and the named policies (package
	// policy), served to Envoy by package rls and over RESP by POLICY.
	{name: "grpc-addr", doc: `TCP address of the gRPC listener serving Envoy's rate limit service (RLS v3) and the gRPC health service; "" or off = disabled (needs policies)`,
		value: addrValue(func(c *Config) *string { return &c.GRPCAddr }, "", true),
		wire:  wireGRPC},
	{name: "grpc-tls", doc: "yes: serve gRPC over TLS with tls-cert-file, tls-key-file, tls-ca-cert-file, tls-auth-clients and tls-protocols",
		value: enumValue(func(c *Config) *string { return &c.GRPCTLS }, "no", "yes", "no")},
	{name: "policies", doc: `policy file, or directory of *.yaml files, in envoyproxy/ratelimit's format: loaded at start (an invalid one stops the start), then watched and reloaded; "" = none`,
		value: stringValue(func(c *Config) *string { return &c.Policies }, "")},
	{name: "rls-shadow-mode", doc: "yes: the RLS service answers OK where it would answer OVER_LIMIT, counting it (envoyproxy/ratelimit's SHADOW_MODE)",
		value: enumValue(func(c *Config) *string { return &c.RLSShadowMode }, "no", "yes", "no")},
	{name: "rls-response-headers", doc: "rate-limit headers in RLS responses: none; ietf (RateLimit and RateLimit-Policy); envoy (envoyproxy/ratelimit's RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset); both",
		value: enumValue(func(c *Config) *string { return &c.RLSResponseHeaders }, "none", "none", "ietf", "envoy", "both")},
	{name: "rls-max-descriptors", doc: "most descriptors in one RLS request; a larger request is refused with InvalidArgument",
		value: intValue(func(c *Config) *int { return &c.RLSMaxDescriptors }, fixed(rls.DefaultMaxDescriptors), 1, math.MaxInt32)},
	{name: "rls-max-entries", doc: "most entries in one RLS descriptor; a larger request is refused with InvalidArgument",
		value: intValue(func(c *Config) *int { return &c.RLSMaxEntries }, fixed(rls.DefaultMaxEntries), 1, math.MaxInt32)},
	{name: "metrics-addr", doc: `HTTP address for /metrics, /healthz and /readyz; "" or off = disabled`,
		value: addrValue(func(c *Config) *string { return &c.MetricsAddr }, telemetry.DefaultMetricsAddr, true)},
	{name: "log-level", doc: "debug, info, warn or error",
		value: enumValue(func(c *Config) *string { return &c.LogLevel }, telemetry.DefaultLogLevel, "debug", "info", "warn", "error")},
	{name: "log-format", doc: "text or json",
		value: enumValue(func(c *Config) *string { return &c.LogFormat }, telemetry.DefaultLogFormat, "text", "json")},
	// Persistence: wired in cmd/throttlekit-server (package persist).
	{name: "persist", doc: `durable backend: postgres://user:pass@host/db?table=NAME or dynamodb://TABLE?region=R&endpoint=URL; "" = in memory only`, secret: true,
		value: stringValue(func(c *Config) *string { return &c.Persist }, "")},
	{name: "persist-mode", doc: "async: flush changes every persist-interval; sync: hold each reply until its change is durable (group commit)",
		value: enumValue(func(c *Config) *string { return &c.PersistMode }, "async", "async", "sync")},
	{name: "persist-interval", doc: "async: how often changes are written (a crash loses about this much); sync: the period of the background flush (commits follow traffic)",
		value: durationValue(func(c *Config) *time.Duration { return &c.PersistInterval }, DefaultPersistInterval, time.Millisecond, false)},
	{name: "persist-fail", doc: "open: keep answering from memory while the backend fails; closed: refuse changing commands with TRYAGAIN",
		value: enumValue(func(c *Config) *string { return &c.PersistFail }, "open", "open", "closed")},
	{name: "persist-owner", doc: `writer identity for the DynamoDB table lease; a restart with the same owner takes the lease at once; "" = host, pid and a random suffix`,
		value: stringValue(func(c *Config) *string { return &c.PersistOwner }, "")},
	// Scale-out: wired in cmd/throttlekit-server (package upstream/tier).
	{name: "upstream", doc: `shared budget in Redis: redis://[user:pass@]host:port[/db], rediss://..., redis-cluster://host:port[,host:port...] or rediss-cluster://...; "" = in memory only`, secret: true,
		value: stringValue(func(c *Config) *string { return &c.Upstream }, "")},
	{name: "upstream-mode", doc: "strict: every command on the upstream; cached-deny: as strict, a denial cached until its retry-after; leased: fixed-window checks answered from leased batches",
		value: enumValue(func(c *Config) *string { return &c.UpstreamMode }, "strict", "strict", "cached-deny", "leased")},
	{name: "upstream-mode-prefix", doc: `modes of key prefixes, PREFIX=MODE[,PREFIX=MODE...] (longest prefix wins); in a file one per line: upstream-mode-prefix "hot:" cached-deny`,
		value: checkedString(func(c *Config) *string { return &c.UpstreamModePrefix }, "", checkModePrefixes)},
	{name: "upstream-fail", doc: "closed: -TRYAGAIN upstream unavailable while the upstream is unreachable; open: answer from local state",
		value: enumValue(func(c *Config) *string { return &c.UpstreamFail }, "closed", "open", "closed")},
	{name: "upstream-timeout", doc: "bound on one upstream call (dial, read, write); past it the call counts as unavailable",
		value: durationValue(func(c *Config) *time.Duration { return &c.UpstreamTimeout }, time.Second, time.Millisecond, false)},
	{name: "upstream-pool-size", doc: "connections per upstream node, and goroutines calling the upstream",
		value: intValue(func(c *Config) *int { return &c.UpstreamPoolSize }, fixed(64), 1, 100000)},
	{name: "upstream-pipeline", doc: "calls one goroutine sends to the upstream in one round trip: what is queued for it, up to this many",
		value: intValue(func(c *Config) *int { return &c.UpstreamPipeline }, fixed(128), 1, 100000)},
	{name: "upstream-batch", doc: "credits one lease asks for in leased mode, 1..2^30, or auto: learned per key (the Go client's EOQ sizer); a check of a larger cost asks for its cost",
		value: checkedString(func(c *Config) *string { return &c.UpstreamBatch }, "100", checkBatch)},
	{name: "upstream-idle-return", doc: "leased credits unused this long are given back to their window",
		value: durationValue(func(c *Config) *time.Duration { return &c.UpstreamIdleReturn }, 100*time.Millisecond, time.Millisecond, false)},
}

// redisCompat are the names CONFIG GET answers besides the settings, for
// clients that probe Redis's own: read-only, derived from the settings or
// fixed by what throttlekit is (one database, no persistence).
var redisCompat = []struct {
	name string
	get  func(c *Config) (string, bool) // false: leave the name out
}{
	{"bind", func(c *Config) (string, bool) { h, _, ok := splitAddr(c.Addr); return h, ok }},
	{"port", func(c *Config) (string, bool) { _, p, ok := splitAddr(c.Addr); return p, ok }},
	{"databases", func(*Config) (string, bool) { return "1", true }},
	{"save", func(*Config) (string, bool) { return "", true }},
	{"appendonly", func(*Config) (string, bool) { return "no", true }},
}

// setting is one row of the table. Its environment variable is
// EnvName(name); its flag is --name; its file key is name.
type setting struct {
	name string // flag name without dashes; also the file key and the CONFIG GET name
	doc  string // one line for --help
	// settable marks a setting CONFIG SET may change while the server runs.
	// No setting is yet: the server answers CONFIG SET with an error.
	settable bool
	secret   bool // never shown by CONFIG GET
	value
	// wire copies the setting into the configuration of the package that
	// uses it (Wiring); nil for the settings cmd/throttlekit-server uses
	// itself (persistence, metrics, logging, sweep, shutdown) and for
	// those another row wires (the tls-* files and modes: tls-port).
	wire func(c *Config, w *Wiring) error
}

// value is how a setting is stored in its Config field, parsed from text,
// shown and checked. The constructors below build one per kind of field.
type value struct {
	reset func(c *Config)                 // store the default
	parse func(c *Config, v string) error // store text v; the error is the reason
	show  func(c *Config) string          // as flags and files take it, and as --help shows the default
	redis func(c *Config) string          // as CONFIG GET shows it, in Redis's units
	check func(c *Config) error           // whether the field, however it was set, is valid
}

// fixed returns a default that does not depend on the machine.
func fixed(n int) func() int { return func() int { return n } }

// intValue is a decimal integer in [lo, hi].
func intValue(field func(*Config) *int, def func() int, lo, hi int) value {
	show := func(c *Config) string { return strconv.Itoa(*field(c)) }
	return value{
		reset: func(c *Config) { *field(c) = def() },
		parse: func(c *Config, v string) error { return setInt(field(c), v, lo, hi) },
		show:  show,
		redis: show,
		check: func(c *Config) error { return checkInt(*field(c), lo, hi) },
	}
}

// sizeValue is a byte count of at least min, written with redis.conf's
// suffixes; CONFIG GET shows plain bytes, as Redis does.
func sizeValue(field func(*Config) *int64, def, min int64) value {
	return value{
		reset: func(c *Config) { *field(c) = def },
		parse: func(c *Config, v string) error { return setSize(field(c), v, min) },
		show:  func(c *Config) string { return formatSize(*field(c)) },
		redis: func(c *Config) string { return strconv.FormatInt(*field(c), 10) },
		check: func(c *Config) error { return checkSize(*field(c), min) },
	}
}

// durationValue is a duration of at least min, given in seconds or as a Go
// duration. With seconds, CONFIG GET shows whole seconds, as Redis's timeout.
func durationValue(field func(*Config) *time.Duration, def, min time.Duration, seconds bool) value {
	show := func(c *Config) string { return formatDuration(*field(c)) }
	redis := show
	if seconds {
		redis = func(c *Config) string { return strconv.FormatInt(int64(*field(c)/time.Second), 10) }
	}
	return value{
		reset: func(c *Config) { *field(c) = def },
		parse: func(c *Config, v string) error { return setDuration(field(c), v, min) },
		show:  show,
		redis: redis,
		check: func(c *Config) error { return checkDuration(*field(c), min) },
	}
}

// addrValue is a host:port address; an optional one may be "" or "off"
// (disabled).
func addrValue(field func(*Config) *string, def string, optional bool) value {
	show := func(c *Config) string { return *field(c) }
	return value{
		reset: func(c *Config) { *field(c) = def },
		parse: func(c *Config, v string) error { return setAddr(field(c), v, optional) },
		show:  show,
		redis: show,
		check: func(c *Config) error { var s string; return setAddr(&s, *field(c), optional) },
	}
}

// stringValue is any text.
func stringValue(field func(*Config) *string, def string) value {
	show := func(c *Config) string { return *field(c) }
	return value{
		reset: func(c *Config) { *field(c) = def },
		parse: func(c *Config, v string) error { *field(c) = v; return nil },
		show:  show,
		redis: show,
		check: func(*Config) error { return nil },
	}
}

// enumValue is one of the allowed words, stored lower-case.
func enumValue(field func(*Config) *string, def string, allowed ...string) value {
	show := func(c *Config) string { return *field(c) }
	return value{
		reset: func(c *Config) { *field(c) = def },
		parse: func(c *Config, v string) error { return setEnum(field(c), v, allowed...) },
		show:  show,
		redis: show,
		check: func(c *Config) error { return checkEnum(*field(c), allowed...) },
	}
}

// checkedString is text that check accepts.
func checkedString(field func(*Config) *string, def string, check func(string) error) value {
	v := stringValue(field, def)
	v.parse = func(c *Config, s string) error {
		if err := check(s); err != nil {
			return err
		}
		*field(c) = s
		return nil
	}
	v.check = func(c *Config) error { return check(*field(c)) }
	return v
}

// checkAcross checks the rules that tie settings together, which no single
// setting's check can see.
func checkAcross(c *Config) []error {
	var errs []error
	if need := c.ProtoMaxBulkLen + server.QueryHeaderRoom; c.ClientQueryBufferLimit < need {
		errs = append(errs, &Error{Name: "client-query-buffer-limit", Value: formatSize(c.ClientQueryBufferLimit), Source: "config value",
			Reason: fmt.Sprintf("must hold one bulk of proto-max-bulk-len (%s) and its headers: at least %s", formatSize(c.ProtoMaxBulkLen), formatSize(need))})
	}
	// client-output-buffer-limit may be below proto-max-bulk-len, as Redis
	// allows: a client whose unsent replies outgrow the limit is closed,
	// whatever produced them (one large reply included), and no other
	// client is affected (server.Config.OutputBufferLimit).
	if c.TLSPort != 0 && (c.TLSCertFile == "" || c.TLSKeyFile == "") {
		errs = append(errs, &Error{Name: "tls-port", Value: strconv.Itoa(c.TLSPort), Source: "config value",
			Reason: "needs tls-cert-file and tls-key-file"})
	}
	if c.GRPCAddr != "" && c.Policies == "" {
		errs = append(errs, &Error{Name: "grpc-addr", Value: c.GRPCAddr, Source: "config value",
			Reason: "needs policies: the rate limit service answers from a policy file"})
	}
	if c.GRPCTLS == "yes" && c.GRPCAddr == "" {
		errs = append(errs, &Error{Name: "grpc-tls", Value: c.GRPCTLS, Source: "config value", Reason: "needs grpc-addr"})
	}
	if c.GRPCTLS == "yes" && (c.TLSCertFile == "" || c.TLSKeyFile == "") {
		errs = append(errs, &Error{Name: "grpc-tls", Value: c.GRPCTLS, Source: "config value",
			Reason: "needs tls-cert-file and tls-key-file"})
	}
	if c.GRPCTLS == "yes" && c.TLSAuthClients != "no" && c.TLSCACertFile == "" {
		errs = append(errs, &Error{Name: "tls-auth-clients", Value: c.TLSAuthClients, Source: "config value",
			Reason: "needs tls-ca-cert-file to verify gRPC client certificates (or tls-auth-clients no)"})
	}
	if c.TLSPort != 0 && c.TLSAuthClients != "no" && c.TLSCACertFile == "" {
		errs = append(errs, &Error{Name: "tls-auth-clients", Value: c.TLSAuthClients, Source: "config value",
			Reason: "needs tls-ca-cert-file to verify client certificates (or tls-auth-clients no)"})
	}
	return errs
}

// lookup returns the setting named name, or nil.
func lookup(name string) *setting {
	for i := range settings {
		if settings[i].name == name {
			return &settings[i]
		}
	}
	return nil
}

// Wiring is what the settings configure in the packages below
// cmd/throttlekit-server: the server's Config and the store's. The fields
// only a running program can fill (logger, clock, version, durability,
// ConfigGet) are left for it.
type Wiring struct {
	Server server.Config
	Store  shard.Config
	// GRPC is the gRPC front's listener (Addr "" = off) and RLS the rate
	// limit service's options; cmd/throttlekit-server adds the policies,
	// the limiter over the server's core, the clock and the metrics.
	GRPC grpcfront.Config
	RLS  rls.Options
	// Policies is the policy file or directory; "" = none.
	Policies string
}

// Wire derives the server's and the store's configuration from c through
// the settings table: each setting's row says where its value goes, so a
// new setting is wired where it is declared. c must be valid (Load
// validates).
func (c *Config) Wire() (Wiring, error) {
	var w Wiring
	for i := range settings {
		if s := &settings[i]; s.wire != nil {
			if err := s.wire(c, &w); err != nil {
				return Wiring{}, &Error{Name: s.name, Value: s.show(c), Source: "config value", Reason: err.Error()}
			}
		}
	}
	return w, nil
}

// serverCount maps a setting where 0 means "none" (acllog-max-len,
// auth-fail-limit) to server.Config, where 0 means the default and a
// negative value means none.
func serverCount(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// slowlogThreshold maps slowlog-log-slower-than (µs; 0 every command,
// negative off) to server.Config.SlowlogLogSlowerThan (0 there means the
// default; SlowlogLogAll carries Redis's 0).
func slowlogThreshold(us int) time.Duration {
	switch {
	case us < 0:
		return -1
	case us == 0:
		return time.Nanosecond
	}
	return time.Duration(us) * time.Microsecond
}

// wireTLS derives the server's TLS settings: the listener is on addr's
// host at tls-port, or off when tls-port is 0.
func wireTLS(c *Config, w *Wiring) error {
	if c.TLSPort == 0 {
		w.Server.TLS = server.TLSConfig{}
		return nil
	}
	host, _, err := net.SplitHostPort(c.Addr)
	if err != nil {
		return err
	}
	auth, err := server.ParseTLSAuth(c.TLSAuthClients)
	if err != nil {
		return err
	}
	w.Server.TLS = server.TLSConfig{
		Addr:      net.JoinHostPort(host, strconv.Itoa(c.TLSPort)),
		CertFile:  c.TLSCertFile,
		KeyFile:   c.TLSKeyFile,
		CAFile:    c.TLSCACertFile,
		Auth:      auth,
		Protocols: c.TLSProtocols,
	}
	return nil
}

// wireGRPC derives the gRPC front's listener and TLS, the RLS service's
// options and the policy path.
func wireGRPC(c *Config, w *Wiring) error {
	w.Policies = c.Policies
	w.RLS = rls.Options{
		ShadowMode:       c.RLSShadowMode == "yes",
		RateLimitHeaders: c.RLSResponseHeaders == "ietf" || c.RLSResponseHeaders == "both",
		LimitHeaders:     c.RLSResponseHeaders == "envoy" || c.RLSResponseHeaders == "both",
		MaxDescriptors:   c.RLSMaxDescriptors,
		MaxEntries:       c.RLSMaxEntries,
	}
	w.GRPC = grpcfront.Config{Addr: c.GRPCAddr}
	if c.GRPCAddr == "" || c.GRPCTLS != "yes" {
		return nil
	}
	lo, hi, err := server.ParseTLSProtocols(c.TLSProtocols)
	if err != nil {
		return err
	}
	auth := tls.NoClientCert
	switch c.TLSAuthClients {
	case "yes":
		auth = tls.RequireAndVerifyClientCert
	case "optional":
		auth = tls.VerifyClientCertIfGiven
	}
	w.GRPC.TLS = &grpcfront.TLSConfig{CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile, CAFile: c.TLSCACertFile,
		ClientAuth: auth, MinVersion: lo, MaxVersion: hi}
	return nil
}

// upstreamModes are the words of upstream-mode and upstream-mode-prefix.
var upstreamModes = []string{"strict", "cached-deny", "leased"}

// ModePrefixes parses upstream-mode-prefix: "PREFIX=MODE[,PREFIX=MODE...]",
// the mode after the last '=' of each entry.
func ModePrefixes(v string) (prefixes, modes []string, err error) {
	if v == "" {
		return nil, nil, nil
	}
	for _, e := range strings.Split(v, ",") {
		i := strings.LastIndexByte(e, '=')
		if i <= 0 {
			return nil, nil, fmt.Errorf("entry %q is not PREFIX=MODE", e)
		}
		if err := checkEnum(e[i+1:], upstreamModes...); err != nil {
			return nil, nil, err
		}
		prefixes, modes = append(prefixes, e[:i]), append(modes, e[i+1:])
	}
	return prefixes, modes, nil
}

// checkBatch accepts upstream-batch: auto or an integer in 1..2^30.
func checkBatch(v string) error {
	if v == "auto" {
		return nil
	}
	if n, err := strconv.Atoi(v); err != nil || n < 1 || n > 1<<30 {
		return fmt.Errorf("must be auto or an integer from 1 to %d", 1<<30)
	}
	return nil
}

func checkModePrefixes(v string) error {
	_, _, err := ModePrefixes(v)
	return err
}

// addModePrefix adds one configuration file line's value, a prefix (quoted
// or not) and a mode, or the flag's PREFIX=MODE list, to
// upstream-mode-prefix.
func addModePrefix(c *Config, line string) error {
	i := strings.LastIndexAny(line, " \t")
	if i <= 0 { // the flag's form, PREFIX=MODE[,PREFIX=MODE...]
		v, err := unquote(line)
		if err == nil {
			err = checkModePrefixes(v)
		}
		if err != nil || v == "" {
			return fmt.Errorf("want a prefix and a mode, as in: upstream-mode-prefix \"hot:\" cached-deny")
		}
		if c.UpstreamModePrefix != "" {
			c.UpstreamModePrefix += ","
		}
		c.UpstreamModePrefix += v
		return nil
	}
	prefix, err := unquote(strings.TrimSpace(line[:i]))
	if err != nil {
		return err
	}
	mode := strings.ToLower(strings.TrimSpace(line[i+1:]))
	if err := checkEnum(mode, upstreamModes...); err != nil {
		return err
	}
	if prefix == "" || strings.Contains(prefix, ",") {
		return fmt.Errorf("a prefix must be non-empty and hold no comma")
	}
	if c.UpstreamModePrefix != "" {
		c.UpstreamModePrefix += ","
	}
	c.UpstreamModePrefix += prefix + "=" + mode
	return nil
}
