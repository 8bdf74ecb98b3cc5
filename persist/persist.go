package persist

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/throttlekit/throttlekit-server/engine"
)

// Record is one key's durable state: the key, its engine state and its
// absolute expiry in nanoseconds since the Unix epoch. The zero State with
// ExpireAt 0 is a tombstone: the key was deleted and its row must go.
type Record struct {
	Key      []byte
	State    engine.State
	ExpireAt int64
}

// Tombstone reports whether r deletes its key rather than storing a state.
func (r *Record) Tombstone() bool { return r.State == (engine.State{}) }

// Backend is a durable table of Records. A Persister is its only writer in a
// process; Open makes sure no other process writes the same table.
//
// Write stores the upserts and applies the tombstones of recs; the keys of
// one call are distinct. It either succeeds for every record or returns an
// error, after which the caller must assume any subset was written and send
// them again (a write is idempotent). Load calls fn once per stored key whose
// expiry is after now, in no particular order; fn's key is valid only during
// the call, and an error from fn stops the load and is returned. Expire
// removes rows whose expiry is at or before now and returns how many it
// removed. Close releases the table for another server.
type Backend interface {
	Name() string
	Load(ctx context.Context, now int64, fn func(key []byte, st engine.State, expireAt int64) error) error
	Write(ctx context.Context, recs []Record) error
	Expire(ctx context.Context, now int64) (int64, error)
	Close() error
}

// Error codes carried by *Error. They are stable: match on them, not on the
// message.
const (
	CodeBadURL  = "BADURL"  // the URL names no backend or has a bad parameter
	CodeInUse   = "INUSE"   // another server holds the table's writer lock or lease
	CodeBackend = "BACKEND" // the backend failed (network, server, throttling)
	CodeClosed  = "CLOSED"  // the Persister or Backend was closed
)

// Error is an error of this package. Error() is "persist: " followed by Msg
// and, when there is one, the cause.
type Error struct {
	Code string
	Msg  string
	Err  error
}

// Error returns "persist: " + Msg, then ": " and the cause if there is one.
func (e *Error) Error() string {
	if e.Err != nil {
		return "persist: " + e.Msg + ": " + e.Err.Error()
	}
	return "persist: " + e.Msg
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error by Code, so errors.Is(err, &Error{Code: CodeInUse})
// works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Msg == "" && t.Err == nil
}

// ErrInUse matches (with errors.Is) the error of opening a table another
// server writes.
var ErrInUse = &Error{Code: CodeInUse}

// ErrClosed matches (with errors.Is) the error of using a closed Backend or
// Persister.
var ErrClosed = &Error{Code: CodeClosed}

// CodeOf returns the Code of the first *Error in err's chain, or "" when
// there is none.
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func inUse(table string) error {
	return &Error{Code: CodeInUse, Msg: fmt.Sprintf("table %q is in use by another server", table)}
}

func backendErr(msg string, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	return &Error{Code: CodeBackend, Msg: msg, Err: err}
}

func badURL(format string, args ...any) error {
	return &Error{Code: CodeBadURL, Msg: fmt.Sprintf(format, args...)}
}

// DefaultTable is the table name used when the URL names none.
const DefaultTable = "throttlekit_state"

// Options tunes Open. The zero Options is ready to use.
type Options struct {
	// Owner identifies this server as the table's writer (the DynamoDB
	// lease owner; Postgres uses its own session). "" means host name,
	// process id and a random suffix.
	Owner string
	// LeaseTTL is how long a DynamoDB writer lease lasts without renewal;
	// it is renewed every LeaseTTL/3. 0 means 30 s.
	LeaseTTL time.Duration
	// Now returns the wall-clock time in Unix nanoseconds, for lease
	// expiry. nil means time.Now.
	Now func() int64
}

func (o *Options) now() int64 {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now().UnixNano()
}

// Open connects to the backend the URL names and takes the table's writer
// lock:
//
//	postgres://user:pass@host:5432/db?table=NAME&write=unnest|copy&journal=on|off&fold=1s&sslmode=...
//	postgresql://...                 (the same)
//	dynamodb://TABLE?region=REGION&endpoint=http://host:port&segments=N
//
// journal=on (the default) makes each Postgres write one row of a journal
// table, folded into the state table every fold period (see the package
// doc); journal=off writes the state rows directly. Parameters other than
// table, write, journal and fold in a postgres URL go to pgx as usual. A DynamoDB URL without region or endpoint takes them from the
// standard AWS chain (environment, shared config, instance role). The table
// is created when absent. A table another server writes yields an error
// matching ErrInUse.
func Open(ctx context.Context, rawURL string, opts Options) (Backend, error) {
	t, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if t.pg != nil {
		return openPostgres(ctx, *t.pg, opts)
	}
	return openDynamo(ctx, *t.dyn, opts)
}

// target is a parsed backend URL: exactly one field is set.
type target struct {
	pg  *pgConfig
	dyn *dynConfig
}

// parseURL validates a backend URL without touching the network.
func parseURL(rawURL string) (target, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return target{}, badURL("bad URL: %v", err)
	}
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql":
		cfg, err := parsePostgresURL(u)
		if err != nil {
			return target{}, err
		}
		return target{pg: &cfg}, nil
	case "dynamodb":
		cfg, err := parseDynamoURL(u)
		if err != nil {
			return target{}, err
		}
		return target{dyn: &cfg}, nil
	case "":
		return target{}, badURL("URL %q has no scheme (postgres://, postgresql:// or dynamodb://)", redact(u))
	default:
		return target{}, badURL("unknown scheme %q (postgres://, postgresql:// or dynamodb://)", u.Scheme)
	}
}

// redact returns u as a string with any password hidden.
func redact(u *url.URL) string { return u.Redacted() }

// validTable reports whether name is a table name we accept: 3-48 bytes of
// ASCII letters, digits and '_', not starting with a digit (valid unquoted
// in SQL with room for an index name suffix, and valid in DynamoDB).
func validTable(name string) bool {
	if len(name) < 3 || len(name) > 48 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
