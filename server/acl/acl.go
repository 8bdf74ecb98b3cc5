package acl

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"slices"
	"sync"
	"sync/atomic"
)

// DefaultUser is the name of the user every new connection starts as.
const DefaultUser = "default"

// ACL holds the users of one server. Readers (event loops authenticating
// and checking commands) never lock: the user set is an immutable snapshot
// behind an atomic pointer and each *User is immutable. Writers (ACL
// SETUSER, DELUSER, LOAD, requirepass) serialise on a mutex, copy the
// snapshot, and publish the copy; the replaced users are marked stale.
type ACL struct {
	t     *table
	mu    sync.Mutex // serialises writers
	users atomic.Pointer[userSet]
	gen   atomic.Uint64
	log   *Log
}

// userSet is one immutable snapshot of the users.
type userSet struct {
	byName map[string]*User
	names  []string // sorted byte-wise, as Redis's rax iterates
}

// New returns an ACL for the given command table, holding only the default
// user ("on nopass sanitize-payload ~* &* +@all"). The index of each command
// in cmds (and of each subcommand in its Subcommands) is the number the
// server passes to User.CanRun and User.Check. It fails with CodeTable on a
// malformed table: empty or duplicate names, names with '|' or spaces,
// nested subcommands, more than 64 categories.
func New(cmds []Command) (*ACL, error) {
	t, err := newTable(cmds)
	if err != nil {
		return nil, err
	}
	a := &ACL{t: t, log: NewLog(DefaultLogMaxLen)}
	a.users.Store(&userSet{byName: map[string]*User{DefaultUser: a.newDefaultUser()}, names: []string{DefaultUser}})
	return a, nil
}

// newDefaultUser builds the default user as Redis does at start.
func (a *ACL) newDefaultUser() *User {
	u := newUser(a.t, DefaultUser)
	for _, op := range []string{"+@all", "~*", "&*", "on", "nopass"} {
		_ = u.apply(op)
	}
	return u
}

// Log returns the ACL LOG of this ACL.
func (a *ACL) Log() *Log { return a.log }

// Generation returns a counter bumped by every published change. A caller
// caching anything derived from users can compare it with one atomic load.
func (a *ACL) Generation() uint64 { return a.gen.Load() }

// User returns the current version of the named user, or nil. Cost: one
// map lookup in the current snapshot, no lock.
func (a *ACL) User(name string) *User { return a.users.Load().byName[name] }

// Users returns the user names in ACL USERS order (sorted byte-wise).
func (a *ACL) Users() []string { return slices.Clone(a.users.Load().names) }

// List returns the ACL LIST lines ("user <name> <rules>") in name order.
func (a *ACL) List() []string {
	s := a.users.Load()
	out := make([]string, len(s.names))
	for i, n := range s.names {
		out[i] = s.byName[n].Describe()
	}
	return out
}

// Refresh returns the current version of u and true, or nil and false if
// the user was deleted (Redis then disconnects the client). A connection
// calls it when u.Stale() reports true.
func (a *ACL) Refresh(u *User) (*User, bool) {
	cur := a.User(u.name)
	return cur, cur != nil
}

// NewConnection returns the user a new connection starts as (the default
// user) and whether it is already authenticated (the default user is on
// and nopass), as Redis decides at accept.
func (a *ACL) NewConnection() (*User, bool) {
	u := a.User(DefaultUser)
	return u, u.enabled && u.nopass
}

