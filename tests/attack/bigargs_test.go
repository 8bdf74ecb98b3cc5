package attack

import (
	"bytes"
	"fmt"
	"strconv"
	"testing"
	"time"
)

// bigCase is one oversized command sent to both servers.
type bigCase struct {
	name  string
	frame []byte
	check func(t *testing.T, v value)
}

func bigCases() []bigCase {
	const argLen = 64 << 20 // the default proto-max-bulk-len, exactly
	echo := make([]byte, 0, argLen+64)
	echo = append(echo, "*2\r\n$4\r\nECHO\r\n$"...)
	echo = strconv.AppendInt(echo, argLen, 10)
	echo = append(echo, "\r\n"...)
	echo = append(echo, bytes.Repeat([]byte{'z'}, argLen)...)
	echo = append(echo, "\r\n"...)

	const keys = 1_000_000
	del := make([]byte, 0, keys*20)
	del = append(del, '*')
	del = strconv.AppendInt(del, keys+1, 10)
	del = append(del, "\r\n$3\r\nDEL\r\n"...)
	for i := 0; i < keys; i++ {
		k := fmt.Sprintf("nokey:%d", i)
		del = append(del, '$')
		del = strconv.AppendInt(del, int64(len(k)), 10)
		del = append(del, "\r\n"...)
		del = append(del, k...)
		del = append(del, "\r\n"...)
	}
	return []bigCase{
		{"ECHO of a 64 MiB argument", echo, func(t *testing.T, v value) {
			if v.kind != '$' || v.n != argLen {
				t.Fatalf("ECHO reply: type %q length %d, want a bulk of %d", v.kind, v.n, argLen)
			}
		}},
		{"DEL of 1M keys", del, func(t *testing.T, v value) {
			if v.kind != ':' || v.n != 0 {
				t.Fatalf("DEL reply: %+v, want :0", v)
			}
		}},
	}
}

// sendBig writes frame on a fresh connection while reading the reply (so a
// large reply cannot block the server's writes against ours), and returns
// the reply and the wall time from first byte sent to reply read.
func sendBig(t *testing.T, p *proc, frame []byte) (value, time.Duration) {
	t.Helper()
	c := dial(t, p)
	start := time.Now()
	werr := make(chan error, 1)
	go func() {
		_, err := c.c.Write(frame)
		werr <- err
	}()
	_ = c.c.SetReadDeadline(time.Now().Add(120 * time.Second))
	v, err := c.reply()
	took := time.Since(start)
	if err != nil {
		t.Fatalf("%s: reading the reply: %v; log:\n%s", p.name, err, p.log.String())
	}
	if err := <-werr; err != nil {
		t.Fatalf("%s: writing the command: %v", p.name, err)
	}
	// The connection still works after the big command.
	if got := c.do("PING"); got.str != "PONG" {
		t.Fatalf("%s: PING after the big command = %+v", p.name, got)
	}
	return v, took
}

// TestBigArguments sends a 64 MiB argument and a command of a million
// arguments to our server and to redis-server, checks both answer
// correctly, and compares the CPU seconds each process spent on them. A
// control client keeps talking to our server meanwhile.
func TestBigArguments(t *testing.T) {
	// A client whose unsent replies pass client-output-buffer-limit is
	// closed; redis-server has no limit on normal clients by default.
	// Compare like with like.
	ours := startServer(t, "--client-output-buffer-limit", "0")
	redis := startRedis(t)
	for _, bc := range bigCases() {
		t.Run(bc.name, func(t *testing.T) {
			ctl := startControl(t, ours, true)
			rss := watchRSS(t, ours)
			before := ours.cpu(t)
			v, wall := sendBig(t, ours, bc.frame)
			ourCPU := ours.cpu(t) - before
			ourRSS := rss.stop()
			lat := ctl.stop(t)
			bc.check(t, v)

			rctl := startControl(t, redis, false)
			rss = watchRSS(t, redis)
			before = redis.cpu(t)
			v, rwall := sendBig(t, redis, bc.frame)
			redisCPU := redis.cpu(t) - before
			redisRSS := rss.stop()
			rlat := rctl.stop(t)
			bc.check(t, v)

			t.Logf("%d-byte frame: throttlekit-server %v CPU (%v wall), redis-server %v CPU (%v wall), ratio %.2f",
				len(bc.frame), ourCPU, wall.Round(time.Millisecond), redisCPU, rwall.Round(time.Millisecond),
				ratio(ourCPU, redisCPU))
			t.Logf("peak RSS: throttlekit-server %s, redis-server %s", mib(ourRSS), mib(redisRSS))
			t.Logf("control client meanwhile: %d commands, p50 %v, p99 %v, max %v (redis-server, PING only: %d, p50 %v, p99 %v, max %v)",
				len(lat), lat.quantile(0.5), lat.quantile(0.99), lat.quantile(1),
				len(rlat), rlat.quantile(0.5), rlat.quantile(0.99), rlat.quantile(1))
			// Bounds that cannot flake: ten times Redis's CPU, with two
			// clock ticks of slack for the tick-sized readings, and a
			// p99 of a second.
			if bound := 10 * (redisCPU + 2*time.Second/clockTicks); ourCPU > bound {
				t.Errorf("CPU %v > 10x redis-server's %v (+2 ticks)", ourCPU, redisCPU)
			}
			if p99 := lat.quantile(0.99); p99 > time.Second {
				t.Errorf("control client p99 %v > 1s", p99)
			}
			ours.alive(t)
		})
	}
}

// ratio is a/b, with b at least one clock tick.
func ratio(a, b time.Duration) float64 {
	return float64(a) / float64(max(b, time.Second/clockTicks))
}
