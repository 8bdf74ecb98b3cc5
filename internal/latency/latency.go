// Package latency is the latency monitor behind LATENCY LATEST, HISTORY,
// RESET and DOCTOR: named events (a slow command, an expiry sweep, a table
// growth, a persistence flush), each with its latest samples at one-second
// resolution and its all-time maximum, as Redis keeps them.
//
// # Samples
//
// A sample is a Unix second and a latency in milliseconds. Each event keeps
// the last HistoryLen (160) samples in a ring; a sample in the same second
// as the event's previous one only raises that one's latency, so a burst of
// stalls in one second is one sample holding the worst. The all-time
// maximum survives the ring and is cleared only by Reset. Record adds a
// sample only when the monitor is on (threshold > 0) and the latency
// reaches the threshold, so a caller may call it freely; it takes a mutex
// and does not allocate once the event exists.
//
// Histogram helpers (Bucket, BucketLabelUs) give LATENCY HISTOGRAM's
// power-of-two microsecond buckets without a histogram library: a per-loop
// array of counters indexed by Bucket is all the server keeps.
package latency

import (
	"fmt"
	"math/bits"
	"sort"
	"strings"
	"sync"
)

// HistoryLen is the number of samples kept per event, as Redis's
// LATENCY_TS_LEN.
const HistoryLen = 160

// Sample is one second's worst latency of an event.
type Sample struct {
	Time      int64 // Unix seconds
	LatencyMs int64
}

// Event is an event's samples, oldest first, and its all-time maximum.
type Event struct {
	Name    string
	Samples []Sample
	MaxMs   int64
}

type series struct {
	ring [HistoryLen]Sample
	idx  int // next slot to write
	max  int64
}

// Monitor holds the events. Its zero value is off; it is safe for
// concurrent use.
type Monitor struct {
	mu        sync.Mutex
	threshold int64 // ms; 0 = off
	events    map[string]*series
}

// SetThreshold sets the latency in milliseconds from which Record keeps a
// sample; 0 (or less) turns the monitor off.
func (m *Monitor) SetThreshold(ms int64) {
	m.mu.Lock()
	m.threshold = max(ms, 0)
	m.mu.Unlock()
}

// Threshold returns the threshold in milliseconds, 0 when off.
func (m *Monitor) Threshold() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.threshold
}

// Record adds a sample of event at Unix second now if the monitor is on and
// latencyMs reaches its threshold. It reports whether it kept the sample.
func (m *Monitor) Record(event string, now, latencyMs int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.threshold <= 0 || latencyMs < m.threshold {
		return false
	}
	s := m.events[event]
	if s == nil {
		if m.events == nil {
			m.events = make(map[string]*series)
		}
		s = &series{}
		m.events[event] = s
	}
	s.max = max(s.max, latencyMs)
	prev := &s.ring[(s.idx+HistoryLen-1)%HistoryLen]
	if prev.Time == now {
		prev.LatencyMs = max(prev.LatencyMs, latencyMs)
		return true
	}
	s.ring[s.idx] = Sample{Time: now, LatencyMs: latencyMs}
	s.idx = (s.idx + 1) % HistoryLen
	return true
}

