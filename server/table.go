package server

import (
	"encoding/binary"
	"strings"
)

// cmdID indexes commandTable: one id per top-level command.
type cmdID uint8

// Command identifiers, in commandTable order. COMMAND COUNT, COMMAND and
// Stats.Commands list top-level commands in this order.
const (
	cmdThrottleCheck cmdID = iota
	cmdThrottlePeek
	cmdThrottleReset
	cmdThrottleLease
	cmdThrottleReturn
	cmdThrottleMCheck  // cmd_mcheck.go
	cmdThrottleReserve // cmd_reserve.go
	cmdThrottleSettle  // cmd_reserve.go
	cmdThrottleBanned  // cmd_ban.go
	cmdThrottleUnban   // cmd_ban.go
	cmdThrottleAcquire // cmd_slots.go
	cmdThrottleRelease // cmd_slots.go
	cmdThrottleRefresh // cmd_slots.go
	cmdCLThrottle
	cmdPing
	cmdEcho
	cmdHello
	cmdAuth
	cmdSelect
	cmdClient
	cmdCommand
	cmdInfo
	cmdDBSize
	cmdTime
	cmdQuit
	cmdReset
	cmdConfig
	cmdMulti
	cmdExec
	cmdDiscard
	cmdWatch
	cmdUnwatch
	cmdDel
	cmdUnlink
	cmdExists
	cmdType
	cmdTTL
	cmdPTTL
	cmdScan
	cmdKeys
	cmdFlushAll
	cmdFlushDB
	cmdMonitor          // cmd_monitor.go
	cmdACL              // cmd_acl.go
	cmdDebug            // cmd_debug.go
	cmdGCRA             // cmd_gcra.go
	cmdSlowlog          // cmd_slowlog.go
	cmdLatency          // cmd_latency.go
	cmdMemory           // cmd_memory.go
	cmdObject           // cmd_memory.go
	cmdThrottlePolicies // cmd_policy.go
	numCmds
)

// handler runs one command whose name, authentication and arity dispatch
// has checked, appending its reply to l.out, and returns what happened.
type handler func(l *loop, cl *client, args [][]byte, now int64) result

// result is what a handler returns: whether its reply is an error (INFO
// commandstats counts the call as failed) and whether the connection must
// be closed once the batch's replies are written.
type result uint8

const (
	replied   result = 0      // answered
	failed    result = 1 << 0 // answered with an error
	closeConn result = 1 << 1 // answered; close the connection after the batch
)

// closeIf is closeConn when b is set, else replied.
func closeIf(b bool) result {
	if b {
		return closeConn
	}
	return replied
}

// cmdFlags are a command's flags as COMMAND INFO reports them.
type cmdFlags uint32

// Flags, in the order Redis lists them.
const (
	flagWrite cmdFlags = 1 << iota
	flagReadonly
	flagDenyOOM
	flagAdmin
	flagPubSub
	flagNoScript
	flagBlocking
	flagLoading
	flagStale
	flagSkipMonitor
	flagSkipSlowlog
	flagAsking
	flagFast
	flagNoAuth
	flagMayReplicate
	flagNoMandatoryKeys
	flagAllowBusy
	numFlags = iota
)

// flagNames are the Redis spellings of the flags, by bit.
var flagNames = [numFlags]string{
	"write", "readonly", "denyoom", "admin", "pubsub", "noscript", "blocking", "loading", "stale",
	"skip_monitor", "skip_slowlog", "asking", "fast", "no_auth", "may_replicate", "no_mandatory_keys",
	"allow_busy",
}

// aclCats are a command's ACL categories.
type aclCats uint32

// ACL categories, in the order Redis lists them; @throttle is ours.
const (
	catKeyspace aclCats = 1 << iota
	catRead
	catWrite
	catSet
	catSortedSet
	catList
	catHash
	catString
	catBitmap
	catHyperLogLog
	catGeo
	catStream
	catPubSub
	catAdmin
	catFast
	catSlow
	catBlocking
	catDangerous
	catConnection
	catTransaction
	catScripting
	catThrottle
	numCats = iota
)

