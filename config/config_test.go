package config

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

// env returns a getenv over a fixed map.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "throttlekit.conf")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefault(t *testing.T) {
	got, err := Load(nil, nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Addr:                    "127.0.0.1:6380",
		Loops:                   runtime.GOMAXPROCS(0),
		MaxClients:              10000,
		MaxArgs:                 1 << 20,
		ProtoMaxBulkLen:         64 << 20,
		ClientOutputBufferLimit: 128 << 20,
		MaxKeyLen:               65535,
		AdmissionMaxRecords:     1 << 20,
		AdmissionMaxMemory:      256 << 20,
		SweepInterval:           100 * time.Millisecond,
		SlowlogLogSlowerThan:    10000,
		SlowlogMaxLen:           128,
		MetricsAddr:             "127.0.0.1:9121",
		LogLevel:                "info",
		LogFormat:               "text",
		ACLLogMaxLen:            128,
		ProtectedMode:           "yes",
		EnableDebugCommand:      "no",
		AuthFailLimit:           10,
		AuthFailPeriod:          time.Minute,
		ClientQueryBufferLimit:  128 << 20,
		ShutdownTimeout:         10 * time.Second,
		TLSAuthClients:          "yes",
		TLSProtocols:            "TLSv1.2 TLSv1.3",
		PersistMode:             "async", // persistence: settings.go
		PersistInterval:         100 * time.Millisecond,
		PersistFail:             "open",
		GRPCTLS:                 "no", // gRPC front and policies: settings.go
		RLSShadowMode:           "no",
		RLSResponseHeaders:      "none",
		RLSMaxDescriptors:       64,
		RLSMaxEntries:           32,
		UpstreamMode:            "strict", // scale-out: settings.go
		UpstreamFail:            "closed",
		UpstreamTimeout:         time.Second,
		UpstreamPoolSize:        64,
		UpstreamPipeline:        128,
		UpstreamBatch:           "100",
		UpstreamIdleReturn:      100 * time.Millisecond,
	}
	if got != want {
		t.Fatalf("Load(nil) = %+v, want %+v", got, want)
	}
	if got != Default() {
		t.Fatalf("Load(nil) differs from Default()")
	}
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v", err)
	}
}

// TestPrecedence sets one setting in every combination of places and checks
// which value wins: flags > environment > file > defaults.
func TestPrecedence(t *testing.T) {
	tests := []struct {
		name            string
		flag, env, file string // "" = not set in that place
		want            int
	}{
		{"default", "", "", "", 10000},
		{"file", "", "", "300", 300},
		{"env", "", "200", "", 200},
		{"flag", "100", "", "", 100},
		{"env over file", "", "200", "300", 200},
		{"flag over file", "100", "", "300", 100},
		{"flag over env", "100", "200", "", 100},
		{"flag over env over file", "100", "200", "300", 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var args []string
			e := map[string]string{}
			if tt.flag != "" {
				args = append(args, "--maxclients", tt.flag)
			}
			if tt.env != "" {
				e["THROTTLEKIT_MAXCLIENTS"] = tt.env
			}
			if tt.file != "" {
				args = append(args, "--config", writeFile(t, "maxclients "+tt.file+"\n"))
			}
			cfg, err := Load(args, env(e), &bytes.Buffer{})
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MaxClients != tt.want {
				t.Fatalf("MaxClients = %d, want %d", cfg.MaxClients, tt.want)
			}
		})
	}
}

