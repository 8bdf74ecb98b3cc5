package server

// Keyspace commands over limit keys, with Redis 7's replies: DEL, UNLINK,
// EXISTS, TYPE, TTL, PTTL, SCAN, KEYS, FLUSHALL and FLUSHDB (DBSIZE is in
// cmd_info.go).
//
// A key holds rate-limit state, so its "type" is the algorithm whose state
// it holds (gcra, token, fixed, sliding) and its time to live is the time
// until its state equals a fresh key's, when the store drops it. Every key
// has such an expiry, so TTL and PTTL never answer -1 (no expiry) here;
// they answer -2 for an absent key, as Redis does.
//
// SCAN's cursor is the store's (shard.Store.Scan): stateless, so a client
// may drop a scan at any time, and every key held from the first call to
// the last is returned at least once, whatever happens in between. MATCH
// and TYPE filter each page after it is read, as in Redis, so a page may
// be empty while the scan goes on. KEYS is a whole scan with duplicates
// removed: it returns every key held throughout the call, without
// stopping the server as Redis's KEYS does, at the price of O(keys) time
// and memory for the reply.

import (
	"strconv"

	"github.com/throttlekit/throttlekit-server/internal/glob"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/shard"
)

// EXISTS key [key ...]: the number of arguments naming a held key; a key
// named twice counts twice, as in Redis.
func (l *loop) exists(_ *client, args [][]byte, now int64) result {
	n := int64(0)
	for _, k := range args[1:] {
		if _, _, ok := l.srv.core.Lookup(k, now, l.sec()); ok {
			n++
		}
	}
	l.out = appendInt(l.out, n)
	return replied
}

// TYPE key
func (l *loop) typeCmd(_ *client, args [][]byte, now int64) result {
	st, _, ok := l.srv.core.Lookup(args[1], now, l.sec())
	if !ok {
		st.Kind = engine.KindNone
	}
	l.out = appendSimple(l.out, st.Kind.String())
	return replied
}

// TTL key
func (l *loop) ttl(_ *client, args [][]byte, now int64) result {
	l.out = appendInt(l.out, l.pttlOf(args[1], now, false))
	return replied
}

// PTTL key
func (l *loop) pttl(_ *client, args [][]byte, now int64) result {
	l.out = appendInt(l.out, l.pttlOf(args[1], now, true))
	return replied
}

// pttlOf returns key's time to live in milliseconds (ms) or seconds
// rounded to the nearest, as Redis rounds TTL; -2 if the key is absent.
func (l *loop) pttlOf(key []byte, now int64, ms bool) int64 {
	_, exp, ok := l.srv.core.Lookup(key, now, l.sec())
	if !ok {
		return -2
	}
	left := (exp - now) / 1_000_000
	if ms {
		return left
	}
	return (left + 500) / 1000
}

// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
func (l *loop) scan(cl *client, args [][]byte, now int64) result {
	cursor, ok := parseCursor(args[1])
	if !ok {
		l.errorReply("ERR", "invalid cursor")
		return failed
	}
	var pattern []byte
	count := shard.DefaultScanCount
	typ := -1 // any kind
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			l.errSyntax()
			return failed
		}
		v := args[i+1]
		switch {
		case equalFold(args[i], "match"):
			pattern = v
		case equalFold(args[i], "count"):
			n, ok := parseInt64(v)
			if !ok {
				l.errNotInt()
				return failed
			}
			if n < 1 {
				l.errSyntax()
				return failed
			}
			count = int(min(n, 1<<30))
		case equalFold(args[i], "type"):
			typ = 1 << 8 // an unknown type matches nothing, as in Redis 7.0
			for k := engine.KindGCRA; k <= engine.KindRateGCRA; k++ {
				if equalFold(v, k.String()) {
					typ = int(k)
				}
			}
		default:
			l.errSyntax()
			return failed
		}
	}
	p := &l.tx.page
	next, err := l.srv.core.Scan(p, cursor, count, now, l.sec())
	if err != nil {
		l.errorReply("ERR", "invalid cursor")
		return failed
	}
	n := 0
	for i := 0; i < p.Len(); i++ {
		if keep(cl, p, i, pattern, typ) {
			n++
		}
	}
	l.out = appendArray(l.out, 2)
	l.out = appendBulk(l.out, strconv.AppendUint(nil, next, 10))
	l.out = appendArray(l.out, n)
	for i := 0; i < p.Len(); i++ {
		if keep(cl, p, i, pattern, typ) {
			l.out = appendBulk(l.out, p.Key(i))
		}
	}
	p.Reset()
	return replied
}

// keep reports whether the i-th key of p passes SCAN's MATCH and TYPE
// filters (a nil pattern and a negative typ accept everything) and cl's user
// may read it.
func keep(cl *client, p *shard.ScanPage, i int, pattern []byte, typ int) bool {
	if typ >= 0 && int(p.Kind(i)) != typ {
		return false
	}
	if !cl.mayRead(p.Key(i)) {
		return false
	}
	return pattern == nil || matchBytes(p.Key(i), pattern)
}

// matchBytes matches key against a Redis glob pattern.
func matchBytes(key, pattern []byte) bool {
	if len(pattern) == 1 && pattern[0] == '*' {
		return true
	}
	return glob.Match(string(pattern), key)
}

// parseCursor parses a SCAN cursor: an unsigned 64-bit decimal number.
func parseCursor(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b), 10, 64)
	return n, err == nil
}

// keysScanCount is how many keys KEYS asks the store for per page.
const keysScanCount = 1024

// KEYS pattern
func (l *loop) keys(cl *client, args [][]byte, now int64) result {
	pattern := args[1]
	p := &l.tx.page
	seen := make(map[string]struct{})
	var found []string
	for cursor := uint64(0); ; {
		next, err := l.srv.core.Scan(p, cursor, keysScanCount, now, l.sec())
		if err != nil {
			break // a cursor the store handed out is never bad
		}
		for i := 0; i < p.Len(); i++ {
			k := p.Key(i)
			if _, dup := seen[string(k)]; dup || !matchBytes(k, pattern) || !cl.mayRead(k) {
				continue
			}
			s := string(k)
			seen[s] = struct{}{}
			found = append(found, s)
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	p.Reset()
	l.out = appendArray(l.out, len(found))
	for _, k := range found {
		l.out = appendBulkString(l.out, k)
	}
	return replied
}

// FLUSHALL [ASYNC|SYNC] and FLUSHDB [ASYNC|SYNC]: the store is emptied at
// once either way (it takes every shard lock, as Redis's synchronous flush
// blocks its server; inside EXEC, the transaction holds them).
func (l *loop) flushAll(_ *client, args [][]byte, now int64) result {
	if len(args) > 2 || len(args) == 2 && !equalFold(args[1], "async") && !equalFold(args[1], "sync") {
		l.errSyntax()
		return failed
	}
	l.srv.core.FlushAll(now, l.sec())
	l.out = appendOK(l.out)
	return replied
}
