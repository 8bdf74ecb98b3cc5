// Package config reads the settings of throttlekit-server from command-line
// flags, the environment and an optional configuration file.
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
package config

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
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
	RequirePass             string        // password for AUTH/HELLO; "" = no authentication
	MetricsAddr             string        // HTTP address for /metrics, /healthz, /readyz; "" = disabled
	LogLevel                string        // debug, info, warn or error
	LogFormat               string        // text or json
	ConfigFile              string        // the file the settings were read from, if any
}

// Default values that are not derived from the machine.
const (
	DefaultAddr                    = "127.0.0.1:6380"
	DefaultMaxClients              = 10000
	DefaultMaxArgs                 = 1024 * 1024
	DefaultProtoMaxBulkLen         = 512 * 1024 * 1024
	DefaultClientOutputBufferLimit = 32 * 1024 * 1024
	DefaultSweepInterval           = 100 * time.Millisecond
	DefaultMetricsAddr             = "127.0.0.1:9121"
	DefaultLogLevel                = "info"
	DefaultLogFormat               = "text"

	// EnvPrefix starts the name of every environment variable read by Load.
	EnvPrefix = "THROTTLEKIT_"
)

// Limits enforced by validation.
const (
	MinProtoMaxBulkLen = 1024    // a bulk must at least hold a key
	MaxLoops           = 1024    // event loops
	MaxShards          = 1 << 16 // store shards
)

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
	return Config{
		Addr:                    DefaultAddr,
		Loops:                   runtime.GOMAXPROCS(0),
		MaxClients:              DefaultMaxClients,
		MaxArgs:                 DefaultMaxArgs,
		ProtoMaxBulkLen:         DefaultProtoMaxBulkLen,
		ClientOutputBufferLimit: DefaultClientOutputBufferLimit,
		SweepInterval:           DefaultSweepInterval,
		MetricsAddr:             DefaultMetricsAddr,
		LogLevel:                DefaultLogLevel,
		LogFormat:               DefaultLogFormat,
	}
}

// setting describes one configurable value: its name, help text, how to show
// it and how to parse and store it.
type setting struct {
	name  string
	help  string
	show  func(c *Config) string
	parse func(c *Config, v string) error // a returned error is the reason text
}

// reason is the error type parse functions return: only its text is used.
type reason string

func (r reason) Error() string { return string(r) }

var settings = []setting{
	{"addr", "TCP address (host:port) for RESP clients",
		func(c *Config) string { return c.Addr },
		func(c *Config, v string) error { return setAddr(&c.Addr, v, false) }},
	{"loops", fmt.Sprintf("event loops, 1..%d; the default is GOMAXPROCS", MaxLoops),
		func(c *Config) string { return strconv.Itoa(c.Loops) },
		func(c *Config, v string) error { return setInt(&c.Loops, v, 1, MaxLoops) }},
	{"shards", fmt.Sprintf("store shards, 0..%d; 0 = chosen from the number of CPUs", MaxShards),
		func(c *Config) string { return strconv.Itoa(c.Shards) },
		func(c *Config, v string) error { return setInt(&c.Shards, v, 0, MaxShards) }},
	{"maxkeys", "most keys the store holds before evicting; 0 = the store's default",
		func(c *Config) string { return strconv.Itoa(c.MaxKeys) },
		func(c *Config, v string) error { return setInt(&c.MaxKeys, v, 0, math.MaxInt32) }},
	{"maxclients", "most client connections open at once",
		func(c *Config) string { return strconv.Itoa(c.MaxClients) },
		func(c *Config, v string) error { return setInt(&c.MaxClients, v, 1, math.MaxInt32) }},
	{"proto-max-bulk-len", "largest bulk string a client may send (size: 512mb, 64kb, bytes)",
		func(c *Config) string { return formatSize(c.ProtoMaxBulkLen) },
		func(c *Config, v string) error { return setSize(&c.ProtoMaxBulkLen, v, MinProtoMaxBulkLen) }},
	{"max-args", "most arguments in one command",
		func(c *Config) string { return strconv.Itoa(c.MaxArgs) },
		func(c *Config, v string) error { return setInt(&c.MaxArgs, v, 1, math.MaxInt32) }},
	{"timeout", "close a client idle this long (seconds or a duration such as 5m); 0 = never",
		func(c *Config) string { return formatDuration(c.Timeout) },
		func(c *Config, v string) error { return setDuration(&c.Timeout, v, 0) }},
	{"client-output-buffer-limit", "close a client whose unsent replies exceed this size; 0 = unlimited",
		func(c *Config) string { return formatSize(c.ClientOutputBufferLimit) },
		func(c *Config, v string) error { return setSize(&c.ClientOutputBufferLimit, v, 0) }},
	{"sweep-interval", "how often expired keys are reclaimed (seconds or a duration such as 100ms)",
		func(c *Config) string { return formatDuration(c.SweepInterval) },
		func(c *Config, v string) error { return setDuration(&c.SweepInterval, v, time.Millisecond) }},
	{"requirepass", "password clients must give with AUTH or HELLO; empty = none",
		func(c *Config) string { return c.RequirePass },
		func(c *Config, v string) error { c.RequirePass = v; return nil }},
	{"metrics-addr", `HTTP address for /metrics, /healthz and /readyz; "" or off = disabled`,
		func(c *Config) string { return c.MetricsAddr },
		func(c *Config, v string) error { return setAddr(&c.MetricsAddr, v, true) }},
	{"log-level", "debug, info, warn or error",
		func(c *Config) string { return c.LogLevel },
		func(c *Config, v string) error { return setEnum(&c.LogLevel, v, "debug", "info", "warn", "error") }},
	{"log-format", "text or json",
		func(c *Config) string { return c.LogFormat },
		func(c *Config, v string) error { return setEnum(&c.LogFormat, v, "text", "json") }},
}

