package server

import (
	"fmt"
	"testing"
	"time"
)

// benchDispatch drives the dispatcher over a pre-built pipeline of batch
// commands so that one benchmark op is one command: parsing, dispatch, the
// store transform and the reply, without sockets. Keys exist before timing.
func benchDispatch(b *testing.B, build func(i int) string, batch int, resp3 bool) {
	tl := newTestLoop(b, nil)
	tl.cl.resp3 = resp3
	var in []byte
	for i := 0; i < batch; i++ {
		in = append(in, build(i)...)
	}
	now := time.Now().UnixNano()
	tl.l.process(tl.cl, in, now) // create the keys
	tl.l.out = tl.l.out[:0]
	b.ReportAllocs()
	b.SetBytes(int64(len(in) / batch))
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		now += 1000
		n, closed := tl.l.process(tl.cl, in, now)
		if n != len(in) || closed {
			b.Fatalf("consumed %d of %d, closed %v", n, len(in), closed)
		}
		tl.l.out = tl.l.out[:0]
	}
	b.StopTimer()
	tl.l.ctr.flush(&tl.l.pub)
	if tl.l.pub.errs[errKindERR].Load() != 0 || tl.l.pub.errs[errKindWrongType].Load() != 0 {
		b.Fatalf("error replies during the benchmark")
	}
}

func BenchmarkDispatch(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%d", i)
	}
	b.Run("throttle.check/gcra", func(b *testing.B) {
		benchDispatch(b, func(i int) string { return cmd("THROTTLE.CHECK", keys[i%len(keys)], "1000000", "1s") }, 256, false)
	})
	b.Run("throttle.check/fixed/resp3", func(b *testing.B) {
		benchDispatch(b, func(i int) string {
			return cmd("THROTTLE.CHECK", keys[i%len(keys)], "1000000", "1s", "ALGO", "fixed")
		}, 256, true)
	})
	b.Run("cl.throttle", func(b *testing.B) {
		benchDispatch(b, func(i int) string { return cmd("CL.THROTTLE", keys[i%len(keys)], "1000000", "1000000", "1") }, 256, false)
	})
	b.Run("throttle.peek", func(b *testing.B) {
		benchDispatch(b, func(i int) string { return cmd("THROTTLE.PEEK", keys[i%len(keys)], "1000000", "1s") }, 256, false)
	})
	b.Run("ping", func(b *testing.B) {
		benchDispatch(b, func(int) string { return cmd("PING") }, 256, false)
	})
	b.Run("ping/inline", func(b *testing.B) {
		benchDispatch(b, func(int) string { return "PING\r\n" }, 256, false)
	})
}

// TestDispatchZeroAlloc asserts the hot path allocates nothing per command
// once keys exist (the benchmark reports the same figure).
func TestDispatchZeroAlloc(t *testing.T) {
	tl := newTestLoop(t, nil)
	var in []byte
	for i := 0; i < 64; i++ {
		in = append(in, cmd("THROTTLE.CHECK", fmt.Sprintf("k%d", i), "1000000", "1s")...)
		in = append(in, cmd("CL.THROTTLE", fmt.Sprintf("c%d", i), "1000000", "1000000", "1")...)
		in = append(in, cmd("THROTTLE.PEEK", fmt.Sprintf("k%d", i), "1000000", "1s", "BURST", "1000000")...)
		in = append(in, "PING\r\n"...)
	}
	now := time.Now().UnixNano()
	tl.l.process(tl.cl, in, now)
	tl.l.out = tl.l.out[:0]
	// AllocsPerRun counts the allocations of the whole process, so a
	// background goroutine (the runtime's or a dependency's) can add a few
	// to one attempt; an allocation on the hot path shows in every attempt.
	var seen []float64
	for range 5 {
		allocs := testing.AllocsPerRun(20, func() {
			now += 1000
			tl.l.process(tl.cl, in, now)
			tl.l.out = tl.l.out[:0]
		})
		if allocs == 0 {
			return
		}
		seen = append(seen, allocs)
	}
	t.Fatalf("allocations per batch of %d commands in 5 attempts: %v, want 0 in at least one", 4*64, seen)
}

// BenchmarkCounters measures what the metrics cost a read batch of one
// command (pipeline 1, the worst case): one command count, one decision,
// the latency observation and the flush into the published atomics that
// /metrics and INFO read.
func BenchmarkCounters(b *testing.B) {
	var c counters
	var p published
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c.countCmd(cmdThrottleCheck)
		c.allowed++
		c.bytesIn += 40
		c.bytesOut += 30
		c.observe(int64(20_000+i&1023), 1)
		c.flush(&p)
	}
	if p.latCount.Load() == 0 {
		b.Fatal("nothing flushed")
	}
}
