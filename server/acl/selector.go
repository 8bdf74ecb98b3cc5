package acl

import (
	"slices"
	"strings"
)

// KeyAccess says how a command touches a key: the server derives it from its
// key specs (Redis's ACCESS -> read; INSERT, DELETE, UPDATE -> write).
type KeyAccess uint8

// Key access flags. A pattern grants the access it names: "~p" grants both,
// "%R~p" reads only, "%W~p" writes only. A key needing both is granted only
// by a pattern granting both. A key with no flag is matched by any pattern.
const (
	KeyRead KeyAccess = 1 << iota
	KeyWrite
	KeyReadWrite = KeyRead | KeyWrite
)

// keyPattern is one "~pattern" rule with the access it grants.
type keyPattern struct {
	pattern string
	access  KeyAccess
}

// selector is one set of permissions: the root one ("user" rules outside
// parentheses) or a "(...)" selector. A command passes if any selector of
// the user allows the command and all its keys.
type selector struct {
	root        bool
	allKeys     bool // "~*" / allkeys: no key pattern is consulted
	allChannels bool // "&*" / allchannels
	allCommands bool // "+@all" and no rule removed anything since
	future      bool // the last +@all / -@all was +@all: describes as "+@all ..."
	bits        []uint64
	firstArgs   map[int][]string // command id -> allowed lower-case first args ("+select|0")
	keys        []keyPattern
	channels    []string
	rules       []string // ordered command rules after the leading +@all/-@all, lower case
}

func newSelector(t *table, root bool) selector {
	return selector{root: root, bits: make([]uint64, t.words)}
}

func (s *selector) clone() selector {
	c := *s
	c.bits = slices.Clone(s.bits)
	c.keys = slices.Clone(s.keys)
	c.channels = slices.Clone(s.channels)
	c.rules = slices.Clone(s.rules)
	if s.firstArgs != nil {
		c.firstArgs = make(map[int][]string, len(s.firstArgs))
		for k, v := range s.firstArgs {
			c.firstArgs[k] = slices.Clone(v)
		}
	}
	return c
}

func (s *selector) bit(id int) bool { return s.bits[id>>6]&(1<<uint(id&63)) != 0 }

func (s *selector) setBit(id int, v bool) {
	if v {
		s.bits[id>>6] |= 1 << uint(id&63)
	} else {
		s.bits[id>>6] &^= 1 << uint(id&63)
		s.allCommands = false
	}
}

// changePerm allows or denies a command and, for a container, all its
// subcommands; it drops the command's first-arg exceptions.
func (s *selector) changePerm(t *table, id int, allow bool) {
	s.setBit(id, allow)
	delete(s.firstArgs, id)
	for _, sub := range t.cmds[id].subs {
		s.setBit(sub, allow)
	}
}

// setCategory applies +@cat / -@cat: every command of the category (a
// container with all its subcommands) and every subcommand of the category.
func (s *selector) setCategory(t *table, cat int, allow bool) {
	mask := uint64(1) << uint(cat)
	for id := range t.cmds {
		if t.cmds[id].cats&mask != 0 {
			s.changePerm(t, id, allow)
		}
	}
}

// updateRules records a command rule (name without sign) so that ACL LIST
// shows the rules in the order given: an earlier rule for the same name, or
// for a subcommand or first-arg of it, is dropped first.
func (s *selector) updateRules(name string, allow bool) {
	name = asciiLower(name)
	out := s.rules[:0]
	for _, r := range s.rules {
		e := r[1:]
		if e == name || (len(e) > len(name) && e[len(name)] == '|' && e[:len(name)] == name) {
			continue
		}
		out = append(out, r)
	}
	sign := "-"
	if allow {
		sign = "+"
	}
	s.rules = append(out, sign+name)
}

func (s *selector) addFirstArg(id int, arg string) {
	arg = asciiLower(arg)
	if s.firstArgs == nil {
		s.firstArgs = make(map[int][]string)
	}
	if !slices.Contains(s.firstArgs[id], arg) {
		s.firstArgs[id] = append(s.firstArgs[id], arg)
	}
}

