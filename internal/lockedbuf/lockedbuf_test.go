package lockedbuf

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWriteAndRead writes from several goroutines while reading,
// and checks that every write arrives whole (run it with -race).
func TestConcurrentWriteAndRead(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				if _, err := b.Write([]byte("abc\n")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := 0; i < 100; i++ {
		_ = b.String()
	}
	wg.Wait()
	got := b.String()
	if n := strings.Count(got, "abc\n"); n != 2000 || len(got) != 2000*4 {
		t.Fatalf("%d whole writes in %d bytes, want 2000 in 8000", n, len(got))
	}
}
