package server

import (
	"strconv"
	"strings"
)

// MEMORY and OBJECT: what one key costs and how it is kept, answered for
// this store rather than mimicking Redis's objects.
//
// MEMORY USAGE reports shard.Store.Usage: the key's record in its shard's
// entry chunks (entry and timer links), its share of the shard's index
// table, and its bytes in the key arena when it is longer than the 16
// bytes a record holds inline. SAMPLES is accepted and changes nothing:
// no value here is nested. OBJECT ENCODING names the key's algorithm (the
// TYPE name); REFCOUNT is 1 (nothing is shared); FREQ answers Redis's
// error for a non-LFU policy, since eviction here is CLOCK (one reference
// bit per key); IDLETIME answers an error of its own: no access time is
// kept, and the reference bit cannot tell seconds.

func memorySubcommands() []cmdSpec {
	const g = "server"
	return []cmdSpec{
		{name: "memory|doctor", arity: 2, run: (*loop).memoryDoctor,
			group: g, since: "4.0.0", summary: "Outputs a memory problems report.",
			help: []string{"DOCTOR", "    Return a report on how the store's memory is used."}},
		{name: "memory|stats", arity: 2, run: (*loop).memoryStats,
			group: g, since: "4.0.0", summary: "Returns details about memory usage.",
			help: []string{"STATS", "    Return the store's memory figures."}},
		{name: "memory|usage", arity: -3, flags: flagReadonly, firstKey: 2, lastKey: 2, step: 1, run: (*loop).memoryUsage,
			group: g, since: "4.0.0", complexity: "O(1)",
			summary: "Estimates the memory usage of a key.",
			args:    []argDoc{{name: "key", typ: "key"}, {name: "count", typ: "integer", token: "SAMPLES", optional: true}},
			help: []string{"USAGE <key> [SAMPLES <count>]",
				"    Return the bytes <key> holds in the store: its record, its share of the",
				"    index table and its bytes in the key arena (SAMPLES changes nothing)."}},
		helpSub("memory", "4.0.0", g, 0),
	}
}

func objectSubcommands() []cmdSpec {
	const g = "generic"
	key := []argDoc{{name: "key", typ: "key"}}
	return []cmdSpec{
		{name: "object|encoding", arity: 3, flags: flagReadonly, cats: catKeyspace, firstKey: 2, lastKey: 2, step: 1, run: (*loop).objectEncoding,
			group: g, since: "2.2.3", summary: "Returns the internal encoding of a key: its algorithm.", args: key,
			help: []string{"ENCODING <key>", "    Return the algorithm whose state <key> holds."}},
		{name: "object|freq", arity: 3, flags: flagReadonly, cats: catKeyspace, firstKey: 2, lastKey: 2, step: 1, run: (*loop).objectFreq,
			group: g, since: "4.0.0", summary: "Returns the logarithmic access frequency counter of a key (not kept: eviction is CLOCK).", args: key,
			help: []string{"FREQ <key>", "    Not tracked: eviction is CLOCK, not LFU."}},
		{name: "object|idletime", arity: 3, flags: flagReadonly, cats: catKeyspace, firstKey: 2, lastKey: 2, step: 1, run: (*loop).objectIdletime,
			group: g, since: "2.2.3", summary: "Returns the time since the last access to a key (not kept).", args: key,
			help: []string{"IDLETIME <key>", "    Not tracked: keys keep one CLOCK reference bit, not an access time."}},
		{name: "object|refcount", arity: 3, flags: flagReadonly, cats: catKeyspace, firstKey: 2, lastKey: 2, step: 1, run: (*loop).objectRefcount,
			group: g, since: "2.2.3", summary: "Returns the reference count of a key's value: 1.", args: key,
			help: []string{"REFCOUNT <key>", "    Return 1: no value is shared."}},
		helpSub("object", "6.2.0", g, catKeyspace),
	}
}

