package server

import (
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/throttlekit/throttlekit-server/server/resp"
)

// The CLIENT subcommands. Names and library fields are written under
// Server.mu because CLIENT LIST on another loop reads them.

// replyMode is a connection's CLIENT REPLY setting.
type replyMode uint8

const (
	replyOn   replyMode = iota // every reply is sent
	replyOff                   // no reply is sent until CLIENT REPLY ON
	replySkip                  // the next command's reply is dropped
)

// clientIntro is a connection's introspection state: its CLIENT REPLY mode,
// whether it is a MONITOR, and its last command and protocol as CLIENT LIST
// shows them to other loops.
type clientIntro struct {
	reply    replyMode // loop-owned
	quiet    bool      // inside dispatchQuiet: dispatch must not re-enter it
	replySet bool      // the command being run was CLIENT REPLY

	// last is the last command's stat index plus one, shifted left once,
	// with the low bit set for RESP3; pub is its copy for other goroutines,
	// stored only when it changes, so a repeated command costs no atomic.
	last uint32
	pub  atomic.Uint32

	monitor bool         // under Server.mu: CLIENT LIST shows flags=O
	gone    atomic.Bool  // a monitor whose connection closed or overflowed
	pending atomic.Int64 // a monitor's bytes handed to AsyncWrite, not yet written
}

// noteCommand records the command a connection ran last, for CLIENT LIST.
func (ci *clientIntro) noteCommand(sp *cmdSpec, resp3 bool) {
	v := uint32(sp.stat+1) << 1
	if resp3 {
		v |= 1
	}
	if v != ci.last {
		ci.last = v
		ci.pub.Store(v)
	}
}

// CLIENT REPLY ON|OFF|SKIP. ON answers +OK; OFF and SKIP answer nothing.
// SKIP while OFF changes nothing, as in Redis.
func (l *loop) clientReply(cl *client, args [][]byte, _ int64) result {
	ci := &cl.intro
	switch {
	case equalFold(args[2], "on"):
		ci.reply, ci.replySet = replyOn, true
		l.out = appendOK(l.out)
	case equalFold(args[2], "off"):
		ci.reply, ci.replySet = replyOff, true
	case equalFold(args[2], "skip"):
		if ci.reply != replyOff {
			ci.reply, ci.replySet = replySkip, true
		}
	default:
		l.errSyntax()
		return failed
	}
	return replied
}

// CLIENT SETNAME name
func (l *loop) clientSetName(cl *client, args [][]byte, _ int64) result {
	if !nameOK(args[2]) {
		l.errBadName()
		return failed
	}
	l.setName(cl, string(args[2]))
	l.out = appendOK(l.out)
	return replied
}

// CLIENT GETNAME
func (l *loop) clientGetName(cl *client, _ [][]byte, _ int64) result {
	if cl.name == "" {
		l.out = appendNull(l.out, cl.resp3)
	} else {
		l.out = appendBulkString(l.out, cl.name)
	}
	return replied
}

// CLIENT ID
func (l *loop) clientID(cl *client, _ [][]byte, _ int64) result {
	l.out = appendInt(l.out, cl.id)
	return replied
}

// CLIENT SETINFO LIB-NAME|LIB-VER value
func (l *loop) clientSetInfo(cl *client, args [][]byte, _ int64) result {
	attr, val := args[2], args[3]
	name := equalFold(attr, "lib-name")
	if !name && !equalFold(attr, "lib-ver") {
		l.errQuoted("Unrecognized option ", attr, 128, "")
		return failed
	}
	if !nameOK(val) {
		l.errorReply("ERR", lowerASCII(attr)+" cannot contain spaces, newlines or special characters.")
		return failed
	}
	l.srv.mu.Lock()
	if name {
		cl.libName = string(val)
	} else {
		cl.libVer = string(val)
	}
	l.srv.mu.Unlock()
	l.out = appendOK(l.out)
	return replied
}

// CLIENT INFO: the calling connection's CLIENT LIST line, a verbatim
// string in RESP3.
func (l *loop) clientInfo(cl *client, args [][]byte, _ int64) result {
	var b strings.Builder
	l.srv.mu.Lock()
	l.writeClientLine(&b, cl, time.Unix(0, l.srv.now()), cl, "client|info", args)
	l.srv.mu.Unlock()
	l.out = appendVerbatim(l.out, b.String(), cl.resp3)
	return replied
}