// TestEverySettingEverywhere sets every setting to a non-default value in each
// of the three places and checks the resulting Config field by field.
func TestEverySettingEverywhere(t *testing.T) {
	vals := map[string]string{
		"addr":                       "0.0.0.0:7000",
		"loops":                      "3",
		"shards":                     "64",
		"maxkeys":                    "5000",
		"maxclients":                 "50",
		"proto-max-bulk-len":         "1mb",
		"max-args":                   "100",
		"timeout":                    "30",
		"client-output-buffer-limit": "2m",
		"sweep-interval":             "250ms",
		"slowlog-log-slower-than":    "-1",
		"slowlog-max-len":            "7",
		"latency-monitor-threshold":  "20",
		"requirepass":                "s3cret",
		"aclfile":                    "/etc/throttlekit/users.acl",
		"acllog-max-len":             "5",
		"protected-mode":             "no",
		"enable-debug-command":       "local",
		"auth-fail-limit":            "3",
		"auth-fail-period":           "10s",
		"maxmemory":                  "100mb",
		"max-key-len":                "512",
		"admission-maxrecords":       "5000",
		"admission-maxmemory":        "8mb",
		"client-query-buffer-limit":  "2mb",
		"shutdown-timeout":           "1500ms",
		"tls-port":                   "7443",
		"tls-cert-file":              "/etc/throttlekit/tls.crt",
		"tls-key-file":               "/etc/throttlekit/tls.key",
		"tls-ca-cert-file":           "/etc/throttlekit/ca.crt",
		"tls-auth-clients":           "optional",
		"tls-protocols":              "TLSv1.3",
		"metrics-addr":               ":9999",
		"log-level":                  "DEBUG",
		"log-format":                 "json",
		"persist":                    "postgres://tk@db.example/limits?table=tk",
		"persist-mode":               "sync",
		"persist-interval":           "5ms",
		"persist-fail":               "closed",
		"persist-owner":              "node-7",
		"grpc-addr":                  "127.0.0.1:8081",
		"grpc-tls":                   "yes",
		"policies":                   "/etc/throttlekit/policies",
		"rls-shadow-mode":            "yes",
		"rls-response-headers":       "both",
		"rls-max-descriptors":        "8",
		"rls-max-entries":            "4",
		"upstream":                   "redis-cluster://r1:7000,r2:7000",
		"upstream-mode":              "cached-deny",
		"upstream-mode-prefix":       "hot:=leased",
		"upstream-fail":              "open",
		"upstream-timeout":           "250ms",
		"upstream-pool-size":         "8",
		"upstream-pipeline":          "16",
		"upstream-batch":             "auto",
		"upstream-idle-return":       "2s",
	}
	want := Config{
		Addr: "0.0.0.0:7000", Loops: 3, Shards: 64, MaxKeys: 5000, MaxClients: 50,
		ProtoMaxBulkLen: 1 << 20, MaxArgs: 100, Timeout: 30 * time.Second,
		ClientOutputBufferLimit: 2000000, SweepInterval: 250 * time.Millisecond,
		SlowlogLogSlowerThan: -1, SlowlogMaxLen: 7, LatencyMonitorThreshold: 20,
		RequirePass: "s3cret", MetricsAddr: ":9999", LogLevel: "debug", LogFormat: "json",
		ACLFile: "/etc/throttlekit/users.acl", ACLLogMaxLen: 5, ProtectedMode: "no", EnableDebugCommand: "local",
		AuthFailLimit: 3, AuthFailPeriod: 10 * time.Second, MaxMemory: 100 << 20, MaxKeyLen: 512,
		AdmissionMaxRecords: 5000, AdmissionMaxMemory: 8 << 20,
		ClientQueryBufferLimit: 2 << 20,
		ShutdownTimeout:        1500 * time.Millisecond, TLSPort: 7443, TLSCertFile: "/etc/throttlekit/tls.crt",
		TLSKeyFile: "/etc/throttlekit/tls.key", TLSCACertFile: "/etc/throttlekit/ca.crt",
		TLSAuthClients: "optional", TLSProtocols: "TLSv1.3",
		Persist: "postgres://tk@db.example/limits?table=tk", PersistMode: "sync",
		PersistInterval: 5 * time.Millisecond, PersistFail: "closed", PersistOwner: "node-7",
		GRPCAddr: "127.0.0.1:8081", GRPCTLS: "yes", Policies: "/etc/throttlekit/policies", RLSShadowMode: "yes",
		RLSResponseHeaders: "both", RLSMaxDescriptors: 8, RLSMaxEntries: 4,
		Upstream: "redis-cluster://r1:7000,r2:7000", UpstreamMode: "cached-deny", UpstreamModePrefix: "hot:=leased",
		UpstreamFail: "open", UpstreamTimeout: 250 * time.Millisecond, UpstreamPoolSize: 8, UpstreamPipeline: 16, UpstreamBatch: "auto",
		UpstreamIdleReturn: 2 * time.Second,
	}
	if len(vals) != len(settings) {
		t.Fatalf("test covers %d settings, package has %d", len(vals), len(settings))
	}
	t.Run("flags", func(t *testing.T) {
		var args []string
		for k, v := range vals {
			args = append(args, "--"+k+"="+v)
		}
		got, err := Load(args, nil, &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
	})
	t.Run("env", func(t *testing.T) {
		e := map[string]string{}
		for k, v := range vals {
			e[EnvName(k)] = v
		}
		got, err := Load(nil, env(e), &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
	})
	t.Run("file via env", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("# throttlekit configuration\n\n")
		for k, v := range vals {
			b.WriteString("  " + k + "\t " + v + "   # not a comment: values run to the line end\n")
		}
		// Trailing text is part of the value in redis.conf; this file must fail.
		p := writeFile(t, b.String())
		if _, err := Load(nil, env(map[string]string{"THROTTLEKIT_CONFIG": p}), &bytes.Buffer{}); err == nil {
			t.Fatal("trailing text after values was accepted")
		}
		b.Reset()
		b.WriteString("# throttlekit configuration\n\n")
		for k, v := range vals {
			b.WriteString("  " + strings.ToUpper(k) + "   " + v + "  \n")
		}
		p = writeFile(t, b.String())
		got, err := Load(nil, env(map[string]string{"THROTTLEKIT_CONFIG": p}), &bytes.Buffer{})
		if err != nil {
			t.Fatal(err)
		}
		w := want
		w.ConfigFile = p
		if got != w {
			t.Fatalf("got %+v\nwant %+v", got, w)
		}
	})
}

func TestConfigFlagOverridesEnvFile(t *testing.T) {
	a := writeFile(t, "maxclients 1\n")
	b := writeFile(t, "maxclients 2\n")
	cfg, err := Load([]string{"--config", b}, env(map[string]string{"THROTTLEKIT_CONFIG": a}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxClients != 2 || cfg.ConfigFile != b {
		t.Fatalf("got MaxClients=%d ConfigFile=%q, want 2 from %q", cfg.MaxClients, cfg.ConfigFile, b)
	}
}

func TestFileQuoting(t *testing.T) {
	p := writeFile(t, "requirepass \"pa ss\\\"word\"\nmetrics-addr \"\"\nlog-format 'json'\n")
	cfg, err := Load([]string{"--config", p}, nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RequirePass != `pa ss"word` || cfg.MetricsAddr != "" || cfg.LogFormat != "json" {
		t.Fatalf("got RequirePass=%q MetricsAddr=%q LogFormat=%q", cfg.RequirePass, cfg.MetricsAddr, cfg.LogFormat)
	}
}

func TestMetricsAddrOff(t *testing.T) {
	cfg, err := Load(nil, env(map[string]string{"THROTTLEKIT_METRICS_ADDR": "off"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MetricsAddr != "" {
		t.Fatalf("MetricsAddr = %q, want disabled", cfg.MetricsAddr)
	}
	cfg, err = Load([]string{"--metrics-addr="}, nil, &bytes.Buffer{})
	if err != nil || cfg.MetricsAddr != "" {
		t.Fatalf("--metrics-addr= gave %q, %v", cfg.MetricsAddr, err)
	}
}

// TestBadValues checks that each bad value yields exactly one error line that
// names the setting, the source and the rule.
func TestBadValues(t *testing.T) {
	tests := []struct {
		args []string
		env  map[string]string
		want string // substring of the single error line
	}{
		{[]string{"--addr", "localhost"}, nil, `invalid value "localhost" for addr (flag --addr): must be host:port`},
		{[]string{"--addr", "h:99999"}, nil, `port must be a number from 0 to 65535`},
		{[]string{"--loops", "0"}, nil, `for loops (flag --loops): must be an integer from 1 to 1024`},
		{[]string{"--loops", "two"}, nil, `must be an integer from 1 to 1024`},
		{[]string{"--shards", "-1"}, nil, `for shards (flag --shards): must be an integer from 0 to 65536`},
		{[]string{"--maxkeys", "-5"}, nil, `for maxkeys (flag --maxkeys): must be an integer >= 0`},
		{[]string{"--maxclients", "0"}, nil, `for maxclients (flag --maxclients): must be an integer >= 1`},
		{[]string{"--maxclients", "99999999999999999999"}, nil, `must be an integer >= 1`},
		{[]string{"--proto-max-bulk-len", "12xb"}, nil, `must be a size such as 1048576, 512mb or 64kb`},
		{[]string{"--proto-max-bulk-len", "100"}, nil, `must be at least 1kb`},
		{[]string{"--proto-max-bulk-len", "9999999999999gb"}, nil, `size is too large`},
		{[]string{"--max-args", "0"}, nil, `for max-args (flag --max-args): must be an integer >= 1`},
		{[]string{"--timeout", "-1"}, nil, `for timeout (flag --timeout): must not be negative`},
		{[]string{"--timeout", "-1s"}, nil, `must not be negative`},
		{[]string{"--timeout", "soon"}, nil, `must be a number of seconds or a duration`},
		{[]string{"--client-output-buffer-limit", "-1"}, nil, `must be a size`},
		{[]string{"--sweep-interval", "0"}, nil, `must be at least 1ms`},
		{[]string{"--sweep-interval", "10us"}, nil, `must be at least 1ms`},
		{[]string{"--metrics-addr", "nope"}, nil, `for metrics-addr (flag --metrics-addr): must be host:port`},
		{[]string{"--log-level", "verbose"}, nil, `must be one of debug, info, warn, error`},
		{[]string{"--log-format", "xml"}, nil, `must be one of text, json`},
		{nil, map[string]string{"THROTTLEKIT_MAXCLIENTS": "lots"}, `for maxclients (env THROTTLEKIT_MAXCLIENTS): must be an integer >= 1`},
		{nil, map[string]string{"THROTTLEKIT_LOG_FORMAT": "yaml"}, `(env THROTTLEKIT_LOG_FORMAT): must be one of text, json`},
		{[]string{"--bogus"}, nil, `command line: unknown flag --bogus (see --help)`},
		{[]string{"--addr"}, nil, `command line: flag --addr needs a value`},
		{[]string{"extra"}, nil, `unexpected argument "extra"`},
		{[]string{"--config", "/nonexistent/throttlekit.conf"}, nil, `config file: open /nonexistent/throttlekit.conf`},
		{[]string{"--config="}, nil, `config (flag --config): needs a file name`},
		{[]string{"--maxclients", "10"}, map[string]string{"THROTTLEKIT_MAXCLIENTS": "ten"}, `for maxclients (env THROTTLEKIT_MAXCLIENTS)`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " ")+tt.want, func(t *testing.T) {
			_, err := Load(tt.args, env(tt.env), &bytes.Buffer{})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not match ErrInvalid", err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("want one line, got %q", msg)
			}
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q does not contain %q", msg, tt.want)
			}
		})
	}
}

func TestFileErrors(t *testing.T) {
	tests := []struct {
		text string
		want []string // one error line each, in order
	}{
		{"maxclient 10\n", []string{`:1: unknown setting "maxclient"`}},
		{"# ok\nloops 2\nversion 1\n", []string{`:3: unknown setting "version"`}},
		{"config other.conf\n", []string{`:1: unknown setting "config"`}},
		{"maxclients 10\nmaxclients 20\n", []string{`:2: maxclients is already set on line 1`}},
		{"requirepass \"abc\n", []string{`:1: requirepass: unbalanced or malformed double quotes`}},
		{"requirepass 'abc\n", []string{`:1: requirepass: unbalanced single quotes`}},
		{"maxclients x\n\ntimeout -3\nfoo bar\n", []string{
			`invalid value "x" for maxclients (file `,
			`invalid value "-3" for timeout (file `,
			`:4: unknown setting "foo"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.text, func(t *testing.T) {
			p := writeFile(t, tt.text)
			_, err := Load([]string{"--config", p}, nil, &bytes.Buffer{})
			if err == nil {
				t.Fatal("no error")
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tt.want) {
				t.Fatalf("got %d error lines, want %d: %q", len(lines), len(tt.want), lines)
			}
			for i, w := range tt.want {
				if !strings.Contains(lines[i], w) {
					t.Errorf("line %d = %q, want it to contain %q", i, lines[i], w)
				}
				if w[0] == ':' && !strings.HasPrefix(lines[i], p+w[:2]) {
					t.Errorf("line %d = %q, want it to start with %q", i, lines[i], p+w[:2])
				}
			}
		})
	}
}

func TestHelpAndVersion(t *testing.T) {
	for _, arg := range []string{"-h", "--help", "-help"} {
		var out bytes.Buffer
		_, err := Load([]string{"--maxclients", "bad", arg}, nil, &out)
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s: err = %v, want flag.ErrHelp", arg, err)
		}
		if !strings.HasPrefix(out.String(), "Usage: throttlekit-server") {
			t.Fatalf("%s: usage not written: %q", arg, out.String())
		}
	}
	var out bytes.Buffer
	_, err := Load([]string{"--version"}, env(map[string]string{"THROTTLEKIT_LOOPS": "bad"}), &out)
	if !errors.Is(err, ErrVersion) {
		t.Fatalf("err = %v, want ErrVersion", err)
	}
	if out.Len() != 0 {
		t.Fatalf("--version wrote %q", out.String())
	}
}

func TestUsageListsEveryFlagWithDefault(t *testing.T) {
	var out bytes.Buffer
	Usage(&out)
	u := out.String()
	d := Default()
	for _, s := range settings {
		line := "--" + s.name + " (env " + EnvName(s.name) + `, default "` + s.show(&d) + `")`
		if !strings.Contains(u, line) {
			t.Errorf("usage lacks %q", line)
		}
	}
	for _, name := range append(names(), "config", "version") {
		if !strings.Contains(u, "--"+name) {
			t.Errorf("usage lacks --%s", name)
		}
	}
	for _, want := range []string{`default "64mb"`, `default "128mb"`, `default "127.0.0.1:6380"`, `default "127.0.0.1:9121"`, `default "128mb"`, "flags > environment > config file > defaults"} {
		if !strings.Contains(u, want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}

func TestExit(t *testing.T) {
	_, bad := Load([]string{"--maxclients", "0", "--loops", "0"}, nil, &bytes.Buffer{})
	tests := []struct {
		name string
		err  error
		code int
		out  string
	}{
		{"ok", nil, 0, ""},
		{"help", flag.ErrHelp, 0, ""},
		{"version", ErrVersion, 0, ""},
		{"one", &Error{Name: "addr", Value: "x", Source: "flag --addr", Reason: "must be host:port"},
			2, "throttlekit-server: invalid value \"x\" for addr (flag --addr): must be host:port\n"},
		{"two", bad, 2,
			"throttlekit-server: invalid value \"0\" for loops (flag --loops): must be an integer from 1 to 1024\n" +
				"throttlekit-server: invalid value \"0\" for maxclients (flag --maxclients): must be an integer >= 1\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if code := Exit(tt.err, &out); code != tt.code {
				t.Errorf("Exit = %d, want %d", code, tt.code)
			}
			if out.String() != tt.out {
				t.Errorf("stderr = %q, want %q", out.String(), tt.out)
			}
		})
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"1024", 1024, true}, {"1k", 1000, true}, {"1kb", 1024, true},
		{"1K", 1000, true}, {"1KB", 1024, true}, {"2m", 2e6, true}, {"2mb", 2 << 20, true},
		{"512mb", 512 << 20, true}, {"3g", 3e9, true}, {"3gb", 3 << 30, true}, {"7b", 7, true},
		{" 5 mb ", 5 << 20, true},
		{"", 0, false}, {"mb", 0, false}, {"-1", 0, false}, {"1.5mb", 0, false}, {"1tb", 0, false},
		{"8589934592gb", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestParseDuration(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true}, {"30", 30 * time.Second, true}, {"1.5s", 1500 * time.Millisecond, true},
		{"250ms", 250 * time.Millisecond, true}, {"5m", 5 * time.Minute, true}, {"1h", time.Hour, true},
		{"-1", 0, false}, {"-5s", 0, false}, {"", 0, false}, {"5 minutes", 0, false},
		{"99999999999999", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestValidate(t *testing.T) {
	c := Default()
	c.Loops = 0
	c.Timeout = -time.Second
	c.SweepInterval = 0
	c.LogFormat = "xml"
	err := c.Validate()
	if err == nil {
		t.Fatal("Validate accepted a bad Config")
	}
	msg := err.Error()
	for _, want := range []string{"for loops", "for timeout", "for sweep-interval", "for log-format"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Validate error %q lacks %q", msg, want)
		}
	}
}

func TestConfigGet(t *testing.T) {
	c := Default()
	c.Timeout = 90 * time.Second
	c.RequirePass = "secret"
	tests := []struct {
		pattern string
		want    [][2]string
	}{
		{"maxclients", [][2]string{{"maxclients", "10000"}}},
		{"MAXCLIENTS", [][2]string{{"maxclients", "10000"}}},
		{"timeout", [][2]string{{"timeout", "90"}}},
		{"proto-max-bulk-len", [][2]string{{"proto-max-bulk-len", "67108864"}}},
		{"client-query-buffer-limit", [][2]string{{"client-query-buffer-limit", "134217728"}}},
		{"shutdown-timeout", [][2]string{{"shutdown-timeout", "10s"}}},
		{"tls-*", [][2]string{{"tls-auth-clients", "yes"}, {"tls-ca-cert-file", ""}, {"tls-cert-file", ""},
			{"tls-key-file", ""}, {"tls-port", "0"}, {"tls-protocols", "TLSv1.2 TLSv1.3"}}},
		{"port", [][2]string{{"port", "6380"}}},
		{"databases", [][2]string{{"databases", "1"}}},
		{"requirepass", nil},
		{"nosuch", nil},
		{"max*", [][2]string{{"max-args", "1048576"}, {"max-key-len", "65535"}, {"maxclients", "10000"}, {"maxkeys", "0"}, {"maxmemory", "0"}}},
		{"maxkey?", [][2]string{{"maxkeys", "0"}}},
		{"MAX*ARGS", [][2]string{{"max-args", "1048576"}}},
		{"*-len", [][2]string{{"acllog-max-len", "128"}, {"max-key-len", "65535"}, {"proto-max-bulk-len", "67108864"}, {"slowlog-max-len", "128"}}},
		{"auth-fail-*", [][2]string{{"auth-fail-limit", "10"}, {"auth-fail-period", "60"}}},
		{"protected-mode", [][2]string{{"protected-mode", "yes"}}},
		{"enable-debug-command", [][2]string{{"enable-debug-command", "no"}}},
		{`max\*`, nil}, // an escaped star is a literal one
		{"sweep-interval", [][2]string{{"sweep-interval", "100ms"}}},
		{"client-output-buffer-limit", [][2]string{{"client-output-buffer-limit", "134217728"}}},
		{"bind", [][2]string{{"bind", "127.0.0.1"}}},
		{"*" + strings.Repeat("a*", 40) + "b", nil}, // a pattern built to be slow stops early
	}
	for _, tt := range tests {
		if got := c.ConfigGet(tt.pattern); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ConfigGet(%q) = %q, want %q", tt.pattern, got, tt.want)
		}
	}
	for _, p := range c.ConfigGet("*") {
		if p[0] == "requirepass" || p[1] == "secret" {
			t.Errorf("ConfigGet(*) leaks the password: %q", p)
		}
	}
}

// FuzzFile feeds arbitrary bytes to the configuration file parser: it must
// never panic, and every value it accepts must pass its setting's check.
// (Rules across settings, such as the query buffer holding a bulk, are
// checked once all places are read: TestAcrossSettings.)
func FuzzFile(f *testing.F) {
	f.Add([]byte("maxclients 10\n# c\nrequirepass \"a b\"\n"))
	f.Add([]byte("addr '\n"))
	f.Add([]byte("timeout 5m\r\nproto-max-bulk-len 1gb\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Default()
		errs := applyFile(&c, "fuzz.conf", data)
		if len(errs) == 0 {
			for _, s := range settings {
				if err := s.check(&c); err != nil {
					t.Fatalf("file accepted but %s invalid: %v", s.name, err)
				}
			}
		}
		for _, err := range errs {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not match ErrInvalid", err)
			}
		}
	})
}

// TestExampleFile loads deploy/throttlekit.conf: the example must stay valid
// and match the defaults it documents.
func TestExampleFile(t *testing.T) {
	cfg, err := Load([]string{"--config", "../deploy/throttlekit.conf"}, nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.ConfigFile = "../deploy/throttlekit.conf"
	if cfg != want {
		t.Fatalf("example file gives %+v\nwant the defaults %+v", cfg, want)
	}
}

// names returns the name of every setting, in the order of the usage text.
func names() []string {
	out := make([]string, 0, len(settings))
	for _, s := range settings {
		out = append(out, s.name)
	}
	return out
}

// TestTable checks the invariants every entry of the settings table must
// keep: a unique lower-case name, help text, and a text form that parses
// back to the same value, so --help shows defaults a user can paste.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	d := Default()
	for _, s := range settings {
		if s.name == "" || s.name != strings.ToLower(s.name) || strings.ContainsAny(s.name, " _") || seen[s.name] {
			t.Errorf("setting name %q: want unique, lower-case, words joined by dashes", s.name)
		}
		seen[s.name] = true
		if s.doc == "" {
			t.Errorf("setting %s has no help text", s.name)
		}
		var c Config
		if err := s.parse(&c, s.show(&d)); err != nil {
			t.Errorf("setting %s: its default %q does not parse: %v", s.name, s.show(&d), err)
		}
		if s.show(&c) != s.show(&d) {
			t.Errorf("setting %s: default %q parses back as %q", s.name, s.show(&d), s.show(&c))
		}
	}
	for _, r := range redisCompat {
		if seen[r.name] {
			t.Errorf("%s is both a setting and a Redis compatibility name", r.name)
		}
	}
}

// TestDocsListEverySetting keeps the documentation in step with the table:
// the flag tables of README.md and deploy/README.md have a row for every
// setting with its environment variable and default, and the example file
// deploy/throttlekit.conf mentions every setting.
func TestDocsListEverySetting(t *testing.T) {
	d := Default()
	for _, doc := range []string{"../README.md", "../deploy/README.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rows := map[string][]string{} // flag -> cells
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.HasPrefix(line, "| `--") {
				continue
			}
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows[strings.Trim(cells[0], "`")] = cells
		}
		for _, s := range settings {
			cells, ok := rows["--"+s.name]
			if !ok || len(cells) < 4 {
				t.Errorf("%s: no row for --%s", doc, s.name)
				continue
			}
			if cells[1] != "`"+EnvName(s.name)+"`" {
				t.Errorf("%s: --%s has environment %s, want `%s`", doc, s.name, cells[1], EnvName(s.name))
			}
			def := s.show(&d)
			switch {
			case s.name == "loops":
				if !strings.Contains(cells[2], "GOMAXPROCS") {
					t.Errorf("%s: --loops default %q, want GOMAXPROCS", doc, cells[2])
				}
			case def == "":
				if !strings.HasPrefix(cells[2], "empty") {
					t.Errorf("%s: --%s default %q, want empty", doc, s.name, cells[2])
				}
			case !strings.HasPrefix(cells[2], "`"+def+"`"):
				t.Errorf("%s: --%s default %q, want `%s`", doc, s.name, cells[2], def)
			}
		}
	}
	conf, err := os.ReadFile("../deploy/throttlekit.conf")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(conf), "\n")
	for _, s := range settings {
		found := false
		for _, l := range lines {
			if strings.HasPrefix(strings.TrimLeft(l, "# "), s.name+" ") {
				found = true
			}
		}
		if !found {
			t.Errorf("deploy/throttlekit.conf does not mention %s", s.name)
		}
	}
}

// TestAcrossSettings checks the rules that tie settings together: Load
// refuses a combination whose parts are each valid.
func TestAcrossSettings(t *testing.T) {
	tests := []struct {
		args []string
		want string // "" = accepted
	}{
		{nil, ""},
		{[]string{"--proto-max-bulk-len", "512mb"}, "client-query-buffer-limit"},
		{[]string{"--proto-max-bulk-len", "512mb", "--client-query-buffer-limit", "1gb"}, ""},
		{[]string{"--proto-max-bulk-len", "512mb", "--client-query-buffer-limit", "1gb", "--client-output-buffer-limit", "0"}, ""},
		{[]string{"--proto-max-bulk-len", "512mb", "--client-query-buffer-limit", "1gb", "--client-output-buffer-limit", "1gb"}, ""},
		// Redis accepts an output limit below the largest bulk: a client
		// whose replies outgrow it is closed, whatever produced them.
		{[]string{"--client-output-buffer-limit", "64mb"}, ""},
		{[]string{"--client-output-buffer-limit", "2mb"}, ""},
		{[]string{"--proto-max-bulk-len", "2mb", "--client-query-buffer-limit", "2mb"}, "must hold one bulk of proto-max-bulk-len"},
		{[]string{"--proto-max-bulk-len", "1mb", "--client-query-buffer-limit", "1088kb"}, ""},
		{[]string{"--tls-port", "6390"}, "needs tls-cert-file and tls-key-file"},
		{[]string{"--tls-port", "6390", "--tls-cert-file", "c", "--tls-key-file", "k"}, "needs tls-ca-cert-file"},
		{[]string{"--tls-port", "6390", "--tls-cert-file", "c", "--tls-key-file", "k", "--tls-auth-clients", "no"}, ""},
		{[]string{"--tls-protocols", "TLSv1.2 SSLv3"}, "unknown TLS protocol"},
		{[]string{"--tls-auth-clients", "maybe"}, "tls-auth-clients"},
		{[]string{"--grpc-addr", "127.0.0.1:8081"}, "needs policies"},
		{[]string{"--grpc-addr", "127.0.0.1:8081", "--policies", "p.yaml"}, ""},
		{[]string{"--grpc-tls", "yes", "--policies", "p.yaml"}, "needs grpc-addr"},
		{[]string{"--grpc-addr", "127.0.0.1:8081", "--policies", "p.yaml", "--grpc-tls", "yes"}, "needs tls-cert-file and tls-key-file"},
		{[]string{"--grpc-addr", "127.0.0.1:8081", "--policies", "p.yaml", "--grpc-tls", "yes", "--tls-cert-file", "c", "--tls-key-file", "k"}, "needs tls-ca-cert-file to verify gRPC"},
		{[]string{"--grpc-addr", "127.0.0.1:8081", "--policies", "p.yaml", "--grpc-tls", "yes", "--tls-cert-file", "c", "--tls-key-file", "k", "--tls-auth-clients", "no"}, ""},
		{[]string{"--rls-response-headers", "all"}, "rls-response-headers"},
	}
	for _, tt := range tests {
		_, err := Load(tt.args, nil, &bytes.Buffer{})
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("Load(%q) = %v, want accepted", tt.args, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("Load(%q) = %v, want an error containing %q", tt.args, err, tt.want)
		case tt.want != "" && !errors.Is(err, ErrInvalid):
			t.Errorf("Load(%q) = %v, not ErrInvalid", tt.args, err)
		}
	}
}
