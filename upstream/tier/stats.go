package tier

import (
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/throttlekit/throttlekit-server/upstream"
)

// LatencyBounds are the upper bounds of the latency histogram's buckets;
// a last bucket counts the calls above the largest.
var LatencyBounds = [...]time.Duration{
	100 * time.Microsecond, 250 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, time.Second,
}

// numCodes bounds upstream.Code values counted by kind.
const numCodes = 8

type counters struct {
	roundTrips atomic.Int64
	calls      atomic.Int64 // script calls: a pipeline of n is one round trip and n calls
	allowed    atomic.Int64 // checks and mchecks the upstream admitted
	denyHits   atomic.Int64 // checks answered from a cached denial
	failOpen   atomic.Int64 // operations answered from local state while failing open
	queueFull  atomic.Int64 // operations refused because every worker was busy and the queue full
	pending    atomic.Int64 // operations queued or running
	leaseHits  atomic.Int64 // checks answered from leased credits
	leases     atomic.Int64 // lease calls that succeeded
	leased     atomic.Int64 // credits granted by them
	prefetches atomic.Int64 // leases started early, at the low-water mark
	waits      atomic.Int64 // checks that waited for a lease
	returned   atomic.Int64 // credits the upstream took back
	stranded   atomic.Int64 // credits that expired unused or were not taken back
	errs       [numCodes]atomic.Int64
	latNs      atomic.Int64
	lat        [len(LatencyBounds) + 1]atomic.Int64
}

func (c *counters) observe(d time.Duration, err error) {
	c.trip(d, 1)
	c.countErr(err)
}

// observeBatch counts one pipeline of calls that took d.
func (c *counters) observeBatch(d time.Duration, calls []upstream.Call) {
	c.trip(d, int64(len(calls)))
	for i := range calls {
		c.countErr(calls[i].Err)
	}
}

func (c *counters) trip(d time.Duration, calls int64) {
	c.roundTrips.Add(1)
	c.calls.Add(calls)
	c.latNs.Add(int64(d))
	i := 0
	for i < len(LatencyBounds) && d > LatencyBounds[i] {
		i++
	}
	c.lat[i].Add(1)
}

func (c *counters) countErr(err error) {
	if code := upstream.CodeOf(err); err != nil && int(code) < numCodes {
		c.errs[code].Add(1)
	}
}

// Stats is a snapshot of a Backend's counters.
type Stats struct {
	RoundTrips    int64 // upstream round trips made (a pipeline is one)
	Calls         int64 // script calls made (a pipeline of n operations is n)
	Allowed       int64 // checks the upstream admitted
	CachedDenials int64 // checks answered from a cached denial (no upstream call)
	FailOpen      int64 // operations answered from local state while the upstream failed
	QueueFull     int64 // operations that found the worker queue full
	Pending       int64 // operations queued or running now
	LeaseHits     int64 // checks answered from leased credits (no upstream call)
	Leases        int64 // lease calls that succeeded
	Leased        int64 // credits they granted
	Prefetches    int64 // leases started at a window-coupled lease's low-water mark, before its credits ran out
	LeaseWaits    int64 // leased checks that found no credits and waited for a lease
	Returned      int64 // idle credits the upstream took back
	Stranded      int64 // credits that expired unused or were not taken back
	// Errors counts failed calls by upstream.Code (index), e.g.
	// Errors[upstream.CodeUnavailable].
	Errors [numCodes]int64
	// LatencyNs is the sum of call latencies; Latency the histogram over
	// LatencyBounds (the last bucket above the largest bound).
	LatencyNs int64
	Latency   [len(LatencyBounds) + 1]int64
}

