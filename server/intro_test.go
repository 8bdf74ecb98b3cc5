package server

import (
	"bytes"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

// usecFields masks the measured times of INFO commandstats.
var usecFields = regexp.MustCompile(`usec=[0-9]+,usec_per_call=[0-9]+\.[0-9]{2}`)

// statsLoop is a test loop whose counters Stats and INFO see.
func statsLoop(t *testing.T) *testLoop {
	tl := newTestLoop(t, nil)
	tl.srv.clients[tl.cl.id] = tl.cl
	tl.srv.loops = append(tl.srv.loops, tl.l)
	return tl
}

func TestInfoCommandStats(t *testing.T) {
	tl := statsLoop(t)
	tl.run(cmd("THROTTLE.CHECK", "k", "10", "1s") + cmd("THROTTLE.CHECK", "k", "x", "1s") + cmd("THROTTLE.CHECK", "k") +
		cmd("CLIENT", "ID") + cmd("CLIENT", "SETNAME") + cmd("CLIENT", "SETNAME", "a b") + cmd("NOSUCH") +
		cmd("HELLO", "9"))
	got, _ := tl.run(cmd("INFO", "commandstats", "errorstats"))
	got = usecFields.ReplaceAllString(got, "usec=U")
	want := "# Commandstats\r\n" +
		"cmdstat_throttle.check:calls=2,usec=U,rejected_calls=1,failed_calls=1\r\n" +
		"cmdstat_hello:calls=1,usec=U,rejected_calls=0,failed_calls=1\r\n" +
		"cmdstat_client|id:calls=1,usec=U,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_client|setname:calls=1,usec=U,rejected_calls=1,failed_calls=1\r\n" +
		"\r\n# Errorstats\r\n" +
		"errorstat_ERR:count=5\r\n" +
		"errorstat_NOPROTO:count=1\r\n\r\n" // the last CRLF ends the bulk string
	if body := got[strings.Index(got, "\r\n")+2:]; body != want {
		t.Fatalf("INFO commandstats errorstats:\n got %q\nwant %q", body, want)
	}
	st := tl.srv.Stats()
	if c := st.CommandStats["throttle.check"]; c.Calls != 2 || c.Rejected != 1 || c.Failed != 1 {
		t.Fatalf("Stats.CommandStats[throttle.check] = %+v", c)
	}

	// CONFIG RESETSTAT: INFO starts from zero, Stats stays cumulative.
	tl.run(cmd("CONFIG", "RESETSTAT"))
	got, _ = tl.run(cmd("INFO", "commandstats", "errorstats", "stats"))
	got = usecFields.ReplaceAllString(got, "usec=U")
	for _, want := range []string{
		"# Commandstats\r\ncmdstat_config|resetstat:calls=1,usec=U,rejected_calls=0,failed_calls=0\r\n\r\n# Errorstats\r\n\r\n",
		"total_error_replies:0\r\n", "total_commands_processed:1\r\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("INFO after CONFIG RESETSTAT lacks %q:\n%s", want, got)
		}
	}
	if st := tl.srv.Stats(); st.CommandStats["throttle.check"].Calls != 2 {
		t.Errorf("Stats after CONFIG RESETSTAT: %+v", st.CommandStats)
	}
}

// TestInfoSections: which sections INFO writes for its special arguments,
// in order.
func TestInfoSections(t *testing.T) {
	tl := statsLoop(t)
	heads := regexp.MustCompile(`(?m)^# (\w+)\r$`)
	dflt := "Server Clients Memory Persistence Stats CPU Throttle gRPC Errorstats Keyspace"
	all := "Server Clients Memory Persistence Stats CPU Throttle gRPC Upstream Commandstats Errorstats Keyspace Latencystats"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, dflt},
		{[]string{"default"}, dflt},
		{[]string{"DEFAULT", "commandstats"}, "Server Clients Memory Persistence Stats CPU Throttle gRPC Commandstats Errorstats Keyspace"},
		{[]string{"upstream"}, "Upstream"},
		{[]string{"all"}, all},
		{[]string{"everything"}, all},
		{[]string{"cpu", "SERVER"}, "Server CPU"},
		{[]string{"nosuch"}, ""},
	} {
		got, _ := tl.run(cmd(append([]string{"INFO"}, tt.args...)...))
		var names []string
		for _, m := range heads.FindAllStringSubmatch(got, -1) {
			names = append(names, m[1])
		}
		if s := strings.Join(names, " "); s != tt.want {
			t.Errorf("INFO %v sections = %q, want %q", tt.args, s, tt.want)
		}
	}
	got, _ := tl.run(cmd("INFO", "cpu"))
	if !regexp.MustCompile(`used_cpu_user:[0-9]+\.[0-9]{6}\r\n`).MatchString(got) {
		t.Errorf("INFO cpu: %q", got)
	}
}