// catNames are the category names without the leading '@', by bit.
var catNames = [numCats]string{
	"keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap", "hyperloglog",
	"geo", "stream", "pubsub", "admin", "fast", "slow", "blocking", "dangerous", "connection",
	"transaction", "scripting", "throttle",
}

// implicitCats adds the categories Redis derives from flags: write -> @write,
// readonly -> @read, admin -> @admin @dangerous, pubsub -> @pubsub, fast ->
// @fast, blocking -> @blocking, and @slow for every command that is not fast.
func implicitCats(f cmdFlags, c aclCats) aclCats {
	if f&flagWrite != 0 {
		c |= catWrite
	}
	if f&flagReadonly != 0 {
		c |= catRead
	}
	if f&flagAdmin != 0 {
		c |= catAdmin | catDangerous
	}
	if f&flagPubSub != 0 {
		c |= catPubSub
	}
	if f&flagFast != 0 {
		c |= catFast
	}
	if f&flagBlocking != 0 {
		c |= catBlocking
	}
	if c&catFast == 0 {
		c |= catSlow
	}
	return c
}

// cmdSpec is one command or subcommand: everything dispatch, COMMAND (COUNT,
// LIST, INFO, DOCS, GETKEYS), HELP and the statistics know about it.
type cmdSpec struct {
	name  string // lower case; "container|sub" for a subcommand
	upper string // name in upper case, for a top-level command (lookupAgain)
	// The first and last eight bytes of upper for a name of 8 to 16 bytes,
	// four for one of 4 to 7: two word comparisons match it (sameUpper).
	upperHead, upperTail uint64
	arity                int // as Redis: n = exactly n words, -n = at least n (the name counts)
	flags                cmdFlags
	cats                 aclCats // explicit categories; the flags add the implicit ones (see implicitCats)

	firstKey, lastKey, step int // key positions as COMMAND INFO reports them; lastKey < 0 counts from the end

	stat uint16 // index of its per-command counters (stats.go), set by indexStats

	run  handler   // nil for a container without a reply of its own
	subs []cmdSpec // subcommands, dispatched on the second word; listed by HELP in this order

	// Documentation: COMMAND DOCS and HELP.
	summary    string
	since      string
	group      string
	complexity string   // "" means O(1)
	args       []argDoc // COMMAND DOCS arguments
	help       []string // HELP lines: for a subcommand its usage then its description lines; for a container the lines before the subcommands'
}

// argDoc is one argument of a command as COMMAND DOCS reports it.
type argDoc struct {
	name     string
	typ      string // "key", "integer", "string", "pure-token", "block", "oneof"
	token    string // a leading keyword, for pure-token or keyword options
	optional bool
	multiple bool
	sub      []argDoc // arguments of a block or oneof
}

// aclCategories returns the command's categories, explicit and implicit.
func (sp *cmdSpec) aclCategories() aclCats { return implicitCats(sp.flags, sp.cats) }

// categoryNames returns the names of the command's ACL categories, explicit
// and implicit, without the '@', in Redis's order.
func (sp *cmdSpec) categoryNames() []string {
	cats := sp.aclCategories()
	var names []string
	for i := 0; i < numCats; i++ {
		if cats&(1<<i) != 0 {
			names = append(names, catNames[i])
		}
	}
	return names
}

// sub finds the subcommand named by word, ignoring case, or returns nil.
func (sp *cmdSpec) sub(word []byte) *cmdSpec {
	prefix := len(sp.name) + 1 // "client|"
	for i := range sp.subs {
		if equalFold(word, sp.subs[i].name[prefix:]) {
			return &sp.subs[i]
		}
	}
	return nil
}

// commandTable is the single source of truth for commands: dispatch, the
// statistics, COMMAND and HELP all read it. It is filled once by init (its
// handlers refer back to it) and never written again.
var commandTable [numCmds]cmdSpec

