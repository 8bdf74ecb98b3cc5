package server

// DEBUG: commands for tests, refused unless Config.EnableDebugCommand allows
// them, as Redis 7 refuses its DEBUG unless enable-debug-command does.
//
// # The clock
//
// DEBUG SET-CLOCK and ADVANCE-CLOCK move the server's "now": the reading
// every decision, expiry, TTL and TIME reply uses, and the one the TCP and
// TLS idle timeouts and the latency figures are measured with. With DEBUG
// enabled, New wraps Config.Clock in a clock.Manual (or uses
// Config.DebugClock); with DEBUG refused (the default) the server reads
// Config.Clock directly and nothing on the hot path changes.
//
//	DEBUG SET-CLOCK <unix-ms>    freezes the clock at that instant (it may be in the past)
//	DEBUG ADVANCE-CLOCK <ms>     moves the clock forward, frozen or running
//	DEBUG SET-CLOCK REAL         lets the clock run again from where it stands,
//	                             never backwards (clock.Manual.Resume)
//
// A frozen clock stops time for the whole server: keys do not expire and
// idle connections are not closed until it moves; moving it past the idle
// timeout closes the idle connections (not the one that moved it) at the
// next tick. A change applies to the next command, also within one read
// batch (the batch re-reads the clock after a DEBUG command); the commands
// of a MULTI ... EXEC transaction all run at the instant EXEC started,
// whatever DEBUG commands it holds.
//
// # Who may run it
//
// enable-debug-command takes Redis 7's values: no (refused to every
// client), local (allowed from 127.0.0.1 and ::1 only, the addresses
// protected mode trusts) and yes. A refused DEBUG gets Redis 7's reply word
// for word, after the arity check and before the subcommand is looked at,
// as in Redis; unlike Redis, an unauthenticated client gets NOAUTH first
// (dispatch checks authentication before arity). The ACL check applies on
// top: DEBUG is @admin @slow @dangerous, as in Redis.

import (
	"fmt"
	"math"
	"net/netip"
)

// DebugCommand says who may run DEBUG: Redis 7's enable-debug-command.
type DebugCommand uint8

// The values of Config.EnableDebugCommand.
const (
	DebugNo    DebugCommand = iota // DEBUG is refused to every client (the default)
	DebugYes                       // every client may run DEBUG (the ACL still applies)
	DebugLocal                     // only clients on 127.0.0.1 or ::1 may run DEBUG
)

// ParseDebugCommand parses a value of enable-debug-command: "no", "yes" or
// "local".
func ParseDebugCommand(s string) (DebugCommand, error) {
	switch s {
	case "no":
		return DebugNo, nil
	case "yes":
		return DebugYes, nil
	case "local":
		return DebugLocal, nil
	}
	return DebugNo, fmt.Errorf("server: enable-debug-command %q is not no, yes or local", s)
}

// errDebugRefused is Redis 7's reply to a DEBUG that enable-debug-command
// does not allow (server.c, processCommand), byte for byte.
const errDebugRefused = "DEBUG command not allowed. If the enable-debug-command option is set to \"local\", " +
	"you can run it from a local connection, otherwise you need to set this option in the configuration file, " +
	"and then restart the server."

// maxClockMs is the latest instant DEBUG SET-CLOCK and ADVANCE-CLOCK accept:
// the last millisecond whose Unix nanoseconds fit in an int64 (2262-04-11).
const maxClockMs = math.MaxInt64 / 1_000_000

// errClockRange refuses an ADVANCE-CLOCK past maxClockMs.
const errClockRange = "the clock would pass Unix time 9223372036854 ms"