func TestMonitorLine(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, `+1700000040.000123 [0 127.0.0.1:5000] "PING"` + "\r\n"},
		{[]string{"ECHO", "a b\n\"\\\x01\xff"}, `+1700000040.000123 [0 127.0.0.1:5000] "ECHO" "a b\n\"\\\x01\xff"` + "\r\n"},
		{[]string{"auth", "user", "pass"}, `+1700000040.000123 [0 127.0.0.1:5000] "auth" "(redacted)" "(redacted)"` + "\r\n"},
		{[]string{"HELLO", "3", "AUTH", "u", "p", "SETNAME", "x"},
			`+1700000040.000123 [0 127.0.0.1:5000] "HELLO" "3" "AUTH" "(redacted)" "(redacted)" "SETNAME" "x"` + "\r\n"},
		{[]string{"HELLO", "3", "auth", "u"}, `+1700000040.000123 [0 127.0.0.1:5000] "HELLO" "3" "auth" "(redacted)"` + "\r\n"},
	} {
		args := make([][]byte, len(tt.args))
		for i, a := range tt.args {
			args[i] = []byte(a)
		}
		got := string(appendMonitorLine(nil, "127.0.0.1:5000", args, 1_700_000_040_000_123_456))
		if got != tt.want {
			t.Errorf("%q:\n got %s\nwant %s", tt.args, got, tt.want)
		}
	}
}

// TestClientReplyCountsAndMonitorOff: a silenced command still runs and is
// counted, and with no monitor attached the feed costs nothing.
func TestClientReplySilencedStillRuns(t *testing.T) {
	tl := statsLoop(t)
	got, _ := tl.run(cmd("CLIENT", "REPLY", "OFF") + cmd("THROTTLE.CHECK", "k", "1", "1h") + cmd("CLIENT", "REPLY", "ON") +
		cmd("THROTTLE.CHECK", "k", "1", "1h"))
	if !strings.HasPrefix(got, "+OK\r\n*5\r\n:0\r\n") {
		t.Fatalf("replies: %q", got)
	}
	tl.l.ctr.flush(&tl.l.pub)
	if st := tl.srv.Stats(); st.Allowed != 1 || st.Denied != 1 {
		t.Fatalf("allowed %d denied %d, want 1 and 1", st.Allowed, st.Denied)
	}
}

// TestDispatchZeroAllocCounted: the per-command counters and the MONITOR
// check add no allocation to the hot path, with CLIENT REPLY OFF too.
func TestDispatchZeroAllocCounted(t *testing.T) {
	tl := statsLoop(t)
	in := []byte(cmd("THROTTLE.CHECK", "k", "100", "1s") + cmd("CLIENT", "ID"))
	tl.l.process(tl.cl, in, 1)
	if n := testing.AllocsPerRun(200, func() {
		tl.l.out = tl.l.out[:0]
		tl.l.process(tl.cl, in, 1)
		tl.l.ctr.flush(&tl.l.pub)
	}); n != 0 {
		t.Fatalf("%v allocations per batch", n)
	}
	tl.run(cmd("CLIENT", "REPLY", "OFF"))
	if n := testing.AllocsPerRun(200, func() { tl.l.process(tl.cl, in, 1) }); n != 0 {
		t.Fatalf("%v allocations per batch with CLIENT REPLY OFF", n)
	}
	if len(tl.l.out) != 0 {
		t.Fatalf("replies with CLIENT REPLY OFF: %q", tl.l.out)
	}
}