// Events returns every event, sorted by name, with its samples oldest
// first.
func (m *Monitor) Events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Event, 0, len(m.events))
	for name, s := range m.events {
		out = append(out, s.event(name))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// History returns one event's samples oldest first, or false if the event
// has none.
func (m *Monitor) History(event string) (Event, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.events[event]
	if s == nil {
		return Event{}, false
	}
	return s.event(event), true
}

func (s *series) event(name string) Event {
	e := Event{Name: name, MaxMs: s.max}
	for i := 0; i < HistoryLen; i++ {
		if x := s.ring[(s.idx+i)%HistoryLen]; x.Time != 0 {
			e.Samples = append(e.Samples, x)
		}
	}
	return e
}

// Reset forgets the named events, or every event when none is named, and
// returns how many it forgot.
func (m *Monitor) Reset(events ...string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(events) == 0 {
		n := len(m.events)
		m.events = nil
		return n
	}
	n := 0
	for _, e := range events {
		if _, ok := m.events[e]; ok {
			delete(m.events, e)
			n++
		}
	}
	return n
}

// Doctor returns a plain-text report of the events: for each, how many
// samples it holds, their average and mean deviation, the mean period
// between them, and the worst. It advises on the thresholds when there is
// nothing to report.
func (m *Monitor) Doctor() string {
	threshold := m.Threshold()
	events := m.Events()
	var b strings.Builder
	switch {
	case threshold == 0 && len(events) == 0:
		b.WriteString("The latency monitor is off (latency-monitor-threshold 0): no event was sampled.\n")
		b.WriteString("Start it with --latency-monitor-threshold <milliseconds>, e.g. 100.\n")
		return b.String()
	case len(events) == 0:
		fmt.Fprintf(&b, "No latency event reached the threshold of %d ms since the monitor started.\n", threshold)
		return b.String()
	}
	fmt.Fprintf(&b, "Latency events at or above %d ms, per event:\n\n", threshold)
	for i, e := range events {
		var sum int64
		for _, s := range e.Samples {
			sum += s.LatencyMs
		}
		n := int64(len(e.Samples))
		avg := sum / max(n, 1)
		var dev int64
		for _, s := range e.Samples {
			d := s.LatencyMs - avg
			if d < 0 {
				d = -d
			}
			dev += d
		}
		dev /= max(n, 1)
		period := int64(0)
		if n > 1 {
			period = (e.Samples[n-1].Time - e.Samples[0].Time) / (n - 1)
		}
		fmt.Fprintf(&b, "%d. %s: %d latency spikes (average %dms, mean deviation %dms, period %d sec). Worst all time event %dms.\n",
			i+1, e.Name, n, avg, dev, period, e.MaxMs)
	}
	b.WriteString("\nWhat the events mean:\n")
	for _, e := range events {
		if h := hint(e.Name); h != "" {
			fmt.Fprintf(&b, "- %s: %s\n", e.Name, h)
		}
	}
	return b.String()
}

// hint explains an event this server records, or returns "".
func hint(event string) string {
	switch event {
	case "command":
		return "a command that is not O(1) (KEYS, SCAN, FLUSHALL, CLIENT LIST, ...) took this long; see SLOWLOG GET."
	case "fast-command":
		return "an O(1) command took this long: the machine or the process stalled (CPU starvation, swapping, a garbage-collection pause)."
	case "expire-cycle":
		return "a sweep of expired keys held a shard this long; a shorter sweep-interval makes each sweep smaller."
	case "table-growth":
		return "a store shard moved to a larger index table, re-inserting every key it held (once per size step, as the keyspace grows)."
	case "persist-flush":
		return "a persistence flush took this long to reach the backend."
	}
	return ""
}

// NumBuckets is the number of LATENCY HISTOGRAM buckets: 1 µs to about 1 s
// (Redis's histograms stop at 1 s too), each twice the previous.
const NumBuckets = 21

// Bucket returns the histogram bucket of a duration in nanoseconds: bucket
// k holds durations below 1024<<k ns (the first also every shorter one, the
// last every longer one).
func Bucket(ns int64) int {
	if ns <= 0 {
		return 0
	}
	k := bits.Len64(uint64(ns-1) >> 10)
	return min(k, NumBuckets-1)
}

// BucketLabelUs is the microsecond label of bucket k in LATENCY HISTOGRAM
// (the highest value Redis's histogram, at two significant digits, counts
// in the bucket that ends at 1024<<k ns, in µs): 1, 2, 4, 8, 16, 33, 66, ...
func BucketLabelUs(k int) int64 {
	top := int64(1024) << k
	return (top + top/128 - 1) / 1000
}
