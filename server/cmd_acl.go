package server

// The ACL command and its subcommands, with Redis 7's replies. The users
// and the rules are the acl package's; this file parses arguments and
// shapes replies. ACL LOG entries carry the fields of Redis 7.2 (entry-id
// and the two timestamps after Redis 7.0's seven).

import (
	"time"

	"github.com/throttlekit/throttlekit-server/server/acl"
	"github.com/throttlekit/throttlekit-server/server/resp"
)

// aclSubcommands are the entries of ACL, in the order ACL HELP lists them.
func aclSubcommands() []cmdSpec {
	const g = "server"
	return []cmdSpec{
		{name: "acl|cat", arity: -2, flags: flagNoScript | flagsAnyTime, run: (*loop).aclCat,
			group: g, since: "6.0.0", complexity: "O(1) since the categories and commands are a fixed set.",
			summary: "Lists the ACL categories, or the commands inside a category.",
			args:    []argDoc{{name: "category", typ: "string", optional: true}},
			help: []string{"CAT [<category>]", "    List all commands that belong to <category>, or all command categories",
				"    when no category is specified."}},
		{name: "acl|deluser", arity: -3, flags: flagsAdmin, run: (*loop).aclDelUser,
			group: g, since: "6.0.0", complexity: "O(1) amortized time considering the typical user.",
			summary: "Deletes ACL users, and terminates their connections.",
			args:    []argDoc{{name: "username", typ: "string", multiple: true}},
			help:    []string{"DELUSER <username> [<username> ...]", "    Delete a list of users."}},
		{name: "acl|dryrun", arity: -4, flags: flagsAdmin, run: (*loop).aclDryRun,
			group: g, since: "7.0.0", summary: "Simulates the execution of a command by a user, without executing the command.",
			args: []argDoc{{name: "username", typ: "string"}, {name: "command", typ: "string"},
				{name: "arg", typ: "string", optional: true, multiple: true}},
			help: []string{"DRYRUN <username> <command> [<arg> ...]",
				"    Returns whether the user can execute the given command without executing the command."}},
		{name: "acl|getuser", arity: 3, flags: flagsAdmin, run: (*loop).aclGetUser,
			group: g, since: "6.0.0", complexity: "O(N). Where N is the number of password, command and pattern rules that the user has.",
			summary: "Lists the ACL rules of a user.",
			args:    []argDoc{{name: "username", typ: "string"}},
			help:    []string{"GETUSER <username>", "    Get the user's details."}},
		{name: "acl|genpass", arity: -2, flags: flagNoScript | flagsAnyTime, run: (*loop).aclGenPass,
			group: g, since: "6.0.0", summary: "Generates a pseudorandom, secure password that can be used to identify ACL users.",
			args: []argDoc{{name: "bits", typ: "integer", optional: true}},
			help: []string{"GENPASS [<bits>]", "    Generate a secure 256-bit user password. The optional `bits` argument can",
				"    be used to specify a different size."}},
		{name: "acl|list", arity: 2, flags: flagsAdmin, run: (*loop).aclList,
			group: g, since: "6.0.0", complexity: "O(N). Where N is the number of configured users.",
			summary: "Dumps the effective rules in ACL file format.",
			help:    []string{"LIST", "    Show users details in config file format."}},
		{name: "acl|load", arity: 2, flags: flagsAdmin, run: (*loop).aclLoad,
			group: g, since: "6.0.0", complexity: "O(N). Where N is the number of configured users.",
			summary: "Reloads the rules from the configured ACL file.",
			help:    []string{"LOAD", "    Reload users from the ACL file."}},
		{name: "acl|log", arity: -2, flags: flagsAdmin, run: (*loop).aclLog,
			group: g, since: "6.0.0", complexity: "O(N) with N being the number of entries shown.",
			summary: "Lists recent security events generated due to commands rejected by ACL rules.",
			args: []argDoc{{name: "operation", typ: "oneof", optional: true, sub: []argDoc{
				{name: "count", typ: "integer"}, {name: "reset", typ: "pure-token", token: "RESET"}}}},
			help: []string{"LOG [<count> | RESET]", "    Show the ACL log entries."}},
		{name: "acl|save", arity: 2, flags: flagsAdmin, run: (*loop).aclSave,
			group: g, since: "6.0.0", complexity: "O(N). Where N is the number of configured users.",
			summary: "Saves the effective ACL rules in the configured ACL file.",
			help:    []string{"SAVE", "    Save the current config to the ACL file."}},
		{name: "acl|setuser", arity: -3, flags: flagsAdmin, run: (*loop).aclSetUser,
			group: g, since: "6.0.0", complexity: "O(N). Where N is the number of rules provided.",
			summary: "Creates and modifies an ACL user and its rules.",
			args:    []argDoc{{name: "username", typ: "string"}, {name: "rule", typ: "string", optional: true, multiple: true}},
			help: []string{"SETUSER <username> <attribute> [<attribute> ...]",
				"    Create or modify a user with the specified attributes."}},
		{name: "acl|users", arity: 2, flags: flagsAdmin, run: (*loop).aclUsers,
			group: g, since: "6.0.0", complexity: "O(N). Where N is the number of configured users.",
			summary: "Lists all ACL users.",
			help:    []string{"USERS", "    List all the registered usernames."}},
		{name: "acl|whoami", arity: 2, flags: flagNoScript | flagsAnyTime, run: (*loop).aclWhoAmI,
			group: g, since: "6.0.0", summary: "Returns the authenticated username of the current connection.",
			help: []string{"WHOAMI", "    Return the current connection username."}},
		helpSub("acl", "6.0.0", g, 0),
	}
}