// UpstreamStats returns a snapshot of the counters.
func (b *Backend) UpstreamStats() Stats {
	var s Stats
	s.RoundTrips = b.st.roundTrips.Load()
	s.Calls = b.st.calls.Load()
	s.Allowed = b.st.allowed.Load()
	s.CachedDenials = b.st.denyHits.Load()
	s.FailOpen = b.st.failOpen.Load()
	s.QueueFull = b.st.queueFull.Load()
	s.Pending = b.st.pending.Load()
	s.LeaseHits = b.st.leaseHits.Load()
	s.Leases = b.st.leases.Load()
	s.Leased = b.st.leased.Load()
	s.Prefetches = b.st.prefetches.Load()
	s.LeaseWaits = b.st.waits.Load()
	s.Returned = b.st.returned.Load()
	s.Stranded = b.st.stranded.Load()
	for i := range s.Errors {
		s.Errors[i] = b.st.errs[i].Load()
	}
	s.LatencyNs = b.st.latNs.Load()
	for i := range s.Latency {
		s.Latency[i] = b.st.lat[i].Load()
	}
	return s
}

// InfoFields returns the lines of INFO upstream: modes, counters, the
// local hit ratio, errors by kind and the latency histogram.
func (b *Backend) InfoFields() [][2]string {
	s := b.UpstreamStats()
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	f := [][2]string{
		{"upstream_mode", b.cfg.Mode.String()},
	}
	for _, p := range b.cfg.Prefixes {
		f = append(f, [2]string{"upstream_mode_prefix", strconv.Quote(p.Prefix) + "=" + p.Mode.String()})
	}
	fail := "closed"
	if b.cfg.FailOpen {
		fail = "open"
	}
	f = append(f,
		[2]string{"upstream_fail", fail},
		[2]string{"upstream_round_trips", i(s.RoundTrips)},
		[2]string{"upstream_calls", i(s.Calls)},
		[2]string{"upstream_allowed", i(s.Allowed)},
		[2]string{"upstream_cached_denials", i(s.CachedDenials)},
		[2]string{"upstream_fail_open_answers", i(s.FailOpen)},
		[2]string{"upstream_queue_full", i(s.QueueFull)},
		[2]string{"upstream_pending", i(s.Pending)},
		[2]string{"upstream_lease_hits", i(s.LeaseHits)},
		[2]string{"upstream_leases", i(s.Leases)},
		[2]string{"upstream_leased_credits", i(s.Leased)},
		[2]string{"upstream_lease_prefetches", i(s.Prefetches)},
		[2]string{"upstream_lease_waits", i(s.LeaseWaits)},
		[2]string{"upstream_returned_credits", i(s.Returned)},
		[2]string{"upstream_stranded_credits", i(s.Stranded)},
	)
	local := s.CachedDenials + s.LeaseHits
	ratio := 0.0
	if local+s.Calls > 0 {
		ratio = float64(local) / float64(local+s.Calls)
	}
	f = append(f, [2]string{"upstream_local_hit_ratio", strconv.FormatFloat(ratio, 'f', 4, 64)})
	if s.Allowed > 0 {
		f = append(f, [2]string{"upstream_round_trips_per_admitted", strconv.FormatFloat(float64(s.RoundTrips)/float64(s.Allowed), 'f', 4, 64)})
	}
	for c := upstream.Code(1); c < numCodes; c++ {
		if s.Errors[c] > 0 {
			f = append(f, [2]string{"upstream_errors_" + c.String(), i(s.Errors[c])})
		}
	}
	mean := int64(0)
	if s.RoundTrips > 0 {
		mean = s.LatencyNs / s.RoundTrips
	}
	f = append(f, [2]string{"upstream_latency_mean_us", i(mean / 1000)})
	var h strings.Builder
	for j, n := range s.Latency {
		if j > 0 {
			h.WriteByte(',')
		}
		if j < len(LatencyBounds) {
			h.WriteString("le_" + strconv.FormatInt(LatencyBounds[j].Microseconds(), 10) + "us=")
		} else {
			h.WriteString("inf=")
		}
		h.WriteString(i(n))
	}
	f = append(f, [2]string{"upstream_latency_histogram", h.String()})
	return f
}
