package acl

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"sync/atomic"
)

// User is an immutable snapshot of one ACL user. Connections keep a *User
// and check every command against it without locks or allocation. A change
// to the user (ACL SETUSER, ACL LOAD, requirepass) publishes a new *User
// and marks the old one stale; see Stale and ACL.Refresh.
type User struct {
	t            *table
	name         string
	enabled      bool
	nopass       bool
	skipSanitize bool
	all          bool                // the root selector has every command and every key: Unrestricted
	passwords    [][sha256.Size]byte // SHA-256 of each password, in insertion order
	sels         []selector          // sels[0] is the root selector
	stale        atomic.Bool
}

func newUser(t *table, name string) *User {
	return &User{t: t, name: name, sels: []selector{newSelector(t, true)}}
}

// clone returns a deep copy of u that is not stale.
func (u *User) clone() *User {
	c := &User{t: u.t, name: u.name, enabled: u.enabled, nopass: u.nopass,
		skipSanitize: u.skipSanitize, all: u.all, passwords: slices.Clone(u.passwords)}
	c.sels = make([]selector, len(u.sels))
	for i := range u.sels {
		c.sels[i] = u.sels[i].clone()
	}
	return c
}

// Name returns the user name.
func (u *User) Name() string { return u.name }

// Enabled reports whether the user is "on" (may authenticate).
func (u *User) Enabled() bool { return u.enabled }

// NoPass reports whether any password authenticates the user ("nopass").
func (u *User) NoPass() bool { return u.nopass }

// Stale reports whether a newer version of the user was published or the
// user was deleted. It is one atomic load; call ACL.Refresh when it is true.
func (u *User) Stale() bool { return u.stale.Load() }

// apply applies one rule; it returns the unwrapped reason on failure. It
// keeps u.all up to date: every change to a user goes through it.
func (u *User) apply(op string) *Error {
	err := u.applyRule(op)
	root := &u.sels[0]
	u.all = root.allCommands && root.allKeys
	return err
}

func (u *User) applyRule(op string) *Error {
	if op == "" {
		return nil
	}
	switch {
	case eqFold(op, "on"):
		u.enabled = true
	case eqFold(op, "off"):
		u.enabled = false
	case eqFold(op, "skip-sanitize-payload"):
		u.skipSanitize = true
	case eqFold(op, "sanitize-payload"):
		u.skipSanitize = false
	case eqFold(op, "nopass"):
		u.nopass, u.passwords = true, nil
	case eqFold(op, "resetpass"):
		u.nopass, u.passwords = false, nil
	case op[0] == '>' || op[0] == '#':
		h, err := passwordHash(op)
		if err != nil {
			return err
		}
		if !slices.Contains(u.passwords, h) {
			u.passwords = append(u.passwords, h)
		}
		u.nopass = false
	case op[0] == '<' || op[0] == '!':
		h, err := passwordHash(op)
		if err != nil {
			return err
		}
		i := slices.Index(u.passwords, h)
		if i < 0 {
			return ErrNoSuchPassword
		}
		u.passwords = slices.Delete(u.passwords, i, i+1)
	case op[0] == '(' && op[len(op)-1] == ')':
		s := newSelector(u.t, false)
		for _, tok := range splitSpace(op[1 : len(op)-1]) {
			// A token ending in ')' would close the selector early when the
			// ACL LIST line is read back; Redis accepts it and cannot
			// reload its own output, so it is refused here.
			if tok[len(tok)-1] == ')' {
				return ErrSyntax
			}
			if err := s.apply(u.t, tok); err != nil {
				return err
			}
		}
		u.sels = append(u.sels, s)
	case eqFold(op, "clearselectors"):
		u.sels = u.sels[:1]
	case eqFold(op, "reset"):
		u.nopass, u.passwords = false, nil
		u.enabled, u.skipSanitize = false, false
		u.sels = u.sels[:1]
		root := &u.sels[0]
		root.allKeys, root.keys = false, nil
		root.allChannels, root.channels = false, nil
		_ = root.apply(u.t, "-@all")
	default:
		return u.sels[0].apply(u.t, op)
	}
	return nil
}

