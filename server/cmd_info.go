package server

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Server-wide introspection: INFO, CONFIG GET, DBSIZE and TIME.

// DBSIZE
func (l *loop) dbsize(*client, [][]byte, int64) result {
	l.out = appendInt(l.out, int64(l.srv.core.Len(l.sec())))
	return replied
}

// TIME: the batch's clock reading, as seconds and microseconds.
func (l *loop) timeCmd(_ *client, _ [][]byte, now int64) result {
	l.out = appendArray(l.out, 2)
	l.out = appendBulkString(l.out, strconv.FormatInt(now/1e9, 10))
	l.out = appendBulkString(l.out, strconv.FormatInt(now%1e9/1e3, 10))
	return replied
}

// CONFIG GET parameter [parameter ...]: the settings Config.ConfigGet
// reports for each glob pattern, each name once. Without a ConfigGet hook
// there are no settings to report and the reply is empty.
func (l *loop) configGet(cl *client, args [][]byte, _ int64) result {
	var pairs [][2]string
	if get := l.srv.cfg.ConfigGet; get != nil {
		seen := map[string]bool{}
		for _, p := range args[2:] {
			for _, kv := range get(string(p)) {
				if !seen[kv[0]] {
					seen[kv[0]] = true
					pairs = append(pairs, kv)
				}
			}
		}
	}
	l.out = appendMap(l.out, len(pairs), cl.resp3)
	for _, kv := range pairs {
		l.out = appendBulkString(l.out, kv[0])
		l.out = appendBulkString(l.out, kv[1])
	}
	return replied
}

// infoSections are INFO's sections in the order it writes them, each with
// whether INFO without arguments (or "default") includes it. "all" and
// "everything" name every section.
var infoSections = [...]struct {
	name    string
	deflt   bool
	heading string
}{
	{"server", true, "Server"},
	{"clients", true, "Clients"},
	{"memory", true, "Memory"},
	{"persistence", true, "Persistence"},
	{"stats", true, "Stats"},
	{"cpu", true, "CPU"},
	{"throttle", true, "Throttle"},
	{"grpc", true, "gRPC"}, // cmd_policy.go: writeGRPCInfo
	{"upstream", false, "Upstream"},
	{"commandstats", false, "Commandstats"},
	{"errorstats", true, "Errorstats"},
	{"keyspace", true, "Keyspace"},
	{"latencystats", false, "Latencystats"}, // cmd_latency.go
}

// INFO [section ...]: the sections named (any case), "default" for the
// default ones, "all" or "everything" for every one; unknown names add
// nothing. Each section is "# Heading" and its "key:value" lines, every
// line ending in CRLF, and an empty line separates sections, as Redis
// writes them. A verbatim string
// in RESP3, a bulk string in RESP2. The counters are those since the
// server started or since the last CONFIG RESETSTAT.
func (l *loop) info(cl *client, args [][]byte, now int64) result {
	var want [len(infoSections)]bool
	if len(args) == 1 {
		args = [][]byte{nil, []byte("default")}
	}
	for _, a := range args[1:] {
		for i, sec := range infoSections {
			switch {
			case equalFold(a, "all"), equalFold(a, "everything"):
				want[i] = true
			case equalFold(a, "default"):
				want[i] = want[i] || sec.deflt
			case equalFold(a, sec.name):
				want[i] = true
			}
		}
	}
	var b strings.Builder
	s := l.srv
	l.ctr.flush(&l.pub) // include this loop's batch so far
	sh := l.shared()
	sh.mu.Lock()
	st := s.Stats().since(&sh.base)
	baseExpired, baseEvicted := sh.baseExpired, sh.baseEvicted
	sh.mu.Unlock()
	for i, sec := range infoSections {
		if !want[i] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString("# ")
		b.WriteString(sec.heading)
		b.WriteString("\r\n")
		s.writeInfoSection(&b, sec.name, st, now, baseExpired, baseEvicted)
	}
	l.out = appendVerbatim(l.out, b.String(), cl.resp3)
	return replied
}