// TestClientListOtherClients: another connection of the same loop shows its
// transaction (flag x, queued commands), its last command, its protocol,
// and flag O once it monitors; CLIENT KILL closes it.
func TestClientListOtherClients(t *testing.T) {
	tl := statsLoop(t)
	other := newClient(tl.srv, tl.l, 2)
	other.since = tl.cl.since
	tl.srv.clients[other.id] = other
	runAs := func(cl *client, in string) string {
		tl.l.process(cl, []byte(in), 1)
		return tl.take()
	}
	runAs(other, cmd("HELLO", "3")+cmd("MULTI")+cmd("PING")+cmd("PING"))
	list, _ := tl.run(cmd("CLIENT", "LIST", "ID", "2"))
	for _, want := range []string{"id=2 ", " flags=x ", " multi=2 ", " cmd=multi ", " resp=3 "} {
		if !strings.Contains(list, want) {
			t.Errorf("CLIENT LIST of a client in MULTI lacks %q: %q", want, list)
		}
	}
	runAs(other, cmd("DISCARD")+cmd("MONITOR"))
	list, _ = tl.run(cmd("CLIENT", "LIST", "ID", "2"))
	for _, want := range []string{" flags=O ", " multi=-1 ", " cmd=monitor "} {
		if !strings.Contains(list, want) {
			t.Errorf("CLIENT LIST of a monitor lacks %q: %q", want, list)
		}
	}
	if got := runAs(other, cmd("RESET")); got != "+RESET\r\n" {
		t.Errorf("RESET of a monitor = %q", got)
	}
	if list, _ = tl.run(cmd("CLIENT", "LIST", "ID", "2")); !strings.Contains(list, " flags=N ") {
		t.Errorf("CLIENT LIST after RESET of a monitor: %q", list)
	}
	if sh := tl.l.shared(); sh.monitors.Load() != nil {
		t.Errorf("RESET left the monitor registered")
	}
	if got, _ := tl.run(cmd("CLIENT", "KILL", "ID", "2")); got != ":1\r\n" {
		t.Errorf("CLIENT KILL ID 2 = %q", got)
	}
}

// TestMonitorSlowIsClosed: a monitor that does not read is closed once its
// queued output passes the output buffer limit; the client whose commands
// it was fed is served throughout.
func TestMonitorSlowIsClosed(t *testing.T) {
	s := startIntroServer(t, func(c *Config) { c.OutputBufferLimit = 64 << 10 })
	mon := dialIntro(t, s)
	if got := mon.do(t, "MONITOR"); got != "+OK\r\n" {
		t.Fatalf("MONITOR: %q", got)
	}
	c := dialIntro(t, s)
	big := strings.Repeat("x", 16<<10)
	var batch strings.Builder
	for i := 0; i < 64; i++ {
		batch.WriteString(cmd("ECHO", big))
	}
	want := "$16384\r\n" + big + "\r\n"
	// 64 rounds of 1 MiB: far more feed than socket buffers and the limit hold.
	for round := 0; round < 64; round++ {
		if _, err := c.c.Write([]byte(batch.String())); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 64; i++ {
			var b bytes.Buffer
			if err := readValue(c.r, &b); err != nil || b.String() != want {
				t.Fatalf("round %d reply %d: %v (%d bytes)", round, i, err, b.Len())
			}
		}
	}
	_ = mon.c.SetReadDeadline(time.Now().Add(60 * time.Second)) // bounds a broken close; times nothing
	n, err := io.Copy(io.Discard, mon.r)
	if err != nil {
		t.Fatalf("the slow monitor was not closed after %d bytes: %v", n, err)
	}
	if n >= 64<<20 {
		t.Fatalf("the slow monitor received the whole feed (%d bytes)", n)
	}
}

// BenchmarkCallOverhead isolates what the per-command counters, the
// CLIENT REPLY check and the MONITOR check add to a command: PING's
// handler run directly, and through loop.call as dispatch runs it.
func BenchmarkCallOverhead(b *testing.B) {
	tl := newTestLoop(b, nil)
	sp := &commandTable[cmdPing]
	args := [][]byte{[]byte("PING")}
	b.Run("handler", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			sp.run(tl.l, tl.cl, args, 1)
			tl.l.out = tl.l.out[:0]
		}
	})
	b.Run("call", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			tl.l.call(sp, tl.cl, args, 1)
			tl.l.out = tl.l.out[:0]
		}
		tl.l.ctr.observe(1, int64(b.N))
	})
}
