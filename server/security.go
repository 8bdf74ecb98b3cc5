package server

// Access control: the ACL check before each command, protected mode, and
// the rate limit on failed authentication.
//
// # The ACL check
//
// The server's users live in an acl.ACL built from the command table: the
// ACL numbers every command and subcommand in table order, which is also
// the order of their stat indexes (stats.go), so a table entry finds its
// ACL number with one slice index (security.aclRefs). A connection holds
// its *acl.User; before each command dispatch tests it with one atomic
// load (has the user changed?) and one flag test: a user who may run every
// command on every key (acl.User.Unrestricted: the default user unless it
// was restricted) costs nothing more. Any other user, or a changed one,
// goes through checkACL: a bit test for the command and for each key
// argument one glob match per key pattern of the user (none for a user
// with allkeys). The keys are described to the ACL in a small array on
// the stack, so the check allocates nothing for commands of up to
// maxStackKeys keys. A denial is rare: it replies Redis's NOPERM text and
// records an ACL LOG entry, which formats the client's CLIENT LIST line and
// allocates.
//
// A write command's keys are checked for write access and a read-only
// command's for read access ("%R~" and "%W~" patterns); a command that is
// neither needs both. A THROTTLE.CHECK both reads and updates its key's
// state, but it is flagged write and is checked for write only, so a
// "%W~" pattern is enough to be rate limited against a key and "%R~" is
// enough to PEEK at it.
//
// When a user is changed (ACL SETUSER, ACL LOAD) its connections pick up
// the new version before their next command; when it is deleted they are
// closed before their next command runs (Redis closes them at once; here a
// connection idle in the meantime stays open until it speaks or times out).
//
// # Users at start
//
// The ACL starts with the default user (on, nopass, all commands and keys).
// An ACL file (Config.ACLFile), if set, is loaded all or nothing: a bad
// file keeps the server from starting, and ACL LOAD of a bad file changes
// nothing. RequirePass, when set, is the default user's password: it is
// applied after every load of the file, so it wins over the file's default
// line. ACL SAVE writes a temporary file next to the ACL file and renames
// it over the old one.
//
// # Protected mode
//
// As Redis 7.0: while protected mode is on and the default user has no
// password (nopass), a connection from any address but 127.0.0.1 or ::1
// gets Redis's -DENIED text on accept and is closed. Other loopback
// addresses such as 127.0.0.2 count as remote, as they do in Redis 7.0.
// Users other than default do not matter: their passwords do not protect
// the default user.
//
// # Failed authentication
//
// Failed AUTH and HELLO AUTH attempts are rate limited per client IP with
// the engine's GCRA, run as limits operations on a small store of the
// server's own (a limits.Local over a shard.Store bounded
// to maxAuthFailIPs addresses, evicting the least recently used ones):
// AuthFailLimit failures per AuthFailPeriod, in a burst of AuthFailLimit.
// While an address has no budget left, its AUTH attempts are refused
// without checking the password, with "-ERR too many failed
// authentication attempts, retry in <ms> ms", and the connection is closed
// once that reply is written; other addresses are not affected and its
// connections already authenticated go on. A successful attempt costs a
// peek at the address's state (one store lookup, no write). Clients
// behind one NAT address share its budget: an attacker there can keep
// them from authenticating (not from running commands once
// authenticated); the limit is meant to make password guessing slow,
// not to tell users apart.

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
	"github.com/throttlekit/throttlekit-server/limits"
	"github.com/throttlekit/throttlekit-server/server/acl"
	"github.com/throttlekit/throttlekit-server/shard"
)

// Defaults of the access-control settings.
const (
	// DefaultAuthFailLimit is how many failed AUTH attempts one client IP
	// may make in DefaultAuthFailPeriod (and in a burst) before its
	// attempts are refused.
	DefaultAuthFailLimit = 10
	// DefaultAuthFailPeriod is the period of DefaultAuthFailLimit: after
	// the burst, one more attempt every 6 s.
	DefaultAuthFailPeriod = time.Minute
	// DefaultACLLogMaxLen is the number of ACL LOG entries kept.
	DefaultACLLogMaxLen = acl.DefaultLogMaxLen
)

// maxStackKeys is the number of key arguments the ACL check describes on
// the stack; a command with more keys allocates their description.
const maxStackKeys = 16

// errNoACLFile is Redis's reply to ACL LOAD and ACL SAVE without an ACL file.
const errNoACLFile = "This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration."

// aclRef is a table entry's number in the ACL: command and subcommand (-1
// for a top-level command).
type aclRef struct{ cmd, sub int32 }