// appendVerbatim writes text as Redis sends INFO and CLIENT LIST: a
// verbatim string of format txt in RESP3, a bulk string in RESP2.
func appendVerbatim(dst []byte, text string, resp3 bool) []byte {
	return resp.AppendVerbatimString(dst, "txt", text, resp3)
}

// CLIENT NO-EVICT ON|OFF and CLIENT NO-TOUCH ON|OFF: accepted, no effect.
func (l *loop) clientNoOp(_ *client, args [][]byte, _ int64) result {
	if !equalFold(args[2], "on") && !equalFold(args[2], "off") {
		l.errSyntax()
		return failed
	}
	l.out = appendOK(l.out)
	return replied
}

// clientType checks a TYPE argument of CLIENT LIST or CLIENT KILL. Every
// connection here is of type normal (a MONITOR too, as in Redis); the
// other types name nothing. On an unknown type it replies with Redis's
// error and returns ok == false.
func (l *loop) clientType(b []byte) (normal, ok bool) {
	switch t := lowerASCII(b); t {
	case "normal":
		return true, true
	case "master", "replica", "slave", "pubsub":
		return false, true
	default:
		l.errorReply("ERR", "Unknown client type '"+t+"'")
		return false, false
	}
}

// CLIENT LIST [TYPE normal|master|replica|pubsub | ID id [id ...]]: one
// line per connection, by id, a verbatim string in RESP3. As in Redis 7.0,
// TYPE and ID do not combine; ID 0 and unknown ids select nothing.
func (l *loop) clientList(cl *client, args [][]byte, _ int64) result {
	var ids map[int64]bool
	typeOK := true
	switch {
	case len(args) == 2:
	case len(args) == 4 && equalFold(args[2], "type"):
		normal, ok := l.clientType(args[3])
		if !ok {
			return failed
		}
		typeOK = normal
	case len(args) >= 4 && equalFold(args[2], "id"):
		ids = map[int64]bool{}
		for _, a := range args[3:] {
			n, ok := parseInt64(a)
			if !ok {
				l.errorReply("ERR", "Invalid client ID")
				return failed
			}
			ids[n] = true
		}
	default:
		l.errSyntax()
		return failed
	}
	var b strings.Builder
	now := time.Unix(0, l.srv.now())
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
			l.writeClientLine(&b, c, now, cl, "client|list", args)
		}
	}
	s.mu.Unlock()
	l.out = appendVerbatim(l.out, b.String(), cl.resp3)
	return replied
}

// CLIENT KILL ip:port, or CLIENT KILL <filter> <value> [...] with the
// filters ID, TYPE, ADDR, LADDR, USER and SKIPME (default yes). The first
// form answers +OK or "No such client"; the second the number of
// connections closed. A connection that closes itself gets its reply first.
func (l *loop) clientKill(cl *client, args [][]byte, _ int64) result {
	var (
		id                 int64
		addr, laddr        string
		byID, byType       bool
		byAddr, byLaddr    bool
		normal, skipMe, ok = true, true, true
	)
	old := len(args) == 3
	if old {
		byAddr, addr, skipMe = true, string(args[2]), false
	} else {
		if len(args)%2 != 0 {
			l.errSyntax()
			return failed
		}
		for i := 2; i < len(args); i += 2 {
			opt, v := args[i], args[i+1]
			switch {
			case equalFold(opt, "id"):
				if id, ok = parseInt64(v); !ok || id <= 0 {
					l.errorReply("ERR", "client-id should be greater than 0")
					return failed
				}
				byID = true
			case equalFold(opt, "type"):
				if normal, ok = l.clientType(v); !ok {
					return failed
				}
				byType = true
			case equalFold(opt, "addr"):
				byAddr, addr = true, string(v)
			case equalFold(opt, "laddr"):
				byLaddr, laddr = true, string(v)
			case equalFold(opt, "user"):
				if string(v) != "default" {
					l.errorReply("ERR", "No such user '"+string(v)+"'")
					return failed
				}
			case equalFold(opt, "skipme"):
				switch {
				case equalFold(v, "yes"):
					skipMe = true
				case equalFold(v, "no"):
					skipMe = false
				default:
					l.errSyntax()
					return failed
				}
			default:
				l.errSyntax()
				return failed
			}
		}
	}
	s := l.srv
	var victims []*client
	s.mu.Lock()
	for _, c := range s.clients {
		switch {
		case byID && c.id != id, byType && !normal, byAddr && c.addr != addr,
			byLaddr && c.laddr != laddr, skipMe && c == cl:
			continue
		}
		victims = append(victims, c)
	}
	s.mu.Unlock()
	self := false
	for _, c := range victims {
		if c == cl {
			self = true
		} else {
			_ = c.conn.Close() // safe from any goroutine; the loop of c closes it
		}
	}
	res := closeIf(self)
	switch {
	case !old:
		l.out = appendInt(l.out, int64(len(victims)))
	case len(victims) == 0:
		l.errorReply("ERR", "No such client")
		res |= failed
	default:
		l.out = appendOK(l.out)
	}
	return res
}

