package clock

import (
	"testing"
	"time"
)

func TestNowStartsAtTheWallClockAndNeverDecreases(t *testing.T) {
	before := time.Now().UnixNano()
	c := New()
	after := time.Now().UnixNano()
	if a := c.Anchor(); a < before || a > after {
		t.Fatalf("anchor %d outside [%d, %d]", a, before, after)
	}
	prev := c.Now()
	if prev < c.Anchor() {
		t.Fatalf("Now %d before the anchor %d", prev, c.Anchor())
	}
	for i := 0; i < 10000; i++ {
		n := c.Now()
		if n < prev {
			t.Fatalf("Now went back from %d to %d", prev, n)
		}
		prev = n
	}
}

// A wall clock that steps forward and back does not move Now: only the
// monotonic source does.
func TestWallClockStepsDoNotMoveNow(t *testing.T) {
	var mono int64 = 5_000
	c := NewFrom(1_700_000_000_000_000_000, func() int64 { return mono })
	if got := c.Now(); got != 1_700_000_000_000_000_000 {
		t.Fatalf("Now at the anchor = %d", got)
	}
	mono += int64(3 * time.Second)
	if got, want := c.Now(), int64(1_700_000_003_000_000_000); got != want {
		t.Fatalf("Now after 3 s = %d, want %d", got, want)
	}
}

func BenchmarkNow(b *testing.B) {
	c := New()
	b.ReportAllocs()
	var s int64
	for b.Loop() {
		s += c.Now()
	}
	_ = s
}

func BenchmarkTimeNow(b *testing.B) {
	b.ReportAllocs()
	var s int64
	for b.Loop() {
		s += time.Now().UnixNano()
	}
	_ = s
}