// passwordHash returns the SHA-256 of ">pass"/"<pass" or the parsed
// "#hex"/"!hex".
func passwordHash(op string) ([sha256.Size]byte, *Error) {
	var h [sha256.Size]byte
	if op[0] == '>' || op[0] == '<' {
		return sha256.Sum256([]byte(op[1:])), nil
	}
	hx := op[1:]
	if len(hx) != 2*sha256.Size {
		return h, ErrBadHash
	}
	for i := 0; i < len(hx); i++ {
		if c := hx[i]; (c < 'a' || c > 'f') && (c < '0' || c > '9') {
			return h, ErrBadHash
		}
	}
	_, _ = hex.Decode(h[:], []byte(hx))
	return h, nil
}

// splitSpace splits s on C isspace bytes, dropping empty fields.
func splitSpace(s string) []string {
	return strings.FieldsFunc(s, func(r rune) bool {
		return r < 0x80 && hasSpace(string(byte(r)))
	})
}

// mergeSelectors joins rules split across arguments into "(...)" selector
// rules, as Redis's ACLMergeSelectorArguments: an argument starting with '('
// but not ending with ')' opens a selector that runs to the first argument
// ending with ')'. It returns the index of an unclosed opening argument.
func mergeSelectors(ops []string) ([]string, int) {
	out := make([]string, 0, len(ops))
	open := -1
	var sel strings.Builder
	for i, op := range ops {
		if open < 0 && op != "" && op[0] == '(' && op[len(op)-1] != ')' {
			open = i
			sel.Reset()
			sel.WriteString(op)
			continue
		}
		if open >= 0 {
			sel.WriteByte(' ')
			sel.WriteString(op)
			if op != "" && op[len(op)-1] == ')' {
				out = append(out, sel.String())
				open = -1
			}
			continue
		}
		out = append(out, op)
	}
	if open >= 0 {
		return nil, open
	}
	return out, -1
}

// Rules returns the user's rules as ACL LIST shows them after the name, in
// Redis's canonical order: flags (on|off, nopass, [skip-]sanitize-payload),
// password hashes, keys, channels, commands, then each "(selector)".
// It allocates the string on each call.
func (u *User) Rules() string {
	var b strings.Builder
	if u.enabled {
		b.WriteString("on ")
	} else {
		b.WriteString("off ")
	}
	if u.nopass {
		b.WriteString("nopass ")
	}
	if u.skipSanitize {
		b.WriteString("skip-sanitize-payload ")
	} else {
		b.WriteString("sanitize-payload ")
	}
	for _, p := range u.passwords {
		b.WriteByte('#')
		b.WriteString(hex.EncodeToString(p[:]))
		b.WriteByte(' ')
	}
	for i := range u.sels {
		if i == 0 {
			b.WriteString(u.sels[i].describe())
		} else {
			b.WriteString(" (")
			b.WriteString(u.sels[i].describe())
			b.WriteByte(')')
		}
	}
	return b.String()
}

// Describe returns the user's ACL LIST line: "user <name> <rules>", which
// is also its line in an ACL file.
func (u *User) Describe() string { return "user " + u.name + " " + u.Rules() }

// SelectorInfo is one selector as ACL GETUSER shows it.
type SelectorInfo struct {
	Commands string // e.g. "-@all +get"
	Keys     string // e.g. "~app:* %R~shared:*", "~*" or ""
	Channels string // e.g. "&*", "&news.*" or ""
}