// security is the access-control state of one server. It is built once by
// newSecurity; the ACL and the failure store synchronise themselves.
type security struct {
	acl       *acl.ACL
	aclRefs   []aclRef // by cmdSpec.stat
	aclFile   string
	pass      string // requirepass, re-applied after every ACL file load
	protected bool

	fails     *limits.Local // failed AUTH attempts by client IP (a store of its own), nil when not limited
	failLimit engine.Limit
}

// newTableACL builds the ACL from commandTable and the map from stat index
// to ACL number.
func newTableACL() (*acl.ACL, []aclRef, error) {
	cmds := make([]acl.Command, len(commandTable))
	refs := make([]aclRef, len(statSpecs))
	for i := range commandTable {
		sp := &commandTable[i]
		c := acl.Command{Name: sp.name, Categories: sp.categoryNames(), NoAuth: sp.flags&flagNoAuth != 0}
		refs[sp.stat] = aclRef{int32(i), -1}
		for j := range sp.subs {
			s := &sp.subs[j]
			c.Subcommands = append(c.Subcommands, acl.Command{Name: s.name[len(sp.name)+1:],
				Categories: s.categoryNames(), NoAuth: s.flags&flagNoAuth != 0})
			refs[s.stat] = aclRef{int32(i), int32(j)}
		}
		cmds[i] = c
	}
	a, err := acl.New(cmds)
	if err != nil {
		return nil, nil, fmt.Errorf("server: command table: %w", err)
	}
	return a, refs, nil
}

// newSecurity builds the access-control state of a server from cfg: the
// ACL (requirepass, the ACL file, the log length), protected mode and the
// failed-authentication limit.
func newSecurity(cfg *Config) (*security, error) {
	a, refs, err := newTableACL()
	if err != nil {
		return nil, err
	}
	sec := &security{acl: a, aclRefs: refs, aclFile: cfg.ACLFile, pass: cfg.RequirePass, protected: cfg.ProtectedMode}
	switch n := cfg.ACLLogMaxLen; {
	case n == 0:
		a.Log().SetMaxLen(DefaultACLLogMaxLen)
	case n > 0:
		a.Log().SetMaxLen(n)
	default:
		a.Log().SetMaxLen(0)
	}
	if cfg.ACLFile != "" {
		if err := sec.loadFile(); err != nil {
			return nil, fmt.Errorf("server: aclfile: %w", err)
		}
	} else if cfg.RequirePass != "" {
		a.SetRequirePass(cfg.RequirePass)
	}
	limit, period := cfg.AuthFailLimit, cfg.AuthFailPeriod
	if limit == 0 {
		limit = DefaultAuthFailLimit
	}
	if period == 0 {
		period = DefaultAuthFailPeriod
	}
	if limit > 0 {
		sec.failLimit, err = engine.NewLimit(engine.KindGCRA, int64(limit), int64(period), 0)
		if err != nil {
			return nil, fmt.Errorf("server: auth-fail-limit %d per %v: %w", limit, period, err)
		}
		sec.fails = limits.NewLocal(shard.New(shard.Config{Shards: 4, MaxKeys: maxAuthFailIPs}), limits.Config{})
	}
	return sec, nil
}

// loadFile replaces the users with those of the ACL file (all or nothing)
// and gives the default user the requirepass password, if one is set.
func (sec *security) loadFile() error {
	f, err := os.Open(sec.aclFile)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := sec.acl.Load(f); err != nil {
		return err
	}
	if sec.pass != "" {
		sec.acl.SetRequirePass(sec.pass)
	}
	return nil
}

