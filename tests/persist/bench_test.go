package persisttests

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/internal/dynatest"
	"github.com/throttlekit/throttlekit-server/internal/pgtest"
	"github.com/throttlekit/throttlekit-server/internal/testserver"
)

// BenchmarkPersist compares THROTTLE.CHECK throughput and latency of the
// server in memory, with async persistence and with sync persistence
// (Postgres; dynalite too with TK_PERSIST_BENCH_DYNAMO=1), at 50
// connections with pipelines of 16 and of 1, over 10k keys. Each case is
// one fixed-length run (TK_PERSIST_BENCH_SECONDS, default 3; the async
// interval is TK_PERSIST_BENCH_INTERVAL, default 100ms), so run it with
// -benchtime 1x; it is skipped unless TK_PERSIST_BENCH is set:
//
//	TK_PERSIST_BENCH=1 go test ./tests/persist -run '^$' -bench Persist -benchtime 1x
//
// Before measuring, every key is checked once, so the run sees the steady
// state of a server that has been up a while: every key is in the store
// and has its row (the measurement starts once 10k rows are written).
// Reported per case: ops/s, p99-ms (the round trip of one pipelined batch:
// at P=1 one command's latency, at P=16 that of the batch's last reply),
// x-memory (ops/s as a ratio to the in-memory run at the same depth, in
// the same process), rows/s written to the backend, and the CPU time per
// command of the server (srv-cpu-us/op) and of the Postgres processes
// (pg-cpu-us/op, read from /proc; 0 elsewhere): on a shared machine these
// vary less than the throughput. The load
// generator shares the machine with the server and the database.
//
// Two more variables help comparisons on a small shared machine.
// TK_PERSIST_BENCH_PIN=1 pins with taskset(1): the benchmark process (the
// load generator) to CPU 0, every server and the database to CPU 1 (the
// database once started, which its later sessions inherit), so the load
// does not take CPU from what it measures; it needs taskset and two CPUs.
// TK_PERSIST_BENCH_BIN=path measures that server binary instead of one
// built from this tree, so two builds can be compared in alternate runs of
// the same load generator:
//
//	TK_PERSIST_BENCH=1 TK_PERSIST_BENCH_PIN=1 TK_PERSIST_BENCH_BIN=/tmp/old-server \
//		go test ./tests/persist -run '^$' -bench Persist -benchtime 1x
func BenchmarkPersist(b *testing.B) {
	if os.Getenv("TK_PERSIST_BENCH") == "" {
		b.Skip("set TK_PERSIST_BENCH=1 to run (starts servers and databases)")
	}
	pin := os.Getenv("TK_PERSIST_BENCH_PIN") != ""
	bin := os.Getenv("TK_PERSIST_BENCH_BIN")
	if bin == "" {
		bin = testserver.Binary(b)
	}
	secs := 3
	if s, err := strconv.Atoi(os.Getenv("TK_PERSIST_BENCH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	dur := time.Duration(secs) * time.Second
	asyncInterval := "100ms"
	if v := os.Getenv("TK_PERSIST_BENCH_INTERVAL"); v != "" {
		asyncInterval = v
	}
	pg := pgtest.Start(b)
	pgPID, err := pg.PID()
	if err != nil {
		b.Fatal(err)
	}
	if pin {
		taskset(b, "1", pgPID)
		taskset(b, "0", os.Getpid())
	}
	type setup struct {
		name string
		args func(depth int) []string
	}
	setups := []setup{
		{"memory", func(int) []string { return nil }},
		{"pg-async", func(d int) []string {
			return []string{"--persist", pg.URL + "&table=bench_async_" + strconv.Itoa(d), "--persist-mode", "async", "--persist-interval", asyncInterval}
		}},
		{"pg-sync", func(d int) []string {
			return []string{"--persist", pg.URL + "&table=bench_sync_" + strconv.Itoa(d), "--persist-mode", "sync"}
		}},
	}
	if os.Getenv("TK_PERSIST_BENCH_DYNAMO") != "" {
		dy := dynatest.Start(b)
		setups = append(setups, setup{"dynamo-sync", func(d int) []string {
			return []string{"--persist", dy.URL("bench_sync_" + strconv.Itoa(d)), "--persist-mode", "sync"}
		}})
	}
	for _, depth := range []int{16, 1} {
		var memOps float64
		for _, s := range setups {
			b.Run(s.name+"/P"+strconv.Itoa(depth), func(b *testing.B) {
				srv := startBenchServer(b, bin, pin, s.args(depth)...)
				if err := warmUp(srv.Addr, 10_000); err != nil {
					b.Fatal(err)
				}
				if s.name != "memory" {
					waitFor(b, srv.Addr, "warm-up rows written", func(m map[string]string) bool {
						n, _ := strconv.ParseInt(m["persist_rows_written"], 10, 64)
						return n >= 10_000
					})
				}
				before, fbefore := persistCounters(srv.Addr)
				srvCPU, pgCPU := procCPU(srv.cmd.Process.Pid), treeCPU(pgPID)
				ctx, cancel := context.WithTimeout(context.Background(), dur)
				began := time.Now()
				ld := runLoad(ctx, srv.Addr, 50, depth, 10_000)
				took := time.Since(began)
				cancel()
				srvCPU, pgCPU = procCPU(srv.cmd.Process.Pid)-srvCPU, treeCPU(pgPID)-pgCPU
				ops := float64(ld.ops.Load()) / took.Seconds()
				if s.name == "memory" {
					memOps = ops
				}
				b.ReportMetric(ops, "ops/s")
				b.ReportMetric(float64(ld.p99().Microseconds())/1000, "p99-ms")
				if memOps > 0 {
					b.ReportMetric(ops/memOps, "x-memory")
				}
				if n := float64(ld.ops.Load()); n > 0 {
					b.ReportMetric(srvCPU/n*1e6, "srv-cpu-us/op")
					b.ReportMetric(pgCPU/n*1e6, "pg-cpu-us/op")
				}
				rows, flushes := persistCounters(srv.Addr)
				b.ReportMetric(float64(rows-before)/took.Seconds(), "rows/s")
				if flushes > fbefore {
					b.ReportMetric(float64(rows-before)/float64(flushes-fbefore), "rows/flush")
				}
				if e := ld.other.Load() + ld.tryAgain.Load(); e > 0 {
					b.Errorf("%d error replies", e)
				}
				srv.stop()
			})
		}
	}
}

// persistCounters reads INFO's persist_rows_written and persist_flushes
// (0 in memory).
func persistCounters(addr string) (rows, flushes int64) {
	m, err := info(addr)
	if err != nil {
		return 0, 0
	}
	rows, _ = strconv.ParseInt(m["persist_rows_written"], 10, 64)
	flushes, _ = strconv.ParseInt(m["persist_flushes"], 10, 64)
	return rows, flushes
}

// taskset pins every thread of process pid to cpus.
func taskset(b *testing.B, cpus string, pid int) {
	b.Helper()
	out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput()
	if err != nil {
		b.Fatalf("taskset -a -p -c %s %d: %v\n%s", cpus, pid, err, out)
	}
}

// benchServer is a server process started by startBenchServer.
type benchServer struct {
	Addr string
	cmd  *exec.Cmd
}

// startBenchServer runs bin with args on a free loopback port, under
// taskset -c 1 when pin is set, and waits until it accepts connections
// and has loaded. It is stopped when the benchmark ends, if not before.
func startBenchServer(b *testing.B, bin string, pin bool, args ...string) *benchServer {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	argv := append([]string{bin, "--addr", addr, "--metrics-addr="}, args...)
	if pin {
		argv = append([]string{"taskset", "-c", "1"}, argv...)
	}
	s := &benchServer{Addr: addr, cmd: exec.Command(argv[0], argv[1:]...)}
	if err := s.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("server did not listen on %s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitFor(b, addr, "start-up load", func(m map[string]string) bool { return m["loading"] == "0" })
	return s
}

// stop kills the server if it still runs and waits for it.
func (s *benchServer) stop() {
	if s.cmd.ProcessState == nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
}

// clockTick is the unit of the CPU times in /proc/PID/stat (USER_HZ,
// which Linux fixes at 100 for user space).
const clockTick = 100

// procStat returns the parent pid and the user plus system CPU seconds of
// process pid from /proc, or zeros when it cannot be read.
func procStat(pid int) (ppid int, cpu float64) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0
	}
	// The command name, in parentheses, may hold spaces: split after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, 0
	}
	ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ppid, float64(ut+st) / clockTick
}