// UserInfo is the data of an ACL GETUSER reply. The server renders it as a
// map (RESP3) or flat array (RESP2) with the keys flags (a set), passwords,
// commands, keys, channels, selectors (an array of maps), in that order.
type UserInfo struct {
	Flags     []string // subset of on, off, nopass, skip-sanitize-payload, sanitize-payload in that order
	Passwords []string // lower-case hex SHA-256 digests
	SelectorInfo
	Selectors []SelectorInfo // the "(...)" selectors, root excluded
}

// Info returns the ACL GETUSER data of the user.
func (u *User) Info() UserInfo {
	var in UserInfo
	if u.enabled {
		in.Flags = append(in.Flags, "on")
	} else {
		in.Flags = append(in.Flags, "off")
	}
	if u.nopass {
		in.Flags = append(in.Flags, "nopass")
	}
	if u.skipSanitize {
		in.Flags = append(in.Flags, "skip-sanitize-payload")
	} else {
		in.Flags = append(in.Flags, "sanitize-payload")
	}
	in.Passwords = make([]string, len(u.passwords))
	for i, p := range u.passwords {
		in.Passwords[i] = hex.EncodeToString(p[:])
	}
	info := func(s *selector) SelectorInfo {
		return SelectorInfo{Commands: s.commandRules(), Keys: s.keysString(), Channels: s.channelsString()}
	}
	in.SelectorInfo = info(&u.sels[0])
	in.Selectors = make([]SelectorInfo, 0, len(u.sels)-1)
	for i := 1; i < len(u.sels); i++ {
		in.Selectors = append(in.Selectors, info(&u.sels[i]))
	}
	return in
}

// Reason is the outcome of a permission check.
type Reason uint8

// Check outcomes, ordered as Redis orders them when choosing which denial of
// several selectors to report (the larger wins).
const (
	Allowed       Reason = iota // the command may run
	DeniedCommand               // the command (or subcommand) is not allowed
	DeniedKey                   // a key is outside the allowed patterns
	DeniedAuth                  // authentication failed (ACL LOG only)
	DeniedChannel               // a channel is not allowed (ACL LOG only: no pub/sub yet)
)

// String returns the ACL LOG name of the reason.
func (r Reason) String() string {
	switch r {
	case Allowed:
		return "allowed"
	case DeniedCommand:
		return "command"
	case DeniedKey:
		return "key"
	case DeniedAuth:
		return "auth"
	case DeniedChannel:
		return "channel"
	}
	return "unknown"
}

// KeyRef names one key of a command line: args[Pos], accessed as Access.
type KeyRef struct {
	Pos    int
	Access KeyAccess
}

// Verdict is the result of User.Check: Reason, and for DeniedKey the
// position in args of the key that was refused.
type Verdict struct {
	Reason Reason
	Pos    int
}

// OK reports whether the command may run.
func (v Verdict) OK() bool { return v.Reason == Allowed }

// CanRun reports whether the user may run the command numbered cmd (its
// index in the table given to New) or, with sub >= 0, its subcommand
// numbered sub. It ignores first-arg rules ("+select|0"), which need the
// arguments: use Check for those. Cost: one bit test per selector, no
// allocation.
func (u *User) CanRun(cmd, sub int) bool {
	id, ok := u.t.id(cmd, sub)
	if !ok {
		return false
	}
	for i := range u.sels {
		if u.sels[i].canRun(u.t, id, nil) {
			return true
		}
	}
	return false
}

// CanAccessKey reports whether some selector of the user grants access to
// key. Cost: one glob match per key pattern until one matches; none with
// allkeys; no allocation.
func (u *User) CanAccessKey(key []byte, access KeyAccess) bool {
	for i := range u.sels {
		if u.sels[i].canAccessKey(key, access) {
			return true
		}
	}
	return false
}

// AllKeys reports whether u's root selector grants every key (allkeys or
// "~*"): a command that selector permits passes Check whatever its keys,
// so the caller may pass no KeyRefs for it.
func (u *User) AllKeys() bool { return u.sels[0].allKeys }

