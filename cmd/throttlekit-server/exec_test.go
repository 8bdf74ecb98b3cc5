package main

// Tests of the built binary: main itself (os.Args, os.Getenv, os.Exit and
// real signals), which the in-process tests of run and runContext bypass.
// The binary is built once per test run with a version stamped in through
// -ldflags, as the release build does.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/lockedbuf"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

const execVersion = "v0.0.0-exectest"

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binary returns the path of the server binary, building it on first use.
// It skips the test when no go command is on PATH.
func binary(t *testing.T) string {
	t.Helper()
	goCmd, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build the binary: %v", err)
	}
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "throttlekit-exec-test"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "throttlekit-server")
		cmd := exec.Command(goCmd, "build", "-o", binPath, "-ldflags", "-X main.version="+execVersion, ".")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// environ is an environment for the child holding only env, so that no
// THROTTLEKIT_* variable of the test's own environment leaks in.
func environ(env map[string]string) []string {
	out := []string{"HOME=" + os.TempDir()}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// TestBinaryExitStatus runs the binary with a bad configuration in each
// place it can come from and expects status 2, nothing on stdout and one
// line per problem on stderr, before any listener opens. --version and
// --help exit 0.
func TestBinaryExitStatus(t *testing.T) {
	bin := binary(t)
	dir := t.TempDir()
	unknownSetting := filepath.Join(dir, "unknown.conf")
	badValue := filepath.Join(dir, "badvalue.conf")
	for name, text := range map[string]string{
		unknownSetting: "# comment\nmaxclients 10\nno-such-setting 1\n",
		badValue:       "maxclients 10\nmaxkeys -1\n",
	} {
		if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		args   []string
		env    map[string]string
		status int
		stdout string   // exact
		stderr []string // one line each, in order, each containing the text
	}{
		{"version", []string{"--version"}, nil, 0, "throttlekit-server " + execVersion + "\n", nil},
		{"version wins over a bad value", []string{"--maxclients", "x", "--version"}, nil, 0, "throttlekit-server " + execVersion + "\n", nil},
		{"bad flag value", []string{"--maxclients", "x"}, nil, 2, "", []string{"--maxclients"}},
		{"unknown flag", []string{"--no-such-flag"}, nil, 2, "", []string{"unknown flag --no-such-flag"}},
		{"stray argument", []string{"serve"}, nil, 2, "", []string{`unexpected argument "serve"`}},
		{"bad env value", nil, map[string]string{"THROTTLEKIT_MAXKEYS": "lots"}, 2, "", []string{"env THROTTLEKIT_MAXKEYS"}},
		{"bad env value under a good flag", []string{"--maxkeys", "10"}, map[string]string{"THROTTLEKIT_MAXKEYS": "lots"}, 2, "", []string{"env THROTTLEKIT_MAXKEYS"}},
		{"unknown setting in file", []string{"--config", unknownSetting}, nil, 2, "", []string{"unknown.conf:3"}},
		{"bad value in file via env", nil, map[string]string{"THROTTLEKIT_CONFIG": badValue}, 2, "", []string{"badvalue.conf:2"}},
		{"missing file", []string{"--config", filepath.Join(dir, "absent.conf")}, nil, 2, "", []string{"absent.conf"}},
		{"one line per problem", []string{"--maxclients", "0", "--config", unknownSetting},
			map[string]string{"THROTTLEKIT_LOG_FORMAT": "xml"}, 2, "",
			[]string{"unknown.conf:3", "env THROTTLEKIT_LOG_FORMAT", "flag --maxclients"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tt.args...)
			cmd.Env = environ(tt.env)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("still running after 20s (did it start serving?); stderr %q", stderr.String())
			}
			status := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				status = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if status != tt.status {
				t.Fatalf("exit status %d, want %d; stderr %q", status, tt.status, stderr.String())
			}
			if stdout.String() != tt.stdout {
				t.Errorf("stdout %q, want %q", stdout.String(), tt.stdout)
			}
			var lines []string
			if s := stderr.String(); s != "" {
				lines = strings.Split(strings.TrimSuffix(s, "\n"), "\n")
			}
			if len(lines) != len(tt.stderr) {
				t.Fatalf("stderr has %d lines, want %d: %q", len(lines), len(tt.stderr), stderr.String())
			}
			for i, want := range tt.stderr {
				if !strings.HasPrefix(lines[i], "throttlekit-server: ") || !strings.Contains(lines[i], want) {
					t.Errorf("stderr line %d = %q, want \"throttlekit-server: ...%s...\"", i+1, lines[i], want)
				}
			}
		})
	}
	t.Run("help", func(t *testing.T) {
		out, err := exec.Command(bin, "--help").Output()
		if err != nil {
			t.Fatalf("--help: %v", err)
		}
		if !strings.Contains(string(out), "Precedence: flags > environment > config file > defaults.") {
			t.Errorf("--help does not state the precedence:\n%s", out)
		}
	})
}

