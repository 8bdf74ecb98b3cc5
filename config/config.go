// Package config reads the settings of throttlekit-server from command-line
// flags, the environment and an optional configuration file, and answers
// CONFIG GET from them.
//
// # One table
//
// Every setting is one entry of a table (settings.go): its name, one line of
// help, the Config field it fills, the kind of value (integer in a range,
// size, duration, address, word from a list, text) and the default. The kind
// brings the parser, the checks of [Config.Validate], the text form --help and
// files use and the form CONFIG GET reports in Redis's units. Flags, the
// environment, the file, --help, Validate and [Config.ConfigGet] all walk the
// same table, so a setting cannot exist in one place and be missing from
// another, and adding one is an entry plus its field.
//
// Defaults live with the behaviour they configure: the server's limits are
// server.DefaultMaxClients, server.DefaultMaxArgs and
// server.DefaultProtoMaxBulkLen, the store's bounds shard.MaxShards and
// shard.DefaultMaxKeys, the log and metrics defaults are telemetry's. The table
// refers to them; only defaults no package owns (the listen address, the
// output-buffer limit, the sweep interval) are declared here.
//
// # Precedence
//
// Every setting has one name, the flag name without dashes in front (for
// example "proto-max-bulk-len"). It is looked up in four places; the first
// place that sets it wins:
//
//  1. the command line: --proto-max-bulk-len 64mb (or -proto-max-bulk-len=64mb);
//  2. the environment: THROTTLEKIT_PROTO_MAX_BULK_LEN=64mb (the name upper-cased,
//     dashes turned into underscores; an empty variable counts as unset);
//  3. the configuration file named by --config or THROTTLEKIT_CONFIG, in the
//     style of redis.conf: one "name value" pair per line, blank lines and
//     lines starting with # ignored, values optionally quoted with "..." or '...';
//  4. the defaults of [Default].
//
// # Values
//
// Sizes (proto-max-bulk-len, client-output-buffer-limit) take a plain number
// of bytes or a suffix as redis.conf does: k=1000, kb=1024, m=1000², mb=1024²,
// g=1000³, gb=1024³, case-insensitive. Durations (timeout, sweep-interval) take
// a plain number of seconds, as Redis's timeout does, or a Go duration such as
// 500ms or 1m30s.
//
// # Errors
//
// Every problem is reported as one [*Error], which says where the bad value came
// from and what is accepted; [Load] joins them (errors.Join) when there are
// several. Every value given is checked, even one that a higher place
// overrides: a typo in the environment is reported, not hidden by a flag. All
// of them match errors.Is(err, ErrInvalid). [Exit] turns the
// result of Load into the exit status of the process: 0 after --help or
// --version, 2 for an invalid configuration.
//
// # Costs
//
// Loading walks the table a few times and reads one file; it runs once at
// start-up. CONFIG GET builds the list of pairs and matches each name against
// the pattern on every call: a few dozen short strings, on an admin command
// that is not on the hot path.
package config

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/glob"
)

