package resp

import (
	"bytes"
	"math"
	"strconv"
	"strings"
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

// TestSwarDigits: the lane divisions swarDigits relies on are exact over
// the ranges its doc states (and those cover the ranges it uses: lanes
// below 10000 and below 100), and its eight digits are strconv's, zero
// padded, for every x below 100000 and a stride through the rest.
func TestSwarDigits(t *testing.T) {
	for y := uint64(0); y < 43699; y++ {
		if y*10486>>20 != y/100 {
			t.Fatalf("%d*10486>>20 = %d, want %d", y, y*10486>>20, y/100)
		}
	}
	for y := uint64(0); y < 179; y++ {
		if y*103>>10 != y/10 {
			t.Fatalf("%d*103>>10 = %d, want %d", y, y*103>>10, y/10)
		}
	}
	// The bounds are tight: the next value is off by one.
	if y := uint64(43699); y*10486>>20 == y/100 {
		t.Fatalf("%d*10486>>20 is still exact: the doc's bound is not the first failure", y)
	}
	if y := uint64(179); y*103>>10 == y/10 {
		t.Fatalf("%d*103>>10 is still exact: the doc's bound is not the first failure", y)
	}
	check := func(x uint32) {
		d := swarDigits(x)
		var got [8]byte
		for i := range got {
			got[i] = byte(d>>(8*i)) + '0'
		}
		want := strconv.FormatUint(uint64(x)+1e8, 10)[1:] // eight digits, zero padded
		if string(got[:]) != want {
			t.Fatalf("swarDigits(%d) = %q, want %q", x, got, want)
		}
	}
	for x := uint32(0); x < 100_000; x++ {
		check(x)
	}
	for x := uint32(100_000); x < 1e8; x += 997 {
		check(x)
	}
	check(1e8 - 1)
}

// TestAppendIntFieldsMatches: AppendIntFields writes what the header
// writer followed by AppendBulkString and AppendInt, value by value,
// writes, in both protocols, for every width of integer, names of every
// length its fast path takes and longer, field counts up to and past the
// one-digit headers, and buffers with and without room to spare.
func TestAppendIntFieldsMatches(t *testing.T) {
	ints := []int64{0, 1, 9, 10, 99, 100, 12345678, 99999999, 1e8, 1e8 + 1, 1_764_201_600_123,
		1e16 - 1, 1e16, math.MaxInt64, -1, -9, -10, -123456789, math.MinInt64}
	for p := int64(1); p > 0 && p <= math.MaxInt64/10; p *= 10 {
		ints = append(ints, p-1, p, 7*p+3, -p)
	}
	nameSets := [][]string{
		{"allowed", "limit", "remaining", "reset_at_ms", "retry_after_ms"},
		{"", "a", "123456789", "1234567890", strings.Repeat("n", 99)},
		{strings.Repeat("n", 100), "x", "y", "z", "w"}, // past the fast path's two-digit lengths
	}
	prefixes := [][]byte{nil, []byte("x"), append(make([]byte, 0, 512), "prefix"...)}
	for _, names := range nameSets {
		for _, n := range []int{5, 6, 9, 10, 12} {
			for _, resp3 := range []bool{false, true} {
				for start := 0; start < len(ints); start++ {
					vals := make([]int64, 5)
					for j := range vals {
						vals[j] = ints[(start+7*j)%len(ints)]
					}
					for _, pre := range prefixes {
						var want []byte
						want = append(want, pre...)
						if resp3 {
							want = AppendMap(want, n, true)
						} else {
							want = AppendArray(want, n)
						}
						for j, v := range vals {
							if resp3 {
								want = AppendBulkString(want, names[j])
							}
							want = AppendInt(want, v)
						}
						got := AppendIntFields(pre[:len(pre):len(pre)], n, resp3, names, vals)
						if !bytes.Equal(got, want) {
							t.Fatalf("AppendIntFields(%q, %d, %v, %q, %d) = %q, want %q", pre, n, resp3, names, vals, got, want)
						}
						if len(pre) > 0 && cap(pre) > len(want) {
							got = AppendIntFields(pre, n, resp3, names, vals)
							if !bytes.Equal(got, want) || &got[0] != &pre[0] {
								t.Fatalf("AppendIntFields with room: %q (moved: %v), want %q in place", got, &got[0] != &pre[0], want)
							}
						}
					}
				}
			}
		}
	}
	// No values: the header alone.
	if got := string(AppendIntFields(nil, 3, false, nil, nil)); got != "*3\r\n" {
		t.Errorf("AppendIntFields with no values = %q, want %q", got, "*3\r\n")
	}
}
