package server

import (
	"errors"
	"testing"

	"github.com/throttlekit/throttlekit-server/engine"
)

// TestEngineErrorWire pins the wire text of every engine error, in the
// THROTTLE.* wording and in CL.THROTTLE's (redis-cell's) wording.
func TestEngineErrorWire(t *testing.T) {
	tests := []struct {
		err        *engine.Error
		line, cell string
	}{
		{engine.ErrWrongType, "WRONGTYPE Operation against a key holding the wrong kind of value", "WRONGTYPE Operation against a key holding the wrong kind of value"},
		{engine.ErrLimit, "ERR limit must be positive", "ERR limit must be positive"},
		{engine.ErrPeriod, "ERR period must be positive", "ERR period must be positive"},
		{engine.ErrBurst, "ERR burst must not be negative", "Cell error: Store error: max_burst must not be negative"},
		{engine.ErrAlgo, "ERR unknown algorithm", "ERR unknown algorithm"},
		{engine.ErrOutOfRange, "ERR limit, period or burst out of range", "Cell error: Store error: arguments out of range"},
		{engine.ErrNegativeCost, "ERR cost must not be negative", "ERR cost must not be negative"},
		{engine.ErrLeaseAlgo, "ERR lease needs a fixed-window limit", "ERR lease needs a fixed-window limit"},
		{engine.ErrZeroRate, "ERR zero rate", "Cell error: Store error: Zero rates are not supported"},
		{engine.ErrNegativeRate, "ERR count and period must not be negative", "Cell error: Store error: count and period must not be negative"},
		{engine.ErrQuantityRange, "ERR quantity out of range", "Cell error: Store error: quantity out of range"},
		{engine.ErrGCRAPeriod, "ERR period must be > 0 and < 1e12", "ERR period must be > 0 and < 1e12"},
		{engine.ErrGCRATokensOverflow, "ERR " + gcraOverflow + "TOKENS would cause an overflow", "ERR " + gcraOverflow + "TOKENS would cause an overflow"},
		{engine.ErrGCRABurstOverflow, "ERR " + gcraOverflow + "max_burst would cause an overflow", "ERR " + gcraOverflow + "max_burst would cause an overflow"},
	}
	if len(tests) != int(engine.NumCodes)-1 {
		t.Fatalf("%d errors tested, engine has %d codes", len(tests), engine.NumCodes-1)
	}
	for _, tt := range tests {
		for _, cell := range []bool{false, true} {
			code, msg := engineWireText(tt.err, cell)
			want := tt.line
			if cell {
				want = tt.cell
			}
			if got := code + " " + msg; got != want {
				t.Errorf("%v (cell %v): %q, want %q", tt.err, cell, got, want)
			}
		}
	}
	// A wrapped engine error keeps its wording; any other error is ERR.
	if code, msg := engineWireText(errors.Join(engine.ErrLimit), false); code != "ERR" || msg != "limit must be positive" {
		t.Errorf("wrapped: %s %s", code, msg)
	}
	if code, msg := engineWireText(errors.New("boom"), true); code != "ERR" || msg != "boom" {
		t.Errorf("foreign error: %s %s", code, msg)
	}
}

// TestEngineErrorsCounted: engine errors count under their reply code.
func TestEngineErrorsCounted(t *testing.T) {
	tl := newTestLoop(t, nil)
	tl.run(cmd("THROTTLE.CHECK", "k", "0", "1s") + cmd("CL.THROTTLE", "k", "1", "0", "1") +
		cmd("THROTTLE.CHECK", "c", "1", "1s", "ALGO", "fixed") + cmd("CL.THROTTLE", "c", "1", "1", "1") + cmd("CL.THROTTLE", "d", "1", "1", "1", "x"))
	tl.l.ctr.flush(&tl.l.pub)
	if e, c, w := tl.l.pub.errs[errKindERR].Load(), tl.l.pub.errs[errKindCell].Load(), tl.l.pub.errs[errKindWrongType].Load(); e != 1 || c != 2 || w != 1 {
		t.Fatalf("ERR %d Cell %d WRONGTYPE %d, want 1 2 1", e, c, w)
	}
}
