package shard

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
)

type setState struct{}

func (setState) Apply(engine.State, int64) (engine.State, int64) {
	return engine.State{A: 1, Kind: engine.KindFixed}, 1e9
}

// TestUsage: a key's usage is its record, its share of the table and its
// arena bytes, and the records add up to what the wheel holds.
func TestUsage(t *testing.T) {
	s := New(Config{Shards: 1, MaxKeys: 1000})
	short, long := []byte("k"), []byte(strings.Repeat("x", 100))
	s.Apply(short, 0, setState{})
	s.Apply(long, 0, setState{})
	sh := &s.shards[0]
	nodeBytes := sh.w.NodeBytes()
	if b := sh.w.Bytes(); b%nodeBytes != 0 || b/nodeBytes&(b/nodeBytes-1) != 0 {
		t.Fatalf("wheel bytes %d are not a power-of-two count of %d-byte records", b, nodeBytes)
	}
	u, ok := s.Usage(short, 0)
	slot := int64(len(sh.table)) * 4 / 2
	if !ok || u.Node != nodeBytes || u.Arena != 0 || u.Slot != slot || u.Total() != nodeBytes+slot {
		t.Fatalf("short key: %+v, want node %d slot %d", u, nodeBytes, slot)
	}
	if u, ok := s.Usage(long, 0); !ok || u.Arena != 100 || u.Total() != nodeBytes+slot+100 {
		t.Fatalf("long key: %+v", u)
	}
	if _, ok := s.Usage([]byte("nope"), 0); ok {
		t.Fatal("absent key has a usage")
	}
	if _, ok := s.Usage(short, 2e9); ok {
		t.Fatal("expired key has a usage")
	}
}

// TestOnGrow: a shard that outgrows its table reports the move.
func TestOnGrow(t *testing.T) {
	var grows int
	s := New(Config{Shards: 1, MaxKeys: 100000, OnGrow: func(d time.Duration) {
		if d < 0 {
			t.Errorf("negative duration %v", d)
		}
		grows++
	}})
	before := len(s.shards[0].table)
	for i := 0; i < 10000; i++ {
		s.Apply([]byte(strconv.Itoa(i)), 0, setState{})
	}
	if grows == 0 || len(s.shards[0].table) == before {
		t.Fatalf("%d grows reported, table %d -> %d", grows, before, len(s.shards[0].table))
	}
}

// TestUsageSlotAtScale: once a shard holds more than a few hundred keys,
// each key's share of the index table is 6 or 7 bytes (the table is kept
// 60-75% full of 4-byte slots), whatever the count.
func TestUsageSlotAtScale(t *testing.T) {
	s := New(Config{Shards: 1, MaxKeys: 1 << 20})
	probe := []byte("probe")
	s.Apply(probe, 0, setState{})
	for i := 1; i < 200000; i++ {
		s.Apply([]byte(strconv.Itoa(i)), 0, setState{})
		if i < 500 || i%1009 != 0 {
			continue
		}
		u, ok := s.Usage(probe, 0)
		if !ok || u.Slot < 6 || u.Slot > 7 {
			t.Fatalf("%d keys: %+v, want a table share of 6 or 7 bytes", i+1, u)
		}
	}
}

// TestUsageInlineKeyBoundary: a key of up to 16 bytes is kept in its record
// and costs no arena bytes; one byte longer, its bytes are in the arena.
func TestUsageInlineKeyBoundary(t *testing.T) {
	s := New(Config{Shards: 1, MaxKeys: 100})
	inline, spilled := []byte(strings.Repeat("a", 16)), []byte(strings.Repeat("b", 17))
	s.Apply(inline, 0, setState{})
	s.Apply(spilled, 0, setState{})
	if u, ok := s.Usage(inline, 0); !ok || u.Arena != 0 {
		t.Fatalf("16-byte key: %+v, want no arena bytes", u)
	}
	if u, ok := s.Usage(spilled, 0); !ok || u.Arena != 17 {
		t.Fatalf("17-byte key: %+v, want 17 arena bytes", u)
	}
}
