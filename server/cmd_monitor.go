package server

import (
	"strconv"

	"github.com/panjf2000/gnet/v2"
)

// MONITOR streams every command the server runs to the connections that
// asked for it, one line per command as Redis formats it:
//
//	+1700000000.123456 [0 127.0.0.1:50000] "THROTTLE.CHECK" "k" "10" "1s"
//
// The list of monitors lives in the server's shared introspection state
// (shared.monitors), copied on write, so a loop learns whether anyone is
// monitoring with one atomic load per command: with no monitor attached,
// MONITOR costs nothing more. With monitors, each command is formatted once
// (an allocation) and handed to every monitor's connection with AsyncWrite,
// which queues it on the monitor's own loop: the loop running the command
// never blocks on a slow monitor. A monitor whose queued bytes exceed the
// output buffer limit (OutputBufferLimit, or monitorBufferLimit without
// one) is closed, as Redis closes a client over its output limit.
//
// As in Redis, administrative commands (CLIENT LIST, CONFIG, MONITOR, ...)
// and commands refused before running (arity, authentication) are not
// shown, and passwords given to AUTH and HELLO AUTH are shown as
// "(redacted)". The time is the clock reading of the batch that carried
// the command.

// monitorBufferLimit bounds a monitor's queued output when no
// OutputBufferLimit is configured.
const monitorBufferLimit = 64 << 20

// MONITOR: +OK, then the feed. A connection already monitoring gets no
// reply, as in Redis.
func (l *loop) monitor(cl *client, _ [][]byte, _ int64) result {
	sh := l.shared()
	s := l.srv
	s.mu.Lock()
	already := cl.intro.monitor
	cl.intro.monitor = true
	s.mu.Unlock()
	if already {
		return replied
	}
	sh.mu.Lock()
	var list []*client
	if cur := sh.monitors.Load(); cur != nil {
		list = append(list, *cur...)
	}
	list = append(list, cl)
	sh.monitors.Store(&list)
	sh.mu.Unlock()
	l.out = appendOK(l.out)
	return replied
}

// pruneMonitors drops the monitors whose connection is gone.
func (sh *shared) pruneMonitors() {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	cur := sh.monitors.Load()
	if cur == nil {
		return
	}
	var list []*client
	for _, m := range *cur {
		if !m.intro.gone.Load() {
			list = append(list, m)
		}
	}
	if len(list) == 0 {
		sh.monitors.Store(nil)
	} else {
		sh.monitors.Store(&list)
	}
}

// feedMonitors sends one command, as run by cl, to every monitor.
func (l *loop) feedMonitors(sh *shared, cl *client, args [][]byte, now int64) {
	cur := sh.monitors.Load()
	if cur == nil {
		return
	}
	line := appendMonitorLine(nil, cl.addr, args, now)
	limit := l.srv.cfg.OutputBufferLimit
	if limit <= 0 {
		limit = monitorBufferLimit
	}
	stale := false
	for _, m := range *cur {
		if m.intro.gone.Load() || !m.sendMonitor(line, limit) {
			stale = true
		}
	}
	if stale {
		sh.pruneMonitors()
	}
}

// sendMonitor queues line on the monitor m's connection. It reports false
// once m is gone: closed, or over limit (then it is closed here).
func (m *client) sendMonitor(line []byte, limit int64) bool {
	n := int64(len(line))
	if m.intro.pending.Add(n) > limit {
		m.intro.gone.Store(true)
		_ = m.conn.Close()
		return false
	}
	err := m.conn.AsyncWrite(line, func(c gnet.Conn, err error) error {
		m.intro.pending.Add(-n)
		if err != nil {
			m.intro.gone.Store(true)
			return nil
		}
		// On m's own loop: its outbound buffer may be read here.
		if int64(c.OutboundBuffered()) > limit {
			m.intro.gone.Store(true)
			_ = c.Close()
		}
		return nil
	})
	if err != nil {
		m.intro.gone.Store(true)
		return false
	}
	return true
}

// appendMonitorLine formats one MONITOR line: the time in seconds with
// microseconds, the database and the client's address, then every
// argument quoted as Redis quotes it, passwords redacted.
func appendMonitorLine(dst []byte, addr string, args [][]byte, now int64) []byte {
	usec := now / 1000
	dst = append(dst, '+')
	dst = strconv.AppendInt(dst, usec/1_000_000, 10)
	dst = append(dst, '.')
	frac := usec % 1_000_000
	for d := int64(100_000); d > 1 && frac < d; d /= 10 {
		dst = append(dst, '0')
	}
	dst = strconv.AppendInt(dst, frac, 10)
	dst = append(dst, " [0 "...)
	dst = append(dst, addr...)
	dst = append(dst, ']')
	redactFrom, redactTo := len(args), len(args) // AUTH: every argument
	switch {
	case equalFold(args[0], "auth"):
		redactFrom = 1
	case equalFold(args[0], "hello"):
		for i := 2; i < len(args); i++ {
			if equalFold(args[i], "auth") {
				redactFrom, redactTo = i+1, min(i+3, len(args))
				break
			}
		}
	}
	for i, a := range args {
		dst = append(dst, ' ')
		if i >= redactFrom && i < redactTo {
			dst = append(dst, `"(redacted)"`...)
			continue
		}
		dst = appendRepr(dst, a)
	}
	return append(dst, '\r', '\n')
}

// appendRepr writes b in double quotes with the escapes Redis uses in
// MONITOR and redis-cli: \\ \" \n \r \t \a \b, and \xHH for the other
// bytes that are not printable ASCII.
func appendRepr(dst, b []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, c := range b {
		switch c {
		case '\\', '"':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\a':
			dst = append(dst, '\\', 'a')
		case '\b':
			dst = append(dst, '\\', 'b')
		default:
			if c >= ' ' && c <= '~' {
				dst = append(dst, c)
			} else {
				dst = append(dst, '\\', 'x', hex[c>>4], hex[c&15])
			}
		}
	}
	return append(dst, '"')
}
