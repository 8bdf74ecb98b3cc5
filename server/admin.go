package server

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// compatVersion is the Redis version whose behaviour the handshake and admin
// commands follow; clients read it from INFO and HELLO.
const compatVersion = "7.2.0"

// PING [message]
func (l *loop) ping(args [][]byte) {
	switch len(args) {
	case 1:
		l.out = append(l.out, "+PONG\r\n"...)
	case 2:
		l.out = appendBulk(l.out, args[1])
	default:
		l.errArity("ping")
	}
}

// HELLO [protover [AUTH username password] [SETNAME clientname]]
func (l *loop) hello(cl *client, args [][]byte) {
	proto := 0
	if len(args) >= 2 {
		v, ok := parseInt64(args[1])
		if !ok {
			l.errorReply("ERR", "Protocol version is not an integer or out of range")
			return
		}
		if v != 2 && v != 3 {
			l.errorReply("NOPROTO", "unsupported protocol version")
			return
		}
		proto = int(v)
	}
	var user, pass, name []byte
	hasAuth, hasName := false, false
	for i := 2; i < len(args); i++ {
		more := len(args) - i - 1
		switch {
		case equalFold(args[i], "auth") && more >= 2:
			user, pass, hasAuth = args[i+1], args[i+2], true
			i += 2
		case equalFold(args[i], "setname") && more >= 1:
			name, hasName = args[i+1], true
			i++
		default:
			l.out = append(l.out, "-ERR Syntax error in HELLO option '"...)
			l.out = appendSanitizedBytes(l.out, args[i], 128)
			l.out = append(l.out, "'\r\n"...)
			l.ctr.errs[errKindERR]++
			return
		}
	}
	if hasAuth {
		if !l.checkPassword(user, pass) {
			l.errorReply("WRONGPASS", "invalid username-password pair or user is disabled.")
			return
		}
		cl.authed = true
	}
	if !cl.authed {
		l.errorReply("NOAUTH", "HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return
	}
	if hasName {
		if !validName(name) {
			l.errorReply("ERR", "Client names cannot contain spaces, newlines or special characters.")
			return
		}
		l.setName(cl, string(name))
	}
	if proto != 0 {
		cl.resp3 = proto == 3
	}
	r3 := cl.resp3
	l.out = appendMap(l.out, 7, r3)
	l.out = appendBulkString(l.out, "server")
	l.out = appendBulkString(l.out, "redis")
	l.out = appendBulkString(l.out, "version")
	l.out = appendBulkString(l.out, compatVersion)
	l.out = appendBulkString(l.out, "proto")
	if r3 {
		l.out = appendInt(l.out, 3)
	} else {
		l.out = appendInt(l.out, 2)
	}
	l.out = appendBulkString(l.out, "id")
	l.out = appendInt(l.out, cl.id)
	l.out = appendBulkString(l.out, "mode")
	l.out = appendBulkString(l.out, "standalone")
	l.out = appendBulkString(l.out, "role")
	l.out = appendBulkString(l.out, "master")
	l.out = appendBulkString(l.out, "modules")
	l.out = appendArray(l.out, 0)
}

// checkPassword checks user/pass against the default user.
func (l *loop) checkPassword(user, pass []byte) bool {
	if string(user) != "default" {
		return false
	}
	want := l.srv.cfg.RequirePass
	return want == "" || string(pass) == want
}

// AUTH [username] password
func (l *loop) auth(cl *client, args [][]byte) {
	if len(args) > 3 {
		l.errSyntax()
		return
	}
	if len(args) == 2 {
		if l.srv.cfg.RequirePass == "" {
			l.errorReply("ERR", "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?")
			return
		}
		if string(args[1]) != l.srv.cfg.RequirePass {
			l.errorReply("WRONGPASS", "invalid username-password pair or user is disabled.")
			return
		}
	} else if !l.checkPassword(args[1], args[2]) {
		l.errorReply("WRONGPASS", "invalid username-password pair or user is disabled.")
		return
	}
	cl.authed = true
	l.out = appendOK(l.out)
}

// SELECT index: only database 0 exists.
func (l *loop) selectDB(args [][]byte) {
	n, ok := parseInt64(args[1])
	if !ok || n < math32Min || n > math32Max {
		l.errNotInt()
		return
	}
	if n != 0 {
		l.errorReply("ERR", "DB index is out of range")
		return
	}
	l.out = appendOK(l.out)
}

const (
	math32Min = -1 << 31
	math32Max = 1<<31 - 1
)

// validName reports whether a client name has no spaces or special bytes.
func validName(b []byte) bool {
	for _, c := range b {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

func (l *loop) setName(cl *client, name string) {
	l.srv.mu.Lock()
	cl.name = name
	l.srv.mu.Unlock()
}

// CLIENT subcommand ...
func (l *loop) clientCmd(cl *client, args [][]byte) {
	sub := args[1]
	switch {
	case equalFold(sub, "setname"):
		if len(args) != 3 {
			l.errArity("client|setname")
			return
		}
		if !validName(args[2]) {
			l.errorReply("ERR", "Client names cannot contain spaces, newlines or special characters.")
			return
		}
		l.setName(cl, string(args[2]))
		l.out = appendOK(l.out)
	case equalFold(sub, "getname"):
		if len(args) != 2 {
			l.errArity("client|getname")
			return
		}
		if cl.name == "" {
			l.out = appendNull(l.out, cl.resp3)
		} else {
			l.out = appendBulkString(l.out, cl.name)
		}
	case equalFold(sub, "id"):
		if len(args) != 2 {
			l.errArity("client|id")
			return
		}
		l.out = appendInt(l.out, cl.id)
	case equalFold(sub, "setinfo"):
		if len(args) != 4 {
			l.errArity("client|setinfo")
			return
		}
		attr, val := args[2], args[3]
		switch {
		case equalFold(attr, "lib-name"), equalFold(attr, "lib-ver"):
			for _, c := range val {
				if c < '!' || c > '~' {
					l.errorReply("ERR", strings.ToLower(string(attr))+" cannot contain spaces, newlines or special characters.")
					return
				}
			}
			l.srv.mu.Lock()
			if equalFold(attr, "lib-name") {
				cl.libName = string(val)
			} else {
				cl.libVer = string(val)
			}
			l.srv.mu.Unlock()
			l.out = appendOK(l.out)
		default:
			l.out = append(l.out, "-ERR Unrecognized option '"...)
			l.out = appendSanitizedBytes(l.out, attr, 128)
			l.out = append(l.out, "'\r\n"...)
			l.ctr.errs[errKindERR]++
		}
	case equalFold(sub, "info"):
		if len(args) != 2 {
			l.errArity("client|info")
			return
		}
		l.srv.mu.Lock()
		line := l.srv.clientLine(cl, time.Now())
		l.srv.mu.Unlock()
		l.out = appendBulkString(l.out, line+"\n")
	case equalFold(sub, "list"):
		l.clientList(cl, args)
	case equalFold(sub, "no-evict"), equalFold(sub, "no-touch"):
		if len(args) != 3 || !(equalFold(args[2], "on") || equalFold(args[2], "off")) {
			l.errSyntax()
			return
		}
		l.out = appendOK(l.out)
	case equalFold(sub, "help"):
		l.help(
			"CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"GETNAME", "    Return the name of the current connection.",
			"ID", "    Return the ID of the current connection.",
			"INFO", "    Return information about the current client connection.",
			"LIST [ID <id> [<id> ...]]", "    Return information about client connections.",
			"SETINFO <LIB-NAME|LIB-VER> <value>", "    Set library name or version of the current connection.",
			"SETNAME <name>", "    Assign the name <name> to the current connection.",
			"HELP", "    Print this help.",
		)
	default:
		l.errUnknownSub("client", sub)
	}
}

// help writes a HELP reply: an array of status lines, as Redis sends it.
func (l *loop) help(lines ...string) {
	l.out = appendArray(l.out, len(lines))
	for _, s := range lines {
		l.out = appendSimple(l.out, s)
	}
}

// clientList writes CLIENT LIST [ID id ...] [TYPE normal].
func (l *loop) clientList(cl *client, args [][]byte) {
	var ids map[int64]bool
	typeOK := true
	for i := 2; i < len(args); i++ {
		switch {
		case equalFold(args[i], "id") && i+1 < len(args):
			ids = map[int64]bool{}
			for i++; i < len(args); i++ {
				n, ok := parseInt64(args[i])
				if !ok || n <= 0 {
					l.errorReply("ERR", "Invalid client ID")
					return
				}
				ids[n] = true
			}
		case equalFold(args[i], "type") && i+1 < len(args):
			t := strings.ToLower(string(args[i+1]))
			switch t {
			case "normal":
			case "master", "replica", "slave", "pubsub":
				typeOK = false
			default:
				l.errorReply("ERR", "Unknown client type '"+t+"'")
				return
			}
			i++
		default:
			l.errSyntax()
			return
		}
	}
	var b strings.Builder
	now := time.Now()
	s := l.srv
	s.mu.Lock()
	list := make([]*client, 0, len(s.clients))
	for _, c := range s.clients {
		if ids == nil || ids[c.id] {
			list = append(list, c)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].id < list[j].id })
	if typeOK {
		for _, c := range list {
			b.WriteString(s.clientLine(c, now))
			b.WriteByte('\n')
		}
	}
	s.mu.Unlock()
	l.out = appendBulkString(l.out, b.String())
}

// clientLine formats one CLIENT LIST line. Call with s.mu held. Fields other
// than name and lib-* are either immutable or written by the client's own loop;
// resp and cmd are read racily only for the calling client's own loop.
func (s *Server) clientLine(c *client, now time.Time) string {
	idle := (now.UnixNano() - c.lastActive.Load()) / int64(time.Second)
	return fmt.Sprintf("id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=%d flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 watch=0 user=default lib-name=%s lib-ver=%s",
		c.id, c.addr, c.laddr, c.fd, c.name, int64(now.Sub(c.since)/time.Second), max(idle, 0), c.libName, c.libVer)
}

// COMMAND [COUNT | INFO [name ...] | DOCS [name ...] | LIST]
func (l *loop) commandCmd(cl *client, args [][]byte) {
	if len(args) == 1 {
		l.out = appendArray(l.out, int(numCmds))
		for i := range commandTable {
			l.commandInfo(cl, &commandTable[i])
		}
		return
	}
	sub := args[1]
	switch {
	case equalFold(sub, "count"):
		if len(args) != 2 {
			l.errArity("command|count")
			return
		}
		l.out = appendInt(l.out, int64(numCmds))
	case equalFold(sub, "list"):
		l.out = appendArray(l.out, int(numCmds))
		for i := range commandTable {
			l.out = appendBulkString(l.out, commandTable[i].name)
		}
	case equalFold(sub, "info"):
		if len(args) == 2 {
			l.out = appendArray(l.out, int(numCmds))
			for i := range commandTable {
				l.commandInfo(cl, &commandTable[i])
			}
			return
		}
		l.out = appendArray(l.out, len(args)-2)
		for _, name := range args[2:] {
			if id, ok := lookup(name); ok {
				l.commandInfo(cl, &commandTable[id])
			} else {
				l.out = appendNullArray(l.out, cl.resp3)
			}
		}
	case equalFold(sub, "docs"):
		var specs []*cmdSpec
		if len(args) == 2 {
			for i := range commandTable {
				specs = append(specs, &commandTable[i])
			}
		} else {
			for _, name := range args[2:] {
				if id, ok := lookup(name); ok {
					specs = append(specs, &commandTable[id])
				}
			}
		}
		l.out = appendMap(l.out, len(specs), cl.resp3)
		for _, sp := range specs {
			l.out = appendBulkString(l.out, sp.name)
			l.commandDoc(cl, sp)
		}
	case equalFold(sub, "help"):
		l.help(
			"COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"(no subcommand)", "    Return details about all commands.",
			"COUNT", "    Return the total number of commands in this server.",
			"LIST", "    Return a list of all commands in this server.",
			"INFO [<command-name> ...]", "    Return details about multiple commands.",
			"DOCS [<command-name> ...]", "    Return documentation details about multiple commands.",
			"HELP", "    Print this help.",
		)
	default:
		l.errUnknownSub("command", sub)
	}
}

// commandInfo writes one COMMAND INFO entry in Redis 7's ten-field form.
func (l *loop) commandInfo(cl *client, sp *cmdSpec) {
	l.out = appendArray(l.out, 10)
	l.out = appendBulkString(l.out, sp.name)
	l.out = appendInt(l.out, int64(sp.arity))
	l.out = appendArray(l.out, len(sp.flags)) // a set in Redis; an array reads the same in both protocols
	for _, f := range sp.flags {
		l.out = appendSimple(l.out, f)
	}
	l.out = appendInt(l.out, int64(sp.firstKey))
	l.out = appendInt(l.out, int64(sp.lastKey))
	l.out = appendInt(l.out, int64(sp.step))
	l.out = appendArray(l.out, 0) // ACL categories
	l.out = appendArray(l.out, 0) // tips
	l.out = appendArray(l.out, 0) // key specs
	l.out = appendArray(l.out, 0) // subcommands
}

// commandDoc writes one COMMAND DOCS entry: summary, since, group, complexity
// and arguments.
func (l *loop) commandDoc(cl *client, sp *cmdSpec) {
	r3 := cl.resp3
	n := 4
	if len(sp.args) > 0 {
		n++
	}
	l.out = appendMap(l.out, n, r3)
	l.out = appendBulkString(l.out, "summary")
	l.out = appendBulkString(l.out, sp.summary)
	l.out = appendBulkString(l.out, "since")
	l.out = appendBulkString(l.out, sp.since)
	l.out = appendBulkString(l.out, "group")
	l.out = appendBulkString(l.out, sp.group)
	l.out = appendBulkString(l.out, "complexity")
	l.out = appendBulkString(l.out, "O(1)")
	if len(sp.args) == 0 {
		return
	}
	l.out = appendBulkString(l.out, "arguments")
	l.argDocs(sp.args, r3)
}

// argDocs writes the "arguments" array of COMMAND DOCS.
func (l *loop) argDocs(args []argDoc, r3 bool) {
	l.out = appendArray(l.out, len(args))
	for _, a := range args {
		m := 3
		if a.token != "" {
			m++
		}
		var flags []string
		if a.optional {
			flags = append(flags, "optional")
		}
		if a.multiple {
			flags = append(flags, "multiple")
		}
		if len(flags) > 0 {
			m++
		}
		if len(a.sub) > 0 {
			m++
		}
		l.out = appendMap(l.out, m, r3)
		l.out = appendBulkString(l.out, "name")
		l.out = appendBulkString(l.out, a.name)
		l.out = appendBulkString(l.out, "type")
		l.out = appendBulkString(l.out, a.typ)
		l.out = appendBulkString(l.out, "display_text")
		l.out = appendBulkString(l.out, a.name)
		if a.token != "" {
			l.out = appendBulkString(l.out, "token")
			l.out = appendBulkString(l.out, a.token)
		}
		if len(flags) > 0 {
			l.out = appendBulkString(l.out, "flags")
			l.out = appendArray(l.out, len(flags))
			for _, f := range flags {
				l.out = appendSimple(l.out, f)
			}
		}
		if len(a.sub) > 0 {
			l.out = appendBulkString(l.out, "arguments")
			l.argDocs(a.sub, r3)
		}
	}
}

// TIME
func (l *loop) timeCmd(now int64) {
	l.out = appendArray(l.out, 2)
	l.out = appendBulkString(l.out, strconv.FormatInt(now/1e9, 10))
	l.out = appendBulkString(l.out, strconv.FormatInt(now%1e9/1e3, 10))
}

// RESET: back to RESP2, no name, unauthenticated if a password is set.
func (l *loop) reset(cl *client) {
	cl.resp3 = false
	l.srv.mu.Lock()
	cl.name, cl.libName, cl.libVer = "", "", ""
	l.srv.mu.Unlock()
	cl.authed = l.srv.cfg.RequirePass == ""
	l.out = append(l.out, "+RESET\r\n"...)
}

// CONFIG GET parameter [parameter ...]
func (l *loop) config(cl *client, args [][]byte) {
	sub := args[1]
	switch {
	case equalFold(sub, "get"):
		if len(args) < 3 {
			l.errArity("config|get")
			return
		}
		seen := map[string]bool{}
		var pairs [][2]string
		for _, p := range args[2:] {
			for _, kv := range l.srv.configGet(string(p)) {
				if !seen[kv[0]] {
					seen[kv[0]] = true
					pairs = append(pairs, kv)
				}
			}
		}
		l.out = appendMap(l.out, len(pairs), cl.resp3)
		for _, kv := range pairs {
			l.out = appendBulkString(l.out, kv[0])
			l.out = appendBulkString(l.out, kv[1])
		}
	case equalFold(sub, "help"):
		lines := []string{
			"CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
			"HELP", "    Print this help.",
		}
		l.out = appendArray(l.out, len(lines))
		for _, s := range lines {
			l.out = appendSimple(l.out, s)
		}
	default:
		l.errUnknownSub("config", sub)
	}
}

// configGet answers CONFIG GET from Config.ConfigGet, or from the server's
// own settings when that is not set.
func (s *Server) configGet(pattern string) [][2]string {
	if s.cfg.ConfigGet != nil {
		return s.cfg.ConfigGet(pattern)
	}
	all := [][2]string{
		{"maxclients", strconv.Itoa(s.cfg.MaxClients)},
		{"proto-max-bulk-len", strconv.FormatInt(s.cfg.ProtoMaxBulkLen, 10)},
		{"timeout", strconv.FormatInt(int64(s.cfg.IdleTimeout/time.Second), 10)},
		{"databases", "1"},
		{"save", ""},
		{"appendonly", "no"},
	}
	var out [][2]string
	for _, kv := range all {
		if globMatch(strings.ToLower(pattern), kv[0]) {
			out = append(out, kv)
		}
	}
	return out
}

// globMatch matches s against a pattern with * and ? (no classes).
func globMatch(p, s string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for i := 0; i <= len(s); i++ {
				if globMatch(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
		default:
			if len(s) == 0 || s[0] != p[0] {
				return false
			}
		}
		p, s = p[1:], s[1:]
	}
	return len(s) == 0
}

// INFO [section ...]
func (l *loop) info(cl *client, args [][]byte, now int64) {
	want := map[string]bool{}
	all := len(args) == 1
	for _, a := range args[1:] {
		s := strings.ToLower(string(a))
		if s == "all" || s == "everything" || s == "default" {
			all = true
		}
		want[s] = true
	}
	sections := []string{"server", "clients", "memory", "persistence", "stats", "throttle", "keyspace"}
	var b strings.Builder
	s := l.srv
	l.ctr.flush(&l.pub) // include this loop's batch so far
	st := s.Stats()
	for _, sec := range sections {
		if !all && !want[sec] {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\r\n")
		}
		s.writeInfoSection(&b, sec, st, now)
	}
	l.out = appendBulkString(l.out, b.String())
}

func (s *Server) writeInfoSection(b *strings.Builder, sec string, st Stats, now int64) {
	kv := func(k string, v any) { fmt.Fprintf(b, "%s:%v\r\n", k, v) }
	switch sec {
	case "server":
		b.WriteString("# Server\r\n")
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
		b.WriteString("# Clients\r\n")
		kv("connected_clients", st.ConnsCurrent)
		kv("maxclients", s.cfg.MaxClients)
		kv("blocked_clients", 0)
	case "memory":
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		// Large key index tables are mapped outside the Go heap.
		off := uint64(s.store.OffHeapBytes())
		b.WriteString("# Memory\r\n")
		kv("used_memory", ms.HeapAlloc+off)
		kv("used_memory_human", humanBytes(ms.HeapAlloc+off))
		kv("used_memory_rss", ms.Sys+off)
		kv("used_memory_rss_human", humanBytes(ms.Sys+off))
		kv("used_memory_offheap", off)
		kv("maxmemory", 0)
		kv("mem_allocator", "go")
	case "persistence":
		b.WriteString("# Persistence\r\n")
		kv("loading", 0)
		kv("async_loading", 0)
		kv("rdb_changes_since_last_save", 0)
		kv("aof_enabled", 0)
	case "stats":
		var cmds, errs int64
		for _, v := range st.Commands {
			cmds += v
		}
		for _, v := range st.Errors {
			errs += v
		}
		ss := s.store.Stats()
		b.WriteString("# Stats\r\n")
		kv("total_connections_received", st.ConnsAccepted)
		kv("total_commands_processed", cmds)
		kv("total_net_input_bytes", st.BytesIn)
		kv("total_net_output_bytes", st.BytesOut)
		kv("rejected_connections", st.ConnsRejected)
		kv("expired_keys", ss.Expired)
		kv("evicted_keys", ss.Evicted)
		kv("total_error_replies", errs)
	case "throttle":
		b.WriteString("# Throttle\r\n")
		kv("throttle_allowed", st.Allowed)
		kv("throttle_denied", st.Denied)
		kv("lease_credits_granted", st.LeaseGranted)
		kv("lease_credits_returned", st.LeaseReturned)
		kv("keys", s.store.Len())
		var mean int64
		if st.LatencyCount > 0 {
			mean = st.LatencySumNs / st.LatencyCount
		}
		kv("command_latency_mean_ns", mean)
	case "keyspace":
		b.WriteString("# Keyspace\r\n")
		if n := s.store.Len(); n > 0 {
			fmt.Fprintf(b, "db0:keys=%d,expires=%d,avg_ttl=0\r\n", n, n)
		}
	}
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2fG", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2fM", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.2fK", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
