package attack

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// control is a well-behaved client that keeps sending PING (and, when
// asked, THROTTLE.CHECK), one at a time, while a test attacks the server,
// and records how long each took. It runs in a process of its own (this
// test binary, running TestControlClientProcess) so that the attacking
// goroutines' scheduling and garbage collection in the test process do not
// show up in its figures. It paces itself (a millisecond between commands)
// so its own cost on the server stays small next to the attack's.
type control struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   bytes.Buffer
}

// controlPrefix starts the line on which the control process reports.
const controlPrefix = "control-result "

// startControl starts a control client against p, on the CPUs of
// $ATTACK_CONTROL_CPUS when set. Use stop to end it.
func startControl(t testing.TB, p *proc, throttle bool) *control {
	t.Helper()
	args := []string{os.Args[0], "-test.run=^TestControlClientProcess$", "-test.count=1"}
	if cpus := os.Getenv("ATTACK_CONTROL_CPUS"); cpus != "" {
		// A CPU list for taskset: on a small machine the control client
		// can be kept off the core of the process that attacks.
		args = append([]string{"taskset", "-c", cpus}, args...)
	}
	ctl := &control{cmd: exec.Command(args[0], args[1:]...)}
	ctl.cmd.Env = append(os.Environ(), "ATTACK_CONTROL_ADDR="+p.addr, "ATTACK_CONTROL_THROTTLE="+strconv.FormatBool(throttle))
	ctl.cmd.Stdout, ctl.cmd.Stderr = &ctl.out, &ctl.out
	var err error
	if ctl.stdin, err = ctl.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := ctl.cmd.Start(); err != nil {
		t.Fatalf("start the control client: %v", err)
	}
	t.Cleanup(func() {
		if ctl.cmd.ProcessState == nil {
			_ = ctl.cmd.Process.Kill()
			_ = ctl.cmd.Wait()
		}
	})
	return ctl
}

// stop ends the control client and returns its latencies; a failed
// command fails the test.
func (ctl *control) stop(t testing.TB) latencies {
	t.Helper()
	ctl.stdin.Close()
	werr := ctl.cmd.Wait()
	for _, line := range strings.Split(ctl.out.String(), "\n") {
		rest, ok := strings.CutPrefix(line, controlPrefix)
		if !ok {
			continue
		}
		if msg, failed := strings.CutPrefix(rest, "error "); failed {
			t.Fatalf("control client: %s", msg)
		}
		var lat latencies
		for _, f := range strings.Fields(rest) {
			ns, err := strconv.ParseInt(f, 10, 64)
			if err != nil {
				t.Fatalf("control client reported %q", line)
			}
			lat = append(lat, time.Duration(ns))
		}
		return lat
	}
	t.Fatalf("control client (%v) reported nothing:\n%s", werr, ctl.out.String())
	return nil
}

// TestControlClientProcess is the control client's process; startControl
// runs it, and it skips otherwise. It sends commands to
// ATTACK_CONTROL_ADDR until its standard input closes, then prints the
// round-trip time of each, in nanoseconds, on one line.
func TestControlClientProcess(t *testing.T) {
	addr := os.Getenv("ATTACK_CONTROL_ADDR")
	if addr == "" {
		t.Skip("the control client of other tests, run by them in a process of its own")
	}
	throttle := os.Getenv("ATTACK_CONTROL_THROTTLE") == "true"
	var stopped atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stopped.Store(true)
	}()
	report := func(format string, args ...any) {
		fmt.Printf(controlPrefix+format+"\n", args...)
	}
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		report("error dial: %v", err)
		return
	}
	defer nc.Close()
	c := &conn{t: t, c: nc, r: bufio.NewReader(nc)}
	ping := cmd("PING")
	check := cmd("THROTTLE.CHECK", "control", "1000000000", "1s")
	lat := make([]int64, 0, 4096)
	for i := 0; !stopped.Load(); i++ {
		req := ping
		if throttle && i%2 == 1 {
			req = check
		}
		start := time.Now()
		_ = nc.SetDeadline(start.Add(60 * time.Second))
		if _, err := nc.Write(req); err != nil {
			report("error write: %v", err)
			return
		}
		v, err := c.reply()
		if err == nil && v.kind == '-' {
			err = fmt.Errorf("error reply %q", v.str)
		}
		if err != nil {
			report("error command %d: %v", i, err)
			return
		}
		lat = append(lat, int64(time.Since(start)))
		time.Sleep(time.Millisecond)
	}
	var b strings.Builder
	for _, ns := range lat {
		b.WriteString(strconv.FormatInt(ns, 10))
		b.WriteByte(' ')
	}
	report("%s", b.String())
}
