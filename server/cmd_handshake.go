package server

import (
	"strings"

	"github.com/throttlekit/throttlekit-server/server/acl"
)

// The connection handshake: what clients send on connect (HELLO, AUTH,
// SELECT, CLIENT SETNAME) and the few connection commands around it.

// compatVersion is the Redis version whose behaviour the handshake and admin
// commands follow; clients read it from INFO and HELLO.
const compatVersion = "7.2.0"

// PING [message]
func (l *loop) ping(_ *client, args [][]byte, _ int64) result {
	switch len(args) {
	case 1:
		l.out = append(l.out, "+PONG\r\n"...)
	case 2:
		l.out = appendBulk(l.out, args[1])
	default:
		l.errArity("ping")
		return failed
	}
	return replied
}

// ECHO message
func (l *loop) echo(cl *client, args [][]byte, _ int64) result {
	l.appendBulkArg(cl, args[1]) // a large argument is not copied: bigreply.go
	return replied
}

// QUIT: OK, then the connection closes once the batch's replies are written.
func (l *loop) quit(*client, [][]byte, int64) result {
	l.out = appendOK(l.out)
	return closeConn
}

// HELLO [protover [AUTH username password] [SETNAME clientname]]
func (l *loop) hello(cl *client, args [][]byte, now int64) result {
	proto := 0
	if len(args) >= 2 {
		v, ok := parseInt64(args[1])
		if !ok {
			l.errorReply("ERR", "Protocol version is not an integer or out of range")
			return failed
		}
		if v != 2 && v != 3 {
			l.errorReply("NOPROTO", "unsupported protocol version")
			return failed
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
			l.errQuoted("Syntax error in HELLO option ", args[i], 128, "")
			return failed
		}
	}
	if hasAuth {
		if ok, closeAfter := l.authenticate(cl, args[0], user, pass, now); !ok { // security.go
			return failed | closeIf(closeAfter)
		}
	}
	if !cl.authed {
		l.errorReply("NOAUTH", "HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time")
		return failed
	}
	if hasName {
		if !nameOK(name) {
			l.errBadName()
			return failed
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
	return replied
}

func (l *loop) errBadName() {
	l.errorReply("ERR", "Client names cannot contain spaces, newlines or special characters.")
}

// AUTH [username] password: through the ACL (security.go). The one-word
// form authenticates the default user, and is an error while the default
// user has no password.
func (l *loop) auth(cl *client, args [][]byte, now int64) result {
	var user, pass []byte
	switch len(args) {
	case 2:
		if u := l.srv.sec.acl.User(acl.DefaultUser); u != nil && u.NoPass() {
			code, msg, _ := strings.Cut(acl.AuthNoPasswordReply, " ")
			l.errorReply(code, msg)
			return failed
		}
		user, pass = []byte(acl.DefaultUser), args[1]
	case 3:
		user, pass = args[1], args[2]
	default:
		l.errSyntax()
		return failed
	}
	ok, closeAfter := l.authenticate(cl, args[0], user, pass, now)
	if !ok {
		return failed | closeIf(closeAfter)
	}
	l.out = appendOK(l.out)
	return closeIf(closeAfter)
}

const (
	math32Min = -1 << 31
	math32Max = 1<<31 - 1
)

// SELECT index: only database 0 exists.
func (l *loop) selectDB(_ *client, args [][]byte, _ int64) result {
	n, ok := parseInt64(args[1])
	switch {
	case !ok:
		l.errNotInt()
	case n < math32Min || n > math32Max:
		l.errorReply("ERR", "value is out of range, value must between -2147483648 and 2147483647")
	case n != 0:
		l.errorReply("ERR", "DB index is out of range")
	default:
		l.out = appendOK(l.out)
		return replied
	}
	return failed
}

// setName sets the client's name under Server.mu (CLIENT LIST reads it from
// other loops).
func (l *loop) setName(cl *client, name string) {
	l.srv.mu.Lock()
	cl.name = name
	l.srv.mu.Unlock()
}

// RESET: back to RESP2, no name, the default user, unauthenticated unless
// the default user is on and nopass.
func (l *loop) reset(cl *client, _ [][]byte, _ int64) result {
	cl.resp3 = false
	l.srv.mu.Lock()
	cl.name, cl.libName, cl.libVer = "", "", ""
	l.srv.mu.Unlock()
	l.srv.startConn(cl) // security.go
	l.out = append(l.out, "+RESET\r\n"...)
	return replied
}
