package upstream

import (
	"context"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"
	"github.com/throttlekit/throttlekit-server/engine"
)

// CallKind selects the script a Call runs.
type CallKind uint8

// The single-key calls Pipe sends.
const (
	CallCheck  CallKind = iota // THROTTLE.CHECK: N units of Limit
	CallPeek                   // THROTTLE.PEEK: what CallCheck would answer for N units, consuming nothing
	CallLease                  // THROTTLE.LEASE: up to N credits of Limit's fixed window
	CallReturn                 // THROTTLE.RETURN: N credits back to the window ending at ResetAt (ms)
	CallCell                   // CL.THROTTLE: N units of Cell
	CallReset                  // THROTTLE.RESET of Key
	CallMCheck                 // THROTTLE.MCHECK: N units against every rule of Rules (Exec only)
	CallGCRA                   // Redis's GCRA command with GCRA's numbers

	// The admission calls, which only Exec sends (alone, each has its
	// Client method: Acquire, Release, ...).
	CallAcquire  // THROTTLE.ACQUIRE: a slot of Key's N (1 to MaxSlots) for TTL ns
	CallRelease  // THROTTLE.RELEASE: free the slot Slot.Slot, Slot.Gen names
	CallRefresh  // THROTTLE.REFRESH: the slot Slot.Slot, Slot.Gen names now expires TTL ns from now
	CallCheckBan // THROTTLE.CHECK ... BAN: N units of Limit with Ban's penalty box
	CallBanned   // THROTTLE.BANNED: ms left of Key's ban, in Count
	CallUnban    // THROTTLE.UNBAN: Count 1 if a ban of Key was lifted
	CallReserve  // THROTTLE.RESERVE: N units of Limit (burst 0), held TTL ns; Reservation names it
	CallSettle   // THROTTLE.SETTLE of Reservation at N units; Count 1 if this call settled it
)

// Call is one single-key script call of Pipe: its inputs and, once Pipe
// returns, its result or its error. It is what Check, Peek, Lease, Return,
// Throttle and Reset send, described by value so that many can share a
// round trip.
type Call struct {
	Kind    CallKind
	Key     string
	Limit   engine.Limit    // CallCheck, CallPeek; CallLease uses Limit.Limit and Limit.Period
	Cell    engine.Cell     // CallCell
	GCRA    engine.RateGCRA // CallGCRA
	N       int64           // cost, batch, credits or quantity, as Kind says
	ResetAt int64           // CallReturn: the window's end in ms
	// At, if not 0, is the instant (ns since the epoch) the call runs at,
	// as Client.At gives one; 0 runs at the Client's instant (the
	// upstream's clock unless the Client came from At).
	At    int64
	Rules []Rule     // CallMCheck: its keys and limits (Key is unused)
	TTL   int64      // CallAcquire, CallRefresh, CallReserve: ns
	Ban   engine.Ban // CallCheckBan
	// Slot is CallAcquire's result, and the token (Slot.Slot, Slot.Gen)
	// CallRelease and CallRefresh name.
	Slot SlotGrant
	// Reservation is the one CallSettle settles, and the one CallReserve
	// drew (its result; Seq is drawn when Exec sends the call).
	Reservation Reservation

	Decision  engine.Decision      // CallCheck, CallPeek, CallLease, CallCheckBan, CallReserve
	MDecision MDecision            // CallMCheck
	CellReply engine.CellReply     // CallCell
	GCRAReply engine.RateGCRAReply // CallGCRA
	Count     int64                // CallReturn: credits taken back; CallReset: 1 if the key held live state; as the admission kinds say
	Err       error                // an *Error; the call then changed nothing, unless its code is CodeUnavailable
}

// Pipe sends calls as one go-redis pipeline, EVALSHA each, and fills in
// each call's result or error; on a cluster go-redis splits the pipeline
// by node, keeping each node's calls in their order. Calls of one key thus
// run in the order given. Calls that get NOSCRIPT (a restarted or new
// node, SCRIPT FLUSH) are sent again, in order, with EVAL in a second
// pipeline. Calls whose arguments the engine would reject fail at once
// and are not sent.
//
// A failure of the connection fails the calls whose replies were not read
// with CodeUnavailable; those whose replies were read keep them. On one
// server nothing is retried (Dial turns go-redis's retries off), since a
// call resent after its reply was lost would run twice.
//
// Costs: one round trip per node for the whole pipeline, plus one per node
// that answered NOSCRIPT; the argument list of each call is allocated.
func (c *Client) Pipe(ctx context.Context, calls []Call) {
	cmds := make([]*redis.Cmd, len(calls))
	p := c.rdb.Pipeline()
	for i := range calls {
		cl := &calls[i]
		s, args, err := c.callArgs(cl)
		if err != nil {
			cl.Err = err
			continue
		}
		cmds[i] = s.EvalSha(ctx, p, []string{cl.Key}, args...)
	}
	if p.Len() == 0 {
		return
	}
	send(ctx, p)
	var again redis.Pipeliner
	for i, cmd := range cmds {
		if cmd == nil || !redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") {
			continue
		}
		if again == nil {
			again = c.rdb.Pipeline()
		}
		s, args, _ := c.callArgs(&calls[i])
		cmds[i] = s.Eval(ctx, again, []string{calls[i].Key}, args...)
	}
	if again != nil {
		send(ctx, again)
	}
	for i, cmd := range cmds {
		if cmd != nil {
			result(&calls[i], cmd)
		}
	}
}

