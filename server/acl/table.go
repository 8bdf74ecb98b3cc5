package acl

import "strings"

// Command describes one server command to the ACL. The server passes its
// whole command table to New once; the ACL numbers every command and
// subcommand and keeps per-user permissions as bitsets over those numbers.
type Command struct {
	// Name is the command name, e.g. "get" or "config"; matched
	// case-insensitively and shown in lower case. It may not contain '|',
	// spaces or NUL bytes.
	Name string
	// Categories lists the ACL categories of the command without the '@',
	// e.g. {"read", "fast", "throttle"}. Names outside Redis's standard set
	// become new categories.
	Categories []string
	// NoAuth marks commands a client may run before authenticating (AUTH,
	// HELLO): command rules never deny them, as Redis's CMD_NO_AUTH.
	NoAuth bool
	// Subcommands are the subcommands of a container command such as CONFIG;
	// each is named without its parent ("get" for CONFIG GET) and carries its
	// own categories. A container's subcommands are checked by their own
	// index; the container itself is not run directly.
	Subcommands []Command
}

// standardCategories are Redis 7's ACL categories in the order ACL CAT
// lists them (the same in 7.0 and 7.2). Categories introduced by the command
// table follow them.
var standardCategories = [...]string{
	"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string",
	"bitmap", "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow",
	"blocking", "dangerous", "connection", "transaction", "scripting",
}

// maxCategories bounds the category set so a command's categories fit in
// one uint64 mask.
const maxCategories = 64

// cmdInfo is one numbered command or subcommand.
type cmdInfo struct {
	fullname string // "get", "config|get"
	cats     uint64 // bit i set: member of category i
	parent   int    // id of the container, -1 for top-level commands
	subs     []int  // ids of subcommands
	noAuth   bool
}

// table is the immutable numbering of the command table shared by all users.
type table struct {
	cmds   []cmdInfo
	byName map[string]int // lower-case fullname -> id
	base   []int          // top-level command index -> id
	nsubs  []int          // top-level command index -> number of subcommands
	cats   []string       // category names, index = bit
	catIdx map[string]int // lower-case category name -> bit
	words  int            // uint64 words in a command bitset
}

func newTable(cmds []Command) (*table, error) {
	t := &table{byName: make(map[string]int), catIdx: make(map[string]int)}
	for _, c := range standardCategories {
		t.catIdx[c] = len(t.cats)
		t.cats = append(t.cats, c)
	}
	catMask := func(names []string, where string) (uint64, error) {
		var m uint64
		for _, n := range names {
			n = asciiLower(strings.TrimPrefix(n, "@"))
			if n == "" || n == "all" || hasSpace(n) {
				return 0, errorf(CodeTable, "command %q: invalid category %q", where, n)
			}
			i, ok := t.catIdx[n]
			if !ok {
				if len(t.cats) == maxCategories {
					return 0, errorf(CodeTable, "more than %d ACL categories", maxCategories)
				}
				i = len(t.cats)
				t.catIdx[n] = i
				t.cats = append(t.cats, n)
			}
			m |= 1 << uint(i)
		}
		return m, nil
	}
	add := func(c Command, parent int, full string) (int, error) {
		if c.Name == "" || strings.ContainsRune(c.Name, '|') || hasSpace(c.Name) {
			return 0, errorf(CodeTable, "invalid command name %q", c.Name)
		}
		if _, dup := t.byName[full]; dup {
			return 0, errorf(CodeTable, "duplicate command %q", full)
		}
		m, err := catMask(c.Categories, full)
		if err != nil {
			return 0, err
		}
		id := len(t.cmds)
		t.cmds = append(t.cmds, cmdInfo{fullname: full, cats: m, parent: parent, noAuth: c.NoAuth})
		t.byName[full] = id
		return id, nil
	}
	for _, c := range cmds {
		name := asciiLower(c.Name)
		id, err := add(c, -1, name)
		if err != nil {
			return nil, err
		}
		t.base = append(t.base, id)
		t.nsubs = append(t.nsubs, len(c.Subcommands))
		for _, s := range c.Subcommands {
			if len(s.Subcommands) > 0 {
				return nil, errorf(CodeTable, "subcommand %s|%s has subcommands", name, s.Name)
			}
			sid, err := add(s, id, name+"|"+asciiLower(s.Name))
			if err != nil {
				return nil, err
			}
			t.cmds[id].subs = append(t.cmds[id].subs, sid)
		}
	}
	t.words = (len(t.cmds) + 63) / 64
	if t.words == 0 {
		t.words = 1
	}
	return t, nil
}

// id maps the server's (command index, subcommand index) pair to the ACL's
// command id; sub < 0 names the command itself.
func (t *table) id(cmd, sub int) (int, bool) {
	if uint(cmd) >= uint(len(t.base)) {
		return 0, false
	}
	if sub < 0 {
		return t.base[cmd], true
	}
	if sub >= t.nsubs[cmd] {
		return 0, false
	}
	return t.base[cmd] + 1 + sub, true
}

// lookup finds a command by name as Redis's lookupCommandBySdsLogic does:
// "get" or "config|get", case-insensitively; nil-equivalent (-1) when
// unknown, when a '|' names a subcommand of a command without any, or when
// there are more than two parts.
func (t *table) lookup(name string) int {
	if id, ok := t.byName[name]; ok {
		return id
	}
	id, ok := t.byName[asciiLower(name)]
	if !ok {
		return -1
	}
	return id
}

// category returns the bit of a category name (without '@'), or -1.
func (t *table) category(name string) int {
	if i, ok := t.catIdx[asciiLower(name)]; ok {
		return i
	}
	return -1
}

// hasSpace reports whether s contains a space-class byte or NUL, as Redis's
// ACLStringHasSpaces (isspace in the C locale).
func hasSpace(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\v', '\f', '\r', 0:
			return true
		}
	}
	return false
}
