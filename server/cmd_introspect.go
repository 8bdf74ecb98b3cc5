package server

import (
	"math/bits"
	"strings"

	"github.com/throttlekit/throttlekit-server/internal/glob"
)

// COMMAND and HELP: every reply here is read from commandTable, so a new
// entry shows in COMMAND COUNT, LIST, INFO, DOCS, GETKEYS and its
// container's HELP without code of its own.

// appendSetLen writes the header of a set of n elements: "~n" in RESP3, an
// array in RESP2.
func appendSetLen(dst []byte, n int, resp3 bool) []byte {
	if resp3 {
		dst = append(dst, '~')
		dst = appendDecimal(dst, n)
		return append(dst, '\r', '\n')
	}
	return appendArray(dst, n)
}

// appendDecimal writes n in decimal.
func appendDecimal(dst []byte, n int) []byte {
	var buf [20]byte
	i := len(buf)
	for {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			break
		}
	}
	return append(dst, buf[i:]...)
}

// COMMAND: every top-level command's COMMAND INFO entry.
func (l *loop) commandAll(cl *client, _ [][]byte, _ int64) result {
	l.out = appendArray(l.out, int(numCmds))
	for i := range commandTable {
		l.commandInfo(&commandTable[i], cl.resp3)
	}
	return replied
}

// COMMAND COUNT: the number of top-level commands, as Redis counts them.
func (l *loop) commandCount(*client, [][]byte, int64) result {
	l.out = appendInt(l.out, int64(numCmds))
	return replied
}

// COMMAND INFO [command-name ...]: one entry per name ("container|sub"
// names a subcommand), a null for an unknown one; no names: every command.
func (l *loop) commandInfoCmd(cl *client, args [][]byte, now int64) result {
	if len(args) == 2 {
		return l.commandAll(cl, args, now)
	}
	l.out = appendArray(l.out, len(args)-2)
	for _, name := range args[2:] {
		if sp := lookupSpec(name); sp != nil {
			l.commandInfo(sp, cl.resp3)
		} else {
			l.out = appendNull(l.out, cl.resp3)
		}
	}
	return replied
}

// commandInfo writes one COMMAND INFO entry in Redis 7's ten-field form:
// name, arity, flags, first key, last key, step, ACL categories, tips, key
// specs, subcommands.
func (l *loop) commandInfo(sp *cmdSpec, r3 bool) {
	l.out = appendArray(l.out, 10)
	l.out = appendBulkString(l.out, sp.name)
	l.out = appendInt(l.out, int64(sp.arity))
	l.out = appendSetLen(l.out, bits.OnesCount32(uint32(sp.flags)), r3)
	for i := 0; i < numFlags; i++ {
		if sp.flags&(1<<i) != 0 {
			l.out = appendSimple(l.out, flagNames[i])
		}
	}
	l.out = appendInt(l.out, int64(sp.firstKey))
	l.out = appendInt(l.out, int64(sp.lastKey))
	l.out = appendInt(l.out, int64(sp.step))
	cats := sp.categoryNames()
	l.out = appendSetLen(l.out, len(cats), r3)
	for _, c := range cats {
		l.out = appendSimple(l.out, "@"+c)
	}
	l.out = appendSetLen(l.out, 0, r3) // tips
	l.out = appendSetLen(l.out, 0, r3) // key specs
	if len(sp.subs) == 0 {
		l.out = appendSetLen(l.out, 0, r3)
		return
	}
	l.out = appendArray(l.out, len(sp.subs))
	for i := range sp.subs {
		l.commandInfo(&sp.subs[i], r3)
	}
}

// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]:
// the names of every command and subcommand the filter keeps. There are no
// modules; categories and patterns match without regard to case.
func (l *loop) commandList(_ *client, args [][]byte, _ int64) result {
	keep := func(*cmdSpec) bool { return true }
	switch {
	case len(args) == 2:
	case len(args) == 5 && equalFold(args[2], "filterby"):
		val := lowerASCII(args[4])
		switch {
		case equalFold(args[3], "module"):
			keep = func(*cmdSpec) bool { return false }
		case equalFold(args[3], "aclcat"):
			cat := aclCats(0)
			for i, n := range catNames {
				if n == val {
					cat = 1 << i
				}
			}
			keep = func(sp *cmdSpec) bool { return sp.aclCategories()&cat != 0 }
		case equalFold(args[3], "pattern"):
			keep = func(sp *cmdSpec) bool { return glob.Match(val, []byte(sp.name)) }
		default:
			l.errSyntax()
			return failed
		}
	default:
		l.errSyntax()
		return failed
	}
	var names []string
	for i := range commandTable {
		sp := &commandTable[i]
		if keep(sp) {
			names = append(names, sp.name)
		}
		for j := range sp.subs {
			if keep(&sp.subs[j]) {
				names = append(names, sp.subs[j].name)
			}
		}
	}
	l.out = appendArray(l.out, len(names))
	for _, n := range names {
		l.out = appendBulkString(l.out, n)
	}
	return replied
}

