package upstream

import (
	"embed"
	"regexp"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// scriptSet holds the scripts of one Client: each is the part of
// scripts/lib.lua its operation uses followed by the operation file.
type scriptSet struct {
	check, mcheck, reset, lease, ret, cell, exec, gcra *redis.Script
	execAdmission                                      *redis.Script // exec.lua with exec_admission.lua's operations
	slots, ban, banned, reserve, leaseAlgo, retAlgo    *redis.Script
}

func loadScripts() scriptSet {
	lib := splitLib(mustRead("lib.lua"))
	op := func(name string) *redis.Script { return redis.NewScript(lib.assemble(mustRead(name))) }
	return scriptSet{
		check:  op("check.lua"),
		mcheck: op("mcheck.lua"),
		reset:  op("reset.lua"),
		lease:  op("lease.lua"),
		ret:    op("return.lua"),
		cell:   op("cell.lua"),
		exec:   op("exec.lua"),
		// The same with the admission operations and GCRA, whose lib.lua
		// functions the plain one leaves out (every call would create them).
		execAdmission: redis.NewScript(lib.assemble(strings.Replace(mustRead("exec.lua"), execNoAdmission,
			mustRead("exec_admission.lua"), 1))),

		slots:   op("slots.lua"),
		ban:     op("ban.lua"),
		banned:  op("banned.lua"),
		reserve: op("reserve.lua"),
		gcra:    op("gcra.lua"),

		leaseAlgo: op("lease_algo.lua"),
		retAlgo:   op("return_algo.lua"),
	}
}

// execNoAdmission is exec.lua's empty table of the operations that
// exec_admission.lua's table replaces.
const execNoAdmission = "local opArgs = {}\n"

func mustRead(name string) string {
	b, err := scriptFS.ReadFile("scripts/" + name)
	if err != nil {
		panic("upstream: embedded script missing: " + name) // unreachable: go:embed checked it at build time
	}
	return string(b)
}

// all returns every script, for SCRIPT LOAD.
func (s *scriptSet) all() []*redis.Script {
	return []*redis.Script{s.check, s.mcheck, s.reset, s.lease, s.ret, s.cell, s.exec, s.execAdmission, s.gcra, s.slots, s.ban, s.banned, s.reserve, s.leaseAlgo, s.retAlgo}
}

// libBlock is one top-level statement of lib.lua with the comment lines
// before it: a definition ("local function f" or "local f = ...", name f)
// or a statement that every script runs (name "").
type libBlock struct {
	name, text string
}

// lib is lib.lua cut into its top-level statements, in file order.
type lib []libBlock

var (
	libDef   = regexp.MustCompile(`^local (?:function )?([A-Za-z_][A-Za-z0-9_]*)`)
	luaIdent = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
)

// splitLib cuts src where a line starts in column 0 with anything but a
// comment or "end": lib.lua's functions and locals are written that way,
// their bodies indented.
func splitLib(src string) lib {
	var l lib
	var pending strings.Builder
	for _, line := range strings.SplitAfter(src, "\n") {
		t := strings.TrimRight(line, "\r\n")
		switch {
		case t == "" || strings.HasPrefix(t, "--"):
			pending.WriteString(line)
		case t[0] != ' ' && t[0] != '\t' && t != "end" && !strings.HasPrefix(t, "end "):
			name := ""
			if m := libDef.FindStringSubmatch(t); m != nil {
				name = m[1]
			}
			l = append(l, libBlock{name: name, text: pending.String() + line})
			pending.Reset()
		default:
			if len(l) == 0 {
				l = append(l, libBlock{})
			}
			l[len(l)-1].text += pending.String() + line
			pending.Reset()
		}
	}
	return l
}

// assemble returns the script of the operation op: the blocks of l that op
// uses, directly or through other blocks, in l's order (each defined
// before its users, as in lib.lua), then op. Lua creates every function of
// a script on every call, so a block left out is a cost saved. A name
// counts as used wherever it appears outside a comment line, so a block is
// at worst included when not needed, never left out when needed.
func (l lib) assemble(op string) string {
	index := make(map[string]int, len(l))
	for i, b := range l {
		if b.name != "" {
			index[b.name] = i
		}
	}
	keep := make([]bool, len(l))
	var visit func(text string)
	visit = func(text string) {
		for _, w := range luaIdent.FindAllString(codeOnly(text), -1) {
			if i, ok := index[w]; ok && !keep[i] {
				keep[i] = true
				visit(l[i].text)
			}
		}
	}
	for i, b := range l {
		if b.name == "" {
			keep[i] = true
			visit(b.text)
		}
	}
	visit(op)
	var s strings.Builder
	for i, b := range l {
		if keep[i] {
			s.WriteString(b.text)
		}
	}
	s.WriteString("\n")
	s.WriteString(op)
	return s.String()
}

// codeOnly drops the comment lines of text.
func codeOnly(text string) string {
	var s strings.Builder
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			s.WriteString(line)
			s.WriteByte('\n')
		}
	}
	return s.String()
}