func debugSubcommands() []cmdSpec {
	const g = "server"
	help := helpSub("debug", "1.0.0", g, 0)
	help.flags = flagsAdmin // like every DEBUG subcommand: @admin @dangerous
	return []cmdSpec{
		{name: "debug|set-clock", arity: 3, flags: flagsAdmin, run: (*loop).debugSetClock,
			group: g, since: "1.2.0", summary: "Freezes the server's clock at an instant, or lets it run again (REAL).",
			args: []argDoc{{name: "time", typ: "oneof", sub: []argDoc{
				{name: "unix-time-milliseconds", typ: "integer"}, {name: "real", typ: "pure-token", token: "REAL"}}}},
			help: []string{"SET-CLOCK <unix-time-milliseconds>|REAL",
				"    Freeze the server's clock at the given instant (decisions, expiries, TTL, TIME,",
				"    idle timeouts), or with REAL let it run again from where it stands, never backwards."}},
		{name: "debug|advance-clock", arity: 3, flags: flagsAdmin, run: (*loop).debugAdvanceClock,
			group: g, since: "1.2.0", summary: "Moves the server's clock forward by a number of milliseconds.",
			args: []argDoc{{name: "milliseconds", typ: "integer"}},
			help: []string{"ADVANCE-CLOCK <milliseconds>",
				"    Move the server's clock forward, frozen or running, by <milliseconds> (not negative)."}},
		help,
	}
}

// debugAllowed reports whether enable-debug-command lets cl run DEBUG.
func (l *loop) debugAllowed(cl *client) bool {
	switch l.srv.cfg.EnableDebugCommand {
	case DebugYes:
		return true
	case DebugLocal:
		return localAddr(cl.addr)
	}
	return false
}

// localAddr reports whether a client's address ("ip:port") is 127.0.0.1 or
// ::1, as isLocal does for a net.Addr; an empty address is not a network
// connection (an in-process test client) and counts as local.
func localAddr(addr string) bool {
	if addr == "" {
		return true
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return false
	}
	a := ap.Addr().Unmap()
	return a == netip.AddrFrom4([4]byte{127, 0, 0, 1}) || a == netip.IPv6Loopback()
}

// refuseDebug answers a DEBUG that enable-debug-command does not allow, as
// Redis does: counted as rejected, and an open transaction fails at EXEC.
func (l *loop) refuseDebug(cl *client, spec *cmdSpec) {
	l.rejected(spec)
	l.errorReply("ERR", errDebugRefused)
	flagMulti(cl)
}

// clockSet ends a DEBUG command that moved the clock: the rest of the
// batch reads it again, and the calling client counts as active at the new
// time, so that advancing past the idle timeout closes the other idle
// clients, not this one.
func (l *loop) clockSet(cl *client) {
	l.clockMoved = true
	cl.lastActive.Store(l.srv.now())
	l.out = appendOK(l.out)
}

// DEBUG SET-CLOCK <unix-time-milliseconds>|REAL
func (l *loop) debugSetClock(cl *client, args [][]byte, _ int64) result {
	m := l.srv.cfg.DebugClock
	if equalFold(args[2], "real") {
		m.Resume()
	} else {
		ms, ok := parseInt64(args[2])
		if !ok || ms < 0 || ms > maxClockMs {
			l.errorReply("ERR", "unix-time-milliseconds must be an integer from 0 to 9223372036854, or REAL")
			return failed
		}
		m.Freeze(ms * 1e6)
	}
	l.clockSet(cl)
	return replied
}

// DEBUG ADVANCE-CLOCK <milliseconds>
func (l *loop) debugAdvanceClock(cl *client, args [][]byte, _ int64) result {
	ms, ok := l.intArg(args[2], "milliseconds")
	if !ok {
		return failed
	}
	if ms < 0 {
		l.errorReply("ERR", "milliseconds must not be negative")
		return failed
	}
	if ms > maxClockMs {
		l.errorReply("ERR", errClockRange)
		return failed
	}
	if _, ok := l.srv.cfg.DebugClock.Advance(ms*1e6, maxClockMs*1e6); !ok {
		l.errorReply("ERR", errClockRange)
		return failed
	}
	l.clockSet(cl)
	return replied
}
