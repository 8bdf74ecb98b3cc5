package server

import (
	"strconv"
	"strings"

	"github.com/throttlekit/throttlekit-server/internal/latency"
)

// LATENCY: the latency monitor (internal/latency) and the per-command
// histograms of LATENCY HISTOGRAM.
//
// Events: "command" and "fast-command" (a command whose own duration
// reached latency-monitor-threshold; how commands are timed is explained
// in cmd_slowlog.go), and the events other parts report through
// Server.RecordLatency: "expire-cycle" (a sweep of expired keys),
// "table-growth" (a store shard moving to a larger index table) and
// "persist-flush" (a flush to the persistence backend); the program wires
// them (cmd/throttlekit-server).
//
// LATENCY HISTOGRAM reads the per-command buckets the loops keep next to
// INFO commandstats (stats.go): each call falls in the bucket of its share
// of its batch's time, exact for a batch of one command. The reply has
// Redis 7's shape: per command, "calls" and "histogram_usec", a map from
// each bucket's microsecond label to the cumulative count of calls up to
// it, listing only the buckets where the count grows.

func latencySubcommands() []cmdSpec {
	const g = "server"
	return []cmdSpec{
		{name: "latency|doctor", arity: 2, flags: flagsAdmin, run: (*loop).latencyDoctor,
			group: g, since: "2.8.13", summary: "Returns a human-readable latency analysis report.",
			help: []string{"DOCTOR", "    Return a report on the latency events sampled."}},
		{name: "latency|history", arity: 3, flags: flagsAdmin, run: (*loop).latencyHistory,
			group: g, since: "2.8.13", summary: "Returns timestamp-latency samples for an event.",
			args: []argDoc{{name: "event", typ: "string"}},
			help: []string{"HISTORY <event>", "    Return the [unix time, latency ms] samples of <event>, oldest first."}},
		{name: "latency|latest", arity: 2, flags: flagsAdmin, run: (*loop).latencyLatest,
			group: g, since: "2.8.13", summary: "Returns the latest latency samples for all events.",
			help: []string{"LATEST", "    Return each event's latest sample: event, unix time, latency ms, all-time max ms."}},
		{name: "latency|reset", arity: -2, flags: flagsAdmin, run: (*loop).latencyReset,
			group: g, since: "2.8.13", summary: "Resets the latency data for one or more events.",
			args: []argDoc{{name: "event", typ: "string", optional: true, multiple: true}},
			help: []string{"RESET [<event> ...]", "    Forget the samples of the events named, or of every event."}},
		{name: "latency|histogram", arity: -2, flags: flagsAdmin, run: (*loop).latencyHistogram,
			group: g, since: "7.0.0", complexity: "O(N) where N is the number of commands with latency information being retrieved.",
			summary: "Returns the cumulative distribution of latencies of a subset or all commands.",
			args:    []argDoc{{name: "command", typ: "string", optional: true, multiple: true}},
			help: []string{"HISTOGRAM [<command> ...]",
				"    Return the cumulative distribution of each command's latencies (all commands",
				"    that ran when none is named)."}},
		helpSub("latency", "2.8.13", g, 0),
	}
}

// LATENCY LATEST
func (l *loop) latencyLatest(_ *client, _ [][]byte, _ int64) result {
	events := l.srv.ops.lat.Events()
	l.out = appendArray(l.out, len(events))
	for _, e := range events {
		last := e.Samples[len(e.Samples)-1]
		l.out = appendArray(l.out, 4)
		l.out = appendBulkString(l.out, e.Name)
		l.out = appendInt(l.out, last.Time)
		l.out = appendInt(l.out, last.LatencyMs)
		l.out = appendInt(l.out, e.MaxMs)
	}
	return replied
}

// LATENCY HISTORY event
func (l *loop) latencyHistory(_ *client, args [][]byte, _ int64) result {
	e, _ := l.srv.ops.lat.History(string(args[2]))
	l.out = appendArray(l.out, len(e.Samples))
	for _, s := range e.Samples {
		l.out = appendArray(l.out, 2)
		l.out = appendInt(l.out, s.Time)
		l.out = appendInt(l.out, s.LatencyMs)
	}
	return replied
}