// Unrestricted reports whether u may run every command on every key: its
// root selector has all commands ("+@all" with nothing removed since) and
// all keys. Check then allows every command of the table with any
// arguments, so a caller may skip it: the common case (the default user)
// costs one flag test. Cost: one load; it is decided when the user is
// changed, not on each call.
func (u *User) Unrestricted() bool { return u.all }

// Check is the one-shot check the server runs before each command: may the
// user run command cmd/sub (see CanRun) with the command line args (args[0]
// is the command name) touching keys? With selectors, the command passes if
// any one selector allows the command and all its keys; otherwise the
// verdict is the denial Redis reports: a key denial over a command denial,
// and among key denials the one furthest in args.
// Cost: a bit test, then one glob match per (key, pattern) pair unless the
// selector has allkeys; no allocation.
func (u *User) Check(cmd, sub int, args [][]byte, keys []KeyRef) Verdict {
	id, ok := u.t.id(cmd, sub)
	if !ok {
		return Verdict{Reason: DeniedCommand}
	}
	best := Verdict{Reason: DeniedCommand}
	for i := range u.sels {
		v := u.sels[i].check(u.t, id, args, keys)
		if v.Reason == Allowed {
			return v
		}
		if v.Reason > best.Reason || (v.Reason == best.Reason && v.Pos > best.Pos) {
			best = v
		}
	}
	return best
}

// CommandName returns the full name of command cmd/sub as ACL messages show
// it ("get", "config|get"), or "" if there is no such command.
func (u *User) CommandName(cmd, sub int) string {
	id, ok := u.t.id(cmd, sub)
	if !ok {
		return ""
	}
	return u.t.cmds[id].fullname
}

// DenyReply returns the error reply (without the leading '-') for a denied
// verdict, in Redis 7.0's words: "NOPERM this user has no permissions to run
// the '<cmd>' command", NoPermKeyReply or NoPermChannelReply. It returns ""
// for an allowed verdict. (Redis 7.2 names the user instead: "NOPERM User
// <name> has no permissions to run the '<cmd>' command"; ACL LOG names it
// in either version.)
func (u *User) DenyReply(cmd, sub int, v Verdict) string {
	switch v.Reason {
	case Allowed:
		return ""
	case DeniedKey:
		return NoPermKeyReply
	case DeniedChannel:
		return NoPermChannelReply
	}
	return "NOPERM this user has no permissions to run the '" + u.CommandName(cmd, sub) + "' command"
}

// ExecDenyReply returns the error reply (without the leading '-') for a
// command that was allowed when MULTI queued it and is denied when EXEC
// runs it (its user changed in between), as Redis 7 words it: "NOPERM ACLs
// rules changed between the moment the transaction was accumulated and the
// EXEC call. This command is no longer allowed for the following reason:
// no permission to touch the specified keys". It returns "" for an allowed
// verdict.
func ExecDenyReply(v Verdict) string {
	switch v.Reason {
	case Allowed:
		return ""
	case DeniedKey:
		return noPermChangedReply + "no permission to touch the specified keys"
	case DeniedChannel:
		return noPermChangedReply + "no permission to access one of the channels used as arguments"
	}
	return noPermChangedReply + "no permission to execute the command or subcommand"
}

// denyMessage is the message ACL DRYRUN replies for a denied verdict, in
// Redis 7.0's words ("This user has no permissions to access the 'k' key";
// 7.2 says "User <name> has ..."). args are the command's arguments, the
// name first.
func (u *User) denyMessage(cmd, sub int, args [][]byte, v Verdict) string {
	switch v.Reason {
	case DeniedKey, DeniedChannel:
		what := "key"
		if v.Reason == DeniedChannel {
			what = "channel"
		}
		var val string
		if uint(v.Pos) < uint(len(args)) {
			val = string(args[v.Pos])
		}
		return "This user has no permissions to access the '" + val + "' " + what
	}
	return "This user has no permissions to run the '" + u.CommandName(cmd, sub) + "' command"
}
