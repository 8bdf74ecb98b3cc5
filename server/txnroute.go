package server

import (
	"errors"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// The store calls of every handler go through these methods: outside EXEC
// each is the shard.Store call itself; inside EXEC, whose shard.Txn already
// holds the shards of every key the queued commands declare (multi.go), each
// goes through that Txn, so a queued command neither takes a lock out of
// order nor waits for one its own loop holds.

// apply is Store.Apply, routed through the running transaction's Txn.
func (l *loop) apply(key []byte, now int64, t shard.Transform) {
	if !l.tx.locked {
		l.store.Apply(key, now, t)
		return
	}
	if err := l.tx.txn.Apply(key, now, t); err != nil {
		l.txnBug(err)
		t.Apply(engine.State{}, now)
	}
}

// get is Store.Get, routed through the running transaction's Txn.
func (l *loop) get(key []byte, now int64) (engine.State, bool) {
	if !l.tx.locked {
		return l.store.Get(key, now)
	}
	st, ok, err := l.tx.txn.Get(key, now)
	if err != nil {
		l.txnBug(err)
	}
	return st, ok
}

// lookup is Store.Lookup, routed through the running transaction's Txn.
func (l *loop) lookup(key []byte, now int64) (engine.State, int64, bool) {
	if !l.tx.locked {
		return l.store.Lookup(key, now)
	}
	st, exp, ok, err := l.tx.txn.Lookup(key, now)
	if err != nil {
		l.txnBug(err)
	}
	return st, exp, ok
}

// del is Store.Delete, routed through the running transaction's Txn.
func (l *loop) del(key []byte, now int64) bool {
	if !l.tx.locked {
		return l.store.Delete(key, now)
	}
	ok, err := l.tx.txn.Delete(key, now)
	if err != nil {
		l.txnBug(err)
	}
	return ok
}

// scanStore is Store.Scan, inside EXEC through its Txn (which then holds every
// shard: exec calls AddAll for a queue with a whole-keyspace command).
func (l *loop) scanStore(p *shard.ScanPage, cursor uint64, count int, now int64) (uint64, error) {
	if !l.tx.locked {
		return l.store.Scan(p, cursor, count, now)
	}
	next, err := l.tx.txn.Scan(p, cursor, count, now)
	if errors.Is(err, shard.ErrNotLocked) || errors.Is(err, shard.ErrTxnState) {
		l.txnBug(err)
		return 0, nil
	}
	return next, err
}

// flushStore is Store.FlushAll, inside EXEC through its Txn.
func (l *loop) flushStore(now int64) {
	if !l.tx.locked {
		l.store.FlushAll(now)
		return
	}
	if _, err := l.tx.txn.FlushAll(now); err != nil {
		l.txnBug(err)
	}
}

// storeLen is Store.Len, inside EXEC through its Txn.
func (l *loop) storeLen() int {
	if !l.tx.locked {
		return l.store.Len()
	}
	n, err := l.tx.txn.Len()
	if err != nil {
		l.txnBug(err)
	}
	return n
}

// txnBug logs a store call inside EXEC on a key EXEC did not declare: a
// command whose table entry lacks its key positions. The call acts on an
// absent key instead of taking a lock out of order.
func (l *loop) txnBug(err error) {
	l.srv.log.Error("transaction touched an undeclared key; check the command's key positions", "err", err)
}
