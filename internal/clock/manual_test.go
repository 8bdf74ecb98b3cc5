package clock

import (
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const sec = int64(time.Second)

// source is a hand-driven monotonic source.
type source struct{ ns atomic.Int64 }

func (s *source) now() int64 { return s.ns.Load() }

func TestManualFollowsItsSourceUntilFrozen(t *testing.T) {
	var src source
	src.ns.Store(100 * sec)
	m := NewManual(src.now)
	if got := m.Now(); got != 100*sec {
		t.Fatalf("Now = %d, want the source's %d", got, 100*sec)
	}
	if _, frozen := m.Frozen(); frozen {
		t.Fatal("a new Manual is frozen")
	}
	src.ns.Add(sec)
	if got := m.Now(); got != 101*sec {
		t.Fatalf("Now = %d after the source moved, want %d", got, 101*sec)
	}

	m.Freeze(50 * sec) // back: a fixed instant is what the caller asks for
	src.ns.Add(10 * sec)
	if got := m.Now(); got != 50*sec {
		t.Fatalf("frozen Now = %d, want %d", got, 50*sec)
	}
	if at, frozen := m.Frozen(); !frozen || at != 50*sec {
		t.Fatalf("Frozen = %d, %v", at, frozen)
	}
	if got, ok := m.Advance(2*sec, math.MaxInt64); !ok || got != 52*sec || m.Now() != 52*sec {
		t.Fatalf("Advance(2s) = %d, %v; Now %d; want 52 s", got, ok, m.Now())
	}
	if _, ok := m.Advance(-1, math.MaxInt64); ok || m.Now() != 52*sec {
		t.Fatalf("Advance(-1) accepted, or moved the clock to %d", m.Now())
	}
	if _, ok := m.Advance(10*sec, 61*sec); ok || m.Now() != 52*sec {
		t.Fatalf("Advance past the limit accepted, or moved the clock to %d", m.Now())
	}
	if got, ok := m.Advance(9*sec, 61*sec); !ok || got != 61*sec {
		t.Fatalf("Advance to the limit = %d, %v", got, ok)
	}

	// The source (111 s) is ahead of the frozen instant (61 s): Resume
	// jumps to it and follows it.
	m.Resume()
	if got := m.Now(); got != 111*sec {
		t.Fatalf("Now after Resume = %d, want the source's %d", got, 111*sec)
	}
	m.Resume() // running: nothing changes
	if got := m.Now(); got != 111*sec {
		t.Fatalf("Now after a second Resume = %d", got)
	}
}

// Resume from an instant ahead of the source keeps the difference: the clock
// runs on from the frozen instant and never goes back.
func TestManualResumeNeverGoesBack(t *testing.T) {
	var src source
	src.ns.Store(10 * sec)
	m := NewManual(src.now)
	m.Freeze(1000 * sec)
	m.Resume()
	if got := m.Now(); got != 1000*sec {
		t.Fatalf("Now after Resume = %d, want the frozen %d", got, 1000*sec)
	}
	src.ns.Add(3 * sec)
	if got := m.Now(); got != 1003*sec {
		t.Fatalf("Now 3 s later = %d, want %d", got, 1003*sec)
	}
	// Advance while running moves the offset.
	if got, ok := m.Advance(7*sec, math.MaxInt64); !ok || got != 1010*sec || m.Now() != 1010*sec {
		t.Fatalf("Advance(7s) while running = %d, %v; Now %d", got, ok, m.Now())
	}
	// Freezing where it stands and resuming changes nothing.
	m.Freeze(m.Now())
	m.Resume()
	if got := m.Now(); got != 1010*sec {
		t.Fatalf("Now after freeze/resume in place = %d", got)
	}
}

// Readers racing the writers never see the clock go back, as long as no
// writer freezes it at an earlier instant. Run with -race.
func TestManualConcurrentReadersSeeNoStepBack(t *testing.T) {
	var src source
	src.ns.Store(sec)
	m := NewManual(src.now)
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan string, 4)
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			prev := m.Now()
			for !stop.Load() {
				n := m.Now()
				if n < prev {
					errs <- "Now went back"
					return
				}
				prev = n
			}
		}()
	}
	for i := 0; i < 20000; i++ {
		src.ns.Add(1000)
		switch i % 4 {
		case 0:
			m.Freeze(m.Now())
		case 1:
			m.Advance(500, math.MaxInt64)
		case 2:
			m.Resume()
		case 3:
			m.Advance(3000, math.MaxInt64)
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Fatal(e)
	}
}

func TestManualNowDoesNotAllocate(t *testing.T) {
	m := NewManual(New().Now)
	if n := testing.AllocsPerRun(1000, func() { _ = m.Now() }); n != 0 {
		t.Fatalf("Now running: %v allocations", n)
	}
	m.Freeze(sec)
	if n := testing.AllocsPerRun(1000, func() { _ = m.Now() }); n != 0 {
		t.Fatalf("Now frozen: %v allocations", n)
	}
}

func BenchmarkManualNow(b *testing.B) {
	m := NewManual(New().Now)
	b.ReportAllocs()
	var s int64
	for b.Loop() {
		s += m.Now()
	}
	_ = s
}