// writeClientLine writes one CLIENT LIST line, with Redis 7's fields in
// Redis's order (and lib-name, lib-ver last, as Redis 7.2 adds them). Call
// with s.mu held. self is the calling connection, running the command
// named cmd with args: its cmd field names that command and argv-mem
// counts its arguments. The query buffer and transaction fields (qbuf,
// qbuf-free, rbs, rbp, multi, multi-mem, flag x) are read for connections
// of the calling loop only, which no other goroutine touches meanwhile; for
// connections of other loops they show 0, -1 and N. Output buffers are not
// tracked per connection and show 0.
func (l *loop) writeClientLine(b *strings.Builder, c *client, now time.Time, self *client, cmd string, args [][]byte) {
	idle := (now.UnixNano() - c.lastActive.Load()) / int64(time.Second)
	v := c.intro.pub.Load()
	proto := 2 + v&1
	switch {
	case c == self:
		if self.resp3 {
			proto = 3
		} else {
			proto = 2
		}
	case v>>1 == 0:
		cmd = "NULL"
	default:
		cmd = statSpecs[v>>1-1].name
	}
	flags := "N"
	if c.intro.monitor {
		flags = "O"
	}
	var qbuf, qfree, argvMem, multiMem int
	multi := -1
	if c.loop == l {
		qbuf, qfree = len(c.qbuf), cap(c.qbuf)-len(c.qbuf)
		if m := c.multi; m != nil && m.multi {
			multi = len(m.argc)
			multiMem = cap(m.buf) + 8*cap(m.ends) + 4*cap(m.argc)
			flags = "x"
		}
	}
	if c == self {
		for _, a := range args {
			argvMem += len(a)
		}
	}
	totMem := int(unsafe.Sizeof(*c)) + qbuf + qfree + argvMem + multiMem + len(c.name) + len(c.libName) + len(c.libVer)
	w := func(k, v string) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(v)
		b.WriteByte(' ')
	}
	n := func(k string, v int64) { w(k, strconv.FormatInt(v, 10)) }
	n("id", c.id)
	w("addr", c.addr)
	w("laddr", c.laddr)
	n("fd", int64(c.fd))
	w("name", c.name)
	n("age", int64(now.Sub(c.since)/time.Second))
	n("idle", max(idle, 0))
	w("flags", flags)
	n("db", 0)
	n("sub", 0)
	n("psub", 0)
	n("ssub", 0)
	n("multi", int64(multi))
	n("qbuf", int64(qbuf))
	n("qbuf-free", int64(qfree))
	n("argv-mem", int64(argvMem))
	n("multi-mem", int64(multiMem))
	n("rbs", int64(qbuf+qfree))
	n("rbp", int64(qbuf))
	n("obl", 0)
	n("oll", 0)
	n("omem", 0)
	n("tot-mem", int64(totMem))
	w("events", "r")
	w("cmd", cmd)
	w("user", c.userName())
	n("redir", -1)
	n("resp", int64(proto))
	w("lib-name", c.libName)
	b.WriteString("lib-ver=")
	b.WriteString(c.libVer)
	b.WriteByte('\n')
}

// resetIntro returns cl's introspection state to a new connection's, as
// RESET does in Redis: replies on, and no longer a MONITOR.
func (l *loop) resetIntro(cl *client) {
	cl.intro.reply, cl.intro.replySet = replyOn, true
	s := l.srv
	s.mu.Lock()
	was := cl.intro.monitor
	cl.intro.monitor = false
	s.mu.Unlock()
	if was {
		cl.intro.gone.Store(true)
		l.shared().pruneMonitors()
		cl.intro.gone.Store(false)
	}
}
