package server

import (
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/throttlekit/throttlekit-server/server/acl"
	"github.com/throttlekit/throttlekit-server/server/resp"
)

// client is one connection's state. Fields other than name, libName and
// libVer are touched only by the connection's event loop; those three are
// written under Server.mu so that CLIENT LIST on another loop can read them.
type client struct {
	id     int64
	loop   *loop
	conn   gnet.Conn
	resp3  bool
	authed bool
	fd     int
	addr   string
	laddr  string
	since  time.Time

	name, libName, libVer string

	// pend is the parser's progress through a command that has not fully
	// arrived; qbuf holds that command's bytes (and what arrived after
	// them) while it does, and is empty between frames. qbufShared marks
	// a qbuf whose arguments outq still refers to.
	pend       resp.Pending
	qbuf       []byte
	qbufShared bool
	qmove      queryMove // qbuf's first bytes still in the buffer it outgrew: largearg.go
	outq       outQueue  // large replies not yet handed to gnet: bigreply.go

	lastCmd    cmdID
	lastActive atomic.Int64

	intro clientIntro // CLIENT REPLY, MONITOR, CLIENT LIST's cmd and resp: cmd_client.go
	multi *multiState // MULTI queue and WATCH snapshots, nil until first used: cmd_multi.go
	user  *acl.User   // the ACL user, set when the connection opens (Server.startConn): security.go
	dur   clientHold  // replies held until durable: durability.go
}
