package server

import (
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// stepClock is a clock that moves step nanoseconds forward on every read:
// every stretch of work between two reads lasts exactly step, so what the
// slow log and the latency monitor see does not depend on the machine.
type stepClock struct {
	t    atomic.Int64
	step int64
}

func (c *stepClock) now() int64 { return c.t.Add(c.step) }

// opsLoop is a test loop whose server reads clk, and runs each batch as
// OnTraffic does: the clock read at the start, process, endBatch.
func opsLoop(t *testing.T, clk *stepClock, mutate func(*Config)) *testLoop {
	t.Helper()
	clk.t.Store(1_700_000_040_000_000_000)
	tl := newTestLoop(t, func(c *Config) {
		c.Clock = clk.now
		if mutate != nil {
			mutate(c)
		}
	})
	tl.cl.addr = "10.1.2.3:4567"
	tl.srv.clients[tl.cl.id] = tl.cl
	tl.srv.loops = append(tl.srv.loops, tl.l)
	return tl
}

func (tl *testLoop) batch(t *testing.T, in string) string {
	t.Helper()
	now := tl.srv.now()
	n, _ := tl.l.process(tl.cl, []byte(in), now)
	if n != len(in) {
		t.Fatalf("batch consumed %d of %d bytes", n, len(in))
	}
	tl.l.endBatch(n, now)
	return tl.take()
}

var digits = regexp.MustCompile(`[0-9]+`)

// TestSlowlogTiming checks the three ways a command is timed (see
// cmd_slowlog.go) on a clock that moves 20 ms per read, against the
// default threshold of 10 ms.
func TestSlowlogTiming(t *testing.T) {
	clk := &stepClock{step: int64(20 * time.Millisecond)}
	tl := opsLoop(t, clk, nil)
	tl.cl.name = "app"

	// A batch of one fast command: the batch's time, exact.
	tl.batch(t, cmd("PING"))
	got := tl.batch(t, cmd("SLOWLOG", "GET", "1"))
	want := "*1\r\n*6\r\n:0\r\n:1700000040\r\n:20000\r\n*1\r\n$4\r\nPING\r\n$13\r\n10.1.2.3:4567\r\n$3\r\napp\r\n"
	if got != want {
		t.Fatalf("solo PING:\n got %q\nwant %q", got, want)
	}

	// A pipeline of fast commands: not attributed; it arms command by
	// command timing for the next batches, which logs each of them.
	tl.batch(t, cmd("SLOWLOG", "RESET"))
	tl.batch(t, cmd("SLOWLOG", "RESET")) // the first RESET logged itself
	tl.batch(t, cmd("PING", "a")+cmd("PING", "b")+cmd("PING", "c"))
	if got := tl.batch(t, cmd("SLOWLOG", "LEN")); got != ":1\r\n" { // the second RESET only
		t.Fatalf("after a slow pipeline: %q, want only the RESET logged", got)
	}
	tl.batch(t, cmd("SLOWLOG", "RESET"))
	tl.batch(t, cmd("PING", "d")+cmd("PING", "e"))
	got = tl.batch(t, cmd("SLOWLOG", "GET", "2"))
	if !strings.Contains(got, "$1\r\ne\r\n") || !strings.Contains(got, "$1\r\nd\r\n") || !strings.Contains(got, ":20000\r\n") {
		t.Fatalf("armed pipeline: %q", got)
	}

	// After slowPipelineBatches batches the loop stops timing fast
	// commands of pipelines one by one (each batch above is slow too, and
	// re-arms it, so drive fast batches: a frozen clock).
	clk.step = 0
	for i := 0; i < slowPipelineBatches+1; i++ {
		tl.batch(t, cmd("PING")+cmd("PING"))
	}
	if tl.l.slow.all || tl.l.slow.left != 0 {
		t.Fatalf("still timing every command: %+v", tl.l.slow)
	}
	clk.step = int64(20 * time.Millisecond)

	// A command without the fast flag is timed on its own, even mid-pipeline.
	tl.batch(t, cmd("SLOWLOG", "RESET"))
	tl.batch(t, cmd("PING")+cmd("DBSIZE")+cmd("KEYS", "*")+cmd("PING"))
	got = tl.batch(t, cmd("SLOWLOG", "GET", "-1"))
	if !strings.Contains(got, "$4\r\nKEYS\r\n") || strings.Contains(got, "PING") || strings.Contains(got, "DBSIZE") {
		t.Fatalf("non-fast command in a pipeline: %q", got)
	}

	// EXEC is timed on its own and never logged (skip_slowlog); the batch
	// that carried it is not handed to the last command it ran (which is
	// logged under its own name when it is timed, as Redis logs the
	// commands of a transaction).
	tl.batch(t, cmd("SLOWLOG", "RESET"))
	tl.batch(t, cmd("MULTI"))
	tl.batch(t, cmd("PING", "inner"))
	tl.batch(t, cmd("EXEC"))
	if got := tl.batch(t, cmd("SLOWLOG", "GET", "-1")); strings.Contains(got, "EXEC") {
		t.Fatalf("EXEC was logged: %q", got)
	}

	// Redis 7's cutting, and AUTH redacted.
	tl.batch(t, cmd("SLOWLOG", "RESET"))
	keys := []string{"DEL"}
	for i := 0; i < 39; i++ {
		keys = append(keys, "k")
	}
	tl.batch(t, cmd(keys...))
	tl.batch(t, cmd("ECHO", strings.Repeat("x", 200)))
	tl.batch(t, cmd("AUTH", "secret"))
	got = tl.batch(t, cmd("SLOWLOG", "GET", "3"))
	for _, w := range []string{"$22\r\n... (9 more arguments)\r\n", "$147\r\n" + strings.Repeat("x", 128) + "... (72 more bytes)\r\n", "$10\r\n(redacted)\r\n"} {
		if !strings.Contains(got, w) {
			t.Errorf("SLOWLOG GET 3 lacks %q:\n%q", w, got)
		}
	}
	if strings.Contains(got, "secret") {
		t.Error("AUTH's password is in the slow log")
	}
}

// TestSlowlogSettings: off, every command, and the length bound.
func TestSlowlogSettings(t *testing.T) {
	clk := &stepClock{step: int64(time.Hour)}
	tl := opsLoop(t, clk, func(c *Config) { c.SlowlogLogSlowerThan = -1 })
	tl.batch(t, cmd("PING"))
	if got := tl.batch(t, cmd("SLOWLOG", "LEN")); got != ":0\r\n" {
		t.Fatalf("off: %q", got)
	}
	clk = &stepClock{step: 0} // a frozen clock: every command takes 0 µs
	tl = opsLoop(t, clk, func(c *Config) { c.SlowlogLogAll = true; c.SlowlogMaxLen = 2 })
	tl.batch(t, cmd("PING")+cmd("PING")+cmd("PING"))
	if got := tl.batch(t, cmd("SLOWLOG", "LEN")); got != ":2\r\n" {
		t.Fatalf("log-all, max-len 2: %q", got)
	}
	if got := tl.batch(t, cmd("SLOWLOG", "GET", "-1")); !strings.Contains(got, ":0\r\n*1\r\n$4\r\nPING") {
		t.Fatalf("log-all entry: %q", got)
	}
}

// TestLatencyMonitor: events of commands that reach the threshold, on a
// clock that moves 20 ms per read, and LATENCY HISTOGRAM's buckets.
func TestLatencyMonitor(t *testing.T) {
	clk := &stepClock{step: int64(20 * time.Millisecond)}
	tl := opsLoop(t, clk, func(c *Config) { c.LatencyMonitorThreshold = 10 * time.Millisecond })
	tl.batch(t, cmd("PING"))
	tl.batch(t, cmd("KEYS", "*"))
	got := digits.ReplaceAllString(tl.batch(t, cmd("LATENCY", "LATEST")), "N")
	want := "*N\r\n*N\r\n$N\r\ncommand\r\n:N\r\n:N\r\n:N\r\n*N\r\n$N\r\nfast-command\r\n:N\r\n:N\r\n:N\r\n"
	if got != want {
		t.Fatalf("LATEST:\n got %q\nwant %q", got, want)
	}
	if got := tl.batch(t, cmd("LATENCY", "HISTORY", "fast-command")); got != "*1\r\n*2\r\n:1700000040\r\n:20\r\n" {
		t.Fatalf("HISTORY: %q", got)
	}
	if got := tl.batch(t, cmd("LATENCY", "DOCTOR")); !strings.Contains(got, "fast-command: 1 latency spikes") {
		t.Fatalf("DOCTOR: %q", got)
	}
	// 20 ms is below 1024<<15 ns: bucket 15, labelled 33816 µs.
	got = tl.batch(t, cmd("LATENCY", "HISTOGRAM", "ping", "nosuch"))
	if want := "*2\r\n$4\r\nping\r\n*4\r\n$5\r\ncalls\r\n:1\r\n$14\r\nhistogram_usec\r\n*2\r\n:33816\r\n:1\r\n"; got != want {
		t.Fatalf("HISTOGRAM:\n got %q\nwant %q", got, want)
	}
	if got := tl.batch(t, cmd("INFO", "latencystats")); !strings.Contains(got, "latency_percentiles_usec_ping:p50=33816.000,p99=33816.000,p99.9=33816.000\r\n") {
		t.Fatalf("INFO latencystats: %q", got)
	}
	if got := tl.batch(t, cmd("LATENCY", "RESET", "fast-command", "nosuch")); got != ":1\r\n" {
		t.Fatalf("RESET: %q", got)
	}
	tl.srv.RecordLatency("expire-cycle", 15*time.Millisecond)
	tl.srv.RecordLatency("expire-cycle", 5*time.Millisecond) // below the threshold
	if got := tl.batch(t, cmd("LATENCY", "HISTORY", "expire-cycle")); !strings.HasSuffix(got, ":15\r\n") || !strings.HasPrefix(got, "*1\r\n") {
		t.Fatalf("RecordLatency: %q", got)
	}
}

// TestMemoryObject: MEMORY USAGE is what the store reports for the key,
// OBJECT answers for this store.
func TestMemoryObject(t *testing.T) {
	tl := statsLoop(t)
	tl.run(cmd("THROTTLE.CHECK", "k", "10", "1s", "ALGO", "fixed"))
	u, ok := tl.srv.core.Usage([]byte("k"), time.Now().UnixNano())
	if !ok || u.Node == 0 || u.Slot == 0 || u.Arena != 0 {
		t.Fatalf("usage %+v", u)
	}
	for _, tc := range []struct{ in, want string }{
		{cmd("MEMORY", "USAGE", "k"), ":" + itoa(int(u.Total())) + "\r\n"},
		{cmd("MEMORY", "USAGE", "k", "SAMPLES", "0"), ":" + itoa(int(u.Total())) + "\r\n"},
		{cmd("MEMORY", "USAGE", "k", "SAMPLES", "-1"), "-ERR syntax error\r\n"},
		{cmd("MEMORY", "USAGE", "nope"), "$-1\r\n"},
		{cmd("OBJECT", "ENCODING", "k"), "$5\r\nfixed\r\n"},
		{cmd("OBJECT", "REFCOUNT", "k"), ":1\r\n"},
		{cmd("OBJECT", "FREQ", "nope"), "$-1\r\n"},
		{cmd("OBJECT", "IDLETIME", "k"), "-ERR idle time not tracked: eviction is CLOCK, which keeps one reference bit per key and no access time\r\n"},
	} {
		if got, _ := tl.run(tc.in); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
	long := strings.Repeat("L", 50)
	tl.run(cmd("GCRA", long, "1", "1", "1"))
	ul, _ := tl.srv.core.Usage([]byte(long), time.Now().UnixNano())
	if got, _ := tl.run(cmd("MEMORY", "USAGE", long)); ul.Arena != 50 || got != ":"+itoa(int(ul.Total()))+"\r\n" {
		t.Errorf("long key: %q, usage %+v (50 arena bytes)", got, ul)
	}
	if got, _ := tl.run(cmd("MEMORY", "STATS")); !strings.Contains(got, "keys.count\r\n:2\r\n") {
		t.Errorf("MEMORY STATS: %q", got)
	}
}

// BenchmarkOpsOverhead measures THROTTLE.CHECK with the slow log and the
// latency monitor on (Redis's default slow log threshold, a latency
// threshold of 100 ms) and off, one read batch per op group as OnTraffic
// runs it (the clock read, process, endBatch): batches of one command
// (where the slow log takes the batch's closing clock read) and pipelines
// of 16. Compare with benchstat -col /ops. (On a loaded machine a batch
// may stall past 10 ms and be logged, as it should be.)
func BenchmarkOpsOverhead(b *testing.B) {
	for _, batch := range []int{1, 16} {
		for _, on := range []bool{false, true} {
			name := "batch=" + itoa(batch) + "/ops=off"
			if on {
				name = "batch=" + itoa(batch) + "/ops=on"
			}
			b.Run(name, func(b *testing.B) {
				tl := newTestLoop(b, func(c *Config) {
					if on {
						c.LatencyMonitorThreshold = 100 * time.Millisecond
					} else {
						c.SlowlogLogSlowerThan = -1
					}
				})
				var in []byte
				for i := 0; i < batch; i++ {
					in = append(in, cmd("THROTTLE.CHECK", "user:"+itoa(i), "1000000", "1s")...)
				}
				run := func() {
					now := tl.srv.now()
					n, _ := tl.l.process(tl.cl, in, now)
					tl.l.endBatch(n, now)
					tl.l.out = tl.l.out[:0]
				}
				run() // create the keys
				b.ReportAllocs()
				b.ResetTimer()
				for done := 0; done < b.N; done += batch {
					run()
				}
			})
		}
	}
}

// BenchmarkOpsOverheadPaired runs two loops of batches of one
// THROTTLE.CHECK in alternating chunks of 512 batches inside one benchmark,
// swapping which goes first on every round, so that a machine whose load
// drifts slows both alike; it reports each side's ns/op and their ratio.
// "on-vs-off" has the slow log and latency monitor off on one side and on
// on the other (1 = no cost); "off-vs-off" has both off and measures what
// the pairing itself cannot tell apart.
func BenchmarkOpsOverheadPaired(b *testing.B) {
	for _, pair := range []struct {
		name string
		on   bool
	}{{"off-vs-off", false}, {"on-vs-off", true}} {
		b.Run(pair.name, func(b *testing.B) {
			mk := func(on bool) func() {
				tl := newTestLoop(b, func(c *Config) {
					if on {
						c.LatencyMonitorThreshold = 100 * time.Millisecond
					} else {
						c.SlowlogLogSlowerThan = -1
					}
				})
				in := []byte(cmd("THROTTLE.CHECK", "user:1", "1000000", "1s"))
				run := func() {
					now := tl.srv.now()
					n, _ := tl.l.process(tl.cl, in, now)
					tl.l.endBatch(n, now)
					tl.l.out = tl.l.out[:0]
				}
				run()
				return run
			}
			base, cand := mk(false), mk(pair.on)
			const chunk = 512
			var baseNs, candNs time.Duration
			timeChunk := func(f func()) time.Duration {
				t0 := time.Now()
				for i := 0; i < chunk; i++ {
					f()
				}
				return time.Since(t0)
			}
			b.ReportAllocs()
			b.ResetTimer()
			round := 0
			for done := 0; done < b.N; done += 2 * chunk {
				if round%2 == 0 {
					baseNs += timeChunk(base)
					candNs += timeChunk(cand)
				} else {
					candNs += timeChunk(cand)
					baseNs += timeChunk(base)
				}
				round++
			}
			n := float64(round * chunk)
			b.ReportMetric(float64(baseNs)/n, "base-ns/op")
			b.ReportMetric(float64(candNs)/n, "cand-ns/op")
			b.ReportMetric(float64(candNs)/float64(baseNs), "cand/base")
		})
	}
}

// TestSlowlogConcurrentLoops: connections on two loops log into the one
// slow log at once (run it with -race); every command gets an entry with
// an id of its own.
func TestSlowlogConcurrentLoops(t *testing.T) {
	s := startIntroServer(t, func(c *Config) { c.SlowlogLogAll = true; c.SlowlogMaxLen = 1000 })
	const conns, per = 4, 50
	done := make(chan error, conns)
	for i := 0; i < conns; i++ {
		rc := dialIntro(t, s)
		go func() {
			for j := 0; j < per; j++ {
				if _, err := rc.c.Write([]byte("PING\r\n")); err != nil {
					done <- err
					return
				}
				if line, err := rc.r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
					done <- fmt.Errorf("PING: %q, %v", line, err)
					return
				}
			}
			done <- nil
		}()
	}
	for i := 0; i < conns; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	rc := dialIntro(t, s)
	if got := rc.do(t, "SLOWLOG", "LEN"); got != ":"+itoa(conns*per)+"\r\n" {
		t.Fatalf("SLOWLOG LEN %q, want %d", got, conns*per)
	}
	ids := map[int64]bool{}
	for _, e := range s.ops.slow.Get(-1) {
		if ids[e.ID] {
			t.Fatalf("id %d twice", e.ID)
		}
		ids[e.ID] = true
	}
}

// TestSlowlogExecAlone: EXEC alone in its batch, running a fast command
// that is not timed on its own: the batch's time is not handed to that
// command under EXEC's arguments.
func TestSlowlogExecAlone(t *testing.T) {
	clk := &stepClock{step: int64(20 * time.Millisecond)}
	tl := opsLoop(t, clk, nil)
	tl.batch(t, cmd("MULTI"))
	tl.batch(t, cmd("PING", "inner"))
	if got := tl.batch(t, cmd("EXEC")); got != "*1\r\n$5\r\ninner\r\n" {
		t.Fatalf("EXEC: %q", got)
	}
	if got := tl.batch(t, cmd("SLOWLOG", "GET", "-1")); strings.Contains(got, "EXEC") {
		t.Fatalf("the EXEC batch was logged: %q", got)
	}
}

// TestGCRADecisionsCounted: GCRA's decisions count in Stats (INFO, /metrics)
// with the other commands'.
func TestGCRADecisionsCounted(t *testing.T) {
	tl := statsLoop(t)
	tl.run(cmd("GCRA", "g", "0", "1", "60") + cmd("GCRA", "g", "0", "1", "60") + cmd("GCRA", "g", "0", "1", "60"))
	tl.l.ctr.flush(&tl.l.pub)
	if st := tl.srv.Stats(); st.Allowed != 1 || st.Denied != 2 {
		t.Fatalf("allowed %d denied %d, want 1 and 2", st.Allowed, st.Denied)
	}
}