// Config holds every setting of the server. The zero Config is not valid; start
// from [Default] or [Load].
type Config struct {
	Addr                    string        // TCP address for RESP clients
	Loops                   int           // event loops
	MaxKeys                 int           // key capacity of the store; 0 = the store's default
	MaxClients              int           // connections accepted at once
	MaxArgs                 int           // arguments in one command
	Shards                  int           // store shards; 0 = chosen from the number of CPUs
	ProtoMaxBulkLen         int64         // bytes in one bulk string
	ClientOutputBufferLimit int64         // bytes queued for one client; 0 = unlimited
	Timeout                 time.Duration // idle connections are closed after this; 0 = never
	SweepInterval           time.Duration // how often expired keys are reclaimed
	SlowlogLogSlowerThan    int           // µs from which SLOWLOG logs a command; 0 = every command, negative = off
	SlowlogMaxLen           int           // SLOWLOG entries kept; 0 = none
	LatencyMonitorThreshold int           // ms from which LATENCY samples an event; 0 = off
	RequirePass             string        // password for AUTH/HELLO; "" = no authentication
	ACLFile                 string        // users in Redis's ACL file format, for ACL LOAD/SAVE; "" = none
	ACLLogMaxLen            int           // ACL LOG entries kept; 0 = none
	ProtectedMode           string        // "yes": refuse remote clients while the default user has no password; "no"
	EnableDebugCommand      string        // who may run DEBUG: "no" (nobody), "local" (127.0.0.1 and ::1) or "yes"
	AuthFailLimit           int           // failed AUTH attempts per client IP in AuthFailPeriod; 0 = unlimited
	AuthFailPeriod          time.Duration // the period of AuthFailLimit
	MaxMemory               int64         // bytes the store holds for keys before evicting; 0 = unlimited
	MaxKeyLen               int           // longest key in bytes
	AdmissionMaxRecords     int           // records of held slots, open reservations and ban counts
	AdmissionMaxMemory      int64         // bytes of those records
	ClientQueryBufferLimit  int64         // bytes of one client's incomplete command
	ShutdownTimeout         time.Duration // how long a shutdown waits for clients to read their replies
	TLSPort                 int           // port of the TLS listener on Addr's host; 0 = no TLS
	TLSCertFile             string        // PEM certificate chain of the TLS listener
	TLSKeyFile              string        // PEM private key of TLSCertFile
	TLSCACertFile           string        // PEM CA certificates that sign client certificates
	TLSAuthClients          string        // yes, no or optional: client certificates
	TLSProtocols            string        // accepted TLS versions, e.g. "TLSv1.2 TLSv1.3"
	GRPCAddr                string        // TCP address of the gRPC listener (Envoy RLS); "" = off
	GRPCTLS                 string        // "yes": gRPC over TLS with the tls-* files; "no"
	Policies                string        // policy file or directory in envoyproxy/ratelimit's format; "" = none
	RLSShadowMode           string        // "yes": the global shadow switch of the RLS service; "no"
	RLSResponseHeaders      string        // none, ietf, envoy or both: rate-limit headers in RLS responses
	RLSMaxDescriptors       int           // descriptors in one RLS request
	RLSMaxEntries           int           // entries in one RLS descriptor
	MetricsAddr             string        // HTTP address for /metrics, /healthz, /readyz; "" = disabled
	LogLevel                string        // debug, info, warn or error
	LogFormat               string        // text or json
	Persist                 string        // backend URL (postgres://, dynamodb://); "" = in memory only
	PersistMode             string        // async or sync
	PersistInterval         time.Duration // flush period (async: the loss bound; sync: a background sweep)
	PersistFail             string        // open or closed: what to do while the backend fails
	PersistOwner            string        // writer identity for the DynamoDB lease; "" = host, pid and a random suffix
	Upstream                string        // redis://, rediss://, redis-cluster://, rediss-cluster:// URL; "" = in memory only
	UpstreamMode            string        // strict, cached-deny or leased
	UpstreamModePrefix      string        // per-prefix modes, "PREFIX=MODE[,PREFIX=MODE...]"
	UpstreamFail            string        // open or closed: what a command gets while the upstream is unreachable
	UpstreamTimeout         time.Duration // one upstream call
	UpstreamPoolSize        int           // connections per upstream node, and goroutines calling it
	UpstreamPipeline        int           // calls one of those goroutines sends in one round trip, at most
	UpstreamBatch           string        // credits one lease asks for (leased mode): a number, or auto
	UpstreamIdleReturn      time.Duration // leased credits unused this long are given back
	ConfigFile              string        // the file the settings were read from, if any
}

// ErrVersion is returned by Load when --version was given. The caller prints
// its version and exits with status 0.
var ErrVersion = errors.New("version requested")

// ErrInvalid is matched (errors.Is) by every error that reports a bad setting.
var ErrInvalid = errors.New("invalid configuration")

// Error reports one bad setting.
type Error struct {
	Name   string // setting name, e.g. "maxclients"; "" for problems not tied to one setting
	Value  string // the rejected value
	Source string // where it came from: "flag", "env THROTTLEKIT_X", "file.conf:12"
	Reason string // what is wrong or what is accepted
}

// Error returns one line such as
//
//	invalid value "abc" for maxclients (flag --maxclients): must be an integer >= 1
func (e *Error) Error() string {
	if e.Name == "" {
		if e.Source == "" {
			return e.Reason
		}
		return e.Source + ": " + e.Reason
	}
	return fmt.Sprintf("invalid value %q for %s (%s): %s", e.Value, e.Name, e.Source, e.Reason)
}

