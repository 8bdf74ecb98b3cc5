package attack

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/lockedbuf"
	"github.com/throttlekit/throttlekit-server/internal/testdeps"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

// clockTicks is the unit of utime and stime in /proc/<pid>/stat. Linux
// reports them in USER_HZ, which is 100 on every architecture Go supports.
const clockTicks = 100

// proc is one server process started by a test, ours or redis-server.
type proc struct {
	name string
	addr string
	cmd  *exec.Cmd
	log  *lockedbuf.Buffer
}

// startServer runs a fresh throttlekit-server with flags on a free port,
// its metrics listener off, and stops it when the test ends. The binary is
// the one built from this checkout, or $ATTACK_SERVER_BIN when set (to
// compare another build on the same inputs in the same run).
func startServer(t testing.TB, flags ...string) *proc {
	t.Helper()
	addr := testserver.FreeAddr(t)
	args := append([]string{"--addr", addr, "--metrics-addr="}, flags...)
	bin := os.Getenv("ATTACK_SERVER_BIN")
	if bin == "" {
		bin = testserver.Binary(t)
	}
	return startProc(t, "throttlekit-server", addr, bin, args...)
}

// startRedis runs a fresh redis-server without persistence on a free port,
// or skips the test (fails it under CI) when redis-server is not installed.
func startRedis(t testing.TB, args ...string) *proc {
	t.Helper()
	bin := testdeps.Require(t, "redis-server")[0]
	addr := testserver.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	full := append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--protected-mode", "no", "--daemonize", "no", "--logfile", ""}, args...)
	return startProc(t, "redis-server", addr, bin, full...)
}

// startProc starts bin with args and waits until it answers PING on
// addr. When $ATTACK_SERVER_CPUS is set (a taskset CPU list such as "1"),
// the process runs on those CPUs only, so that a comparison on a small
// machine does not have the server and the load generator share a core;
// taskset execs bin, so the process id stays the server's.
func startProc(t testing.TB, name, addr, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, addr: addr, log: &lockedbuf.Buffer{}}
	if cpus := os.Getenv("ATTACK_SERVER_CPUS"); cpus != "" {
		args = append([]string{"-c", cpus, bin}, args...)
		bin = "taskset"
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	t.Cleanup(p.stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			// A PING answered (NOAUTH counts) means the server is past its
			// start-up, not just listening.
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			r := newConn(t, c)
			_, werr := c.Write(cmd("PING"))
			got, rerr := r.reply()
			c.Close()
			if werr == nil && rerr == nil && (got.str == "PONG" || strings.HasPrefix(got.str, "NOAUTH")) {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer on %s; log:\n%s", name, addr, p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *proc) stop() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// alive fails the test, with the server's log, if the process has exited.
func (p *proc) alive(t testing.TB) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("%s is gone (%v); log:\n%s", p.name, err, p.log.String())
	}
}

// cpu returns the process's user plus system CPU time so far.
func (p *proc) cpu(t testing.TB) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read stat of %s: %v", p.name, err)
	}
	// The command name, field 2, is in parentheses and may hold spaces:
	// count fields from the last ')'. utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		t.Fatalf("short stat of %s: %q", p.name, b)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("bad stat of %s: %q", p.name, b)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks
}

