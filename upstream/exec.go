package upstream

import (
	"context"
	"errors"
	"strconv"

	"github.com/throttlekit/throttlekit-server/engine"
)

// Exec runs calls in order as one script (scripts/exec.lua), so that they
// take effect together: a transaction's operations. Each call gets its
// result or its own error, as each command of a Redis transaction does: a
// call that fails (a bad value, WRONGTYPE) changes nothing and does not
// stop the others. Calls whose arguments the engine rejects are refused
// before sending (their Err is set) and the others still run. All calls
// run at one instant: that of the first call's At, or the Client's.
//
// The returned error concerns the whole: on a cluster the keys must share
// a hash slot, else CodeCrossSlot and nothing is sent; CodeUnavailable
// means the script may not have run (no call's result is set). Calls of
// kind CallMCheck carry their keys in Rules.
//
// Costs: one round trip and one script; the script holds the library
// blocks of every operation, so on the upstream it costs about one
// check.lua call plus each item's own work.
func (c *Client) Exec(ctx context.Context, calls []Call) error {
	now := c.now
	if len(calls) > 0 && calls[0].At != 0 {
		now = strconv.FormatInt(calls[0].At, 10)
	}
	var keys []string
	index := map[string]int{}
	key := func(k string) string {
		i, ok := index[k]
		if !ok {
			keys = append(keys, k)
			i = len(keys)
			index[k] = i
		}
		return strconv.Itoa(i)
	}
	args := []any{now, 0}
	sent := make([]int, 0, len(calls))
	for i := range calls {
		cl := &calls[i]
		item, err := c.execItem(cl, key)
		if err != nil {
			cl.Err = err
			continue
		}
		args = append(args, item...)
		sent = append(sent, i)
	}
	if len(sent) == 0 {
		return nil
	}
	args[1] = len(sent)
	if c.cluster {
		s := Slot(keys[0])
		for _, k := range keys[1:] {
			if Slot(k) != s {
				return &Error{CodeCrossSlot, ErrCrossSlot}
			}
		}
	}
	v, err := c.run(ctx, c.s.exec, keys, args...).Slice()
	if err != nil {
		return classify(err)
	}
	if len(v) != len(sent) {
		return &Error{CodeScript, errors.New("unexpected reply length " + strconv.Itoa(len(v)))}
	}
	for j, i := range sent {
		execResult(&calls[i], v[j])
	}
	return nil
}

// execItem returns cl's item of exec.lua's ARGV (key adds a key to KEYS
// and returns its index), or the error the engine gives its arguments.
func (c *Client) execItem(cl *Call, key func(string) string) ([]any, error) {
	switch cl.Kind {
	case CallMCheck:
		if len(cl.Rules) == 0 {
			return nil, &Error{CodeArgs, errors.New("no rules")}
		}
		ks := make([]string, len(cl.Rules))
		for i, r := range cl.Rules {
			ks[i] = r.Key
		}
		if err := c.sameSlot(ks); err != nil {
			return nil, err
		}
		item := []any{"mcheck", len(cl.Rules), cl.N}
		for _, r := range cl.Rules {
			l, err := limitArgs(r.Limit)
			if err != nil {
				return nil, err
			}
			item = append(item, key(r.Key), l.Algo.String(), l.Limit, l.Period, l.Burst)
		}
		return item, nil
	case CallCheck, CallPeek, CallLease, CallReturn, CallCell, CallReset:
		_, args, err := c.callArgs(cl)
		if err != nil {
			return nil, err
		}
		op := [...]string{CallCheck: "check", CallPeek: "peek", CallLease: "lease", CallReturn: "return",
			CallCell: "cell", CallReset: "reset"}[cl.Kind]
		item := append([]any{op, key(cl.Key)}, args[1:]...) // args[0] is now, sent once
		if cl.Kind == CallCheck || cl.Kind == CallPeek {
			item = append(item[:2], args[2:]...) // and check.lua's mode is the op code
		}
		return item, nil
	}
	return nil, &Error{CodeArgs, errors.New("unknown call kind " + strconv.Itoa(int(cl.Kind)))}
}

// execResult decodes one element of exec.lua's reply into cl.
func execResult(cl *Call, v any) {
	if err, ok := v.(error); ok {
		cl.Err = classify(err)
		return
	}
	strs := func(want int) ([]string, bool) {
		a, ok := v.([]any)
		if !ok || len(a) != want {
			return nil, false
		}
		out := make([]string, len(a))
		for i, x := range a {
			if out[i], ok = x.(string); !ok {
				return nil, false
			}
		}
		return out, true
	}
	bad := &Error{CodeScript, errors.New("unexpected exec item reply")}
	switch cl.Kind {
	case CallCheck, CallPeek, CallLease:
		s, ok := strs(5)
		if !ok {
			cl.Err = bad
			return
		}
		cl.Err = decode(s, &cl.Decision)
	case CallReturn, CallReset:
		s, ok := v.(string)
		if !ok {
			cl.Err = bad
			return
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			cl.Err = &Error{CodeScript, err}
			return
		}
		cl.Count = n
	case CallCell:
		s, ok := strs(5)
		if !ok {
			cl.Err = bad
			return
		}
		var n [5]int64
		for i := range s {
			x, err := strconv.ParseInt(s[i], 10, 64)
			if err != nil {
				cl.Err = &Error{CodeScript, err}
				return
			}
			n[i] = x
		}
		cl.CellReply = engine.CellReply{Limited: n[0], Limit: n[1], Remaining: n[2], RetryAfter: n[3], ResetAfter: n[4]}
	case CallMCheck:
		s, ok := strs(2 + 5*len(cl.Rules))
		if !ok {
			cl.Err = bad
			return
		}
		m := MDecision{Allowed: s[0] == "1", Decisions: make([]engine.Decision, len(cl.Rules))}
		var err error
		if m.RetryAfter, err = strconv.ParseInt(s[1], 10, 64); err != nil {
			cl.Err = &Error{CodeScript, err}
			return
		}
		for i := range cl.Rules {
			if err := decode(s[2+5*i:7+5*i], &m.Decisions[i]); err != nil {
				cl.Err = err
				return
			}
		}
		cl.MDecision = m
	}
}
