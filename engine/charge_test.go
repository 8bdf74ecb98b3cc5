package engine

import (
	"math/rand/v2"
	"testing"
)

// remainingAt returns the units a peek at now reports for s.
func remainingAt(t *testing.T, l *Limit, s State, now int64) Decision {
	t.Helper()
	d, err := l.Peek(s, now)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestChargeRefund(t *testing.T) {
	const t0 = epoch // a whole minute
	algos := []Kind{KindGCRA, KindToken, KindFixed, KindSliding}
	for _, algo := range algos {
		l, err := NewLimit(algo, 10, 10*sec, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(algo.String(), func(t *testing.T) {
			// Charge 4 on a fresh key: 6 left.
			s, ttl, err := l.Charge(State{}, t0, 4)
			if err != nil || ttl <= 0 {
				t.Fatalf("charge: %v ttl %d", err, ttl)
			}
			if d := remainingAt(t, &l, s, t0); d.Remaining != 6 || d.Allowed != 1 {
				t.Fatalf("after charge 4: %+v, want remaining 6", d)
			}
			// Refund 3 of them at the same instant: 9 left.
			s, _, err = l.Refund(s, t0, t0, 3)
			if err != nil {
				t.Fatal(err)
			}
			if d := remainingAt(t, &l, s, t0); d.Remaining != 9 {
				t.Fatalf("after refund 3: %+v, want remaining 9", d)
			}
			// Charge 25: a debt of 16 units, every check denied.
			s, _, err = l.Charge(s, t0, 25)
			if err != nil {
				t.Fatal(err)
			}
			d := remainingAt(t, &l, s, t0)
			if d.Allowed != 0 || d.Remaining != 0 || d.RetryAfter <= 0 {
				t.Fatalf("in debt: %+v, want denied with a retry", d)
			}
			if _, d, _, _ := l.Check(s, t0+sec, 1); d.Allowed != 0 {
				t.Fatalf("in debt one second later: %+v, want denied", d)
			}
			// A refund never leaves more than an idle key has.
			s, _, err = l.Refund(s, t0, t0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if d := remainingAt(t, &l, s, t0); d.Remaining != 10 {
				t.Fatalf("after a large refund: %+v, want remaining 10", d)
			}
		})
	}
}

// TestChargeDebtRepaid checks that a debt delays admission by the refill
// time the algorithm gives it.
func TestChargeDebtRepaid(t *testing.T) {
	tests := []struct {
		algo     Kind
		charge   int64
		deniedAt int64 // ns after the charge: still denied
		okAt     int64 // ns after the charge: admitted again
	}{
		// 1 unit per second, burst 10: 15 charged owe 5 s beyond empty.
		{KindGCRA, 15, 5*sec + sec/2, 6 * sec},
		{KindToken, 15, 5*sec + sec/2, 6 * sec},
		// the fixed window forgives at its end (10 s windows).
		{KindFixed, 15, 9 * sec, 10 * sec},
		// sliding: 15 in window 0; in window 1 the weight of 15 must fall to 9.
		{KindSliding, 15, 13 * sec, 14 * sec},
	}
	for _, tt := range tests {
		l, _ := NewLimit(tt.algo, 10, 10*sec, 0)
		s, _, err := l.Charge(State{}, epoch, tt.charge)
		if err != nil {
			t.Fatal(err)
		}
		if _, d, _, _ := l.Check(s, epoch+tt.deniedAt, 1); d.Allowed != 0 {
			t.Errorf("%s: admitted %v after the charge, want denied", tt.algo.String(), tt.deniedAt)
		}
		if _, d, _, _ := l.Check(s, epoch+tt.okAt, 1); d.Allowed != 1 {
			t.Errorf("%s: denied %v after the charge, want admitted: %+v", tt.algo.String(), tt.okAt, d)
		}
	}
}

// TestRefundOtherWindow: a window gives units back only to the window that
// took them.
func TestRefundOtherWindow(t *testing.T) {
	for _, algo := range []Kind{KindFixed, KindSliding} {
		l, _ := NewLimit(algo, 10, 10*sec, 0)
		s, _, _ := l.Charge(State{}, epoch, 10)
		later := epoch + 25*sec // two windows on
		s2, _, _ := l.Charge(s, later, 5)
		s3, _, err := l.Refund(s2, later, epoch, 5)
		if err != nil {
			t.Fatal(err)
		}
		if s3 != s2 {
			t.Errorf("%s: refund to a past window changed %+v to %+v", algo.String(), s2, s3)
		}
	}
}

func TestChargeErrors(t *testing.T) {
	l, _ := NewLimit(KindGCRA, 10, sec, 0)
	tok := State{A: 1, B: epoch, Kind: KindToken}
	if _, _, err := l.Charge(tok, epoch, 1); err != ErrWrongType {
		t.Errorf("charge on token state: %v, want ErrWrongType", err)
	}
	if _, _, err := l.Refund(State{}, epoch, epoch, -1); err != ErrNegativeCost {
		t.Errorf("negative refund: %v, want ErrNegativeCost", err)
	}
	bad := Limit{Algo: KindGCRA}
	if _, _, err := bad.Charge(State{}, epoch, 1); err != ErrLimit {
		t.Errorf("zero limit: %v, want ErrLimit", err)
	}
	// Huge charges saturate instead of wrapping.
	big, _ := NewLimit(KindGCRA, 1, 1<<62, 0)
	s, ttl, err := big.Charge(State{}, epoch, 1<<40)
	if err != nil || s.A < epoch || ttl <= 0 {
		t.Errorf("huge charge: %+v ttl %d err %v", s, ttl, err)
	}
}

// TestChargeRefundBalance: charging n then refunding n at the same instant
// restores what a peek reports, for random states and amounts.
func TestChargeRefundBalance(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		algo := Kind(1 + r.IntN(4))
		l, _ := NewLimit(algo, 1+r.Int64N(100), (1+r.Int64N(60))*sec, 0)
		now := epoch + r.Int64N(100*sec)
		var s State
		for j := r.IntN(5); j > 0; j-- {
			s, _, _, _ = l.Check(s, now-r.Int64N(5*sec), 1+r.Int64N(5))
		}
		before := remainingAt(t, &l, s, now)
		n := 1 + r.Int64N(before.Remaining+50)
		c, _, err := l.Charge(s, now, n)
		if err != nil {
			t.Fatal(err)
		}
		back, _, err := l.Refund(c, now, now, n)
		if err != nil {
			t.Fatal(err)
		}
		after := remainingAt(t, &l, back, now)
		if after.Remaining != before.Remaining || after.Allowed != before.Allowed {
			t.Fatalf("%s %+v: state %+v: charge+refund %d changed %+v to %+v", algo.String(), l, s, n, before, after)
		}
	}
}

func TestBan(t *testing.T) {
	if _, ok := NewBan(0, sec, sec); ok {
		t.Error("NewBan accepted threshold 0")
	}
	b, ok := NewBan(3, 10*sec, 60*sec)
	if !ok {
		t.Fatal("NewBan refused a valid ban")
	}
	steps := []struct {
		at     int64
		banned bool
		count  int64
	}{
		{0, false, 1},
		{5 * sec, false, 2},
		{11 * sec, false, 1}, // the window of the first denial has closed
		{12 * sec, false, 2},
		{13 * sec, true, 0},
	}
	var s State
	for i, st := range steps {
		next, ttl, banned := b.Deny(s, epoch+st.at)
		if banned != st.banned || (!banned && next.A != st.count) || ttl <= 0 {
			t.Fatalf("step %d: next %+v ttl %d banned %v, want banned %v count %d", i, next, ttl, banned, st.banned, st.count)
		}
		s = next
	}
	if left := BannedFor(s, epoch+13*sec); left != 60*sec {
		t.Errorf("BannedFor at the start = %d, want 60 s", left)
	}
	if left := BannedFor(s, epoch+73*sec); left != 0 {
		t.Errorf("BannedFor after the end = %d, want 0", left)
	}
	if next, _, banned := b.Deny(s, epoch+20*sec); banned || next != s {
		t.Errorf("Deny during a ban changed it: %+v %v", next, banned)
	}
}
