package server

import "sync/atomic"

// Stats is a snapshot of the server's counters, folded from the per-loop
// counters. Every counter is cumulative since the server started, except
// ConnsCurrent.
type Stats struct {
	ConnsCurrent, ConnsAccepted, ConnsRejected int64
	BytesIn, BytesOut                          int64
	Commands                                   map[string]int64 // by lower-case command name ("throttle.check", "ping", ...)
	Allowed, Denied                            int64            // decisions of THROTTLE.CHECK and CL.THROTTLE
	Errors                                     map[string]int64 // error replies by first word: "ERR", "WRONGTYPE", "protocol", ...
	LeaseGranted, LeaseReturned                int64            // credits
	LatencyBounds                              []int64          // histogram bucket upper bounds, ns (same slice every call)
	LatencyCounts                              []int64          // per bucket (not cumulative), len(LatencyBounds)+1 (last = +Inf)
	LatencySumNs, LatencyCount                 int64
}

// latencyBounds are the upper bounds, in nanoseconds, of the latency
// histogram buckets. The latency of a command is the time from the start of
// the read batch that carried it to the moment its batch's replies were
// ready to be handed to the socket: every command of a batch is answered by that write.
var latencyBounds = []int64{
	1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
	1_000_000, 2_500_000, 5_000_000, 10_000_000, 25_000_000, 100_000_000, 1_000_000_000,
}

const numBuckets = 16 // len(latencyBounds)

// Error kinds counted in Stats.Errors.
const (
	errKindERR = iota
	errKindWrongType
	errKindNoAuth
	errKindWrongPass
	errKindNoProto
	errKindProtocol
	errKindCell
	errKindOther
	numErrKinds
)

var errKindNames = [numErrKinds]string{"ERR", "WRONGTYPE", "NOAUTH", "WRONGPASS", "NOPROTO", "protocol", "Cell", "other"}

// errKindOf maps an error code (the first word of an error reply) to its kind.
func errKindOf(code string) int {
	switch code {
	case "ERR":
		return errKindERR
	case "WRONGTYPE":
		return errKindWrongType
	case "NOAUTH":
		return errKindNoAuth
	case "WRONGPASS":
		return errKindWrongPass
	case "NOPROTO":
		return errKindNoProto
	case "Cell":
		return errKindCell
	}
	return errKindOther
}

// counters are one event loop's plain counters. Only the loop's goroutine
// touches them; flush moves them into the loop's published atomics once per
// read batch, so a command costs a few plain increments.
type counters struct {
	cmds                        [numCmds]int64
	errs                        [numErrKinds]int64
	allowed, denied             int64
	leaseGranted, leaseReturned int64
	bytesIn, bytesOut           int64
	lat                         [numBuckets + 1]int64
	latSum, latCount            int64
}

// published are one loop's counters as other goroutines read them.
type published struct {
	cmds                        [numCmds]atomic.Int64
	errs                        [numErrKinds]atomic.Int64
	allowed, denied             atomic.Int64
	leaseGranted, leaseReturned atomic.Int64
	bytesIn, bytesOut           atomic.Int64
	lat                         [numBuckets + 1]atomic.Int64
	latSum, latCount            atomic.Int64
}

func addZero(dst *atomic.Int64, src *int64) {
	if *src != 0 {
		dst.Add(*src)
		*src = 0
	}
}

// flush adds c into p and zeroes c.
func (c *counters) flush(p *published) {
	for i := range c.cmds {
		addZero(&p.cmds[i], &c.cmds[i])
	}
	for i := range c.errs {
		addZero(&p.errs[i], &c.errs[i])
	}
	addZero(&p.allowed, &c.allowed)
	addZero(&p.denied, &c.denied)
	addZero(&p.leaseGranted, &c.leaseGranted)
	addZero(&p.leaseReturned, &c.leaseReturned)
	addZero(&p.bytesIn, &c.bytesIn)
	addZero(&p.bytesOut, &c.bytesOut)
	for i := range c.lat {
		addZero(&p.lat[i], &c.lat[i])
	}
	addZero(&p.latSum, &c.latSum)
	addZero(&p.latCount, &c.latCount)
}

// observe records n commands that each took d nanoseconds.
func (c *counters) observe(d int64, n int64) {
	if n <= 0 {
		return
	}
	i := 0
	for i < numBuckets && d > latencyBounds[i] {
		i++
	}
	c.lat[i] += n
	c.latSum += d * n
	c.latCount += n
}

// fold adds p into st.
func (p *published) fold(st *Stats) {
	for i := range p.cmds {
		if v := p.cmds[i].Load(); v != 0 {
			st.Commands[commandTable[i].name] += v
		}
	}
	for i := range p.errs {
		if v := p.errs[i].Load(); v != 0 {
			st.Errors[errKindNames[i]] += v
		}
	}
	st.Allowed += p.allowed.Load()
	st.Denied += p.denied.Load()
	st.LeaseGranted += p.leaseGranted.Load()
	st.LeaseReturned += p.leaseReturned.Load()
	st.BytesIn += p.bytesIn.Load()
	st.BytesOut += p.bytesOut.Load()
	for i := range p.lat {
		st.LatencyCounts[i] += p.lat[i].Load()
	}
	st.LatencySumNs += p.latSum.Load()
	st.LatencyCount += p.latCount.Load()
}

// Stats returns a snapshot of the server's counters. Counts of a read batch
// still being processed appear once the batch ends.
func (s *Server) Stats() Stats {
	st := Stats{
		ConnsCurrent:  s.connsCurrent.Load(),
		ConnsAccepted: s.connsAccepted.Load(),
		ConnsRejected: s.connsRejected.Load(),
		Commands:      make(map[string]int64),
		Errors:        make(map[string]int64),
		LatencyBounds: latencyBounds,
		LatencyCounts: make([]int64, numBuckets+1),
	}
	s.loopsMu.Lock()
	loops := s.loops
	s.loopsMu.Unlock()
	for _, l := range loops {
		l.pub.fold(&st)
	}
	return st
}