// procCPU returns the CPU seconds process pid has used.
func procCPU(pid int) float64 {
	_, c := procStat(pid)
	return c
}

// treeCPU returns the CPU seconds used by process pid and its children
// alive now (a Postgres postmaster and its sessions).
func treeCPU(pid int) float64 {
	total := procCPU(pid)
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return total
	}
	for _, e := range ents {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, cpu := procStat(c); pp == pid {
			total += cpu
		}
	}
	return total
}

// warmUp checks every key once, pipelined on one connection, and waits
// for the replies (in sync mode: until the keys' rows are written).
func warmUp(addr string, nkeys int) error {
	c, err := dial(addr)
	if err != nil {
		return err
	}
	defer c.c.Close()
	_ = c.c.SetDeadline(time.Now().Add(60 * time.Second))
	const page = 1000
	for lo := 0; lo < nkeys; lo += page {
		hi := min(lo+page, nkeys)
		for i := lo; i < hi; i++ {
			c.add("THROTTLE.CHECK", key(i), strconv.Itoa(limit), period)
		}
		if err := c.flush(); err != nil {
			return err
		}
		for i := lo; i < hi; i++ {
			r, err := c.read()
			if err != nil {
				return err
			}
			if r.err != "" {
				return errors.New(r.err)
			}
		}
	}
	return nil
}
