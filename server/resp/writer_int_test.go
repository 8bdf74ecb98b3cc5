package resp

import (
	"math"
	"strconv"
	"testing"
)

// TestAppendIntMatchesStrconv: the hand-written digit writer gives
// strconv's digits at every width and at the edges of its fast paths.
func TestAppendIntMatchesStrconv(t *testing.T) {
	vals := []int64{0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 1e15 - 1, 1e15, 1e16 - 1, 1e16, 1e16 + 1,
		1_700_000_000_123, -1, -9, -10, -100, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	for p := int64(1); p > 0 && p <= math.MaxInt64/10; p *= 10 {
		vals = append(vals, p-1, p, p+1, 7*p+3)
	}
	for _, n := range vals {
		want := ":" + strconv.FormatInt(n, 10) + "\r\n"
		if got := string(AppendInt([]byte("x"), n)); got != "x"+want {
			t.Errorf("AppendInt(%d) = %q, want %q", n, got, "x"+want)
		}
	}
	for n := int64(-1000); n <= 100_000; n++ {
		want := "$" + strconv.FormatInt(n, 10) + "\r\n"
		if got := string(appendHeader(nil, '$', n)); got != want {
			t.Fatalf("appendHeader(%d) = %q, want %q", n, got, want)
		}
	}
}