// Unwrap makes every *Error match ErrInvalid.
func (e *Error) Unwrap() error { return ErrInvalid }

// Default returns the configuration used when nothing is set. Loops is
// GOMAXPROCS at the time of the call.
func Default() Config {
	var c Config
	for i := range settings {
		settings[i].reset(&c)
	}
	return c
}

// EnvName returns the environment variable read for a setting:
// "proto-max-bulk-len" -> "THROTTLEKIT_PROTO_MAX_BULK_LEN".
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Load builds the configuration from command-line arguments (without the
// program name), the environment read through getenv (os.Getenv in main; nil
// reads nothing) and the configuration file they name, over [Default].
//
// It returns flag.ErrHelp after writing the usage for -h/--help to usage,
// ErrVersion for --version, and otherwise either a valid Config or every
// problem found, joined. A --help or --version wins over bad values elsewhere.
func Load(args []string, getenv func(string) string, usage io.Writer) (Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	fs := flag.NewFlagSet("throttlekit-server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}

	flagVals := map[string]string{}
	for _, s := range settings {
		name := s.name
		fs.Func(name, s.doc, func(v string) error { flagVals[name] = v; return nil })
	}
	var configFlag *string
	fs.Func("config", "", func(v string) error { configFlag = &v; return nil })
	version := fs.Bool("version", false, "")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			Usage(usage)
			return Config{}, flag.ErrHelp
		}
		return Config{}, &Error{Source: "command line", Reason: flagError(err) + " (see --help)"}
	}
	if *version {
		return Config{}, ErrVersion
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, &Error{Source: "command line",
			Reason: fmt.Sprintf("unexpected argument %q (settings are given as --name value)", fs.Arg(0))})
	}

	// Lowest precedence first: file, then environment, then flags. Every
	// value given is checked, even one a higher place overrides.
	cfg := Default()
	if configFlag != nil {
		cfg.ConfigFile = *configFlag
		if cfg.ConfigFile == "" {
			errs = append(errs, &Error{Name: "config", Source: "flag --config", Reason: "needs a file name"})
		}
	} else {
		cfg.ConfigFile = getenv(EnvName("config"))
	}
	if cfg.ConfigFile != "" {
		data, err := os.ReadFile(cfg.ConfigFile)
		if err != nil {
			errs = append(errs, &Error{Source: "config file", Reason: err.Error()})
		} else {
			errs = append(errs, applyFile(&cfg, cfg.ConfigFile, data)...)
		}
	}
	for _, s := range settings {
		env := EnvName(s.name)
		if v := getenv(env); v != "" {
			if err := s.parse(&cfg, v); err != nil {
				errs = append(errs, &Error{Name: s.name, Value: v, Source: "env " + env, Reason: err.Error()})
			}
		}
	}
	for _, s := range settings {
		if v, ok := flagVals[s.name]; ok {
			if err := s.parse(&cfg, v); err != nil {
				errs = append(errs, &Error{Name: s.name, Value: v, Source: "flag --" + s.name, Reason: err.Error()})
			}
		}
	}
	if len(errs) > 0 {
		return Config{}, errors.Join(errs...)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// flagError rewords the errors of package flag with the double-dash spelling
// the usage text shows.
func flagError(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag --" + name
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "flag --" + name + " needs a value"
	}
	return msg
}

// applyFile parses a redis.conf-style file into c and returns one error per
// bad line.
func applyFile(c *Config, name string, data []byte) []error {
	var errs []error
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	line := 0
	for sc.Scan() {
		line++
		src := fmt.Sprintf("%s:%d", name, line)
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		key, val, _ := strings.Cut(text, " ")
		if i := strings.IndexAny(key, "\t"); i >= 0 {
			key, val = text[:i], text[i+1:]
		}
		key = strings.ToLower(key)
		if key == "upstream-mode-prefix" { // repeatable: upstream-mode-prefix "hot:" leased
			if err := addModePrefix(c, strings.TrimSpace(val)); err != nil {
				errs = append(errs, &Error{Name: key, Value: val, Source: "file " + src, Reason: err.Error()})
			}
			continue
		}
		val, err := unquote(strings.TrimSpace(val))
		if err != nil {
			errs = append(errs, &Error{Source: src, Reason: fmt.Sprintf("%s: %v", key, err)})
			continue
		}
		s := lookup(key)
		if s == nil {
			errs = append(errs, &Error{Source: src, Reason: fmt.Sprintf("unknown setting %q", key)})
			continue
		}
		if prev, dup := seen[key]; dup {
			errs = append(errs, &Error{Source: src, Reason: fmt.Sprintf("%s is already set on line %d", key, prev)})
			continue
		}
		seen[key] = line
		if err := s.parse(c, val); err != nil {
			errs = append(errs, &Error{Name: key, Value: val, Source: "file " + src, Reason: err.Error()})
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, &Error{Source: name, Reason: err.Error()})
	}
	return errs
}

