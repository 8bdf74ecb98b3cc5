package loadgen

import (
	"testing"
)

func TestKeyGenBounds(t *testing.T) {
	tests := []struct {
		dist Dist
		n    int
	}{
		{Uniform, 1}, {Uniform, 2}, {Uniform, 10_000}, {Uniform, 1_000_000},
		{Zipf, 1}, {Zipf, 2}, {Zipf, 10_000}, {Zipf, 1_000_000},
	}
	for _, tc := range tests {
		g, err := NewKeyGen(tc.dist, tc.n, 1)
		if err != nil {
			t.Fatalf("%s/%d: %v", tc.dist, tc.n, err)
		}
		for i := 0; i < 100_000; i++ {
			if k := g.Next(); k >= uint64(tc.n) {
				t.Fatalf("%s/%d: index %d out of range", tc.dist, tc.n, k)
			}
		}
	}
}

func TestKeyGenInvalid(t *testing.T) {
	if _, err := NewKeyGen(Uniform, 0, 1); err == nil {
		t.Error("keyspace 0 accepted")
	}
	if _, err := NewKeyGen("pareto", 10, 1); err == nil {
		t.Error("unknown distribution accepted")
	}
}

func TestKeyGenDeterministic(t *testing.T) {
	for _, d := range []Dist{Uniform, Zipf} {
		a, _ := NewKeyGen(d, 1000, 42)
		b, _ := NewKeyGen(d, 1000, 42)
		c, _ := NewKeyGen(d, 1000, 43)
		same, differ := true, false
		for i := 0; i < 1000; i++ {
			x, y, z := a.Next(), b.Next(), c.Next()
			same = same && x == y
			differ = differ || x != z
		}
		if !same {
			t.Errorf("%s: same seed gave different sequences", d)
		}
		if !differ {
			t.Errorf("%s: different seeds gave the same sequence", d)
		}
	}
}

// TestKeyGenShape checks the distributions statistically: uniform fills its
// buckets evenly, Zipf concentrates on the lowest indexes.
func TestKeyGenShape(t *testing.T) {
	const n, draws = 100, 200_000
	counts := func(d Dist) []int {
		g, _ := NewKeyGen(d, n, 7)
		c := make([]int, n)
		for i := 0; i < draws; i++ {
			c[g.Next()]++
		}
		return c
	}
	u := counts(Uniform)
	for i, c := range u {
		// Expected 2000 per key; 6 sigma is about 270.
		if c < 1700 || c > 2300 {
			t.Errorf("uniform: key %d drawn %d times, want about %d", i, c, draws/n)
		}
	}
	z := counts(Zipf)
	// With s=1.1 over 100 keys, key 0 has probability ~0.24 and key 99 ~0.0016.
	if z[0] < draws/6 {
		t.Errorf("zipf: key 0 drawn %d times, want > %d", z[0], draws/6)
	}
	if z[0] <= z[1] || z[1] <= z[10] || z[10] <= z[99] {
		t.Errorf("zipf: counts not decreasing: k0=%d k1=%d k10=%d k99=%d", z[0], z[1], z[10], z[99])
	}
	top10 := 0
	for _, c := range z[:10] {
		top10 += c
	}
	if top10 < draws/2 {
		t.Errorf("zipf: top 10 keys drawn %d times, want > half of %d", top10, draws)
	}
}

func TestAppendKey(t *testing.T) {
	if got := string(AppendKey([]byte("x"), "user:", 1234)); got != "xuser:1234" {
		t.Errorf("AppendKey = %q", got)
	}
}

func TestAppendPaddedKey(t *testing.T) {
	for _, c := range []struct {
		i     uint64
		width int
		want  string
	}{{1234, 0, "t:1234"}, {1234, 4, "t:1234"}, {1234, 14, "t:00000000001234"}, {123456, 3, "t:123456"}, {0, 2, "t:00"}} {
		if got := string(AppendPaddedKey(nil, "t:", c.i, c.width)); got != c.want {
			t.Errorf("AppendPaddedKey(%d, %d) = %q, want %q", c.i, c.width, got, c.want)
		}
	}
	cmd := NewMultiKeyCommand([]string{"GET", ""}, KeyArg{Pos: 1, Prefix: "t:", Width: 14})
	got, _ := cmd.Append(nil, nil, 7)
	if want := "*2\r\n$3\r\nGET\r\n$16\r\nt:00000000000007\r\n"; string(got) != want {
		t.Errorf("padded command = %q, want %q", got, want)
	}
}
