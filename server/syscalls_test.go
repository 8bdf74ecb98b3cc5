package server_test

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/throttlekit/throttlekit-server/internal/testdeps"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

// ioCounts reads syscr and syscw of /proc/<pid>/io: the read-like and
// write-like system calls the process has made so far.
func ioCounts(t testing.TB, pid int) (reads, writes int64) {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		t.Fatalf("read /proc/%d/io: %v", pid, err)
	}
	reads, writes = -1, -1
	for _, line := range strings.Split(string(raw), "\n") {
		name, value, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
		if err != nil {
			t.Fatalf("/proc/%d/io: %q", pid, line)
		}
		switch name {
		case "syscr":
			reads = n
		case "syscw":
			writes = n
		}
	}
	if reads < 0 || writes < 0 {
		t.Fatalf("/proc/%d/io has no syscr or syscw: %q", pid, raw)
	}
	return reads, writes
}

// TestSyscallsPerBatch checks the network path's system calls: a pipelined
// batch (the commands of one client write) costs the server one read(2) and
// one write(2), whatever the number of commands in it, as the package doc's
// "The kernel" says. It counts the calls of a server in a child process
// (TestFramingChildServer) from /proc/<pid>/io, which counts every read-
// and write-like call of every thread, over batches of 16 THROTTLE.CHECK
// and of 16 PING, each sent in one write and answered before the next. A
// reply written per command would show 16 writes a batch, a read that
// drains the socket until EAGAIN (edge-triggered epoll) two reads. The same
// batches (INCR for THROTTLE.CHECK) sent to redis-server cost it the same
// calls.
//
// The child's GOMAXPROCS is set, so its runtime does not reread the cgroup
// CPU limit (a file read) once a second while the batches run.
func TestSyscallsPerBatch(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts system calls in /proc/<pid>/io")
	}
	if _, err := os.Stat("/proc/self/io"); err != nil {
		t.Skipf("no per-process I/O accounting: %v", err)
	}
	const depth = 16
	batch := func(args ...string) string {
		var b strings.Builder
		for i := range depth {
			a := slices.Clone(args)
			if len(a) > 1 {
				a[1] += strconv.Itoa(i)
			}
			b.WriteString(encodeCommand(a...))
		}
		return b.String()
	}

	t.Run("throttlekit", func(t *testing.T) {
		addr := testserver.FreeAddr(t)
		self := exec.Command(os.Args[0], "-test.run=^TestFramingChildServer$")
		self.Env = append(os.Environ(), childAddrEnv+"="+addr, "GOMAXPROCS=2")
		p := startProc(t, "throttlekit", self, addr)
		c := dialRaw(t, addr)
		countBatches(t, c, p.cmd.Process.Pid, "THROTTLE.CHECK", batch("THROTTLE.CHECK", "sys:", "1000000", "1h"), depth)
		countBatches(t, c, p.cmd.Process.Pid, "PING", batch("PING"), depth)
	})
	t.Run("redis-server", func(t *testing.T) {
		path := testdeps.Require(t, "redis-server")[0]
		addr := testserver.FreeAddr(t)
		_, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command(path, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--loglevel", "warning")
		p := startProc(t, "redis-server", cmd, addr)
		c := dialRaw(t, addr)
		countBatches(t, c, p.cmd.Process.Pid, "INCR", batch("INCR", "sys:"), depth)
		countBatches(t, c, p.cmd.Process.Pid, "PING", batch("PING"), depth)
	})
}

// countBatches sends batch (depth commands in one write) over c, reads its
// replies, and checks that the server process pid makes one read and one
// write call per batch over 200 batches.
func countBatches(t *testing.T, c *rawConn, pid int, name, batch string, depth int) {
	t.Run(name, func(t *testing.T) {
		const batches = 200
		roundTrip := func() {
			c.send(t, batch)
			for i := range depth {
				if v, ok := c.read(t).(respErr); ok {
					t.Fatalf("reply %d: %v", i, v)
				}
			}
		}
		roundTrip() // the connection's first calls happen before the count starts
		r0, w0 := ioCounts(t, pid)
		for range batches {
			roundTrip()
		}
		r1, w1 := ioCounts(t, pid)
		reads, writes := r1-r0, w1-w0
		t.Logf("%d batches of %d: %d reads, %d writes", batches, depth, reads, writes)
		// A few calls outside the batches are tolerated: redis-server's
		// timer reads /proc/self/stat about ten times a second, which a
		// slow run of the batches may see. A second call per batch would be
		// 200 more.
		const slack = batches / 20
		if reads < batches || reads > batches+slack {
			t.Errorf("server made %d read calls for %d batches, want one each", reads, batches)
		}
		if writes < batches || writes > batches+slack {
			t.Errorf("server made %d write calls for %d batches, want one each", writes, batches)
		}
	})
}
