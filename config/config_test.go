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
	got, err := LoadTo(nil, nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Addr:                    "127.0.0.1:6380",
		Loops:                   runtime.GOMAXPROCS(0),
		MaxClients:              10000,
		MaxArgs:                 1 << 20,
		ProtoMaxBulkLen:         512 << 20,
		ClientOutputBufferLimit: 32 << 20,
		SweepInterval:           100 * time.Millisecond,
		MetricsAddr:             "127.0.0.1:9121",
		LogLevel:                "info",
		LogFormat:               "text",
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
			cfg, err := LoadTo(args, env(e), &bytes.Buffer{})
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
		"client-output-buffer-limit": "64k",
		"sweep-interval":             "250ms",
		"requirepass":                "s3cret",
		"metrics-addr":               ":9999",
		"log-level":                  "DEBUG",
		"log-format":                 "json",
	}
	want := Config{
		Addr: "0.0.0.0:7000", Loops: 3, Shards: 64, MaxKeys: 5000, MaxClients: 50,
		ProtoMaxBulkLen: 1 << 20, MaxArgs: 100, Timeout: 30 * time.Second,
		ClientOutputBufferLimit: 64000, SweepInterval: 250 * time.Millisecond,
		RequirePass: "s3cret", MetricsAddr: ":9999", LogLevel: "debug", LogFormat: "json",
	}
	if len(vals) != len(settings) {
		t.Fatalf("test covers %d settings, package has %d", len(vals), len(settings))
	}
	t.Run("flags", func(t *testing.T) {
		var args []string
		for k, v := range vals {
			args = append(args, "--"+k+"="+v)
		}
		got, err := LoadTo(args, nil, &bytes.Buffer{})
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
		got, err := LoadTo(nil, env(e), &bytes.Buffer{})
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
		if _, err := LoadTo(nil, env(map[string]string{"THROTTLEKIT_CONFIG": p}), &bytes.Buffer{}); err == nil {
			t.Fatal("trailing text after values was accepted")
		}
		b.Reset()
		b.WriteString("# throttlekit configuration\n\n")
		for k, v := range vals {
			b.WriteString("  " + strings.ToUpper(k) + "   " + v + "  \n")
		}
		p = writeFile(t, b.String())
		got, err := LoadTo(nil, env(map[string]string{"THROTTLEKIT_CONFIG": p}), &bytes.Buffer{})
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
	cfg, err := LoadTo([]string{"--config", b}, env(map[string]string{"THROTTLEKIT_CONFIG": a}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MaxClients != 2 || cfg.ConfigFile != b {
		t.Fatalf("got MaxClients=%d ConfigFile=%q, want 2 from %q", cfg.MaxClients, cfg.ConfigFile, b)
	}
}

func TestFileQuoting(t *testing.T) {
	p := writeFile(t, "requirepass \"pa ss\\\"word\"\nmetrics-addr \"\"\nlog-format 'json'\n")
	cfg, err := LoadTo([]string{"--config", p}, nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RequirePass != `pa ss"word` || cfg.MetricsAddr != "" || cfg.LogFormat != "json" {
		t.Fatalf("got RequirePass=%q MetricsAddr=%q LogFormat=%q", cfg.RequirePass, cfg.MetricsAddr, cfg.LogFormat)
	}
}

func TestMetricsAddrOff(t *testing.T) {
	cfg, err := LoadTo(nil, env(map[string]string{"THROTTLEKIT_METRICS_ADDR": "off"}), &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MetricsAddr != "" {
		t.Fatalf("MetricsAddr = %q, want disabled", cfg.MetricsAddr)
	}
	cfg, err = LoadTo([]string{"--metrics-addr="}, nil, &bytes.Buffer{})
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
			_, err := LoadTo(tt.args, env(tt.env), &bytes.Buffer{})
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
			_, err := LoadTo([]string{"--config", p}, nil, &bytes.Buffer{})
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
		_, err := LoadTo([]string{"--maxclients", "bad", arg}, nil, &out)
		if !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("%s: err = %v, want flag.ErrHelp", arg, err)
		}
		if !strings.HasPrefix(out.String(), "Usage: throttlekit-server") {
			t.Fatalf("%s: usage not written: %q", arg, out.String())
		}
	}
	var out bytes.Buffer
	_, err := LoadTo([]string{"--version"}, env(map[string]string{"THROTTLEKIT_LOOPS": "bad"}), &out)
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
	for _, name := range Names() {
		if !strings.Contains(u, "--"+name) {
			t.Errorf("usage lacks --%s", name)
		}
	}
	for _, want := range []string{`default "512mb"`, `default "127.0.0.1:6380"`, `default "127.0.0.1:9121"`, `default "32mb"`, "flags > environment > config file > defaults"} {
		if !strings.Contains(u, want) {
			t.Errorf("usage lacks %q", want)
		}
	}
}

func TestExit(t *testing.T) {
	_, bad := LoadTo([]string{"--maxclients", "0", "--loops", "0"}, nil, &bytes.Buffer{})
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
		{"proto-max-bulk-len", [][2]string{{"proto-max-bulk-len", "536870912"}}},
		{"port", [][2]string{{"port", "6380"}}},
		{"databases", [][2]string{{"databases", "1"}}},
		{"requirepass", nil},
		{"nosuch", nil},
		{"max*", [][2]string{{"max-args", "1048576"}, {"maxclients", "10000"}, {"maxkeys", "0"}, {"maxmemory", "0"}}},
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
// never panic, and whatever it accepts must be a valid Config.
func FuzzFile(f *testing.F) {
	f.Add([]byte("maxclients 10\n# c\nrequirepass \"a b\"\n"))
	f.Add([]byte("addr '\n"))
	f.Add([]byte("timeout 5m\r\nproto-max-bulk-len 1gb\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := Default()
		errs := applyFile(&c, "fuzz.conf", data)
		if len(errs) == 0 {
			if err := c.Validate(); err != nil {
				t.Fatalf("file accepted but Config invalid: %v", err)
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
	cfg, err := LoadTo([]string{"--config", "../deploy/throttlekit.conf"}, nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.ConfigFile = "../deploy/throttlekit.conf"
	if cfg != want {
		t.Fatalf("example file gives %+v\nwant the defaults %+v", cfg, want)
	}
}