// SetUser creates the user if needed and applies rules in order, as ACL
// SETUSER. Either all rules apply or none: on the first bad rule it returns
// "ERR Error in ACL SETUSER modifier '<rule>': <reason>" (errors.Is matches
// the reason's sentinel, e.g. ErrSyntax) and the user is unchanged. Rules
// split across arguments inside "(...)" form one selector. Cost: a copy of
// the user and of the name index (O(users)); readers are not blocked.
func (a *ACL) SetUser(name string, rules ...string) error {
	if hasSpace(name) {
		return ErrBadUsername
	}
	ops, open := mergeSelectors(rules)
	if open >= 0 {
		return errorf(CodeUnmatchedParen, "Unmatched parenthesis in acl selector starting at '%s'.", rules[open])
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.users.Load()
	prev := old.byName[name]
	var u *User
	if prev != nil {
		u = prev.clone()
	} else {
		u = newUser(a.t, name)
	}
	for _, op := range ops {
		if err := u.apply(op); err != nil {
			return wrapRule(err, op)
		}
	}
	a.publish(old, map[string]*User{name: u}, nil)
	return nil
}

// SetRequirePass implements the requirepass setting: the default user gets
// exactly this password, or nopass when pass is empty.
func (a *ACL) SetRequirePass(pass string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.users.Load()
	u := old.byName[DefaultUser].clone()
	_ = u.apply("resetpass")
	if pass == "" {
		_ = u.apply("nopass")
	} else {
		_ = u.apply(">" + pass)
	}
	a.publish(old, map[string]*User{DefaultUser: u}, nil)
}

// DelUser deletes the named users and returns how many existed, as ACL
// DELUSER. Deleting "default" fails with ErrDefaultUser and deletes nothing.
// Connections holding a deleted user see Stale() and Refresh fails.
func (a *ACL) DelUser(names ...string) (int, error) {
	if slices.Contains(names, DefaultUser) {
		return 0, ErrDefaultUser
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.users.Load()
	del := make(map[string]bool)
	for _, n := range names {
		if old.byName[n] != nil {
			del[n] = true
		}
	}
	if len(del) > 0 {
		a.publish(old, nil, del)
	}
	return len(del), nil
}

// publish installs a new snapshot: old with set replacing or adding users
// and del removing them; the users replaced or removed become stale. The
// caller holds a.mu.
func (a *ACL) publish(old *userSet, set map[string]*User, del map[string]bool) {
	next := &userSet{byName: make(map[string]*User, len(old.byName)+len(set))}
	for n, u := range old.byName {
		if !del[n] {
			next.byName[n] = u
		}
	}
	for n, u := range set {
		next.byName[n] = u
	}
	next.names = make([]string, 0, len(next.byName))
	for n := range next.byName {
		next.names = append(next.names, n)
	}
	slices.Sort(next.names)
	a.users.Store(next)
	a.gen.Add(1)
	for n, u := range old.byName {
		if del[n] || (set[n] != nil && set[n] != u) {
			u.stale.Store(true)
		}
	}
}

// replaceAll installs users as the whole user set (ACL LOAD) and marks
// every previous user stale. The caller holds a.mu.
func (a *ACL) replaceAll(users map[string]*User) {
	old := a.users.Load()
	next := &userSet{byName: users, names: make([]string, 0, len(users))}
	for n := range users {
		next.names = append(next.names, n)
	}
	slices.Sort(next.names)
	a.users.Store(next)
	a.gen.Add(1)
	for _, u := range old.byName {
		u.stale.Store(true)
	}
}

// Authenticate checks a user name and password as AUTH and HELLO do. It
// returns the user, or ErrWrongPass when the user does not exist, is off, or
// no password matches. The password is hashed with SHA-256 and compared
// with every stored hash with crypto/subtle, so the time taken does not
// depend on how much of a hash matches. Cost: one SHA-256 of the password.
func (a *ACL) Authenticate(user, pass []byte) (*User, error) {
	sum := sha256.Sum256(pass)
	u := a.users.Load().byName[string(user)]
	if u == nil || !u.enabled {
		return nil, ErrWrongPass
	}
	if u.nopass {
		return u, nil
	}
	match := 0
	for i := range u.passwords {
		match |= subtle.ConstantTimeCompare(sum[:], u.passwords[i][:])
	}
	if match != 1 {
		return nil, ErrWrongPass
	}
	return u, nil
}

// Lookup returns the command and subcommand index of a command name as
// rules spell it ("get", "CONFIG|GET"), sub being -1 for a command.
func (a *ACL) Lookup(name string) (cmd, sub int, ok bool) {
	id := a.t.lookup(name)
	if id < 0 {
		return 0, 0, false
	}
	c := a.t.cmds[id]
	if c.parent < 0 {
		return slices.Index(a.t.base, id), -1, true
	}
	return slices.Index(a.t.base, c.parent), id - c.parent - 1, true
}

// Categories returns the ACL CAT list: Redis's standard categories, then the
// ones the command table introduced, in order of first use.
func (a *ACL) Categories() []string { return slices.Clone(a.t.cats) }

// CategoryCommands returns the commands of a category as ACL CAT <category>
// lists them ("config|get" for subcommands), in command table order, or
// "ERR Unknown category '<name>'".
func (a *ACL) CategoryCommands(category string) ([]string, error) {
	c := a.t.category(category)
	if c < 0 {
		if len(category) > 128 {
			category = category[:128]
		}
		return nil, errorf(CodeUnknownCategory, "Unknown category '%s'", category)
	}
	var out []string
	for _, cmd := range a.t.cmds {
		if cmd.cats&(1<<uint(c)) != 0 {
			out = append(out, cmd.fullname)
		}
	}
	return out, nil
}

// DryRun checks whether the named user could run a command, as ACL DRYRUN
// (the server resolves the command and checks its arity first). It returns
// "" when allowed, else Redis 7.0's verbose message ("This user has no
// permissions to run the 'get' command", "... to access the 'k' key"), which
// the server replies as a bulk string. An unknown user is
// "ERR User '<name>' not found".
func (a *ACL) DryRun(user string, cmd, sub int, args [][]byte, keys []KeyRef) (string, error) {
	u := a.User(user)
	if u == nil {
		return "", errorf(CodeNoSuchUser, "User '%s' not found", user)
	}
	v := u.Check(cmd, sub, args, keys)
	if v.OK() {
		return "", nil
	}
	return u.denyMessage(cmd, sub, args, v), nil
}

// GenPassMaxBits is the largest ACL GENPASS argument.
const GenPassMaxBits = 4096

// GenPass returns a random password of bits bits as (bits+3)/4 lower-case
// hex digits from crypto/rand, as ACL GENPASS [bits] (default 256).
func GenPass(bits int) (string, error) {
	if bits <= 0 || bits > GenPassMaxBits {
		return "", ErrGenPassBits
	}
	chars := (bits + 3) / 4
	buf := make([]byte, (chars+1)/2)
	if _, err := rand.Read(buf); err != nil {
		return "", err
	}
	return hex.EncodeToString(buf)[:chars], nil
}
