package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/throttlekit/throttlekit-server/bench/loadgen"
)

// server is one running server process under test.
type server struct {
	name        string // "redis" or "throttlekit"
	addr        string
	metricsAddr string // throttlekit only; "" if disabled
	cmd         *exec.Cmd
	log         string        // path of its combined output
	done        chan struct{} // closed when the process has exited
	waitErr     error         // its exit status, valid after done
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startArgv runs the command line argv (argv[0] the program, which may be a
// wrapper such as taskset) and waits until addr answers PING.
func startArgv(name string, argv []string, addr, dir string) (*server, error) {
	s, err := launch(name, argv, addr, dir)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if s.exited() {
			return nil, s.exitError()
		}
		if r, err := call(addr, "PING"); err == nil && strings.Contains(r, "PONG") {
			return s, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	return nil, fmt.Errorf("%s did not answer PING on %s within 15s (log %s)", name, addr, s.log)
}

// launch starts argv with its output in a log file in dir and returns at
// once, without waiting for the server to listen.
func launch(name string, argv []string, addr, dir string) (*server, error) {
	logPath := filepath.Join(dir, name+"-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	lf.Close()
	s := &server{name: name, addr: addr, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { s.waitErr = cmd.Wait(); close(s.done) }()
	return s, nil
}

// exited reports whether the process has ended.
func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// exitError describes an ended process with its exit status and log.
func (s *server) exitError() error {
	out, _ := os.ReadFile(s.log)
	return fmt.Errorf("%s exited (%v): %s", s.name, s.waitErr, bytes.TrimSpace(out))
}

// stop asks the server to exit (SIGTERM) and kills it after 10 seconds.
func (s *server) stop() { s.stopWithin(10 * time.Second) }

// stopWithin asks the server to exit (SIGTERM), kills it if it has not
// exited after grace, and returns its exit status (nil for status 0; an
// error saying so if it had to be killed).
func (s *server) stopWithin(grace time.Duration) error {
	if s == nil || s.cmd.Process == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return s.waitErr
	case <-time.After(grace):
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("%s did not exit within %v of SIGTERM: killed", s.name, grace)
	}
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// startRedis starts redis-server on a free loopback port without persistence.
func startRedis(bin, dir string) (*server, error) { return startRedisVia(nil, bin, dir) }

// startRedisVia is startRedis with the server run through the command line
// wrap (e.g. taskset -c 1), or directly if wrap is empty.
func startRedisVia(wrap []string, bin, dir string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--protected-mode", "yes", "--dir", dir, "--daemonize", "no"}
	argv := append(append(append([]string(nil), wrap...), bin), args...)
	return startArgv("redis", argv, fmt.Sprintf("127.0.0.1:%d", port), dir)
}

// startThrottlekit starts the built server on a free port, with metrics on a
// second free port unless extra overrides --metrics-addr (flags parse
// left to right, so extra wins).
func startThrottlekit(bin, dir string, extra []string) (*server, error) {
	return startThrottlekitVia(nil, bin, dir, extra)
}

// startThrottlekitVia is startThrottlekit with the server run through the
// command line wrap (e.g. taskset -c 1), or directly if wrap is empty.
func startThrottlekitVia(wrap []string, bin, dir string, extra []string) (*server, error) {
	argv, addr, maddr, err := throttlekitArgv(wrap, bin, extra)
	if err != nil {
		return nil, err
	}
	s, err := startArgv("throttlekit", argv, addr, dir)
	if err != nil {
		return nil, err
	}
	s.metricsAddr = maddr
	return s, nil
}

// throttlekitArgv builds the command line of a throttlekit-server on free
// ports: wrap, bin, --addr, --metrics-addr, then extra. It returns the
// command line, the RESP address and the metrics address extra leaves.
func throttlekitArgv(wrap []string, bin string, extra []string) (argv []string, addr, maddr string, err error) {
	port, err := freePort()
	if err != nil {
		return nil, "", "", err
	}
	mport, err := freePort()
	if err != nil {
		return nil, "", "", err
	}
	addr = fmt.Sprintf("127.0.0.1:%d", port)
	maddr = fmt.Sprintf("127.0.0.1:%d", mport)
	args := append([]string{"--addr", addr, "--metrics-addr", maddr}, extra...)
	for i, a := range args {
		if a == "--metrics-addr" || a == "-metrics-addr" {
			if i+1 < len(args) {
				maddr = args[i+1]
			}
		} else if v, ok := strings.CutPrefix(strings.TrimLeft(a, "-"), "metrics-addr="); ok {
			maddr = v
		}
	}
	argv = append(append(append([]string(nil), wrap...), bin), args...)
	return argv, addr, maddr, nil
}

// call sends one command and returns the raw reply text (RESP framing
// included), read until the reply is complete.
func call(addr string, args ...string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	bargs := make([][]byte, len(args))
	for i, a := range args {
		bargs[i] = []byte(a)
	}
	if _, err := c.Write(loadgen.AppendCommand(nil, bargs...)); err != nil {
		return "", err
	}
	var rec recorder
	rec.r = c
	rr := loadgen.NewReplyReader(bufio.NewReader(&rec))
	kind, err := rr.Skip()
	if err != nil {
		return "", err
	}
	if kind == loadgen.KindError {
		return "", replyError(rr.LastError)
	}
	return rec.buf.String(), nil
}

// replyError is an error reply of the server, as opposed to a failure to
// reach it.
type replyError string

// Error implements error.
func (e replyError) Error() string { return string(e) }

// isReplyError reports whether err is (or wraps) an error reply: the server
// answered.
func isReplyError(err error) bool {
	var re replyError
	return errors.As(err, &re)
}

// recorder keeps a copy of everything read through it.
type recorder struct {
	r   interface{ Read([]byte) (int, error) }
	buf bytes.Buffer
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.buf.Write(p[:n])
	return n, err
}

// infoField returns field from an INFO reply ("" if absent).
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// intReply parses an integer reply such as ":42\r\n".
func intReply(r string) (int64, error) {
	return strconv.ParseInt(strings.TrimSpace(strings.TrimPrefix(r, ":")), 10, 64)
}

// cpuSeconds returns user+system CPU seconds consumed by pid so far.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line (11 and 12 after the name).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return float64(ut+st) / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux this harness targets.
const clockTicks = 100

// rssBytes returns the resident set size of pid.
func rssBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("VmRSS not found")
}

// buildServer builds ./cmd/throttlekit-server from the repository root into dir.
func buildServer(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "throttlekit-server")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/throttlekit-server")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/throttlekit-server: %v: %s", err, bytes.TrimSpace(out))
	}
	return bin, nil
}

// serverModule is the module path of the server that buildServer builds.
const serverModule = "github.com/throttlekit/throttlekit-server"

// repoRoot walks up from the working directory to the directory whose go.mod
// declares serverModule: the repository root, above bench's own module.
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && declaresModule(b, serverModule) {
			return d, nil
		}
		p := filepath.Dir(d)
		if p == d {
			return "", fmt.Errorf("no go.mod declaring module %s above the working directory", serverModule)
		}
		d = p
	}
}

// declaresModule reports whether the go.mod text gomod declares module path.
func declaresModule(gomod []byte, path string) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "module" && strings.Trim(f[1], `"`) == path {
			return true
		}
	}
	return false
}
