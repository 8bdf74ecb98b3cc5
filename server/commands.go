package server

// policyOrLimit is the limit of THROTTLE.CHECK, PEEK and LEASE: given
// inline, or named as a loaded policy (cmd_policy.go).
var policyOrLimit = argDoc{name: "limit-or-policy", typ: "oneof", sub: []argDoc{
	{name: "inline", typ: "block", sub: []argDoc{{name: "limit", typ: "integer"}, {name: "period", typ: "string"}}},
	{name: "policy", typ: "string", token: "POLICY"}}}

// commandSpecs returns the command table's entries, indexed by cmdID.
// Adding a command is one entry here (with its cmdID in table.go) and its
// handler in the file of its family.
func commandSpecs() [numCmds]cmdSpec {
	return [numCmds]cmdSpec{
		cmdThrottleCheck: {name: "throttle.check", arity: -4, flags: flagWrite | flagFast, cats: catThrottle,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).throttleCheckAny, // BAN: cmd_ban.go; POLICY: cmd_policy.go
			group: "throttle", since: "1.0.0", summary: "Admits or denies one request (or COST units) against a key's rate limit.",
			args: []argDoc{{name: "key", typ: "key"}, policyOrLimit,
				{name: "algo", typ: "string", token: "ALGO", optional: true}, {name: "burst", typ: "integer", token: "BURST", optional: true},
				{name: "cost", typ: "integer", token: "COST", optional: true},
				{name: "ban", typ: "block", token: "BAN", optional: true, sub: []argDoc{{name: "threshold", typ: "integer"}, {name: "duration", typ: "string"}}}}},
		cmdThrottlePeek: {name: "throttle.peek", arity: -4, flags: flagReadonly | flagFast, cats: catThrottle,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).throttlePeekAny, // POLICY: cmd_policy.go
			group: "throttle", since: "1.0.0", summary: "Reports what THROTTLE.CHECK would answer for a request of COST units, consuming nothing.",
			args: []argDoc{{name: "key", typ: "key"}, policyOrLimit,
				{name: "algo", typ: "string", token: "ALGO", optional: true}, {name: "burst", typ: "integer", token: "BURST", optional: true},
				{name: "cost", typ: "integer", token: "COST", optional: true}}},
		cmdThrottleReset: {name: "throttle.reset", arity: -2, flags: flagWrite | flagFast, cats: catThrottle | catKeyspace,
			firstKey: 1, lastKey: -1, step: 1, run: (*loop).throttleReset,
			group: "throttle", since: "1.0.0", complexity: "O(N) where N is the number of keys",
			summary: "Forgets the state of keys; returns how many held state.",
			args:    []argDoc{{name: "key", typ: "key", multiple: true}}},
		cmdThrottleLease: {name: "throttle.lease", arity: -6, flags: flagWrite | flagFast, cats: catThrottle,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).throttleLeaseAny, // POLICY: cmd_policy.go
			group: "throttle", since: "1.0.0", summary: "Grants up to BATCH credits from a key's fixed-window budget.",
			args: []argDoc{{name: "key", typ: "key"}, policyOrLimit,
				{name: "batch", typ: "integer", token: "BATCH"}}},
		cmdThrottleReturn: {name: "throttle.return", arity: 4, flags: flagWrite | flagFast, cats: catThrottle,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).throttleReturn,
			group: "throttle", since: "1.0.0", summary: "Gives unused leased credits back to the window that reset_at_ms names.",
			args: []argDoc{{name: "key", typ: "key"}, {name: "credits", typ: "integer"}, {name: "reset_at_ms", typ: "integer"}}},
		cmdThrottlePolicies: {name: "throttle.policies", arity: -1, flags: flagReadonly | flagLoading | flagStale, cats: catThrottle,
			run:   (*loop).throttlePolicies, // cmd_policy.go
			group: "throttle", since: "1.3.0", complexity: "O(N) where N is the number of loaded rate limits",
			summary: "Lists the named policies loaded from --policies, of every domain or of one.",
			args:    []argDoc{{name: "domain", typ: "string", optional: true}}},
		cmdCLThrottle: {name: "cl.throttle", arity: -1, flags: flagWrite, cats: catThrottle,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).clThrottle,
			group: "throttle", since: "1.0.0", summary: "GCRA rate limiting with redis-cell's arguments and reply.",
			args: []argDoc{{name: "key", typ: "key"}, {name: "max_burst", typ: "integer"}, {name: "count_per_period", typ: "integer"},
				{name: "period", typ: "integer"}, {name: "quantity", typ: "integer", optional: true}}},
		cmdGCRA: {name: "gcra", arity: -5, flags: flagWrite | flagDenyOOM | flagFast, cats: catThrottle | catString,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).gcraCmd, // cmd_gcra.go
			group: "rate_limit", since: "8.8.0", summary: "Rate limit via GCRA (Generic Cell Rate Algorithm), as Redis's GCRA command.",
			args: []argDoc{{name: "key", typ: "key"}, {name: "max-burst", typ: "integer"}, {name: "tokens-per-period", typ: "integer"},
				{name: "period", typ: "double"}, {name: "count", typ: "integer", token: "TOKENS", optional: true}}},
		// Admission beyond one limit (cmd_mcheck.go, cmd_reserve.go, cmd_ban.go, cmd_slots.go).
		cmdThrottleMCheck: {name: "throttle.mcheck", arity: -6, flags: flagWrite, cats: catThrottle,
			// Keys are every fourth argument from the second; lastKey -4
			// stops before "limit period algo" of the last limit, with or
			// without a trailing "COST c".
			firstKey: 2, lastKey: -4, step: 4, run: (*loop).throttleMCheck,
			group: "throttle", since: "1.1.0", complexity: "O(N) where N is the number of limits",
			summary: "Admits COST units against every limit or none: all-or-nothing over up to 64 keys.",
			args: []argDoc{{name: "numlimits", typ: "integer"}, {name: "limit", typ: "block", multiple: true, sub: []argDoc{
				{name: "key", typ: "key"}, {name: "limit", typ: "integer"}, {name: "period", typ: "string"}, {name: "algo", typ: "string"}}},
				{name: "cost", typ: "integer", token: "COST", optional: true}}},
		cmdThrottleReserve: {name: "throttle.reserve", arity: -6, flags: flagWrite | flagFast, cats: catThrottle,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).throttleReserve,
			group: "throttle", since: "1.1.0", summary: "Charges an estimated cost now and returns a reservation id to settle the actual cost with.",
			args: []argDoc{{name: "key", typ: "key"}, {name: "limit", typ: "integer"}, {name: "period", typ: "string"},
				{name: "estimate", typ: "integer", token: "COST"}, {name: "algo", typ: "string", token: "ALGO", optional: true},
				{name: "ttl", typ: "string", token: "TTL", optional: true}}},
		cmdThrottleSettle: {name: "throttle.settle", arity: 4, flags: flagWrite | flagFast, cats: catThrottle,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).throttleSettle,
			group: "throttle", since: "1.1.0", summary: "Settles a reservation at its actual cost, exactly once: refunds or charges the difference.",
			args: []argDoc{{name: "key", typ: "key"}, {name: "id", typ: "string"}, {name: "actual", typ: "integer"}}},
		cmdThrottleBanned: {name: "throttle.banned", arity: 2, flags: flagReadonly | flagFast, cats: catThrottle,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).throttleBanned,
			group: "throttle", since: "1.1.0", summary: "Returns the milliseconds left of a key's ban, or 0.",
			args: []argDoc{{name: "key", typ: "key"}}},
		cmdThrottleUnban: {name: "throttle.unban", arity: 2, flags: flagWrite | flagFast, cats: catThrottle,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).throttleUnban,
			group: "throttle", since: "1.1.0", summary: "Lifts a key's ban and forgets its denial count; returns 1 if a ban was lifted.",
			args: []argDoc{{name: "key", typ: "key"}}},
		cmdThrottleAcquire: {name: "throttle.acquire", arity: 4, flags: flagWrite, cats: catThrottle,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).throttleAcquire,
			group: "throttle", since: "1.1.0", complexity: "O(L) where L is the limit",
			summary: "Takes one of a key's concurrency slots for ttl, if fewer than limit are held.",
			args:    []argDoc{{name: "key", typ: "key"}, {name: "limit", typ: "integer"}, {name: "ttl", typ: "string"}}},
		cmdThrottleRelease: {name: "throttle.release", arity: 3, flags: flagWrite | flagFast, cats: catThrottle,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).throttleRelease,
			group: "throttle", since: "1.1.0", summary: "Frees the concurrency slot a token holds, exactly once.",
			args: []argDoc{{name: "key", typ: "key"}, {name: "token", typ: "string"}}},
		cmdThrottleRefresh: {name: "throttle.refresh", arity: 4, flags: flagWrite | flagFast, cats: catThrottle,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).throttleRefresh,
			group: "throttle", since: "1.1.0", summary: "Extends the ttl of a held concurrency slot.",
			args: []argDoc{{name: "key", typ: "key"}, {name: "token", typ: "string"}, {name: "ttl", typ: "string"}}},

		cmdPing: {name: "ping", arity: -1, flags: flagFast, cats: catConnection, run: (*loop).ping,
			group: "connection", since: "1.0.0", summary: "Returns PONG, or the message given.",
			args: []argDoc{{name: "message", typ: "string", optional: true}}},
		cmdEcho: {name: "echo", arity: 2, flags: flagsAnyTime | flagFast, cats: catConnection, run: (*loop).echo,
			group: "connection", since: "1.0.0", summary: "Returns the message given.",
			args: []argDoc{{name: "message", typ: "string"}}},
		cmdHello: {name: "hello", arity: -1, flags: flagsHandshake, cats: catConnection, run: (*loop).hello,
			group: "connection", since: "6.0.0", summary: "Handshakes: selects RESP2 or RESP3, optionally authenticates and names the connection.",
			args: []argDoc{{name: "protover", typ: "integer", optional: true}, {name: "auth", typ: "block", token: "AUTH", optional: true,
				sub: []argDoc{{name: "username", typ: "string"}, {name: "password", typ: "string"}}},
				{name: "clientname", typ: "string", token: "SETNAME", optional: true}}},
		cmdAuth: {name: "auth", arity: -2, flags: flagsHandshake, cats: catConnection, run: (*loop).auth,
			group: "connection", since: "1.0.0", summary: "Authenticates the connection.",
			args: []argDoc{{name: "username", typ: "string", optional: true}, {name: "password", typ: "string"}}},
		cmdSelect: {name: "select", arity: 2, flags: flagsAnyTime | flagFast, cats: catConnection, run: (*loop).selectDB,
			group: "connection", since: "1.0.0", summary: "Selects database 0 (the only one).",
			args: []argDoc{{name: "index", typ: "integer"}}},
		cmdClient: {name: "client", arity: -2, group: "connection", since: "2.4.0", complexity: "Depends on subcommand.",
			summary: "A container for connection commands: SETNAME, GETNAME, ID, SETINFO, INFO, LIST, KILL, REPLY.",
			subs:    clientSubcommands()},
		cmdCommand: {name: "command", arity: -1, flags: flagsAnyTime, cats: catConnection, run: (*loop).commandAll,
			group: "server", since: "2.8.13", complexity: "O(N) where N is the total number of commands",
			summary: "Describes the commands: COUNT, LIST, INFO, DOCS, GETKEYS.",
			help:    []string{"(no subcommand)", "    Return details about all commands."},
			subs:    commandSubcommands()},
		cmdInfo: {name: "info", arity: -1, flags: flagsAnyTime, cats: catDangerous, run: (*loop).info,
			group: "server", since: "1.0.0", summary: "Reports server information and statistics.",
			args: []argDoc{{name: "section", typ: "string", optional: true, multiple: true}}},
		cmdDBSize: {name: "dbsize", arity: 1, flags: flagReadonly | flagFast, cats: catKeyspace, run: (*loop).dbsize,
			group: "server", since: "1.0.0", summary: "Returns the number of keys held."},
		cmdTime: {name: "time", arity: 1, flags: flagsAnyTime | flagFast, run: (*loop).timeCmd,
			group: "server", since: "2.6.0", summary: "Returns the server time: seconds and microseconds."},
		cmdQuit: {name: "quit", arity: -1, flags: flagsHandshake, cats: catConnection, run: (*loop).quit,
			group: "connection", since: "1.0.0", summary: "Closes the connection."},
		cmdReset: {name: "reset", arity: 1, flags: flagsHandshake, cats: catConnection, run: (*loop).reset,
			group: "connection", since: "6.2.0", summary: "Resets the connection: RESP2, no name, unauthenticated if a password is set."},
		cmdConfig: {name: "config", arity: -2, group: "server", since: "2.0.0", complexity: "Depends on subcommand.",
			summary: "A container for server configuration commands: GET, RESETSTAT.",
			subs:    configSubcommands()},
		cmdMonitor: {name: "monitor", arity: 1, flags: flagsAdmin, run: (*loop).monitor,
			group: "server", since: "1.0.0", summary: "Streams every command the server runs (but administrative ones) as it runs it."},
		cmdACL: {name: "acl", arity: -2, group: "server", since: "6.0.0", complexity: "Depends on subcommand.", // cmd_acl.go
			summary: "A container for access control commands: SETUSER, GETUSER, DELUSER, USERS, LIST, WHOAMI, CAT, LOAD, SAVE, LOG, GENPASS, DRYRUN.",
			subs:    aclSubcommands()},
		cmdDebug: {name: "debug", arity: -2, flags: flagsAdmin, group: "server", since: "1.0.0", complexity: "Depends on subcommand.", // cmd_debug.go
			summary: "A container for debugging commands: SET-CLOCK, ADVANCE-CLOCK; refused unless enable-debug-command allows it.",
			subs:    debugSubcommands()},
		cmdSlowlog: {name: "slowlog", arity: -2, group: "server", since: "2.2.12", complexity: "Depends on subcommand.", // cmd_slowlog.go
			summary: "A container for slow log commands: GET, LEN, RESET.",
			subs:    slowlogSubcommands()},
		cmdLatency: {name: "latency", arity: -2, group: "server", since: "2.8.13", complexity: "Depends on subcommand.", // cmd_latency.go
			summary: "A container for latency diagnostics commands: LATEST, HISTORY, RESET, HISTOGRAM, DOCTOR.",
			subs:    latencySubcommands()},
		cmdMemory: {name: "memory", arity: -2, group: "server", since: "4.0.0", complexity: "Depends on subcommand.", // cmd_memory.go
			summary: "A container for memory diagnostics commands: USAGE, STATS, DOCTOR.",
			subs:    memorySubcommands()},
		cmdObject: {name: "object", arity: -2, group: "generic", since: "2.2.3", complexity: "Depends on subcommand.", // cmd_memory.go
			summary: "A container for object introspection commands: ENCODING, FREQ, IDLETIME, REFCOUNT.",
			subs:    objectSubcommands()},

		// Transactions (cmd_multi.go).
		cmdMulti: {name: "multi", arity: 1, flags: flagsTxn, cats: catTransaction, run: (*loop).multiCmd,
			group: "transactions", since: "1.2.0", summary: "Starts a transaction."},
		cmdExec: {name: "exec", arity: 1, flags: flagsAnyTime | flagNoScript | flagSkipSlowlog, cats: catTransaction, run: (*loop).exec,
			group: "transactions", since: "1.2.0", complexity: "Depends on commands in the transaction",
			summary: "Executes all commands in a transaction, atomically across shards."},
		cmdDiscard: {name: "discard", arity: 1, flags: flagsTxn, cats: catTransaction, run: (*loop).discard,
			group: "transactions", since: "2.0.0", complexity: "O(N), when N is the number of queued commands",
			summary: "Discards a transaction."},
		cmdWatch: {name: "watch", arity: -2, flags: flagsTxn, cats: catTransaction,
			firstKey: 1, lastKey: -1, step: 1, run: (*loop).watch,
			group: "transactions", since: "2.2.0", complexity: "O(1) for every key.",
			summary: "Monitors changes to keys to determine the execution of a transaction.",
			args:    []argDoc{{name: "key", typ: "key", multiple: true}}},
		cmdUnwatch: {name: "unwatch", arity: 1, flags: flagsTxn, cats: catTransaction, run: (*loop).unwatch,
			group: "transactions", since: "2.2.0", summary: "Forgets about watched keys of a transaction."},

		// Keyspace (cmd_keyspace.go).
		cmdDel: {name: "del", arity: -2, flags: flagWrite, cats: catKeyspace,
			firstKey: 1, lastKey: -1, step: 1, run: (*loop).throttleReset,
			group: "generic", since: "1.0.0", complexity: "O(N) where N is the number of keys that will be removed.",
			summary: "Forgets the state of keys; returns how many held state.",
			args:    []argDoc{{name: "key", typ: "key", multiple: true}}},
		cmdUnlink: {name: "unlink", arity: -2, flags: flagWrite | flagFast, cats: catKeyspace,
			firstKey: 1, lastKey: -1, step: 1, run: (*loop).throttleReset,
			group: "generic", since: "4.0.0", complexity: "O(1) for each key removed.",
			summary: "Forgets the state of keys, as DEL; returns how many held state.",
			args:    []argDoc{{name: "key", typ: "key", multiple: true}}},
		cmdExists: {name: "exists", arity: -2, flags: flagReadonly | flagFast, cats: catKeyspace,
			firstKey: 1, lastKey: -1, step: 1, run: (*loop).exists,
			group: "generic", since: "1.0.0", complexity: "O(N) where N is the number of keys to check.",
			summary: "Counts the arguments that name a key holding state.",
			args:    []argDoc{{name: "key", typ: "key", multiple: true}}},
		cmdType: {name: "type", arity: 2, flags: flagReadonly | flagFast, cats: catKeyspace,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).typeCmd,
			group: "generic", since: "1.0.0", summary: "Returns the algorithm whose state a key holds (gcra, token, fixed, sliding) or none.",
			args: []argDoc{{name: "key", typ: "key"}}},
		cmdTTL: {name: "ttl", arity: 2, flags: flagReadonly | flagFast, cats: catKeyspace,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).ttl,
			group: "generic", since: "1.0.0", summary: "Returns the seconds until a key's state is a fresh key's; -2 if absent.",
			args: []argDoc{{name: "key", typ: "key"}}},
		cmdPTTL: {name: "pttl", arity: 2, flags: flagReadonly | flagFast, cats: catKeyspace,
			firstKey: 1, lastKey: 1, step: 1, run: (*loop).pttl,
			group: "generic", since: "2.6.0", summary: "Returns the milliseconds until a key's state is a fresh key's; -2 if absent.",
			args: []argDoc{{name: "key", typ: "key"}}},
		cmdScan: {name: "scan", arity: -2, flags: flagReadonly, cats: catKeyspace, run: (*loop).scan,
			group: "generic", since: "2.8.0",
			complexity: "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of keys.",
			summary:    "Iterates over the keys.",
			args: []argDoc{{name: "cursor", typ: "integer"}, {name: "pattern", typ: "pattern", token: "MATCH", optional: true},
				{name: "count", typ: "integer", token: "COUNT", optional: true}, {name: "type", typ: "string", token: "TYPE", optional: true}}},
		cmdKeys: {name: "keys", arity: 2, flags: flagReadonly, cats: catKeyspace | catDangerous, run: (*loop).keys,
			group: "generic", since: "1.0.0", complexity: "O(N) with N being the number of keys",
			summary: "Returns all key names that match a pattern.",
			args:    []argDoc{{name: "pattern", typ: "pattern"}}},
		cmdFlushAll: {name: "flushall", arity: -1, flags: flagWrite, cats: catKeyspace | catDangerous, run: (*loop).flushAll,
			group: "server", since: "1.0.0", complexity: "O(N) where N is the total number of keys",
			summary: "Forgets the state of every key.", args: flushArgs()},
		cmdFlushDB: {name: "flushdb", arity: -1, flags: flagWrite, cats: catKeyspace | catDangerous, run: (*loop).flushAll,
			group: "server", since: "1.0.0", complexity: "O(N) where N is the number of keys",
			summary: "Forgets the state of every key (there is one database).", args: flushArgs()},
	}
}

