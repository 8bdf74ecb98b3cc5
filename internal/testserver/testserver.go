// Package testserver builds the throttlekit-server binary once per test
// binary and starts fresh instances of it on free loopback ports, for tests
// that drive the real server with external clients (redis-cli, redis-py,
// ioredis) or from other modules' points of view.
//
// Only tests import this package, so deadcode without -test lists its
// functions as unreachable; "deadcode -test ./..." shows them reached.
package testserver

import (
	"github.com/throttlekit/throttlekit-server/internal/lockedbuf"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Root returns the repository's root directory (the one holding go.mod).
func Root(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("testserver: cannot locate the source file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

var (
	buildOnce sync.Once
	buildPath string
	buildErr  error
	buildOut  []byte
)

// Binary builds ./cmd/throttlekit-server into a temporary directory, once per
// test binary, and returns its path. A failed build fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "throttlekit-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildPath = filepath.Join(dir, "throttlekit-server")
		cmd := exec.Command("go", "build", "-o", buildPath, "./cmd/throttlekit-server")
		cmd.Dir = Root(t)
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("go build ./cmd/throttlekit-server: %v\n%s", buildErr, buildOut)
	}
	return buildPath
}

// Server is one running server process.
type Server struct {
	Addr string // host:port of the RESP listener
	Port string
	cmd  *exec.Cmd
	log  *lockedbuf.Buffer
}

// FreeAddr returns a loopback address whose port was free a moment ago:
// another process may take it before the caller listens, which on a test
// machine is rare enough to accept.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen for a free port: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("close probe listener: %v", err)
	}
	return addr
}

// Start runs a fresh server with the given extra flags on a loopback port
// the kernel picks (its metrics listener off unless args set one) and stops
// it when the test ends. It returns once the server has logged the port it
// bound and that port accepts connections. Because the server binds port 0
// itself, no other process can take the port between choosing and binding
// it, as it can with FreeAddr. Args that set --addr or a log format other
// than text are not supported.
func Start(t testing.TB, args ...string) *Server {
	t.Helper()
	bin := Binary(t)
	full := append([]string{"--addr", "127.0.0.1:0", "--metrics-addr="}, args...)
	cmd := exec.Command(bin, full...)
	log := &lockedbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Server{cmd: cmd, log: log}
	t.Cleanup(s.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if s.Addr == "" {
			if m := listeningRE.FindStringSubmatch(log.String()); m != nil {
				s.Addr = m[1]
				_, s.Port, _ = net.SplitHostPort(s.Addr)
			}
		}
		if s.Addr != "" {
			if c, err := net.Dial("tcp", s.Addr); err == nil {
				c.Close()
				return s
			}
		}
		if time.Now().After(deadline) {
			s.Stop()
			t.Fatalf("server did not listen (address %q); log:\n%s", s.Addr, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// listeningRE finds the bound address in the server's "listening" log line
// (the default text format: msg=listening addr=127.0.0.1:40123 ...).
var listeningRE = regexp.MustCompile(`msg=listening addr=(\S+)`)

// Stop kills the server (if still running) and waits for it.
func (s *Server) Stop() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// Log returns what the server wrote to stdout and stderr so far.
func (s *Server) Log() string { return s.log.String() }
