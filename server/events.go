package server

import (
	"time"

	"github.com/panjf2000/gnet/v2"
)

// events is the gnet.EventHandler of a Server: it hands each of gnet's
// callbacks to the Server's unexported method of the same name, so that
// the callbacks are not part of Server's exported API. Serve passes it to
// gnet.Run.
type events struct {
	gnet.BuiltinEventEngine
	s *Server
}

var _ gnet.EventHandler = (*events)(nil)

// OnBoot records the engine and marks the server ready (server.go).
func (e *events) OnBoot(eng gnet.Engine) gnet.Action { return e.s.onBoot(eng) }

// OnOpen admits or refuses a connection (conn.go).
func (e *events) OnOpen(c gnet.Conn) ([]byte, gnet.Action) { return e.s.onOpen(c) }

// OnClose forgets a connection (conn.go).
func (e *events) OnClose(c gnet.Conn, err error) gnet.Action { return e.s.onClose(c, err) }

// OnTraffic reads and answers a connection's commands (conn.go).
func (e *events) OnTraffic(c gnet.Conn) gnet.Action { return e.s.onTraffic(c) }

// OnTick closes idle connections (conn.go).
func (e *events) OnTick() (time.Duration, gnet.Action) { return e.s.onTick() }
