package server

import (
	"math/bits"

	"github.com/throttlekit/throttlekit-server/internal/latency"
	"sort"
	"sync"
	"sync/atomic"
)

// Stats is a snapshot of the server's counters, folded from the per-loop
// counters. Every counter is cumulative since the server started, except
// ConnsCurrent.
type Stats struct {
	ConnsCurrent, ConnsAccepted, ConnsRejected int64
	BytesIn, BytesOut                          int64
	Commands                                   map[string]int64 // by lower-case command name ("throttle.check", "ping", ...)
	Allowed, Denied                            int64            // decisions of THROTTLE.CHECK, CL.THROTTLE and GCRA
	Errors                                     map[string]int64 // error replies by first word: "ERR", "WRONGTYPE", "protocol", ...
	LeaseGranted, LeaseReturned                int64            // credits
	LatencyBounds                              []int64          // histogram bucket upper bounds, ns (same slice every call)
	LatencyCounts                              []int64          // per bucket (not cumulative), len(LatencyBounds)+1 (last = +Inf)
	LatencySumNs, LatencyCount                 int64

	// CommandStats counts each command and subcommand that ran or was
	// refused at least once, by name as INFO commandstats shows it
	// ("throttle.check", "client|list").
	CommandStats map[string]CommandStat
}

// CommandStat is one command's or subcommand's counters.
type CommandStat struct {
	Calls    int64 // runs of the handler
	Nanos    int64 // its share of the time of the batches that ran it, ns (see loop.call)
	Rejected int64 // refused before running: authentication, arity
	Failed   int64 // ran and replied with an error

	// Hist counts calls by duration (their share of their batch), in
	// LATENCY HISTOGRAM's buckets (internal/latency: bucket k holds
	// durations below 1024<<k ns).
	Hist [latency.NumBuckets]int64
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
	cmds                        [numCmds]int64              // changed only through countCmd
	cmdsDirty                   [(numCmds + 63) / 64]uint64 // entries of cmds touched since the last flush
	errs                        [numErrKinds]int64
	allowed, denied             int64
	leaseGranted, leaseReturned int64
	bytesIn, bytesOut           int64
	lat                         [numBuckets + 1]int64
	latDirty                    uint32 // entries of lat touched since the last flush
	latSum, latCount            int64

	// Per command and subcommand, by cmdSpec.stat; cmdDirty marks the
	// entries touched since the last flush, so a flush visits only those,
	// and batchDirty those run in the current batch, whose time observe
	// shares among them.
	cmd        [maxCmdStats]cmdCounter
	cmdDirty   [maxCmdStats / 64]uint64
	batchDirty [maxCmdStats / 64]uint64

	sh *shared // server-wide introspection state, found on first use (see loop.shared)

	// Per-command latency histograms (LATENCY HISTOGRAM: cmd_latency.go),
	// touched once per batch by observe and flush; last, so that the
	// fields every command touches stay together.
	hist     [maxCmdStats][latency.NumBuckets]int64
	histMask [maxCmdStats]uint32 // buckets of hist touched since the last flush
}

// cmdCounter is one command's plain counters (see CommandStat); batch
// counts its calls in the current batch.
type cmdCounter struct{ calls, ns, rejected, failed, batch int64 }

// cmdCounterPub is cmdCounter as other goroutines read it.
type cmdCounterPub struct{ calls, ns, rejected, failed atomic.Int64 }

// maxCmdStats bounds the number of commands and subcommands counted one by
// one; indexStats panics at start-up if the table outgrows it.
const maxCmdStats = 256

// statSpecs lists every command and subcommand by its stat index. It is
// filled once by indexStats, from the init that builds commandTable.
var statSpecs []*cmdSpec