// COMMAND DOCS [command-name ...]: a map from name to documentation; unknown
// names are left out; no names: every command.
func (l *loop) commandDocs(cl *client, args [][]byte, _ int64) result {
	var specs []*cmdSpec
	if len(args) == 2 {
		for i := range commandTable {
			specs = append(specs, &commandTable[i])
		}
	} else {
		for _, name := range args[2:] {
			if sp := lookupSpec(name); sp != nil {
				specs = append(specs, sp)
			}
		}
	}
	l.out = appendMap(l.out, len(specs), cl.resp3)
	for _, sp := range specs {
		l.out = appendBulkString(l.out, sp.name)
		l.commandDoc(sp, cl.resp3)
	}
	return replied
}

// commandDoc writes one COMMAND DOCS entry: summary, since, group,
// complexity, and the arguments and subcommands when there are any.
func (l *loop) commandDoc(sp *cmdSpec, r3 bool) {
	n := 4
	if len(sp.args) > 0 {
		n++
	}
	if len(sp.subs) > 0 {
		n++
	}
	complexity := sp.complexity
	if complexity == "" {
		complexity = "O(1)"
	}
	l.out = appendMap(l.out, n, r3)
	l.out = appendBulkString(l.out, "summary")
	l.out = appendBulkString(l.out, sp.summary)
	l.out = appendBulkString(l.out, "since")
	l.out = appendBulkString(l.out, sp.since)
	l.out = appendBulkString(l.out, "group")
	l.out = appendBulkString(l.out, sp.group)
	l.out = appendBulkString(l.out, "complexity")
	l.out = appendBulkString(l.out, complexity)
	if len(sp.args) > 0 {
		l.out = appendBulkString(l.out, "arguments")
		l.argDocs(sp.args, r3)
	}
	if len(sp.subs) > 0 {
		l.out = appendBulkString(l.out, "subcommands")
		l.out = appendMap(l.out, len(sp.subs), r3)
		for i := range sp.subs {
			l.out = appendBulkString(l.out, sp.subs[i].name)
			l.commandDoc(&sp.subs[i], r3)
		}
	}
}

// argDocs writes the "arguments" array of COMMAND DOCS.
func (l *loop) argDocs(args []argDoc, r3 bool) {
	l.out = appendArray(l.out, len(args))
	for _, a := range args {
		m := 3
		if a.token != "" {
			m++
		}
		nflags := 0
		if a.optional {
			nflags++
		}
		if a.multiple {
			nflags++
		}
		if nflags > 0 {
			m++
		}
		if len(a.sub) > 0 {
			m++
		}
		l.out = appendMap(l.out, m, r3)
		l.out = appendBulkString(l.out, "name")
		l.out = appendBulkString(l.out, a.name)
		l.out = appendBulkString(l.out, "type")
		l.out = appendBulkString(l.out, a.typ)
		l.out = appendBulkString(l.out, "display_text")
		l.out = appendBulkString(l.out, a.name)
		if a.token != "" {
			l.out = appendBulkString(l.out, "token")
			l.out = appendBulkString(l.out, a.token)
		}
		if nflags > 0 {
			l.out = appendBulkString(l.out, "flags")
			l.out = appendSetLen(l.out, nflags, r3)
			if a.optional {
				l.out = appendSimple(l.out, "optional")
			}
			if a.multiple {
				l.out = appendSimple(l.out, "multiple")
			}
		}
		if len(a.sub) > 0 {
			l.out = appendBulkString(l.out, "arguments")
			l.argDocs(a.sub, r3)
		}
	}
}

// COMMAND GETKEYS command [arg ...]: the key arguments of a full command,
// found from its key positions in the table.
func (l *loop) commandGetKeys(_ *client, args [][]byte, _ int64) result {
	full := args[2:]
	id, ok := lookup(full[0])
	if !ok {
		l.errorReply("ERR", "Invalid command specified")
		return failed
	}
	sp := &commandTable[id]
	if len(sp.subs) > 0 && len(full) > 1 {
		if sp = sp.sub(full[1]); sp == nil {
			l.errorReply("ERR", "Invalid command specified")
			return failed
		}
	}
	if sp.firstKey == 0 {
		l.errorReply("ERR", "The command has no key arguments")
		return failed
	}
	if !arityOK(sp.arity, len(full)) {
		l.errorReply("ERR", "Invalid number of arguments specified for command")
		return failed
	}
	first, last := sp.firstKey, sp.lastKey
	if last < 0 {
		last += len(full)
	}
	last = min(last, len(full)-1)
	if first > last {
		l.errorReply("ERR", "Invalid arguments specified for command")
		return failed
	}
	l.out = appendArray(l.out, (last-first)/sp.step+1)
	for i := first; i <= last; i += sp.step {
		l.out = appendBulk(l.out, full[i])
	}
	return replied
}

// help writes a container's HELP reply from the table: a header, the
// container's own lines, then each subcommand's usage and description, as
// an array of status lines as Redis sends it.
func (l *loop) help(_ *client, args [][]byte, _ int64) result {
	id, _ := lookup(args[0]) // dispatch found it
	sp := &commandTable[id]
	n := 1 + len(sp.help)
	for i := range sp.subs {
		n += len(sp.subs[i].help)
	}
	l.out = appendArray(l.out, n)
	l.out = appendSimple(l.out, strings.ToUpper(sp.name)+" <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, s := range sp.help {
		l.out = appendSimple(l.out, s)
	}
	for i := range sp.subs {
		for _, s := range sp.subs[i].help {
			l.out = appendSimple(l.out, s)
		}
	}
	return replied
}
