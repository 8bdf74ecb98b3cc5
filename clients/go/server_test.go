package throttlekit_test

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
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The tests below run against the real server, built from the repository
// this module lives in (../..) once per test binary. A failed build fails
// the tests that need it. THROTTLEKIT_SERVER_BIN names a server binary
// built beforehand instead (e.g. from another checkout).

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// buildServer builds the server binary once per test binary.
func buildServer() (string, error) {
	buildOnce.Do(func() {
		if p := os.Getenv("THROTTLEKIT_SERVER_BIN"); p != "" {
			binPath = p
			return
		}
		dir, err := os.MkdirTemp("", "throttlekit-client-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "throttlekit-server")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/throttlekit-server")
		cmd.Dir = filepath.Join("..", "..")
		cmd.Env = append(os.Environ(), "GOWORK=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/throttlekit-server in ../..: %v\n%s", err, out)
		}
	})
	return binPath, buildErr
}

func serverBinary(t testing.TB) string {
	t.Helper()
	bin, err := buildServer()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// testServer is one running server process.
type testServer struct {
	Addr, MetricsAddr string
	log               *bytes.Buffer
	cmd               *exec.Cmd
	done              chan struct{}
}

func freePort(t testing.TB) string {
	t.Helper()
	addr, err := freeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

// startServer starts a server of its own for t and stops it at cleanup.
func startServer(t testing.TB) *testServer {
	t.Helper()
	bin := serverBinary(t)
	s, err := launchServer(bin)
	if s != nil {
		t.Cleanup(s.stop)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// launchServer starts the server binary bin on free loopback ports and
// waits until it answers PING. The caller stops it with stop, also when
// launchServer fails after starting the process.
func launchServer(bin string) (*testServer, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	maddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	s := &testServer{Addr: addr, MetricsAddr: maddr, log: new(bytes.Buffer), done: make(chan struct{})}
	s.cmd = exec.Command(bin, "--addr", s.Addr, "--metrics-addr", s.MetricsAddr, "--log-level", "warn")
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

// stop interrupts the server and waits for it to exit (killing it after
// 10 s).
func (s *testServer) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// TestMain starts one server for the Example functions when the -run and
// -skip patterns can select one of them: examples take no *testing.T, so
// they reach the server through serverAddr. They run after every test, in
// the order of the source, and each uses keys no other example touches.
func TestMain(m *testing.M) {
	flag.Parse()
	var srv *testServer
	if examplesSelected() {
		bin, err := buildServer()
		if err == nil {
			srv, err = launchServer(bin)
		}
		if err != nil {
			if srv != nil {
				srv.stop()
			}
			fmt.Fprintln(os.Stderr, "starting the server for the examples:", err)
			os.Exit(1)
		}
		serverAddr = srv.Addr
	}
	code := m.Run()
	if srv != nil {
		srv.stop()
	}
	if binPath != "" && os.Getenv("THROTTLEKIT_SERVER_BIN") == "" {
		_ = os.RemoveAll(filepath.Dir(binPath)) // the build's temporary directory
	}
	os.Exit(code)
}

// examplesSelected reports whether the test flags may run an example:
// the first element of -run (an example has no subtests) matches the name
// of an Example function of this package's test files and -skip does not
// exclude it. When unsure it says yes, which only costs a server start.
func examplesSelected() bool {
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

// exampleNames lists the Example functions of the test files here.
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

// redisClient returns a go-redis client of the server speaking protocol
// proto (2 or 3) that counts the commands it sends in *sent.
func (s *testServer) redisClient(t testing.TB, proto int, sent *atomic.Int64) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr:                  s.Addr,
		Protocol:              proto,
		ContextTimeoutEnabled: true,
		PoolSize:              16,
	})
	if sent != nil {
		rdb.AddHook(countHook{sent})
	}
	t.Cleanup(func() { rdb.Close() })
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

// throttleCommands sums the server's throttlekit_commands_total over the
// THROTTLE.* and CL.THROTTLE commands, read from /metrics.
func (s *testServer) throttleCommands(t testing.TB) int64 {
	t.Helper()
	resp, err := http.Get("http://" + s.MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
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
			t.Fatalf("metrics line %q: %v", line, err)
		}
		total += int64(n)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatal("no throttlekit_commands_total series in /metrics")
	}
	return total
}
