package engine

import "testing"

//go:noinline
func (l *Limit) floorCheck(s State, now, cost int64) (State, Decision, int64, error) {
	return State{A: now, Kind: KindGCRA}, Decision{Allowed: 1, Limit: l.Limit, Remaining: s.A, ResetAt: now, RetryAfter: 0}, cost, nil
}

func BenchmarkFloor(b *testing.B) {
	l := mustLimit(b, KindGCRA, 1_000_000, sec, 0)
	var s State
	now := epoch
	b.ReportAllocs()
	for b.Loop() {
		now += 700
		s, _, _, _ = l.floorCheck(s, now, 1)
	}
}
func BenchmarkFloorUse(b *testing.B) {
	l := mustLimit(b, KindGCRA, 1_000_000, sec, 0)
	var s State
	var d Decision
	now := epoch
	b.ReportAllocs()
	for b.Loop() {
		now += 700
		s, d, _, _ = l.floorCheck(s, now, 1)
	}
	_ = d
}
