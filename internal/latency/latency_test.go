package latency

import (
	"strings"
	"testing"
)

func TestRecordAndHistory(t *testing.T) {
	var m Monitor
	if m.Record("command", 100, 500) {
		t.Fatal("recorded while off")
	}
	m.SetThreshold(10)
	if m.Record("command", 100, 9) {
		t.Fatal("recorded below the threshold")
	}
	m.Record("command", 100, 10)
	m.Record("command", 100, 30) // same second: raises the sample
	m.Record("command", 100, 20) // same second, lower: kept at 30
	m.Record("command", 101, 15)
	m.Record("expire-cycle", 102, 12)
	e, ok := m.History("command")
	if !ok || len(e.Samples) != 2 || e.Samples[0] != (Sample{100, 30}) || e.Samples[1] != (Sample{101, 15}) || e.MaxMs != 30 {
		t.Fatalf("history %+v", e)
	}
	ev := m.Events()
	if len(ev) != 2 || ev[0].Name != "command" || ev[1].Name != "expire-cycle" {
		t.Fatalf("events %+v", ev)
	}
	if n := m.Reset("nope", "expire-cycle"); n != 1 {
		t.Fatalf("reset %d", n)
	}
	if _, ok := m.History("expire-cycle"); ok {
		t.Fatal("reset kept the event")
	}
	if n := m.Reset(); n != 1 || len(m.Events()) != 0 {
		t.Fatalf("reset all %d", n)
	}
}

func TestRingKeepsLatest(t *testing.T) {
	var m Monitor
	m.SetThreshold(1)
	for i := int64(1); i <= HistoryLen+40; i++ {
		m.Record("e", i, i)
	}
	e, _ := m.History("e")
	if len(e.Samples) != HistoryLen || e.Samples[0].Time != 41 || e.Samples[HistoryLen-1].Time != HistoryLen+40 || e.MaxMs != HistoryLen+40 {
		t.Fatalf("ring: %d samples, first %+v", len(e.Samples), e.Samples[0])
	}
}

func TestDoctor(t *testing.T) {
	var m Monitor
	if d := m.Doctor(); !strings.Contains(d, "monitor is off") {
		t.Fatalf("off: %q", d)
	}
	m.SetThreshold(5)
	if d := m.Doctor(); !strings.Contains(d, "No latency event reached the threshold of 5 ms") {
		t.Fatalf("quiet: %q", d)
	}
	m.Record("command", 10, 10)
	m.Record("command", 20, 30)
	d := m.Doctor()
	if !strings.Contains(d, "1. command: 2 latency spikes (average 20ms, mean deviation 10ms, period 10 sec). Worst all time event 30ms.") ||
		!strings.Contains(d, "- command: ") {
		t.Fatalf("report: %q", d)
	}
}

func TestBuckets(t *testing.T) {
	for _, tc := range []struct {
		ns   int64
		want int
	}{{0, 0}, {1, 0}, {1024, 0}, {1025, 1}, {2048, 1}, {2049, 2}, {1e9, 20}, {1 << 40, 20}} {
		if got := Bucket(tc.ns); got != tc.want {
			t.Errorf("Bucket(%d) = %d, want %d", tc.ns, got, tc.want)
		}
	}
	want := []int64{1, 2, 4, 8, 16, 33, 66, 132}
	for k, w := range want {
		if got := BucketLabelUs(k); got != w {
			t.Errorf("label %d = %d, want %d", k, got, w)
		}
	}
}
