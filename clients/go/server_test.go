package throttlekit_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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

func serverBinary(t testing.TB) string {
	t.Helper()
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
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// testServer is one running server process.
type testServer struct {
	Addr, MetricsAddr string
	log               *bytes.Buffer
}

func freePort(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// startServer starts a server of its own for t and stops it at cleanup.
func startServer(t testing.TB) *testServer {
	t.Helper()
	bin := serverBinary(t)
	s := &testServer{Addr: freePort(t), MetricsAddr: freePort(t), log: new(bytes.Buffer)}
	cmd := exec.Command(bin, "--addr", s.Addr, "--metrics-addr", s.MetricsAddr, "--log-level", "warn")
	cmd.Stdout = s.log
	cmd.Stderr = s.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	// Wait until it answers PING: a bounded wait for start-up, not a
	// timing assertion.
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, MaxRetries: -1})
	defer rdb.Close()
	for i := 0; ; i++ {
		select {
		case <-done:
			t.Fatalf("server exited during start-up:\n%s", s.log)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s
		}
		if i == 300 {
			t.Fatalf("server at %s not answering: %v\n%s", s.Addr, err, s.log)
		}
		time.Sleep(50 * time.Millisecond)
	}
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