// indexStats gives every command and subcommand of commandTable its stat
// index and fills statSpecs.
func indexStats() {
	statSpecs = statSpecs[:0]
	for i := range commandTable {
		sp := &commandTable[i]
		sp.stat = uint16(len(statSpecs))
		statSpecs = append(statSpecs, sp)
		for j := range sp.subs {
			sp.subs[j].stat = uint16(len(statSpecs))
			statSpecs = append(statSpecs, &sp.subs[j])
		}
	}
	if len(statSpecs) > maxCmdStats {
		panic("server: more commands than maxCmdStats")
	}
}

// countCmd counts one call of command id (an index of commandTable).
func (c *counters) countCmd(id cmdID) {
	c.cmds[id]++
	c.cmdsDirty[id>>6] |= 1 << (id & 63)
}

// mark records that the counters of stat index i changed in this batch.
func (c *counters) mark(i uint16) { c.cmdDirty[i>>6] |= 1 << (i & 63) }

// shared is the introspection state of the whole server: the MONITOR
// clients and the counters' values at the last CONFIG RESETSTAT. It
// belongs to no loop: the first loop that needs it creates it and the
// others find it (loop.shared), so that Server carries no field for it.
type shared struct {
	monitors atomic.Pointer[[]*client] // nil when no client is monitoring; copied on write under mu

	mu   sync.Mutex
	base Stats // the counters at the last CONFIG RESETSTAT; INFO reports the difference
	// baseExpired and baseEvicted are the store's counters at that time.
	baseExpired, baseEvicted int64
}

// shared returns the server's shared introspection state, creating it on
// the first call of the first loop. Loops find each other's under
// Server.loopsMu; a loop driven directly by a test gets its own.
func (l *loop) shared() *shared {
	if l.ctr.sh != nil {
		return l.ctr.sh
	}
	s := l.srv
	s.loopsMu.Lock()
	for _, o := range s.loops {
		if o.ctr.sh != nil {
			l.ctr.sh = o.ctr.sh
			break
		}
	}
	if l.ctr.sh == nil {
		l.ctr.sh = &shared{}
	}
	s.loopsMu.Unlock()
	return l.ctr.sh
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
	cmd                         [maxCmdStats]cmdCounterPub
	hist                        [maxCmdStats][latency.NumBuckets]atomic.Int64
}

func addZero(dst *atomic.Int64, src *int64) {
	if *src != 0 {
		dst.Add(*src)
		*src = 0
	}
}

