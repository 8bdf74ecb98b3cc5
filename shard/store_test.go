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
