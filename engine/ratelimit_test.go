package engine

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestRateGCRAData runs testdata/rate_gcra: vectors worked out by hand
// from Redis's GCRA arithmetic (see the file's header), on a clock the test
// sets line by line.
func TestRateGCRAData(t *testing.T) {
	datadriven.RunTest(t, "testdata/rate_gcra", func(t *testing.T, d *datadriven.TestData) string {
		var maxBurst, rate int64
		var period string
		d.ScanArgs(t, "max_burst", &maxBurst)
		d.ScanArgs(t, "rate", &rate)
		d.ScanArgs(t, "period", &period)
		p, err := strconv.ParseFloat(period, 64)
		if err != nil {
			t.Fatal(err)
		}
		switch d.Cmd {
		case "new":
			tokens := int64(1)
			if d.HasArg("tokens") {
				d.ScanArgs(t, "tokens", &tokens)
			}
			g, err := NewRateGCRA(maxBurst, rate, p, tokens)
			if err != nil {
				return "error: " + err.(*Error).Text + "\n"
			}
			return fmt.Sprintf("burst=%d interval_us=%d tokens=%d\n", g.Burst, g.Interval, g.Tokens)
		case "run":
			var s State
			var b strings.Builder
			for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
				f := strings.Fields(line)
				nowMs, err := strconv.ParseInt(f[0], 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				tokens := int64(1)
				if len(f) > 1 {
					if tokens, err = strconv.ParseInt(f[1], 10, 64); err != nil {
						t.Fatal(err)
					}
				}
				g, err := NewRateGCRA(maxBurst, rate, p, tokens)
				if err != nil {
					fmt.Fprintf(&b, "%s: error: %s\n", line, err.(*Error).Text)
					continue
				}
				now := nowMs * 1e6
				next, r, ttl, err := g.Apply(s, now)
				if err != nil {
					if next != s {
						t.Fatalf("%s: an error changed the state", line)
					}
					fmt.Fprintf(&b, "%s: error: %s\n", line, err.(*Error).Text)
					continue
				}
				fmt.Fprintf(&b, "%s: [%d %d %d %d %d]", line, r.Limited, r.Burst, r.Remaining, r.RetryAfter, r.ResetAfter)
				if next != s {
					fmt.Fprintf(&b, " tat_us=%d expire_ms=%s", next.A, expireMs(now, ttl))
				} else if r.Limited == 0 {
					t.Fatalf("%s: allowed without moving the TAT", line)
				}
				b.WriteByte('\n')
				s = next
			}
			return b.String()
		}
		t.Fatalf("unknown command %q", d.Cmd)
		return ""
	})
}

// expireMs is the last millisecond a key with this ttl is alive at.
func expireMs(now, ttl int64) string {
	if ttl == math.MaxInt64 {
		return "never"
	}
	return strconv.FormatInt((now+ttl)/1e6-1, 10)
}

// TestRateGCRAWrongType: the state of another algorithm is WRONGTYPE, and
// RateGCRA state is WRONGTYPE for THROTTLE.CHECK and CL.THROTTLE.
func TestRateGCRAWrongType(t *testing.T) {
	g, err := NewRateGCRA(1, 1, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Kind{KindGCRA, KindToken, KindFixed, KindSliding} {
		s := State{A: 5, Kind: k}
		if next, _, _, err := g.Apply(s, epoch); !errors.Is(err, ErrWrongType) || next != s {
			t.Errorf("%v: %v", k, err)
		}
	}
	s := State{A: epoch / 1000, Kind: KindRateGCRA}
	l, _ := NewLimit(KindGCRA, 1, 1e9, 1)
	if _, _, _, err := l.Check(s, epoch, 1); !errors.Is(err, ErrWrongType) {
		t.Errorf("THROTTLE.CHECK on GCRA state: %v", err)
	}
	c, _ := NewCell(1, 1, 1)
	if _, _, _, err := c.Throttle(s, epoch, 1); !errors.Is(err, ErrWrongType) {
		t.Errorf("CL.THROTTLE on GCRA state: %v", err)
	}
}

// TestRateGCRAPropertyBound drives random timelines through GCRA and checks
// that the tokens admitted never exceed max_burst + 1 + elapsed/interval,
// that a denied call changes nothing, and that remaining stays in
// [0, max_burst+1].
func TestRateGCRAPropertyBound(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for it := 0; it < 3000; it++ {
		maxBurst := r.Int64N(20)
		rate := 1 + r.Int64N(50)
		period := []float64{0.001, 0.5, 1, 2.5, 60}[r.IntN(5)]
		var s State
		now := epoch + r.Int64N(1e9)
		start := now
		var admitted int64
		var iv int64
		expiry := int64(math.MaxInt64)
		for i := 0; i < 300; i++ {
			now += r.Int64N(int64(period*1e9)/max(rate/4, 1) + 1)
			if now >= expiry { // the store drops the key once its ttl ran out
				s = State{}
			}
			tokens := 1 + r.Int64N(maxBurst+3)
			g, err := NewRateGCRA(maxBurst, rate, period, tokens)
			if err != nil {
				t.Fatal(err)
			}
			iv = g.Interval
			next, rep, ttl, err := g.Apply(s, now)
			if err != nil {
				t.Fatal(err)
			}
			if next != s {
				expiry = now + ttl
			}
			if rep.Remaining < 0 || rep.Remaining > g.Burst {
				t.Fatalf("remaining %d, burst %d", rep.Remaining, g.Burst)
			}
			if rep.Limited == 1 {
				if next != s {
					t.Fatal("a denied call changed the state")
				}
				if tokens > g.Burst && rep.RetryAfter != -1 {
					t.Fatalf("tokens %d > burst %d: retry %d", tokens, g.Burst, rep.RetryAfter)
				}
			} else {
				admitted += tokens
			}
			s = next
		}
		// Time is read at millisecond resolution: the first call may sit up
		// to 1 ms later than start.
		elapsedUs := (now-start)/1000 + 1000
		bound := maxBurst + 1 + elapsedUs/iv + 1
		if admitted > bound {
			t.Fatalf("max_burst %d rate %d period %v: admitted %d > %d", maxBurst, rate, period, admitted, bound)
		}
	}
}

// BenchmarkRateGCRA measures one allowed GCRA call.
func BenchmarkRateGCRA(b *testing.B) {
	g, _ := NewRateGCRA(100, 1000, 1, 1)
	var s State
	now := int64(epoch)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		now += 1e6
		s, _, _, _ = g.Apply(s, now)
	}
}