// MEMORY USAGE key [SAMPLES count]
func (l *loop) memoryUsage(cl *client, args [][]byte, now int64) result {
	for j := 3; j < len(args); j += 2 { // as Redis: SAMPLES may repeat; the last one wins
		if !equalFold(args[j], "samples") || j+1 >= len(args) {
			l.errSyntax()
			return failed
		}
		n, ok := parseInt64(args[j+1])
		if !ok {
			l.errNotInt()
			return failed
		}
		if n < 0 {
			l.errSyntax()
			return failed
		}
	}
	u, ok := l.srv.core.Usage(args[2], now)
	if !ok {
		l.out = appendNull(l.out, cl.resp3)
		return replied
	}
	l.out = appendInt(l.out, u.Total())
	return replied
}

// MEMORY STATS: the store's figures with Redis's names where one means the
// same, and the store's own otherwise.
func (l *loop) memoryStats(cl *client, _ [][]byte, _ int64) result {
	ss := l.srv.core.Stats()
	keys := ss.Keys
	perKey := int64(0)
	if keys > 0 {
		perKey = ss.Bytes / keys
	}
	pairs := []struct {
		name string
		v    int64
	}{
		{"keys.count", keys},
		{"keys.bytes-per-key", perKey},
		{"dataset.bytes", ss.Bytes},
		{"store.offheap.bytes", l.srv.core.OffHeapBytes()},
		{"store.maxmemory", l.srv.cfg.MaxMemory},
		{"store.evicted", ss.Evicted},
		{"store.expired", ss.Expired},
	}
	l.out = appendMap(l.out, len(pairs), cl.resp3)
	for _, p := range pairs {
		l.out = appendBulkString(l.out, p.name)
		l.out = appendInt(l.out, p.v)
	}
	return replied
}

// MEMORY DOCTOR
func (l *loop) memoryDoctor(cl *client, _ [][]byte, _ int64) result {
	ss := l.srv.core.Stats()
	var b strings.Builder
	switch {
	case ss.Keys == 0:
		b.WriteString("The store holds no keys: nothing to report.\n")
	default:
		b.WriteString("The store holds " + strconv.FormatInt(ss.Keys, 10) + " keys in " + strconv.FormatInt(ss.Bytes, 10) + " bytes (" +
			strconv.FormatInt(ss.Bytes/ss.Keys, 10) + " per key, records, tables and key arenas included).\n")
		if m := l.srv.cfg.MaxMemory; m > 0 && ss.Bytes*10 >= m*9 {
			b.WriteString("It is within 10% of maxmemory: new keys evict old ones (CLOCK).\n")
		}
		if ss.Evicted > 0 {
			b.WriteString(strconv.FormatInt(ss.Evicted, 10) + " keys were evicted to make room: raise maxkeys or maxmemory if they were still in use.\n")
		}
	}
	l.out = appendVerbatim(l.out, b.String(), cl.resp3)
	return replied
}

// objectKey replies null for an absent key, as Redis does, and reports
// whether the key is held.
func (l *loop) objectKey(cl *client, key []byte, now int64) (string, bool) {
	st, _, ok := l.srv.core.Lookup(key, now, l.sec())
	if !ok {
		l.out = appendNull(l.out, cl.resp3)
		return "", false
	}
	return st.Kind.String(), true
}

// OBJECT ENCODING key
func (l *loop) objectEncoding(cl *client, args [][]byte, now int64) result {
	if name, ok := l.objectKey(cl, args[2], now); ok {
		l.out = appendBulkString(l.out, name)
	}
	return replied
}

// OBJECT FREQ key
func (l *loop) objectFreq(cl *client, args [][]byte, now int64) result {
	if _, ok := l.objectKey(cl, args[2], now); !ok {
		return replied
	}
	l.errorReply("ERR", "An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.")
	return failed
}

// OBJECT IDLETIME key
func (l *loop) objectIdletime(cl *client, args [][]byte, now int64) result {
	if _, ok := l.objectKey(cl, args[2], now); !ok {
		return replied
	}
	l.errorReply("ERR", "idle time not tracked: eviction is CLOCK, which keeps one reference bit per key and no access time")
	return failed
}

// OBJECT REFCOUNT key
func (l *loop) objectRefcount(cl *client, args [][]byte, now int64) result {
	if _, ok := l.objectKey(cl, args[2], now); ok {
		l.out = appendInt(l.out, 1)
	}
	return replied
}
