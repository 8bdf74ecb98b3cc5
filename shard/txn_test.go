package shard

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
)

// set is a transform that stores a fixed state.
type set struct{ st engine.State }

func (s *set) Apply(cur engine.State, now int64) (engine.State, int64) { return s.st, 60e9 }

// accountsInShards returns n keys that fall in n different shards of s.
func accountsInShards(t *testing.T, s *Store, n int) [][]byte {
	t.Helper()
	used := map[uint64]bool{}
	var keys [][]byte
	for i := 0; len(keys) < n; i++ {
		if i > 1_000_000 {
			t.Fatal("could not find keys in distinct shards")
		}
		k := []byte(fmt.Sprintf("acct:%d", i))
		if sh := hashOf(s, k) >> s.shift; !used[sh] {
			used[sh] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// TestTxnTransfers moves units between accounts in different shards inside
// transactions while readers sum every account inside transactions: no
// reader may ever see a sum other than the total. Writers lock their pairs
// in whatever order they draw them, so a deadlock would hang the test.
func TestTxnTransfers(t *testing.T) {
	s := New(Config{Shards: 16})
	const accounts, start = 8, 1000
	keys := accountsInShards(t, s, accounts)
	for _, k := range keys {
		s.Apply(k, t0, &set{engine.State{A: start, Kind: engine.KindFixed}})
	}
	const writers, readers, rounds = 4, 2, 2000
	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(seed, 1))
			var tx Txn
			var to, from set
			for i := 0; i < rounds; i++ {
				a, b := keys[r.IntN(accounts)], keys[r.IntN(accounts)]
				if string(a) == string(b) {
					continue
				}
				tx.Begin(s)
				tx.Add(a)
				tx.Add(b)
				if err := tx.Lock(); err != nil {
					errs <- err
					return
				}
				x, _, err1 := tx.Get(a, t0)
				y, _, err2 := tx.Get(b, t0)
				amount := int64(r.IntN(10))
				from.st = engine.State{A: x.A - amount, Kind: engine.KindFixed}
				to.st = engine.State{A: y.A + amount, Kind: engine.KindFixed}
				err3 := tx.Apply(a, t0, &from)
				err4 := tx.Apply(b, t0, &to)
				tx.Unlock()
				if err := errors.Join(err1, err2, err3, err4); err != nil {
					errs <- err
					return
				}
			}
		}(uint64(w))
	}
	for r := 0; r < readers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var tx Txn
			for i := 0; i < rounds; i++ {
				tx.Begin(s)
				for j := len(keys) - 1; j >= 0; j-- { // any declaration order
					tx.Add(keys[j])
				}
				tx.Lock()
				sum := int64(0)
				for _, k := range keys {
					st, ok, err := tx.Get(k, t0)
					if err != nil || !ok {
						errs <- fmt.Errorf("Get(%s) = %v, %v", k, ok, err)
						tx.Unlock()
						return
					}
					sum += st.A
				}
				tx.Unlock()
				if sum != accounts*start {
					errs <- fmt.Errorf("reader saw a total of %d, want %d", sum, accounts*start)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := int64(0)
	for _, k := range keys {
		st, _ := s.Get(k, t0)
		total += st.A
	}
	if total != accounts*start {
		t.Fatalf("final total %d", total)
	}
}

func TestTxnErrors(t *testing.T) {
	s := New(Config{Shards: 16})
	keys := accountsInShards(t, s, 3)
	var tx Txn
	if err := tx.Add(keys[0]); !errors.Is(err, ErrTxnState) {
		t.Fatalf("Add before Begin = %v", err)
	}
	tx.Begin(s)
	if err := tx.Apply(keys[0], t0, &inc{ttl: 1e9}); !errors.Is(err, ErrTxnState) {
		t.Fatalf("Apply before Lock = %v", err)
	}
	tx.Add(keys[0])
	tx.Add(keys[1])
	if err := tx.Lock(); err != nil {
		t.Fatal(err)
	}
	if err := tx.Lock(); !errors.Is(err, ErrTxnState) {
		t.Fatalf("second Lock = %v", err)
	}
	if err := tx.Add(keys[2]); !errors.Is(err, ErrTxnState) {
		t.Fatalf("Add after Lock = %v", err)
	}
	// keys[2] is in a shard the transaction did not lock: an error, not a
	// deadlock, and nothing is changed.
	c := &inc{ttl: 1e9}
	if err := tx.Apply(keys[2], t0, c); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("Apply on an undeclared key = %v", err)
	}
	if _, _, err := tx.Get(keys[2], t0); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("Get on an undeclared key = %v", err)
	}
	if _, err := tx.Delete(keys[2], t0); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("Delete on an undeclared key = %v", err)
	}
	if err := tx.Apply(keys[0], t0, c); err != nil {
		t.Fatal(err)
	}
	if st, exp, ok, err := tx.Lookup(keys[0], t0); err != nil || !ok || st.A != 1 || exp != t0+1e9 {
		t.Fatalf("Lookup in the transaction = %+v %d %v %v", st, exp, ok, err)
	}
	if ok, err := tx.Delete(keys[0], t0); err != nil || !ok {
		t.Fatalf("Delete in the transaction = %v %v", ok, err)
	}
	long := make([]byte, MaxKeyLen+1)
	if err := tx.Apply(long, t0, c); err != nil || c.seen != (engine.State{}) {
		t.Fatalf("Apply of an over-long key = %v, saw %+v", err, c.seen)
	}
	tx.Unlock()
	tx.Unlock() // a no-op
	if s.Len() != 0 {
		t.Fatalf("Len = %d, want 0", s.Len())
	}
	// Every shard is free again.
	for _, k := range keys {
		s.Apply(k, t0, &inc{ttl: 1e9})
	}
	if _, ok := s.Get(keys[2], t0); !ok {
		t.Fatal("the rejected Apply left no way to create the key")
	}
}

