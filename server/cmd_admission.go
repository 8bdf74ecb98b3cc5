package server

// The admission commands beyond one limit (THROTTLE.MCHECK, RESERVE,
// SETTLE, ACQUIRE, RELEASE, REFRESH, BANNED, UNBAN and THROTTLE.CHECK ...
// BAN) parse their arguments here and run as package limits' operations,
// which own the internal records, their encoding, lock order and
// invariants (see the limits package doc).

import (
	"errors"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
)

const (
	// DefaultAdmissionMaxRecords is the internal store's record bound when
	// Config.AdmissionMaxRecords is 0.
	DefaultAdmissionMaxRecords = limits.DefaultMaxRecords
	// DefaultAdmissionMaxMemory is the internal store's byte bound when
	// Config.AdmissionMaxMemory is 0.
	DefaultAdmissionMaxMemory = limits.DefaultMaxMemory
)

// admOps are one loop's operation values for the admission commands,
// reused for every command so that running one allocates nothing.
type admOps struct {
	mcheck  limits.MCheck
	reserve limits.Reserve
	settle  limits.Settle
	acquire limits.Acquire
	slot    limits.SlotCall
	ban     limits.CheckBan
	banq    limits.BanCall
	args    [][]byte // THROTTLE.CHECK arguments without BAN
	idb     []byte   // reservation id or slot token being written
}

// sec returns the section the loop's store calls run inside: EXEC's Txn
// while it is locked, else nil (each call locks its own keys).
func (l *loop) sec() *limits.Section {
	if l.tx.locked {
		return &l.tx.txn
	}
	return nil
}

// limitsError appends err, an error of a limits operation, as an error
// reply.
func (l *loop) limitsError(err error) {
	switch {
	case errors.Is(err, limits.ErrRecordsFull):
		l.errorReply("OOM", "admission records full (admission-maxrecords, admission-maxmemory): nothing was acquired or charged")
	case errors.Is(err, limits.ErrKeyTooLong):
		l.errorReply("ERR", "key is too long")
	case errors.Is(err, limits.ErrCrossSlot):
		l.errorReply("CROSSSLOT", "Keys in request don't hash to the same slot")
	case errors.Is(err, limits.ErrUnavailable):
		l.errorReply("TRYAGAIN", "upstream unavailable")
	case errors.Is(err, limits.ErrUpstream):
		l.errorReply("ERR", "upstream error")
	case errors.Is(err, limits.ErrUnsupported):
		l.errorReply("ERR", "this command is not available with an upstream yet")
	default:
		l.engineError(err)
	}
}

// admKeyArg checks a user key of an admission command.
func (l *loop) admKeyArg(key []byte) bool {
	if len(key) > limits.MaxKeyLen || len(key) > l.srv.cfg.MaxKeyLen {
		l.errorReply("ERR", "key is too long")
		return false
	}
	return true
}

// decisionWith appends d as THROTTLE.CHECK's reply with a sixth field, a
// bulk string or (nil extra) a null: a 6-element array in RESP2, a map in
// RESP3.
func (l *loop) decisionWith(cl *client, d *engine.Decision, name string, extra []byte) {
	l.decisionFields(cl, d, "allowed", 6)
	if cl.resp3 {
		l.out = appendBulkString(l.out, name)
	}
	if extra == nil {
		l.out = appendNull(l.out, cl.resp3)
	} else {
		l.out = appendBulk(l.out, extra)
	}
}

// durationArg parses a positive duration argument (a bare integer counts
// milliseconds); on bad input it replies "<what> must be a positive duration".
func (l *loop) durationArg(b []byte, what string) (int64, bool) {
	d, ok := parsePeriod(b)
	if !ok || d <= 0 {
		l.errorReply("ERR", what+" must be a positive duration such as 1500, 250ms or 2s")
		return 0, false
	}
	return d, true
}