// Names returns the name of every setting, in the order of the usage text,
// followed by "config" and "version" (flags only).
func Names() []string {
	out := make([]string, 0, len(settings)+2)
	for _, s := range settings {
		out = append(out, s.name)
	}
	return append(out, "config", "version")
}

// EnvName returns the environment variable read for a setting:
// "proto-max-bulk-len" -> "THROTTLEKIT_PROTO_MAX_BULK_LEN".
func EnvName(name string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// Load builds the configuration from command-line arguments (without the
// program name), the environment read through getenv (os.Getenv in main) and
// the configuration file they name, over [Default]. Usage goes to os.Stdout
// for --help; see [LoadTo].
func Load(args []string, getenv func(string) string) (Config, error) {
	return LoadTo(args, getenv, os.Stdout)
}

// LoadTo is [Load] with the usage text for --help written to out.
//
// It returns flag.ErrHelp after writing the usage for -h/--help, ErrVersion
// for --version, and otherwise either a valid Config or every problem found,
// joined. A --help or --version wins over bad values elsewhere.
func LoadTo(args []string, getenv func(string) string, out io.Writer) (Config, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	fs := flag.NewFlagSet("throttlekit-server", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}

	flagVals := map[string]string{}
	for _, s := range settings {
		name := s.name
		fs.Func(name, s.help, func(v string) error { flagVals[name] = v; return nil })
	}
	var configFlag *string
	fs.Func("config", "", func(v string) error { configFlag = &v; return nil })
	version := fs.Bool("version", false, "")

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			Usage(out)
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

func lookup(name string) *setting {
	for i := range settings {
		if settings[i].name == name {
			return &settings[i]
		}
	}
	return nil
}

// Validate checks every field of c against the same rules Load applies to
// text values, and returns every problem joined, or nil.
func (c Config) Validate() error {
	var errs []error
	for _, s := range settings {
		v := s.show(&c)
		var probe Config
		if err := s.parse(&probe, v); err != nil {
			errs = append(errs, &Error{Name: s.name, Value: v, Source: "config value", Reason: err.Error()})
		}
	}
	// Values that the text form cannot show exactly.
	if c.Timeout < 0 {
		errs = append(errs, &Error{Name: "timeout", Value: c.Timeout.String(), Source: "config value", Reason: "must not be negative"})
	}
	if c.SweepInterval < time.Millisecond {
		errs = append(errs, &Error{Name: "sweep-interval", Value: c.SweepInterval.String(), Source: "config value", Reason: "must be at least 1ms"})
	}
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
		fmt.Fprintf(w, "  --%s (env %s, default %q)\n        %s\n", s.name, EnvName(s.name), s.show(&d), s.help)
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

// ConfigGet returns the settings that match a glob pattern (as CONFIG GET
// takes it: * ? [..], case-insensitive) as name/value pairs, sorted by name.
// Names are the flag names, plus the Redis names clients probe where the
// meaning matches (bind, port, maxclients, timeout, databases, save,
// appendonly, maxmemory). requirepass is never returned.
func (c Config) ConfigGet(pattern string) [][2]string {
	pattern = strings.ToLower(pattern)
	all := c.pairs()
	var out [][2]string
	for _, p := range all {
		if ok, err := path.Match(pattern, p[0]); err == nil && ok {
			out = append(out, p)
		}
	}
	return out
}

func (c Config) pairs() [][2]string {
	var out [][2]string
	for _, s := range settings {
		v := s.show(&c)
		switch s.name {
		case "requirepass":
			continue
		case "timeout": // whole seconds, as Redis reports it
			v = strconv.FormatInt(int64(c.Timeout/time.Second), 10)
		case "proto-max-bulk-len": // plain bytes, as Redis reports it
			v = strconv.FormatInt(c.ProtoMaxBulkLen, 10)
		case "client-output-buffer-limit":
			v = strconv.FormatInt(c.ClientOutputBufferLimit, 10)
		}
		out = append(out, [2]string{s.name, v})
	}
	if host, port, err := net.SplitHostPort(c.Addr); err == nil {
		out = append(out, [2]string{"bind", host}, [2]string{"port", port})
	}
	out = append(out,
		[2]string{"databases", "1"},
		[2]string{"save", ""},
		[2]string{"appendonly", "no"},
		[2]string{"maxmemory", "0"},
	)
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}