// flushArgs returns the arguments of FLUSHALL and FLUSHDB.
func flushArgs() []argDoc {
	return []argDoc{{name: "flush-type", typ: "oneof", optional: true, sub: []argDoc{
		{name: "async", typ: "pure-token", token: "ASYNC"}, {name: "sync", typ: "pure-token", token: "SYNC"}}}}
}

// helpSub is the HELP subcommand every container has.
func helpSub(container, since, group string, cats aclCats) cmdSpec {
	return cmdSpec{name: container + "|help", arity: 2, flags: flagsAnyTime, cats: cats, run: (*loop).help,
		group: group, since: since, summary: "Returns helpful text about the different subcommands.",
		help: []string{"HELP", "    Print this help."}}
}

func clientSubcommands() []cmdSpec {
	const g = "connection"
	return []cmdSpec{
		{name: "client|getname", arity: 2, flags: flagsConnInfo, cats: catConnection, run: (*loop).clientGetName,
			group: g, since: "2.6.9", summary: "Returns the name of the connection.",
			help: []string{"GETNAME", "    Return the name of the current connection."}},
		{name: "client|id", arity: 2, flags: flagsConnInfo, cats: catConnection, run: (*loop).clientID,
			group: g, since: "5.0.0", summary: "Returns the unique client ID of the connection.",
			help: []string{"ID", "    Return the ID of the current connection."}},
		{name: "client|info", arity: 2, flags: flagsConnInfo, cats: catConnection, run: (*loop).clientInfo,
			group: g, since: "6.2.0", summary: "Returns information about the connection.",
			help: []string{"INFO", "    Return information about the current client connection."}},
		{name: "client|kill", arity: -3, flags: flagsAdmin, cats: catConnection, run: (*loop).clientKill,
			group: g, since: "2.4.0", complexity: "O(N) where N is the number of client connections",
			summary: "Closes connections: by address, or by the filters given; returns how many (the filter form).",
			args: []argDoc{{name: "filter", typ: "oneof", sub: []argDoc{
				{name: "old-format", typ: "string"},
				{name: "new-format", typ: "oneof", multiple: true, sub: []argDoc{
					{name: "client-id", typ: "integer", token: "ID", optional: true},
					{name: "client-type", typ: "oneof", token: "TYPE", optional: true, sub: []argDoc{
						{name: "normal", typ: "pure-token", token: "NORMAL"}, {name: "master", typ: "pure-token", token: "MASTER"},
						{name: "slave", typ: "pure-token", token: "SLAVE"}, {name: "replica", typ: "pure-token", token: "REPLICA"},
						{name: "pubsub", typ: "pure-token", token: "PUBSUB"}}},
					{name: "username", typ: "string", token: "USER", optional: true},
					{name: "addr", typ: "string", token: "ADDR", optional: true},
					{name: "laddr", typ: "string", token: "LADDR", optional: true},
					{name: "skipme", typ: "oneof", token: "SKIPME", optional: true, sub: []argDoc{
						{name: "yes", typ: "pure-token", token: "YES"}, {name: "no", typ: "pure-token", token: "NO"}}}}}}}},
			help: []string{"KILL <ip:port>", "    Kill connection made from <ip:port>.",
				"KILL <option> <value> [<option> <value> [...]]", "    Kill connections. Options are:",
				"    * ADDR <ip:port>", "      Kill connections made from the specified address",
				"    * LADDR <ip:port>", "      Kill connections made to specified local address",
				"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)", "      Kill connections by type.",
				"    * USER <username>", "      Kill connections authenticated by <username>.",
				"    * ID <client-id>", "      Kill the connection with the given ID.",
				"    * SKIPME (YES|NO)", "      Skip killing current connection (default: yes)."}},
		{name: "client|list", arity: -2, flags: flagsAdmin, cats: catConnection, run: (*loop).clientList,
			group: g, since: "2.4.0", complexity: "O(N) where N is the number of client connections",
			summary: "Lists open connections.",
			args: []argDoc{{name: "client-type", typ: "oneof", token: "TYPE", optional: true, sub: []argDoc{
				{name: "normal", typ: "pure-token", token: "NORMAL"}, {name: "master", typ: "pure-token", token: "MASTER"},
				{name: "replica", typ: "pure-token", token: "REPLICA"}, {name: "pubsub", typ: "pure-token", token: "PUBSUB"}}},
				{name: "client-id", typ: "integer", token: "ID", optional: true, multiple: true}},
			help: []string{"LIST [options ...]", "    Return information about client connections. Options:",
				"    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)", "      Return clients of specified type.",
				"    * ID <id> [<id> ...]", "      Return the clients with the given IDs."}},
		{name: "client|reply", arity: 3, flags: flagsConnInfo, cats: catConnection, run: (*loop).clientReply,
			group: g, since: "3.2.0", summary: "Instructs the server whether to reply to commands.",
			args: []argDoc{{name: "action", typ: "oneof", sub: []argDoc{{name: "on", typ: "pure-token", token: "ON"},
				{name: "off", typ: "pure-token", token: "OFF"}, {name: "skip", typ: "pure-token", token: "SKIP"}}}},
			help: []string{"REPLY (ON|OFF|SKIP)", "    Control the replies sent to the current connection."}},
		{name: "client|setinfo", arity: 4, flags: flagsConnInfo, cats: catConnection, run: (*loop).clientSetInfo,
			group: g, since: "7.2.0", summary: "Sets information specific to the client library.",
			args: []argDoc{{name: "attr", typ: "oneof", sub: []argDoc{{name: "libname", typ: "string", token: "LIB-NAME"},
				{name: "libver", typ: "string", token: "LIB-VER"}}}},
			help: []string{"SETINFO <LIB-NAME|LIB-VER> <value>", "    Set library name or version of the current connection."}},
		{name: "client|setname", arity: 3, flags: flagsConnInfo, cats: catConnection, run: (*loop).clientSetName,
			group: g, since: "2.6.9", summary: "Sets the connection name.",
			args: []argDoc{{name: "connection-name", typ: "string"}},
			help: []string{"SETNAME <name>", "    Assign the name <name> to the current connection."}},
		helpSub("client", "5.0.0", g, catConnection),
		// Accepted so that clients which send them at connect time go on;
		// they change nothing here (no eviction, no LRU), so HELP omits them.
		{name: "client|no-evict", arity: 3, flags: flagsAdmin, cats: catConnection, run: (*loop).clientNoOp,
			group: g, since: "7.0.0", summary: "Accepted for compatibility; keys are never evicted on a client's behalf.",
			args: []argDoc{{name: "enabled", typ: "oneof", sub: []argDoc{{name: "on", typ: "pure-token", token: "ON"}, {name: "off", typ: "pure-token", token: "OFF"}}}}},
		{name: "client|no-touch", arity: 3, flags: flagsConnInfo, cats: catConnection, run: (*loop).clientNoOp,
			group: g, since: "7.2.0", summary: "Accepted for compatibility; commands keep no access times.",
			args: []argDoc{{name: "enabled", typ: "oneof", sub: []argDoc{{name: "on", typ: "pure-token", token: "ON"}, {name: "off", typ: "pure-token", token: "OFF"}}}}},
	}
}