// apply applies one selector rule (keys, channels, commands). It returns a
// sentinel error (unwrapped) on failure; the selector may then be partly
// changed, so callers work on a copy.
func (s *selector) apply(t *table, op string) *Error {
	switch {
	case eqFold(op, "allkeys") || op == "~*":
		s.allKeys, s.keys = true, nil
	case eqFold(op, "resetkeys"):
		s.allKeys, s.keys = false, nil
	case eqFold(op, "allchannels") || op == "&*":
		s.allChannels, s.channels = true, nil
	case eqFold(op, "resetchannels"):
		s.allChannels, s.channels = false, nil
	case eqFold(op, "allcommands") || eqFold(op, "+@all"):
		for i := range s.bits {
			s.bits[i] = ^uint64(0)
		}
		s.allCommands, s.future, s.rules, s.firstArgs = true, true, nil, nil
	case eqFold(op, "nocommands") || eqFold(op, "-@all"):
		clear(s.bits)
		s.allCommands, s.future, s.rules, s.firstArgs = false, false, nil, nil
	case op[0] == '~' || op[0] == '%':
		return s.addKeyPattern(op)
	case op[0] == '&':
		if s.allChannels {
			return ErrChannelAfterAll
		}
		pat := op[1:]
		if hasSpace(pat) {
			return ErrSyntax
		}
		if !slices.Contains(s.channels, pat) {
			s.channels = append(s.channels, pat)
		}
	case op[0] == '+' && (len(op) < 2 || op[1] != '@'):
		return s.allowCommand(t, op[1:])
	case op[0] == '-' && (len(op) < 2 || op[1] != '@'):
		id := t.lookup(op[1:])
		if id < 0 {
			return ErrUnknownName
		}
		s.changePerm(t, id, false)
		s.updateRules(t.cmds[id].fullname, false)
	case op[0] == '+' || op[0] == '-':
		cat := t.category(op[2:])
		if cat < 0 {
			return ErrUnknownName
		}
		allow := op[0] == '+'
		s.updateRules(op[1:], allow)
		s.setCategory(t, cat, allow)
	default:
		return ErrSyntax
	}
	return nil
}

// addKeyPattern applies "~pat", "%R~pat", "%W~pat" or "%RW~pat".
func (s *selector) addKeyPattern(op string) *Error {
	if s.allKeys {
		return ErrKeyAfterAll
	}
	var access KeyAccess
	i := 1
	if op[0] == '%' {
		for ; i < len(op); i++ {
			c := op[i]
			if (c == 'R' || c == 'r') && access&KeyRead == 0 {
				access |= KeyRead
			} else if (c == 'W' || c == 'w') && access&KeyWrite == 0 {
				access |= KeyWrite
			} else if c == '~' && access != 0 {
				i++
				break
			} else {
				return ErrSyntax
			}
		}
		// Redis accepts a bare "%" as a pattern granting nothing, which it
		// cannot render; reject it.
		if access == 0 {
			return ErrSyntax
		}
	} else {
		access = KeyReadWrite
	}
	pat := op[i:]
	if hasSpace(pat) {
		return ErrSyntax
	}
	for j := range s.keys {
		if s.keys[j].pattern == pat {
			s.keys[j].access |= access
			access = s.keys[j].access
			if pat == "*" && access == KeyReadWrite {
				s.allKeys, s.keys = true, nil
			}
			return nil
		}
	}
	// "*" granting read and write is allkeys: normalising it keeps the
	// ACL LIST line loadable ("~* ~x" would be refused on the way back).
	if pat == "*" && access == KeyReadWrite {
		s.allKeys, s.keys = true, nil
		return nil
	}
	s.keys = append(s.keys, keyPattern{pattern: pat, access: access})
	return nil
}

// allowCommand applies "+cmd", "+cmd|sub" and "+cmd|firstarg".
func (s *selector) allowCommand(t *table, name string) *Error {
	bar := strings.LastIndexByte(name, '|')
	if bar < 0 {
		id := t.lookup(name)
		if id < 0 {
			return ErrUnknownName
		}
		s.changePerm(t, id, true)
		s.updateRules(t.cmds[id].fullname, true)
		return nil
	}
	id := t.lookup(name[:bar])
	if id < 0 {
		return ErrUnknownName
	}
	if t.cmds[id].parent >= 0 {
		return ErrFirstArgOfSub
	}
	sub := name[bar+1:]
	if sub == "" || hasSpace(sub) {
		return ErrSyntax
	}
	if len(t.cmds[id].subs) > 0 {
		sid := t.lookup(name)
		if sid < 0 {
			return ErrUnknownName
		}
		s.changePerm(t, sid, true)
	} else {
		s.addFirstArg(id, sub)
	}
	s.updateRules(name, true)
	return nil
}

