package server

import "strings"

// cmdID indexes commandTable.
type cmdID uint8

// Command identifiers, in commandTable order.
const (
	cmdThrottleCheck cmdID = iota
	cmdThrottlePeek
	cmdThrottleReset
	cmdThrottleLease
	cmdThrottleReturn
	cmdCLThrottle
	cmdPing
	cmdEcho
	cmdHello
	cmdAuth
	cmdSelect
	cmdClient
	cmdCommand
	cmdInfo
	cmdDBSize
	cmdTime
	cmdQuit
	cmdReset
	cmdConfig
	numCmds
)

// cmdSpec describes a command for dispatch, COMMAND and COMMAND DOCS.
type cmdSpec struct {
	name     string // lower case
	arity    int    // as Redis: n = exactly n words, -n = at least n
	flags    []string
	firstKey int
	lastKey  int
	step     int
	noAuth   bool // allowed before authentication
	group    string
	since    string
	summary  string
	args     []argDoc // for COMMAND DOCS
}

// argDoc is one argument of a command as COMMAND DOCS reports it.
type argDoc struct {
	name     string
	typ      string // "key", "integer", "string", "pure-token", "block", "oneof"
	token    string // for pure-token or options with a leading keyword
	optional bool
	multiple bool
	sub      []argDoc // arguments of a block
}

