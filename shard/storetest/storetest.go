// Package storetest is a conformance suite for stores that hold engine.State
// per key: the in-memory shard.Store today, durable backends later. A store
// package runs it from its own tests:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) storetest.Store { return shard.New(shard.Config{}) })
//	}
//
// Run covers the per-key contract (Apply, Get, Delete, Len: atomicity,
// expiry, copying keys). RunKeyspace covers what keyspace commands need on
// top (Lookup, Scan, FlushAll), including SCAN's guarantee that a key held
// for a whole scan is returned while other keys are created, deleted and
// expired between calls. Each test gets a fresh store and uses fixed
// instants (no wall clock).
//
// Only tests import this package, so deadcode without -test lists its
// functions as unreachable; "deadcode -test ./..." shows them reached.
package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// Store is the part of a store the suite exercises.
type Store interface {
	Apply(key []byte, now int64, t shard.Transform)
	Get(key []byte, now int64) (engine.State, bool)
	Delete(key []byte, now int64) bool
	Len() int
}

// Counter is a Transform that does engine-like work: it adds Step to
// State.A, stamps State.B with now and keeps the key for TTL nanoseconds.
// It records the state it saw in Seen.
type Counter struct {
	Step int64
	TTL  int64
	Seen engine.State
}

// Apply implements shard.Transform.
func (c *Counter) Apply(cur engine.State, now int64) (engine.State, int64) {
	c.Seen = cur
	return engine.State{A: cur.A + c.Step, B: now, Kind: engine.KindFixed}, c.TTL
}

// base is an arbitrary start time (ns since the epoch) used by the suite.
const base = int64(1_800_000_000) * 1e9

// Run runs every conformance test against stores made by newStore; each
// test gets a fresh store.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s Store)
	}{
		{"PersistsAndMutates", testPersistsAndMutates},
		{"IsolatesKeys", testIsolatesKeys},
		{"ResetClears", testResetClears},
		{"ExpiresAfterTTL", testExpiresAfterTTL},
		{"NoChangeNoCreate", testNoChangeNoCreate},
		{"ZeroTTLRemoves", testZeroTTLRemoves},
		{"Atomic", testAtomic},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func testPersistsAndMutates(t *testing.T, s Store) {
	key := []byte("user:1")
	c := &Counter{Step: 3, TTL: 60e9}
	for i := 0; i < 5; i++ {
		s.Apply(key, base+int64(i), c)
		if c.Seen.A != int64(3*i) {
			t.Fatalf("apply %d saw A=%d, want %d", i, c.Seen.A, 3*i)
		}
	}
	st, ok := s.Get(key, base+10)
	if !ok || st.A != 15 || st.B != base+4 || st.Kind != engine.KindFixed {
		t.Fatalf("Get = %+v, %v; want A=15 B=%d kind fixed", st, ok, base+4)
	}
	if n := s.Len(); n != 1 {
		t.Fatalf("Len = %d, want 1", n)
	}
	// The store must copy the key: scribbling on the caller's buffer
	// afterwards must not change what is stored.
	buf := []byte("user:2")
	s.Apply(buf, base, &Counter{Step: 1, TTL: 60e9})
	copy(buf, "XXXXXX")
	if st, ok := s.Get([]byte("user:2"), base); !ok || st.A != 1 {
		t.Fatalf("key not copied: Get(user:2) = %+v, %v", st, ok)
	}
}

func testIsolatesKeys(t *testing.T, s Store) {
	const n = 500
	for i := 0; i < n; i++ {
		key := []byte(fmt.Sprintf("k%d", i))
		for j := 0; j <= i%7; j++ {
			s.Apply(key, base, &Counter{Step: int64(i), TTL: 60e9})
		}
	}
	for i := 0; i < n; i++ {
		st, ok := s.Get([]byte(fmt.Sprintf("k%d", i)), base)
		want := int64(i) * int64(i%7+1)
		if !ok && want != 0 || ok && st.A != want {
			t.Fatalf("k%d: Get = %+v, %v; want A=%d", i, st, ok, want)
		}
	}
	if _, ok := s.Get([]byte("k"), base); ok {
		t.Fatal("Get of a key never applied reported it present")
	}
	if _, ok := s.Get([]byte("k1\x00"), base); ok {
		t.Fatal("Get of a key with a trailing NUL matched another key")
	}
}

func testResetClears(t *testing.T, s Store) {
	a, b := []byte("a"), []byte("b")
	s.Apply(a, base, &Counter{Step: 5, TTL: 60e9})
	s.Apply(b, base, &Counter{Step: 7, TTL: 60e9})
	if !s.Delete(a, base) {
		t.Fatal("Delete of a live key returned false")
	}
	if s.Delete(a, base) {
		t.Fatal("second Delete returned true")
	}
	if _, ok := s.Get(a, base); ok {
		t.Fatal("deleted key still present")
	}
	c := &Counter{Step: 1, TTL: 60e9}
	s.Apply(a, base, c)
	if c.Seen != (engine.State{}) {
		t.Fatalf("apply after delete saw %+v, want zero state", c.Seen)
	}
	if st, ok := s.Get(b, base); !ok || st.A != 7 {
		t.Fatalf("Delete(a) disturbed b: %+v, %v", st, ok)
	}
	if s.Delete([]byte("never"), base) {
		t.Fatal("Delete of an absent key returned true")
	}
}

func testExpiresAfterTTL(t *testing.T, s Store) {
	key := []byte("ttl")
	s.Apply(key, base, &Counter{Step: 1, TTL: 2e9})
	if _, ok := s.Get(key, base+2e9-1); !ok {
		t.Fatal("key gone 1ns before its TTL")
	}
	if _, ok := s.Get(key, base+2e9); ok {
		t.Fatal("key present at its expiry instant")
	}
	c := &Counter{Step: 1, TTL: 2e9}
	s.Apply(key, base+3e9, c)
	if c.Seen != (engine.State{}) {
		t.Fatalf("apply after expiry saw %+v, want zero state", c.Seen)
	}
	if s.Delete([]byte("ttl"), base+6e9) {
		t.Fatal("Delete of an expired key returned true")
	}
}

// Keep is a Transform that returns the state it is given.
type Keep struct{}

// Apply implements shard.Transform.
func (Keep) Apply(cur engine.State, now int64) (engine.State, int64) { return cur, 60e9 }

func testNoChangeNoCreate(t *testing.T, s Store) {
	s.Apply([]byte("peek"), base, Keep{})
	if _, ok := s.Get([]byte("peek"), base); ok {
		t.Fatal("an unchanged zero state created the key")
	}
	if n := s.Len(); n != 0 {
		t.Fatalf("Len = %d, want 0", n)
	}
}

func testZeroTTLRemoves(t *testing.T, s Store) {
	key := []byte("gone")
	s.Apply(key, base, &Counter{Step: 1, TTL: 60e9})
	s.Apply(key, base, &Counter{Step: 1, TTL: 0})
	if _, ok := s.Get(key, base); ok {
		t.Fatal("ttl 0 did not remove the key")
	}
}

func testAtomic(t *testing.T, s Store) {
	const goroutines = 200
	key := []byte("hot")
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < goroutines; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s.Apply(key, base, &Counter{Step: 1, TTL: 60e9})
		}()
	}
	close(start)
	wg.Wait()
	st, ok := s.Get(key, base)
	if !ok || st.A != goroutines {
		t.Fatalf("after %d concurrent applies Get = %+v, %v; want A=%d", goroutines, st, ok, goroutines)
	}
}