func TestTxnAllocs(t *testing.T) {
	s := New(Config{Shards: 16})
	keys := accountsInShards(t, s, 4)
	var tx Txn
	c := &inc{ttl: 60e9}
	run := func() {
		tx.Begin(s)
		for _, k := range keys {
			tx.Add(k)
		}
		tx.Lock()
		for _, k := range keys {
			tx.Get(k, t0)
			tx.Apply(k, t0, c)
		}
		tx.Unlock()
	}
	run()
	if a := testing.AllocsPerRun(100, run); a != 0 {
		t.Fatalf("a transaction over existing keys allocates %.1f times", a)
	}
}

// TestTxnWholeKeyspace: after AddAll the Txn holds every shard and runs
// Len, Scan and FlushAll as the Store does, next to keyed calls; without
// AddAll those calls refuse with ErrNotLocked, unlocked with ErrTxnState.
func TestTxnWholeKeyspace(t *testing.T) {
	s := New(Config{Shards: 8})
	const n = 500
	for i := 0; i < n; i++ {
		s.Apply([]byte(fmt.Sprintf("k:%d", i)), 0, &set{engine.State{A: 1, Kind: engine.KindGCRA}})
	}
	var tx Txn
	tx.Begin(s)
	_ = tx.Add([]byte("k:1"))
	if err := tx.Lock(); err != nil {
		t.Fatal(err)
	}
	var p ScanPage
	if _, err := tx.Len(); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("Len without AddAll: %v", err)
	}
	if _, err := tx.Scan(&p, 0, 10, 0); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("Scan without AddAll: %v", err)
	}
	if _, err := tx.FlushAll(0); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("FlushAll without AddAll: %v", err)
	}
	tx.Unlock()
	if err := tx.AddAll(); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Len(); !errors.Is(err, ErrTxnState) {
		t.Fatalf("Len unlocked: %v", err)
	}
	if err := tx.Lock(); err != nil {
		t.Fatal(err)
	}
	if len(tx.shards) != 8 {
		t.Fatalf("AddAll then Lock holds %d shards, want 8", len(tx.shards))
	}
	if got, err := tx.Len(); err != nil || got != n {
		t.Fatalf("Len = %d, %v; want %d", got, err, n)
	}
	seen := map[string]bool{}
	for cur := uint64(0); ; {
		next, err := tx.Scan(&p, cur, 37, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < p.Len(); i++ {
			seen[string(p.Key(i))] = true
		}
		if cur = next; cur == 0 {
			break
		}
	}
	if len(seen) != n {
		t.Fatalf("Scan inside the Txn saw %d keys, want %d", len(seen), n)
	}
	if err := tx.Apply([]byte("k:7"), 0, &set{engine.State{A: 2, Kind: engine.KindGCRA}}); err != nil {
		t.Fatalf("keyed Apply under AddAll: %v", err)
	}
	if got, err := tx.FlushAll(0); err != nil || got != n {
		t.Fatalf("FlushAll = %d, %v; want %d", got, err, n)
	}
	if got, _ := tx.Len(); got != 0 {
		t.Fatalf("Len after FlushAll = %d", got)
	}
	tx.Unlock()
	if got := s.Len(); got != 0 {
		t.Fatalf("Store.Len after the Txn's FlushAll = %d", got)
	}
	// Begin forgets AddAll.
	tx.Begin(s)
	_ = tx.Lock()
	if _, err := tx.Len(); !errors.Is(err, ErrNotLocked) {
		t.Fatalf("Len after Begin without AddAll: %v", err)
	}
	tx.Unlock()
}
