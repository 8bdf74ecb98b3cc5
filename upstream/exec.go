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
// check.lua call plus each item's own work. A transaction holding an
// admission call or GCRA is sent as a second script, which also holds
// their functions (exec_admission.lua) and so pays for creating them on
// every call; the others do not.
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
		if answered(cl) {
			continue
		}
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
	script := c.s.exec
	for _, i := range sent {
		if calls[i].Kind >= CallGCRA {
			script = c.s.execAdmission
			break
		}
	}
	v, err := c.run(ctx, script, keys, args...).Slice()
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

// answered completes a call whose answer needs no upstream, as the
// Client method of its kind answers it: a token naming a slot out of
// range holds nothing.
func answered(cl *Call) bool {
	switch cl.Kind {
	case CallRelease, CallRefresh:
		if cl.Kind == CallRefresh && cl.TTL <= 0 {
			return false // execItem refuses it
		}
		if cl.Slot.Slot < 0 || cl.Slot.Slot >= MaxSlots {
			cl.Count, cl.Err = 0, nil
			return true
		}
	}
	return false
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
	case CallGCRA:
		_, args, err := c.callArgs(cl)
		if err != nil {
			return nil, err
		}
		return append([]any{"gcra", key(cl.Key)}, args[1:]...), nil
	}
	return c.execAdmission(cl, key)
}

// execAdmission is execItem for the admission calls: it checks the
// arguments as the Client method of cl's kind does and names the records
// beside the user key (records.go), which share its hash slot.
func (c *Client) execAdmission(cl *Call, key func(string) string) ([]any, error) {
	ttl := func() error {
		if cl.TTL <= 0 {
			return &Error{CodeArgs, errors.New("ttl must be positive")}
		}
		return nil
	}
	switch cl.Kind {
	case CallAcquire:
		if cl.N < 1 || cl.N > MaxSlots {
			return nil, &Error{CodeArgs, errors.New("limit must be an integer from 1 to 1024")}
		}
		if err := ttl(); err != nil {
			return nil, err
		}
		return []any{"acquire", key(recordKey('s', cl.Key, "")), cl.N, cl.TTL}, nil
	case CallRelease:
		return []any{"release", key(recordKey('s', cl.Key, "")), cl.Slot.Slot, cl.Slot.Gen}, nil
	case CallRefresh:
		if err := ttl(); err != nil {
			return nil, err
		}
		return []any{"refresh", key(recordKey('s', cl.Key, "")), cl.Slot.Slot, cl.Slot.Gen, cl.TTL}, nil
	case CallCheckBan:
		l, err := limitArgs(cl.Limit)
		if err != nil {
			return nil, err
		}
		b := cl.Ban
		if b.Threshold <= 0 || b.Duration <= 0 || b.Window != l.Period {
			return nil, &Error{CodeArgs, errors.New("ban threshold and duration must be positive, its window the limit's period")}
		}
		return []any{"checkban", key(cl.Key), key(recordKey('b', cl.Key, "")), l.Algo.String(), l.Limit, l.Period,
			l.Burst, cl.N, b.Threshold, b.Duration}, nil
	case CallBanned, CallUnban:
		op := "banned"
		if cl.Kind == CallUnban {
			op = "unban"
		}
		return []any{op, key(recordKey('b', cl.Key, ""))}, nil
	case CallReserve:
		l := cl.Limit
		l.Burst = 0
		l, err := limitArgs(l)
		if err != nil {
			return nil, err
		}
		if err := ttl(); err != nil {
			return nil, err
		}
		// A drawn id in use on the key (one chance in 2^63 per open
		// reservation) fails this item with the script's TKDUP error:
		// unlike Reserve, a transaction cannot draw again.
		cl.Reservation = Reservation{Seq: c.draw(), Limit: l}
		return []any{"reserve", key(cl.Key), key(cl.Reservation.recordKey(cl.Key)), l.Algo.String(), l.Limit, l.Period,
			cl.N, cl.TTL}, nil
	case CallSettle:
		r := cl.Reservation
		l, err := limitArgs(engine.Limit{Algo: r.Limit.Algo, Limit: r.Limit.Limit, Period: r.Limit.Period})
		if err != nil {
			return nil, err
		}
		if cl.N < 0 {
			return nil, &Error{CodeEngine, engine.ErrNegativeCost}
		}
		return []any{"settle", key(cl.Key), key(r.recordKey(cl.Key)), l.Algo.String(), l.Limit, l.Period, cl.N}, nil
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
	case CallCheck, CallPeek, CallLease, CallCheckBan, CallReserve:
		s, ok := strs(5)
		if !ok {
			cl.Err = bad
			return
		}
		cl.Err = decode(s, &cl.Decision)
	case CallReturn, CallReset, CallRelease, CallRefresh, CallBanned, CallUnban, CallSettle:
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
	case CallCell, CallGCRA, CallAcquire:
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
		switch cl.Kind {
		case CallCell:
			cl.CellReply = engine.CellReply{Limited: n[0], Limit: n[1], Remaining: n[2], RetryAfter: n[3], ResetAfter: n[4]}
		case CallGCRA:
			cl.GCRAReply = engine.RateGCRAReply{Limited: n[0], Burst: n[1], Remaining: n[2], RetryAfter: n[3], ResetAfter: n[4]}
		default:
			cl.Slot = SlotGrant{Acquired: n[0] == 1, InFlight: n[1], Slot: n[2], Gen: n[3], RetryAfter: n[4]}
		}
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