var commandTable = [numCmds]cmdSpec{
	cmdThrottleCheck: {name: "throttle.check", arity: -4, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		group: "throttle", since: "1.0.0", summary: "Admits or denies one request (or COST units) against a key's rate limit.",
		args: []argDoc{{name: "key", typ: "key"}, {name: "limit", typ: "integer"}, {name: "period", typ: "string"},
			{name: "algo", typ: "string", token: "ALGO", optional: true}, {name: "burst", typ: "integer", token: "BURST", optional: true},
			{name: "cost", typ: "integer", token: "COST", optional: true}}},
	cmdThrottlePeek: {name: "throttle.peek", arity: -4, flags: []string{"readonly", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		group: "throttle", since: "1.0.0", summary: "Reports a key's rate-limit state without consuming anything.",
		args: []argDoc{{name: "key", typ: "key"}, {name: "limit", typ: "integer"}, {name: "period", typ: "string"},
			{name: "algo", typ: "string", token: "ALGO", optional: true}, {name: "burst", typ: "integer", token: "BURST", optional: true}}},
	cmdThrottleReset: {name: "throttle.reset", arity: -2, flags: []string{"write", "fast"}, firstKey: 1, lastKey: -1, step: 1,
		group: "throttle", since: "1.0.0", summary: "Forgets the state of keys; returns how many held state.",
		args: []argDoc{{name: "key", typ: "key", multiple: true}}},
	cmdThrottleLease: {name: "throttle.lease", arity: 6, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		group: "throttle", since: "1.0.0", summary: "Grants up to BATCH credits from a key's fixed-window budget.",
		args: []argDoc{{name: "key", typ: "key"}, {name: "limit", typ: "integer"}, {name: "period", typ: "string"},
			{name: "batch", typ: "integer", token: "BATCH"}}},
	cmdThrottleReturn: {name: "throttle.return", arity: 4, flags: []string{"write", "fast"}, firstKey: 1, lastKey: 1, step: 1,
		group: "throttle", since: "1.0.0", summary: "Gives unused leased credits back to the window that reset_at_ms names.",
		args: []argDoc{{name: "key", typ: "key"}, {name: "credits", typ: "integer"}, {name: "reset_at_ms", typ: "integer"}}},
	cmdCLThrottle: {name: "cl.throttle", arity: -1, flags: []string{"write"}, firstKey: 1, lastKey: 1, step: 1,
		group: "throttle", since: "1.0.0", summary: "GCRA rate limiting with redis-cell's arguments and reply.",
		args: []argDoc{{name: "key", typ: "key"}, {name: "max_burst", typ: "integer"}, {name: "count_per_period", typ: "integer"},
			{name: "period", typ: "integer"}, {name: "quantity", typ: "integer", optional: true}}},
	cmdPing: {name: "ping", arity: -1, flags: []string{"fast"}, group: "connection", since: "1.0.0",
		summary: "Returns PONG, or the message given.", args: []argDoc{{name: "message", typ: "string", optional: true}}},
	cmdEcho: {name: "echo", arity: 2, flags: []string{"fast"}, group: "connection", since: "1.0.0",
		summary: "Returns the message given.", args: []argDoc{{name: "message", typ: "string"}}},
	cmdHello: {name: "hello", arity: -1, flags: []string{"noauth", "fast"}, noAuth: true, group: "connection", since: "6.0.0",
		summary: "Handshakes: selects RESP2 or RESP3, optionally authenticates and names the connection.",
		args: []argDoc{{name: "protover", typ: "integer", optional: true}, {name: "auth", typ: "block", token: "AUTH", optional: true,
			sub: []argDoc{{name: "username", typ: "string"}, {name: "password", typ: "string"}}},
			{name: "clientname", typ: "string", token: "SETNAME", optional: true}}},
	cmdAuth: {name: "auth", arity: -2, flags: []string{"noauth", "fast"}, noAuth: true, group: "connection", since: "1.0.0",
		summary: "Authenticates the connection.", args: []argDoc{{name: "username", typ: "string", optional: true}, {name: "password", typ: "string"}}},
	cmdSelect: {name: "select", arity: 2, flags: []string{"fast"}, group: "connection", since: "1.0.0",
		summary: "Selects database 0 (the only one).", args: []argDoc{{name: "index", typ: "integer"}}},
	cmdClient: {name: "client", arity: -2, flags: []string{"slow"}, group: "connection", since: "2.4.0",
		summary: "Connection commands: SETNAME, GETNAME, ID, SETINFO, INFO, LIST.", args: []argDoc{{name: "subcommand", typ: "string"}}},
	cmdCommand: {name: "command", arity: -1, flags: []string{"slow"}, group: "server", since: "2.8.13",
		summary: "Describes the commands: COUNT, INFO, DOCS, LIST.", args: []argDoc{{name: "subcommand", typ: "string", optional: true}}},
	cmdInfo: {name: "info", arity: -1, flags: []string{"slow"}, group: "server", since: "1.0.0",
		summary: "Reports server information and statistics.", args: []argDoc{{name: "section", typ: "string", optional: true, multiple: true}}},
	cmdDBSize: {name: "dbsize", arity: 1, flags: []string{"readonly", "fast"}, group: "server", since: "1.0.0",
		summary: "Returns the number of keys held."},
	cmdTime: {name: "time", arity: 1, flags: []string{"fast"}, group: "server", since: "2.6.0",
		summary: "Returns the server time: seconds and microseconds."},
	cmdQuit: {name: "quit", arity: -1, flags: []string{"noauth", "fast"}, noAuth: true, group: "connection", since: "1.0.0",
		summary: "Closes the connection."},
	cmdReset: {name: "reset", arity: 1, flags: []string{"noauth", "fast"}, noAuth: true, group: "connection", since: "6.2.0",
		summary: "Resets the connection: RESP2, no name, unauthenticated if a password is set."},
	cmdConfig: {name: "config", arity: -2, flags: []string{"slow"}, group: "server", since: "2.0.0",
		summary: "CONFIG GET parameter [parameter ...]: reads settings.", args: []argDoc{{name: "subcommand", typ: "string"}}},
}

// commandIndex maps lower-case command names to their ids.
var commandIndex = func() map[string]cmdID {
	m := make(map[string]cmdID, numCmds)
	for i := range commandTable {
		m[commandTable[i].name] = cmdID(i)
	}
	return m
}()

// lookup finds a command by name, case-insensitively, without allocating.
func lookup(name []byte) (cmdID, bool) {
	if len(name) > maxCmdName {
		return 0, false
	}
	var buf [maxCmdName]byte
	for i, c := range name {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	id, ok := commandIndex[string(buf[:len(name)])]
	return id, ok
}

// equalFold reports whether b equals the lower-case ASCII word s, ignoring case.
func equalFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// arityOK checks the number of words (command name included) against a.
func arityOK(a, n int) bool {
	if a >= 0 {
		return n == a
	}
	return n >= -a
}

// errorf appends an error reply and counts it by code.
func (l *loop) errorReply(code, msg string) {
	l.out = appendErrorLine(l.out, code, msg)
	l.ctr.errs[errKindOf(code)]++
}

func (l *loop) errArity(name string) {
	l.errorReply("ERR", "wrong number of arguments for '"+name+"' command")
}

func (l *loop) errNotInt() { l.errorReply("ERR", "value is not an integer or out of range") }

func (l *loop) errSyntax() { l.errorReply("ERR", "syntax error") }

func (l *loop) errUnknownSub(cmd string, sub []byte) {
	l.out = append(l.out, "-ERR unknown subcommand '"...)
	l.out = appendSanitizedBytes(l.out, sub, 128)
	l.out = append(l.out, "'. Try "...)
	l.out = append(l.out, strings.ToUpper(cmd)...)
	l.out = append(l.out, " HELP.\r\n"...)
	l.ctr.errs[errKindERR]++
}

// errUnknownCommand writes Redis's reply to an unknown command.
func (l *loop) errUnknownCommand(args [][]byte) {
	l.out = append(l.out, "-ERR unknown command '"...)
	l.out = appendSanitizedBytes(l.out, args[0], 128)
	l.out = append(l.out, "', with args beginning with: "...)
	used := 0
	for _, a := range args[1:] {
		if used >= 128 {
			break
		}
		room := 128 - used
		start := len(l.out)
		l.out = append(l.out, '\'')
		l.out = appendSanitizedBytes(l.out, a, room)
		l.out = append(l.out, '\'', ' ')
		used += len(l.out) - start
	}
	l.out = append(l.out, '\r', '\n')
	l.ctr.errs[errKindERR]++
}

// dispatch runs one command and appends its reply. It reports whether the
// connection must be closed after the batch's replies are written.
func (l *loop) dispatch(cl *client, args [][]byte, now int64) bool {
	id, ok := lookup(args[0])
	if !ok {
		l.errUnknownCommand(args)
		return false
	}
	spec := &commandTable[id]
	l.ctr.cmds[id]++
	cl.lastCmd = id
	if !cl.authed && !spec.noAuth {
		l.errorReply("NOAUTH", "Authentication required.")
		return false
	}
	if !arityOK(spec.arity, len(args)) {
		l.errArity(spec.name)
		return false
	}
	switch id {
	case cmdThrottleCheck:
		l.throttleCheck(cl, args, now)
	case cmdThrottlePeek:
		l.throttlePeek(cl, args, now)
	case cmdThrottleReset:
		l.throttleReset(args, now)
	case cmdThrottleLease:
		l.throttleLease(cl, args, now)
	case cmdThrottleReturn:
		l.throttleReturn(args, now)
	case cmdCLThrottle:
		l.clThrottle(args, now)
	case cmdPing:
		l.ping(args)
	case cmdEcho:
		l.out = appendBulk(l.out, args[1])
	case cmdHello:
		l.hello(cl, args)
	case cmdAuth:
		l.auth(cl, args)
	case cmdSelect:
		l.selectDB(args)
	case cmdClient:
		l.clientCmd(cl, args)
	case cmdCommand:
		l.commandCmd(cl, args)
	case cmdInfo:
		l.info(cl, args, now)
	case cmdDBSize:
		l.out = appendInt(l.out, int64(l.store.Len()))
	case cmdTime:
		l.timeCmd(now)
	case cmdQuit:
		l.out = appendOK(l.out)
		return true
	case cmdReset:
		l.reset(cl)
	case cmdConfig:
		l.config(cl, args)
	}
	return false
}