// LATENCY RESET [event ...]
func (l *loop) latencyReset(_ *client, args [][]byte, _ int64) result {
	names := make([]string, 0, len(args)-2)
	for _, a := range args[2:] {
		names = append(names, string(a))
	}
	if len(names) == 0 {
		l.out = appendInt(l.out, int64(l.srv.ops.lat.Reset()))
	} else {
		l.out = appendInt(l.out, int64(l.srv.ops.lat.Reset(names...)))
	}
	return replied
}

// LATENCY DOCTOR
func (l *loop) latencyDoctor(cl *client, _ [][]byte, _ int64) result {
	l.out = appendVerbatim(l.out, l.srv.ops.lat.Doctor(), cl.resp3)
	return replied
}

// LATENCY HISTOGRAM [command ...]: commands that never ran, and names that
// are not commands, are left out, as in Redis.
func (l *loop) latencyHistogram(cl *client, args [][]byte, _ int64) result {
	l.ctr.flush(&l.pub) // include this loop's batch so far
	sh := l.shared()
	sh.mu.Lock()
	st := l.srv.Stats().since(&sh.base)
	sh.mu.Unlock()
	var names []string
	if len(args) == 2 {
		for _, name := range sortedKeys(st.CommandStats) {
			if st.CommandStats[name].Calls > 0 {
				names = append(names, name)
			}
		}
	} else {
		seen := map[string]bool{}
		for _, a := range args[2:] {
			sp := lookupSpec(a)
			if sp == nil || seen[sp.name] || st.CommandStats[sp.name].Calls == 0 {
				continue
			}
			seen[sp.name] = true
			names = append(names, sp.name)
		}
	}
	l.out = appendMap(l.out, len(names), cl.resp3)
	for _, name := range names {
		cs := st.CommandStats[name]
		l.out = appendBulkString(l.out, name)
		l.out = appendMap(l.out, 2, cl.resp3)
		l.out = appendBulkString(l.out, "calls")
		l.out = appendInt(l.out, cs.Calls)
		l.out = appendBulkString(l.out, "histogram_usec")
		n := 0
		for _, c := range cs.Hist {
			if c > 0 {
				n++
			}
		}
		l.out = appendMap(l.out, n, cl.resp3)
		var cum int64
		for k, c := range cs.Hist {
			if c == 0 {
				continue
			}
			cum += c
			l.out = appendInt(l.out, latency.BucketLabelUs(k))
			l.out = appendInt(l.out, cum)
		}
	}
	return replied
}

// writeLatencyStats writes INFO latencystats as Redis 7 does, one line per
// command that ran: "latency_percentiles_usec_<command>:p50=..,p99=..,
// p99.9=..", each percentile the label (µs) of the histogram bucket it
// falls in. The section is not in INFO's default set here (Redis's has it):
// INFO latencystats, all or everything asks for it.
func writeLatencyStats(b *strings.Builder, st Stats) {
	for _, name := range sortedKeys(st.CommandStats) {
		cs := st.CommandStats[name]
		var total int64
		for _, c := range cs.Hist {
			total += c
		}
		if total == 0 {
			continue
		}
		b.WriteString("latency_percentiles_usec_" + name + ":")
		for i, q := range [...]struct {
			name    string
			per1000 int64
		}{{"p50", 500}, {"p99", 990}, {"p99.9", 999}} {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(q.name + "=" + strconv.FormatInt(percentileUs(&cs.Hist, total, q.per1000), 10) + ".000")
		}
		b.WriteString("\r\n")
	}
}

// percentileUs is the label (µs) of the bucket holding the per1000/1000
// quantile of the total calls counted in hist.
func percentileUs(hist *[latency.NumBuckets]int64, total, per1000 int64) int64 {
	want := (total*per1000 + 999) / 1000
	var cum int64
	for k, c := range hist {
		cum += c
		if cum >= want && c > 0 {
			return latency.BucketLabelUs(k)
		}
	}
	return latency.BucketLabelUs(latency.NumBuckets - 1)
}
