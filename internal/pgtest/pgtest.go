// Package pgtest starts a throw-away PostgreSQL server for a test through
// scripts/start-postgres.sh: a fresh cluster in a temporary directory, on a
// free port, listening on 127.0.0.1, stopped and removed when the test
// ends. Starting one costs about a second (initdb), so a package shares one
// server across its tests where it can.
//
// Missing PostgreSQL binaries follow internal/testdeps: the test is skipped
// with a line on stderr, or fails when the CI environment variable is set.
//
// Only tests import this package, so deadcode without -test lists its
// functions as unreachable; "deadcode -test ./..." shows them reached.
package pgtest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/internal/testdeps"
)

// Bin is the directory of the PostgreSQL binaries the script uses (Debian's
// postgresql-15), unless PG_BIN says otherwise.
func Bin() string {
	if b := os.Getenv("PG_BIN"); b != "" {
		return b
	}
	return "/usr/lib/postgresql/15/bin"
}

// Server is a running throw-away PostgreSQL server.
type Server struct {
	URL    string // postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable
	dir    string
	script string
}

// Start starts a server for tb and registers its stop and removal with
// tb.Cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	testdeps.Require(tb, filepath.Join(Bin(), "initdb"), filepath.Join(Bin(), "pg_ctl"), "python3")
	if os.Getuid() == 0 {
		testdeps.Require(tb, "runuser")
	}
	// Not tb.TempDir: as root the cluster belongs to an unprivileged user,
	// who must be able to reach the directory.
	dir, err := os.MkdirTemp("", "throttlekit-pgtest-")
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{dir: dir, script: script(tb)}
	tb.Cleanup(func() {
		_ = exec.Command(s.script, "stop", s.dir).Run()
		_ = os.RemoveAll(s.dir)
	})
	s.URL = s.run(tb, "start")
	return s
}

// Stop stops the server (a fast shutdown: sessions are cut). Start it again
// with Restart; the URL stays the same.
func (s *Server) Stop(tb testing.TB) {
	tb.Helper()
	s.run(tb, "stop")
}

// Restart starts a stopped server again on the same port.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.run(tb, "start")
}

func (s *Server) run(tb testing.TB, cmd string) string {
	tb.Helper()
	var out, errb bytes.Buffer
	c := exec.Command(s.script, cmd, s.dir)
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		tb.Fatalf("%s %s: %v\n%s", s.script, cmd, err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// PID returns the process id of the running server's postmaster (the
// first line of its postmaster.pid). Sessions are forked from it, so CPU
// affinity set on it (taskset) is inherited by every session opened later.
func (s *Server) PID() (int, error) {
	b, err := os.ReadFile(filepath.Join(s.dir, "data", "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	pid, err := strconv.Atoi(strings.TrimSpace(string(line)))
	if err != nil || pid <= 0 {
		return 0, errors.New("pgtest: no pid in postmaster.pid")
	}
	return pid, nil
}

// script returns the path of scripts/start-postgres.sh in this repository.
func script(tb testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("pgtest: cannot locate the repository")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", "start-postgres.sh")
}
