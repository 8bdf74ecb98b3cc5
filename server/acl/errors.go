package acl

import "fmt"

// Code is the stable machine-readable identity of an ACL error. Codes never
// change meaning; messages follow the wording of Redis 7.0 (the redis-server
// the tests compare with byte for byte) and may be refined.
type Code int

// Error codes. Each has a matching sentinel error (ErrSyntax, ...) usable
// with errors.Is.
const (
	CodeSyntax          Code = iota + 1 // malformed rule: "Syntax error"
	CodeUnknownName                     // unknown command or category in a rule
	CodeKeyAfterAll                     // key pattern after allkeys
	CodeChannelAfterAll                 // channel pattern after allchannels
	CodeNoSuchPassword                  // "<pass" or "!hash" of a password the user lacks
	CodeBadHash                         // "#hash" or "!hash" that is not 64 lowercase hex digits
	CodeFirstArgOfSub                   // "+cmd|sub|arg": first-arg of a subcommand
	CodeUnmatchedParen                  // selector "(" without ")"
	CodeBadUsername                     // user name with spaces or NUL bytes
	CodeDefaultUser                     // attempt to delete the default user
	CodeNoSuchUser                      // DRYRUN of an unknown user
	CodeUnknownCategory                 // ACL CAT of an unknown category
	CodeGenPassBits                     // ACL GENPASS bits out of range
	CodeLoad                            // an ACL file with errors (nothing was loaded)
	CodeWrongPass                       // failed authentication
	CodeNoAuth                          // command before authentication
	CodeNoPerm                          // command or key denied
	CodeTable                           // invalid command table given to New
)

// Error is an ACL error. Its Error method returns the reply text with its
// RESP error prefix (ERR, WRONGPASS, NOAUTH, NOPERM), ready to be written
// after a '-'.
type Error struct {
	Code   Code
	Prefix string // RESP error code word: "ERR", "WRONGPASS", "NOAUTH", "NOPERM"
	Msg    string
}

// Error returns "<Prefix> <Msg>".
func (e *Error) Error() string { return e.Prefix + " " + e.Msg }

// Is reports whether target is an *Error with the same Code, so that
// errors.Is(err, acl.ErrSyntax) holds for every syntax error whatever its text.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Reply texts (without the leading '-') that the server writes verbatim.
const (
	// NoAuthReply is the reply to any command but AUTH/HELLO before authentication.
	NoAuthReply = "NOAUTH Authentication required."
	// WrongPassReply is the reply to a failed AUTH or HELLO AUTH.
	WrongPassReply = "WRONGPASS invalid username-password pair or user is disabled."
	// AuthNoPasswordReply is the reply to the one-argument AUTH <password>
	// while the default user is nopass.
	AuthNoPasswordReply = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	// NoPermKeyReply is the reply when a key of the command is denied, in
	// Redis 7.0's words (7.2 says "No permissions to access a key").
	NoPermKeyReply = "NOPERM this user has no permissions to access one of the keys used as arguments"
	// NoPermChannelReply is the reply when a channel is denied, in Redis
	// 7.0's words (7.2 says "No permissions to access a channel").
	NoPermChannelReply = "NOPERM this user has no permissions to access one of the channels used as arguments"
	// noPermChangedReply starts the reply to a queued command that its
	// user may no longer run when EXEC runs it (ExecDenyReply).
	noPermChangedReply = "NOPERM ACLs rules changed between the moment the transaction was accumulated and the EXEC call. " +
		"This command is no longer allowed for the following reason: "
)

// Sentinel errors, one per Code; compare with errors.Is.
var (
	ErrSyntax          = &Error{Code: CodeSyntax, Prefix: "ERR", Msg: "Syntax error"}
	ErrUnknownName     = &Error{Code: CodeUnknownName, Prefix: "ERR", Msg: "Unknown command or category name in ACL"}
	ErrKeyAfterAll     = &Error{Code: CodeKeyAfterAll, Prefix: "ERR", Msg: msgKeyAfterAll}
	ErrChannelAfterAll = &Error{Code: CodeChannelAfterAll, Prefix: "ERR", Msg: msgChannelAfterAll}
	ErrNoSuchPassword  = &Error{Code: CodeNoSuchPassword, Prefix: "ERR", Msg: msgNoSuchPassword}
	ErrBadHash         = &Error{Code: CodeBadHash, Prefix: "ERR", Msg: msgBadHash}
	ErrFirstArgOfSub   = &Error{Code: CodeFirstArgOfSub, Prefix: "ERR", Msg: "Allowing first-arg of a subcommand is not supported"}
	ErrUnmatchedParen  = &Error{Code: CodeUnmatchedParen, Prefix: "ERR", Msg: "Unmatched parenthesis in acl selector"}
	ErrBadUsername     = &Error{Code: CodeBadUsername, Prefix: "ERR", Msg: "Usernames can't contain spaces or null characters"}
	ErrDefaultUser     = &Error{Code: CodeDefaultUser, Prefix: "ERR", Msg: "The 'default' user cannot be removed"}
	ErrNoSuchUser      = &Error{Code: CodeNoSuchUser, Prefix: "ERR", Msg: "User not found"}
	ErrUnknownCategory = &Error{Code: CodeUnknownCategory, Prefix: "ERR", Msg: "Unknown category"}
	ErrGenPassBits     = &Error{Code: CodeGenPassBits, Prefix: "ERR", Msg: fmt.Sprintf("ACL GENPASS argument must be the number of bits for the output password, a positive number up to %d", GenPassMaxBits)}
	ErrLoad            = &Error{Code: CodeLoad, Prefix: "ERR", Msg: "ACL file has errors"}
	ErrWrongPass       = &Error{Code: CodeWrongPass, Prefix: "WRONGPASS", Msg: "invalid username-password pair or user is disabled."}
	ErrNoAuth          = &Error{Code: CodeNoAuth, Prefix: "NOAUTH", Msg: "Authentication required."}
	ErrNoPerm          = &Error{Code: CodeNoPerm, Prefix: "NOPERM", Msg: "No permissions"}
	ErrTable           = &Error{Code: CodeTable, Prefix: "ERR", Msg: "invalid command table"}
)

const (
	msgKeyAfterAll = "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. " +
		"Try 'resetkeys' to start with an empty list of patterns"
	msgChannelAfterAll = "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. " +
		"Try 'resetchannels' to start with an empty list of channels"
	msgNoSuchPassword = "The password you are trying to remove from the user does not exist"
	msgBadHash        = "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters"
)

// errorf returns an ERR *Error with code c and a formatted message.
func errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Prefix: "ERR", Msg: fmt.Sprintf(format, args...)}
}

// wrapRule wraps the failure base of one rule op in Redis's
// "Error in ACL SETUSER modifier '<op>': <reason>" form, keeping base's Code.
func wrapRule(base *Error, op string) *Error {
	return errorf(base.Code, "Error in ACL SETUSER modifier '%s': %s", op, base.Msg)
}
