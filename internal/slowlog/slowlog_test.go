package slowlog

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func args(n int, size int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = []byte(strings.Repeat(string(rune('a'+i%26)), size))
	}
	return out
}

// TestCut checks Redis 7's cutting: 32 arguments at most, the last a note
// of how many more; 128 bytes per argument, then a note of how many more.
func TestCut(t *testing.T) {
	got := Cut(args(3, 5))
	if len(got) != 3 || string(got[2]) != "ccccc" {
		t.Fatalf("short: %q", got)
	}
	got = Cut(args(32, 1))
	if len(got) != 32 || string(got[31]) != "f" {
		t.Fatalf("32 args: %q", got[31])
	}
	got = Cut(args(33, 1))
	if len(got) != 32 || string(got[31]) != "... (2 more arguments)" || string(got[30]) != "e" {
		t.Fatalf("33 args: %q %q", got[30], got[31])
	}
	got = Cut(args(100, 1))
	if string(got[31]) != "... (69 more arguments)" {
		t.Fatalf("100 args: %q", got[31])
	}
	got = Cut([][]byte{bytes.Repeat([]byte("x"), 128), bytes.Repeat([]byte("y"), 129), bytes.Repeat([]byte("z"), 1000)})
	if string(got[0]) != strings.Repeat("x", 128) {
		t.Fatalf("128 bytes cut: %q", got[0])
	}
	if string(got[1]) != strings.Repeat("y", 128)+"... (1 more bytes)" {
		t.Fatalf("129 bytes: %q", got[1])
	}
	if string(got[2]) != strings.Repeat("z", 128)+"... (872 more bytes)" {
		t.Fatalf("1000 bytes: %q", got[2])
	}
	// A copy: the caller's buffer may change.
	in := [][]byte{[]byte("set")}
	got = Cut(in)
	in[0][0] = 'X'
	if string(got[0]) != "set" {
		t.Fatal("Cut kept the caller's bytes")
	}
}

func TestRing(t *testing.T) {
	l := New(3)
	for i := 0; i < 5; i++ {
		if id := l.Add(int64(100+i), int64(i), [][]byte{[]byte(fmt.Sprint("cmd", i))}, "1.2.3.4:5", "n"); id != int64(i) {
			t.Fatalf("id %d, want %d", id, i)
		}
	}
	if l.Len() != 3 {
		t.Fatalf("len %d", l.Len())
	}
	e := l.Get(-1)
	if len(e) != 3 || e[0].ID != 4 || e[1].ID != 3 || e[2].ID != 2 || string(e[0].Args[0]) != "cmd4" || e[0].Time != 104 || e[0].DurationUs != 4 {
		t.Fatalf("get all: %+v", e)
	}
	if e := l.Get(1); len(e) != 1 || e[0].ID != 4 {
		t.Fatalf("get 1: %+v", e)
	}
	if e := l.Get(0); len(e) != 0 {
		t.Fatalf("get 0: %+v", e)
	}
	l.SetMaxLen(2)
	if e := l.Get(10); len(e) != 2 || e[0].ID != 4 || e[1].ID != 3 {
		t.Fatalf("shrunk: %+v", e)
	}
	l.SetMaxLen(4)
	l.Add(0, 0, nil, "", "")
	if e := l.Get(10); len(e) != 3 || e[0].ID != 5 || e[2].ID != 3 {
		t.Fatalf("grown: %+v", e)
	}
	l.Reset()
	if l.Len() != 0 {
		t.Fatal("reset kept entries")
	}
	if id := l.Add(0, 0, nil, "", ""); id != 6 {
		t.Fatalf("id after reset %d, want 6 (ids keep increasing)", id)
	}
	l.SetMaxLen(0)
	if id := l.Add(0, 0, nil, "", ""); id != -1 || l.Len() != 0 || l.MaxLen() != 0 {
		t.Fatalf("max-len 0 kept an entry: id %d", id)
	}
}

func TestConcurrentAdd(t *testing.T) {
	l := New(1000)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				l.Add(0, 1, [][]byte{[]byte("x")}, "", "")
				l.Get(5)
			}
		}()
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, e := range l.Get(-1) {
		if seen[e.ID] {
			t.Fatalf("id %d twice", e.ID)
		}
		seen[e.ID] = true
	}
	if len(seen) != 800 {
		t.Fatalf("%d entries, want 800", len(seen))
	}
}
