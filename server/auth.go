package server

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/server/acl"
)

// maxAuthFailIPs bounds the client addresses whose failed attempts are
// remembered; beyond it the least recently used are forgotten.
const maxAuthFailIPs = 64 * 1024

// deniedProtectedMode is Redis 7.0's reply to a remote connection in
// protected mode, word for word.
const deniedProtectedMode = "-DENIED Redis is running in protected mode because protected mode is enabled and no password is set for the default user. " +
	"In this mode connections are only accepted from the loopback interface. If you want to connect from external computers to Redis you may adopt one of the following solutions: " +
	"1) Just disable protected mode sending the command 'CONFIG SET protected-mode no' from the loopback interface by connecting to Redis from the same host the server is running, " +
	"however MAKE SURE Redis is not publicly accessible from internet if you do so. Use CONFIG REWRITE to make this change permanent. " +
	"2) Alternatively you can just disable the protected mode by editing the Redis configuration file, and setting the protected mode option to 'no', and then restarting the server. " +
	"3) If you started the server manually just for testing, restart it with the '--protected-mode no' option. " +
	"4) Setup a an authentication password for the default user. " +
	"NOTE: You only need to do one of the above things in order for the server to start accepting connections from the outside.\r\n"

// protectedRefusal returns the DENIED reply for a connection protected
// mode refuses, or nil to accept it.
func (s *Server) protectedRefusal(c gnet.Conn) []byte {
	if !s.sec.protected {
		return nil
	}
	if u := s.sec.acl.User(acl.DefaultUser); u == nil || !u.NoPass() {
		return nil
	}
	if isLocal(c.RemoteAddr()) {
		return nil
	}
	return []byte(deniedProtectedMode)
}

// isLocal reports whether a peer address is 127.0.0.1 or ::1, the two
// addresses Redis 7.0's protected mode trusts.
func isLocal(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return a == nil // no peer address: not a network connection
	}
	return ta.IP.Equal(net.IPv4(127, 0, 0, 1)) || ta.IP.Equal(net.IPv6loopback)
}

// authenticate checks user and pass for AUTH or HELLO AUTH (word is the
// command name as typed, for ACL LOG) and on success makes user the
// connection's user. On failure it writes the error reply, logs the
// attempt, charges the client's address, and reports whether the
// connection must be closed (its address is out of attempts).
func (l *loop) authenticate(cl *client, word, user, pass []byte, now int64) (ok, closeConn bool) {
	sec := l.srv.sec
	ip := clientIP(cl.addr)
	if sec.fails != nil {
		if d, err := sec.fails.Peek(ip, &sec.failLimit, 1, now, nil); err == nil && d.Allowed == 0 {
			l.errAuthThrottled(d.RetryAfter)
			return false, true
		}
	}
	u, err := sec.acl.Authenticate(user, pass)
	if err == nil {
		cl.user, cl.authed = u, true
		return true, false
	}
	l.errorReply("WRONGPASS", "invalid username-password pair or user is disabled.")
	t := time.Unix(0, now)
	ctx := acl.ContextTopLevel
	if cl.inMulti() {
		ctx = acl.ContextMulti
	}
	sec.acl.Log().Add(acl.Event{Reason: acl.DeniedAuth, Context: ctx, Object: string(word),
		Username: string(user), ClientInfo: l.clientLine(cl, lowerASCII(word), nil, t)}, t)
	if sec.fails != nil {
		f := limits.Op{Kind: limits.OpCheck, Key: ip, Limit: sec.failLimit, Cost: 1}
		sec.fails.Do(&f, now, nil)
	}
	return false, false
}

// errAuthThrottled replies to an AUTH refused because its address has no
// attempts left.
func (l *loop) errAuthThrottled(retryMs int64) {
	l.errorReply("ERR", "too many failed authentication attempts, retry in "+fmt.Sprint(max(retryMs, 1))+" ms")
}

// clientIP returns the host part of a "host:port" address, or the whole
// address when it has no port.
func clientIP(addr string) []byte {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		addr = addr[:i]
	}
	return []byte(strings.Trim(addr, "[]"))
}