// rss returns the process's resident set size in bytes (VmRSS).
func (p *proc) rss(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatalf("read status of %s: %v", p.name, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("bad VmRSS line %q", line)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in status of %s", p.name)
	return 0
}

// rssWatch samples a process's RSS until stopped and keeps the peak.
type rssWatch struct {
	stopc chan struct{}
	done  chan int64
}

func watchRSS(t testing.TB, p *proc) *rssWatch {
	w := &rssWatch{stopc: make(chan struct{}), done: make(chan int64, 1)}
	pid := p.cmd.Process.Pid
	go func() {
		var peak int64
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			if v := readRSS(pid); v > peak {
				peak = v
			}
			select {
			case <-w.stopc:
				w.done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// stop ends the sampling and returns the peak RSS seen, in bytes.
func (w *rssWatch) stop() int64 {
	close(w.stopc)
	return <-w.done
}

func readRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// recvQueue returns the bytes waiting, unread by p, in the receive queues
// of its TCP connections on its listening port (from /proc/net/tcp: the
// rx_queue of sockets whose local port is p's).
func (p *proc) recvQueue(t testing.TB) int64 {
	t.Helper()
	_, port, _ := net.SplitHostPort(p.addr)
	pn, _ := strconv.Atoi(port)
	local := fmt.Sprintf(":%04X", pn)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatalf("read /proc/net/tcp: %v", err)
	}
	var total int64
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasSuffix(f[1], local) {
			continue
		}
		_, rx, ok := strings.Cut(f[4], ":") // tx_queue:rx_queue, hex
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(rx, 16, 64)
		if err == nil {
			total += n
		}
	}
	return total
}

// mib formats a byte count in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// cmd encodes a command as a RESP array of bulk strings.
func cmd(args ...string) []byte {
	return appendCmd(nil, args...)
}

func appendCmd(b []byte, args ...string) []byte {
	b = append(b, '*')
	b = strconv.AppendInt(b, int64(len(args)), 10)
	b = append(b, '\r', '\n')
	for _, a := range args {
		b = append(b, '$')
		b = strconv.AppendInt(b, int64(len(a)), 10)
		b = append(b, '\r', '\n')
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	return b
}

// value is one decoded reply. Only what the tests look at is kept.
type value struct {
	kind  byte   // '+', '-', ':', '$', '*' (RESP2), '%', '_', '#', ...
	str   string // simple string, error or bulk (bulks longer than keepBulk are not kept)
	n     int64  // integer, or the length of a bulk / array
	null  bool
	elems []value
}

// keepBulk is the longest bulk string reply value keeps; longer ones are
// read and checked against a fill byte by readBulkFill instead.
const keepBulk = 1 << 20

// conn is a test's raw RESP connection.
type conn struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func newConn(t testing.TB, c net.Conn) *conn {
	return &conn{t: t, c: c, r: bufio.NewReaderSize(c, 64<<10)}
}

// dial connects to p and closes the connection when the test ends.
func dial(t testing.TB, p *proc) *conn {
	t.Helper()
	c, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatalf("dial %s: %v", p.name, err)
	}
	t.Cleanup(func() { c.Close() })
	return newConn(t, c)
}

func (c *conn) write(b []byte) {
	c.t.Helper()
	if _, err := c.c.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

// do sends one command and returns its reply, failing the test on an I/O
// error. The deadline is a safety net against a hung server, not a timing
// assertion.
func (c *conn) do(args ...string) value {
	c.t.Helper()
	c.write(cmd(args...))
	_ = c.c.SetReadDeadline(time.Now().Add(60 * time.Second))
	v, err := c.reply()
	if err != nil {
		c.t.Fatalf("%q: %v", args, err)
	}
	return v
}

func (c *conn) line() (string, error) {
	s, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if len(s) < 2 || s[len(s)-2] != '\r' {
		return "", fmt.Errorf("line %q does not end in CRLF", s)
	}
	return s[:len(s)-2], nil
}

// reply reads one whole reply.
func (c *conn) reply() (value, error) {
	s, err := c.line()
	if err != nil {
		return value{}, err
	}
	if s == "" {
		return value{}, errors.New("empty reply line")
	}
	v := value{kind: s[0]}
	body := s[1:]
	switch v.kind {
	case '+', '-':
		v.str = body
	case ':', '(':
		v.n, err = strconv.ParseInt(body, 10, 64)
	case '_':
		v.null = true
	case '#':
		v.str = body
	case '$', '=':
		if v.n, err = strconv.ParseInt(body, 10, 64); err != nil {
			return v, err
		}
		if v.n < 0 {
			v.null = true
			return v, nil
		}
		if v.n > keepBulk {
			_, err = io.CopyN(io.Discard, c.r, v.n+2)
			return v, err
		}
		buf := make([]byte, v.n+2)
		if _, err = io.ReadFull(c.r, buf); err != nil {
			return v, err
		}
		v.str = string(buf[:v.n])
	case '*', '%', '~', '>':
		if v.n, err = strconv.ParseInt(body, 10, 64); err != nil {
			return v, err
		}
		k := v.n
		if v.kind == '%' {
			k *= 2
		}
		for i := int64(0); i < k; i++ {
			e, err := c.reply()
			if err != nil {
				return v, err
			}
			v.elems = append(v.elems, e)
		}
	default:
		return v, fmt.Errorf("unknown reply type %q", s)
	}
	return v, err
}

// expectClosed reads until the server closes the connection and returns
// the bytes it sent first. The deadline is a safety net: a connection
// still open after it fails the test.
func (c *conn) expectClosed(deadline time.Duration) []byte {
	c.t.Helper()
	_ = c.c.SetReadDeadline(time.Now().Add(deadline))
	var got []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := c.r.Read(buf)
		got = append(got, buf[:n]...)
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatalf("connection still open after %v; received %q", deadline, trim(got))
		}
		return got // io.EOF or a reset: closed
	}
}

// trim shortens b for a failure message.
func trim(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + fmt.Sprintf("... (%d bytes)", len(b))
	}
	return string(b)
}

// latencies collects a control client's round-trip times.
type latencies []time.Duration

func (l latencies) quantile(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := append(latencies(nil), l...)
	slices.Sort(s)
	i := int(q * float64(len(s)-1))
	return s[i]
}
