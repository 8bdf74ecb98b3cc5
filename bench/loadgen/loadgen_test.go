package loadgen

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/testdeps"
)

// startRedis starts a throwaway redis-server on a free loopback port and
// returns its address. The test is skipped, loudly, only if the binary is
// absent.
func startRedis(t *testing.T) string {
	t.Helper()
	bin := testdeps.Require(t, "redis-server")[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("redis-server did not start")
	return ""
}

func TestRunAgainstRedis(t *testing.T) {
	addr := startRedis(t)
	tests := []struct {
		name     string
		cfg      Config
		wantErrs bool
	}{
		{"ping closed loop pipelined", Config{Conns: 4, Pipeline: 16, Cmd: NewCommand([]string{"PING"}, -1, ""), Keys: 1}, false},
		{"incr zipf", Config{Conns: 2, Pipeline: 1, Cmd: NewCommand([]string{"INCR", ""}, 1, "t:"), Keys: 1000, Dist: Zipf}, false},
		{"open loop", Config{Conns: 2, Pipeline: 1, Rate: 2000, Cmd: NewCommand([]string{"INCR", ""}, 1, "o:"), Keys: 10}, false},
		{"errors counted", Config{Conns: 1, Pipeline: 4, Cmd: NewCommand([]string{"NOSUCHCMD"}, -1, ""), Keys: 1}, true},
	}
	for _, tc := range tests {
		cfg := tc.cfg
		cfg.Addr = addr
		cfg.Warmup = 50 * time.Millisecond
		cfg.Duration = 300 * time.Millisecond
		var starts, stops int
		cfg.OnMeasure = func(start bool) {
			if start {
				starts++
			} else {
				stops++
			}
		}
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if res.Ops == 0 || res.Hist.TotalCount() != res.Ops {
			t.Errorf("%s: ops=%d histogram count=%d", tc.name, res.Ops, res.Hist.TotalCount())
		}
		if starts != 1 || stops != 1 {
			t.Errorf("%s: OnMeasure called start=%d stop=%d times", tc.name, starts, stops)
		}
		if tc.wantErrs != (res.Errors == res.Ops) || (!tc.wantErrs && res.Errors != 0) {
			t.Errorf("%s: errors=%d of %d (last %q)", tc.name, res.Errors, res.Ops, res.LastError)
		}
		if tc.wantErrs && res.LastError == "" {
			t.Errorf("%s: LastError empty", tc.name)
		}
		if cfg.Rate > 0 {
			// 2000/s for 0.3 s: the schedule, not the server, sets the count.
			if res.Ops < 400 || res.Ops > 800 {
				t.Errorf("%s: open loop sent %d commands, want about 600", tc.name, res.Ops)
			}
		}
	}
}

func TestRunInvalidConfig(t *testing.T) {
	if _, err := Run(context.Background(), Config{Addr: "127.0.0.1:1", Conns: 0, Pipeline: 1, Keys: 1, Duration: time.Second}); err == nil {
		t.Error("zero connections accepted")
	}
}

func BenchmarkCommandAppend(b *testing.B) {
	c := NewCommand([]string{"THROTTLE.CHECK", "", "100", "1s"}, 1, "user:")
	buf := make([]byte, 0, 1024)
	var scratch []byte
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		buf, scratch = c.Append(buf[:0], scratch, uint64(i))
	}
}

func TestFillCreatesDistinctKeys(t *testing.T) {
	addr := startRedis(t)
	const n = 10_001
	res, err := Fill(context.Background(), addr, NewCommand([]string{"SET", "", "v"}, 1, "f:"), n, 3, 64)
	if err != nil {
		t.Fatal(err)
	}
	if res.Sent != n || res.Errors != 0 {
		t.Fatalf("sent %d errors %d (%s), want %d and 0", res.Sent, res.Errors, res.LastError, n)
	}
	// DBSIZE must count exactly n keys.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("*1\r\n$6\r\nDBSIZE\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	m, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(buf[:m]), fmt.Sprintf(":%d\r\n", n); got != want {
		t.Errorf("DBSIZE = %q, want %q", got, want)
	}
}