// send sends p. Each command holds its own reply or error, except that
// go-redis leaves commands without either when a connection could not be
// had (its retries spent): those get the pipeline's error.
func send(ctx context.Context, p redis.Pipeliner) {
	cmds, err := p.Exec(ctx)
	if err == nil {
		return
	}
	for _, c := range cmds {
		if c, ok := c.(*redis.Cmd); ok && c.Err() == nil && c.Val() == nil {
			c.SetErr(err)
		}
	}
}

// do runs one call on its own: EVALSHA, and EVAL on NOSCRIPT.
func (c *Client) do(ctx context.Context, cl *Call) {
	s, args, err := c.callArgs(cl)
	if err != nil {
		cl.Err = err
		return
	}
	result(cl, c.run(ctx, s, []string{cl.Key}, args...))
}

// callArgs returns the script of cl and its ARGV, or the error the engine
// gives its arguments.
func (c *Client) callArgs(cl *Call) (*redis.Script, []any, error) {
	now := c.now
	if cl.At != 0 {
		now = strconv.FormatInt(cl.At, 10)
	}
	switch cl.Kind {
	case CallCheck, CallPeek:
		l, err := limitArgs(cl.Limit)
		if err != nil {
			return nil, nil, err
		}
		mode := "check"
		if cl.Kind == CallPeek {
			mode = "peek"
		}
		return c.s.check, []any{now, mode, l.Algo.String(), l.Limit, l.Period, l.Burst, cl.N}, nil
	case CallLease:
		if _, err := limitArgs(engine.Limit{Algo: engine.KindFixed, Limit: cl.Limit.Limit, Period: cl.Limit.Period}); err != nil {
			return nil, nil, err
		}
		return c.s.lease, []any{now, cl.Limit.Limit, cl.Limit.Period, cl.N}, nil
	case CallReturn:
		return c.s.ret, []any{now, cl.N, cl.ResetAt}, nil
	case CallCell:
		if _, err := engine.NewCell(cl.Cell.MaxBurst, cl.Cell.CountPerPeriod, cl.Cell.PeriodSec); err != nil {
			return nil, nil, &Error{CodeEngine, err}
		}
		return c.s.cell, []any{now, cl.Cell.MaxBurst, cl.Cell.CountPerPeriod, cl.Cell.PeriodSec, cl.N}, nil
	case CallReset:
		return c.s.reset, []any{now}, nil
	case CallGCRA:
		g := cl.GCRA
		if g.Burst < 1 || g.Interval < 1 || g.Tokens < 1 {
			return nil, nil, &Error{CodeEngine, engine.ErrOutOfRange}
		}
		return c.s.gcra, []any{now, g.Burst, g.Interval, g.Tokens}, nil
	}
	return nil, nil, &Error{CodeArgs, errors.New("unknown call kind " + strconv.Itoa(int(cl.Kind)))}
}

// result decodes cmd's reply into cl.
func result(cl *Call, cmd *redis.Cmd) {
	switch cl.Kind {
	case CallCheck, CallPeek, CallLease:
		cl.Decision, cl.Err = decisionOf(cmd)
	case CallReturn, CallReset:
		cl.Count, cl.Err = intOf(cmd)
	case CallCell:
		cl.CellReply, cl.Err = cellOf(cmd)
	case CallGCRA:
		cl.GCRAReply, cl.Err = gcraReplyOf(cmd)
	}
}

func cellOf(r *redis.Cmd) (engine.CellReply, error) {
	v, err := r.StringSlice()
	if err != nil {
		return engine.CellReply{}, classify(err)
	}
	if len(v) != 5 {
		return engine.CellReply{}, &Error{CodeScript, errors.New("unexpected reply length " + strconv.Itoa(len(v)))}
	}
	var n [5]int64
	for i, s := range v {
		if n[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return engine.CellReply{}, &Error{CodeScript, err}
		}
	}
	return engine.CellReply{Limited: n[0], Limit: n[1], Remaining: n[2], RetryAfter: n[3], ResetAfter: n[4]}, nil
}

// Wire returns what Pipe sends for cl when the script is cached: the
// arguments of EVALSHA after the command name (the script's SHA1, the key
// count, the key, ARGV). Benchmarks send exactly these straight to a
// server to compare with the same call made through throttlekit.
func (c *Client) Wire(cl *Call) ([]string, error) {
	s, args, err := c.callArgs(cl)
	if err != nil {
		return nil, err
	}
	out := []string{s.Hash(), "1", cl.Key}
	for _, a := range args {
		switch v := a.(type) {
		case string:
			out = append(out, v)
		case int64:
			out = append(out, strconv.FormatInt(v, 10))
		}
	}
	return out, nil
}
