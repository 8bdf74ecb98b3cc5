package server

import (
	"github.com/throttlekit/throttlekit-server/engine"
)

// watchScan is how many watched keys WATCH compares one by one to find a
// repeat; past it, it keeps an index, so watching n keys costs O(n).
const watchScan = 16

// watchedKey is a watched key's snapshot: where its name ends in wbuf and
// what the store held for it at WATCH.
type watchedKey struct {
	end      int
	st       engine.State
	expireAt int64
	ok       bool
}

// unwatchAll forgets cl's watched keys.
func unwatchAll(cl *client) {
	m := cl.multi
	if m == nil {
		return
	}
	if cap(m.wbuf) > maxKeptQueue || cap(m.watched) > maxKeptQueue/32 {
		m.wbuf, m.watched = nil, nil
	}
	m.wbuf, m.watched, m.index = m.wbuf[:0], m.watched[:0], nil
}

// WATCH key [key ...]
func (l *loop) watch(cl *client, args [][]byte, now int64) result {
	if cl.inMulti() {
		l.errorReply("ERR", "WATCH inside MULTI is not allowed")
		return failed
	}
	m := cl.txState()
	for _, k := range args[1:] {
		if m.watching(k) {
			continue
		}
		if len(m.watched) >= l.srv.cfg.MaxArgs {
			l.errorReply("ERR", "too many watched keys (max-args reached)")
			return failed
		}
		st, exp, ok := l.srv.core.Lookup(k, now, nil)
		m.wbuf = append(m.wbuf, k...)
		m.watched = append(m.watched, watchedKey{end: len(m.wbuf), st: st, expireAt: exp, ok: ok})
		switch {
		case m.index != nil:
			m.index[string(k)] = struct{}{}
		case len(m.watched) > watchScan:
			m.index = make(map[string]struct{}, 2*len(m.watched))
			start := 0
			for _, w := range m.watched {
				m.index[string(m.wbuf[start:w.end])] = struct{}{}
				start = w.end
			}
		}
	}
	l.out = appendOK(l.out)
	return replied
}

// watching reports whether k is already watched.
func (m *multiState) watching(k []byte) bool {
	if m.index != nil {
		_, ok := m.index[string(k)]
		return ok
	}
	start := 0
	for _, w := range m.watched {
		if string(m.wbuf[start:w.end]) == string(k) {
			return true
		}
		start = w.end
	}
	return false
}

// UNWATCH
func (l *loop) unwatch(cl *client, _ [][]byte, _ int64) result {
	unwatchAll(cl)
	l.out = appendOK(l.out)
	return replied
}

// watchesHold reports whether every watched key still holds its snapshot.
// It runs with the Txn locked.
func (m *multiState) watchesHold(l *loop, now int64) bool {
	start := 0
	for _, w := range m.watched {
		st, exp, ok := l.srv.core.Lookup(m.wbuf[start:w.end], now, l.sec())
		start = w.end
		if ok != w.ok || ok && (st != w.st || exp != w.expireAt) {
			return false
		}
	}
	return true
}
