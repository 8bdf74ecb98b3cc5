// Package testserver runs the real throttlekit-server for the tests and
// examples of this module: it builds the server from the repository the
// module lives in (once per test binary) and starts it on free loopback
// ports. THROTTLEKIT_SERVER_BIN names a server binary built beforehand
// instead (e.g. from another checkout).
//
// Examples take no *testing.T, so a package whose examples need the server
// starts one in TestMain (when ExamplesSelected says they may run) and
// hands its address to them through a package variable.
package testserver

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// repoRoot is the repository's root: four levels above this file
// (clients/go/internal/testserver).
func repoRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("testserver: cannot locate the source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", ".."), nil
}

// Binary builds the server binary once per test binary and returns its
// path.
func Binary() (string, error) {
	buildOnce.Do(func() {
		if p := os.Getenv("THROTTLEKIT_SERVER_BIN"); p != "" {
			binPath = p
			return
		}
		root, err := repoRoot()
		if err != nil {
			buildErr = err
			return
		}
		dir, err := os.MkdirTemp("", "throttlekit-client-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "throttlekit-server")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/throttlekit-server")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/throttlekit-server in %s: %v\n%s", root, err, out)
		}
	})
	return binPath, buildErr
}

// Cleanup removes the binary Binary built (not one named by
// THROTTLEKIT_SERVER_BIN). TestMain calls it after the tests.
func Cleanup() {
	if binPath != "" && os.Getenv("THROTTLEKIT_SERVER_BIN") == "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
}

// Server is one running server process.
type Server struct {
	Addr, MetricsAddr string
	log               *bytes.Buffer
	cmd               *exec.Cmd
	done              chan struct{}
}

// FreeAddr returns a loopback address with a port no one listened on a
// moment ago.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// Start starts a server of its own for tb, with extra flags args (e.g.
// "--enable-debug-command", "yes"), and stops it at cleanup.
func Start(tb testing.TB, args ...string) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		tb.Fatal(err)
	}
	s, err := Launch(bin, args...)
	if s != nil {
		tb.Cleanup(s.Stop)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// Launch starts the server binary bin on free loopback ports, with extra
// flags args, and waits until it answers PING. The caller stops it with
// Stop, also when Launch fails after starting the process.
func Launch(bin string, args ...string) (*Server, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	maddr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: addr, MetricsAddr: maddr, log: new(bytes.Buffer), done: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{"--addr", s.Addr, "--metrics-addr", s.MetricsAddr, "--log-level", "warn"}, args...)...)
	s.cmd.Stdout = s.log
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	// Wait until it answers PING: a bounded wait for start-up, not a
	// timing assertion.
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	for i := 0; ; i++ {
		select {
		case <-s.done:
			return s, fmt.Errorf("server exited during start-up:\n%s", s.log)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		if i == 300 {
			return s, fmt.Errorf("server at %s not answering: %v\n%s", s.Addr, err, s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop interrupts the server and waits for it to exit (killing it after
// 10 s).
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// RedisClient returns a go-redis client of the server speaking protocol
// proto (2 or 3) that counts the commands it sends in *sent (when not
// nil), closed at tb's cleanup.
func (s *Server) RedisClient(tb testing.TB, proto int, sent *atomic.Int64) *redis.Client {
	tb.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr:                  s.Addr,
		Protocol:              proto,
		ContextTimeoutEnabled: true,
		PoolSize:              16,
	})
	if sent != nil {
		rdb.AddHook(countHook{sent})
	}
	tb.Cleanup(func() { rdb.Close() })
	return rdb
}

// countHook counts the commands a go-redis client sends, one by one or in
// pipelines.
type countHook struct{ n *atomic.Int64 }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// ThrottleCommands sums the server's throttlekit_commands_total over the
// THROTTLE.* and CL.THROTTLE commands, read from /metrics.
func (s *Server) ThrottleCommands(tb testing.TB) int64 {
	tb.Helper()
	resp, err := http.Get("http://" + s.MetricsAddr + "/metrics")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var total int64
	found := false
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "throttlekit_commands_total{") {
			continue
		}
		found = true
		if !strings.Contains(line, `"throttle.`) && !strings.Contains(line, `"cl.throttle"`) {
			continue
		}
		f := strings.Fields(line)
		n, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			tb.Fatalf("metrics line %q: %v", line, err)
		}
		total += int64(n)
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	if !found {
		tb.Fatal("no throttlekit_commands_total series in /metrics")
	}
	return total
}

// ExamplesSelected reports whether the test flags may run an Example
// function of the test files in the working directory (the package under
// test): the first element of -run (an example has no subtests) matches
// its name and -skip does not exclude it. When unsure it says yes, which
// only costs a server start. Call it after flag.Parse.
func ExamplesSelected() bool {
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		return false
	}
	names, err := exampleNames()
	if err != nil {
		return true
	}
	first := func(pattern string) string {
		depth := 0
		for i, c := range pattern {
			switch c {
			case '[', '(':
				depth++
			case ']', ')':
				depth--
			case '/':
				if depth == 0 {
					return pattern[:i]
				}
			}
		}
		return pattern
	}
	lookup := func(name string) string {
		if f := flag.Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	run, err := regexp.Compile(first(lookup("test.run")))
	if err != nil {
		return true
	}
	var skip *regexp.Regexp
	if s := lookup("test.skip"); s != "" && !strings.ContainsAny(s, "/|") {
		skip, _ = regexp.Compile(s)
	}
	for _, n := range names {
		if run.MatchString(n) && (skip == nil || !skip.MatchString(n)) {
			return true
		}
	}
	return false
}

// exampleNames lists the Example functions of the test files in the
// working directory.
func exampleNames() ([]string, error) {
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		return nil, err
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range af.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Example") {
				names = append(names, fd.Name.Name)
			}
		}
	}
	return names, nil
}

// RunWithServer is the body of a TestMain whose examples reach the server
// through *addr: it starts one server when the examples may run, points
// *addr at it, runs m and returns the exit code.
func RunWithServer(m *testing.M, addr *string) int {
	flag.Parse()
	var srv *Server
	if ExamplesSelected() {
		bin, err := Binary()
		if err == nil {
			srv, err = Launch(bin)
		}
		if err != nil {
			if srv != nil {
				srv.Stop()
			}
			fmt.Fprintln(os.Stderr, "starting the server for the examples:", err)
			return 1
		}
		*addr = srv.Addr
	}
	code := m.Run()
	if srv != nil {
		srv.Stop()
	}
	Cleanup()
	return code
}