// TestBinaryPrecedenceAndSIGTERM starts the binary with settings in all three
// places and checks, by what it actually does, that the flag beats the
// environment, which beats the file, which beats the default; then SIGTERM
// stops it with status 0.
func TestBinaryPrecedenceAndSIGTERM(t *testing.T) {
	bin := binary(t)
	fileAddr, envAddr, flagAddr := testserver.FreeAddr(t), testserver.FreeAddr(t), testserver.FreeAddr(t)
	fileMetrics, envMetrics := testserver.FreeAddr(t), testserver.FreeAddr(t)
	conf := filepath.Join(t.TempDir(), "throttlekit.conf")
	err := os.WriteFile(conf, []byte(strings.Join([]string{
		"addr " + fileAddr,
		"metrics-addr " + fileMetrics,
		"maxclients 7",
		"maxkeys 1234", // set only here
		"log-format text",
		"loops 1",
	}, "\n")+"\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--addr", flagAddr, "--maxclients", "2")
	cmd.Env = environ(map[string]string{
		"THROTTLEKIT_CONFIG":       conf,
		"THROTTLEKIT_ADDR":         envAddr,
		"THROTTLEKIT_METRICS_ADDR": envMetrics,
		"THROTTLEKIT_MAXCLIENTS":   "5",
		"THROTTLEKIT_LOG_FORMAT":   "json",
	})
	p := startProc(t, cmd)

	// Up means /readyz answers 200 on the environment's metrics address.
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case err := <-p.exited:
			p.waited = true
			t.Fatalf("exited before it was ready: %v; stderr %s", err, p.stderr.String())
		default:
		}
		if code, _ := httpGet(t, envMetrics, "/readyz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not ready on %s within 15s; stderr %s", envMetrics, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := httpGet(t, envMetrics, "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d %q", code, body)
	}
	// addr: flag over env over file. metrics-addr: env over file.
	for _, a := range []string{fileAddr, envAddr, fileMetrics} {
		if c, err := net.DialTimeout("tcp", a, time.Second); err == nil {
			c.Close()
			t.Errorf("something listens on %s, an address a higher place overrode", a)
		}
	}
	c1 := dialRESP(t, flagAddr)
	for setting, want := range map[string]string{
		"maxclients": "2",    // flag over env (5) over file (7)
		"maxkeys":    "1234", // file over default
		"loops":      "1",    // file over default
		"addr":       flagAddr,
	} {
		if got := c1.do(t, "CONFIG", "GET", setting); got != setting+" "+want {
			t.Errorf("CONFIG GET %s = %q, want %q", setting, got, setting+" "+want)
		}
	}
	// maxclients 2 reaches the server, not only CONFIG GET.
	c2 := dialRESP(t, flagAddr)
	if got := c2.do(t, "PING"); got != "PONG" {
		t.Fatalf("second client PING = %q", got)
	}
	c3 := dialRESP(t, flagAddr)
	_ = c3.c.SetReadDeadline(time.Now().Add(5 * time.Second)) // an admitted client gets no greeting
	if got := c3.line(t); got != "-ERR max number of clients reached" {
		t.Errorf("third client got %q, want the maxclients error", got)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		p.waited = true
		if err != nil {
			t.Fatalf("after SIGTERM: %v, want exit status 0; stderr %s", err, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("still running 30s after SIGTERM; stderr %s", p.stderr.String())
	}
	if _, err := c1.r.ReadByte(); err == nil {
		t.Error("client connection still open after exit")
	}
	if p.stdout.String() != "" {
		t.Errorf("stdout %q, want nothing", p.stdout.String())
	}
	// log-format: env (json) over file (text). Every line is a JSON record.
	var msgs []string
	for _, line := range strings.Split(strings.TrimSuffix(p.stderr.String(), "\n"), "\n") {
		var rec struct{ Msg string }
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", line, err)
		}
		msgs = append(msgs, rec.Msg)
	}
	got := strings.Join(msgs, "|")
	for _, want := range []string{"listening", "shutting down", "stopped"} {
		if !strings.Contains(got, want) {
			t.Errorf("log messages %q lack %q", got, want)
		}
	}
}

// TestBinarySIGTERMFlushesReplies: a client that pipelined 300k commands
// (about 13 MB of replies, more than the socket buffers hold)
// and read none of the replies when the binary got SIGTERM still reads
// every reply whole, then EOF, and the process exits with status 0. The
// signal is sent once every command has run (INFO commandstats on a
// second connection says so), so each reply exists before shutdown begins.
func TestBinarySIGTERMFlushesReplies(t *testing.T) {
	const n = 300_000
	bin := binary(t)
	addr := testserver.FreeAddr(t)
	cmd := exec.Command(bin, "--addr", addr, "--metrics-addr=", "--shutdown-timeout", "60s")
	cmd.Env = environ(nil)
	p := startProc(t, cmd)
	var c net.Conn
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if c, err = net.Dial("tcp", addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listener on %s within 15s: %v; stderr %s", addr, err, p.stderr.String())
		}
	}
	defer c.Close()
	one := "*4\r\n$14\r\nTHROTTLE.CHECK\r\n$1\r\nk\r\n$7\r\n1000000\r\n$2\r\n1h\r\n"
	if _, err := io.WriteString(c, strings.Repeat(one, n)); err != nil {
		t.Fatalf("write the pipeline: %v", err)
	}
	probe := dialRESP(t, addr)
	info := func() string { // INFO commandstats: one bulk string of several lines
		if _, err := io.WriteString(probe.c, "*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n"); err != nil {
			t.Fatal(err)
		}
		size, err := strconv.Atoi(strings.TrimPrefix(probe.line(t), "$"))
		if err != nil {
			t.Fatalf("INFO reply header: %v", err)
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(probe.r, body); err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
	want := fmt.Sprintf("cmdstat_throttle.check:calls=%d,", n)
	for deadline := time.Now().Add(60 * time.Second); !strings.Contains(info(), want); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not run %d commands within 60s", n)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReaderSize(c, 64<<10)
	for i := range n {
		var lines [6]string
		for j := range lines {
			s, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("reply %d of %d, line %d: %v (read %q)", i+1, n, j+1, err, s)
			}
			lines[j] = s
		}
		remaining, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(lines[3], ":"), "\r\n"))
		if lines[0] != "*5\r\n" || lines[1] != ":1\r\n" || lines[2] != ":1000000\r\n" ||
			err != nil || remaining < 1000000-n || remaining >= 1000000 || lines[4][0] != ':' || lines[5] != ":0\r\n" {
			t.Fatalf("reply %d of %d = %q", i+1, n, lines)
		}
	}
	if b, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("after %d replies: read %q, %v; want EOF", n, b, err)
	}
	select {
	case err := <-p.exited:
		p.waited = true
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v; stderr %s", err, p.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("still running 60s after SIGTERM")
	}
}

// proc is a started binary. Its exit arrives on exited; whoever receives
// it sets waited, and otherwise the test's cleanup kills the process.
type proc struct {
	stdout, stderr lockedbuf.Buffer
	exited         chan error
	waited         bool
}

// startProc starts cmd with its output captured.
func startProc(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{exited: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = &p.stdout, &p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if !p.waited {
			_ = cmd.Process.Kill()
			<-p.exited
		}
	})
	return p
}
