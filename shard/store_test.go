package shard_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
	"github.com/throttlekit/throttlekit-server/shard/storetest"
)

func TestConformance(t *testing.T) {
	configs := []shard.Config{
		{},
		{Shards: 1},
		{Shards: 4, MaxKeys: 1000},
	}
	for _, cfg := range configs {
		t.Run(fmt.Sprintf("shards=%d,max=%d", cfg.Shards, cfg.MaxKeys), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Store { return shard.New(cfg) })
		})
	}
}

// The baseline used by the benchmarks passes the same suite, so the
// benchmark ratios compare stores with the same behaviour.
func TestConformanceBaseline(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Store { return newMapStore() })
}

// mapStore is the plain map + sync.Mutex store the benchmarks compare with.
type mapStore struct {
	mu sync.Mutex
	m  map[string]mapRec
}

type mapRec struct {
	st  engine.State
	exp int64
}

func newMapStore() *mapStore { return &mapStore{m: make(map[string]mapRec)} }

func (s *mapStore) Apply(key []byte, now int64, t shard.Transform) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[string(key)]
	if ok && r.exp <= now {
		r = mapRec{}
	}
	next, ttl := t.Apply(r.st, now)
	if next == r.st {
		return
	}
	if ttl <= 0 || next == (engine.State{}) {
		delete(s.m, string(key))
		return
	}
	// Storing through string(key) copies the key to a new string even when
	// the key exists (1 alloc per update; only lookups avoid the copy): what
	// a plain map[string]T costs.
	s.m[string(key)] = mapRec{next, now + ttl}
}

func (s *mapStore) Get(key []byte, now int64) (engine.State, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[string(key)]
	if !ok || r.exp <= now {
		return engine.State{}, false
	}
	return r.st, true
}

func (s *mapStore) Delete(key []byte, now int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[string(key)]
	delete(s.m, string(key))
	return ok && r.exp > now
}

func (s *mapStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func TestKeyspaceConformance(t *testing.T) {
	configs := []shard.Config{
		{},
		{Shards: 1},
		{Shards: 4, MaxKeys: 100_000},
	}
	for _, cfg := range configs {
		t.Run(fmt.Sprintf("shards=%d,max=%d", cfg.Shards, cfg.MaxKeys), func(t *testing.T) {
			storetest.RunKeyspace(t, func(t *testing.T) storetest.Keyspace { return shard.New(cfg) })
		})
	}
}

// txnStore runs every single-key call through a one-key shard.Txn, so the
// conformance suites check the Txn paths against the same contract as the
// Store's own.
type txnStore struct {
	*shard.Store
	tx shard.Txn
	mu sync.Mutex // the suites call from several goroutines; a Txn is not shared
}

func (s *txnStore) lock(key []byte) {
	s.mu.Lock()
	s.tx.Begin(s.Store)
	if err := s.tx.Add(key); err != nil {
		panic(err)
	}
	if err := s.tx.Lock(); err != nil {
		panic(err)
	}
}

func (s *txnStore) unlock() {
	s.tx.Unlock()
	s.mu.Unlock()
}

func (s *txnStore) Apply(key []byte, now int64, t shard.Transform) {
	s.lock(key)
	defer s.unlock()
	if err := s.tx.Apply(key, now, t); err != nil {
		panic(err)
	}
}

func (s *txnStore) Get(key []byte, now int64) (engine.State, bool) {
	s.lock(key)
	defer s.unlock()
	st, ok, err := s.tx.Get(key, now)
	if err != nil {
		panic(err)
	}
	return st, ok
}

func (s *txnStore) Delete(key []byte, now int64) bool {
	s.lock(key)
	defer s.unlock()
	ok, err := s.tx.Delete(key, now)
	if err != nil {
		panic(err)
	}
	return ok
}

func (s *txnStore) Lookup(key []byte, now int64) (engine.State, int64, bool) {
	s.lock(key)
	defer s.unlock()
	st, exp, ok, err := s.tx.Lookup(key, now)
	if err != nil {
		panic(err)
	}
	return st, exp, ok
}

func TestTxnConformance(t *testing.T) {
	for _, cfg := range []shard.Config{{}, {Shards: 4, MaxKeys: 1000}} {
		t.Run(fmt.Sprintf("shards=%d,max=%d", cfg.Shards, cfg.MaxKeys), func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Store { return &txnStore{Store: shard.New(cfg)} })
		})
	}
	// The keyspace suite holds a few thousand keys: no eviction.
	for _, cfg := range []shard.Config{{}, {Shards: 4, MaxKeys: 100_000}} {
		t.Run(fmt.Sprintf("keyspace,shards=%d,max=%d", cfg.Shards, cfg.MaxKeys), func(t *testing.T) {
			storetest.RunKeyspace(t, func(t *testing.T) storetest.Keyspace { return &txnStore{Store: shard.New(cfg)} })
		})
	}
}