// aclError replies with an ACL error (its prefix is the error code).
func (l *loop) aclError(err error) {
	if e, ok := err.(*acl.Error); ok {
		l.errorReply(e.Prefix, e.Msg)
		return
	}
	l.errorReply("ERR", err.Error())
}

// errSubSyntax replies as Redis does to a subcommand whose handler finds
// too many arguments.
func (l *loop) errSubSyntax(args [][]byte) {
	l.errQuoted("unknown subcommand or wrong number of arguments for ", args[1], 128, ". Try ACL HELP.")
}

// appendStrings appends an array of bulk strings.
func appendStrings(dst []byte, ss []string) []byte {
	dst = appendArray(dst, len(ss))
	for _, s := range ss {
		dst = appendBulkString(dst, s)
	}
	return dst
}

// ACL CAT [category]
func (l *loop) aclCat(_ *client, args [][]byte, _ int64) result {
	a := l.srv.sec.acl
	if len(args) == 2 {
		l.out = appendStrings(l.out, a.Categories())
		return replied
	}
	if len(args) > 3 {
		l.errSubSyntax(args)
		return failed
	}
	cmds, err := a.CategoryCommands(string(args[2]))
	if err != nil {
		l.aclError(err)
		return failed
	}
	l.out = appendStrings(l.out, cmds)
	return replied
}

// ACL DELUSER username [username ...]
func (l *loop) aclDelUser(_ *client, args [][]byte, _ int64) result {
	names := make([]string, len(args)-2)
	for i, a := range args[2:] {
		names[i] = string(a)
	}
	n, err := l.srv.sec.acl.DelUser(names...)
	if err != nil {
		l.aclError(err)
		return failed
	}
	l.out = appendInt(l.out, int64(n))
	return replied
}

// ACL DRYRUN username command [arg ...]
func (l *loop) aclDryRun(_ *client, args [][]byte, _ int64) result {
	sec := l.srv.sec
	name := string(args[2])
	if sec.acl.User(name) == nil {
		l.errorReply("ERR", "User '"+name+"' not found")
		return failed
	}
	cmdArgs := args[3:]
	sp := resolve(cmdArgs)
	if sp == nil || (sp.subs != nil && sp.run == nil && len(cmdArgs) > 1) {
		l.out = append(l.out, "-ERR Command '"...)
		l.out = appendSanitizedBytes(l.out, cmdArgs[0], 128)
		l.out = append(l.out, "' not found\r\n"...)
		l.ctr.errs[errKindERR]++
		return failed
	}
	if !arityOK(sp.arity, len(cmdArgs)) {
		l.errArity(sp.name)
		return failed
	}
	var buf [maxStackKeys]acl.KeyRef
	ref := sec.aclRefs[sp.stat]
	msg, err := sec.acl.DryRun(name, int(ref.cmd), int(ref.sub), cmdArgs, keyRefs(buf[:0], sp, cmdArgs))
	switch {
	case err != nil:
		l.aclError(err)
		return failed
	case msg != "":
		l.out = appendBulkString(l.out, msg)
	default:
		l.out = appendOK(l.out)
	}
	return replied
}

// ACL GETUSER username
func (l *loop) aclGetUser(cl *client, args [][]byte, _ int64) result {
	u := l.srv.sec.acl.User(string(args[2]))
	if u == nil {
		l.out = appendNull(l.out, cl.resp3)
		return replied
	}
	in := u.Info()
	r3 := cl.resp3
	l.out = appendMap(l.out, 6, r3)
	l.out = appendBulkString(l.out, "flags")
	l.out = resp.AppendSet(l.out, len(in.Flags), r3)
	for _, f := range in.Flags {
		l.out = appendBulkString(l.out, f)
	}
	l.out = appendBulkString(l.out, "passwords")
	l.out = appendStrings(l.out, in.Passwords)
	l.out = appendSelector(l.out, in.SelectorInfo)
	l.out = appendBulkString(l.out, "selectors")
	l.out = appendArray(l.out, len(in.Selectors))
	for _, s := range in.Selectors {
		l.out = appendMap(l.out, 3, r3)
		l.out = appendSelector(l.out, s)
	}
	return replied
}

