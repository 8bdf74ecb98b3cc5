package engine

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
)

const epoch = int64(1_700_000_040_000_000_000) // a whole minute, ns since the epoch

func TestCellVectors(t *testing.T) {
	f, err := os.Open("testdata/cl_throttle.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var s State
	name, n := "", 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		if rest, ok := strings.CutPrefix(text, "case "); ok {
			name, s = rest, State{}
			continue
		}
		var ms, burst, count, period, qty int64
		var want CellReply
		if _, err := fmt.Sscanf(text, "%d %d %d %d %d -> %d %d %d %d %d", &ms, &burst, &count, &period, &qty,
			&want.Limited, &want.Limit, &want.Remaining, &want.RetryAfter, &want.ResetAfter); err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		c, err := NewCell(burst, count, period)
		if err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		var got CellReply
		s, got, _, err = c.Throttle(s, epoch+ms*1e6, qty)
		if err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		if got != want {
			t.Errorf("%s line %d: got %+v want %+v", name, line, got, want)
		}
		n++
	}
	if n < 20 {
		t.Fatalf("only %d vectors read", n)
	}
}

func TestCellErrors(t *testing.T) {
	for _, tc := range []struct {
		burst, count, period int64
		want                 *Error
	}{
		{1, -1, 60, ErrNegativeRate}, {1, 10, -1, ErrNegativeRate}, {-1, 10, 60, ErrBurst},
		{1, 1, 1 << 62, ErrOutOfRange}, {math.MaxInt64, 1, 1, ErrOutOfRange},
		// redis-cell's "Zero rates": zero count or period, or an interval below 1 ns.
		{15, 0, 60, ErrZeroRate}, {15, 30, 0, ErrZeroRate}, {15, 2_000_000_000, 1, ErrZeroRate},
	} {
		if _, err := NewCell(tc.burst, tc.count, tc.period); err != tc.want {
			t.Errorf("NewCell(%d, %d, %d) = %v, want %v", tc.burst, tc.count, tc.period, err, tc.want)
		}
	}
	big, _ := NewCell(1, 1, 1)
	if _, _, _, err := big.Throttle(State{}, epoch, math.MaxInt64/2); err != ErrQuantityRange {
		t.Errorf("quantity overflow: %v, want ErrQuantityRange", err)
	}
	c, _ := NewCell(1, 1, 1)
	s := State{A: 5, B: 6, Kind: KindFixed}
	next, _, _, err := c.Throttle(s, epoch, 1)
	if err != ErrWrongType || next != s {
		t.Fatalf("wrong kind: %v %v", err, next)
	}
}

// TestCellSharesGCRA shows that CL.THROTTLE and THROTTLE.CHECK gcra with the
// same rate agree on one key's state.
func TestCellSharesGCRA(t *testing.T) {
	c, _ := NewCell(4, 1, 1) // 5 at once, 1 per second
	l, _ := NewLimit(KindGCRA, 1, 1e9, 5)
	s, r, _, _ := c.Throttle(State{}, epoch, 3)
	if r.Remaining != 2 {
		t.Fatalf("cell remaining %d", r.Remaining)
	}
	s, d, _, _ := l.Check(s, epoch, 2)
	if d.Allowed != 1 || d.Remaining != 0 {
		t.Fatalf("gcra after cell: %+v", d)
	}
	if _, r, _, _ = c.Throttle(s, epoch, 1); r.Limited != 1 || r.RetryAfter != 1 {
		t.Fatalf("cell after gcra: %+v", r)
	}
}
