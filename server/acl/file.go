package acl

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// DefaultFileName is the name Load uses in error messages when its reader
// has no Name method (an *os.File has one).
const DefaultFileName = "users.acl"

// Load replaces every user with the users of an ACL file in Redis's format:
// one "user <name> <rules...>" line per user, blank lines allowed, no
// comments. It is all-or-nothing: if any line is bad nothing changes and the
// error (code CodeLoad) lists every problem with the file name and line
// number in Redis's wording, ending with "WARNING: ACL errors detected, no
// change to the previously active ACL rules was performed". A file without
// a "default" line gets a fresh default user (on nopass ~* &* +@all), as in
// Redis. Every previous user becomes stale; connections refresh by name.
func (a *ACL) Load(r io.Reader) error {
	name := DefaultFileName
	if n, ok := r.(interface{ Name() string }); ok {
		name = n.Name()
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return errorf(CodeLoad, "Error loading ACLs, reading file '%s': %v", name, err)
	}
	users := make(map[string]*User)
	var errs strings.Builder
	for i, line := range strings.Split(string(data), "\n") {
		lineno := i + 1
		line = strings.Trim(line, " \t\r\n")
		if line == "" {
			continue
		}
		argv := strings.Split(line, " ")
		if argv[0] != "user" || len(argv) < 2 {
			fmt.Fprintf(&errs, "%s:%d should start with user keyword followed by the username. ", name, lineno)
			continue
		}
		uname := argv[1]
		if hasSpace(uname) {
			fmt.Fprintf(&errs, "'%s:%d: username '%s' contains invalid characters. ", name, lineno, uname)
			continue
		}
		if users[uname] != nil {
			fmt.Fprintf(&errs, "WARNING: Duplicate user '%s' found on line %d. ", uname, lineno)
			continue
		}
		u := newUser(a.t, uname)
		users[uname] = u
		ops, open := mergeSelectors(argv[2:])
		if open >= 0 {
			fmt.Fprintf(&errs, "%s:%d: Unmatched parenthesis in selector definition.", name, lineno)
			continue
		}
		syntaxErr := false
		for _, op := range ops {
			op = strings.Trim(op, "\t\r\n")
			e := u.apply(op)
			switch {
			case e == nil:
			case e.Code == CodeUnknownName:
				fmt.Fprintf(&errs, "%s:%d: Error in applying operation '%s': %s. ", name, lineno, op, e.Msg)
			case !syntaxErr:
				fmt.Fprintf(&errs, "%s:%d: %s. ", name, lineno, e.Msg)
				syntaxErr = true
			}
		}
	}
	if errs.Len() > 0 {
		errs.WriteString("WARNING: ACL errors detected, no change to the previously active ACL rules was performed")
		return &Error{Code: CodeLoad, Prefix: "ERR", Msg: errs.String()}
	}
	if users[DefaultUser] == nil {
		users[DefaultUser] = a.newDefaultUser()
	}
	a.mu.Lock()
	a.replaceAll(users)
	a.mu.Unlock()
	return nil
}

// Save writes every user as an ACL file line ("user <name> <rules>"), in
// name order, from one consistent snapshot. Load reads it back to the same
// users.
func (a *ACL) Save(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, line := range a.List() {
		bw.WriteString(line)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}