// unquote strips one pair of matching double or single quotes. Double-quoted
// values understand Go escapes (\" \\ \n \t \xNN).
func unquote(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	switch v[0] {
	case '"':
		s, err := strconv.Unquote(v)
		if err != nil {
			return "", reason("unbalanced or malformed double quotes")
		}
		return s, nil
	case '\'':
		if len(v) < 2 || v[len(v)-1] != '\'' || strings.Contains(v[1:len(v)-1], "'") {
			return "", reason("unbalanced single quotes")
		}
		return v[1 : len(v)-1], nil
	}
	return v, nil
}

// Validate checks every field of c against the same rules Load applies to
// text values, and returns every problem joined, or nil.
func (c Config) Validate() error {
	var errs []error
	for _, s := range settings {
		if err := s.check(&c); err != nil {
			errs = append(errs, &Error{Name: s.name, Value: s.show(&c), Source: "config value", Reason: err.Error()})
		}
	}
	errs = append(errs, checkAcross(&c)...)
	return errors.Join(errs...)
}

// Usage writes the help text: every flag with its environment variable and its
// default, and the precedence rules.
func Usage(w io.Writer) {
	d := Default()
	fmt.Fprintf(w, "Usage: throttlekit-server [flags]\n\n")
	fmt.Fprintf(w, "A rate-limit server speaking the Redis protocol (RESP2/RESP3).\n\n")
	fmt.Fprintf(w, "Flags (each also set by the environment variable shown, or by a \"name value\" line in the config file):\n")
	for _, s := range settings {
		fmt.Fprintf(w, "  --%s (env %s, default %q)\n        %s\n", s.name, EnvName(s.name), s.show(&d), s.doc)
		if s.settable {
			fmt.Fprintf(w, "        CONFIG SET may change it while the server runs\n")
		}
	}
	fmt.Fprintf(w, "  --config (env %s)\n        read settings from this redis.conf-style file\n", EnvName("config"))
	fmt.Fprintf(w, "  --version\n        print the version and exit\n")
	fmt.Fprintf(w, "  --help\n        print this help and exit\n")
	fmt.Fprintf(w, "\nPrecedence: flags > environment > config file > defaults.\n")
	fmt.Fprintf(w, "Sizes: bytes or k, kb, m, mb, g, gb (k=1000, kb=1024). Durations: seconds or 500ms, 5m, 1h.\n")
}

// Exit maps the error returned by Load to an exit status and writes the
// problems, one per line, to stderr: 0 for nil, flag.ErrHelp and ErrVersion
// (nothing written), 2 for anything else.
func Exit(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.Is(err, ErrVersion) {
		return 0
	}
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintf(stderr, "throttlekit-server: %s\n", line)
	}
	return 2
}

// ConfigGet returns the settings whose name matches a glob pattern as CONFIG
// GET takes it (Redis's glob: *, ?, [classes], \\ escaping the next
// character; case-insensitive), as name/value pairs sorted by name, with
// values in Redis's units (sizes in
// bytes, timeout in whole seconds). Names are the flag names, plus the Redis
// names clients probe where the meaning matches (bind, port, databases, save,
// appendonly, maxmemory). requirepass is never returned.
func (c Config) ConfigGet(pattern string) [][2]string {
	pattern = strings.ToLower(pattern)
	var out [][2]string
	add := func(name, value string) {
		if glob.Match(pattern, []byte(name)) {
			out = append(out, [2]string{name, value})
		}
	}
	for _, s := range settings {
		if !s.secret {
			add(s.name, s.redis(&c))
		}
	}
	for _, r := range redisCompat {
		if v, ok := r.get(&c); ok {
			add(r.name, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}
