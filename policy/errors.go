package policy

import (
	"strconv"
)

// Code identifies why a configuration was rejected or a lookup failed.
// Codes are stable and never renumbered.
type Code uint8

// Error codes.
const (
	CodeIO                  Code = iota + 1 // the file or directory could not be read
	CodeSyntax                              // not YAML
	CodeUnknownKey                          // a key the format does not have
	CodeType                                // a value of the wrong type
	CodeDomain                              // a missing or empty domain
	CodeDuplicateDomain                     // a domain defined by two files
	CodeKey                                 // a descriptor without a key
	CodeDuplicateDescriptor                 // two descriptors with the same key and value at one level
	CodeUnit                                // a missing or unknown unit, or a unit beside unlimited or period
	CodeRate                                // a limit the engine cannot represent
	CodeReplaces                            // an empty replaces name, or a rule replacing itself
	CodeShareThreshold                      // share_threshold on a value without '*'
	CodeAlgorithm                           // an unknown algorithm
	CodeBurst                               // a burst that does not apply or is not positive
	CodePeriod                              // a period that is not a positive duration
	CodeMode                                // an unknown mode, or a mode without a rate_limit
	CodeUnknownDomain                       // Lookup: no such domain
	CodeUnknownName                         // Lookup: no rule of that name
	CodeAmbiguousName                       // Lookup: several rules of that name
)

// Error is a configuration or lookup error. For configuration errors File,
// Line and Path say where: the file, the line of the offending YAML node and
// the descriptor path ("domain/key=value/key2").
type Error struct {
	Code Code
	File string
	Line int
	Path string
	Msg  string
}

// Error formats the error as "file:line: path: message", leaving out the
// parts that are unknown.
func (e *Error) Error() string {
	s := ""
	if e.File != "" {
		s = e.File
		if e.Line > 0 {
			s += ":" + strconv.Itoa(e.Line)
		}
		s += ": "
	}
	if e.Path != "" {
		s += e.Path + ": "
	}
	return s + e.Msg
}

// Is matches errors by Code, so errors.Is(err, ErrUnknownName) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.File == "" && t.Path == ""
}

// Lookup errors; compare with errors.Is.
var (
	ErrUnknownDomain = &Error{Code: CodeUnknownDomain, Msg: "unknown policy domain"}
	ErrUnknownName   = &Error{Code: CodeUnknownName, Msg: "unknown policy name"}
	ErrAmbiguousName = &Error{Code: CodeAmbiguousName, Msg: "policy name is given to several rate limits of the domain"}
)