// String renders a key pattern as its rule ("~p", "%R~p", "%W~p").
func (p keyPattern) String() string {
	switch p.access {
	case KeyRead:
		return "%R~" + p.pattern
	case KeyWrite:
		return "%W~" + p.pattern
	}
	return "~" + p.pattern
}

// commandRules renders the command part: "+@all"/"-@all" then the rules.
func (s *selector) commandRules() string {
	var b strings.Builder
	if s.future {
		b.WriteString("+@all")
	} else {
		b.WriteString("-@all")
	}
	for _, r := range s.rules {
		b.WriteByte(' ')
		b.WriteString(r)
	}
	return b.String()
}

// keysString renders the key patterns as ACL GETUSER shows them.
func (s *selector) keysString() string {
	if s.allKeys {
		return "~*"
	}
	parts := make([]string, len(s.keys))
	for i, k := range s.keys {
		parts[i] = k.String()
	}
	return strings.Join(parts, " ")
}

// channelsString renders the channel patterns as ACL GETUSER shows them.
func (s *selector) channelsString() string {
	if s.allChannels {
		return "&*"
	}
	parts := make([]string, len(s.channels))
	for i, c := range s.channels {
		parts[i] = "&" + c
	}
	return strings.Join(parts, " ")
}

// describe renders the selector as in ACL LIST: keys, channels, commands.
func (s *selector) describe() string {
	var b strings.Builder
	if s.allKeys {
		b.WriteString("~* ")
	} else {
		for _, k := range s.keys {
			b.WriteString(k.String())
			b.WriteByte(' ')
		}
	}
	if s.allChannels {
		b.WriteString("&* ")
	} else {
		b.WriteString("resetchannels ")
		for _, c := range s.channels {
			b.WriteByte('&')
			b.WriteString(c)
			b.WriteByte(' ')
		}
	}
	b.WriteString(s.commandRules())
	return b.String()
}

// canRun reports whether the selector allows command id. args is the whole
// command line (args[0] the name), consulted only for first-arg rules.
func (s *selector) canRun(t *table, id int, args [][]byte) bool {
	if s.allCommands || s.bit(id) || t.cmds[id].noAuth {
		return true
	}
	allowed := s.firstArgs[id]
	if len(allowed) == 0 {
		return false
	}
	idx := 1
	if t.cmds[id].parent >= 0 {
		idx = 2
	}
	if len(args) <= idx {
		return false
	}
	for _, a := range allowed {
		if equalFoldBytes(args[idx], a) {
			return true
		}
	}
	return false
}

// canAccessKey reports whether some pattern grants need on key.
func (s *selector) canAccessKey(key []byte, need KeyAccess) bool {
	if s.allKeys {
		return true
	}
	for i := range s.keys {
		p := &s.keys[i]
		if p.access&need == need && matchGlob(p.pattern, key) {
			return true
		}
	}
	return false
}

// check runs the full per-selector check: command, then every key.
func (s *selector) check(t *table, id int, args [][]byte, keys []KeyRef) Verdict {
	if !s.canRun(t, id, args) {
		return Verdict{Reason: DeniedCommand}
	}
	if s.allKeys {
		return Verdict{}
	}
	for _, k := range keys {
		if uint(k.Pos) >= uint(len(args)) || !s.canAccessKey(args[k.Pos], k.Access) {
			return Verdict{Reason: DeniedKey, Pos: k.Pos}
		}
	}
	return Verdict{}
}

// equalFoldBytes compares b and the lower-case ASCII string s ignoring ASCII
// case, without allocating.
func equalFoldBytes(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// eqFold compares two strings ignoring ASCII case only, as C's strcasecmp.
func eqFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerByte(a[i]) != lowerByte(b[i]) {
			return false
		}
	}
	return true
}

// asciiLower lowers ASCII letters only (C's tolower), returning s itself
// when it has none.
func asciiLower(s string) string {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				b[j] = lowerByte(b[j])
			}
			return string(b)
		}
	}
	return s
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