// flush adds c into p and zeroes c. It runs once per read batch, so the
// arrays are visited through their dirty masks: a batch of one command
// touches one entry of cmds and one of lat, not all of them.
func (c *counters) flush(p *published) {
	for w := range c.cmdsDirty {
		for m := c.cmdsDirty[w]; m != 0; m &= m - 1 {
			i := w*64 + bits.TrailingZeros64(m)
			addZero(&p.cmds[i], &c.cmds[i])
		}
		c.cmdsDirty[w] = 0
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
	for m := c.latDirty; m != 0; m &= m - 1 {
		i := bits.TrailingZeros32(m)
		addZero(&p.lat[i], &c.lat[i])
	}
	c.latDirty = 0
	addZero(&p.latSum, &c.latSum)
	addZero(&p.latCount, &c.latCount)
	for w := range c.cmdDirty {
		for m := c.cmdDirty[w]; m != 0; m &= m - 1 {
			i := w*64 + bits.TrailingZeros64(m)
			src, dst := &c.cmd[i], &p.cmd[i]
			addZero(&dst.calls, &src.calls)
			addZero(&dst.ns, &src.ns)
			addZero(&dst.rejected, &src.rejected)
			addZero(&dst.failed, &src.failed)
			for m := c.histMask[i]; m != 0; m &= m - 1 {
				b := bits.TrailingZeros32(m)
				addZero(&p.hist[i][b], &c.hist[i][b])
			}
			c.histMask[i] = 0
		}
		c.cmdDirty[w] = 0
	}
}

// observe records n commands that each took d nanoseconds, and shares d
// among the commands the batch ran, for INFO commandstats.
func (c *counters) observe(d int64, n int64) {
	if n <= 0 {
		return
	}
	b := -1 // the histogram bucket of each command's share, found on first use
	for w := range c.batchDirty {
		for m := c.batchDirty[w]; m != 0; m &= m - 1 {
			i := w*64 + bits.TrailingZeros64(m)
			cc := &c.cmd[i]
			if b < 0 {
				share := d
				if n > 1 {
					share = d / n
				}
				b = latency.Bucket(share)
			}
			c.hist[i][b] += cc.batch
			c.histMask[i] |= 1 << b
			cc.ns += d * cc.batch / n
			cc.batch = 0
			c.cmdDirty[w] |= 1 << (i & 63)
		}
		c.batchDirty[w] = 0
	}
	i := 0
	for i < numBuckets && d > latencyBounds[i] {
		i++
	}
	c.lat[i] += n
	c.latDirty |= 1 << i
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
	for i, sp := range statSpecs {
		c := &p.cmd[i]
		cs := CommandStat{Calls: c.calls.Load(), Nanos: c.ns.Load(), Rejected: c.rejected.Load(), Failed: c.failed.Load()}
		for b := range cs.Hist {
			cs.Hist[b] = p.hist[i][b].Load()
		}
		if cs != (CommandStat{}) {
			old := st.CommandStats[sp.name]
			sum := CommandStat{Calls: old.Calls + cs.Calls, Nanos: old.Nanos + cs.Nanos,
				Rejected: old.Rejected + cs.Rejected, Failed: old.Failed + cs.Failed}
			for b := range sum.Hist {
				sum.Hist[b] = old.Hist[b] + cs.Hist[b]
			}
			st.CommandStats[sp.name] = sum
		}
	}
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
		CommandStats:  make(map[string]CommandStat),
	}
	s.loopsMu.Lock()
	loops := s.loops
	s.loopsMu.Unlock()
	for _, l := range loops {
		l.pub.fold(&st)
	}
	return st
}

// since returns st minus base: the counters accumulated after base was
// taken (CONFIG RESETSTAT). ConnsCurrent and the latency bounds are kept.
func (st Stats) since(base *Stats) Stats {
	d := st
	d.ConnsAccepted -= base.ConnsAccepted
	d.ConnsRejected -= base.ConnsRejected
	d.BytesIn -= base.BytesIn
	d.BytesOut -= base.BytesOut
	d.Allowed -= base.Allowed
	d.Denied -= base.Denied
	d.LeaseGranted -= base.LeaseGranted
	d.LeaseReturned -= base.LeaseReturned
	d.LatencySumNs -= base.LatencySumNs
	d.LatencyCount -= base.LatencyCount
	d.LatencyCounts = make([]int64, len(st.LatencyCounts))
	for i := range d.LatencyCounts {
		d.LatencyCounts[i] = st.LatencyCounts[i]
		if i < len(base.LatencyCounts) {
			d.LatencyCounts[i] -= base.LatencyCounts[i]
		}
	}
	d.Commands = subCounts(st.Commands, base.Commands)
	d.Errors = subCounts(st.Errors, base.Errors)
	d.CommandStats = make(map[string]CommandStat, len(st.CommandStats))
	for k, v := range st.CommandStats {
		b := base.CommandStats[k]
		dv := CommandStat{Calls: v.Calls - b.Calls, Nanos: v.Nanos - b.Nanos, Rejected: v.Rejected - b.Rejected, Failed: v.Failed - b.Failed}
		for k := range dv.Hist {
			dv.Hist[k] = v.Hist[k] - b.Hist[k]
		}
		v = dv
		if v != (CommandStat{}) {
			d.CommandStats[k] = v
		}
	}
	return d
}

// subCounts returns a - b for every key of a, leaving out zeros.
func subCounts(a, b map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(a))
	for k, v := range a {
		if v -= b[k]; v != 0 {
			out[k] = v
		}
	}
	return out
}

// sortedKeys returns m's keys in byte order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
