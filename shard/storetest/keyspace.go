package storetest

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// Keyspace is the part of a store that keyspace commands (SCAN, TTL, PTTL,
// TYPE, EXISTS, FLUSHALL) use, on top of Store.
type Keyspace interface {
	Store
	Lookup(key []byte, now int64) (st engine.State, expireAt int64, ok bool)
	Scan(p *shard.ScanPage, cursor uint64, count int, now int64) (next uint64, err error)
	FlushAll(now int64) int
}

// RunKeyspace runs the keyspace conformance tests against stores made by
// newStore; each test gets a fresh store.
func RunKeyspace(t *testing.T, newStore func(t *testing.T) Keyspace) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Keyspace)
	}{
		{"LookupExpiry", testLookupExpiry},
		{"ScanFull", testScanFull},
		{"ScanSkipsExpired", testScanSkipsExpired},
		{"ScanUnderChurn", testScanUnderChurn},
		{"FlushAll", testFlushAll},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func testLookupExpiry(t *testing.T, s Keyspace) {
	key := []byte("ttl")
	s.Apply(key, base, &Counter{Step: 2, TTL: 5e9})
	st, exp, ok := s.Lookup(key, base+1)
	if !ok || st.A != 2 || st.Kind != engine.KindFixed || exp != base+5e9 {
		t.Fatalf("Lookup = %+v, %d, %v; want A=2 kind fixed expiring at %d", st, exp, ok, base+5e9)
	}
	if _, _, ok := s.Lookup(key, base+5e9); ok {
		t.Fatal("Lookup found the key at its expiry instant")
	}
	if _, _, ok := s.Lookup([]byte("never"), base); ok {
		t.Fatal("Lookup found a key never applied")
	}
}

// scanAll runs a whole scan with the given count hint and returns how many
// times each key was returned. It fails the test if the scan does not end
// within limit calls.
func scanAll(t *testing.T, s Keyspace, count int, now int64, limit int, between func(call int)) map[string]int {
	t.Helper()
	seen := map[string]int{}
	var p shard.ScanPage
	cursor := uint64(0)
	for call := 0; ; call++ {
		if call == limit {
			t.Fatalf("scan with count %d did not end after %d calls", count, limit)
		}
		next, err := s.Scan(&p, cursor, count, now)
		if err != nil {
			t.Fatalf("Scan(%d) = %v", cursor, err)
		}
		for i := 0; i < p.Len(); i++ {
			seen[string(p.Key(i))]++
		}
		if next == 0 {
			return seen
		}
		cursor = next
		if between != nil {
			between(call)
		}
	}
}

func testScanFull(t *testing.T, s Keyspace) {
	if seen := scanAll(t, s, 10, base, 1<<20, nil); len(seen) != 0 {
		t.Fatalf("scan of an empty store returned %v", seen)
	}
	const n = 3000
	for i := 0; i < n; i++ {
		s.Apply([]byte(fmt.Sprintf("scan:%d", i)), base, &Counter{Step: 1, TTL: 60e9})
	}
	for _, count := range []int{0, 1, 7, 100, 10_000} {
		seen := scanAll(t, s, count, base, 1<<20, nil)
		for i := 0; i < n; i++ {
			if seen[fmt.Sprintf("scan:%d", i)] == 0 {
				t.Fatalf("count %d: key scan:%d never returned", count, i)
			}
		}
		if len(seen) != n {
			t.Fatalf("count %d: scan returned %d distinct keys, want %d", count, len(seen), n)
		}
	}
}

func testScanSkipsExpired(t *testing.T, s Keyspace) {
	for i := 0; i < 200; i++ {
		ttl := int64(60e9)
		if i%2 == 1 {
			ttl = 1e9
		}
		s.Apply([]byte(fmt.Sprintf("k%d", i)), base, &Counter{Step: 1, TTL: ttl})
	}
	seen := scanAll(t, s, 16, base+1e9, 1<<20, nil)
	for i := 0; i < 200; i++ {
		if got, want := seen[fmt.Sprintf("k%d", i)] > 0, i%2 == 0; got != want {
			t.Fatalf("key k%d returned %v, want %v (odd keys expired at the scan's now)", i, got, want)
		}
	}
}

// testScanUnderChurn checks SCAN's guarantee: keys held for the whole scan
// are returned at least once while, between calls, other keys are created
// (growing the tables many times over), deleted and expired.
func testScanUnderChurn(t *testing.T, s Keyspace) {
	r := rand.New(rand.NewPCG(7, 11))
	const stable = 1000
	for i := 0; i < stable; i++ {
		s.Apply([]byte(fmt.Sprintf("stable:%d", i)), base, &Counter{Step: 1, TTL: 3600e9})
	}
	now := base
	next := 0
	expiry := map[string]int64{} // churn keys: when each expires (0 once deleted)
	between := func(call int) {
		now += 1e6
		for j := 0; j < 40; j++ {
			k := fmt.Sprintf("churn:%d", next)
			next++
			ttl := int64(3600e9)
			if r.IntN(3) == 0 {
				ttl = r.Int64N(50e6) + 1
			}
			s.Apply([]byte(k), now, &Counter{Step: 1, TTL: ttl})
			expiry[k] = now + ttl
		}
		for j := 0; j < 15 && next > 0; j++ {
			k := fmt.Sprintf("churn:%d", r.IntN(next))
			s.Delete([]byte(k), now)
			expiry[k] = 0
		}
	}
	var p shard.ScanPage
	cursor := uint64(0)
	seen := map[string]bool{}
	for call := 0; ; call++ {
		if call == 1<<20 {
			t.Fatal("scan under churn did not end")
		}
		c, err := s.Scan(&p, cursor, 5, now)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < p.Len(); i++ {
			k := string(p.Key(i))
			seen[k] = true
			if exp, churn := expiry[k]; churn && exp <= now {
				t.Fatalf("scan returned %q, deleted or expired at %d (now %d)", k, exp, now)
			}
		}
		if cursor = c; cursor == 0 {
			break
		}
		between(call)
	}
	for i := 0; i < stable; i++ {
		if !seen[fmt.Sprintf("stable:%d", i)] {
			t.Fatalf("key stable:%d, held for the whole scan, never returned (%d churn keys created)", i, next)
		}
	}
	if next < 4*stable {
		t.Fatalf("only %d churn keys: the tables did not grow enough to test resizing", next)
	}
}

func testFlushAll(t *testing.T, s Keyspace) {
	for i := 0; i < 100; i++ {
		ttl := int64(60e9)
		if i < 10 {
			ttl = 1e9
		}
		s.Apply([]byte(fmt.Sprintf("k%d", i)), base, &Counter{Step: 1, TTL: ttl})
	}
	if n := s.FlushAll(base + 1e9); n != 90 {
		t.Fatalf("FlushAll = %d, want the 90 unexpired keys", n)
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("Len after FlushAll = %d", n)
	}
	if _, ok := s.Get([]byte("k50"), base+1e9); ok {
		t.Fatal("a key survived FlushAll")
	}
	if seen := scanAll(t, s, 10, base+1e9, 1<<20, nil); len(seen) != 0 {
		t.Fatalf("scan after FlushAll returned %v", seen)
	}
	c := &Counter{Step: 1, TTL: 60e9}
	s.Apply([]byte("k50"), base+2e9, c)
	s.Apply([]byte("k50"), base+2e9, c)
	if c.Seen.A != 1 {
		t.Fatalf("store unusable after FlushAll: second apply saw %+v", c.Seen)
	}
	if n := s.FlushAll(base + 2e9); n != 1 {
		t.Fatalf("second FlushAll = %d, want 1", n)
	}
}
