package server_test

// BenchmarkLargeArgument measures what receiving one large command costs a
// server process in CPU time: throttlekit-server (this package, run in a
// child process), redis-server when it is installed, and any other build
// named by TK_FRAMING_OTHER_SERVER (for instance an older throttlekit-server
// binary, to compare before and after a change):
//
//	go test -run x -bench BenchmarkLargeArgument -benchtime 3x ./server/
//	TK_FRAMING_OTHER_SERVER=/path/to/throttlekit-server go test -run x -bench BenchmarkLargeArgument -benchtime 3x ./server/
//
// Each op opens a connection, sends ECHO with one argument of the given
// size (or with 1M arguments, which is an arity error) in 64 KiB writes,
// reads the whole reply, and reports the server's CPU seconds for it as
// cpu-s/op, read from /proc (the sum of its threads' run time).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/testserver"
	"github.com/throttlekit/throttlekit-server/server"
	"github.com/throttlekit/throttlekit-server/shard"
)

const childAddrEnv = "TK_FRAMING_CHILD_ADDR"

// TestFramingChildServer serves on $TK_FRAMING_CHILD_ADDR until its stdin
// closes. It is the child process of BenchmarkLargeArgument and skips in any
// other run.
func TestFramingChildServer(t *testing.T) {
	addr := os.Getenv(childAddrEnv)
	if addr == "" {
		t.Skip("the server process of BenchmarkLargeArgument; runs only as its child")
	}
	srv, err := server.New(server.Config{
		Addr:             addr,
		QueryBufferLimit: 1 << 30,
		ProtoMaxBulkLen:  512 << 20,
	}, shard.New(shard.Config{}))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve() }()
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// cpuOf returns the CPU time the process has used so far: the sum over its
// threads of /proc/<pid>/task/<tid>/schedstat (nanoseconds on a CPU).
func cpuOf(b *testing.B, pid int) time.Duration {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		b.Fatalf("no schedstat for pid %d: %v", pid, err)
	}
	var total time.Duration
	for _, p := range tasks {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // the thread exited
		}
		f := strings.Fields(string(raw))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			b.Fatalf("%s: %q", p, raw)
		}
		total += time.Duration(ns)
	}
	return total
}

// serverProc is a server running in a process of its own.
type serverProc struct {
	name string
	addr string
	cmd  *exec.Cmd
}

func startProc(b testing.TB, name string, cmd *exec.Cmd, addr string) *serverProc {
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start %s: %v", name, err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	for deadline := time.Now().Add(20 * time.Second); ; {
		if c, err := net.Dial("tcp", addr); err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s did not listen on %s within 20s", name, addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return &serverProc{name: name, addr: addr, cmd: cmd}
}

// largeFrame returns ECHO with one argument of size bytes, or with argc
// arguments of 8 bytes when argc > 0.
func largeFrame(size, argc int) []byte {
	if argc > 0 {
		var sb strings.Builder
		sb.WriteString("*" + strconv.Itoa(argc+1) + "\r\n$4\r\nECHO\r\n")
		for i := range argc {
			sb.WriteString("$8\r\n" + strconv.Itoa(10_000_000+i) + "\r\n")
		}
		return []byte(sb.String())
	}
	head := "*2\r\n$4\r\nECHO\r\n$" + strconv.Itoa(size) + "\r\n"
	frame := make([]byte, 0, len(head)+size+2)
	frame = append(frame, head...)
	for i := range size {
		frame = append(frame, byte('a'+i%26))
	}
	return append(frame, '\r', '\n')
}

// roundTrip sends frame in 64 KiB writes and reads one reply (a bulk or an
// error), discarding its body.
func roundTrip(b *testing.B, addr string, frame []byte) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Minute))
	errc := make(chan error, 1)
	go func() {
		for p := frame; len(p) > 0; {
			n := min(len(p), 64<<10)
			if _, err := c.Write(p[:n]); err != nil {
				errc <- err
				return
			}
			p = p[n:]
		}
		errc <- nil
	}()
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		b.Fatalf("read reply: %v", err)
	}
	switch line[0] {
	case '$':
		n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil {
			b.Fatalf("reply %q", line)
		}
		if _, err := io.CopyN(io.Discard, r, int64(n)+2); err != nil {
			b.Fatalf("read bulk: %v", err)
		}
	case '-':
		if !strings.Contains(line, "wrong number of arguments") {
			b.Fatalf("reply %q", line)
		}
	default:
		b.Fatalf("reply %q", line)
	}
	if err := <-errc; err != nil {
		b.Fatalf("write: %v", err)
	}
}

func BenchmarkLargeArgument(b *testing.B) {
	var procs []*serverProc

	addr := testserver.FreeAddr(b)
	self := exec.Command(os.Args[0], "-test.run=^TestFramingChildServer$")
	self.Env = append(os.Environ(), childAddrEnv+"="+addr)
	procs = append(procs, startProc(b, "throttlekit", self, addr))

	if path, err := exec.LookPath("redis-server"); err == nil {
		addr := testserver.FreeAddr(b)
		_, port, _ := net.SplitHostPort(addr)
		cmd := exec.Command(path, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--client-query-buffer-limit", "1gb", "--proto-max-bulk-len", "512mb", "--loglevel", "warning")
		procs = append(procs, startProc(b, "redis-server", cmd, addr))
	} else {
		b.Logf("redis-server not found: measuring throttlekit-server alone")
	}

	if path := os.Getenv("TK_FRAMING_OTHER_SERVER"); path != "" {
		addr := testserver.FreeAddr(b)
		cmd := exec.Command(path, "--addr", addr, "--metrics-addr", "off", "--client-output-buffer-limit", "0",
			"--log-level", "error")
		procs = append(procs, startProc(b, "other", cmd, addr))
	}

	workloads := []struct {
		name       string
		size, argc int
	}{
		{"arg=16MiB", 16 << 20, 0},
		{"arg=64MiB", 64 << 20, 0},
		{"arg=128MiB", 128 << 20, 0},
		{"args=1M", 0, 1_000_000},
	}
	for _, w := range workloads {
		frame := largeFrame(w.size, w.argc)
		for _, p := range procs {
			b.Run(w.name+"/"+p.name, func(b *testing.B) {
				b.SetBytes(int64(len(frame)))
				var cpu time.Duration
				for range b.N {
					before := cpuOf(b, p.cmd.Process.Pid)
					roundTrip(b, p.addr, frame)
					cpu += cpuOf(b, p.cmd.Process.Pid) - before
				}
				b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
			})
		}
	}
}