func commandSubcommands() []cmdSpec {
	const g = "server"
	return []cmdSpec{
		{name: "command|count", arity: 2, flags: flagsAnyTime, cats: catConnection, run: (*loop).commandCount,
			group: g, since: "2.8.13", summary: "Returns a count of commands.",
			help: []string{"COUNT", "    Return the total number of commands in this server."}},
		{name: "command|list", arity: -2, flags: flagsAnyTime, cats: catConnection, run: (*loop).commandList,
			group: g, since: "7.0.0", complexity: "O(N) where N is the total number of commands",
			summary: "Returns a list of command names.",
			args: []argDoc{{name: "filterby", typ: "oneof", token: "FILTERBY", optional: true, sub: []argDoc{
				{name: "module-name", typ: "string", token: "MODULE"}, {name: "category", typ: "string", token: "ACLCAT"},
				{name: "pattern", typ: "pattern", token: "PATTERN"}}}},
			help: []string{"LIST [FILTERBY (MODULE <module-name>|ACLCAT <category>|PATTERN <pattern>)]",
				"    Return a list of all commands in this server, or those the filter selects."}},
		{name: "command|info", arity: -2, flags: flagsAnyTime, cats: catConnection, run: (*loop).commandInfoCmd,
			group: g, since: "2.8.13", complexity: "O(N) where N is the number of commands to look up",
			summary: "Returns information about one, multiple or all commands.",
			args:    []argDoc{{name: "command-name", typ: "string", optional: true, multiple: true}},
			help:    []string{"INFO [<command-name> ...]", "    Return details about multiple commands."}},
		{name: "command|docs", arity: -2, flags: flagsAnyTime, cats: catConnection, run: (*loop).commandDocs,
			group: g, since: "7.0.0", complexity: "O(N) where N is the number of commands to look up",
			summary: "Returns documentary information about one, multiple or all commands.",
			args:    []argDoc{{name: "command-name", typ: "string", optional: true, multiple: true}},
			help:    []string{"DOCS [<command-name> ...]", "    Return documentation details about multiple commands."}},
		{name: "command|getkeys", arity: -4, flags: flagsAnyTime, cats: catConnection, run: (*loop).commandGetKeys,
			group: g, since: "2.8.13", complexity: "O(N) where N is the number of arguments to the command",
			summary: "Extracts the key names from an arbitrary command.",
			args:    []argDoc{{name: "command", typ: "string"}, {name: "arg", typ: "string", optional: true, multiple: true}},
			help:    []string{"GETKEYS <full-command>", "    Return the keys from a full command."}},
		helpSub("command", "5.0.0", g, catConnection),
	}
}

func configSubcommands() []cmdSpec {
	const g = "server"
	return []cmdSpec{
		{name: "config|get", arity: -3, flags: flagsAdmin, run: (*loop).configGet,
			group: g, since: "2.0.0", complexity: "O(N) when N is the number of configuration parameters provided",
			summary: "Returns the effective values of configuration parameters.",
			args:    []argDoc{{name: "parameter", typ: "string", multiple: true}},
			help:    []string{"GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values."}},
		{name: "config|resetstat", arity: 2, flags: flagsAdmin, run: (*loop).configResetStat,
			group: g, since: "2.0.0", summary: "Resets the statistics INFO reports.",
			help: []string{"RESETSTAT", "    Reset statistics reported by the INFO command."}},
		helpSub("config", "5.0.0", g, 0),
	}
}