// appendSelector appends the commands, keys and channels pairs of a
// selector.
func appendSelector(out []byte, s acl.SelectorInfo) []byte {
	out = appendBulkString(out, "commands")
	out = appendBulkString(out, s.Commands)
	out = appendBulkString(out, "keys")
	out = appendBulkString(out, s.Keys)
	out = appendBulkString(out, "channels")
	out = appendBulkString(out, s.Channels)
	return out
}

// ACL GENPASS [bits]
func (l *loop) aclGenPass(_ *client, args [][]byte, _ int64) result {
	bits := int64(256)
	switch len(args) {
	case 2:
	case 3:
		n, ok := parseInt64(args[2])
		if !ok {
			l.errNotInt()
			return failed
		}
		bits = n
	default:
		l.errSubSyntax(args)
		return failed
	}
	if bits <= 0 || bits > acl.GenPassMaxBits {
		l.aclError(acl.ErrGenPassBits)
		return failed
	}
	p, err := acl.GenPass(int(bits))
	if err != nil {
		l.errorReply("ERR", "cannot generate a password: "+err.Error())
		return failed
	}
	l.out = appendBulkString(l.out, p)
	return replied
}

// ACL LIST
func (l *loop) aclList(_ *client, _ [][]byte, _ int64) result {
	l.out = appendStrings(l.out, l.srv.sec.acl.List())
	return replied
}

// ACL LOAD: the users of the ACL file replace every user, or nothing
// changes.
func (l *loop) aclLoad(_ *client, _ [][]byte, _ int64) result {
	sec := l.srv.sec
	if sec.aclFile == "" {
		l.errorReply("ERR", errNoACLFile)
		return failed
	}
	if err := sec.loadFile(); err != nil {
		l.aclError(err)
		return failed
	}
	l.out = appendOK(l.out)
	return replied
}

// ACL SAVE
func (l *loop) aclSave(_ *client, _ [][]byte, _ int64) result {
	sec := l.srv.sec
	if sec.aclFile == "" {
		l.errorReply("ERR", errNoACLFile)
		return failed
	}
	if err := sec.saveFile(); err != nil {
		l.srv.log.Warn("ACL SAVE failed", "file", sec.aclFile, "err", err)
		l.errorReply("ERR", "There was an error trying to save the ACLs. Please check the server logs for more information")
		return failed
	}
	l.out = appendOK(l.out)
	return replied
}

// ACL LOG [count | RESET]
func (l *loop) aclLog(cl *client, args [][]byte, now int64) result {
	log := l.srv.sec.acl.Log()
	count := int64(10)
	switch len(args) {
	case 2:
	case 3:
		if equalFold(args[2], "reset") {
			log.Reset()
			l.out = appendOK(l.out)
			return replied
		}
		n, ok := parseInt64(args[2])
		if !ok {
			l.errNotInt()
			return failed
		}
		count = n
	default:
		l.errSubSyntax(args)
		return failed
	}
	entries := log.Entries(int(max(min(count, 1<<31), -1)), time.Unix(0, now))
	r3 := cl.resp3
	l.out = appendArray(l.out, len(entries))
	for _, e := range entries {
		l.out = appendMap(l.out, 10, r3)
		l.out = appendBulkString(l.out, "count")
		l.out = appendInt(l.out, e.Count)
		l.out = appendBulkString(l.out, "reason")
		l.out = appendBulkString(l.out, e.Reason.String())
		l.out = appendBulkString(l.out, "context")
		l.out = appendBulkString(l.out, e.Context.String())
		l.out = appendBulkString(l.out, "object")
		l.out = appendBulkString(l.out, e.Object)
		l.out = appendBulkString(l.out, "username")
		l.out = appendBulkString(l.out, e.Username)
		l.out = appendBulkString(l.out, "age-seconds")
		l.out = resp.AppendDouble(l.out, e.AgeSeconds, r3)
		l.out = appendBulkString(l.out, "client-info")
		l.out = appendBulkString(l.out, e.ClientInfo)
		l.out = appendBulkString(l.out, "entry-id")
		l.out = appendInt(l.out, e.EntryID)
		l.out = appendBulkString(l.out, "timestamp-created")
		l.out = appendInt(l.out, e.TimestampCreated)
		l.out = appendBulkString(l.out, "timestamp-last-updated")
		l.out = appendInt(l.out, e.TimestampLastUpdated)
	}
	return replied
}

// ACL SETUSER username [rule ...]
func (l *loop) aclSetUser(_ *client, args [][]byte, _ int64) result {
	rules := make([]string, len(args)-3)
	for i, a := range args[3:] {
		rules[i] = string(a)
	}
	if err := l.srv.sec.acl.SetUser(string(args[2]), rules...); err != nil {
		l.aclError(err)
		return failed
	}
	l.out = appendOK(l.out)
	return replied
}

// ACL USERS
func (l *loop) aclUsers(_ *client, _ [][]byte, _ int64) result {
	l.out = appendStrings(l.out, l.srv.sec.acl.Users())
	return replied
}

// ACL WHOAMI
func (l *loop) aclWhoAmI(cl *client, _ [][]byte, _ int64) result {
	l.out = appendBulkString(l.out, cl.userName())
	return replied
}