// saveFile writes every user to the ACL file: to a temporary file in the
// same directory first, renamed over the old one, as Redis does.
func (sec *security) saveFile() error {
	tmp := fmt.Sprintf("%s.tmp-%d", sec.aclFile, time.Now().UnixNano())
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = sec.acl.Save(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, sec.aclFile)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// ACL returns the server's users. Changes made through it (SetUser,
// DelUser, Load) take effect for each connection before its next command.
func (s *Server) ACL() *acl.ACL { return s.sec.acl }

// startConn gives a new connection the default user, authenticated when
// the default user is on and nopass.
func (s *Server) startConn(cl *client) {
	cl.user, cl.authed = s.sec.acl.NewConnection()
}

// aclContext is the ACL LOG context of a command cl sends now.
func aclContext(cl *client) acl.Context {
	if cl.inMulti() {
		return acl.ContextMulti
	}
	return acl.ContextTopLevel
}

// checkACL is dispatch's ACL check of sp (the subcommand's entry for a
// container) with args. It returns ok when the command may run; when not,
// the reply is written, and closeConn tells whether the connection must be
// closed because its user was deleted. It does not allocate unless it
// denies.
func (l *loop) checkACL(cl *client, sp *cmdSpec, args [][]byte, now int64) (ok, closeConn bool) {
	u := cl.user
	if u.Stale() {
		if u, ok = l.refreshUser(cl); !ok {
			return false, true
		}
	}
	if u.Unrestricted() { // the default user: every command on every key
		return true, false
	}
	ref := l.srv.sec.aclRefs[sp.stat]
	if u.AllKeys() { // no key list to build (DEL of 1M keys would build 1M)
		if u.Check(int(ref.cmd), int(ref.sub), args, nil).OK() {
			return true, false
		}
	}
	var buf [maxStackKeys]acl.KeyRef
	keys := keyRefs(buf[:0], sp, args)
	v := u.Check(int(ref.cmd), int(ref.sub), args, keys)
	if v.OK() {
		return true, false
	}
	l.deny(cl, u, sp, ref, args, v, u.DenyReply(int(ref.cmd), int(ref.sub), v), aclContext(cl), now)
	return false, false
}

// permitted reports whether cl's user may run sp (a subcommand's own
// entry for a container) with args, as the ACL check in dispatch does. If
// not, it writes the NOPERM reply of a command denied at EXEC
// (acl.ExecDenyReply: "NOPERM ACLs rules changed between the moment the
// transaction was accumulated and the EXEC call. ...", as Redis words it),
// or nothing when the user was deleted (the connection is then being
// closed), and records the denial in ACL LOG with context ctx at time now
// (Unix ns). EXEC calls it for each queued command with acl.ContextMulti,
// since a user may have changed since the command was queued.
func (l *loop) permitted(cl *client, sp *cmdSpec, args [][]byte, ctx acl.Context, now int64) bool {
	u := cl.user
	if u.Stale() {
		var ok bool
		if u, ok = l.refreshUser(cl); !ok {
			_ = cl.conn.Close()
			return false
		}
	}
	if u.Unrestricted() {
		return true
	}
	var buf [maxStackKeys]acl.KeyRef
	keys := keyRefs(buf[:0], sp, args)
	ref := l.srv.sec.aclRefs[sp.stat]
	v := u.Check(int(ref.cmd), int(ref.sub), args, keys)
	if v.OK() {
		return true
	}
	l.deny(cl, u, sp, ref, args, v, acl.ExecDenyReply(v), ctx, now)
	return false
}

// refreshUser installs the current version of cl's user; it reports false
// when the user was deleted.
func (l *loop) refreshUser(cl *client) (*acl.User, bool) {
	u, ok := l.srv.sec.acl.Refresh(cl.user)
	if !ok {
		return nil, false
	}
	cl.user = u
	return u, true
}

// deny writes msg, the NOPERM reply of a denied verdict v, and logs the
// denial.
func (l *loop) deny(cl *client, u *acl.User, sp *cmdSpec, ref aclRef, args [][]byte, v acl.Verdict, msg string, ctx acl.Context, nowNs int64) {
	l.rejected(sp) // INFO commandstats: dispatch.go
	code, text, _ := strings.Cut(msg, " ")
	l.errorReply(code, text)
	now := time.Unix(0, nowNs)
	ev := u.DenialEvent(int(ref.cmd), int(ref.sub), args, v, ctx, l.clientLine(cl, sp.name, args, now))
	l.srv.sec.acl.Log().Add(ev, now)
}

// keyRefs appends to dst the key arguments of args by sp's key positions,
// with the access sp's flags imply.
func keyRefs(dst []acl.KeyRef, sp *cmdSpec, args [][]byte) []acl.KeyRef {
	if sp.firstKey <= 0 {
		return dst
	}
	var access acl.KeyAccess
	switch {
	case sp.flags&flagWrite != 0:
		access = acl.KeyWrite
	case sp.flags&flagReadonly != 0:
		access = acl.KeyRead
	default:
		access = acl.KeyRead | acl.KeyWrite
	}
	last := sp.lastKey
	if last < 0 {
		last += len(args)
	}
	step := max(sp.step, 1)
	for i := sp.firstKey; i <= last && i < len(args); i += step {
		dst = append(dst, acl.KeyRef{Pos: i, Access: access})
	}
	return dst
}

// mayRead reports whether cl's user may read key: SCAN and KEYS list only
// such keys. Cost: one glob match per key pattern of the user, none with
// allkeys; no allocation.
func (cl *client) mayRead(key []byte) bool {
	return cl.user.CanAccessKey(key, acl.KeyRead)
}

// userName returns the name of cl's user, as CLIENT LIST shows it.
func (cl *client) userName() string {
	return cl.user.Name()
}

// clientLine returns cl's CLIENT LIST line (without the newline) while it
// runs the command named cmd with args, for ACL LOG.
func (l *loop) clientLine(cl *client, cmd string, args [][]byte, now time.Time) string {
	var b strings.Builder
	l.srv.mu.Lock()
	l.writeClientLine(&b, cl, now, cl, cmd, args)
	l.srv.mu.Unlock()
	return strings.TrimSuffix(b.String(), "\n")
}