// CONFIG RESETSTAT: INFO's counters (stats, throttle, commandstats,
// errorstats) start again from zero. Server.Stats, which telemetry reads,
// stays cumulative since the server started.
func (l *loop) configResetStat(*client, [][]byte, int64) result {
	l.ctr.flush(&l.pub)
	sh := l.shared()
	st := l.srv.Stats()
	ss := l.srv.core.Stats()
	sh.mu.Lock()
	sh.base = st
	sh.baseExpired, sh.baseEvicted = int64(ss.Expired), int64(ss.Evicted)
	sh.mu.Unlock()
	l.out = appendOK(l.out)
	return replied
}

// cpuSeconds formats a rusage time as Redis does: seconds and microseconds.
func cpuSeconds(tv unix.Timeval) string {
	return fmt.Sprintf("%d.%06d", tv.Sec, tv.Usec)
}

func (s *Server) writeInfoSection(b *strings.Builder, sec string, st Stats, now int64, baseExpired, baseEvicted int64) {
	kv := func(k string, v any) { fmt.Fprintf(b, "%s:%v\r\n", k, v) }
	switch sec {
	case "server":
		kv("redis_version", compatVersion)
		kv("throttlekit_version", s.cfg.Version)
		kv("redis_mode", "standalone")
		kv("os", runtime.GOOS+" "+runtime.GOARCH)
		kv("arch_bits", strconv.Itoa(strconv.IntSize))
		kv("multiplexing_api", "epoll")
		kv("go_version", runtime.Version())
		kv("process_id", os.Getpid())
		port := ""
		if a := s.Addr(); a != nil {
			if ta, ok := a.(*net.TCPAddr); ok {
				port = strconv.Itoa(ta.Port)
			}
		}
		kv("tcp_port", port)
		kv("server_time_usec", now/1000)
		up := int64(time.Since(s.start) / time.Second)
		kv("uptime_in_seconds", up)
		kv("uptime_in_days", up/86400)
		kv("event_loops", s.cfg.Loops)
	case "clients":
		kv("connected_clients", st.ConnsCurrent)
		kv("maxclients", s.cfg.MaxClients)
		kv("blocked_clients", 0)
	case "memory":
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		// Large key index tables are mapped outside the Go heap.
		off := uint64(s.core.OffHeapBytes())
		kv("used_memory", ms.HeapAlloc+off)
		kv("used_memory_human", humanBytes(ms.HeapAlloc+off))
		kv("used_memory_rss", ms.Sys+off)
		kv("used_memory_rss_human", humanBytes(ms.Sys+off))
		kv("used_memory_offheap", off)
		kv("maxmemory", s.cfg.MaxMemory)
		kv("maxmemory_human", humanBytes(uint64(max(s.cfg.MaxMemory, 0))))
		// The store makes room for a new key by evicting any key its CLOCK
		// hand picks, an approximation of LRU over all keys: Redis's
		// allkeys-lru. (Admission records are never evicted; they have a
		// store of their own, reported in the throttle section.)
		kv("maxmemory_policy", "allkeys-lru")
		kv("mem_allocator", "go")
	case "grpc":
		s.writeGRPCInfo(kv) // cmd_policy.go
	case "persistence":
		kv("loading", s.loadingInfo()) // durability.go
		kv("async_loading", 0)
		kv("rdb_changes_since_last_save", 0)
		kv("aof_enabled", 0)
		s.writeDurabilityInfo(kv) // backend, mode, lag...: durability.go
	case "stats":
		var cmds, errs int64
		for _, v := range st.Commands {
			cmds += v
		}
		for _, v := range st.Errors {
			errs += v
		}
		ss := s.core.Stats()
		kv("total_connections_received", st.ConnsAccepted)
		kv("total_commands_processed", cmds)
		kv("total_net_input_bytes", st.BytesIn)
		kv("total_net_output_bytes", st.BytesOut)
		kv("rejected_connections", st.ConnsRejected)
		kv("expired_keys", int64(ss.Expired)-baseExpired)
		kv("evicted_keys", int64(ss.Evicted)-baseEvicted)
		kv("total_error_replies", errs)
	case "cpu":
		// The process's time, its children's (none), and the time of the
		// OS thread answering INFO: an event loop's, as Redis reports its
		// main thread's.
		var self, children, thread unix.Rusage
		_ = unix.Getrusage(unix.RUSAGE_SELF, &self)
		_ = unix.Getrusage(unix.RUSAGE_CHILDREN, &children)
		_ = unix.Getrusage(unix.RUSAGE_THREAD, &thread)
		kv("used_cpu_sys", cpuSeconds(self.Stime))
		kv("used_cpu_user", cpuSeconds(self.Utime))
		kv("used_cpu_sys_children", cpuSeconds(children.Stime))
		kv("used_cpu_user_children", cpuSeconds(children.Utime))
		kv("used_cpu_sys_main_thread", cpuSeconds(thread.Stime))
		kv("used_cpu_user_main_thread", cpuSeconds(thread.Utime))
	case "throttle":
		kv("throttle_allowed", st.Allowed)
		kv("throttle_denied", st.Denied)
		kv("lease_credits_granted", st.LeaseGranted)
		kv("lease_credits_returned", st.LeaseReturned)
		kv("keys", s.core.Len(nil))
		adm := s.core.RecordStats()
		kv("admission_records", adm.Keys)
		kv("admission_records_bytes", adm.Bytes)
		kv("admission_maxrecords", s.cfg.AdmissionMaxRecords)
		kv("admission_maxmemory", s.cfg.AdmissionMaxMemory)
		var mean int64
		if st.LatencyCount > 0 {
			mean = st.LatencySumNs / st.LatencyCount
		}
		kv("command_latency_mean_ns", mean)
	case "upstream":
		kv("upstream_enabled", boolInt(s.upstream))
		if f := s.cfg.Upstream.Info; f != nil {
			for _, p := range f() {
				kv(p[0], p[1])
			}
		}
	case "commandstats":
		// In command table order, subcommands after their container.
		for _, sp := range statSpecs {
			c, ok := st.CommandStats[sp.name]
			if !ok {
				continue
			}
			usec := c.Nanos / 1000
			perCall := 0.0
			if c.Calls > 0 {
				perCall = float64(c.Nanos) / 1000 / float64(c.Calls)
			}
			fmt.Fprintf(b, "cmdstat_%s:calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d\r\n",
				sp.name, c.Calls, usec, perCall, c.Rejected, c.Failed)
		}
	case "errorstats":
		// By error code, in byte order; protocol errors read "-ERR
		// Protocol error: ...", so they count as ERR, as in Redis.
		counts := make(map[string]int64, len(st.Errors))
		for k, v := range st.Errors {
			if k == errKindNames[errKindProtocol] {
				k = "ERR"
			}
			counts[k] += v
		}
		for _, k := range sortedKeys(counts) {
			if counts[k] != 0 {
				fmt.Fprintf(b, "errorstat_%s:count=%d\r\n", k, counts[k])
			}
		}
	case "keyspace":
		if n := s.core.Len(nil); n > 0 {
			fmt.Fprintf(b, "db0:keys=%d,expires=%d,avg_ttl=0\r\n", n, n)
		}
	case "latencystats":
		writeLatencyStats(b, st)
	}
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<60:
		return fmt.Sprintf("%dB", n) // as Redis: beyond its largest unit
	case n >= 1<<50:
		return fmt.Sprintf("%.2fP", float64(n)/(1<<50))
	case n >= 1<<40:
		return fmt.Sprintf("%.2fT", float64(n)/(1<<40))
	case n >= 1<<30:
		return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
