// Package clustertest starts real Redis servers for tests: one standalone
// redis-server (Server), or a 6-node Redis Cluster on loopback (Start)
// through scripts/start-redis-cluster.sh, 3 masters and 3 replicas. Each is
// stopped and its directory removed when the test ends. Ports are chosen by
// the kernel and a node that loses its port to another process is retried
// on a new one, so parallel test runs do not collide.
//
// Missing redis-server or redis-cli follows internal/testdeps: the test is
// skipped with a line on stderr, or fails when the CI environment variable
// is set. A cluster takes seconds to form (redis-cli waits for the nodes to
// agree, then each replica syncs), so a package shares one across its tests.
//
// Fault tests kill one node (Kill, with MasterOf to find the master of a
// key's slot), stop every node (Stop) and start nodes again on their old
// ports with their cluster configuration (Restart); StartWith lowers the
// cluster-node-timeout so a failover takes about a second or two.
//
// Only tests import this package, so deadcode without -test lists its
// functions as unreachable; "deadcode -test ./..." shows them reached.
package clustertest

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/testdeps"
)

// Cluster is a running throw-away Redis Cluster.
type Cluster struct {
	Seeds  []string // host:port of every node, masters and replicas
	dir    string
	script string
}

// URL returns the cluster's redis-cluster:// URL with every node as a seed.
func (c *Cluster) URL() string { return "redis-cluster://" + strings.Join(c.Seeds, ",") }

// Options configures StartWith.
type Options struct {
	// NodeTimeout is every node's cluster-node-timeout: a master silent
	// this long is failed over to its replica. 0 keeps the script's 2 s.
	NodeTimeout time.Duration
}

// Start starts a cluster for tb and registers its stop and removal with
// tb.Cleanup.
func Start(tb testing.TB) *Cluster {
	tb.Helper()
	return StartWith(tb, Options{})
}

// StartWith is Start with options.
func StartWith(tb testing.TB, o Options) *Cluster {
	tb.Helper()
	testdeps.Require(tb, "redis-server", "redis-cli", "python3")
	dir, err := os.MkdirTemp("", "throttlekit-clustertest-")
	if err != nil {
		tb.Fatal(err)
	}
	c := &Cluster{dir: dir, script: script(tb)}
	tb.Cleanup(func() {
		_ = exec.Command(c.script, "stop", c.dir).Run()
		_ = os.RemoveAll(c.dir)
	})
	var out, errb bytes.Buffer
	cmd := exec.Command(c.script, "start", dir)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if o.NodeTimeout > 0 {
		cmd.Env = append(os.Environ(), "CLUSTER_NODE_TIMEOUT="+strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10))
	}
	if err := cmd.Run(); err != nil {
		tb.Fatalf("%s start: %v\n%s", c.script, err, errb.String())
	}
	c.Seeds = strings.Split(strings.TrimSpace(out.String()), ",")
	if len(c.Seeds) != 6 {
		tb.Fatalf("%s printed %q, want 6 seeds", c.script, out.String())
	}
	return c
}

// Stop stops every node (the script's stop: SIGTERM, then SIGKILL for a
// node still running after ten seconds). Cleanup stops the cluster anyway;
// Stop lets a test check what happens, or that nothing listens, after.
func (c *Cluster) Stop(tb testing.TB) {
	tb.Helper()
	if out, err := exec.Command(c.script, "stop", c.dir).CombinedOutput(); err != nil {
		tb.Fatalf("%s stop: %v\n%s", c.script, err, out)
	}
}

// Server starts one standalone redis-server on loopback for tb and returns
// its address; it is killed and its directory removed at cleanup. extra
// arguments are passed to redis-server. A port taken between choosing and
// binding is retried on another, twice.
func Server(tb testing.TB, extra ...string) string {
	tb.Helper()
	bin := testdeps.Require(tb, "redis-server")[0]
	for try := 0; ; try++ {
		dir := tb.TempDir()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--loglevel", "warning", "--logfile", filepath.Join(dir, "redis.log")}, extra...)
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		tb.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
		if waitListen(addr, exited) {
			return addr
		}
		log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		if try < 2 && bytes.Contains(log, []byte("Address already in use")) {
			continue
		}
		tb.Fatalf("redis-server did not start on %s:\n%s", addr, log)
	}
}

// waitListen waits until addr accepts a connection or the process exits.
// The deadline bounds a broken start; it times nothing.
func waitListen(addr string, exited <-chan struct{}) bool {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			return true
		}
		select {
		case <-exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	return false
}

// script returns the path of scripts/start-redis-cluster.sh in this
// repository.
func script(tb testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		tb.Fatal("clustertest: cannot locate the repository")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "scripts", "start-redis-cluster.sh")
}
