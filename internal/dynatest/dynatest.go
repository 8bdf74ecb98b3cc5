// Package dynatest runs dynalite, a DynamoDB emulator, for a test through
// scripts/start-dynalite.sh: in memory, on a free port of 127.0.0.1, killed
// when the test ends. The first run installs the pinned npm package into a
// cache (a few seconds); later starts take well under a second.
//
// Missing node or npm follow internal/testdeps: the test is skipped with a
// line on stderr, or fails when the CI environment variable is set.
//
// Only tests import this package, so deadcode without -test lists its
// functions as unreachable; "deadcode -test ./..." shows them reached.
package dynatest

import (
	"bufio"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/lockedbuf"
	"github.com/throttlekit/throttlekit-server/internal/testdeps"
)

// Server is a running dynalite.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
}

// URL returns a persist URL for table on this server.
func (s *Server) URL(table string) string {
	return "dynamodb://" + table + "?region=us-east-1&endpoint=" + url.QueryEscape(s.Endpoint)
}

// Start starts dynalite for tb and registers its end with tb.Cleanup. It
// waits (up to two minutes, for a first install on a slow machine) until
// the port accepts connections.
func Start(tb testing.TB) *Server {
	tb.Helper()
	testdeps.Require(tb, "node", "npm")
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("dynatest: cannot locate the repository")
	}
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "start-dynalite.sh")
	cmd := exec.Command(script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logs := &lockedbuf.Buffer{}
	cmd.Stderr = logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("%s: %v", script, err)
	}
	// exited is closed once the script has exited, with its error in
	// waitErr: every reader below may look, however many there are.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		select {
		case <-exited: // died before the test ended: say how
			tb.Errorf("dynalite exited during the test: %v\n%s", waitErr, logs.String())
			return
		default:
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- strings.TrimSpace(sc.Text())
		}
		close(line)
	}()
	deadline := time.After(2 * time.Minute)
	var endpoint string
	select {
	case endpoint = <-line:
	case <-exited:
		tb.Fatalf("%s exited: %v\n%s", script, waitErr, logs.String())
	case <-deadline:
		tb.Fatalf("%s printed no endpoint in 2 minutes\n%s", script, logs.String())
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		tb.Fatalf("%s printed %q, not an endpoint\n%s", script, endpoint, logs.String())
	}
	for {
		c, err := net.DialTimeout("tcp", u.Host, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			tb.Fatalf("dynalite exited: %v\n%s", waitErr, logs.String())
		case <-deadline:
			tb.Fatalf("dynalite on %s not accepting connections in 2 minutes\n%s", u.Host, logs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return &Server{Endpoint: endpoint}
}