// commandSpelled maps the all-upper-case and all-lower-case spellings of
// the top-level command names, the two that clients send, to their ids
// (lookup folds any other spelling to lower case).
var commandSpelled map[string]cmdID

func init() {
	commandTable = commandSpecs()
	commandSpelled = make(map[string]cmdID, 2*numCmds)
	for i := range commandTable {
		sp := &commandTable[i]
		sp.upper = strings.ToUpper(sp.name)
		switch u := []byte(sp.upper); {
		case len(u) >= 8:
			sp.upperHead = binary.LittleEndian.Uint64(u)
			sp.upperTail = binary.LittleEndian.Uint64(u[len(u)-8:])
		case len(u) >= 4:
			sp.upperHead = uint64(binary.LittleEndian.Uint32(u))
			sp.upperTail = uint64(binary.LittleEndian.Uint32(u[len(u)-4:]))
		}
		commandSpelled[sp.name] = cmdID(i)
		commandSpelled[sp.upper] = cmdID(i)
	}
	indexStats() // per-command counters: stats.go
}

// lookup finds a top-level command by name, case-insensitively, without
// allocating. A name spelled all in upper or all in lower case is found
// as it is; any other is lower-cased into a stack buffer first.
func lookup(name []byte) (cmdID, bool) {
	if len(name) > maxCmdName {
		return 0, false
	}
	if id, ok := commandSpelled[string(name)]; ok {
		return id, true
	}
	var buf [maxCmdName]byte
	for i, c := range name {
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	id, ok := commandSpelled[string(buf[:len(name)])]
	return id, ok
}

// lookupAgain is lookup for a connection whose previous command was
// last: pipelines and busy clients repeat one command, and comparing the
// name with that command's costs less than hashing it. The upper-case
// spelling, which most clients send, is compared as it is (one memory
// comparison); any other is folded byte by byte.
func lookupAgain(name []byte, last cmdID) (cmdID, bool) {
	if int(last) < len(commandTable) {
		sp := &commandTable[last]
		if sp.sameUpper(name) || equalFold(name, sp.name) {
			return last, true
		}
	}
	return lookup(name)
}

// sameUpper reports whether name is sp's name in upper case, byte for
// byte. A name of 8 to 16 bytes (THROTTLE.CHECK, CL.THROTTLE) is compared
// as two overlapping words, its first and last eight bytes, which cover
// it; one of 4 to 7 bytes (PING) likewise with four-byte words.
func (sp *cmdSpec) sameUpper(name []byte) bool {
	n := len(name)
	switch {
	case n != len(sp.upper):
		return false
	case n >= 8 && n <= 16:
		return binary.LittleEndian.Uint64(name) == sp.upperHead &&
			binary.LittleEndian.Uint64(name[n-8:]) == sp.upperTail
	case n >= 4 && n < 8:
		return uint64(binary.LittleEndian.Uint32(name)) == sp.upperHead &&
			uint64(binary.LittleEndian.Uint32(name[n-4:])) == sp.upperTail
	}
	return string(name) == sp.upper
}

// lookupSpec finds a command or, for "container|sub", a subcommand, as
// COMMAND INFO, DOCS and GETKEYS name them.
func lookupSpec(name []byte) *cmdSpec {
	for i, c := range name {
		if c == '|' {
			id, ok := lookup(name[:i])
			if !ok {
				return nil
			}
			return commandTable[id].sub(name[i+1:])
		}
	}
	id, ok := lookup(name)
	if !ok {
		return nil
	}
	return &commandTable[id]
}

// Flag sets shared by many entries, as Redis gives them to the same commands.
const (
	flagsHandshake = flagNoScript | flagLoading | flagStale | flagFast | flagNoAuth | flagAllowBusy
	flagsConnInfo  = flagNoScript | flagLoading | flagStale
	flagsAnyTime   = flagLoading | flagStale
	flagsAdmin     = flagAdmin | flagNoScript | flagLoading | flagStale
	flagsTxn       = flagNoScript | flagLoading | flagStale | flagFast | flagAllowBusy
)
